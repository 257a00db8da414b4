"""A driver that can run two instances at once (it takes a pod UID) updated as a DaemonSet with
maxSurge does: the new instance registers beside the old one, the kubelet restarts in the
overlap, the old one leaves, and a newer one that crashes leaves the kubelet on the one still
serving (kubernetes#128964)."""

from __future__ import annotations

from pathlib import Path

from e2e_dra.builder import Builder
from e2e_dra.driver import ProcessDriver
from e2e_dra.subtest import Context
from e2e_dra.subtests.drivers._held import Held
from e2e_dra.subtests.drivers._kubelet import REGISTERED, kubelet_said, log_size
from e2e_dra.subtests.drivers._pods import Claimed, claimed_pod
from e2e_dra.subtests.drivers._pools import same_devices
from e2e_dra.subtests.drivers._unprepare import delete_and_unprepared
from e2e_dra.waits import eventually


def rolling_update_begins(ctx: Context, b: Builder, driver: ProcessDriver, held: Held) -> Claimed:
    """A second instance starts and registers while the first still serves, as a DaemonSet with
    maxSurge does; both stay registered through the next cluster step. A pod started in the
    overlap runs, and the slices stay. While both are registered the kubelet uses the newer
    one, the one it registered last (kubernetes#128964): the older one is frozen meanwhile, so a
    kubelet that calls it fails at its first prepare, in the kubelet's words."""
    return _newer_instance_serves(ctx, b, driver, held)


def _newer_instance_serves(
    ctx: Context, b: Builder, driver: ProcessDriver, held: Held | None = None
) -> Claimed:
    """One more instance starts and registers (counted once the kubelet says so); with the older
    ones frozen, a new pod starts: the kubelet uses the instance it registered last."""
    with ctx.step("a new instance registers beside the one serving; the slices stay"):
        log = ctx.logs.get("kubelet")
        start = log_size(log)
        driver.surge(ctx.releases.get("kubelet", ""))
        if log is not None:
            _kubelet_registered(log, start, driver)
        if held is not None:
            same_devices(driver, held.devices)
    with (
        ctx.step("the older instance frozen, a new pod starts: the kubelet uses the newer one"),
        driver.older_frozen(),
    ):
        return claimed_pod(ctx, b, driver, refusals=1)


def _kubelet_registered(log: Path, start: int, driver: ProcessDriver) -> None:
    """Until the kubelet logged that it registered the newest instance (the endpoint it names
    holds that instance's pod UID): a socket that answers is not yet one the kubelet uses."""
    eventually(
        lambda: kubelet_said(log, start, REGISTERED, driver.pod_uid),
        what=f"the kubelet to register the new instance of driver {driver.name} "
        f"(pod UID {driver.pod_uid}; its log: {log})",
        timeout=60,
        poll=0.5,
        until=bool,
    )


def rolling_update_ends(
    ctx: Context, b: Builder, driver: ProcessDriver, held: Held
) -> list[Claimed]:
    """The kubelet restarted (the cluster step) while both instances were registered, and
    registered them again in an order of its own: a new pod starts. Then the old instance
    leaves and nothing it prepared is lost; then a newer instance registers, and the kubelet
    under test uses it (the older frozen meanwhile); then it crashes, and the kubelet falls back
    to the one still serving (kubernetes#128964). The pod of the overlap is deleted and
    unprepared once the old instance left (the driver has four devices); returns the two pods
    started after, whose claims the phase unprepares."""
    with ctx.step("the kubelet restarted with both instances registered: a new pod starts"):
        overlap = claimed_pod(ctx, b, driver)
    with ctx.step("the old instance left: the slices stay and the prepared pods run on"):
        driver.retire()
        driver.wait_for_slices(120)
        same_devices(driver, held.devices)
        held.untouched(b)
    with ctx.step("the pod started in the overlap deleted: its claim is unprepared"):
        delete_and_unprepared(ctx, b, driver, overlap)  # its device for the pods below
    newer = _newer_instance_serves(ctx, b, driver)
    with ctx.step("the new instance crashes: a new pod starts on the one serving"):
        driver.crash()
        fallback = claimed_pod(ctx, b, driver)
    return [newer, fallback]
