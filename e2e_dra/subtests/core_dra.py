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

Each of the four phases also creates a claim as a user's manifest often says it:
``allocationMode: ExactCount`` and no ``count`` (the builder sends a mode only with a count). The
API documents count as defaulting to 1 there, and every release so far stored it so; an API
server that no longer defaults it refuses the claim ("count ... must be greater than zero"),
breaking manifests that worked before the upgrade. The claim must be accepted, read back with
count 1 and run its pod; it is removed within its phase.
"""

from __future__ import annotations

from e2e_dra.builder import Builder, KubeError, request, retrying
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    CLAIMS_VERSIONS,
    claim_and_pod,
    devices_per_node,
    older_writes_hold,
    remove,
    running,
    still_untouched,
)

POD_GONE_TIMEOUT = 180.0
EXACT = "ExactCount"


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
    _count_defaults_to_one(ctx)

    def after_upgrade(ctx: Context) -> Phase:
        b = ctx.builder
        with ctx.step(f"pod {survivor.name} runs untouched"):
            still_untouched(b, survivor, survivor_claims)
        _delete_claim_and_pod(b, claim["metadata"]["name"], pod["metadata"]["name"])
        b.wait_pod_gone(pod["metadata"]["name"], POD_GONE_TIMEOUT)

        new_claim, new_pod = claim_and_pod(b)
        b.create(new_claim, new_pod)
        b.test_pod(new_pod)
        _count_defaults_to_one(ctx)

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
            _count_defaults_to_one(ctx)
            return _after_re_upgrade

        return after_downgrade

    return after_upgrade


def _after_re_upgrade(ctx: Context) -> None:
    """The re-upgraded API server defaults the count too; then what the older release stored
    holds there."""
    _count_defaults_to_one(ctx)
    older_writes_hold(ctx)


def _count_defaults_to_one(ctx: Context) -> None:
    """A claim with ``allocationMode: ExactCount`` and no ``count`` is accepted by this phase's
    API server, reads back (at the builder's version) with count 1, and its pod runs; then both
    are removed."""
    b = ctx.builder
    claim, pod = claim_and_pod(b, b.external_claim(requests=[request(allocation_mode=EXACT)]))
    name = claim["metadata"]["name"]
    sent = f"ResourceClaim {name}, sent through {claim['apiVersion']} with allocationMode {EXACT}"
    with ctx.step(f"claim {name}, {EXACT} without a count, is stored with count 1"):
        try:
            b.create(claim)
        except KubeError as exc:
            raise AssertionError(
                f"{sent} and no count (which defaults to 1), was refused: {exc}"
            ) from exc
        stored = retrying(b.get)("resourceclaims", name)["spec"]["devices"]["requests"][0]
        assert (stored.get("exactly") or {}).get("count") == 1, (
            f"{sent} and no count, reads back without the default count 1: {stored}"
        )
    with ctx.step(f"pod {pod['metadata']['name']} of claim {name} runs"):
        b.create(pod)
        b.test_pod(pod)
    remove(b, [pod], [claim])


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
