"""allocation-edges: allocations that shipped releases got wrong, checked anew in every phase, so
each runs on the scheduler and the kubelet of that phase's state.

- **A tainted device's counters are given back.** Two devices share a counter set with room for
  one of them; the first, in slice order, is tainted NoSchedule. A claim for one device must get
  the second: the allocator rejects the tainted one and must not keep what it would have
  consumed. kube-scheduler 1.36.0 to 1.36.2 added the counters before the taint check and kept
  them, so the pod stayed Pending though a device was free (kubernetes#140436; 1.36.3 rolls the
  reservation back, as the allocator's source shows).
- **A pod that adds a new claim to an already prepared one starts.** A running pod holds claim
  A; a second pod uses A (listed first) and a new claim B. kubelet 1.34.0 to 1.34.3 and 1.35.0
  looked up B's claim info among A's, so the second pod never started ("unable to get claim
  info"; kubernetes#135901, fixed in 1.34.4 and 1.35.1).
- **A shared claim stays prepared while a pod still uses it.** Then the first pod, the one that
  prepared A, is deleted. The kubelet must remember every pod that uses a claim, not only the
  one that prepared it: it may ask the driver to unprepare A only once its last pod is gone.
  One that forgets the second pod unprepares A under it (the driver tears its device down, its
  CDI spec goes, a restarted container cannot start) and unprepares nothing when the second pod
  goes. So, with the first pod gone, the driver must have had no NodeUnprepareResources call for
  A and the second pod must still run and see both claims; once the second pod is gone too, A
  must have been unprepared exactly once.

Every object is made and removed within its phase: the checks are about what the components of
that state do, and nothing is left to span a restart.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.driver import GRPCCall, Pool
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import (
    UNPREPARE,
    allocated,
    claim_env,
    claim_where,
    driver_calls,
    every_phase,
    fits_and_runs,
    remove,
)

POOL = "edges"
COUNTER_SET = "one-slot"
COUNTED, PLAIN = "counted", "plain"
TAINTED, FREE = "counted-tainted", "counted-free"
TAINT = {"key": "allocation-edges", "value": "rejected", "effect": "NoSchedule"}


def _device(name: str, kind: str, **more: object) -> dict:
    return {"name": name, "attributes": {"edge": {"string": kind}}, **more}


def _counted(name: str, **more: object) -> dict:
    uses = [{"counterSet": COUNTER_SET, "counters": {"slots": {"value": "1"}}}]
    return _device(name, COUNTED, consumesCounters=uses, **more)


def resources(nodes: Sequence[str]) -> list[Pool]:
    # The tainted device comes first: the allocator meets it before the free one. Counters and
    # devices are separate slices of the pool, as the API wants them.
    devices = [
        _counted(TAINTED, taints=[dict(TAINT)]),
        _counted(FREE),
        *(_device(f"plain-{i}", PLAIN) for i in range(3)),
    ]
    counters = [{"name": COUNTER_SET, "counters": {"slots": {"value": "1"}}}]
    return [
        Pool(POOL, slices=[{"sharedCounters": counters}, {"devices": devices}], node_name=nodes[0])
    ]


def _check(ctx: Context) -> None:
    b = ctx.builder
    with ctx.step("a tainted device's counters are given back: the next device is allocated"):
        claim = claim_where(b, "edge", COUNTED)
        pod = b.pod_external(claim["metadata"]["name"])
        b.create(claim, pod)
        fits_and_runs(b, pod)
        given = [r.get("device") for r in allocated(b, claim["metadata"]["name"])]
        assert given == [FREE], f"claim {claim['metadata']['name']} was given {given}, not {FREE}"
        remove(b, [pod], [claim])

    with ctx.step("a pod that adds a new claim to an already prepared one starts"):
        prepared = claim_where(b, "edge", PLAIN)
        first = b.pod_external(prepared["metadata"]["name"])
        created, _ = b.create(prepared, first)
        b.test_pod(first)
        new = claim_where(b, "edge", PLAIN)
        second = b.pod_external(prepared["metadata"]["name"])
        second["spec"]["resourceClaims"].append(
            {"name": "new-claim", "resourceClaimName": new["metadata"]["name"]}
        )
        second["spec"]["containers"][0]["resources"]["claims"].append({"name": "new-claim"})
        b.create(new, second)
        fits_and_runs(b, second, timeout=SECOND_POD_TIMEOUT)

    # The kubelet unprepares a pod's claims before it lets the pod object go (SyncTerminatingPod:
    # "BEFORE the pod status is changed on the API server"): once a pod is gone, the unprepare
    # call its deletion made, if any, is in the driver's call log and has ended.
    shared, uid = prepared["metadata"]["name"], created["metadata"]["uid"]
    first_name, second_name = first["metadata"]["name"], second["metadata"]["name"]
    with ctx.step("a shared claim stays prepared when the pod that prepared it goes"):
        b.delete_pod_and_wait(first_name)
        _kept_prepared(driver_calls(ctx, UNPREPARE, uid), shared, first_name, second_name)
        b.test_pod(second, env=claim_env(prepared, new), timeout=SECOND_POD_TIMEOUT)

    with ctx.step("the shared claim is unprepared once, when its last pod goes"):
        since = len(ctx.driver.calls.records)
        b.delete_pod_and_wait(second_name)
        _unprepared_once(driver_calls(ctx, UNPREPARE, uid), shared, second_name, since)
        remove(b, [], [new, prepared])


def _kept_prepared(
    unprepares: Sequence[tuple[int, GRPCCall]], claim: str, gone: str, running: str
) -> None:
    """No NodeUnprepareResources call for ``claim`` (``unprepares``: those the driver had), though
    pod ``gone``, which prepared it, is gone: pod ``running`` still uses it."""
    assert not unprepares, (
        f"claim {claim} was unprepared ({len(unprepares)} NodeUnprepareResources call(s)) when "
        f"pod {gone}, which prepared it, was deleted, although pod {running} still runs with it: "
        "the kubelet did not count that pod among the claim's users"
    )


def _unprepared_once(
    unprepares: Sequence[tuple[int, GRPCCall]], claim: str, last: str, since: int
) -> None:
    """``claim``'s ``unprepares`` are one call that succeeded, made once its last pod ``last``
    was deleted (at call log index ``since`` or later)."""
    said = [f"#{i} {c.error or ('ok' if c.done else 'running')}" for i, c in unprepares]
    assert [i >= since and c.done and c.error is None for i, c in unprepares] == [True], (
        f"claim {claim}: want one successful NodeUnprepareResources call once its last pod "
        f"{last} was deleted (from call #{since} on), got {', '.join(said) or 'none'}"
    )


# Its images are local and its devices free: a kubelet that can prepare starts it in seconds. Not
# the builder's 300 s, which a kubelet with kubernetes#135901 would wait out in every phase.
SECOND_POD_TIMEOUT = 120.0
NEVER_STARTS = r"timed out after \S+ waiting for pod \S+ to run"
"""kubernetes#135901: the kubelet never prepares the second pod's claims, so it never runs."""

