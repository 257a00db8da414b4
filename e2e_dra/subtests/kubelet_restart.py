"""kubelet-restart: a kubelet that restarts while NodePrepareResources hangs hands the claim over
to the next kubelet cleanly, so does one that restarts while NodeUnprepareResources of a deleted
pod's claim hangs, and a kubelet that comes back after a (simulated) reboot prepares the claim
again.

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

The reboot (kubernetes#141433: after one, the CDI spec was gone and the pod stuck in
CreateContainerError). A reboot stops the kubelet, kills every process of the node, and empties
/var/run (a tmpfs), where CDI specs live; the kubelet's checkpoint stays, as /var/lib/kubelet is
on disk. (Upstream's test/e2e_dra/run.sh removes /var/run/cdi and /var/lib/kubelet/*_state, but
before a run, to start from a clean node, not as a model of a reboot.) What the kubelet loses is
its memory of which claims it prepared, which it keeps nowhere else; so when it creates the pod's
sandbox again, it calls NodePrepareResources again and the driver can write the spec anew.

The suite restarts the kubelet between phases (the downgrade); the subtest cannot stop it, so it
simulates the rest right after that restart, before the new kubelet has any reason to prepare:
it deletes the claim's CDI spec files, makes the driver forget what it prepared (a driver
process restarts in a reboot too; ours keeps no checkpoint), and SIGKILLs the pod's sandbox and
container through containerd (their metadata stays, as after a real reboot). The restarted
kubelet cannot tell this from a reboot: no sandbox, claim not prepared in its memory. Then a new
NodePrepareResources must succeed, exactly once, the spec file must be back, and the pod must run
again in a new container with the claim's env, its device still checkpointed once (a kubelet
without the fix lists it twice, kubernetes#140471: pinned, see ``DUPLICATING_KUBELETS`` and
docs/kubernetes-findings.md). Only this
pod's processes die: the node is shared with the other subtests. The pod restarts with
``restartPolicy: Always`` (a pod with ``Never`` is not started again after a reboot at all). A
suite whose downgrade leaves the kubelet running (control-plane-first) has no reboot to simulate:
the running kubelet would reuse its memory and never call the driver, so the phase says it had
nothing to prove there (``nothing_to_prove``) and records ``reboot_simulated``.

In a suite whose upgrade leaves the kubelet running, the same kubelet's retried call prepares
instead; everything else is checked the same way.

The unprepare across the restart, with a second claim and pod (their calls counted by claim, apart
from the first's). At the start of the initial phase the second pod runs, its claim prepared by
this kubelet and in its checkpoint with the pod's UID. Then the driver blocks NodeUnprepareResources
and the pod is deleted (not waited for): the kubelet stops the container and calls
NodeUnprepareResources, which hangs. Until that call succeeds the kubelet keeps the claim in its
checkpoint (it takes it out after the call) and the pod object in the API (its status manager
deletes a pod only once nothing is left to unprepare, PodCouldHaveRunningContainers). The upgrade
restarts the kubelet under the hanging call. The new kubelet, of the other release, knows the
claim only from the checkpoint the old one wrote: it finds the pod marked for deletion, finishes
its termination, and calls NodeUnprepareResources for the checkpointed claim (a call before it
registered the driver fails inside the kubelet, whose pod worker retries every 10 to 15 s). After
the upgrade the block is released: exactly one NodeUnprepareResources call for the claim succeeded
with its kubelet listening, after the new kubelet registered the driver; the others ended with
their kubelet gone (the old kubelet's call too: the driver did unprepare when it ended, so the
driver's own state alone says nothing about the new kubelet; the call log, the checkpoint and the
pod do). The pod object goes away, the claim leaves the checkpoint, and the driver no longer has
it prepared, its CDI spec removed. A suite whose upgrade leaves the kubelet running
(control-plane-first) hands nothing over: the same kubelet retries after its call's 45 s deadline,
the same checks hold, and the phase says it had nothing to prove for the handover.

The hanging unprepare holds the driver's one-call-at-a-time lock (as upstream's driver, whose
calls are serialised too), so the first pod's prepare, which comes after it, waits behind it as
well as behind its own block: the after-upgrade phase releases both blocks at once.

The after-upgrade phase then does the same with a third pod, so that the downgrade hands a
deleted pod's claim the other way: the newer kubelet's checkpoint, read by the older one (a
checkpoint format that only moves forward would strand the claim prepared on the node). The
after-downgrade phase releases that block first (the reboot's prepare would wait behind it) and
checks the same: one successful unprepare after the older kubelet registered the driver, the pod
gone, the claim out of the checkpoint, its CDI spec removed.
"""

