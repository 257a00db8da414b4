"""consumable-capacity: shares of one device (DRAConsumableCapacity) keep their identity and
their consumed capacity across upgrade and downgrade, and the scheduler of each release counts
what they consume; a device that does not allow multiple allocations is never shared.

The driver publishes, in one pool, a device that allows multiple allocations, with 10Gi of
``memory`` whose request policy rounds each request up to 2Gi + n * 2Gi, and a device without
``allowMultipleAllocations`` that has 8Gi of ``memory`` (no request policy). Claims A (3Gi, so 4Gi
consumed) and B (1Gi, so 2Gi) get shares of the shared device before the upgrade. After each
restart their allocation results must be what the scheduler recorded: same device, same
``shareID``, same ``consumedCapacity``; their pods must still run untouched, each prepared on its
own (checked first thing after each restart: the same pod, its container neither restarted nor
replaced, its claim still reserved for it and the driver's env for each of its shares still in
its container). What is left decides what fits, in every phase: 4Gi, so a 5Gi claim (6Gi)
waits and a 3Gi one (4Gi) runs; after the upgrade claim C takes the last 4Gi as two shares of
its own (two requests of 1Gi) and a driver-style status (``status.devices``, keyed by
``shareID``) for each, and then a 1Gi claim waits. C's pod, too, must run untouched after the
downgrade.

Claim D (3Gi, so 4Gi) is made once C has filled the device, and waits, holding nothing, across
the downgrade: the older scheduler must find no room for it either (its own FailedScheduling,
not the status the newer one wrote), and deleting C must give D exactly C's 4Gi.

Every claim for shares selects the devices not named ``exclusive-device`` (``SHARED_ONLY``):
without that, the exclusive device's 8Gi would take the 5Gi probe (and could take A or B).
Claims X1 and X2 (1Gi each) select only the exclusive device. X1 gets it before the upgrade,
whole: no ``shareID``, no ``consumedCapacity``. X2 waits while X1 holds it, in every phase (after
each restart by the scheduler that runs now), although the device's 8Gi would hold both
requests were it shared; once X1 is deleted after the downgrade, X2 gets the device, whole.

What is left of the shared device's 10Gi, in Gi after rounding (D's 4 are exactly C's):

- before the upgrade: A 4 + B 2 held, 4 left: 5Gi (6) waits, 3Gi (4) fits.
- after the upgrade: 4 left: 5Gi waits, 3Gi fits; C takes 2 + 2, 0 left: D (4) waits, 1Gi
  (2) waits.
- after the downgrade: 0 left: 1Gi waits, D still waits; C deleted, D takes its 4, 0 left:
  1Gi waits; D deleted, 4 left: 5Gi waits, 3Gi fits.

The downgrade brings shares written by the newer release to the older one. Upstream's KEP-5075
says the ``shareID`` follows the "optional map keys" strategy on downgrade and that a rolled-back
cluster keeps ``shareID`` and ``consumedCapacity`` so existing allocations stay valid; both
releases here know the field and the key (beta, on by default since 1.36), so nothing may be
lost: C's results and its two ``status.devices`` entries must come back unchanged, the older
scheduler must still see the device as full, and C's 4Gi must be free again once C is deleted
(D gets them; once D is deleted, 5Gi waits and 3Gi fits again).
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    Running,
    claim_env,
    older_writes_hold,
    running,
    scheduler_found_no_fit,
    still_untouched,
)
from e2e_dra.subtests._consumable_capacity import (
    CAPACITY,
    FIRST_SHARES,
    GATE,
    POOL,
    SHARED_DEVICE,
    Shares,
    check_distinct,
    check_left,
    check_pods,
    check_recorded,
    check_status,
    claim_and_pod,
    delete_pod_and_claim,
    report_status,
    results,
    shares_of,
)

EXCLUSIVE = "exclusive-device"
ATTRIBUTE_DOMAIN = "example.com"
EXCLUSIVE_DEVICE = {
    "name": EXCLUSIVE,
    # CEL cannot see a device's name: an attribute names it for the selectors.
    "attributes": {f"{ATTRIBUTE_DOMAIN}/name": {"string": EXCLUSIVE}},
    # No allowMultipleAllocations. Room for any probe (5Gi) and for both X1 and X2 were it
    # shared: only SHARED_ONLY keeps the probes off it, only exclusivity keeps X2 off it.
    "capacity": {CAPACITY: {"value": "8Gi"}},
}
_NAMED = f'device.attributes["{ATTRIBUTE_DOMAIN}"].?name.orValue("")'
SELECT_EXCLUSIVE = f'{_NAMED} == "{EXCLUSIVE}"'
"""The exclusive device only (the shared one has no such attribute: no error, no match)."""
SHARED_ONLY = f'{_NAMED} != "{EXCLUSIVE}"'
"""Every device but the exclusive one: what each claim for a share selects."""
WHOLE = {"whole": "1Gi"}
"""What X1 and X2 ask of the exclusive device: a share's worth, were it shared."""
PENDING = {"pending": "3Gi"}
"""Claim D: more than is left once C holds the last 4Gi."""
PENDING_CONSUMED = {"pending": "4Gi"}
"""What D consumes after rounding: exactly what C holds."""


