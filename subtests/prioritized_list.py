"""prioritized-list: a request with ``firstAvailable`` subrequests (DRAPrioritizedList) is
allocated to the first subrequest that fits, and that choice survives upgrade and downgrade.

The claim's one request lists four subrequests: ``unmatched`` (a CEL selector no device of the
driver matches), ``too-many`` (more devices than the node has), ``preferred`` (two devices) and
``fallback`` (any one device). Both of the last two can be satisfied, so an allocator that takes
the last fitting subrequest, or any one, is told apart from one that takes the first: the
scheduler must skip the first two and allocate two devices for ``my-request/preferred`` (as
upstream's test, which makes two subrequests satisfiable and expects the first). In every phase a
new claim is allocated the same way, and every claim made so far (its pod running untouched) must
still say ``my-request/preferred`` with the same devices, read through every API version both
releases serve: v1, v1beta2, and v1beta1 where it is still served (before 1.38). The subrequests
live in the spec and the chosen one in ``status.allocation.devices.results[].request``, so each
version must carry both through its conversion.

Gates: DRAPrioritizedList is beta and on by default from 1.34, GA in 1.36 and locked on in 1.37
(to be removed in 1.40). Nothing needs to be set; naming the gate in FEATURE_GATES would only
break the subtest once a release no longer knows it. Releases without the v1 API (< 1.34) are
excluded.
"""

from __future__ import annotations

from e2e_dra.builder import RESOURCE_V1 as V1
from e2e_dra.builder import Builder, retrying
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    CLAIMS_VERSIONS,
    Running,
    claim_and_pod,
    devices_per_node,
    running,
    still_untouched,
)
from e2e_dra.subtest_kit import RESOURCE_V1BETA2 as V1BETA2

DEVICES = 8
REQUEST = "my-request"
UNMATCHED = "unmatched"
TOO_MANY = "too-many"
PREFERRED = "preferred"
PREFERRED_COUNT = 2
FALLBACK = "fallback"
SUBREQUESTS = (UNMATCHED, TOO_MANY, PREFERRED, FALLBACK)
CHOSEN = f"{REQUEST}/{PREFERRED}"
# The test driver publishes devices without attributes: no device has this one.
NO_DEVICE = 'device.attributes["example.com"].?model.orValue("") == "no-such-model"'

Result = tuple[str, str, str, str]
"""(request, driver, pool, device) of one allocation result."""
Allocated = tuple[Running, str, list[Result]]
"""(its pod as it ran, claim, allocation results) of one claim this subtest made."""


def prioritized_claim(b: Builder) -> dict:
    """A claim whose only request can be satisfied by its last two subrequests; the first of
    them must win."""
    claim = b.external_claim()
    device_class = b.class_name()
    claim["spec"]["devices"]["requests"] = [
        {
            "name": REQUEST,
            "firstAvailable": [
                {
                    "name": UNMATCHED,
                    "deviceClassName": device_class,
                    "selectors": [{"cel": {"expression": NO_DEVICE}}],
                },
                {
                    "name": TOO_MANY,
                    "deviceClassName": device_class,
                    "allocationMode": "ExactCount",
                    "count": DEVICES + 1,
                },
                {
                    "name": PREFERRED,
                    "deviceClassName": device_class,
                    "allocationMode": "ExactCount",
                    "count": PREFERRED_COUNT,
                },
                {"name": FALLBACK, "deviceClassName": device_class},
            ],
        }
    ]
    return claim


def initial(ctx: Context) -> Phase:
    first = _new_claim_and_pod(ctx)

    def after_upgrade(ctx: Context) -> Phase:
        _still_allocated(ctx, [first])
        second = _new_claim_and_pod(ctx)

        def after_downgrade(ctx: Context) -> None:
            _still_allocated(ctx, [first, second])
            third = _new_claim_and_pod(ctx)
            with ctx.step("delete pods and claims"):
                _delete(ctx, [first, second, third])

        return after_downgrade

    return after_upgrade


def _new_claim_and_pod(ctx: Context) -> Allocated:
    b = ctx.builder
    claim, pod = claim_and_pod(b, prioritized_claim(b))
    with ctx.step(f"allocate {claim['metadata']['name']} to its first fitting subrequest"):
        b.create(claim, pod)
        b.test_pod(pod)
        results = _results_at_every_version(ctx, claim["metadata"]["name"])
    return running(b, pod["metadata"]["name"]), claim["metadata"]["name"], results


def _still_allocated(ctx: Context, allocated: list[Allocated]) -> None:
    """Each pod runs untouched, each claim keeps its allocation, at every served version."""
    b = ctx.builder
    for pod, claim, results in allocated:
        with ctx.step(f"pod {pod.name} runs untouched with {claim} as allocated before"):
            still_untouched(b, pod, [claim])
            now = _results_at_every_version(ctx, claim)
            assert now == results, (
                f"ResourceClaim {claim}: allocation changed since the previous phase: "
                f"was {results}, now {now}"
            )


def _delete(ctx: Context, allocated: list[Allocated]) -> None:
    """Strict deletes (NotFound fails: each was expected to be there): the pods at once, then,
    each pod gone, its claim."""
    b = ctx.builder
    for pod, _, _ in allocated:
        retrying(b.delete)("pods", pod.name)
    for pod, claim, _ in allocated:
        b.wait_pod_gone(pod.name)
        retrying(b.delete)("resourceclaims", claim)


def served_versions(b: Builder) -> list[str]:
    """v1, v1beta2 and the oldest version the release serves (v1beta1 before 1.38), each
    checked to be served (a missing one fails instead of being left out)."""
    oldest = b.api_version_by_release(CLAIMS_VERSIONS, "resourceclaims")
    return [b.api_version(v, "resourceclaims") for v in dict.fromkeys([V1, V1BETA2, oldest])]


def _results_at_every_version(ctx: Context, claim_name: str) -> list[Result]:
    """The claim's allocation results, the same through every served version, with the
    subrequests in the spec and ``my-request/preferred`` chosen."""
    b = ctx.builder
    by_version: dict[str, list[Result]] = {}
    for version in served_versions(b):
        claim = retrying(b.get)("resourceclaims", claim_name, version=version)
        where = f"ResourceClaim {claim_name} read through {version}"
        requests = claim["spec"]["devices"]["requests"]
        names = [[s["name"] for s in r.get("firstAvailable") or []] for r in requests]
        assert names == [list(SUBREQUESTS)], f"{where}: subrequests {names}, want {[SUBREQUESTS]}"
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        by_version[version] = [
            (r.get("request"), r.get("driver"), r.get("pool"), r.get("device")) for r in results
        ]
        chosen = [r[0] for r in by_version[version]]
        assert chosen == [CHOSEN] * PREFERRED_COUNT, (
            f"{where}: allocated for {chosen or 'nothing'}, want {PREFERRED_COUNT} devices for "
            f"{CHOSEN}, the first subrequest that can be satisfied ({REQUEST}/{FALLBACK} can be "
            f"too, but comes later); results: {results}"
        )
        drivers = {r[1] for r in by_version[version]}
        assert drivers == {b.driver_name}, f"{where}: results {results}"
    v1 = by_version[V1]
    differ = {version: results for version, results in by_version.items() if results != v1}
    assert not differ, f"ResourceClaim {claim_name}: v1 says {v1}, but {differ}"
    ctx.log(f"ResourceClaim {claim_name}: {v1} through {', '.join(by_version)}")
    return v1


SUBTEST = Subtest(
    name="prioritized-list",
    initial=initial,
    resources=devices_per_node(DEVICES),
    requires=(V1, V1BETA2),
    releases=">=1.34",
)