from __future__ import annotations

import subprocess
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.builder import NotFound
from e2e_dra.driver import CLIENT_GONE, GRPCCall
from e2e_dra.provision import running_ctr
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    PREPARE,
    REGISTRATION,
    UNPREPARE,
    checkpoint_entry,
    checkpointed_devices,
    claim_and_pod,
    devices_per_node,
    driver_calls,
    kubelet_version,
    nudge,
    older_writes_hold,
    wait_out_of_checkpoint,
)
from e2e_dra.versions import matches
from e2e_dra.waits import consistently, eventually

CALL_TIMEOUT = 60.0
# How long after the kubelet synced a running pod no prepare call may come.
NO_PREPARE_FOR = 5.0
# containerd's namespace for what the CRI plugin runs.
CRI_NAMESPACE = "k8s.io"
SANDBOX_LABEL = 'labels."io.cri-containerd.kind"==sandbox'
# The kubelet notices the dead sandbox at its next relist (1 s), then prepares and starts anew.
POD_BACK_TIMEOUT = 120.0
# How long after the block's release the kubelet may take to unprepare the deleted pod's claim.
# Its pod worker retries a failed termination every 10 to 15 s (kubelet.go backOffPeriod, with
# jitter); a call made before the release hangs until then or until its 45 s deadline
# (pkg/kubelet/cm/dra/plugin: defaultClientCallTimeout), and the DRA manager's reconcile loop,
# which unprepares the claims of pods the kubelet no longer knows, runs once a minute
# (pkg/kubelet/cm/dra/manager.go: defaultReconcilePeriod). Two such periods and a deadline.
UNPREPARE_TIMEOUT = 180.0
# From the claim's unprepare to the pod's deletion: the status manager's next sync (at most 10 s).
POD_GONE_TIMEOUT = 120.0
# Kubelets that append a re-prepared claim's devices to those its checkpoint already holds
# (kubernetes#140471: every kubelet before 1.34.12, 1.35 before 1.35.10, 1.36 before 1.36.4; those
# and 1.37.0 reset the driver's devices before recording an answer, kubernetes#140274 and its
# picks #140953 (1.34.12, as its source shows), #140954 (1.35.10; the proxy here serves 1.35 up
# to 1.35.8, which lacks it) and #140955 (1.36.4)).
# Their checkpoint lists the device once more after the reboot's prepare. Pinned here rather than
# declared as a KnownBug, which would give up the whole phase: the unprepare checks after it
# still run on those kubelets. A release that stops doing it fails the phase: narrow it then.
DUPLICATING_KUBELETS = "<1.34.12 || >=1.35.0,<1.35.10 || >=1.36.0,<1.36.4"
KNOWN_BUG = (
    "kubernetes#140471: a re-prepared claim's devices are checkpointed again "
    "(fixed in 1.34.12, 1.35.10, 1.36.4 and 1.37.0 by kubernetes#140274 and its picks)"
)


class _Block:
    """One of the driver's blocks, held from one phase into the next; released once."""

    def __init__(self, block: AbstractContextManager[None]) -> None:
        self._block = block
        self._block.__enter__()
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._block.__exit__(None, None, None)


