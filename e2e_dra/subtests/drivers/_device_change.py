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

Growing: one more device; the pod prepared before runs on untouched, and a new claim of every
free device (the test driver's devices have no attribute a selector could tell apart) is
allocated the new one, which the driver prepares; that pod is then deleted and its claim
unprepared, and its devices are free again before the phase goes on (a pod that finds no free
device is said unschedulable at once). Shrinking, in a later phase: once no claim holds the
added device, the driver goes back to its count and the pool back to its devices.
"""

from __future__ import annotations

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
from e2e_dra.waits import WaitTimeout, eventually

RELEASE_TIMEOUT = 60.0
"""From the pods holding a device deleted to no claim allocated it: the resourceclaim controller
deletes a deleted pod's claim made from a template within seconds."""


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
    with ctx.step("the pod prepared before the change of devices runs on untouched"):
        still_untouched(b, kept_running, [kept.claim], kept.env)
    with ctx.step(f"a new claim is allocated the new device {listed([added])}: its pod runs"):
        claimed = _claims_the_new_device(ctx, b, driver, added)
    with ctx.step("the pod of the new device deleted: its claim is unprepared, its devices free"):
        taken = allocated(b.get("resourceclaims", claimed.claim), driver.name)
        delete_and_unprepared(ctx, b, driver, claimed)
        _released(b, driver, taken)
    return Grown(devices, count - 1, added)


def shrink(ctx: Context, b: Builder, driver: ProcessDriver, held: Held, grown: Grown) -> Devices:
    """Once no claim holds the device :func:`grow` added, the driver restarts with as many
    devices as before; its pool shows exactly those again, and the prepared pod runs on."""
    with ctx.step(f"no claim holds the added device {listed([grown.added])} any more"):
        _released(b, driver, {grown.added})
    step = f"the driver restarts with its {grown.num_devices} devices again: its pool shrinks back"
    with ctx.step(step):
        option = driver.kind.device_count_option
        expected = Expected(grown.devices, told=f"{option}={grown.num_devices}")
        _restarted_with(ctx, driver, grown.num_devices, expected, step)
    with ctx.step("the pod prepared before the change of devices runs on untouched"):
        held.untouched(b)
    return grown.devices


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
