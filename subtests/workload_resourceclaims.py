"""workload-resourceclaims: a ResourceClaim generated for a PodGroup (DRAWorkloadResourceClaims)
keeps its allocation and its reservation for the group across upgrade and downgrade, while pods
join and leave the group.

Needs scheduling.k8s.io/v1beta1 (Workload, PodGroup) on both releases; the suite skips it
where a release under test lacks that API.
"""

from __future__ import annotations

from e2e_dra.kube import path
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.waits import consistently
from subtests._pools import devices_per_node

SCHEDULING = "scheduling.k8s.io/v1beta1"
STABLE_FOR = 15.0
STABLE_POLL = 0.1


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    workload, template = b.workload_inline()
    pod_group = b.pod_group(workload, workload["spec"]["podGroupTemplates"][0])
    persistent_pod = b.grouped_pod_with_claims(pod_group)
    new_pod = b.grouped_pod_with_claims(pod_group)
    b.create(workload, pod_group, template, persistent_pod, new_pod)
    b.test_pod(persistent_pod)
    b.test_pod(new_pod)

    group_name = pod_group["metadata"]["name"]
    group = ctx.kube.get(path(SCHEDULING, "podgroups", group_name, namespace=ctx.namespace))
    statuses = group.get("status", {}).get("resourceClaimStatuses", [])
    claim_name = _generated_claim(statuses, group["spec"]["resourceClaims"][0]["name"])
    claim = ctx.kube.get(_claim_path(ctx, claim_name))
    expected_reservation = [
        {
            "apiGroup": "scheduling.k8s.io",
            "resource": "podgroups",
            "name": group_name,
            "uid": group["metadata"]["uid"],
        }
    ]
    reserved_for = claim.get("status", {}).get("reservedFor")
    assert reserved_for == expected_reservation, (
        f"ResourceClaim {claim_name} is reserved for {reserved_for}, "
        f"expected only PodGroup {group_name}"
    )
    stable = {
        "uid": claim["metadata"]["uid"],
        "allocation": claim["status"].get("allocation"),
        "reservedFor": reserved_for,
    }

    def check_claim_stable(ctx: Context) -> None:
        consistently(
            lambda: ctx.kube.get(_claim_path(ctx, claim_name)),
            what=f"ResourceClaim {claim_name} keeping its UID, allocation and reservation",
            duration=STABLE_FOR,
            poll=STABLE_POLL,
            holds=lambda claim: _claim_state(claim) == stable,
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


def _generated_claim(statuses: list[dict], claim_in_group: str) -> str:
    """The name of the claim generated for the group's only claim entry."""
    assert len(statuses) == 1 and statuses[0].get("name") == claim_in_group, (
        f"PodGroup status.resourceClaimStatuses {statuses} should name one claim {claim_in_group}"
    )
    name = statuses[0].get("resourceClaimName")
    assert name, f"PodGroup status is missing the generated ResourceClaim name: {statuses}"
    return name


def _claim_path(ctx: Context, name: str) -> str:
    return path("resource.k8s.io/v1", "resourceclaims", name, namespace=ctx.namespace)


def _claim_state(claim: dict) -> dict:
    status = claim.get("status", {})
    return {
        "uid": claim["metadata"]["uid"],
        "allocation": status.get("allocation"),
        "reservedFor": status.get("reservedFor"),
    }


SUBTEST = Subtest(
    name="workload-resourceclaims",
    initial=initial,
    resources=devices_per_node(1),
    requires=(SCHEDULING,),
    feature_gates=("DRAWorkloadResourceClaims", "GenericWorkload"),
    since="1.37",  # scheduling.k8s.io/v1beta1 Workload and PodGroup
)