def resources(nodes: Sequence[str]) -> list[Pool]:
    # The gate-cycle twin publishes the shared device alone (_consumable_capacity.resources).
    devices = [SHARED_DEVICE, EXCLUSIVE_DEVICE]
    return [Pool(POOL, slices=[{"devices": devices}], node_name=nodes[0])]


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claims: dict[str, dict] = {}  # claim name -> claim, for every claim that holds a share
    pods: dict[str, dict] = {}  # claim name -> the pod that uses it
    started: dict[str, Running] = {}  # claim name -> its pod as it ran once checked
    recorded: dict[str, Shares] = {}  # claim name -> its shares as first read
    with ctx.step("two claims share the device"):
        consumed = {}
        for requests, rounded in FIRST_SHARES:
            claim, pod = claim_and_pod(ctx, requests, selector=SHARED_ONLY)
            claims[claim["metadata"]["name"]] = claim
            pods[claim["metadata"]["name"]] = pod
            consumed[claim["metadata"]["name"]] = rounded
        for name, claim in claims.items():
            b.wait_running(pods[name]["metadata"]["name"])
            recorded[name] = shares_of(ctx, claim, consumed[name])
        check_distinct(recorded)
        check_pods(ctx, pods, claims)
        started.update(_running(ctx, pods))
        prepared = {ref.name for ref in ctx.driver.prepared_claims()}
        assert set(pods) <= prepared, f"the driver prepared {prepared}, not each of {set(pods)}"
    with ctx.step("4Gi left: 5Gi waits, 3Gi fits"):
        check_left(ctx, too_much="5Gi", fits="3Gi", selector=SHARED_ONLY)
    with ctx.step("a device without allowMultipleAllocations goes whole to one claim"):
        claim_x1, pod_x1 = claim_and_pod(ctx, WHOLE, selector=SELECT_EXCLUSIVE)
        name_x1 = claim_x1["metadata"]["name"]
        b.test_pod(pod_x1, env=claim_env(claim_x1))
        recorded_x1 = {name_x1: _whole_device(ctx, claim_x1)}
        holder = running(b, pod_x1["metadata"]["name"])
    with ctx.step("a second claim for that device waits while the first holds it"):
        claim_x2, pod_x2 = claim_and_pod(ctx, WHOLE, selector=SELECT_EXCLUSIVE)
        _waits_holding_nothing(ctx, pod_x2, claim_x2)

    def after_upgrade(ctx: Context) -> Phase:
        with ctx.step("the pods holding shares run untouched"):
            _still_untouched(ctx, started, claims)
        with ctx.step("the pod holding the exclusive device runs untouched"):
            still_untouched(ctx.builder, holder, [name_x1], env=claim_env(claim_x1))
        with ctx.step("the shares survived the upgrade"):
            check_recorded(ctx, claims, recorded)
            check_pods(ctx, pods, claims)
        with ctx.step("the exclusive device is still whole to one claim; the other still waits"):
            check_recorded(ctx, {name_x1: claim_x1}, recorded_x1)
            _still_waits(ctx, pod_x2, claim_x2)
        with ctx.step("4Gi left: 5Gi waits, 3Gi fits"):
            check_left(ctx, too_much="5Gi", fits="3Gi", selector=SHARED_ONLY)
        with ctx.step("a claim of two requests takes the last 4Gi as two shares"):
            claim_c, pod_c = claim_and_pod(
                ctx, {"first": "1Gi", "second": "1Gi"}, selector=SHARED_ONLY
            )
            name_c = claim_c["metadata"]["name"]
            ctx.builder.wait_running(pod_c["metadata"]["name"])
            claims[name_c] = claim_c
            pods[name_c] = pod_c
            recorded[name_c] = shares_of(ctx, claim_c, {"first": "2Gi", "second": "2Gi"})
            check_distinct(recorded)
            check_pods(ctx, {name_c: pod_c}, claims)
            started.update(_running(ctx, {name_c: pod_c}))
        with ctx.step("a driver reports a status for each share"):
            statuses = report_status(ctx, name_c, recorded[name_c])
        with ctx.step("a claim for more than is left waits, holding nothing"):
            claim_d, pod_d = claim_and_pod(ctx, PENDING, selector=SHARED_ONLY)
            _waits_holding_nothing(ctx, pod_d, claim_d)
        with ctx.step("the device is full: 1Gi waits"):
            check_left(ctx, too_much="1Gi", fits=None, selector=SHARED_ONLY)

        def after_downgrade(ctx: Context) -> Phase:
            b = ctx.builder
            with ctx.step("the pods holding shares run untouched"):
                _still_untouched(ctx, started, claims)
            with ctx.step("the pod holding the exclusive device runs untouched"):
                still_untouched(b, holder, [name_x1], env=claim_env(claim_x1))
            with ctx.step("the shares written by both releases survived the downgrade"):
                check_recorded(ctx, claims, recorded)
                check_status(ctx, name_c, statuses)
                check_pods(ctx, pods, claims)
            with ctx.step(
                "the exclusive device is still whole to one claim; the other still waits"
            ):
                check_recorded(ctx, {name_x1: claim_x1}, recorded_x1)
                _still_waits(ctx, pod_x2, claim_x2)
            with ctx.step("the claim that waited before the downgrade still waits"):
                _still_waits(ctx, pod_d, claim_d)
            with ctx.step("the device is full: 1Gi waits"):
                check_left(ctx, too_much="1Gi", fits=None, selector=SHARED_ONLY)
            with ctx.step("deleting the two-share claim frees 4Gi: the waiting claim gets them"):
                delete_pod_and_claim(ctx, pods.pop(name_c), claims.pop(name_c))
                del recorded[name_c]
                name_d = claim_d["metadata"]["name"]
                b.test_pod(pod_d, env=claim_env(claim_d))
                recorded[name_d] = shares_of(ctx, claim_d, PENDING_CONSUMED)
                check_distinct(recorded)
                claims[name_d] = claim_d
                pods[name_d] = pod_d
            with ctx.step("the device is full again: 1Gi waits"):
                check_left(ctx, too_much="1Gi", fits=None, selector=SHARED_ONLY)
            with ctx.step("deleting the claim that waited frees 4Gi: 5Gi waits, 3Gi fits"):
                delete_pod_and_claim(ctx, pods.pop(name_d), claims.pop(name_d))
                check_left(ctx, too_much="5Gi", fits="3Gi", selector=SHARED_ONLY)
            with ctx.step("deleting the exclusive device's claim gives it whole to the other"):
                delete_pod_and_claim(ctx, pod_x1, claim_x1)
                b.test_pod(pod_x2, env=claim_env(claim_x2))
                _whole_device(ctx, claim_x2)
                delete_pod_and_claim(ctx, pod_x2, claim_x2)
            for name in list(claims):
                delete_pod_and_claim(ctx, pods.pop(name), claims.pop(name))
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _running(ctx: Context, pods: dict[str, dict]) -> dict[str, Running]:
    """Each pod (by its claim's name) as it runs now."""
    return {name: running(ctx.builder, pod["metadata"]["name"]) for name, pod in pods.items()}


