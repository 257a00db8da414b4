"""deleted-while-kubelet-down: a pod deleted while its node's kubelet is down is finished by the
kubelet that comes back, of the other release, from what its predecessor checkpointed.

An upgrade of a node stops its kubelet; the API server keeps taking requests (or is back first,
when everything restarts together), and users keep deleting pods. Such a pod is marked for
deletion with nobody on the node to act on it. The kubelet that starts then must find it: kill
its containers, call NodeUnprepareResources for its claim (which only the checkpoint the kubelet
before it wrote tells it was prepared), take the claim out of the checkpoint, and let the pod
object go. A kubelet that misreads its predecessor's checkpoint leaves the claim prepared on the
node (the driver's device held by a pod that no longer exists), or the pod stuck Terminating.
kubelet-restart covers the other case, a pod deleted while the kubelet runs with its unprepare
hanging across the restart.

Before each cluster step, a phase runs a pod with a claim and has the step delete it while the
kubelet is down (``Context.while_kubelet_down``; the pod carries the disruption annotation, so
the suite's disruption net expects it gone). The phase after the step checks that the claim was
unprepared exactly once, by the kubelet that runs now, that the claim left the checkpoint and the
driver, its CDI spec removed, and that the pod object went; then it does the same for the next
step. A step that does not restart the kubelet (control-plane-first) deletes nothing, and the
phase says so (nothing to prove).
"""

from __future__ import annotations

from dataclasses import dataclass

from e2e_dra.builder import DISRUPTION_ANNOTATION
from e2e_dra.kube import Kube
from e2e_dra.subtest import PHASES, Context, Phase, Subtest, WhileKubeletDown
from e2e_dra.subtest_kit import (
    REGISTRATION,
    UNPREPARE,
    claim_and_pod,
    devices_per_node,
    driver_calls,
    remove,
    wait_out_of_checkpoint,
)
from e2e_dra.waits import eventually

# From the kubelet's start: it registers the driver, syncs the deleted pod (its pod workers start
# with the first pod list) and unprepares the claim; a failed try is retried 10 to 15 s later, and
# the DRA manager's reconcile loop, which unprepares the claims of pods it no longer knows, runs
# once a minute. Two such periods.
UNPREPARE_TIMEOUT = 150.0
# From the unprepare to the pod object's removal: the status manager's next sync.
POD_GONE_TIMEOUT = 120.0


@dataclass(frozen=True)
class _Deleted:
    """A running pod the next cluster step deletes while the kubelet is down."""

    pod: dict
    claim: dict
    claim_uid: str
    calls_before: int  # the driver's call log's length when the phase ended
    asked: WhileKubeletDown

    @property
    def pod_name(self) -> str:
        return str(self.pod["metadata"]["name"])


def initial(ctx: Context) -> Phase:
    first = _deleting(ctx, 0)
    assert first is not None  # a chain has more than one phase
    return first


def _deleting(ctx: Context, index: int) -> Phase | None:
    """This phase's pod, to be deleted in the next step; the next phase checks it (and, unless
    it is the last, does the same for the step after it)."""
    if index + 1 >= len(PHASES):
        return None
    deleted = _run_and_ask_deletion(ctx)

    def after_step(ctx: Context) -> Phase | None:
        _finished_by_the_new_kubelet(ctx, deleted)
        return _deleting(ctx, index + 1)

    return after_step


def _run_and_ask_deletion(ctx: Context) -> _Deleted:
    b = ctx.builder
    claim, pod = claim_and_pod(b)
    pod_name = pod["metadata"]["name"]
    with ctx.step("a pod runs, its claim prepared by this kubelet"):
        created, _ = b.create(claim, pod)
        b.test_pod(pod)
        uid = created["metadata"]["uid"]
        assert ctx.driver.cdi_spec_files(uid), f"claim {uid} has no CDI spec while its pod runs"
    why = "deleted by its subtest while the kubelet is down in this step"
    b.patch("pods", pod_name, {"metadata": {"annotations": {DISRUPTION_ANNOTATION: why}}})
    url = b.url("pods", pod_name)

    def delete(kube: Kube) -> None:
        kube.delete(url)

    asked = ctx.while_kubelet_down(f"delete pod {pod_name}", delete)
    return _Deleted(pod, claim, uid, len(ctx.driver.calls.records), asked)


def _finished_by_the_new_kubelet(ctx: Context, deleted: _Deleted) -> None:
    b = ctx.builder
    uid = deleted.claim_uid
    if not deleted.asked.happened():
        ctx.nothing_to_prove(f"pod {deleted.pod_name} was not deleted: {deleted.asked.not_done}")
        remove(b, [deleted.pod], [deleted.claim])  # the next phase's pod needs the device
        return
    with ctx.step(
        "the kubelet that came back unprepares the deleted pod's claim once, from the "
        "checkpoint its predecessor wrote"
    ):
        registered = [i for i, _ in driver_calls(ctx, REGISTRATION) if i >= deleted.calls_before]
        assert registered, (
            f"the driver was not registered again after the step (no {REGISTRATION.lstrip('/')} "
            "since): the kubelet did not come back"
        )
        calls = eventually(
            lambda: [
                (i, c) for i, c in driver_calls(ctx, UNPREPARE, uid) if i >= deleted.calls_before
            ],
            what=f"a NodeUnprepareResources call for claim {uid} of the deleted pod",
            timeout=UNPREPARE_TIMEOUT,
            poll=0.5,
            until=lambda found: any(c.done and c.error is None for _, c in found),
        )
        succeeded = [i for i, c in calls if c.done and c.error is None]
        assert len(succeeded) == 1 and succeeded[0] > registered[0], (
            f"NodeUnprepareResources of claim {uid}: want one success after the new kubelet "
            f"registered the driver (call {registered[0]}), got successes at calls {succeeded}"
        )
    with ctx.step("the deleted pod goes away"):
        b.wait_pod_gone(deleted.pod_name, timeout=POD_GONE_TIMEOUT)
    with ctx.step("its claim leaves the checkpoint and the driver, its CDI spec removed"):
        wait_out_of_checkpoint(ctx, uid, UNPREPARE_TIMEOUT)
        prepared = [ref.uid for ref in ctx.driver.prepared_claims()]
        assert uid not in prepared, f"the driver still has claim {uid} prepared: {prepared}"
        left = ctx.driver.cdi_spec_files(uid)
        assert not left, f"claim {uid}: CDI specs {left} are left after its pod went"
    remove(b, [], [deleted.claim])


SUBTEST = Subtest(
    name="deleted-while-kubelet-down",
    keps=(4381,),
    initial=initial,
    resources=devices_per_node(1),
)
