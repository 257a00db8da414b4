"""workload-resourceclaims: a ResourceClaim generated for a PodGroup (DRAWorkloadResourceClaims)
keeps its allocation and its reservation for the group across upgrade and downgrade, while pods
join and leave the group.

Needs scheduling.k8s.io/v1beta1 (Workload, PodGroup) on both releases; the suite skips it
where a release under test lacks that API.
"""

from __future__ import annotations

from e2e_dra.builder import SCHEDULING_V1BETA1 as SCHEDULING
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import devices_per_node
from subtests._workload import (
    claim_state,
    join_group,
    start_group,
    stays,
)


def initial(ctx: Context) -> Phase:
    pod_group, (_persistent_pod, new_pod), claim = start_group(ctx, pods=2)
    claim_name = claim["metadata"]["name"]
    stable = claim_state(claim)

    def swap_member(ctx: Context, leaving: dict) -> dict:
        """A pod joins the group, then ``leaving`` goes; the claim stays as it was throughout."""

        def check_claim_stable() -> None:
            stays(
                lambda: ctx.builder.get("resourceclaims", claim_name),
                what=f"ResourceClaim {claim_name} keeping its UID, allocation and reservation",
                holds=lambda claim: claim_state(claim) == stable,
            )

        joined = join_group(ctx, pod_group)
        check_claim_stable()
        ctx.builder.delete_pod_and_wait(leaving["metadata"]["name"])
        check_claim_stable()
        return joined

    def after_upgrade(ctx: Context) -> Phase:
        pod_after_upgrade = swap_member(ctx, leaving=new_pod)

        def after_downgrade(ctx: Context) -> None:
            swap_member(ctx, leaving=pod_after_upgrade)

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
