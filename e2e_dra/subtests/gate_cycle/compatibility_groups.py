"""compatibility-groups: devices that share a counter set through compatibility groups
(DRADeviceCompatibilityGroups, alpha in 1.37) keep their allocation while the gate is off, and
allocate again once it is back on.

Four devices consume one unit each of a 4-unit counter set, all in group ``mig``; a claim for two
of them forces co-allocation on one counter set, which exercises the group intersection check.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import is_allocated, request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, Phase, Subtest

POOL = "compatibility-groups-pool"
COUNTER_SET = "gpu"


def resources(nodes: Sequence[str]) -> list[Pool]:
    devices = [
        {
            "name": f"device-{i}",
            "consumesCounters": [
                {
                    "counterSet": COUNTER_SET,
                    "counters": {"mem": {"value": "1"}},
                    "compatibilityGroups": ["mig"],
                }
            ],
        }
        for i in range(4)
    ]
    counters = [{"name": COUNTER_SET, "counters": {"mem": {"value": "4"}}}]
    slices: list[dict] = [{"sharedCounters": counters}, {"devices": devices}]
    return [Pool(POOL, slices=slices, node_name=nodes[0])]


def _grouped_pod(ctx: Context, count: int) -> tuple[str, str]:
    """A claim for ``count`` devices of the class and a pod using it; their names."""
    b = ctx.builder
    claim = b.external_claim(requests=[request("req-0", allocation_mode="ExactCount", count=count)])
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    return pod["metadata"]["name"], claim["metadata"]["name"]


def _verify(ctx: Context, pod: str, claim: str) -> None:
    ctx.builder.wait_running(pod)
    answer = ctx.builder.get("resourceclaims", claim)
    assert is_allocated(answer), f"ResourceClaim {claim} of pod {pod} is not allocated"


def initial(ctx: Context) -> Phase:
    pod, claim = _grouped_pod(ctx, 2)
    _verify(ctx, pod, claim)

    def gate_off(ctx: Context) -> Phase:
        _verify(ctx, pod, claim)

        def gate_on_again(ctx: Context) -> None:
            _verify(ctx, pod, claim)
            fresh_pod, fresh_claim = _grouped_pod(ctx, 1)
            _verify(ctx, fresh_pod, fresh_claim)

        return gate_on_again

    return gate_off


SUBTEST = Subtest(
    name="compatibility-groups",
    keps=(5963,),
    initial=initial,
    toggled_gates=("DRADeviceCompatibilityGroups",),
    resources=resources,
    emulated_version="1.37",
)