def _still_untouched(ctx: Context, started: dict[str, Running], claims: dict[str, dict]) -> None:
    """Each pod runs as it did when first checked, still holding its claim and seeing the
    driver's line for each of the claim's requests."""
    for name, was in started.items():
        still_untouched(ctx.builder, was, [name], env=claim_env(claims[name]))


def _whole_device(ctx: Context, claim: dict) -> Shares:
    """The claim's allocation, checked to be the exclusive device, whole (see :func:`whole`)."""
    name = claim["metadata"]["name"]
    return whole(name, results(ctx, name), ctx.builder.driver_name)


def whole(claim_name: str, found: list[dict], driver: str) -> Shares:
    """``found``, the results of claim ``claim_name``, checked: one, the exclusive device of
    ``driver``, whole. ``shareID`` and ``consumedCapacity`` are for a device that allows
    multiple allocations only. The result as :func:`check_recorded` compares it."""
    devices = [(r.get("driver"), r.get("pool"), r.get("device")) for r in found]
    want = (driver, POOL, EXCLUSIVE)
    assert devices == [want], f"ResourceClaim {claim_name}: allocated {devices}, want [{want}]"
    (result,) = found
    assert result.get("shareID") is None and not result.get("consumedCapacity"), (
        f"ResourceClaim {claim_name}: {EXCLUSIVE} was allocated as a share (shareID "
        f"{result.get('shareID')!r}, consumedCapacity {result.get('consumedCapacity')}), "
        "although it does not allow multiple allocations"
    )
    return {result["request"]: {"device": want, "shareID": None, "consumedCapacity": {}}}


def _waits_holding_nothing(ctx: Context, pod: dict, claim: dict) -> None:
    """``pod`` is unschedulable and its claim holds nothing (see :func:`holds_nothing`)."""
    b = ctx.builder
    b.wait_unschedulable(pod["metadata"]["name"])
    holds_nothing(b.get("resourceclaims", claim["metadata"]["name"]))


def holds_nothing(claim: dict) -> None:
    """The claim, as stored, is neither allocated nor reserved for a pod."""
    status = claim.get("status") or {}
    held = {key: status[key] for key in ("allocation", "reservedFor") if status.get(key)}
    assert not held, f"ResourceClaim {claim['metadata']['name']} of a waiting pod holds {held}"


def _still_waits(ctx: Context, pod: dict, claim: dict) -> None:
    """After a restart: the scheduler that runs now found no room for ``pod`` itself (the pod's
    status may still be the verdict of the scheduler before it), and the claim holds nothing."""
    scheduler_found_no_fit(ctx, pod["metadata"]["name"])
    _waits_holding_nothing(ctx, pod, claim)


SUBTEST = Subtest(
    name="consumable-capacity",
    keps=(5075,),
    initial=initial,
    resources=resources,
    feature_gates=(GATE,),
    # Alpha (off by default) in 1.34 and 1.35, beta and on by default from 1.36 (1.37 too).
    releases=">=1.36",
)
