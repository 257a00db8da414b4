"""burst-allocation: pods that arrive together each get a device no other claim holds, with the
scheduler of each state.

The scheduler allocates a claim in its scheduling cycle and writes the allocation later, in the
pod's binding cycle; the next pod's cycle may start before that write lands, so the allocator
must count the allocations still in flight as taken. In each phase four pods, each with a claim
of its own for one device, arrive at once on a node with three devices: three must run, each
claim allocated a device of its own, and the fourth must wait, unschedulable; once one running
pod and its claim are deleted, the fourth runs on the device they freed. A scheduler that
forgets an in-flight allocation hands one device to two claims (two workloads sharing a device
they each believe exclusive). Each phase makes and removes its own objects.
"""

from __future__ import annotations

from e2e_dra.builder import POD_START_TIMEOUT, Builder, is_unschedulable
from e2e_dra.subtest import Context, Subtest
from e2e_dra.subtest_kit import allocated, claim_and_pod, devices_per_node, every_phase, remove
from e2e_dra.waits import eventually

DEVICES = 3


def _check(ctx: Context) -> None:
    b = ctx.builder
    pairs = [claim_and_pod(b) for _ in range(DEVICES + 1)]
    b.create(*(obj for pair in pairs for obj in pair))
    names = [pod["metadata"]["name"] for _, pod in pairs]
    with ctx.step(f"{DEVICES} of {DEVICES + 1} pods that arrive at once run, the last one waits"):
        eventually(
            lambda: _states(b, names, pairs),
            what=f"{DEVICES} of the pods {names} to run and one to be unschedulable",
            timeout=POD_START_TIMEOUT,
            until=lambda states: (
                list(states.values()).count("Running") == DEVICES
                and list(states.values()).count("unschedulable") == 1
            ),
        )
    with ctx.step("each running pod's claim holds a device no other claim holds"):
        held = {claim["metadata"]["name"]: _devices(b, claim) for claim, _ in pairs}
        taken = [device for devices in held.values() for device in devices]
        assert len(taken) == len(set(taken)) == DEVICES, (
            f"{DEVICES} devices for {DEVICES + 1} claims that each ask for one; allocated: {held}"
        )
    states = _states(b, names, pairs)
    (waiting,) = [pair for pair in pairs if states[pair[1]["metadata"]["name"]] != "Running"]
    first = next(pair for pair in pairs if pair is not waiting)
    with ctx.step("the waiting pod runs once a running pod and its claim are deleted"):
        remove(b, [first[1]], [first[0]])
        b.test_pod(waiting[1])
    remove(
        b,
        [pod for _, pod in pairs if pod is not first[1]],
        [c for c, _ in pairs if c is not first[0]],
    )


def _states(b: Builder, names: list[str], pairs: list[tuple[dict, dict]]) -> dict[str, str]:
    """Each pod's phase, "unschedulable" for a pending pod the scheduler gave up on for now;
    more pods running than there are devices fails at once, naming what each claim holds."""
    pods = {name: b.read_pod(name) for name in names}
    states = {
        name: "unschedulable" if is_unschedulable(pod) else pod.get("status", {}).get("phase", "")
        for name, pod in pods.items()
    }
    running = list(states.values()).count("Running")
    assert running <= DEVICES, (
        f"{running} pods run on {DEVICES} devices, each with a claim for one of its own; "
        f"allocated: { {c['metadata']['name']: _devices(b, c) for c, _ in pairs} }"
    )
    return states


def _devices(b: Builder, claim: dict) -> list[tuple[str, str, str]]:
    return [(r["driver"], r["pool"], r["device"]) for r in allocated(b, claim["metadata"]["name"])]


SUBTEST = Subtest(
    name="burst-allocation",
    keps=(4381,),
    initial=every_phase(_check),
    resources=devices_per_node(DEVICES),
    releases=">=1.34",
)
