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

Each kubelet must also give up on a device its driver stops reporting: Unknown in pod status,
then Healthy again once the driver reports it. The kubelet (pkg/kubelet/cm/dra/healthinfo.go,
alike in 1.36.5, 1.37.2 and 1.38.0-beta.0) keeps, per device, when it last received it and its
health check timeout: the one the driver sent with it, else ``DefaultHealthTimeout`` (30 s).
Each list the stream brings marks a device missing from it for longer than its timeout Unknown
and re-syncs the pods that use it at once (``updateHealthInfo``; 1.36 keeps the entry as
Unknown, 1.37 and later drop it, which reads as Unknown too). So the driver keeps its stream
open and its 2 s re-sends going, but leaves the device out after one last report that carries a
5 s timeout (waiting out the 30 s default would add half a minute to every phase). Pod status
must show Unknown no sooner than 5 s later (sooner: the kubelet did not wait for the timeout)
and within 20 s (later: it ignored the device's timeout for its 30 s default). A stream that
falls silent altogether would not do: a device whose timeout passes while no list arrives reads
Unknown only when its pod is next synced for some other reason, and a running pod is re-synced
every 60 to 90 s (``syncFrequency`` 1 min, jitter 0.5).

Each kubelet must also give up on a driver whose plugin stops (upstream's node e2e test "should
update health to Unknown when plugin stops and recover upon restart"). The driver stops serving
(``Driver.unregistered``): its health stream ends and its sockets go. The kubelet, alike in 1.36.0
to 1.36.5, 1.37.0 to 1.37.2 and 1.38.0-beta.0, drops all of that driver's health when the stream
ends (``HandleWatchResourcesStream`` clears it, ``clearDriver``), and unregisters the plugin (which
cancels the stream, if it still ran). No timeout is involved: a device of a driver the kubelet holds
no health of reads Unknown at once. But nothing re-syncs the pod then (only a list that changes a
device does), so pod status would show Unknown only at the pod's periodic re-sync, 60 to 90 s later
(upstream's test waits up to 2 min). What this proves is what the kubelet writes at the pod's next
sync, not how long it takes to get there, so the step nudges the pod (a changed annotation is a pod
update, which the kubelet syncs at once; ``subtest_kit.nudge``) every 2 s until pod status shows
Unknown, which must take less than 20 s: a kubelet that kept the stopped driver's health until the
device's timeout (the kubelet's default, 30 s, from the last re-send at most 2 s before the stop)
fails. The plugin then serves again, as a restarted one: the kubelet must register it anew, watch
its health through the same service as before, and pod status must show the device Healthy again
(the new stream's first list re-syncs the pod), so that the next phase starts where this one did.
The driver is served again whatever happens meanwhile: the pod's claim can only be unprepared
through it.

Where the kubelet still has the stream it had in the phase before (control-plane-first never
restarts it), that same kubelet proved both kinds of Unknown there and neither step is repeated.
"""

from __future__ import annotations

import itertools
import time

from e2e_dra.builder import is_allocated
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    devices_per_node,
    kubelet_version,
    nudge,
    older_writes_hold,
    running,
    still_untouched,
)
from e2e_dra.subtests._health import (
    DEVICE,
    UNHEALTHY_MESSAGE,
    health_stream,
    streams,
    wait_health,
)
from e2e_dra.versions import matches
from e2e_dra.waits import eventually

# The health check timeout the driver sends with the device's last report before it falls
# silent about it, and how soon the kubelet must mark it Unknown: less than the kubelet's own
# DefaultHealthTimeout, so that a kubelet ignoring the device's timeout fails.
SILENT_TIMEOUT = 5
KUBELET_DEFAULT_HEALTH_TIMEOUT = 30.0
UNKNOWN_WITHIN = 20.0
# How soon pod status must show the device Unknown once the driver's plugin stopped, the pod
# nudged every NUDGE_EVERY seconds meanwhile: sooner than a kubelet that kept the stopped
# driver's health until the device timed out (its default timeout, from the last re-send) would.
UNKNOWN_AFTER_STOP_WITHIN = 20.0
NUDGE_EVERY = 2.0
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
    where = f"{pool}/{device}"
    pod_name = pod["metadata"]["name"]
    claim_name = claim["metadata"]["name"]

    def cycle(ctx: Context, since: int) -> int:
        """The phase's checks; the driver's calls from ``since`` on are this phase's. Returns
        where the next phase's calls begin."""
        kubelet = kubelet_version(ctx.builder, ctx.nodes[0])
        (want,) = [name for spec, name in HEALTH_SERVICES.items() if matches(spec, kubelet)]
        with ctx.step(f"the kubelet ({kubelet}) watches device health through {want} only"):
            stream, service = health_stream(ctx)
            opened = _streams_opened(ctx, since)
            ctx.log(f"{ctx.phase}: the kubelet watches device health through {service}")
            ctx.facts[f"health_service/{ctx.phase}"] = service
            assert service == want and set(opened) <= {want}, (
                f"kubelet {kubelet} watches device health through {service}, want {want}; "
                f"streams opened this phase: {opened}"
            )
        with ctx.step("pod status shows the device Healthy"):
            wait_health(ctx, pod_name, "Healthy", device=where)
        with ctx.step("pod status follows the device to Unhealthy"):
            ctx.driver.set_health(pool, device, "Unhealthy", UNHEALTHY_MESSAGE)
            wait_health(ctx, pod_name, "Unhealthy", UNHEALTHY_MESSAGE, device=where)
        with ctx.step("pod status follows the device back to Healthy"):
            ctx.driver.set_health(pool, device, "Healthy")
            wait_health(ctx, pod_name, "Healthy", device=where)
        if stream < since:
            why = "the kubelet kept its health stream from the phase before, which proved it"
            ctx.log(f"{ctx.phase}: Unknown after silence or a stop not checked again: {why}")
            ctx.facts[f"health_unknown_after/{ctx.phase}"] = why
            ctx.facts[f"health_unknown_after_stop/{ctx.phase}"] = why
            return len(ctx.driver.calls.records)
        with ctx.step(
            f"pod status turns Unknown once the driver stops reporting the device "
            f"past its {SILENT_TIMEOUT} s timeout"
        ):
            elapsed = _unknown_when_silent(ctx, pod_name, pool, device)
            ctx.facts[f"health_unknown_after/{ctx.phase}"] = round(elapsed, 1)
        with ctx.step("pod status shows the device Healthy once the driver reports it again"):
            ctx.driver.set_health(pool, device, "Healthy")
            wait_health(ctx, pod_name, "Healthy", device=where)
        with ctx.step(
            f"pod status turns Unknown once the driver's plugin stops, within "
            f"{UNKNOWN_AFTER_STOP_WITHIN:g} s"
        ):
            with ctx.driver.unregistered():
                restarted_at = len(ctx.driver.calls.records)
                elapsed = _unknown_when_stopped(ctx, pod_name, where)
            ctx.facts[f"health_unknown_after_stop/{ctx.phase}"] = round(elapsed, 1)
        with ctx.step(f"the kubelet registers the plugin again and watches it through {want}"):
            ctx.driver.wait_registered()
            index, again = health_stream(ctx)
            assert index >= restarted_at and again == want, (
                f"kubelet {kubelet} watches device health of the restarted plugin through "
                f"{again} (call {index}; the plugin served again from call {restarted_at}), "
                f"want {want} on a new stream"
            )
        with ctx.step("pod status shows the device Healthy once the plugin serves again"):
            wait_health(ctx, pod_name, "Healthy", device=where)
        return len(ctx.driver.calls.records)

    upgraded_since = cycle(ctx, 0)
    before_upgrade = running(b, pod_name)

    def after_upgrade(ctx: Context) -> Phase:
        with ctx.step(f"pod {pod_name} runs untouched"):
            still_untouched(ctx.builder, before_upgrade, [claim_name])
        ctx.builder.wait_running(pod_name)
        downgraded_since = cycle(ctx, upgraded_since)
        before_downgrade = running(ctx.builder, pod_name)

        def after_downgrade(ctx: Context) -> Phase:
            with ctx.step(f"pod {pod_name} runs untouched"):
                still_untouched(ctx.builder, before_downgrade, [claim_name])
            ctx.builder.wait_running(pod_name)
            cycle(ctx, downgraded_since)
            ctx.builder.delete_pod_and_wait(pod_name)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _unknown_when_silent(ctx: Context, pod_name: str, pool: str, device: str) -> float:
    """The driver falls silent about the device (its stream goes on); seconds until the pod
    shows it Unknown, which must take the device's timeout and not much more."""
    started = time.monotonic()
    ctx.driver.silence_health(pool, device, SILENT_TIMEOUT)
    wait_health(
        ctx,
        pod_name,
        "Unknown",
        device=f"{pool}/{device}",
        timeout=UNKNOWN_WITHIN,
        detail=(
            f" within {UNKNOWN_WITHIN:g} s of the driver leaving it out after a last report "
            f"with a {SILENT_TIMEOUT} s timeout (a kubelet that ignores the device's timeout "
            f"waits its default {KUBELET_DEFAULT_HEALTH_TIMEOUT:g} s)"
        ),
    )
    elapsed = time.monotonic() - started
    ctx.log(f"{ctx.phase}: the kubelet marked the silent device Unknown after {elapsed:.1f} s")
    assert elapsed >= SILENT_TIMEOUT, (
        f"pod {pod_name} showed device {pool}/{device} Unknown {elapsed:.1f} s after the driver "
        f"stopped reporting it, before the {SILENT_TIMEOUT} s timeout the driver sent with its "
        f"last report: not the kubelet's timeout"
    )
    return elapsed


def _unknown_when_stopped(ctx: Context, pod_name: str, device: str) -> float:
    """Called with the driver's plugin stopped: seconds until the pod shows ``device`` Unknown,
    the pod nudged until it does (module doc)."""
    started = time.monotonic()
    nudges = itertools.count(1)
    nudged: list[float] = []

    def sync_the_pod() -> None:
        """A look missed it: nudge the pod, unless it was nudged less than NUDGE_EVERY ago."""
        if not nudged or time.monotonic() - nudged[-1] >= NUDGE_EVERY:
            nudged.append(time.monotonic())
            nudge(ctx.builder, pod_name, f"{ctx.phase}-plugin-stopped-{next(nudges)}")

    wait_health(
        ctx,
        pod_name,
        "Unknown",
        device=device,
        timeout=UNKNOWN_AFTER_STOP_WITHIN,
        detail=(
            f" within {UNKNOWN_AFTER_STOP_WITHIN:g} s of its driver's plugin stopping, the pod "
            f"nudged every {NUDGE_EVERY:g} s (a kubelet that keeps a stopped driver's device "
            f"health until it times out waits its default {KUBELET_DEFAULT_HEALTH_TIMEOUT:g} s)"
        ),
        between=sync_the_pod,
    )
    elapsed = time.monotonic() - started
    ctx.log(
        f"{ctx.phase}: the kubelet showed device {device} of the stopped plugin Unknown after "
        f"{elapsed:.1f} s"
    )
    return elapsed


def _streams_opened(ctx: Context, since: int) -> list[str]:
    """The health service of every stream the kubelet opened from call ``since`` on."""
    return [service for index, service, _ in streams(ctx) if index >= since]


SUBTEST = Subtest(
    name="resource-health",
    keps=(4680,),
    initial=initial,
    resources=devices_per_node(1),
    # Beta and on by default since 1.36 (v1.36.5, v1.37.2); it needs DynamicResourceAllocation.
    feature_gates=("ResourceHealthStatus",),
    releases=">=1.36",
)
