"""consumable-capacity: shares of one device (DRAConsumableCapacity) keep their identity and
their consumed capacity across upgrade and downgrade, and the scheduler of each release counts
what they consume.

The driver publishes one device that allows multiple allocations, with 10Gi of ``memory`` whose
request policy rounds each request up to 2Gi + n * 2Gi. Claims A (3Gi, so 4Gi consumed) and B
(1Gi, so 2Gi) get shares of it before the upgrade. After each restart their allocation results
must be what the scheduler recorded: same device, same ``shareID``, same ``consumedCapacity``;
their pods must still run untouched, each prepared on its own (checked first thing after each
restart: the same pod, its container neither restarted nor replaced, its claim still reserved
for it and the driver's env for each of its shares still in its container). What is left
decides what fits, in every phase: 4Gi, so a 5Gi claim (6Gi) waits and a 3Gi one (4Gi) runs;
after the upgrade claim C takes the last 4Gi as two shares of its own (two requests of 1Gi) and
a driver-style status (``status.devices``, keyed by ``shareID``) for each, and then a 1Gi claim
waits. C's pod, too, must run untouched after the downgrade.

The downgrade brings shares written by the newer release to the older one. Upstream's KEP-5075
says the ``shareID`` follows the "optional map keys" strategy on downgrade and that a rolled-back
cluster keeps ``shareID`` and ``consumedCapacity`` so existing allocations stay valid; both
releases here know the field and the key (beta, on by default since 1.36), so nothing may be
lost: C's results and its two ``status.devices`` entries must come back unchanged, the older
scheduler must still see the device as full, and C's 4Gi must be free again once C is deleted.
"""

from __future__ import annotations

from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import Running, running, still_untouched
from subtests._consumable_capacity import (
    FIRST_SHARES,
    GATE,
    Shares,
    check_distinct,
    check_left,
    check_pods,
    check_recorded,
    check_status,
    claim_and_pod,
    delete_pod_and_claim,
    pod_env,
    report_status,
    resources,
    shares_of,
)


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claims: dict[str, dict] = {}  # claim name -> claim, for every claim that holds a share
    pods: dict[str, dict] = {}  # claim name -> the pod that uses it
    started: dict[str, Running] = {}  # claim name -> its pod as it ran once checked
    recorded: dict[str, Shares] = {}  # claim name -> its shares as first read
    with ctx.step("two claims share the device"):
        consumed = {}
        for requests, rounded in FIRST_SHARES:
            claim, pod = claim_and_pod(ctx, requests)
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
        check_left(ctx, too_much="5Gi", fits="3Gi")

    def after_upgrade(ctx: Context) -> Phase:
        with ctx.step("the pods holding shares run untouched"):
            _still_untouched(ctx, started, claims)
        with ctx.step("the shares survived the upgrade"):
            check_recorded(ctx, claims, recorded)
            check_pods(ctx, pods, claims)
        with ctx.step("4Gi left: 5Gi waits, 3Gi fits"):
            check_left(ctx, too_much="5Gi", fits="3Gi")
        with ctx.step("a claim of two requests takes the last 4Gi as two shares"):
            claim_c, pod_c = claim_and_pod(ctx, {"first": "1Gi", "second": "1Gi"})
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
        with ctx.step("the device is full: 1Gi waits"):
            check_left(ctx, too_much="1Gi", fits=None)

        def after_downgrade(ctx: Context) -> None:
            with ctx.step("the pods holding shares run untouched"):
                _still_untouched(ctx, started, claims)
            with ctx.step("the shares written by both releases survived the downgrade"):
                check_recorded(ctx, claims, recorded)
                check_status(ctx, name_c, statuses)
                check_pods(ctx, pods, claims)
            with ctx.step("the device is full: 1Gi waits"):
                check_left(ctx, too_much="1Gi", fits=None)
            with ctx.step("deleting the two-share claim frees 4Gi: 5Gi waits, 3Gi fits"):
                delete_pod_and_claim(ctx, pods.pop(name_c), claims.pop(name_c))
                check_left(ctx, too_much="5Gi", fits="3Gi")
            for name in list(claims):
                delete_pod_and_claim(ctx, pods.pop(name), claims.pop(name))

        return after_downgrade

    return after_upgrade


def _running(ctx: Context, pods: dict[str, dict]) -> dict[str, Running]:
    """Each pod (by its claim's name) as it runs now."""
    return {name: running(ctx.builder, pod["metadata"]["name"]) for name, pod in pods.items()}


def _still_untouched(ctx: Context, started: dict[str, Running], claims: dict[str, dict]) -> None:
    """Each pod runs as it did when first checked, still holding its claim and seeing the
    driver's line for each of the claim's requests."""
    for name, was in started.items():
        still_untouched(ctx.builder, was, [name], env=pod_env(claims[name]))


SUBTEST = Subtest(
    name="consumable-capacity",
    initial=initial,
    resources=resources,
    feature_gates=(GATE,),
    # Alpha (off by default) in 1.34 and 1.35, beta and on by default from 1.36 (1.37 too).
    releases=">=1.36",
)
