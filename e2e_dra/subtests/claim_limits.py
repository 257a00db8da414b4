"""claim-limits: claims that crashed shipped schedulers are refused, or allocated, and the
scheduler lives; checked anew in every phase, against that state's scheduler.

- **Counts past the limit.** A claim whose two requests ask for 2^62 devices each (the sum
  overflows a 64-bit int) and one asking for 33 (one more than a claim may get) must be
  refused: by the API server, or by the scheduler for the claim limit (its pod's PodScheduled
  condition says so; the pool has 3 devices, so a refusal for want of devices proves nothing).
  kube-scheduler before 1.36.5 and 1.37.0 summed the counts into a negative slice capacity and
  panicked ("makeslice: cap out of range"; kubernetes#141323, fixed by kubernetes#141307).
- **All devices, each consuming counters.** ``allocationMode: All`` over devices that consume a
  shared counter set with room for all of them: the pod runs with every one. kube-scheduler
  1.35.0 to 1.35.5 and 1.36.0 to 1.36.1 dereferenced a nil pointer there (kubernetes#138882,
  fixed by kubernetes#138885).

A scheduler that crashes fails the phase (the crash watch and the component net name it). On the
releases with the bug that is this subtest's expected failure: the phase runs by itself, so the
crash fails no other subtest's phase, and the suite restarts the scheduler and goes on.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import POD_START_TIMEOUT, Builder, KubeError, PodFailed, request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import every_phase, fits_and_runs, remove
from e2e_dra.waits import eventually

POOL = "limits"
COUNTER_SET = "all-of-them"
DEVICES = 3
HUGE = 2**62  # two of these overflow int64
OVER_LIMIT = 33  # resource.k8s.io's AllocationResultsMaxSize is 32
REFUSALS = ("Unschedulable", "SchedulerError")  # PodScheduled=False reasons that refuse a claim
LIMIT_SIGN = "exceeds the claim limit"
"""The allocator's words for a claim that asks for more than AllocationResultsMaxSize devices:
the pool has only :data:`DEVICES`, so a refusal without them could be for want of devices."""


def resources(nodes: Sequence[str]) -> list[Pool]:
    uses = [{"counterSet": COUNTER_SET, "counters": {"slots": {"value": "1"}}}]
    devices = [{"name": f"slot-{i}", "consumesCounters": uses} for i in range(DEVICES)]
    counters = [{"name": COUNTER_SET, "counters": {"slots": {"value": str(DEVICES)}}}]
    return [
        Pool(POOL, slices=[{"sharedCounters": counters}, {"devices": devices}], node_name=nodes[0])
    ]


def _check(ctx: Context) -> None:
    # In the order of the bugs' releases: 1.36.0 and 1.36.1 have both, and crash on this first.
    b = ctx.builder
    with ctx.step(f"allocationMode All gets all {DEVICES} devices that consume counters"):
        claim = b.external_claim(requests=[request(allocation_mode="All")])
        pod = b.pod_external(claim["metadata"]["name"])
        b.create(claim, pod)
        fits_and_runs(b, pod)
        allocation = b.get("resourceclaims", claim["metadata"]["name"])["status"]["allocation"]
        given = sorted(r["device"] for r in allocation["devices"]["results"])
        assert given == [f"slot-{i}" for i in range(DEVICES)], f"allocated {given}"
        remove(b, [pod], [claim])

    for counts in ((HUGE, HUGE), (OVER_LIMIT,)):
        with ctx.step(f"a claim for {' + '.join(map(str, counts))} devices is refused"):
            _refused(ctx, counts)


def _refused(ctx: Context, counts: Sequence[int]) -> None:
    """A claim with one request per count: the API server refuses it, or the scheduler refuses
    its pod (``PodScheduled=False``, as ``Unschedulable`` or, where the allocator reports the
    claim itself as wrong, ``SchedulerError``), which is never bound."""
    b = ctx.builder
    claim = b.external_claim(
        requests=[request(f"request-{i}", count=count) for i, count in enumerate(counts)]
    )
    pod = b.pod_external(claim["metadata"]["name"])
    try:
        b.create(claim)
    except KubeError as exc:
        if exc.status != 422:
            raise
        ctx.facts[f"refused by the API server/{ctx.phase}/{counts}"] = str(exc)[:300]
        return
    b.create(pod)
    refusal = eventually(
        lambda: _scheduling(b, pod["metadata"]["name"]),
        what=f"the scheduler to refuse pod {pod['metadata']['name']}",
        timeout=POD_START_TIMEOUT,
        until=lambda condition: condition.get("reason") in REFUSALS,
    )
    said = f"{refusal['reason']}: {refusal.get('message', '')[:300]}"
    ctx.facts[f"refused by the scheduler/{ctx.phase}/{counts}"] = said
    assert LIMIT_SIGN in said, (
        f"pod {pod['metadata']['name']} was refused, but not for the claim limit of "
        f"{OVER_LIMIT - 1} devices (the pool has {DEVICES}): {said}"
    )
    remove(b, [pod], [claim])


def _scheduling(b: Builder, name: str) -> dict:
    """The pod's PodScheduled condition ({} before the scheduler looked); a bound pod fails."""
    pod = b.read_pod(name)
    if pod.get("spec", {}).get("nodeName"):
        raise PodFailed(f"pod {name} was bound to {pod['spec']['nodeName']}: it should be refused")
    conditions = pod.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), {})


COUNT_OVERFLOW = "two requests for 2^62 devices crash the scheduler (makeslice: cap out of range)"
OVERFLOW_SIGN = r"makeslice: cap out of range"
ALL_WITH_COUNTERS = "allocationMode All over devices that consume counters crashes the scheduler"
NIL_SIGN = r"invalid memory address or nil pointer dereference"

SUBTEST = Subtest(
    name="claim-limits",
    keps=(4381, 4815),
    initial=every_phase(_check),
    resources=resources,
    releases=">=1.36",
    kubelet_releases=">=1.34",
    known_bugs=(  # the first that a release has is the one expected: as ``_check`` meets them
        KnownBug(138882, "kube-scheduler", ">=1.36.0,<1.36.2", ALL_WITH_COUNTERS, NIL_SIGN),
        KnownBug(141323, "kube-scheduler", "<1.36.5", COUNT_OVERFLOW, OVERFLOW_SIGN),
        KnownBug(141323, "kube-scheduler", "==1.37.0", COUNT_OVERFLOW, OVERFLOW_SIGN),
    ),
)
