"""workload-resourceclaims: a ResourceClaim generated for a PodGroup (DRAWorkloadResourceClaims)
keeps its allocation and its reservation for the group across upgrade and downgrade, while pods
join and leave the group.

The members that were running before a restart run untouched after it, checked first thing in
the phase: the same pod, its container neither restarted nor replaced, and its device still in
its environment; the group's claim is reserved for the PodGroup, not for the pods, so what a
member holds is checked as the claim's identity, allocation and reservation for the group, as
they were when the group started. While one pod joins the group and another leaves it, the claim
is watched every 100 ms, from before the join until 15 s after the leave: each change is followed
by at least the 15 s upstream's gate cycle watches after one.

Needs scheduling.k8s.io/v1beta1 (Workload, PodGroup) on both releases; the suite skips it
where a release under test lacks that API.
"""

from __future__ import annotations

from e2e_dra.builder import SCHEDULING_V1BETA1 as SCHEDULING
from e2e_dra.builder import retrying
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    Running,
    devices_per_node,
    older_writes_hold,
    running,
    still_untouched,
)
from e2e_dra.subtests._workload import (
    claim_state,
    claim_stays_throughout,
    join_group,
    start_group,
)


def initial(ctx: Context) -> Phase:
    pod_group, (persistent_pod, new_pod), claim = start_group(ctx, pods=2)
    claim_name = claim["metadata"]["name"]
    stable = claim_state(claim)
    # Both members as they run before the upgrade: one stays to the end, one leaves after it.
    persistent, to_leave = (
        running(ctx.builder, p["metadata"]["name"]) for p in (persistent_pod, new_pod)
    )

    def members_untouched(ctx: Context, members: list[Running]) -> None:
        """Each member runs as before the restart, and the group still holds its claim."""
        names = ", ".join(was.name for was in members)
        with ctx.step(f"pods {names} run untouched, their group still holds {claim_name}"):
            for was in members:
                # Reserved for the group, not for the pod: the claim is checked below.
                still_untouched(ctx.builder, was, claims=())
            now = claim_state(retrying(ctx.builder.get)("resourceclaims", claim_name))
            assert now == stable, (
                f"ResourceClaim {claim_name} of the group changed across the restart: "
                f"now {now}, was {stable}"
            )

    def swap_member(ctx: Context, leaving: dict) -> dict:
        """A pod joins the group, then ``leaving`` goes; the claim stays as it was throughout,
        watched from before the join until 15 s after the leave."""
        with claim_stays_throughout(ctx, claim_name, stable):
            joined = join_group(ctx, pod_group)
            ctx.builder.delete_pod_and_wait(leaving["metadata"]["name"])
        return joined

    def after_upgrade(ctx: Context) -> Phase:
        members_untouched(ctx, [persistent, to_leave])
        pod_after_upgrade = swap_member(ctx, leaving=new_pod)
        joined = running(ctx.builder, pod_after_upgrade["metadata"]["name"])

        def after_downgrade(ctx: Context) -> Phase:
            members_untouched(ctx, [persistent, joined])
            swap_member(ctx, leaving=pod_after_upgrade)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


SUBTEST = Subtest(
    name="workload-resourceclaims",
    keps=(5729,),
    initial=initial,
    resources=devices_per_node(1),
    requires=(SCHEDULING,),
    feature_gates=("DRAWorkloadResourceClaims", "GenericWorkload"),
    releases=">=1.37",  # scheduling.k8s.io/v1beta1 Workload and PodGroup
)