@dataclass(frozen=True)
class _Unpreparing:
    """A pod deleted while the driver holds its claim's NodeUnprepareResources."""

    pod_name: str
    claim_name: str
    claim_uid: str
    spec_files: list[Path]
    block: _Block


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claim = b.external_claim()
    pod = b.pod_external(claim["metadata"]["name"])
    pod["spec"]["restartPolicy"] = "Always"  # comes back after the simulated reboot
    pod_name = pod["metadata"]["name"]
    # First, while nothing blocks a prepare: the second pod's must go through.
    unpreparing = _delete_while_unprepare_hangs(ctx)
    block = _Block(ctx.driver.block_prepare())
    # Released at the latest by the tear-down, if the chain breaks before after_upgrade does it.
    b.defer(lambda _b: block.release())
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
        devices = checkpointed_devices(ctx, uid)
        assert devices == [], f"checkpoint has devices {devices} for an unprepared claim"
    registrations = _indices(ctx, REGISTRATION)
    initial_kubelet = _kubelet_version(ctx)
    ctx.log(
        f"{ctx.phase}: phase ends with NodePrepareResources of claim {uid} and "
        f"NodeUnprepareResources of claim {unpreparing.claim_uid} blocked"
    )

    def after_upgrade(ctx: Context) -> Phase:
        restarted = _restarted(ctx, len(registrations), initial_kubelet)
        ctx.facts["kubelet_restarted_during_upgrade"] = restarted
        # Both at once: a call waiting on one block holds up the calls behind it (module doc).
        block.release()
        unpreparing.block.release()
        nudge(ctx.builder, pod_name, ctx.phase)
        ctx.builder.test_pod(pod)
        with ctx.step("one prepare call succeeded, the kubelet's after its restart"):
            calls = _all_done(ctx, PREPARE, uid)
            ctx.log(
                f"{ctx.phase}: kubelet restarted: {restarted}; NodePrepareResources of the "
                f"claim: {_outcomes(calls)}"
            )
            ctx.facts["prepare_calls/after-cluster-upgrade"] = len(calls)
            last_registration = _indices(ctx, REGISTRATION)[-1] if restarted else None
            _one_success(calls, PREPARE, uid, after=last_registration)
        with ctx.step("the checkpoint holds the claim's device once"):
            _expect_one_device(ctx, uid)
        _unprepared_after_restart(ctx, unpreparing, restarted, len(registrations))
        prepared = len(calls)
        # The hand-over the other way: this kubelet's checkpoint, read by the older one.
        handed_down = _delete_while_unprepare_hangs(ctx)
        registered = len(_indices(ctx, REGISTRATION))
        kubelet = _kubelet_version(ctx)

        def after_downgrade(ctx: Context) -> Phase:
            rebooted = _restarted(ctx, registered, kubelet)
            # First: the hanging unprepare holds the driver's calls, the reboot's prepare too.
            handed_down.block.release()
            _unprepared_after_restart(ctx, handed_down, rebooted, registered)
            ctx.builder.wait_running(pod_name)
            with ctx.step("a kubelet restarted under a running pod prepares nothing again"):
                # The pod update makes the kubelet sync the pod now, which is when it would
                # prepare; then no call may come for a while.
                nudge(ctx.builder, pod_name, ctx.phase)
                consistently(
                    lambda: len(_calls(ctx, PREPARE, uid)),
                    what=(
                        f"no more NodePrepareResources calls for claim {uid} than the "
                        f"{prepared} before the downgrade (the pod's sandbox exists)"
                    ),
                    duration=NO_PREPARE_FOR,
                    poll=0.5,
                    holds=lambda count: count == prepared,
                )
            with ctx.step("the checkpoint still holds the claim's device once"):
                _expect_one_device(ctx, uid)
            ctx.facts["reboot_simulated"] = rebooted
            if rebooted:
                _reboot(ctx, pod_name, uid)
            else:
                ctx.nothing_to_prove(
                    "the kubelet did not restart in this suite's downgrade: no reboot to "
                    "simulate (a running kubelet never prepares a prepared claim again)"
                )
            with ctx.step("deleting the pod unprepares the claim once"):
                ctx.builder.delete_pod_and_wait(pod_name)
                eventually(
                    ctx.driver.prepared_claims,
                    what=f"the driver to unprepare claim {uid}",
                    timeout=CALL_TIMEOUT,
                    poll=0.5,
                    until=lambda refs: all(ref.uid != uid for ref in refs),
                )
                unprepares = _all_done(ctx, UNPREPARE, uid)
                errors = [call.error for _, call in unprepares]
                assert errors == [None], (
                    f"NodeUnprepareResources of claim {uid}: want one successful call, got "
                    f"{len(unprepares)} with errors {errors}"
                )
            with ctx.step("the claim leaves the checkpoint"):
                wait_out_of_checkpoint(ctx, uid, CALL_TIMEOUT)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _delete_while_unprepare_hangs(ctx: Context) -> _Unpreparing:
    """The second pod runs, then is deleted while the driver blocks its claim's unprepare; the
    phase ends with the kubelet's NodeUnprepareResources call hanging (module doc)."""
    b = ctx.builder
    claim, pod = claim_and_pod(b)
    pod_name = pod["metadata"]["name"]
    with ctx.step("another pod runs, its claim prepared and checkpointed by this kubelet"):
        created_claim, created_pod = b.create(claim, pod)
        uid, pod_uid = created_claim["metadata"]["uid"], created_pod["metadata"]["uid"]
        b.test_pod(pod)
        _expect_one_device(ctx, uid)
        _expect_pod_reference(ctx, uid, pod_uid)
        specs = ctx.driver.cdi_spec_files(uid)
        assert specs, f"claim {uid} has no CDI spec in {ctx.driver.cdi_dir} while its pod runs"
    block = _Block(ctx.driver.block_unprepare())
    # Released at the latest by the tear-down, if the chain breaks before the next phase does it.
    b.defer(lambda _b: block.release())
    with ctx.step("deleting that pod leaves its claim's NodeUnprepareResources hanging"):
        b.delete("pods", pod_name)
        calls = eventually(
            lambda: _calls(ctx, UNPREPARE, uid),
            what=f"a NodeUnprepareResources call for claim {uid}",
            timeout=CALL_TIMEOUT,
            poll=0.5,
        )
        ended = [call.error for call in calls if call.done]
        assert not ended, f"NodeUnprepareResources of claim {uid} ended under the block: {ended}"
    with ctx.step("meanwhile the pod object, the checkpoint entry and the CDI spec stay"):
        try:
            deleted = b.read_pod(pod_name)["metadata"].get("deletionTimestamp")
        except NotFound:
            raise AssertionError(
                f"pod {pod_name} is gone while its claim {uid} is not unprepared"
            ) from None
        assert deleted, f"pod {pod_name} is not marked for deletion"
        _expect_one_device(ctx, uid)
        _expect_pod_reference(ctx, uid, pod_uid)
        assert ctx.driver.cdi_spec_files(uid) == specs, (
            f"claim {uid}: CDI specs {ctx.driver.cdi_spec_files(uid)} under a blocked unprepare, "
            f"want {specs}"
        )
    return _Unpreparing(pod_name, claim["metadata"]["name"], uid, specs, block)


