"""A deleted pod's claim is unprepared: the kubelet lets go of it (its checkpoint), and then no
CDI spec or file of the driver names it. A driver that keeps refusing is said in its own words as
the kubelet logged them; a driver that declares it cannot clean up after a restart says that
instead, and fails once it no longer holds."""

from __future__ import annotations

from e2e_dra.builder import Builder
from e2e_dra.driver import CLEANUP_AFTER_RESTART, DriverError, ProcessDriver
from e2e_dra.subtest import Context
from e2e_dra.subtest_kit import checkpoint_entry
from e2e_dra.subtests.drivers._kubelet import (
    REFUSALS,
    UNPREPARE_ERROR,
    UNPREPARE_TIMEOUT,
    kubelet_said,
    log_size,
)
from e2e_dra.subtests.drivers._pods import Claimed
from e2e_dra.waits import WaitTimeout, eventually

CLEANUP_GRACE = 10.0
"""From the kubelet letting go of a claim to the driver's files for it gone: the kubelet drops a
claim from its checkpoint only once the driver's NodeUnprepareResources returned, so a driver
has cleaned up by then; the grace is for one that removes its files just after answering."""


def delete_and_unprepared(
    ctx: Context, b: Builder, driver: ProcessDriver, claimed: Claimed
) -> None:
    """Delete the pod; its claim must be unprepared, and then the pod goes (a driver that
    refuses the unprepare keeps it terminating: said in its own words, not waited out)."""
    b.delete("pods", claimed.name)
    unprepared(ctx, driver, claimed)
    b.wait_pod_gone(claimed.name)


def unprepared(ctx: Context, driver: ProcessDriver, claimed: Claimed) -> None:
    """The kubelet lets go of the claim (its checkpoint), and then no CDI spec or file of the
    driver names it. A driver restarted since it prepared the claim is held to that too, unless
    it declares it cannot be (:data:`CLEANUP_AFTER_RESTART`): then what it left is said."""
    _kubelet_lets_go(ctx, driver, claimed)
    restarted = driver.instance != claimed.instance
    limit = driver.kind.limit(CLEANUP_AFTER_RESTART) if restarted else None
    try:
        eventually(
            lambda: driver.files_naming(claimed.uid),
            what=f"driver {driver.name} to remove every CDI spec and file naming claim "
            f"{claimed.uid}" + (" (it restarted since it prepared the claim)" if restarted else ""),
            timeout=CLEANUP_GRACE,
            until=lambda files: not files,
            retry_on=(),
        )
    except WaitTimeout:
        if limit is None:
            raise
        left = [str(f) for f in driver.files_naming(claimed.uid)]
        ctx.facts[f"driver_limit/{ctx.phase}"] = {"limit": limit.what, "left": left}
        ctx.nothing_to_prove(
            f"{CLEANUP_AFTER_RESTART}: driver {driver.name} {limit.what} ({limit.source}); "
            f"left: {', '.join(left)}"
        )
        return
    if limit is not None:
        raise AssertionError(
            f"driver {driver.name} cleaned up claim {claimed.uid} after a restart, though its "
            f"kind declares it cannot ({limit.what}; {limit.source}): remove the declaration"
        )


def _kubelet_lets_go(ctx: Context, driver: ProcessDriver, claimed: Claimed) -> None:
    """Until the kubelet took the claim out of its checkpoint (it does once the driver's
    NodeUnprepareResources succeeded). A driver that keeps refusing is said at once, in its own
    words as the kubelet logged them, with the claim it keeps prepared: a change the driver
    does not support (a checkpoint it cannot read) is no timeout."""
    log = ctx.logs.get("kubelet")
    start = log_size(log)

    def unprepared() -> dict | None:
        """The claim's checkpoint entry; a refusing driver fails the wait."""
        said = (
            kubelet_said(log, start, UNPREPARE_ERROR, claimed.claim, claimed.uid)
            if log is not None
            else []
        )
        if len(said) >= REFUSALS:  # not an AssertionError: a wait retries those
            raise DriverError(
                f"driver {driver.name} refuses to unprepare ResourceClaim {claimed.claim} "
                f"({claimed.uid}), which stays prepared on the node and its pod terminating; "
                f"the kubelet logged {len(said)} failures since the pod was deleted, the last: "
                f"{said[-1]}"
            )
        return checkpoint_entry(ctx, claimed.uid)

    eventually(
        unprepared,
        what=f"claim {claimed.uid} to leave the kubelet's checkpoint",
        timeout=UNPREPARE_TIMEOUT,
        poll=1.0,
        until=lambda entry: entry is None,
    )
