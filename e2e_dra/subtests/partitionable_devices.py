"""partitionable-devices: devices that consume shared counters (DRAPartitionableDevices) keep
their counters and consumption across upgrade and downgrade.

The pool has 8Gi of memory to share: 2Gi and 4Gi claims fit, a second 4Gi claim does not, and
another 2Gi claim still does -- in every phase. What matters is that the API keeps the
``sharedCounters``/``consumesCounters`` fields, not scheduler details.

After each restart the pods that run must run untouched (the same containers, still reserved,
still seeing their devices), and the waiting pod must be found unschedulable by the scheduler
that runs now (its own FailedScheduling): its status alone may still be the verdict of the
scheduler before the restart.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    Running,
    older_writes_hold,
    running,
    scheduler_found_no_fit,
    still_untouched,
)

POOL = "partitionable-pool"
COUNTER_SET = "memory-pool"


def _device(name: str, memory: str) -> dict:
    return {
        "name": name,
        "capacity": {"memory": {"value": memory}},
        "consumesCounters": [
            {"counterSet": COUNTER_SET, "counters": {"memory": {"value": memory}}}
        ],
    }


DEVICES = [
    *(_device(f"memory{i}-2g", "2Gi") for i in range(4)),
    *(_device(f"memory{i}-4g", "4Gi") for i in (4, 5)),
]
SHARED_COUNTERS = [{"name": COUNTER_SET, "counters": {"memory": {"value": "8Gi"}}}]


def resources(nodes: Sequence[str]) -> list[Pool]:
    # Devices and shared counters must be in separate slices of the pool. A pool name is
    # unique per driver, so (as upstream) only the first node gets it.
    slices = [{"sharedCounters": SHARED_COUNTERS}, {"devices": DEVICES}]
    return [Pool(POOL, slices=slices, node_name=nodes[0])]


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    pod_2g, claim_2g = _pod_with_claim(ctx, "2Gi")
    pod_4g, claim_4g = _pod_with_claim(ctx, "4Gi")
    # Both must hold their devices before the third pod asks, or it could win the race.
    b.wait_running(pod_2g)
    b.wait_running(pod_4g)
    pod_4g_2, claim_4g_2 = _pod_with_claim(ctx, "4Gi")
    b.wait_unschedulable(pod_4g_2)

    holding = {pod_2g: claim_2g, pod_4g: claim_4g}
    unschedulable = pod_4g_2
    before = [running(b, pod) for pod in holding]
    _check(ctx, holding, unschedulable)

    def after_upgrade(ctx: Context) -> Phase:
        _check(ctx, holding, unschedulable, before)

        def after_downgrade(ctx: Context) -> Phase:
            _check(ctx, holding, unschedulable, before)
            for pod in (*holding, unschedulable):
                ctx.builder.delete_pod_and_wait(pod)
            for claim in (claim_2g, claim_4g, claim_4g_2):
                _delete_claim(ctx, claim)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _check(
    ctx: Context, holding: dict[str, str], unschedulable: str, before: Sequence[Running] = ()
) -> None:
    """Pods holding devices (pod -> claim) still run (untouched since ``before``, after a
    restart), the waiting one still waits by this scheduler's verdict, 4Gi more does not fit,
    2Gi does."""
    b = ctx.builder
    with ctx.step("the pods holding 2Gi and 4Gi run" + (" untouched" if before else "")):
        for name in holding:
            b.test_pod(b.read_pod(name))
        for was in before:
            still_untouched(b, was, [holding[was.name]])
    with ctx.step("the scheduler that runs now finds no room for another 4Gi"):
        scheduler_found_no_fit(ctx, unschedulable)
        b.wait_unschedulable(unschedulable)

    with ctx.step("a new 4Gi claim does not fit either"):
        pod, claim = _pod_with_claim(ctx, "4Gi")
        b.wait_unschedulable(pod)
        b.delete_pod_and_wait(pod)
        _delete_claim(ctx, claim)

    with ctx.step("a new 2Gi claim fits in what is left"):
        pod, claim = _pod_with_claim(ctx, "2Gi")
        b.test_pod(b.read_pod(pod))
        b.delete_pod_and_wait(pod)
        _delete_claim(ctx, claim)


def _pod_with_claim(ctx: Context, memory: str) -> tuple[str, str]:
    """A claim for exactly ``memory`` of this driver's memory capacity and a pod using it."""
    b = ctx.builder
    selector = f'device.capacity["{b.driver_name}"].memory.compareTo(quantity("{memory}")) == 0'
    claim = b.external_claim(requests=[request(f"{memory.lower()}-memory", selectors=[selector])])
    claim_name = claim["metadata"]["name"]
    pod = b.pod()
    pod_claim = f"claim-{claim_name}"
    pod["spec"]["resourceClaims"] = [{"name": pod_claim, "resourceClaimName": claim_name}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": pod_claim}]
    b.create(claim, pod)
    return pod["metadata"]["name"], claim_name


def _delete_claim(ctx: Context, name: str) -> None:
    """Strict (NotFound fails): each claim deleted here is one the subtest still expects."""
    ctx.builder.delete("resourceclaims", name)


SUBTEST = Subtest(name="partitionable-devices", keps=(4815,), initial=initial, resources=resources)
