"""What several subtests share beyond the builder: the driver's device pools, the API versions
they name, and a claim with the pod that uses it.

A subtest module imports this and the builder, never another subtest module: each reads on its
own, as upstream's do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from e2e_dra.builder import RESOURCE_V1, SCHEDULING_V1BETA1, Builder
from e2e_dra.driver import Pool, node_devices

__all__ = [
    "CLAIMS_VERSIONS",
    "RESOURCE_V1",
    "RESOURCE_V1BETA1",
    "RESOURCE_V1BETA2",
    "SCHEDULING_V1BETA1",
    "claim_and_pod",
    "devices_per_node",
]

RESOURCE_V1BETA1 = "resource.k8s.io/v1beta1"
RESOURCE_V1BETA2 = "resource.k8s.io/v1beta2"

CLAIMS_VERSIONS = {
    "<1.38.0-alpha.0": RESOURCE_V1BETA1,
    ">=1.38.0-alpha.0": RESOURCE_V1BETA2,
}
"""The oldest version of ResourceClaims a release serves, by release (for
``Builder.api_version_by_release``): upstream uses v1beta1, which 1.38 no longer serves."""


def devices_per_node(count: int) -> Callable[[Sequence[str]], list[Pool]]:
    """Upstream's DriverResourcesNow(nodes, count): on each node a pool named after the node
    with one slice of devices ``device-00`` .. ``device-<count-1>``."""

    def resources(nodes: Sequence[str]) -> list[Pool]:
        return [pool for node in nodes for pool in node_devices(node, count)]

    return resources


def claim_and_pod(b: Builder, claim: dict | None = None) -> tuple[dict, dict]:
    """``claim`` (by default: the next external claim) and a pod that uses it, not created."""
    claim = b.external_claim() if claim is None else claim
    return claim, b.pod_external(claim["metadata"]["name"])