def _unprepared_after_restart(
    ctx: Context, gone: _Unpreparing, restarted: bool, registered: int
) -> None:
    """The deleted pod's claim, its unprepare released: the kubelet that runs now unprepares it
    once, from what the checkpoint says (module doc). ``registered``: how many registrations of
    the driver the call log held when the phase before ended."""
    uid = gone.claim_uid
    with ctx.step(
        "one unprepare call for the deleted pod's claim succeeded, the kubelet's after its restart"
    ):
        eventually(
            lambda: [c for c in _calls(ctx, UNPREPARE, uid) if c.done and c.error is None],
            what=f"a NodeUnprepareResources call for claim {uid} that its kubelet saw succeed",
            timeout=UNPREPARE_TIMEOUT,
            poll=0.5,
        )
        calls = _all_done(ctx, UNPREPARE, uid)
        ctx.log(
            f"{ctx.phase}: kubelet restarted: {restarted}; NodeUnprepareResources of the deleted "
            f"pod's claim: {_outcomes(calls)}"
        )
        ctx.facts[f"unprepare_calls/{ctx.phase}"] = len(calls)
        ctx.facts[f"unprepare_errors/{ctx.phase}"] = [
            call.error for _, call in calls if call.error is not None
        ]
        # The new kubelet's first registration: the old kubelet's calls all began before it.
        first_registration = _indices(ctx, REGISTRATION)[registered] if restarted else None
        _one_success(calls, UNPREPARE, uid, after=first_registration)
    with ctx.step("the deleted pod goes away"):
        ctx.builder.wait_pod_gone(gone.pod_name, timeout=POD_GONE_TIMEOUT)
    with ctx.step("the deleted pod's claim leaves the checkpoint"):
        wait_out_of_checkpoint(ctx, uid, CALL_TIMEOUT)
    with ctx.step("the driver no longer has the claim prepared, its CDI spec is gone"):
        prepared = [ref.uid for ref in ctx.driver.prepared_claims()]
        assert uid not in prepared, f"the driver still has claim {uid} prepared: {prepared}"
        left = ctx.driver.cdi_spec_files(uid)
        assert not left, (
            f"claim {uid}: CDI specs {left} are left, want none (had {gone.spec_files})"
        )
    # Its device is free for the next pod only once the claim lets go of it.
    ctx.builder.delete("resourceclaims", gone.claim_name)
    if not restarted:
        ctx.nothing_to_prove(
            "the kubelet did not restart in this suite's cluster step: the deleted pod's claim "
            "was unprepared by the kubelet that prepared it, not handed over through its "
            "checkpoint"
        )


