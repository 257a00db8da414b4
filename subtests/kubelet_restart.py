"""kubelet-restart: a kubelet that restarts while NodePrepareResources hangs hands the claim over
to the next kubelet cleanly.

The initial phase blocks the driver's prepare and ends while the pod's prepare call hangs, so
the upgrade restarts the kubelet in the middle of it. The kubelet checkpoints a claim before it
calls NodePrepareResources (without devices) and marks it prepared only in memory, so a new
kubelet does not know whether the call went through: it calls NodePrepareResources again when it
creates the pod's sandbox, and the driver must answer idempotently. After the upgrade the block
is released: the pod runs, exactly one prepare call succeeded with its kubelet still listening
(the new kubelet's, started after it registered the driver; the old kubelet's calls all ended
with it gone), and the checkpoint holds the claim's device once (kubernetes#140471 duplicated
devices on a retried prepare). A kubelet that restarts under a running pod creates no sandbox
and prepares nothing again; deleting the pod unprepares the claim exactly once and takes it out
of the checkpoint.

In a suite whose upgrade leaves the kubelet running, the same kubelet's retried call prepares
instead; everything else is checked the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.waits import eventually
from subtests._pools import devices_per_node

if TYPE_CHECKING:
    from e2e_dra.driver import GRPCCall

CALL_TIMEOUT = 60.0
PREPARE = "/NodePrepareResources"
UNPREPARE = "/NodeUnprepareResources"
REGISTRATION = "/NotifyRegistrationStatus"
# pkg/kubelet/cm/dra/manager.go: draManagerStateFileName, in the kubelet's root directory.
CHECKPOINT = "dra_manager_state"


class _PrepareBlock:
    """The driver's prepare block, held from one phase into the next; released once."""

    def __init__(self, ctx: Context) -> None:
        self._block = ctx.driver.block_prepare()
        self._block.__enter__()
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._block.__exit__(None, None, None)


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claim = b.external_claim()
    pod = b.pod_external(claim["metadata"]["name"])
    pod_name = pod["metadata"]["name"]
    block = _PrepareBlock(ctx)
    # Released at the latest by the tear-down, if the chain breaks before after_upgrade does it.
    b.defer(lambda _kube: block.release())
    uid = b.create(claim, pod)[0]["metadata"]["uid"]

    with ctx.step("the kubelet calls NodePrepareResources and waits"):
        eventually(
            lambda: [c for c in _calls(ctx, PREPARE, uid) if not c.done],
            what=f"a NodePrepareResources call for claim {uid}",
            timeout=CALL_TIMEOUT,
            poll=0.5,
        )
        phase = b.read_pod(pod_name).get("status", {}).get("phase")
        assert phase == "Pending", f"pod {pod_name} is {phase} while its prepare hangs"
    with ctx.step("the claim is checkpointed before it is prepared"):
        devices = _checkpointed_devices(ctx, uid)
        assert devices == [], f"checkpoint has devices {devices} for an unprepared claim"
    registrations = _indices(ctx, REGISTRATION)
    ctx.log(f"{ctx.phase}: phase ends with NodePrepareResources of claim {uid} blocked")

    def after_upgrade(ctx: Context) -> Phase:
        restarted = len(_indices(ctx, REGISTRATION)) > len(registrations)
        ctx.facts["kubelet_restarted_during_upgrade"] = restarted
        block.release()
        ctx.builder.test_pod(pod)
        from e2e_dra.driver import CLIENT_GONE

        with ctx.step("one prepare call succeeded, the kubelet's after its restart"):
            calls = _all_done(ctx, PREPARE, uid)
            succeeded = [i for i, call in calls if call.error is None]
            failed = [call.error for _, call in calls if call.error is not None]
            ctx.log(
                f"{ctx.phase}: kubelet restarted: {restarted}; NodePrepareResources of the "
                f"claim: {len(calls)} calls, succeeded at record {succeeded}, errors {failed}"
            )
            ctx.facts["prepare_calls/after-cluster-upgrade"] = len(calls)
            assert len(succeeded) == 1, (
                f"NodePrepareResources of claim {uid} succeeded {len(succeeded)} times with the "
                f"kubelet listening, want once; errors of the others: {failed}"
            )
            assert all(error == CLIENT_GONE for error in failed), failed
            if restarted:
                last_registration = _indices(ctx, REGISTRATION)[-1]
                assert succeeded[0] > last_registration, (
                    f"the successful NodePrepareResources (record {succeeded[0]}) started before "
                    f"the new kubelet registered the driver (record {last_registration})"
                )
        with ctx.step("the checkpoint holds the claim's device once"):
            _expect_one_device(ctx, uid)
        prepared = len(calls)

        def after_downgrade(ctx: Context) -> None:
            ctx.builder.wait_running(pod_name)
            with ctx.step("a kubelet restarted under a running pod prepares nothing again"):
                calls = _calls(ctx, PREPARE, uid)
                assert len(calls) == prepared, (
                    f"NodePrepareResources of claim {uid} called {len(calls) - prepared} more "
                    f"times after the downgrade; the pod's sandbox exists"
                )
            with ctx.step("the checkpoint still holds the claim's device once"):
                _expect_one_device(ctx, uid)
            with ctx.step("deleting the pod unprepares the claim once"):
                ctx.builder.delete_pod_and_wait(pod_name)
                eventually(
                    ctx.driver.prepared_claims,
                    what=f"the driver to unprepare claim {uid}",
                    timeout=CALL_TIMEOUT,
                    poll=0.5,
                    until=lambda refs: all(ref.uid != uid for ref in refs),
                )
                calls = _all_done(ctx, UNPREPARE, uid)
                errors = [call.error for _, call in calls]
                assert errors == [None], (
                    f"NodeUnprepareResources of claim {uid}: want one successful call, got "
                    f"{len(calls)} with errors {errors}"
                )
            with ctx.step("the claim leaves the checkpoint"):
                eventually(
                    lambda: _checkpointed_devices(ctx, uid),
                    what=f"claim {uid} to leave the kubelet's checkpoint",
                    timeout=CALL_TIMEOUT,
                    poll=0.5,
                    until=lambda devices: devices is None,
                )

        return after_downgrade

    return after_upgrade


