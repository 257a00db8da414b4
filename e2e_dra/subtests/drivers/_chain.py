"""The real drivers' chain: what every real DRA driver must keep true across upgrade, downgrade
and re-upgrade, whoever wrote it.

One subtest per driver of ``E2E_DRA_DRIVERS`` (``driver-upstream``, ``driver-example-v0.4.0``).
Nothing here knows a driver's internals; each rule comes from what the kubelet and the API
promise a driver's users:

- its ResourceSlices are published, and after every step they are back with the same devices
  (the ones the last change of its devices left);
- a claim is allocated from those slices and prepared: the pod runs and sees its device (the
  environment the driver's CDI spec for that claim sets);
- a pod prepared before a step runs on untouched after it (same containers, nothing restarted,
  its claim still reserved, its device still seen);
- a new claim after the step works;
- a deleted pod's claim is unprepared: the kubelet's checkpoint lets go of it, and no CDI spec
  or file of the driver's own (its checkpoint) names it any more;
- a driver's devices change while claims are prepared (in the first phase, on the cluster as it
  came up: one instance, no outage, no rolling update): the driver restarts, within the
  kubelet's wipe delay, told to publish one more device (``--num-devices``, ``{num_devices}``);
  its pool's newest generation shows the devices it had and one more, the pod prepared before
  runs on untouched, and a new claim of every free device is allocated the new one, which the
  driver prepares (that pod is then deleted, its claim unprepared). The grown pool is carried
  through the upgrade, the outage, the downgrade and the rolling update; in
  :data:`DEVICES_SHRINK_PHASE` (the last one, after the re-upgrade), once the pods of before are
  gone and no claim holds the added device, the driver goes back to its count and the pool back
  to its devices (``_device_change``). So each side's build of a driver that follows the
  kubelet changes a published pool once: the older one grows it, the newer one shrinks it. A
  phase that restarted the driver so ends only once a helper that would lose the slices it
  updated to a wipe right after (the next step's kubelet restart) synced its pool again
  (``until_resynced``);
- a driver that follows the kubelet's release (``upstream``) is upgraded and downgraded with
  it, with prepared claims in place, and the rules above hold across that change too: after the
  upgrade on its own (the kubelet restarted beside the old build), at the downgrade and the
  re-upgrade together with the kubelet (replaced while the kubelet is down);
- a driver stopped past the kubelet's wipe delay loses nothing: the prepared pod runs on, a new
  pod waits, an unprepare asked meanwhile happens once it is back, the waiting pod then starts;
- a driver that can run two instances at once (it takes a pod UID) is updated as a DaemonSet
  with maxSurge does, and the kubelet restarts in the overlap: pods start while both are
  registered, before and after that restart; the old instance leaving loses nothing; a newer
  instance that crashes after registering leaves the kubelet on the one still serving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from e2e_dra.driver import DriverKind
from e2e_dra.subtest import DRIVER_SUBTEST_PREFIX, PHASES, Context, Phase, Subtest
from e2e_dra.subtest_kit import running
from e2e_dra.subtests.drivers._device_change import grow, shrink, until_resynced
from e2e_dra.subtests.drivers._downtime import driver_away
from e2e_dra.subtests.drivers._held import Held
from e2e_dra.subtests.drivers._lifecycle import (
    follow_kubelet,
    note,
    real_driver,
    replace_with_next_step,
    select_driver,
)
from e2e_dra.subtests.drivers._pods import claimed_pod
from e2e_dra.subtests.drivers._pools import published, same_devices
from e2e_dra.subtests.drivers._rolling import rolling_update_begins, rolling_update_ends
from e2e_dra.subtests.drivers._unprepare import delete_and_unprepared

DOWNTIME_PHASE = 1
"""The phase in which the driver goes away past the kubelet's wipe delay (after the upgrade)."""
ROLLING_PHASE = 2
"""The phase in which a driver that can run two instances at once begins a rolling update, as a
DaemonSet with maxSurge does (after the downgrade); the re-upgrade restarts the kubelet with both
instances registered, and the next phase ends the update."""
DEVICES_SHRINK_PHASE = len(PHASES) - 1
"""The phase in which the driver goes back to its count of devices: the last, after the
re-upgrade, once the pods of before were deleted (none holds the added device then). The growth
ran in the first phase, on the older release; a driver that follows the kubelet (upstream's)
shrinks on the newer release's build, so the helper library of each side updates a published
pool once, and one that loses an update on either side shows the wrong devices."""


