"""resource-health: the device health a driver streams to the kubelet shows in pod status in
every phase, through whichever health service version each kubelet picks.

The driver serves ``DRAResourceHealth`` v1, v1beta1 and v1alpha1; a 1.36 kubelet only knows
v1alpha1, a 1.37 kubelet prefers v1. A restarted kubelet opens a new stream to the same driver,
and the pod, which keeps running, must show the current health again: Healthy, then Unhealthy
(with the driver's message) after the driver flips the device, then Healthy again. Right after
a restart the first Healthy may still be what the previous kubelet wrote; the flip to Unhealthy
is what proves the new kubelet streams.

The pod keeps running untouched across both restarts, checked first thing after each: the same
pod, its container neither restarted nor replaced since the end of the phase before (after that
phase's health flips, so a flip cannot be blamed on the restart), its claim still reserved for it
and its device still in its environment.

Each kubelet must pick the service its release negotiates (pkg/kubelet/cm/dra/plugin: from 1.37
v1 first, v1alpha1 only before) and open no stream on another version; the service is recorded
as a fact of the phase (summary.json).
"""

from __future__ import annotations

from e2e_dra.builder import is_allocated
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import devices_per_node, kubelet_version, running, still_untouched
from e2e_dra.versions import matches
from e2e_dra.waits import eventually

HEALTH_TIMEOUT = 60.0
WATCH_METHOD = "/NodeWatchResources"
POD_CLAIM = "resource-claim"  # Builder.pod_external's name for the claim in the pod spec
DEVICE = "device-00"  # devices_per_node(1): one pool per node, named after it
UNHEALTHY_MESSAGE = "e2e-dra: flipped by resource-health"
# The health service each kubelet release picks from what the driver offers (all three).
HEALTH_SERVICES = {
    ">=1.37.0-alpha.0": "v1.DRAResourceHealth",
    "<1.37.0-alpha.0": "v1alpha1.DRAResourceHealth",
}


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claim = b.external_claim()
    pod = b.pod_external(claim["metadata"]["name"])
    # The device starts Healthy: one the driver never mentioned would be Unknown.
    for node in ctx.nodes:
        ctx.driver.set_health(node, DEVICE, "Healthy")
    b.create(claim, pod)
    b.test_pod(pod)
    allocated = eventually(
        lambda: b.get("resourceclaims", claim["metadata"]["name"]),
        what="the claim to be allocated",
        timeout=30,
        until=is_allocated,
    )
    (result,) = allocated["status"]["allocation"]["devices"]["results"]
    pool, device = result["pool"], result["device"]
    pod_name = pod["metadata"]["name"]
    claim_name = claim["metadata"]["name"]

    def cycle(ctx: Context, since: int) -> int:
        """The phase's checks; the driver's calls from ``since`` on are this phase's. Returns
        where the next phase's calls begin."""
        kubelet = kubelet_version(ctx.builder, ctx.nodes[0])
        (want,) = [name for spec, name in HEALTH_SERVICES.items() if matches(spec, kubelet)]
        with ctx.step(f"the kubelet ({kubelet}) watches device health through {want} only"):
            service = _health_service(ctx)
            opened = _streams_opened(ctx, since)
            ctx.log(f"{ctx.phase}: the kubelet watches device health through {service}")
            ctx.facts[f"health_service/{ctx.phase}"] = service
            assert service == want and set(opened) <= {want}, (
                f"kubelet {kubelet} watches device health through {service}, want {want}; "
                f"streams opened this phase: {opened}"
            )
        with ctx.step("pod status shows the device Healthy"):
            _wait_health(ctx, pod_name, "Healthy")
        with ctx.step("pod status follows the device to Unhealthy"):
            ctx.driver.set_health(pool, device, "Unhealthy", UNHEALTHY_MESSAGE)
            _wait_health(ctx, pod_name, "Unhealthy", UNHEALTHY_MESSAGE)
        with ctx.step("pod status follows the device back to Healthy"):
            ctx.driver.set_health(pool, device, "Healthy")
            _wait_health(ctx, pod_name, "Healthy")
        return len(ctx.driver.calls.records)

    upgraded_since = cycle(ctx, 0)
    before_upgrade = running(b, pod_name)

    def after_upgrade(ctx: Context) -> Phase:
        with ctx.step(f"pod {pod_name} runs untouched"):
            still_untouched(ctx.builder, before_upgrade, [claim_name])
        ctx.builder.wait_running(pod_name)
        downgraded_since = cycle(ctx, upgraded_since)
        before_downgrade = running(ctx.builder, pod_name)

        def after_downgrade(ctx: Context) -> None:
            with ctx.step(f"pod {pod_name} runs untouched"):
                still_untouched(ctx.builder, before_downgrade, [claim_name])
            ctx.builder.wait_running(pod_name)
            cycle(ctx, downgraded_since)
            ctx.builder.delete_pod_and_wait(pod_name)

        return after_downgrade

    return after_upgrade


def _health_service(ctx: Context) -> str:
    """The health service of the one stream the current kubelet keeps open.

    Not "the stream after the newest registration": a 1.37 kubelet opens its stream between
    GetInfo and NotifyRegistrationStatus. A restarted kubelet's old stream ends with its
    connection (the driver notices within one resend period), so one open stream is left.
    """

    def open_streams() -> list[str]:
        return [
            call.method.removesuffix(WATCH_METHOD).lstrip("/")
            for call in ctx.driver.calls.records
            if call.method.endswith(WATCH_METHOD) and not call.done
        ]

    streams = eventually(
        open_streams,
        what="the kubelet to watch device health through one stream",
        timeout=HEALTH_TIMEOUT,
        until=lambda streams: len(streams) == 1,
    )
    return streams[0]


def _streams_opened(ctx: Context, since: int) -> list[str]:
    """The health service of every stream the kubelet opened from call ``since`` on."""
    return [
        call.method.removesuffix(WATCH_METHOD).lstrip("/")
        for call in ctx.driver.calls.records[since:]
        if call.method.endswith(WATCH_METHOD)
    ]


def _wait_health(ctx: Context, pod_name: str, health: str, message: str | None = None) -> None:
    """Until the pod's container reports the claim's one device with ``health``."""
    want = [(health, message)]
    eventually(
        lambda: _claim_health(ctx.builder.read_pod(pod_name)),
        what=f"pod {pod_name} to report its device {health}",
        timeout=HEALTH_TIMEOUT,
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


SUBTEST = Subtest(
    name="resource-health",
    initial=initial,
    resources=devices_per_node(1),
    # Beta and on by default since 1.36 (v1.36.5, v1.37.2); it needs DynamicResourceAllocation.
    feature_gates=("ResourceHealthStatus",),
    releases=">=1.36",
)
