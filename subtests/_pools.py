"""Driver resources that several subtests publish."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from e2e_dra.driver import Pool, node_devices


def devices_per_node(count: int) -> Callable[[Sequence[str]], list[Pool]]:
    """Upstream's DriverResourcesNow(nodes, count): on each node a pool named after the node
    with one slice of devices ``device-00`` .. ``device-<count-1>``."""

    def resources(nodes: Sequence[str]) -> list[Pool]:
        return [pool for node in nodes for pool in node_devices(node, count)]

    return resources