def driver_subtests(kinds: Sequence[DriverKind]) -> list[Subtest]:
    """One subtest per real driver, named after it."""
    return [
        Subtest(name=f"{DRIVER_SUBTEST_PREFIX}{kind.label}", initial=_first, node_driver=kind)
        for kind in kinds
    ]


def _first(ctx: Context) -> Phase:
    driver = real_driver(ctx)
    b = ctx.builder
    note(ctx, driver)
    with ctx.step("a DeviceClass selects the driver's devices"):
        select_driver(b, driver)
    with ctx.step("the driver's ResourceSlices are published"):
        devices = published(driver)
    with ctx.step("a pod whose claim the driver prepared runs and sees its device"):
        kept = claimed_pod(ctx, b, driver, template=False)
    grown = grow(ctx, b, driver, devices, kept)  # the first phase: one instance, no outage
    if grown is not None:
        devices = grown.with_added
    with ctx.step("a second pod with a claim from a template runs"):
        passing = claimed_pod(ctx, b, driver)
    until_resynced(ctx, driver, grown.resync_due if grown is not None else None)
    kubelets = (ctx.releases.get("kubelet", ""),)
    held = Held(running(b, kept.name), kept, passing, devices, kubelets, grown=grown)
    following = _next(held, 1)
    assert following is not None  # a chain has more than one phase
    return following


def _next(held: Held, index: int) -> Phase | None:
    if index >= len(PHASES):
        return None

    def after_step(ctx: Context) -> Phase | None:
        driver = real_driver(ctx)
        b = ctx.builder
        now = held
        resync_due: float | None = None  # a shrink's (until_resynced)
        with ctx.step("the driver's ResourceSlices are back with the same devices"):
            same_devices(driver, now.devices)
        leaving = [now.passing]
        if driver.surging:  # a rolling update begun the phase before spans the step
            leaving += rolling_update_ends(ctx, b, driver, now)
        if now.replaced is not None and now.replaced.happened():
            ctx.log(f"{ctx.phase}: {now.replaced.what}: done while the kubelet was down")
        follow_kubelet(ctx, driver)
        note(ctx, driver)
        with ctx.step("the pod prepared before the step runs on untouched"):
            now.untouched(b)
        if index == DOWNTIME_PHASE:
            passing = driver_away(ctx, b, driver, now)
        else:
            with ctx.step("the pods of before deleted: their claims are unprepared"):
                for claimed in leaving:
                    delete_and_unprepared(ctx, b, driver, claimed)
            if index == DEVICES_SHRINK_PHASE and now.grown is not None:
                devices, resync_due = shrink(ctx, b, driver, now, now.grown)
                now = replace(now, devices=devices, grown=None)
            if index == ROLLING_PHASE and driver.kind.rolls:
                passing = rolling_update_begins(ctx, b, driver, now)
            else:
                with ctx.step("a new pod with a new claim runs and sees its device"):
                    passing = claimed_pod(ctx, b, driver)
        if index + 1 < len(PHASES):  # a cluster step follows, whose kubelet wipes the slices
            until_resynced(ctx, driver, resync_due)
        kubelets = (*now.kubelets, ctx.releases.get("kubelet", ""))
        replaced = replace_with_next_step(ctx, driver, kubelets)
        return _next(replace(now, passing=passing, kubelets=kubelets, replaced=replaced), index + 1)

    return after_step
