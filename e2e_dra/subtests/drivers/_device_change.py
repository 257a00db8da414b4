"""A driver's devices change while claims are prepared: a device hot-plugged or removed, a GPU
repartitioned, a driver update that publishes one more device.

The driver is restarted as its DaemonSet would be after a change of its configuration: at once,
well within the kubelet's wipe delay, so the slices its predecessor published are still there
when the new instance starts. Real drivers differ here by the ``k8s.io/dynamic-resource-
allocation`` they link: the new instance's ResourceSlice controller finds those slices and must
bring them to what it publishes, by updating them in place or by replacing them with a newer
generation. A controller that only creates slices, or whose update is lost, leaves the pool
showing the old devices: said with the driver, its helper, the step, what it was told to publish
and what its pool shows, never as a bare timeout. How the slices changed (in place or replaced)
is kept in the phase's facts (``driver_devices/<phase>``).

Before the phase ends (and the next cluster step restarts the kubelet, whose start-up wipe
deletes every slice of the node), a restarted driver whose helper is older than
:data:`STALE_UPDATE_FIXED` is given time for its ResourceSlice controller to sync its pool once
more (:func:`resync_due`, :func:`until_resynced`): until then that controller keeps the slice it
updated in its mutation cache and, should someone delete it, never publishes it again
(:data:`STALE_UPDATE_BUG`). Whether the next wipe came before or after that sync was an accident
of how long the rest of the phase and the cluster step took (docs/real-drivers.md, issue 49).

Growing: one more device; the pod prepared before runs on untouched, and a new claim of every
free device (the test driver's devices have no attribute a selector could tell apart) is
allocated the new one, which the driver prepares; that pod is then deleted and its claim
unprepared, and its devices are free again before the phase goes on (a pod that finds no free
device is said unschedulable at once). Shrinking, in a later phase: once no claim holds the
added device, the driver goes back to its count and the pool back to its devices.
"""

from __future__ import annotations

import contextlib
import time

from e2e_dra.builder import Builder
from e2e_dra.driver import ProcessDriver
from e2e_dra.kube import retrying
from e2e_dra.subtest import Context
from e2e_dra.subtest_kit import checkpoint_entry, running, still_untouched
from e2e_dra.subtests.drivers._held import Grown, Held
from e2e_dra.subtests.drivers._kubelet import WIPE_DELAY
from e2e_dra.subtests.drivers._lifecycle import helper
from e2e_dra.subtests.drivers._pods import Claimed, claimed_pod
from e2e_dra.subtests.drivers._pools import (
    DEVICES_SETTLE,
    Device,
    Devices,
    Expected,
    allocated,
    checkpointed,
    failure,
    free_devices,
    holders,
    how_updated,
    listed,
    newest_devices,
    published,
)
from e2e_dra.subtests.drivers._unprepare import delete_and_unprepared
from e2e_dra.versions import VersionError, matches
from e2e_dra.waits import WaitTimeout, eventually

RELEASE_TIMEOUT = 60.0
"""From the pods holding a device deleted to no claim allocated it: the resourceclaim controller
deletes a deleted pod's claim made from a template within seconds."""
HELPER_SYNC_DELAY = 30.0
"""``k8s.io/dynamic-resource-allocation``'s ResourceSlice controller syncs a pool this long after
an informer event (``resourceslice.DefaultSyncDelay``; the example driver and upstream's test
driver keep the default). A new instance's first sync after it updated its predecessor's slices
is due this long after its informer listed them, which is before the update was seen."""
RESYNC_MARGIN = 5.0
"""Beyond :data:`HELPER_SYNC_DELAY`: the sync itself, and a clock read after the update landed."""
STALE_UPDATE_FIXED = "0.37.0"
"""The first ``k8s.io/dynamic-resource-allocation`` without :data:`STALE_UPDATE_BUG` (its fix is
in v0.37.0, v0.37.2 and v0.38.0-beta.0; v0.36.2 and v0.36.5 lack it)."""
STALE_UPDATE_BUG = (
    "kubernetes/kubernetes#140063: the ResourceSlice controller of k8s.io/dynamic-resource-"
    f"allocation before v{STALE_UPDATE_FIXED} keeps a slice it updated in its mutation cache, so "
    "a slice deleted by someone else (the kubelet's wipe at its start) before the controller "
    "next syncs the pool is never published again"
)


