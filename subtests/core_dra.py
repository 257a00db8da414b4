"""core-dra: a pod with a claim keeps running across upgrade and downgrade, and claims can be
deleted and created in every phase (the deletes go through resource.k8s.io/v1beta1 on purpose:
objects written at v1 must stay readable and deletable at an older version)."""

from __future__ import annotations

from e2e_dra.kube import path, retrying
from e2e_dra.subtest import Context, Phase, Subtest
from subtests._pools import devices_per_node

POD_GONE_TIMEOUT = 180.0


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claim = b.external_claim()
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    b.test_pod(pod)

    def after_upgrade(ctx: Context) -> Phase:
        _delete_claim_and_pod(ctx, claim["metadata"]["name"], pod["metadata"]["name"])
        ctx.builder.wait_pod_gone(pod["metadata"]["name"], POD_GONE_TIMEOUT)

        b = ctx.builder
        new_claim = b.external_claim()
        new_pod = b.pod_external(new_claim["metadata"]["name"])
        b.create(new_claim, new_pod)
        b.test_pod(new_pod)

        def after_downgrade(ctx: Context) -> None:
            # Right after a restart, connections may see EOF or a bogus "forbidden": retry.
            retrying(_delete_claim_and_pod)(
                ctx, new_claim["metadata"]["name"], new_pod["metadata"]["name"]
            )
            ctx.builder.wait_pod_gone(new_pod["metadata"]["name"])

        return after_downgrade

    return after_upgrade


def _delete_claim_and_pod(ctx: Context, claim_name: str, pod_name: str) -> None:
    claims_version = ctx.builder.pick_served("resource.k8s.io/v1beta1", "resource.k8s.io/v1")
    ctx.log(f"Deleting ResourceClaim {claim_name} through {claims_version} and Pod {pod_name}")
    ctx.kube.delete(path(claims_version, "resourceclaims", claim_name, namespace=ctx.namespace))
    ctx.kube.delete(path("v1", "pods", pod_name, namespace=ctx.namespace))


SUBTEST = Subtest(name="core-dra", initial=initial, resources=devices_per_node(8))
