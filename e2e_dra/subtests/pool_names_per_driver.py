"""pool-names-per-driver: two drivers whose pools have the same name, and counter sets of the same
name, each count their own counters, with the scheduler of each state.

This subtest's driver and a second one (``twin``) each publish a pool named ``node-pool`` on the
node, with a counter set ``slots`` that has room for one device and one device that takes it all.
They are two pools (a pool is its driver and its name), so one pod that asks for a device of each
driver must get both, and so must two pods that ask in turn. kube-scheduler 1.36.0 to 1.36.3 kept
counters by pool name only: the second driver's device found the counters taken by the first
one's and the pod stayed unschedulable (kubernetes#140434, fixed in 1.36.4 by kubernetes#140504
and in 1.37.0, as the allocator's source shows).

Every object is made and removed within its phase.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import Builder, request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, KnownBug, OtherDriver, Subtest
from e2e_dra.subtest_kit import claim_env, every_phase, fits_and_runs, remove

POOL = "node-pool"
COUNTER_SET = "slots"
TWIN = "twin"


def resources(nodes: Sequence[str]) -> list[Pool]:
    """The same pool for either driver: one counter set with room for its one device."""
    uses = [{"counterSet": COUNTER_SET, "counters": {"slots": {"value": "1"}}}]
    counters = [{"name": COUNTER_SET, "counters": {"slots": {"value": "1"}}}]
    devices = [{"name": "device", "consumesCounters": uses}]
    return [
        Pool(POOL, slices=[{"sharedCounters": counters}, {"devices": devices}], node_name=nodes[0])
    ]


def _check(ctx: Context) -> None:
    b = ctx.builder
    twin_class = _twin_class(b, ctx.others[TWIN].name)
    b.create(twin_class)

    with ctx.step("one pod gets the device of each driver"):
        own, twin = b.external_claim(), _twin_claim(b, ctx.others[TWIN].name, twin_class)
        pod = b.pod_external(own["metadata"]["name"])
        pod["spec"]["resourceClaims"].append(
            {"name": TWIN, "resourceClaimName": twin["metadata"]["name"]}
        )
        pod["spec"]["containers"][0]["resources"]["claims"].append({"name": TWIN})
        b.create(own, twin, pod)
        fits_and_runs(b, pod)
        b.test_pod(pod, claim_env(own, twin))
        remove(b, [pod], [own, twin])

    with ctx.step("pods that ask in turn get the device of each driver"):
        own, twin = b.external_claim(), _twin_claim(b, ctx.others[TWIN].name, twin_class)
        first, second = (
            b.pod_external(own["metadata"]["name"]),
            b.pod_external(twin["metadata"]["name"]),
        )
        b.create(own, first)
        fits_and_runs(b, first)
        b.create(twin, second)
        fits_and_runs(b, second)
        remove(b, [first, second], [own, twin])

    b.delete("deviceclasses", twin_class["metadata"]["name"])


def _twin_class(b: Builder, driver: str) -> dict:
    device_class = b.device_class(f"{b.class_name()}-{TWIN}")
    device_class["spec"]["selectors"] = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
    return device_class


def _twin_claim(b: Builder, driver: str, device_class: dict) -> dict:
    """A claim for the twin driver's device, configured for that driver."""
    claim = b.external_claim(requests=[request(device_class=device_class["metadata"]["name"])])
    for config in claim["spec"]["devices"]["config"]:
        config["opaque"]["driver"] = driver
    return claim


SUBTEST = Subtest(
    name="pool-names-per-driver",
    keps=(4815,),
    initial=every_phase(_check),
    resources=resources,
    other_drivers=(OtherDriver(TWIN, resources),),
    # Shared counters (DRAPartitionableDevices), beta and on by default since 1.36.
    releases=">=1.36",
    known_bugs=(
        KnownBug(
            issue=140434,
            component="kube-scheduler",
            releases=">=1.36.0,<1.36.4",
            what="counters are kept by pool name, not by driver and pool, so a second driver's "
            "pool of the same name finds its counters taken (fixed in 1.36.4 and 1.37.0)",
            sign=r"is unschedulable, though its devices are free",
        ),
    ),
)
