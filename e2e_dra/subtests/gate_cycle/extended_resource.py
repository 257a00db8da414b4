"""extended-resource (gate cycle): pods that got devices through an extended resource
(DRAExtendedResource) keep them while the gate is off; meanwhile the apiserver strips
``spec.extendedResourceName`` from new DeviceClasses, no new pod gets a special claim, and a
deleted pod's claim is still garbage-collected. With the gate on again the claim stays
unprepared and new pods allocate end to end.

The gate is locked on in 1.37, so the control plane emulates 1.36, the last release where it can
be switched. The kubelet has no emulated version and keeps it on throughout: the toggles drop
locked gates from its command line, so it is not even restarted. So the kubelet unprepares the
deleted pod's claim while the control plane has the gate off (upstream waits for it only after
the gate is on again, where the wait passes at once), and that is where it is checked.

The probe pod with the gate off: upstream watches it stay Pending for 30 s. Here the scheduler
must first report it Unschedulable (proof that the gate-off scheduler looked at it and found no
node with the extended resource, which a scheduler with the gate on would have satisfied through
a special claim); then it must stay so, without a special claim, for a short while.
"""

from __future__ import annotations

from e2e_dra.builder import POD_START_TIMEOUT, is_allocated
from e2e_dra.driver import ClaimRef
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import checkpoint_entry, devices_per_node
from e2e_dra.subtests._extended_resource import (
    claim_name_from_pod,
    create_pod,
    resource_name,
    verify_pod_running_with_claim,
    wait_claims_gone,
)
from e2e_dra.waits import consistently, eventually

# After the scheduler's verdict; upstream: Consistently 30 s, with no verdict asked for.
PROBE_PENDING_FOR = 5.0
STAYS_UNPREPARED_FOR = 10.0
# The kubelet's DRA reconcile loop runs once a minute and unprepares only with the gate on.
UNPREPARE_TIMEOUT = 180.0


def initial(ctx: Context) -> Phase:
    with ctx.step("pods-with-extended-resource-running"):
        resource = resource_name(ctx, "explicit")
        survivor = create_pod(ctx, "survivor", resource)
        verify_pod_running_with_claim(ctx, survivor, resource)
        to_delete = create_pod(ctx, "to-delete", resource)
        verify_pod_running_with_claim(ctx, to_delete, resource)

    def gate_off(ctx: Context) -> Phase:
        b = ctx.builder
        with ctx.step("survivor-pods-still-running"):
            for pod in (survivor, to_delete):
                b.wait_running(pod, POD_START_TIMEOUT)

        with ctx.step("survivor-claim-preserved"):
            for pod in (survivor, to_delete):
                _assert_claim_allocated(ctx, pod)

        with ctx.step("new-deviceclass-field-stripped"):
            device_class = b.class_with_extended_resource(resource)
            device_class["metadata"]["name"] += "-post-off"
            created = b.create(device_class)[0]
            assert created["spec"].get("extendedResourceName") is None, (
                f"DeviceClass {created['metadata']['name']} kept spec.extendedResourceName "
                f"{created['spec'].get('extendedResourceName')!r} with DRAExtendedResource off"
            )

        with ctx.step("probe-pod-pending-no-special-claim"):
            probe = create_pod(ctx, "probe-off", resource)
            b.wait_unschedulable(probe)
            consistently(
                lambda: b.read_pod(probe).get("status", {}),
                what=f"pod {probe} staying Pending without a special claim",
                duration=PROBE_PENDING_FOR,
                holds=lambda status: (
                    status.get("phase") == "Pending"
                    and status.get("extendedResourceClaimStatus") is None
                ),
            )
            b.delete_pod_and_wait(probe)

        with ctx.step("delete-pod-triggers-gc-with-gate-off"):
            # The garbage collector, not the apiserver, removes the claim of a deleted pod.
            deleted_claim = claim_name_from_pod(ctx, to_delete)
            deleted_uid = b.get("resourceclaims", deleted_claim)["metadata"]["uid"]
            b.delete_pod_and_wait(to_delete)
            wait_claims_gone(ctx, [deleted_claim])
            b.wait_running(survivor, POD_START_TIMEOUT)

        with ctx.step("the kubelet unprepares the deleted pod's claim with the gate off"):
            eventually(
                ctx.driver.prepared_claims,
                what=(
                    f"driver {ctx.driver.name} on {ctx.driver.node_name} to unprepare "
                    f"ResourceClaim {deleted_claim}"
                ),
                timeout=UNPREPARE_TIMEOUT,
                until=lambda prepared: not _prepared(prepared, deleted_claim),
            )

        def gate_on_again(ctx: Context) -> None:
            b = ctx.builder
            with ctx.step("the deleted pod's claim stays unprepared with the gate on again"):
                # The kubelet that restarted with the gate on reads its checkpoint: a claim
                # it still held there would be prepared again. Watched for a while, not once.
                consistently(
                    lambda: (
                        _prepared(ctx.driver.prepared_claims(), deleted_claim),
                        checkpoint_entry(ctx, deleted_uid),
                    ),
                    what=(
                        f"ResourceClaim {deleted_claim} of the deleted pod neither prepared by "
                        "the driver nor in the kubelet's checkpoint, with the gate on again "
                        "(prepared, checkpoint entry)"
                    ),
                    duration=STAYS_UNPREPARED_FOR,
                    holds=lambda seen: seen == ([], None),
                )

            with ctx.step("survivor-pod-survives-reenable"):
                verify_pod_running_with_claim(ctx, survivor, resource)

            with ctx.step("fresh-pod-allocates-end-to-end"):
                fresh = create_pod(ctx, "fresh", resource)
                verify_pod_running_with_claim(ctx, fresh, resource)

            claims = [claim_name_from_pod(ctx, pod) for pod in (survivor, fresh)]
            with ctx.step("cleanup-pods"):
                for pod in (survivor, fresh):
                    b.delete_pod_and_wait(pod)

            with ctx.step("claims-GC"):
                wait_claims_gone(ctx, claims)

        return gate_on_again

    return gate_off


def _prepared(prepared: list[ClaimRef], claim_name: str) -> list[ClaimRef]:
    return [ref for ref in prepared if ref.name.startswith(claim_name)]


def _assert_claim_allocated(ctx: Context, pod: str) -> None:
    name = claim_name_from_pod(ctx, pod)
    claim = ctx.builder.get("resourceclaims", name)
    assert is_allocated(claim), f"ResourceClaim {name} of pod {pod} is no longer allocated"


SUBTEST = Subtest(
    name="extended-resource",
    keps=(5004,),
    initial=initial,
    toggled_gates=("DRAExtendedResource",),
    resources=devices_per_node(8),
    # The last minor in which DRAExtendedResource can still be switched (locked on in 1.37).
    emulated_version="1.36",
)