SUBTEST = Subtest(
    name="allocation-edges",
    keps=(4381, 4815, 5055),
    initial=every_phase(_check),
    resources=resources,
    # Shared counters (DRAPartitionableDevices) and device taints with the API fields they need.
    releases=">=1.36",
    kubelet_releases=">=1.34",
    known_bugs=(
        KnownBug(
            issue=140436,
            component="kube-scheduler",
            releases=">=1.36.0,<1.36.3",
            what="a device rejected for its taint keeps its counters, so the free device "
            "that shares them is not allocated (fixed in 1.36.3)",
            sign=r"is unschedulable, though its devices are free",
            during="a tainted device's counters are given back",
        ),
        KnownBug(
            issue=135901,
            component="kubelet",
            releases=">=1.34.0,<1.34.4",
            what="a pod using an already prepared claim plus a new one never starts "
            "(fixed in 1.34.4)",
            sign=NEVER_STARTS,
            during="a pod that adds a new claim to an already prepared one starts",
        ),
        KnownBug(
            issue=135901,
            component="kubelet",
            releases="==1.35.0",
            what="a pod using an already prepared claim plus a new one never starts "
            "(fixed in 1.35.1)",
            sign=NEVER_STARTS,
            during="a pod that adds a new claim to an already prepared one starts",
        ),
    ),
)