def _calls(ctx: Context, method: str, uid: str | None = None) -> list[GRPCCall]:
    return [call for _, call in _numbered(ctx, method, uid)]


def _indices(ctx: Context, method: str) -> list[int]:
    return [index for index, _ in _numbered(ctx, method)]


def _numbered(ctx: Context, method: str, uid: str | None = None) -> list[tuple[int, GRPCCall]]:
    """The driver's calls of ``method`` (for claim ``uid``), with their place in the log."""
    return [
        (index, call)
        for index, call in enumerate(ctx.driver.calls.records)
        if call.method.endswith(method)
        and (uid is None or any(claim.uid == uid for claim in call.request.claims))
    ]


def _all_done(ctx: Context, method: str, uid: str) -> list[tuple[int, GRPCCall]]:
    """The calls of ``method`` for the claim, once none of them runs any more."""
    return eventually(
        lambda: _numbered(ctx, method, uid),
        what=f"every {method.lstrip('/')} call for claim {uid} to end",
        timeout=CALL_TIMEOUT,
        poll=0.5,
        until=lambda calls: all(call.done for _, call in calls),
    )


def _checkpoint(ctx: Context) -> dict[str, Any]:
    """The kubelet's DRA checkpoint: ``{"Data": "<JSON>", "Checksum": n}``, Data decoded."""
    kubelet_root: Path = ctx.driver.registry_dir.parent
    outer = json.loads((kubelet_root / CHECKPOINT).read_text())
    return json.loads(outer["Data"])


def _checkpointed_devices(ctx: Context, uid: str) -> list[dict] | None:
    """The devices the checkpoint holds for claim ``uid`` from our driver; None: no entry."""
    entries = [
        entry
        for entry in _checkpoint(ctx).get("ClaimInfoStateList") or []
        if entry.get("ClaimUID") == uid
    ]
    assert len(entries) <= 1, f"the checkpoint holds claim {uid} {len(entries)} times"
    if not entries:
        return None
    state = (entries[0].get("DriverState") or {}).get(ctx.builder.driver_name) or {}
    return list(state.get("Devices") or [])


def _expect_one_device(ctx: Context, uid: str) -> None:
    devices = _checkpointed_devices(ctx, uid)
    ctx.log(f"{ctx.phase}: checkpointed devices of claim {uid}: {devices}")
    assert devices is not None, f"claim {uid} is not in the kubelet's checkpoint"
    names = [(d.get("PoolName"), d.get("DeviceName"), d.get("RequestNames")) for d in devices]
    assert len(names) == 1, f"claim {uid}: want one checkpointed device, got {names}"


SUBTEST = Subtest(
    name="kubelet-restart",
    initial=initial,
    resources=devices_per_node(1),
)
