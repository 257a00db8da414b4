"""binding-conditions: devices with binding conditions (DRADeviceBindingConditions) hold a pod
back from its node until the claim's device status says the device is ready, across upgrade and
downgrade; a pod left waiting when the scheduler is replaced binds after the restart, and a
failure condition sends its claim back to scheduling at once, under the scheduler of each phase.

The driver publishes a cluster-wide pool of attachable devices (``bindsToNode``, binding
condition ``attached``, binding failure condition ``failed``), as a fabric-attached device would
be. The scheduler allocates one to a pod's claim, copies both condition lists into the
allocation result, pins the allocation to the pod's node (``bindsToNode``: a cluster-wide device
would otherwise get no node selector) and waits in PreBind (event ``BindingConditionsPending``)
until the claim's ``status.devices`` has ``attached`` true. The test sets the condition, as a
driver's controller would (server-side apply, its own field manager).

When the driver sets ``failed`` instead, the scheduler must give the device up at once: the
claim is deallocated and allocated anew (a later allocation timestamp, no device status) and the
pod waits on the new allocation. That is scheduler code (Filter finds the failure, PostFilter
deallocates), so every phase's scheduler is put through it: checked only after the downgrade, it
would see the older release's scheduler alone. The wait is ``RESCHEDULE_TIMEOUT`` (120 s; a few
seconds normally, as PreBind looks every 5 s), well under the binding timeout (600 s), after
which even a scheduler that ignores the failure gives the device up.

- before the upgrade: pod X binds once ``attached`` is set; pod Y waits, ``failed`` gets its
  claim allocated anew, and Y is left waiting;
- after the upgrade: X's allocation and device status are as recorded; the new scheduler takes
  Y over and binds it once ``attached`` is set; pod Z waits, fails over the same way, and is
  left waiting;
- after the downgrade: X and Y as recorded; Z still waits; ``failed`` again gets its claim
  allocated anew by the older scheduler, and Z binds once ``attached`` is set;
- after the re-upgrade: what the older release wrote still holds; pod W waits and fails over.

Each bound pod must also run untouched across every restart after it bound (X across both, Y
across the downgrade), checked first thing in the phase: the same pod, its container neither
restarted nor replaced, its claim still reserved for it and the driver's env for its claim still
in its container (``subtest_kit.still_untouched``).
"""

from __future__ import annotations

from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import Running, older_writes_hold, running, still_untouched
from e2e_dra.subtests._binding_conditions import (
    ATTACHED,
    GATES,
    check_pod,
    check_recorded,
    check_still_waiting,
    claim_and_pod,
    claim_status,
    fail_and_reallocate,
    pod_env,
    resources,
    set_condition,
    wait_for_binding_conditions,
)


def initial(ctx: Context) -> Phase:
    recorded: dict[str, dict] = {}  # claim name -> its status once its pod runs
    bound: dict[str, Running] = {}  # claim name -> its pod as it ran once it bound
    with ctx.step("a pod waits for its device to be attached, then binds"):
        claim_x, pod_x = claim_and_pod(ctx)
        wait_for_binding_conditions(ctx, claim_x, pod_x)
        set_condition(ctx, claim_x, ATTACHED)
        check_pod(ctx, pod_x)
        recorded[claim_x] = claim_status(ctx, claim_x)
        bound[claim_x] = running(ctx.builder, pod_x["metadata"]["name"])
    with ctx.step("another pod is left waiting"):
        claim_y, pod_y = claim_and_pod(ctx)
        waiting_y = wait_for_binding_conditions(ctx, claim_y, pod_y)
    waiting_y = _failure_reallocates(ctx, claim_y, pod_y, waiting_y)
    pods = {claim_x: pod_x}

    def after_upgrade(ctx: Context) -> Phase:
        with ctx.step("the bound pod runs untouched"):
            _still_untouched(ctx, bound)
        with ctx.step("the bound claim's allocation and device status survived the upgrade"):
            check_recorded(ctx, recorded, pods)
        with ctx.step("the waiting pod binds under the new scheduler once attached"):
            check_still_waiting(ctx, claim_y, pod_y, waiting_y)
            set_condition(ctx, claim_y, ATTACHED)
            check_pod(ctx, pod_y)
            recorded[claim_y] = claim_status(ctx, claim_y)
            pods[claim_y] = pod_y
            bound[claim_y] = running(ctx.builder, pod_y["metadata"]["name"])
        with ctx.step("a third pod is left waiting"):
            claim_z, pod_z = claim_and_pod(ctx)
            waiting_z = wait_for_binding_conditions(ctx, claim_z, pod_z)
        waiting_z = _failure_reallocates(ctx, claim_z, pod_z, waiting_z)

        def after_downgrade(ctx: Context) -> Phase:
            with ctx.step("both bound pods run untouched"):
                _still_untouched(ctx, bound)
            with ctx.step("both bound claims survived the downgrade"):
                check_recorded(ctx, recorded, pods)
            with ctx.step("the waiting pod still waits under the older scheduler"):
                check_still_waiting(ctx, claim_z, pod_z, waiting_z)
            _failure_reallocates(ctx, claim_z, pod_z, waiting_z)
            with ctx.step("the pod binds once the new allocation is attached"):
                set_condition(ctx, claim_z, ATTACHED)
                check_pod(ctx, pod_z)
            # Strict: every pod and claim must still be there.
            for claim_name, pod in ((claim_x, pod_x), (claim_y, pod_y), (claim_z, pod_z)):
                ctx.builder.delete_pod_and_wait(pod["metadata"]["name"])
                ctx.builder.delete("resourceclaims", claim_name)
            return after_re_upgrade

        return after_downgrade

    return after_upgrade


def after_re_upgrade(ctx: Context) -> None:
    older_writes_hold(ctx)
    with ctx.step("a pod waits for its device under the re-upgraded scheduler"):
        claim_w, pod_w = claim_and_pod(ctx)
        waiting_w = wait_for_binding_conditions(ctx, claim_w, pod_w)
    _failure_reallocates(ctx, claim_w, pod_w, waiting_w)  # the tear-down removes W


def _failure_reallocates(ctx: Context, claim_name: str, pod: dict, allocation: dict) -> dict:
    """The failure path as one step, the same in every phase, so that each phase's scheduler is
    put through it; the new allocation, which the pod now waits on."""
    with ctx.step("a failure condition sends the claim back to scheduling"):
        return fail_and_reallocate(ctx, claim_name, pod, allocation)


def _still_untouched(ctx: Context, bound: dict[str, Running]) -> None:
    """Each bound pod (by its claim) runs as it did when it bound, still holding its claim."""
    for claim_name, was in bound.items():
        still_untouched(ctx.builder, was, [claim_name], env=pod_env(claim_name))


SUBTEST = Subtest(
    name="binding-conditions",
    keps=(5007, 4817),
    initial=initial,
    resources=resources,
    # A cluster-wide pool: a node identity may not publish it.
    privileged_client=True,
    feature_gates=GATES,
    # Both gates beta and on by default from 1.36 (alpha, off, in 1.34 and 1.35);
    # DRAResourceClaimDeviceStatus is GA and locked in 1.37, DRADeviceBindingConditions in 1.38.
    releases=">=1.36",
)
