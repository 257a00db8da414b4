"""workload-resourceclaims (gate cycle): with DRAWorkloadResourceClaims switched off, a pod that
joins the PodGroup must not get a claim of its own nor be scheduled, and the group's claim keeps
its allocation and reservation; once the gate is back, new pods of the group share that claim
again.
"""

from __future__ import annotations

from e2e_dra.builder import SCHEDULING_V1BETA1 as SCHEDULING
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import devices_per_node
from e2e_dra.subtests._workload import claim_state, join_group, start_group, stays


def initial(ctx: Context) -> Phase:
    pod_group, (_pod, pod_to_delete), claim = start_group(ctx, pods=2)
    claim_name = claim["metadata"]["name"]
    stable = claim_state(claim)

    def only_the_group_claim(ctx: Context) -> None:
        """Every claim in the namespace: exactly the group's, unchanged (no per-pod claims)."""
        stays(
            lambda: ctx.builder.list("resourceclaims"),
            what=f"ResourceClaim {claim_name} staying the only, unchanged claim",
            holds=lambda items: [claim_state(c) for c in items] == [stable],
        )

    def gate_off(ctx: Context) -> Phase:
        b = ctx.builder
        stuck_pod = b.grouped_pod_with_claims(pod_group)
        b.create(stuck_pod)
        stuck = stuck_pod["metadata"]["name"]

        def seen() -> tuple[list[dict], tuple[str | None, str | None]]:
            pod = b.read_pod(stuck)
            where = (pod["spec"].get("nodeName"), pod.get("status", {}).get("phase"))
            return [claim_state(c) for c in b.list("resourceclaims")], where

        # Upstream's comment: the claim controller does not give the group's claim to a pod
        # while the gate is off, so the pod cannot be scheduled (1.36 made it a claim of its own).
        with ctx.step(f"pod {stuck}, made with the gate off, gets no claim and stays unscheduled"):
            stays(
                seen,
                what=(
                    f"ResourceClaim {claim_name} staying the only, unchanged claim, and pod "
                    f"{stuck} Pending on no node"
                ),
                holds=lambda now: now == ([stable], (None, "Pending")),
            )
        b.delete_pod_and_wait(stuck)
        b.delete_pod_and_wait(pod_to_delete["metadata"]["name"])

        def gate_on_again(ctx: Context) -> None:
            join_group(ctx, pod_group)
            only_the_group_claim(ctx)

        return gate_on_again

    return gate_off


SUBTEST = Subtest(
    name="workload-resourceclaims",
    keps=(5729,),
    initial=initial,
    toggled_gates=("DRAWorkloadResourceClaims",),
    feature_gates=("GenericWorkload",),
    resources=devices_per_node(1),
    requires=(SCHEDULING,),
    releases=">=1.37",  # scheduling.k8s.io/v1beta1 Workload and PodGroup
)