def _restarted(ctx: Context, registered: int, kubelet: str) -> bool:
    """Whether the kubelet restarted since the call log held ``registered`` registrations of the
    driver and ``kubelet`` ran: it registered the driver again, or another release runs now (then
    that kubelet's registration must come)."""
    if len(_indices(ctx, REGISTRATION)) > registered:
        return True
    now = _kubelet_version(ctx)
    if now == kubelet:
        return False
    eventually(
        lambda: len(_indices(ctx, REGISTRATION)) > registered,
        what=f"the new kubelet ({now}) to register the driver",
        timeout=CALL_TIMEOUT,
        poll=0.5,
    )
    return True


def _one_success(
    calls: list[tuple[int, GRPCCall]], method: str, uid: str, *, after: int | None
) -> int:
    """The place in the call log of the one ended call of ``method`` for claim ``uid`` that its
    kubelet saw succeed; every other one must have ended with its kubelet gone. ``after``: the
    record the successful call must come after (the new kubelet's registration of the driver),
    None: any."""
    name = method.lstrip("/")
    succeeded = [index for index, call in calls if call.error is None]
    failed = [call.error for _, call in calls if call.error is not None]
    assert len(succeeded) == 1, (
        f"{name} of claim {uid} succeeded {len(succeeded)} times with the kubelet listening, "
        f"want once; errors of the others: {failed}"
    )
    assert all(error == CLIENT_GONE for error in failed), (
        f"{name} of claim {uid}: calls failed other than with their kubelet gone: {failed}"
    )
    if after is not None:
        assert succeeded[0] > after, (
            f"the successful {name} (record {succeeded[0]}) started before the new kubelet "
            f"registered the driver (record {after})"
        )
    return succeeded[0]


