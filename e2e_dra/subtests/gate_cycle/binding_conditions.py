"""binding-conditions (gate cycle): with DRADeviceBindingConditions off, the API server stores no
new ``bindingConditions``, ``bindingFailureConditions`` or ``bindsToNode`` but keeps those already
stored, and the scheduler hands out no device that has binding conditions; once the gate is on
again the fields are stored again and a pod that waited all along binds through its conditions.

Upstream's rules (pkg/registry/resource/resourceslice/strategy.go,
``dropDisabledDRADeviceBindingConditionsFields``; resourceclaim/strategy.go,
``dropDeviceBindingConditionsFields``): with the gate off the three device fields are dropped
from a slice being written unless the stored slice already has one of them, and the condition
lists are dropped from a claim's allocation results unless the stored allocation has them. The
allocator skips devices with binding conditions while the gate is off
(``isSelectable`` in k8s.io/dynamic-resource-allocation/structured).

- gate on: the driver's cluster-wide pool of attachable devices (as the upgrade subtest's) is
  stored with the fields, and so is a new probe slice; pod X binds once ``attached`` is set.
- gate off: the driver's slice (not rewritten: the kubelet does not delete cluster-wide slices)
  and the probe from before keep the fields, also through an update; a probe created now loses
  them and an update cannot add them. X's claim keeps its conditions in the allocation, X runs;
  pod W is unschedulable, as every device has binding conditions.
- gate on again: W's claim is allocated with the conditions copied, W waits for ``attached`` and
  then binds; the probe that lost the fields gets them by an update, a new probe keeps them; X
  still runs with the status it had.

DRADeviceBindingConditions is locked on from 1.38, so the control plane emulates 1.37.
"""

from __future__ import annotations

from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtests import _binding_conditions as bc
from e2e_dra.subtests._gated_fields import driver_slice, expect_fields, stored_with_fields

GATE = "DRADeviceBindingConditions"
FIELDS = (("bindingConditions",), ("bindingFailureConditions",), ("bindsToNode",))
RESULT_FIELDS = ("bindingConditions", "bindingFailureConditions")
DEVICES = bc.DEVICES  # attachable: all three fields on each


def initial(ctx: Context) -> Phase:
    with ctx.step("the driver's slice and a new slice are stored with the fields"):
        first_slice, probes = stored_with_fields(ctx, DEVICES, FIELDS)
    with ctx.step("a pod waits for its device to be attached, then binds"):
        claim_x, pod_x = bc.claim_and_pod(ctx)
        bc.wait_for_binding_conditions(ctx, claim_x, pod_x)
        bc.set_condition(ctx, claim_x, bc.ATTACHED)
        bc.check_pod(ctx, pod_x)
        recorded = {claim_x: bc.claim_status(ctx, claim_x)}
    pods = {claim_x: pod_x}

    def gate_off(ctx: Context) -> Phase:
        with ctx.step("stored slices keep the fields, also through an update"):
            now = driver_slice(ctx)
            assert now["metadata"]["uid"] == first_slice["metadata"]["uid"], (
                f"the driver's slice was replaced: {now['metadata']}"
            )
            expect_fields(now, FIELDS, kept=True, why="the driver's, stored before gate off")
            probes.gate_off_stored_keep(ctx)
        with ctx.step("a new slice loses the fields, and an update cannot add them"):
            probes.gate_off_new_lose(ctx)
        with ctx.step("the bound claim keeps its binding conditions; its pod runs"):
            _check_result_fields(ctx, claim_x)
            bc.check_recorded(ctx, recorded, pods)
        with ctx.step("no device with binding conditions is allocated"):
            claim_w, pod_w = bc.claim_and_pod(ctx)
            ctx.builder.wait_unschedulable(pod_w["metadata"]["name"])
            allocation = (bc.read_claim(ctx, claim_w).get("status") or {}).get("allocation")
            assert allocation is None, f"ResourceClaim {claim_w} got allocated: {allocation}"

        def gate_on_again(ctx: Context) -> None:
            with ctx.step("the waiting pod's device is allocated with its conditions"):
                bc.wait_for_binding_conditions(ctx, claim_w, pod_w)
            with ctx.step("the pod binds once its device is attached"):
                bc.set_condition(ctx, claim_w, bc.ATTACHED)
                bc.check_pod(ctx, pod_w)
            with ctx.step("slices keep the fields again"):
                expect_fields(driver_slice(ctx), FIELDS, kept=True, why="the driver's")
                probes.gate_on_again(ctx)
            with ctx.step("the first pod's claim is as it was"):
                bc.check_recorded(ctx, recorded, pods)

        return gate_on_again

    return gate_off


def _check_result_fields(ctx: Context, claim_name: str) -> None:
    claim = bc.read_claim(ctx, claim_name)
    for result in claim["status"]["allocation"]["devices"]["results"]:
        missing = [field for field in RESULT_FIELDS if not result.get(field)]
        assert not missing, (
            f"ResourceClaim {claim_name}: allocation result lost {missing} with {GATE} off: "
            f"{result}"
        )


SUBTEST = Subtest(
    name="binding-conditions",
    keps=(5007,),
    initial=initial,
    toggled_gates=(GATE,),
    resources=bc.resources,
    # A cluster-wide pool: a node identity may not publish it.
    privileged_client=True,
    # Locked on from 1.38; 1.37 is the last minor in which it can be switched off.
    emulated_version="1.37",
)
