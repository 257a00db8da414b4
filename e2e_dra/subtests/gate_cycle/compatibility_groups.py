"""compatibility-groups: devices that share a counter set through compatibility groups
(DRADeviceCompatibilityGroups, alpha in 1.37) are allocated together only when they share a
group; allocations survive the gate going off, and the rule holds again once it is back on.

Four devices consume one unit each of a 4-unit counter set: ``device-0`` and ``device-1`` in
group ``mig``, ``device-2`` and ``device-3`` in group ``full``. Counters never run short here, so
only the groups can refuse a device: once a ``full`` device is allocated, another claim may get
only the other ``full`` one, and a claim for two devices none. An allocator that ignores the
groups gives out the ``mig`` devices and fails these checks (upstream's version of this subtest
puts all four devices in one group, where nothing can tell).

While the gate is off the API server drops the groups from the slices the driver publishes
again, so the allocations made before are only checked to survive; once it is on, the slices
carry the groups again and a new claim must get the one ``full`` device left.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import Builder, is_allocated, request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import allocated, claim_where
from e2e_dra.waits import eventually

GROUPS_BACK_TIMEOUT = 60.0
POOL = "compatibility-groups-pool"
COUNTER_SET = "gpu"
GROUPS = {"device-0": "mig", "device-1": "mig", "device-2": "full", "device-3": "full"}


def resources(nodes: Sequence[str]) -> list[Pool]:
    devices = [
        {
            "name": name,
            "attributes": {"group": {"string": group}},
            "consumesCounters": [
                {
                    "counterSet": COUNTER_SET,
                    "counters": {"mem": {"value": "1"}},
                    "compatibilityGroups": [group],
                }
            ],
        }
        for name, group in GROUPS.items()
    ]
    counters = [{"name": COUNTER_SET, "counters": {"mem": {"value": str(len(devices))}}}]
    slices: list[dict] = [{"sharedCounters": counters}, {"devices": devices}]
    return [Pool(POOL, slices=slices, node_name=nodes[0])]


def _pod_for(b: Builder, claim: dict) -> tuple[str, str]:
    """Create ``claim`` and a pod that uses it; (pod, claim) names."""
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    return pod["metadata"]["name"], claim["metadata"]["name"]


def _for_count(b: Builder, count: int) -> dict:
    """A claim for ``count`` devices of any group (not created)."""
    return b.external_claim(requests=[request("req-0", allocation_mode="ExactCount", count=count)])


def _verify(ctx: Context, pod: str, claim: str) -> None:
    ctx.builder.wait_running(pod)
    answer = ctx.builder.get("resourceclaims", claim)
    assert is_allocated(answer), f"ResourceClaim {claim} of pod {pod} is not allocated"


def _devices(b: Builder, claim: str) -> list[str]:
    return [r["device"] for r in allocated(b, claim)]


def _gets_the_other_full_device(ctx: Context, holder: str) -> tuple[str, str]:
    """A claim for any one device, made while claim ``holder`` holds a ``full`` device: it must
    get the other ``full`` device, the only one that shares a group with it; (pod, claim)."""
    b = ctx.builder
    held = _devices(b, holder)
    with ctx.step("a device allocated beside a 'full' one shares its group"):
        pod, claim = _pod_for(b, _for_count(b, 1))
        _verify(ctx, pod, claim)
        given = _devices(b, claim)
        others = [d for d in GROUPS if GROUPS[d] == "full" and d not in held]
        assert given == others, (
            f"claim {claim} was given {given} ({[GROUPS.get(d) for d in given]}) while claim "
            f"{holder} holds {held} (group 'full') on counter set {COUNTER_SET}: only {others} "
            "shares a compatibility group with it"
        )
    return pod, claim


def _groups_published(ctx: Context) -> None:
    """Until the API server holds the driver's devices with their groups again: while the gate
    was off it dropped them from the slices, which the driver has just published whole."""

    def groups(slices: list[dict]) -> dict[str, list[str]]:
        return {
            device["name"]: consumed.get("compatibilityGroups") or []
            for each in slices
            for device in each.get("spec", {}).get("devices") or []
            for consumed in device.get("consumesCounters") or []
        }

    eventually(
        ctx.driver.slices,
        what=f"the driver's slices to carry the compatibility groups {GROUPS} again",
        timeout=GROUPS_BACK_TIMEOUT,
        until=lambda slices: groups(slices) == {d: [g] for d, g in GROUPS.items()},
    )


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    pod_a, claim_a = _pod_for(b, claim_where(b, "group", "full"))
    _verify(ctx, pod_a, claim_a)
    pod_c, claim_c = _gets_the_other_full_device(ctx, claim_a)
    with ctx.step("no two devices are left that share a group with the 'full' ones"):
        pod_b, _ = _pod_for(b, _for_count(b, 2))
        b.wait_unschedulable(pod_b)
    b.delete_pod_and_wait(pod_b)

    def gate_off(ctx: Context) -> Phase:
        with ctx.step("the allocations survive the gate going off"):
            _verify(ctx, pod_a, claim_a)
            _verify(ctx, pod_c, claim_c)

        def gate_on_again(ctx: Context) -> None:
            b = ctx.builder
            with ctx.step("the allocations survive the gate coming back"):
                _verify(ctx, pod_a, claim_a)
                _verify(ctx, pod_c, claim_c)
            _groups_published(ctx)
            with ctx.step("with both 'full' devices held, a 'mig' device is refused"):
                pod_d, _ = _pod_for(b, _for_count(b, 1))
                b.wait_unschedulable(pod_d)
            b.delete_pod_and_wait(pod_d)
            b.delete_pod_and_wait(pod_c)
            b.delete("resourceclaims", claim_c)  # its device is free only once it is gone
            b.wait_gone("resourceclaims", claim_c, timeout=60)
            _gets_the_other_full_device(ctx, claim_a)

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