def _outcomes(calls: list[tuple[int, GRPCCall]]) -> str:
    """The calls for a log line: how many, and each one's place in the log and error."""
    return f"{len(calls)} calls: " + ", ".join(
        f"#{index} {call.error or 'ok'}" for index, call in calls
    )


def _reboot(ctx: Context, pod_name: str, uid: str) -> None:
    """The simulated reboot under the restarted kubelet, and what must follow (module doc)."""
    with ctx.step("a reboot wipes the CDI specs and the driver's memory, kills the pod"):
        specs = ctx.driver.cdi_spec_files(uid)
        assert specs, f"claim {uid} has no CDI spec in {ctx.driver.cdi_dir} before the reboot"
        for spec in specs:
            spec.unlink()
        forgotten = [ref.uid for ref in ctx.driver.forget_prepared_claims()]
        assert forgotten == [uid], f"the driver had prepared {forgotten}, want only {uid}"
        pod = ctx.builder.read_pod(pod_name)
        before = _container(pod).get("containerID")
        mark = len(ctx.driver.calls.records)
        killed = _kill_pod_processes(pod["metadata"]["uid"])
        ctx.log(f"{ctx.phase}: removed {[s.name for s in specs]}; killed tasks {killed}")
    with ctx.step("the pod runs again in a new container"):
        eventually(
            lambda: _container(ctx.builder.read_pod(pod_name)),
            what=f"pod {pod_name} to run again in a container other than {before}",
            timeout=POD_BACK_TIMEOUT,
            until=lambda status: (
                status.get("containerID") not in (None, before)
                and "running" in (status.get("state") or {})
            ),
        )
    with ctx.step("the restarted kubelet prepared the claim again, once"):
        calls = eventually(
            lambda: [call for index, call in driver_calls(ctx, PREPARE, uid) if index >= mark],
            what=f"every NodePrepareResources call for claim {uid} after the reboot to end",
            timeout=CALL_TIMEOUT,
            poll=0.5,
            until=lambda calls: all(call.done for call in calls),
        )
        errors = [call.error for call in calls]
        ctx.facts["prepare_calls/after-reboot"] = len(calls)
        assert errors == [None], (
            f"NodePrepareResources of claim {uid} after the reboot: want one successful call, "
            f"got {len(calls)} with errors {errors}"
        )
    with ctx.step("the CDI spec is back and the container has the claim's env"):
        assert ctx.driver.cdi_spec_files(uid) == specs, (
            f"claim {uid}: CDI specs {ctx.driver.cdi_spec_files(uid)} after the reboot, "
            f"want {specs}"
        )
        ctx.builder.test_pod(ctx.builder.read_pod(pod_name))
    kubelet = _kubelet_version(ctx)
    if matches(DUPLICATING_KUBELETS, kubelet):
        with ctx.step(f"the checkpoint holds the claim's device twice ({kubelet}: {KNOWN_BUG})"):
            _expect_devices(ctx, uid, 2)
            ctx.facts["known_bug/after-reboot"] = f"{kubelet}: {KNOWN_BUG}"
    else:
        with ctx.step("the checkpoint holds the claim's device once after the reboot"):
            _expect_one_device(ctx, uid)


def _kubelet_version(ctx: Context) -> str:
    return kubelet_version(ctx.builder, ctx.nodes[0])


def _container(pod: dict) -> dict:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return statuses[0]


