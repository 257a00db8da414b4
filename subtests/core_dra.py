"""core-dra: a pod with a claim keeps running across upgrade and downgrade, and claims can be
deleted and created in every phase (the deletes go through an older API version on purpose:
objects written at v1 must stay readable and deletable at an older version). Upstream uses
resource.k8s.io/v1beta1, which 1.38 no longer serves (its prerelease lifecycle removes it in 1.38,
and ``--runtime-config`` cannot bring it back); from 1.38 on the older version is v1beta2.

The deletes are strict, as upstream's: the claim and the pod of a phase must still be there in the
next one, so a NotFound fails the phase instead of passing it.
"""

from __future__ import annotations

from e2e_dra.kube import path, retrying
from e2e_dra.subtest import Context, Phase, Subtest
from subtests._pools import devices_per_node

POD_GONE_TIMEOUT = 180.0
CLAIMS_VERSIONS = {
    "<1.38.0-alpha.0": "resource.k8s.io/v1beta1",
    ">=1.38.0-alpha.0": "resource.k8s.io/v1beta2",
}


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
            # Right after a restart, connections may see EOF or a bogus "forbidden": retry
            # each delete on its own (a retried pair would find its claim deleted already).
            _delete_claim_and_pod(
                ctx, new_claim["metadata"]["name"], new_pod["metadata"]["name"], retried=True
            )
            ctx.builder.wait_pod_gone(new_pod["metadata"]["name"])

        return after_downgrade

    return after_upgrade


def _delete_claim_and_pod(
    ctx: Context, claim_name: str, pod_name: str, *, retried: bool = False
) -> None:
    version = ctx.builder.api_version_by_release(CLAIMS_VERSIONS, "resourceclaims")
    ctx.log(f"Deleting ResourceClaim {claim_name} through {version} and Pod {pod_name}")
    delete = retrying(ctx.kube.delete) if retried else ctx.kube.delete
    delete(path(version, "resourceclaims", claim_name, namespace=ctx.namespace))
    delete(path("v1", "pods", pod_name, namespace=ctx.namespace))


SUBTEST = Subtest(
    name="core-dra",
    initial=initial,
    resources=devices_per_node(8),
)