def grow(
    ctx: Context, b: Builder, driver: ProcessDriver, devices: Devices, kept: Claimed
) -> Grown | None:
    """The driver restarts with one more device while ``kept`` is prepared; its pool shows the
    devices it had and one more, ``kept`` runs on untouched, and a new pod's claim is allocated
    the new device and prepared, then unprepared and given back. Returns the change, to be undone
    later; None, said, for a driver that cannot be told how many devices to publish."""
    option = driver.kind.device_count_option
    if driver.kind.device_change_held_back is not None:
        ctx.nothing_to_prove(
            f"a change of the driver's devices while claims are prepared: {driver.name}: "
            f"{driver.kind.device_change_held_back}"
        )
        return None
    if option is None:
        ctx.nothing_to_prove(
            f"a change of the driver's devices while claims are prepared: driver {driver.name}'s "
            "command line does not pass {num_devices}, so it cannot be told to publish one more "
            "device (E2E_DRA_NUM_DEVICES alone does not say that it reads it)"
        )
        return None
    kept_running = running(b, kept.name)
    count = driver.num_devices + 1
    step = f"the driver restarts with {count} devices, within the wipe delay: its pool shows them"
    with ctx.step(step):
        expected = Expected(devices, more=1, told=f"{option}={count}")
        (added,) = expected.beyond(_restarted_with(ctx, driver, count, expected, step))
    due = resync_due(driver, time.monotonic())
    with ctx.step("the pod prepared before the change of devices runs on untouched"):
        still_untouched(b, kept_running, [kept.claim], kept.env)
    with ctx.step(f"a new claim is allocated the new device {listed([added])}: its pod runs"):
        claimed = _claims_the_new_device(ctx, b, driver, added)
    with ctx.step("the pod of the new device deleted: its claim is unprepared, its devices free"):
        taken = allocated(b.get("resourceclaims", claimed.claim), driver.name)
        delete_and_unprepared(ctx, b, driver, claimed)
        _released(b, driver, taken)
    return Grown(devices, count - 1, added, resync_due=due)


def shrink(
    ctx: Context, b: Builder, driver: ProcessDriver, held: Held, grown: Grown
) -> tuple[Devices, float | None]:
    """Once no claim holds the device :func:`grow` added, the driver restarts with as many
    devices as before; its pool shows exactly those again, and the prepared pod runs on.
    Returns the devices, and when its helper is due to have synced again (:func:`resync_due`)."""
    with ctx.step(f"no claim holds the added device {listed([grown.added])} any more"):
        _released(b, driver, {grown.added})
    step = f"the driver restarts with its {grown.num_devices} devices again: its pool shrinks back"
    with ctx.step(step):
        option = driver.kind.device_count_option
        expected = Expected(grown.devices, told=f"{option}={grown.num_devices}")
        _restarted_with(ctx, driver, grown.num_devices, expected, step)
    due = resync_due(driver, time.monotonic())
    with ctx.step("the pod prepared before the change of devices runs on untouched"):
        held.untouched(b)
    return grown.devices, due


def resync_due(driver: ProcessDriver, seen: float) -> float | None:
    """When (``time.monotonic()``) the helper of ``driver``'s instance, restarted with other
    devices and seen to have updated its pool at ``seen``, has synced that pool once more: a
    deletion of its slices after that is noticed and they are published again. None when its
    helper does not lose them before (:data:`STALE_UPDATE_BUG`); a helper that is not known (a
    ``command:`` driver) or not a release is taken to."""
    version = helper(driver)
    with contextlib.suppress(VersionError):
        if not matches(f"<{STALE_UPDATE_FIXED}", version):
            return None
    return seen + HELPER_SYNC_DELAY + RESYNC_MARGIN


def until_resynced(ctx: Context, driver: ProcessDriver, due: float | None) -> None:
    """The phase ends (and the next cluster step may restart the kubelet, which deletes every
    slice of the node at its start) only once the restarted driver's helper synced its pool
    again (``due``, from :func:`resync_due`; None: nothing to wait for). Said, with the bug it
    keeps clear of, and how long the rest of the phase left to wait (``driver_resync/<phase>``);
    the slices must still be there."""
    if due is None:
        return
    version = helper(driver)
    with ctx.step(
        f"the restarted driver's helper (k8s.io/dynamic-resource-allocation {version}) synced "
        "its pool again before the next cluster step"
    ):
        left = max(due - time.monotonic(), 0.0)
        if left:
            time.sleep(left)
        ctx.facts[f"driver_resync/{ctx.phase}"] = {
            "helper": version,
            "waited_seconds": round(left, 1),
            "why": STALE_UPDATE_BUG,
        }
        ctx.log(
            f"{ctx.phase}: driver {driver.name}: waited {left:.0f}s more for its helper "
            f"({version}) to sync its pool again before the next cluster step ({STALE_UPDATE_BUG})"
        )
        published(driver)


