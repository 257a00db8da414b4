"""workload-resourceclaims: a ResourceClaim generated for a PodGroup (DRAWorkloadResourceClaims)
keeps its allocation and its reservation for the group across upgrade and downgrade, while pods
join and leave the group.

Needs scheduling.k8s.io/v1beta1 (Workload, PodGroup) on both releases; the suite skips it
where a release under test lacks that API.
"""

from __future__ import annotations

from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.waits import consistently
from subtests._pools import devices_per_node
from subtests._workload import (
    SCHEDULING,
    STABLE_FOR,
    STABLE_POLL,
    claim_path,
    claim_state,
    start_group,
)


def initial(ctx: Context) -> Phase:
    pod_group, (_persistent_pod, new_pod), claim = start_group(ctx, pods=2)
    claim_name = claim["metadata"]["name"]
    stable = claim_state(claim)

    def check_claim_stable(ctx: Context) -> None:
        consistently(
            lambda: ctx.kube.get(claim_path(ctx, claim_name)),
            what=f"ResourceClaim {claim_name} keeping its UID, allocation and reservation",
            duration=STABLE_FOR,
            poll=STABLE_POLL,
            holds=lambda claim: claim_state(claim) == stable,
        )

    def after_upgrade(ctx: Context) -> Phase:
        b = ctx.builder
        pod_after_upgrade = b.grouped_pod_with_claims(pod_group)
        b.create(pod_after_upgrade)
        b.test_pod(pod_after_upgrade)
        check_claim_stable(ctx)
        b.delete_pod_and_wait(new_pod["metadata"]["name"])
        check_claim_stable(ctx)

        def after_downgrade(ctx: Context) -> None:
            b = ctx.builder
            pod_after_downgrade = b.grouped_pod_with_claims(pod_group)
            b.create(pod_after_downgrade)
            b.test_pod(pod_after_downgrade)
            check_claim_stable(ctx)
            b.delete_pod_and_wait(pod_after_upgrade["metadata"]["name"])
            check_claim_stable(ctx)

        return after_downgrade

    return after_upgrade


SUBTEST = Subtest(
    name="workload-resourceclaims",
    initial=initial,
    resources=devices_per_node(1),
    requires=(SCHEDULING,),
    feature_gates=("DRAWorkloadResourceClaims", "GenericWorkload"),
    releases=">=1.37",  # scheduling.k8s.io/v1beta1 Workload and PodGroup
)