def _kill_pod_processes(pod_uid: str) -> list[str]:
    """SIGKILL every running task of the pod (sandbox and containers) in containerd's CRI
    namespace; the tasks killed. The CRI plugin sees them exit as a reboot would leave them."""
    ctr = [*running_ctr(), "-n", CRI_NAMESPACE]
    pod = f'labels."io.kubernetes.pod.uid"=={pod_uid}'
    ours = _ctr(ctr, "containers", "ls", "-q", pod).split()
    sandboxes = set(_ctr(ctr, "containers", "ls", "-q", f"{pod},{SANDBOX_LABEL}").split())
    alive = {
        fields[0]
        for line in _ctr(ctr, "tasks", "ls").splitlines()[1:]
        if (fields := line.split()) and fields[-1] == "RUNNING"
    }
    # The sandbox first: a container dying in a live sandbox would just be restarted in it.
    running = sorted((task for task in ours if task in alive), key=lambda t: t not in sandboxes)
    assert len(running) >= 2 and running[0] in sandboxes, (
        f"want a running sandbox and container of pod {pod_uid} in containerd: tasks of the pod "
        f"{running}, its sandboxes {sorted(sandboxes)}"
    )
    for task in running:
        _ctr(ctr, "tasks", "kill", "--signal", "SIGKILL", task)
    return running


def _ctr(ctr: list[str], *args: str) -> str:
    proc = subprocess.run([*ctr, *args], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(args[:2])} failed: {proc.stderr.strip()}")
    return proc.stdout


def _calls(ctx: Context, method: str, uid: str | None = None) -> list[GRPCCall]:
    return [call for _, call in driver_calls(ctx, method, uid)]


def _indices(ctx: Context, method: str) -> list[int]:
    return [index for index, _ in driver_calls(ctx, method)]


def _all_done(ctx: Context, method: str, uid: str) -> list[tuple[int, GRPCCall]]:
    """The calls of ``method`` for the claim, once none of them runs any more."""
    return eventually(
        lambda: driver_calls(ctx, method, uid),
        what=f"every {method.lstrip('/')} call for claim {uid} to end",
        timeout=CALL_TIMEOUT,
        poll=0.5,
        until=lambda calls: all(call.done for _, call in calls),
    )


def _expect_pod_reference(ctx: Context, uid: str, pod_uid: str) -> None:
    """The checkpoint's entry for claim ``uid`` names pod ``pod_uid`` among its users (a set,
    stored as ``{"<pod uid>": {}}``): what a kubelet reads to unprepare the claim for that pod."""
    entry = checkpoint_entry(ctx, uid)
    assert entry is not None, f"claim {uid} is not in the kubelet's checkpoint"
    pods = sorted(entry.get("PodUIDs") or {})
    assert pod_uid in pods, f"the checkpoint has claim {uid} for pods {pods}, not for {pod_uid}"


def _expect_one_device(ctx: Context, uid: str) -> None:
    _expect_devices(ctx, uid, 1)


def _expect_devices(ctx: Context, uid: str, count: int) -> None:
    """The checkpoint lists the claim's one device ``count`` times (more than once: the known
    bug, each entry the same device)."""
    devices = checkpointed_devices(ctx, uid)
    ctx.log(f"{ctx.phase}: checkpointed devices of claim {uid}: {devices}")
    assert devices is not None, f"claim {uid} is not in the kubelet's checkpoint"
    names = [(d.get("PoolName"), d.get("DeviceName"), d.get("RequestNames")) for d in devices]
    if count == 1:
        assert len(names) == 1, f"claim {uid}: want one checkpointed device, got {names}"
        return
    assert len(names) == count and len(set(map(str, names))) == 1, (
        f"claim {uid}: this kubelet was known to list its device {count} times ({KNOWN_BUG}), "
        f"got {names}; if the kubelet is fixed, narrow DUPLICATING_KUBELETS"
    )


SUBTEST = Subtest(
    name="kubelet-restart",
    keps=(4381,),
    initial=initial,
    # Two claims at a time: the first pod's, and the deleted second pod's until it is unprepared.
    resources=devices_per_node(2),
    # Not alone: what it kills (its pod's sandbox) and removes (its claim's CDI spec) is its own,
    # and the kubelet calls it counts are those for its own driver.
)
