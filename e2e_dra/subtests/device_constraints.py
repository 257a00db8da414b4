"""device-constraints: constraints over the devices of one request hold, with the scheduler of
each state.

The driver publishes four devices whose ``numa`` attribute is 1, 2, 1 and 3, in that order. In
every phase:

- **matchAttribute**: a request for two devices that must share ``numa`` gets the two with 1;
- **distinctAttribute**: a request for three devices that must differ in ``numa`` gets one each
  of 1, 2 and 3. kube-scheduler 1.36 remembered one value per request rather than one per device,
  so it compared the third device with the second only and gave 1, 2 and 1 (kubernetes#140438,
  fixed in 1.37.0 by kubernetes#140600; no 1.36 release has the fix, as the allocator's source
  shows).

Every object is made and removed within its phase.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import DEFAULT_REQUEST, Builder, request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import allocated, every_phase, fits_and_runs, remove

NUMA = (1, 2, 1, 3)  # the order matters: the buggy allocator meets the second 1 third
GATE = "DRAConsumableCapacity"  # distinctAttribute
SAME_VALUE = "were given devices of the same numa"


def resources(nodes: Sequence[str]) -> list[Pool]:
    devices = [
        {"name": f"numa-{i}", "attributes": {"numa": {"int": numa}}} for i, numa in enumerate(NUMA)
    ]
    return [Pool(nodes[0], slices=[{"devices": devices}], node_name=nodes[0])]


def _check(ctx: Context) -> None:
    b = ctx.builder
    with ctx.step("matchAttribute: the two devices of a request share their numa"):
        claim, pod = _claim_and_pod(b, 2, "matchAttribute")
        fits_and_runs(b, pod)
        given = _numa_given(b, claim)
        assert sorted(given) == [1, 1], (
            f"claim {claim['metadata']['name']} must get two devices of one numa, got numa {given}"
        )
        remove(b, [pod], [claim])

    with ctx.step("distinctAttribute: the three devices of a request differ in numa"):
        claim, pod = _claim_and_pod(b, 3, "distinctAttribute")
        fits_and_runs(b, pod)
        given = _numa_given(b, claim)
        assert sorted(given) == [1, 2, 3], (
            f"claim {claim['metadata']['name']} {SAME_VALUE}, which its distinctAttribute "
            f"constraint forbids: numa {given}"
        )
        remove(b, [pod], [claim])


def _claim_and_pod(b: Builder, count: int, constraint: str) -> tuple[dict, dict]:
    """A claim for ``count`` devices under ``constraint`` on ``numa``, with its pod; created."""
    claim = b.external_claim(requests=[request(allocation_mode="ExactCount", count=count)])
    constraints = [{"requests": [DEFAULT_REQUEST], constraint: f"{b.driver_name}/numa"}]
    claim["spec"]["devices"]["constraints"] = constraints
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    return claim, pod


def _numa_given(b: Builder, claim: dict) -> list[int]:
    """The ``numa`` of each device the claim was given."""
    given = allocated(b, claim["metadata"]["name"])
    return [NUMA[int(str(r.get("device")).removeprefix("numa-"))] for r in given]


SUBTEST = Subtest(
    name="device-constraints",
    keps=(4381, 5075),
    initial=every_phase(_check),
    resources=resources,
    feature_gates=(GATE,),
    # distinctAttribute came with DRAConsumableCapacity, beta and on by default since 1.36.
    releases=">=1.36",
    known_bugs=(
        KnownBug(
            issue=140438,
            component="kube-scheduler",
            releases=">=1.36.0,<1.37.0",
            what="a distinctAttribute constraint compares a request's next device with its "
            "latest one only, so three devices can repeat a value (fixed in 1.37.0; never "
            "in 1.36)",
            sign=SAME_VALUE,
        ),
    ),
)
