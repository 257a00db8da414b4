"""core-dra: a pod with a claim keeps running across upgrade and downgrade, and claims can be
deleted and created in every phase.

"Keeps running" means untouched (upstream does not check it): a second pod made in the first
phase, ``survivor``, is the same pod after the upgrade and after the downgrade, its container
neither restarted nor replaced, its claim still reserved for it and its device still in its
environment. A kubelet upgrade that restarts running containers is a real class of bug.

The other pod and claim follow upstream (the deletes go through an older API version on purpose:
objects written at v1 must stay readable and deletable at an older version). Upstream uses
resource.k8s.io/v1beta1, which 1.38 no longer serves (its prerelease lifecycle removes it in 1.38,
and ``--runtime-config`` cannot bring it back); from 1.38 on the older version is v1beta2.

The deletes are strict, as upstream's: the claim and the pod of a phase must still be there in the
next one, so a NotFound fails the phase instead of passing it.
"""

from __future__ import annotations

from e2e_dra.builder import Builder, retrying
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    CLAIMS_VERSIONS,
    claim_and_pod,
    devices_per_node,
    older_writes_hold,
    running,
    still_untouched,
)

POD_GONE_TIMEOUT = 180.0


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claim, pod = claim_and_pod(b)
    survivor_claim, survivor_pod = claim_and_pod(b)
    b.create(claim, pod, survivor_claim, survivor_pod)
    b.test_pod(pod)
    b.test_pod(survivor_pod)
    survivor = running(b, survivor_pod["metadata"]["name"])
    survivor_claims = [survivor_claim["metadata"]["name"]]
    ctx.facts["survivor"] = survivor.name

    def after_upgrade(ctx: Context) -> Phase:
        b = ctx.builder
        with ctx.step(f"pod {survivor.name} runs untouched"):
            still_untouched(b, survivor, survivor_claims)
        _delete_claim_and_pod(b, claim["metadata"]["name"], pod["metadata"]["name"])
        b.wait_pod_gone(pod["metadata"]["name"], POD_GONE_TIMEOUT)

        new_claim, new_pod = claim_and_pod(b)
        b.create(new_claim, new_pod)
        b.test_pod(new_pod)

        def after_downgrade(ctx: Context) -> Phase:
            # Right after a restart, connections may see EOF or a bogus "forbidden": retry
            # each delete on its own (a retried pair would find its claim deleted already).
            b = ctx.builder
            with ctx.step(f"pod {survivor.name} runs untouched"):
                still_untouched(b, survivor, survivor_claims)
            _delete_claim_and_pod(
                b, new_claim["metadata"]["name"], new_pod["metadata"]["name"], retried=True
            )
            _delete_claim_and_pod(b, survivor_claims[0], survivor.name, retried=True)
            b.wait_pod_gone(new_pod["metadata"]["name"])
            b.wait_pod_gone(survivor.name)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _delete_claim_and_pod(b: Builder, claim: str, pod: str, *, retried: bool = False) -> None:
    version = b.api_version_by_release(CLAIMS_VERSIONS, "resourceclaims")
    delete = retrying(b.delete) if retried else b.delete
    delete("resourceclaims", claim, version=version)
    delete("pods", pod)


SUBTEST = Subtest(
    name="core-dra",
    keps=(4381,),
    initial=initial,
    resources=devices_per_node(8),
)
