"""device-constraints: constraints over the devices of one request hold, with the scheduler of
each state.

The driver publishes two groups of devices in one slice, told apart by the string attribute
``group`` (each request selects one group): ``numa-0`` .. ``numa-3``, whose ``numa`` attribute
is 1, 2, 1 and 3, then ``backtrack-0`` .. ``backtrack-2``, whose ``numa`` is 4, 5 and 5. In every
phase:

- **matchAttribute**: a request for two devices of group ``numa`` that must share ``numa`` gets
  the two with 1;
- **distinctAttribute**: a request for three devices of group ``numa`` that must differ in
  ``numa`` gets one each of 1, 2 and 3. kube-scheduler 1.36 remembered one value per request
  rather than one per device, so it compared the third device with the second only and gave 1, 2
  and 1 (kubernetes#140438, fixed in 1.37.0 by kubernetes#140600; no 1.36 release has the fix, as
  the allocator's source shows);
- **matchAttribute after backtracking**: a request for two devices of group ``backtrack`` that
  must share ``numa`` gets ``backtrack-1`` and ``backtrack-2``. The allocator tries devices in
  slice order: it takes ``backtrack-0`` first, finds no second device of numa 4, gives it back and
  only then finds the pair of 5. In the two checks above the first device tried always has a
  partner, so they never make the allocator give a device back; this one does, and fails where
  giving it back leaves its numa in the constraint (every later device is then compared with 4).

Every object is made and removed within its phase.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import DEFAULT_REQUEST, Builder, PodFailed, request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import allocated, every_phase, fits_and_runs, remove

NUMA = (1, 2, 1, 3)  # the order matters: the buggy allocator meets the second 1 third
# The first has no partner: a pair from these makes the allocator try it and give it back.
BACKTRACK_NUMA = (4, 5, 5)
# The groups, which are also the prefixes of their devices' names.
FIRST_CHOICE, BACKTRACK = "numa", "backtrack"
NUMA_OF = {
    f"{group}-{i}": numa
    for group, values in ((FIRST_CHOICE, NUMA), (BACKTRACK, BACKTRACK_NUMA))
    for i, numa in enumerate(values)
}
"""Every device the driver publishes, in slice order, with its ``numa``."""
GIVEN_BACK = f"{BACKTRACK}-0"  # tried first by the backtracking request, and given back
BACKTRACK_PAIR = [f"{BACKTRACK}-1", f"{BACKTRACK}-2"]  # what that request must get
GATE = "DRAConsumableCapacity"  # distinctAttribute
SAME_VALUE = "were given devices of the same numa"


def resources(nodes: Sequence[str]) -> list[Pool]:
    devices = [
        {
            "name": name,
            "attributes": {"numa": {"int": numa}, "group": {"string": name.rpartition("-")[0]}},
        }
        for name, numa in NUMA_OF.items()
    ]
    return [Pool(nodes[0], slices=[{"devices": devices}], node_name=nodes[0])]


def _check(ctx: Context) -> None:
    b = ctx.builder
    with ctx.step("matchAttribute: the two devices of a request share their numa"):
        claim, pod = _claim_and_pod(b, 2, "matchAttribute", FIRST_CHOICE)
        fits_and_runs(b, pod)
        given = _numa_given(b, claim)
        assert sorted(given) == [1, 1], (
            f"claim {claim['metadata']['name']} must get two devices of one numa, got numa {given}"
        )
        remove(b, [pod], [claim])

    with ctx.step("distinctAttribute: the three devices of a request differ in numa"):
        claim, pod = _claim_and_pod(b, 3, "distinctAttribute", FIRST_CHOICE)
        fits_and_runs(b, pod)
        given = _numa_given(b, claim)
        assert sorted(given) == [1, 2, 3], (
            f"claim {claim['metadata']['name']} {SAME_VALUE}, which its distinctAttribute "
            f"constraint forbids: numa {given}"
        )
        remove(b, [pod], [claim])

    with ctx.step("matchAttribute after backtracking: a device given back leaves the constraint"):
        claim, pod = _claim_and_pod(b, 2, "matchAttribute", BACKTRACK)
        name = claim["metadata"]["name"]
        wanted = f"{' and '.join(BACKTRACK_PAIR)} (numa {NUMA_OF[BACKTRACK_PAIR[0]]})"
        try:
            fits_and_runs(b, pod)
        except PodFailed as exc:
            raise AssertionError(
                f"claim {name} must get {wanted}, once the allocator tried {GIVEN_BACK} (numa "
                f"{NUMA_OF[GIVEN_BACK]}, no partner) and gave it back; instead: {exc}"
            ) from exc
        got = sorted(str(r.get("device")) for r in allocated(b, name))
        assert got == BACKTRACK_PAIR, f"claim {name} must get {wanted}, got {got}"
        remove(b, [pod], [claim])


def _claim_and_pod(b: Builder, count: int, constraint: str, group: str) -> tuple[dict, dict]:
    """A claim for ``count`` devices of ``group`` under ``constraint`` on ``numa``, with its pod;
    created."""
    selector = f'device.attributes["{b.driver_name}"].group == "{group}"'
    claim = b.external_claim(
        requests=[request(selectors=[selector], allocation_mode="ExactCount", count=count)]
    )
    constraints = [{"requests": [DEFAULT_REQUEST], constraint: f"{b.driver_name}/numa"}]
    claim["spec"]["devices"]["constraints"] = constraints
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    return claim, pod


def _numa_given(b: Builder, claim: dict) -> list[int]:
    """The ``numa`` of each device the claim was given."""
    return [NUMA_OF[str(r.get("device"))] for r in allocated(b, claim["metadata"]["name"])]


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
            # The step's own words, or the allocation oracle's for the same claim.
            sign=rf"{SAME_VALUE}|rule 'constraints': .*: distinctAttribute ",
        ),
    ),
)
