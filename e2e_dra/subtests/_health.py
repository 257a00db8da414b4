"""Device health as the kubelet shows it in pod status, and the health streams a driver sees:
what the resource-health subtests share."""

from __future__ import annotations

from collections.abc import Callable

from e2e_dra.subtest import Context
from e2e_dra.waits import eventually

HEALTH_TIMEOUT = 60.0
WATCH_METHOD = "/NodeWatchResources"
POD_CLAIM = "resource-claim"  # Builder.pod_external's name for the claim in the pod spec
DEVICE = "device-00"  # devices_per_node(1): one pool per node, named after it
UNHEALTHY_MESSAGE = "e2e-dra: flipped by resource-health"


def health_stream(ctx: Context) -> tuple[int, str]:
    """The one stream the current kubelet keeps open: where it is in the driver's calls, and
    its health service.

    Not "the stream after the newest registration": a 1.37 kubelet opens its stream between
    GetInfo and NotifyRegistrationStatus. A restarted kubelet's old stream ends with its
    connection (the driver notices within one resend period), so one open stream is left.
    """

    open_streams = eventually(
        lambda: [(index, service) for index, service, done in streams(ctx) if not done],
        what="the kubelet to watch device health through one stream",
        timeout=HEALTH_TIMEOUT,
        until=lambda found: len(found) == 1,
    )
    return open_streams[0]


def streams(ctx: Context) -> list[tuple[int, str, bool]]:
    """Every health stream in the driver's calls: where it is, its service, whether it ended."""
    return [
        (index, call.method.removesuffix(WATCH_METHOD).lstrip("/"), call.done)
        for index, call in enumerate(ctx.driver.calls.records)
        if call.method.endswith(WATCH_METHOD)
    ]


def wait_health(
    ctx: Context,
    pod_name: str,
    health: str,
    message: str | None = None,
    *,
    device: str,
    timeout: float = HEALTH_TIMEOUT,
    detail: str = "",
    between: Callable[[], None] | None = None,
) -> None:
    """Until the pod's container reports the claim's one device (``device``, pool/name, named in
    what a timeout says) with ``health`` (and ``message``, None: none); ``detail`` is added to
    what a timeout says it waited for. ``between`` is called after each look that did not see
    it: what makes the kubelet write the pod's status again."""
    want = [(health, message)]

    def look() -> list[tuple[str, str | None]]:
        seen = _claim_health(ctx.builder.read_pod(pod_name))
        if seen != want and between is not None:
            between()
        return seen

    eventually(
        look,
        what=f"pod {pod_name} to report device {device} {health}{detail}",
        timeout=timeout,
        poll=1.0,
        until=lambda seen: seen == want,
    )


def _claim_health(pod: dict) -> list[tuple[str, str | None]]:
    """(health, message) of every device of the claim in the pod's container status."""
    return [
        (resource.get("health"), resource.get("message"))
        for status in pod.get("status", {}).get("containerStatuses") or []
        for entry in status.get("allocatedResourcesStatus") or []
        if entry.get("name") == f"claim:{POD_CLAIM}"
        for resource in entry.get("resources") or []
    ]
