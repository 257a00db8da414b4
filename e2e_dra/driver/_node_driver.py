"""What the suite asks of every driver on a node, e2e-dra's own plugin or a real one."""

from __future__ import annotations

from typing import Any, Protocol

from e2e_dra.driver._calls import CallLog


class NodeDriver(Protocol):
    """A driver the suite sets up for a subtest, waits for after every restart, and stops.

    :class:`~e2e_dra.driver.Driver` (in this process, every call seen) and
    :class:`~e2e_dra.driver.ProcessDriver` (a program of its own, seen from outside) are two.
    """

    name: str
    node_name: str

    @property
    def calls(self) -> CallLog | None:
        """The gRPC calls it answered, when they can be seen."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wait_registered(self, timeout: float = 60) -> None: ...

    def wait_for_slices(self, timeout: float = 300) -> None: ...

    def prepared_claims(self) -> list[Any]: ...

    def take_dropped_fields(self) -> list[str]: ...

    def take_publish_errors(self, grace: float = ...) -> list[str]: ...

    def take_protocol_findings(self) -> list[str]: ...