def _restarted_with(
    ctx: Context, driver: ProcessDriver, count: int, expected: Expected, step: str
) -> Devices:
    """Stop the driver and start it at once told to publish ``count`` devices; until its pools
    show ``expected``, said in full when they do not within :data:`DEVICES_SETTLE` seconds. A
    restart that leaves the helper no slice to update (none left, or slower than the wipe
    delay) proves the pool's content only, and says so."""
    if driver.surging:
        raise AssertionError(f"driver {driver.name}: its devices change during a rolling update")
    began = time.monotonic()
    driver.stop()
    left = retrying(driver.slices)()  # what the kubelet keeps for the wipe delay
    driver.start(ctx.releases.get("kubelet", ""), num_devices=count)
    driver.wait_registered(60)
    took = time.monotonic() - began
    try:
        slices = eventually(
            driver.slices,
            what="",
            timeout=DEVICES_SETTLE,
            until=lambda now: not expected.verdict(now),
        )
    except WaitTimeout:
        who = (
            f"driver {driver.name} ({driver.kind.label}, k8s.io/dynamic-resource-allocation "
            f"{helper(driver)}), {ctx.phase}, step {step!r}"
        )
        raise AssertionError(
            failure(expected, retrying(driver.slices)(), who, DEVICES_SETTLE)
        ) from None
    how = how_updated(left, slices)
    ctx.log(
        f"{ctx.phase}: driver {driver.name} restarted with {count} devices in {took:.1f}s: {how}"
    )
    ctx.facts.setdefault(f"driver_devices/{ctx.phase}", []).append(
        {"num_devices": count, "restart_seconds": round(took, 1), "slices": how}
    )
    if not left or took >= WIPE_DELAY:
        ctx.nothing_to_prove(
            f"the update of slices a driver published before its restart: {how}, {took:.0f}s "
            f"after the old instance stopped (the kubelet wipes them {WIPE_DELAY:.0f}s after)"
        )
    return newest_devices(slices)


def _claims_the_new_device(
    ctx: Context, b: Builder, driver: ProcessDriver, added: Device
) -> Claimed:
    """A pod whose claim asks for every free device of the driver, so that it must get the new
    one: it runs and sees its devices, and the kubelet's checkpoint holds the new device as the
    driver prepared it (its NodePrepareResources answer)."""
    claims = b.list("resourceclaims", mine=True)
    free = free_devices(published(driver), claims, driver.name)
    assert added in free, (
        f"driver {driver.name}: its new device {listed([added])} is allocated already, to "
        f"{', '.join(holders(claims, driver.name, added))}"
    )
    claimed = claimed_pod(ctx, b, driver, count=len(free))
    got = allocated(b.get("resourceclaims", claimed.claim), driver.name)
    assert added in got, (
        f"ResourceClaim {claimed.claim} asked for all {len(free)} free devices of driver "
        f"{driver.name} ({listed(free)}) and was allocated {listed(got)}, not the new device "
        f"{listed([added])}"
    )
    prepared = checkpointed(checkpoint_entry(ctx, claimed.uid), driver.name)
    assert added in prepared, (
        f"driver {driver.name} prepared ResourceClaim {claimed.claim} without its new device "
        f"{listed([added])}: the kubelet's checkpoint holds {listed(prepared)} from its "
        "NodePrepareResources answer"
    )
    return claimed


def _released(b: Builder, driver: ProcessDriver, devices: set[Device]) -> None:
    """Until no claim of the subtest is allocated any of ``devices`` (their pods were deleted):
    a device in use is not taken away, and a pod that finds none free is refused at once. The
    claims that keep them are named."""

    def holding(claims: list[dict]) -> list[str]:
        return sorted({name for d in devices for name in holders(claims, driver.name, d)})

    try:
        eventually(
            lambda: holding(b.list("resourceclaims", mine=True)),
            what="",
            timeout=RELEASE_TIMEOUT,
            until=lambda names: not names,
        )
    except WaitTimeout:
        names = holding(retrying(b.list)("resourceclaims", mine=True))
        raise AssertionError(
            f"driver {driver.name}: {listed(devices)} still allocated to ResourceClaim(s) "
            f"{', '.join(names)} {RELEASE_TIMEOUT:.0f}s after their pods were deleted"
        ) from None
