"""The allocation oracle: each rule of the resource.k8s.io API it holds every allocation to, on
claims and slices as the API server returns them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from e2e_dra._suite._oracle import AllocationOracle, Problem

DRIVER = "gpu.example.com"
ALLOCATED_AT = "2026-12-06T10:00:10Z"


def _slice(*devices: dict, pool: str = "pool-a", generation: int = 1, **spec: Any) -> dict:
    return {
        "metadata": {"name": f"{pool}-{generation}"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": list(devices),
            **spec,
        },
    }


def _device(name: str, **fields: Any) -> dict:
    return {"name": name, **fields}


def _claim(
    name: str,
    requests: list[dict],
    results: list[dict] | None,
    *,
    constraints: list[dict] | None = None,
    uid: str | None = None,
) -> dict:
    claim: dict[str, Any] = {
        "metadata": {
            "namespace": "default",
            "name": name,
            "uid": uid or f"uid-{name}",
            "managedFields": [
                {
                    "manager": "kube-scheduler",
                    "operation": "Update",
                    "subresource": "status",
                    "time": ALLOCATED_AT,
                    "fieldsV1": {"f:status": {"f:allocation": {}}},
                }
            ],
        },
        "spec": {"devices": {"requests": requests, "constraints": constraints or []}},
        "status": {},
    }
    if results is not None:
        claim["status"]["allocation"] = {"devices": {"results": results}}
    return claim


def _request(name: str = "req", **exactly: Any) -> dict:
    return {"name": name, "exactly": {"deviceClassName": "gpu", **exactly}}


def _result(device: str, request: str = "req", pool: str = "pool-a", **fields: Any) -> dict:
    return {"request": request, "driver": DRIVER, "pool": pool, "device": device, **fields}


def _oracle(*slices: dict) -> AllocationOracle:
    return AllocationOracle(lambda: list(slices))


def _rules(problems: list[Problem]) -> list[str]:
    return [problem.rule for problem in problems]


PLAIN = _slice(_device("gpu-0"), _device("gpu-1"), _device("gpu-2"))


# --- count ---------------------------------------------------------------------------------------


def test_an_exact_count_request_gets_exactly_its_count() -> None:
    oracle = _oracle(PLAIN)
    assert oracle.seen(_claim("a", [_request(count=2)], [_result("gpu-0"), _result("gpu-1")])) == []
    (problem,) = oracle.seen(_claim("b", [_request(count=2)], [_result("gpu-2")]))
    assert problem.rule == "count"
    assert problem.message == "request req asks for 2 device(s) and got 1"


def test_all_mode_is_not_counted_and_a_result_for_no_request_is_a_problem() -> None:
    oracle = _oracle(PLAIN)
    every = _request(allocationMode="All")
    assert oracle.seen(_claim("a", [every], [_result("gpu-0"), _result("gpu-1")])) == []
    (problem,) = oracle.seen(_claim("b", [_request()], [_result("gpu-2"), _result("gpu-2", "x")]))
    assert "names no request of the claim" in problem.message


def test_a_first_available_request_gets_the_devices_of_exactly_one_subrequest() -> None:
    request = {
        "name": "req",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu", "count": 2},
            {"name": "small", "deviceClassName": "gpu"},
        ],
    }
    oracle = _oracle(PLAIN)
    assert oracle.seen(_claim("a", [request], [_result("gpu-0", "req/small")])) == []
    (mixed,) = oracle.seen(
        _claim("b", [request], [_result("gpu-1", "req/big"), _result("gpu-2", "req/small")])
    )
    assert "not of exactly one of ['big', 'small']" in mixed.message


# --- one claim per device ------------------------------------------------------------------------


def test_a_device_allocated_to_a_second_claim_is_a_problem_of_the_second() -> None:
    oracle = _oracle(PLAIN)
    assert oracle.seen(_claim("a", [_request()], [_result("gpu-0")])) == []
    (problem,) = oracle.seen(_claim("b", [_request()], [_result("gpu-0")]))
    assert problem.rule == "one claim per device" and problem.claim["metadata"]["name"] == "b"
    assert f"device {DRIVER}/pool-a/gpu-0 is allocated to ResourceClaim default/a" in (
        problem.message
    )


def test_a_device_is_free_again_once_its_claim_is_deallocated_or_deleted() -> None:
    oracle = _oracle(PLAIN)
    first = _claim("a", [_request()], [_result("gpu-0")])
    oracle.seen(first)
    oracle.seen(_claim("a", [_request()], None))  # deallocated
    assert oracle.seen(_claim("b", [_request()], [_result("gpu-0")])) == []
    oracle.gone(_claim("b", [_request()], [_result("gpu-0")]))
    assert oracle.seen(_claim("c", [_request()], [_result("gpu-0")])) == []


def test_admin_access_and_shares_of_a_multi_allocatable_device_are_not_exclusive() -> None:
    shared = _slice(_device("gpu-0", allowMultipleAllocations=True), _device("gpu-1"))
    oracle = _oracle(shared)
    assert oracle.seen(_claim("a", [_request()], [_result("gpu-0", shareID="s1")])) == []
    assert oracle.seen(_claim("b", [_request()], [_result("gpu-0", shareID="s2")])) == []
    assert oracle.seen(_claim("c", [_request()], [_result("gpu-1")])) == []
    admin = _result("gpu-1", adminAccess=True)
    assert oracle.seen(_claim("d", [_request(adminAccess=True)], [admin])) == []


def test_a_list_is_judged_as_a_whole_and_each_allocation_only_once() -> None:
    oracle = _oracle(PLAIN)
    a = _claim("a", [_request()], [_result("gpu-0")])
    b = _claim("b", [_request()], [_result("gpu-0")])
    assert _rules(oracle.listed([a, b])) == ["one claim per device"] * 2
    assert oracle.listed([a, b]) == [] and oracle.seen(b) == []  # judged already


def test_only_allocations_the_scheduler_wrote_are_judged_but_every_one_holds_its_devices() -> None:
    oracle = _oracle(PLAIN)
    written = _claim("by-a-test", [_request()], [_result("gpu-0"), _result("gpu-1")])
    written["metadata"]["managedFields"][0]["manager"] = "e2e-dra"
    assert oracle.seen(written) == []  # two devices for a one-device request: not the scheduler's
    (problem,) = oracle.seen(_claim("b", [_request()], [_result("gpu-1")]))
    assert problem.rule == "one claim per device" and "default/by-a-test" in problem.message


# --- taints --------------------------------------------------------------------------------------


def _tainted(effect: str = "NoSchedule", added: str = "2026-12-06T10:00:00Z") -> dict:
    taint = {"key": "broken", "value": "yes", "effect": effect, "timeAdded": added}
    return _slice(_device("gpu-0", taints=[taint]))


@pytest.mark.parametrize(
    "tolerations",
    [
        [{"key": "broken", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
        [{"key": "broken", "operator": "Exists"}],
        [{"operator": "Exists"}],  # no key: every taint
        [{"key": "broken", "value": "yes"}],  # Equal by default, empty effect: every effect
    ],
)
def test_a_tolerated_taint_is_no_problem(tolerations: list[dict]) -> None:
    claim = _claim("a", [_request(tolerations=tolerations)], [_result("gpu-0")])
    assert _oracle(_tainted()).seen(claim) == []


@pytest.mark.parametrize(
    "tolerations",
    [
        [],
        [{"key": "broken", "value": "no"}],
        [{"key": "other", "operator": "Exists"}],
        [{"key": "broken", "operator": "Exists", "effect": "NoExecute"}],
    ],
)
def test_a_device_tainted_before_the_allocation_needs_a_toleration(tolerations: list) -> None:
    claim = _claim("a", [_request(tolerations=tolerations)], [_result("gpu-0")])
    (problem,) = _oracle(_tainted()).seen(claim)
    assert problem.rule == "taints"
    assert "the device has taint broken=yes:NoSchedule (added 2026-12-06T10:00:00Z)" in (
        problem.message
    )


def test_a_taint_added_after_the_allocation_or_without_effect_on_scheduling_is_not_judged() -> None:
    claim = _claim("a", [_request()], [_result("gpu-0")])
    assert _oracle(_tainted(added="2026-12-06T10:00:10Z")).seen(claim) == []
    assert _oracle(_tainted(effect="None")).seen(copy.deepcopy(claim)) == []


def test_the_allocators_own_timestamp_says_when_the_allocation_was_made() -> None:
    claim = _claim("a", [_request()], [_result("gpu-0")])
    claim["status"]["allocation"]["allocationTimestamp"] = "2026-12-06T09:59:59Z"
    assert _oracle(_tainted()).seen(claim) == []  # tainted at 10:00:00, after it was allocated


# --- taints from DeviceTaintRules ----------------------------------------------------------------

RULED = "2026-12-06T10:00:00Z"  # before ALLOCATED_AT, by more than the margin


def _rule(
    name: str = "rule",
    selector: dict | None = None,
    *,
    effect: str = "NoSchedule",
    added: str | None = RULED,
    created: str = RULED,
    generation: int = 1,
) -> dict:
    taint: dict[str, Any] = {"key": "broken", "value": "yes", "effect": effect}
    if added is not None:
        taint["timeAdded"] = added
    spec: dict[str, Any] = {"taint": taint}
    if selector is not None:
        spec["deviceSelector"] = selector
    metadata = {
        "name": name,
        "uid": f"uid-{name}",
        "generation": generation,
        "creationTimestamp": created,
        "managedFields": [{"manager": "e2e-dra", "operation": "Update", "time": created}],
    }
    return {"metadata": metadata, "spec": spec}


def _ruled(*rules: dict) -> AllocationOracle:
    return AllocationOracle(lambda: [PLAIN], rules=lambda: list(rules))


@pytest.mark.parametrize(
    "selector",
    [
        {"driver": DRIVER, "pool": "pool-a", "device": "gpu-0"},
        {"driver": DRIVER, "pool": "pool-a"},
        {"driver": DRIVER},
        {"device": "gpu-0"},
        {"pool": "pool-a"},
        {},  # the empty selector: every device
    ],
)
def test_a_device_a_rule_selects_before_the_allocation_needs_a_toleration(selector: dict) -> None:
    claim = _claim("a", [_request()], [_result("gpu-0")])
    (problem,) = _ruled(_rule("ruler", selector)).seen(claim)
    assert problem.rule == "taints"
    assert problem.message == (
        f"result req -> {DRIVER}/pool-a/gpu-0: DeviceTaintRule ruler taints the device with "
        f"broken=yes:NoSchedule (added {RULED}), which request req's tolerations [] do not "
        "tolerate"
    )
    tolerating = _request(tolerations=[{"key": "broken", "operator": "Exists"}])
    assert (
        _ruled(_rule("ruler", selector)).seen(_claim("b", [tolerating], [_result("gpu-1")])) == []
    )


@pytest.mark.parametrize(
    "selector",
    [
        None,  # no selector: no device
        {"driver": "other.example.com"},
        {"driver": DRIVER, "pool": "pool-b"},
        {"driver": DRIVER, "pool": "pool-a", "device": "gpu-1"},
        {"device": "gpu-1"},
    ],
)
def test_a_rule_taints_only_the_devices_its_selector_picks(selector: dict | None) -> None:
    claim = _claim("a", [_request()], [_result("gpu-0")])
    assert _ruled(_rule("ruler", selector)).seen(claim) == []


def test_a_rule_counts_from_its_taint_its_creation_and_its_last_spec_write() -> None:
    claim = _claim("a", [_request()], [_result("gpu-0")])
    every = {"driver": DRIVER}
    later = "2026-12-06T10:00:10Z"  # the second of the allocation: not before it
    assert _ruled(_rule(selector=every, added=later)).seen(claim) == []
    assert _ruled(_rule(selector=every, created=later)).seen(copy.deepcopy(claim)) == []
    assert _ruled(_rule(selector=every, effect="None")).seen(copy.deepcopy(claim)) == []
    changed = _rule(selector=every)  # its selector written after the allocation
    changed["metadata"]["managedFields"].append({"manager": "admin", "time": later})
    assert _ruled(changed).seen(copy.deepcopy(claim)) == []
    status = _rule(selector=every)  # the controller's status write changes no taint
    status["metadata"]["managedFields"].append(
        {"manager": "kube-controller-manager", "subresource": "status", "time": later}
    )
    assert _rules(_ruled(status).seen(copy.deepcopy(claim))) == ["taints"]
    # No timeAdded (a server that sets none): the rule counts from its creation.
    assert _rules(_ruled(_rule(selector=every, added=None)).seen(copy.deepcopy(claim))) == [
        "taints"
    ]


def test_a_rule_gone_or_changed_by_the_time_it_is_confirmed_is_no_finding() -> None:
    every = {"driver": DRIVER}
    lists = {
        "gone": [[_rule("r", every)], []],
        "changed": [[_rule("r", every)], [_rule("r", every, generation=2)]],
        "kept": [[_rule("r", every)], [_rule("r", every)]],
    }
    found = {}
    for case, answers in lists.items():
        oracle = AllocationOracle(lambda: [PLAIN], rules=lambda a=answers: a.pop(0))
        found[case] = _rules(oracle.seen(_claim("a", [_request()], [_result("gpu-0")])))
    assert found == {"gone": [], "changed": [], "kept": ["taints"]}


def test_rules_the_server_does_not_serve_are_not_checked_and_that_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    times = iter(range(0, 100, 5))  # every judgment lists again
    oracle = AllocationOracle(lambda: [PLAIN], rules=lambda: None, clock=lambda: next(times))
    with caplog.at_level("INFO", logger="e2e_dra._suite._oracle"):
        assert oracle.seen(_claim("a", [_request()], [_result("gpu-0")])) == []
        assert oracle.seen(_claim("b", [_request()], [_result("gpu-1")])) == []
    said = [r.getMessage() for r in caplog.records if "DeviceTaintRules" in r.getMessage()]
    assert said == [
        "allocation oracle: the API server serves no DeviceTaintRules, so taints from "
        "DeviceTaintRules are not checked"
    ]


def test_a_device_the_last_list_lacks_has_the_slices_listed_again() -> None:
    taint = {"key": "broken", "value": "yes", "effect": "NoSchedule", "timeAdded": RULED}
    published = [_slice(_device("gpu-0"), pool="pool-n")]
    now = [0.0]
    oracle = AllocationOracle(lambda: list(published), clock=lambda: now[0])
    assert oracle.seen(_claim("a", [_request()], [_result("gpu-0", pool="pool-n")])) == []
    published.append(_slice(_device("gpu-1", taints=[taint]), pool="pool-n", generation=1))
    published[-1]["metadata"]["name"] = "published-a-moment-ago"
    now[0] = 1.0  # within SLICES_FRESH: the list in hand would serve, but lacks the device
    (problem,) = oracle.seen(_claim("b", [_request()], [_result("gpu-1", pool="pool-n")]))
    assert problem.rule == "taints" and "gpu-1" in problem.message


# --- counters ------------------------------------------------------------------------------------


def test_devices_allocated_from_a_pool_consume_no_more_than_its_counters() -> None:
    def partition(name: str, memory: str) -> dict:
        consumes = [{"counterSet": "gpu-0-set", "counters": {"memory": {"value": memory}}}]
        return _device(name, consumesCounters=consumes)

    counters = _slice(
        pool="pool-b",
        sharedCounters=[{"name": "gpu-0-set", "counters": {"memory": {"value": "8Gi"}}}],
    )
    devices = _slice(partition("half-0", "4Gi"), partition("half-1", "4Gi"), pool="pool-b")
    devices["metadata"]["name"] = "devices"
    devices["spec"]["devices"].append(partition("whole", "8Gi"))
    oracle = _oracle(counters, devices)
    halves = [_result("half-0", pool="pool-b"), _result("half-1", "req", "pool-b")]
    assert oracle.seen(_claim("a", [_request(count=2)], halves)) == []
    (problem,) = oracle.seen(_claim("b", [_request()], [_result("whole", pool="pool-b")]))
    assert problem.rule == "counters"
    assert f"pool {DRIVER}/pool-b: the allocated devices consume 17179869184 of counter " in (
        problem.message
    )


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = _slice(_device("gpu-9"), generation=1)
    new = _slice(_device("gpu-0", allowMultipleAllocations=True), generation=2)
    oracle = _oracle(old, new)
    assert oracle.seen(_claim("a", [_request()], [_result("gpu-0")])) == []
    assert oracle.seen(_claim("b", [_request()], [_result("gpu-0")])) == []


# --- constraints ---------------------------------------------------------------------------------


def _models(*models: str) -> dict:
    return _slice(
        *(
            _device(f"gpu-{i}", attributes={"model": {"string": model}})
            for i, model in enumerate(models)
        )
    )


@pytest.mark.parametrize("attribute", [f"{DRIVER}/model", "model"])
def test_match_attribute_wants_one_value_distinct_attribute_all_different(attribute: str) -> None:
    two = [_result("gpu-0"), _result("gpu-1")]
    qualified = attribute if "/" in attribute else f"{DRIVER}/{attribute}"
    match = [{"matchAttribute": qualified}]
    distinct = [{"requests": ["req"], "distinctAttribute": qualified}]
    oracle = _oracle(_models("a100", "h100"))
    (problem,) = oracle.seen(_claim("a", [_request(count=2)], two, constraints=match))
    assert problem.rule == "constraints" and problem.message.startswith(
        f"matchAttribute {qualified} over requests all: "
    )
    assert (
        _oracle(_models("a100", "h100")).seen(
            _claim("b", [_request(count=2)], two, constraints=distinct)
        )
        == []
    )
    assert _rules(
        _oracle(_models("a100", "a100")).seen(
            _claim("c", [_request(count=2)], two, constraints=distinct)
        )
    ) == ["constraints"]


def test_a_device_without_the_matched_attribute_breaks_the_constraint() -> None:
    published = _slice(_device("gpu-0", attributes={"model": {"string": "a"}}), _device("gpu-1"))
    claim = _claim(
        "a",
        [_request(count=2)],
        [_result("gpu-0"), _result("gpu-1")],
        constraints=[{"matchAttribute": f"{DRIVER}/model"}],
    )
    assert _rules(_oracle(published).seen(claim)) == ["constraints"]


def test_slices_that_cannot_be_listed_leave_the_allocation_to_be_judged_later() -> None:
    calls: list[int] = []

    def slices() -> list[dict]:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the API server restarts")
        return [PLAIN]

    oracle = AllocationOracle(slices)
    claim = _claim("a", [_request(count=2)], [_result("gpu-0")])
    with pytest.raises(ConnectionError):
        oracle.seen(claim)
    assert _rules(oracle.listed([claim])) == ["count"]


SHARED = _slice(
    _device("gpu-0", allowMultipleAllocations=True, capacity={"memory": {"value": "40Gi"}}),
    _device("gpu-1"),
)


def _share(name: str, memory: str | None, result: dict, **request: Any) -> dict:
    """A claim for a share of ``memory`` (None: no amount asked), allocated ``result``."""
    if memory is not None:
        request["capacity"] = {"requests": {"memory": memory}}
    return _claim(name, [_request(**request)], [result])


def test_the_shares_of_a_device_consume_no_more_than_its_capacity() -> None:
    oracle = _oracle(SHARED)
    first = _share("a", "30Gi", _result("gpu-0", shareID="s1", consumedCapacity={"memory": "30Gi"}))
    fits = _share("b", "10Gi", _result("gpu-0", shareID="s2", consumedCapacity={"memory": "10Gi"}))
    over = _share("c", "1Gi", _result("gpu-0", shareID="s3", consumedCapacity={"memory": "1Gi"}))
    admin = _result("gpu-0", shareID="s4", adminAccess=True, consumedCapacity={"memory": "40Gi"})

    assert oracle.seen(first) == [] and oracle.seen(fits) == []
    assert oracle.seen(_share("d", None, admin, adminAccess=True)) == []  # admin uses nothing
    [problem] = oracle.seen(over)
    assert problem.rule == "capacity" and problem.claim is over
    assert "consume 44023414784 of its capacity memory, which is 42949672960" in problem.message


def test_an_allocation_over_the_claim_limit_is_a_problem() -> None:
    devices = [_device(f"d-{i}") for i in range(33)]
    results = [_result(f"d-{i}") for i in range(33)]
    claim = _claim("big", [_request(allocationMode="All")], results)

    assert _rules(_oracle(_slice(*devices)).seen(claim)) == ["claim limit"]
    assert (
        _oracle(_slice(*devices)).seen(_claim("ok", [_request(allocationMode="All")], results[:32]))
        == []
    )


def test_each_config_of_the_claim_is_allocated_once_and_configs_name_only_its_requests() -> None:
    opaque = {"driver": DRIVER, "parameters": {"a": "b"}}
    spec_config = [{"requests": ["req"], "opaque": opaque}]

    def with_config(name: str, allocated: list[dict]) -> dict:
        claim = _claim(name, [_request()], [_result("gpu-0")], uid=f"uid-{name}")
        claim["spec"]["devices"]["config"] = spec_config
        claim["status"]["allocation"]["devices"]["config"] = allocated
        return claim

    claim_copy = {"source": "FromClaim", "requests": ["req"], "opaque": opaque}
    class_copy = {"source": "FromClass", "requests": ["req"], "opaque": opaque}
    assert _oracle(PLAIN).seen(with_config("good", [class_copy, claim_copy])) == []

    [missing] = _oracle(PLAIN).seen(with_config("missing", [class_copy]))
    assert missing.rule == "config" and "0 times as FromClaim" in missing.message
    assert _rules(_oracle(PLAIN).seen(with_config("twice", [claim_copy, claim_copy]))) == ["config"]
    # A config for a subrequest that was not chosen is left out, rightly.
    unchosen = with_config("unchosen", [class_copy])
    unchosen["spec"]["devices"]["config"] = [{"requests": ["req/other"], "opaque": opaque}]
    assert _oracle(PLAIN).seen(unchosen) == []
    unchosen_too = with_config("chosen", [class_copy])
    unchosen_too["spec"]["devices"]["config"] = [{"requests": ["req"], "opaque": opaque}]
    assert _rules(_oracle(PLAIN).seen(unchosen_too)) == ["config"]
    stray = {**class_copy, "requests": ["other"]}
    [named] = _oracle(PLAIN).seen(with_config("stray", [claim_copy, stray]))
    assert "a FromClass config names requests ['other']" in named.message


# --- consumed capacity ---------------------------------------------------------------------------

VALID_VALUES = {"default": "2Gi", "validValues": ["2Gi", "4Gi", "6Gi"]}
VALID_RANGE = {"default": "2Gi", "validRange": {"min": "2Gi", "max": "8Gi", "step": "3Gi"}}
OPEN_RANGE = {"default": "3Gi", "validRange": {"min": "2Gi"}}


def _shared(policy: dict | None, value: str = "8Gi", **capacities: dict) -> dict:
    """A slice with gpu-0, which allows multiple allocations and has ``value`` of memory under
    ``policy`` (None: no request policy), and ``capacities`` besides."""
    memory: dict[str, Any] = {"value": value}
    if policy is not None:
        memory["requestPolicy"] = policy
    device = _device(
        "gpu-0", allowMultipleAllocations=True, capacity={"memory": memory, **capacities}
    )
    return _slice(device)


def _consumed(memory: str, share: str = "s1", **more: str) -> dict:
    return _result("gpu-0", shareID=share, consumedCapacity={"memory": memory, **more})


@pytest.mark.parametrize(
    ("policy", "asked", "right", "wrong"),
    [
        (None, None, "8Gi", "2Gi"),  # no amount, no policy: the whole capacity
        (None, "3Gi", "3Gi", "4Gi"),  # no policy: as asked
        (VALID_VALUES, None, "2Gi", "8Gi"),  # no amount: the default
        (VALID_VALUES, "3Gi", "4Gi", "3Gi"),  # the smallest valid value not smaller
        (VALID_VALUES, "4Gi", "4Gi", "6Gi"),
        (VALID_RANGE, None, "2Gi", "3Gi"),
        (VALID_RANGE, "1Gi", "2Gi", "1Gi"),  # below min: min
        (VALID_RANGE, "3Gi", "5Gi", "6Gi"),  # min + n * step, not a multiple of the step
        (VALID_RANGE, "6Gi", "8Gi", "6Gi"),
        (OPEN_RANGE, "7Gi", "7Gi", "8Gi"),  # no step: as asked
        (OPEN_RANGE, None, "3Gi", "2Gi"),
    ],
)
def test_a_share_consumes_what_its_request_and_the_request_policy_say(
    policy: dict | None, asked: str | None, right: str, wrong: str
) -> None:
    good = _share("a", asked, _consumed(right))
    assert _oracle(_shared(policy)).seen(good) == []
    bad = _share("b", asked, _consumed(wrong))
    [problem] = _oracle(_shared(policy)).seen(bad)
    assert problem.rule == "consumed capacity"
    gib = 1 << 30
    assert problem.message == (
        f"result req -> {DRIVER}/pool-a/gpu-0: consumedCapacity {DRIVER}/memory is "
        f"{int(wrong[:-2]) * gib}: capacity {DRIVER}/memory is 8Gi with requestPolicy {policy}, "
        f"and its request asks for {int(asked[:-2]) * gib if asked else 'no amount'}, which "
        f"makes {int(right[:-2]) * gib}"
    )


@pytest.mark.parametrize(
    ("policy", "asked"),
    [
        (VALID_VALUES, "7Gi"),  # above every valid value
        ({"default": "2Gi", "validRange": {"min": "2Gi", "max": "5Gi", "step": "3Gi"}}, "6Gi"),
        (None, "9Gi"),  # more than the device has
    ],
)
def test_a_share_its_request_policy_refuses_is_a_problem(policy: dict | None, asked: str) -> None:
    found = _oracle(_shared(policy)).seen(_share("a", asked, _consumed(asked)))
    [problem] = [p for p in found if p.rule == "consumed capacity"]  # 9Gi breaks "capacity" too
    assert problem.message.endswith("the device may not be allocated to it")


def test_capacity_names_may_leave_out_the_drivers_domain_and_every_capacity_is_recorded() -> None:
    qualified = _share("a", None, _consumed("4Gi"))
    qualified["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {
        "requests": {f"{DRIVER}/memory": "3Gi"}
    }
    assert _oracle(_shared(VALID_VALUES)).seen(qualified) == []
    spelled = _result("gpu-0", shareID="s1", consumedCapacity={f"{DRIVER}/memory": "4Gi"})
    assert _oracle(_shared(VALID_VALUES)).seen(_share("b", "3Gi", spelled)) == []

    two = _shared(None, bandwidth={"value": "10G"})
    assert _oracle(two).seen(_share("c", "3Gi", _consumed("3Gi", bandwidth="10G"))) == []
    [missing] = _oracle(two).seen(_share("d", "3Gi", _consumed("3Gi")))
    assert missing.message.startswith(
        f"result req -> {DRIVER}/pool-a/gpu-0: consumedCapacity {DRIVER}/bandwidth is missing"
    )
    [stray] = _oracle(_shared(None)).seen(_share("e", "3Gi", _consumed("3Gi", cores="1")))
    assert stray.message.endswith(
        f"consumedCapacity names {DRIVER}/cores, which is no capacity of the device"
    )


def test_a_share_for_a_capacity_the_device_lacks_is_a_problem() -> None:
    claim = _share("a", None, _consumed("8Gi"))
    claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"cores": "1"}}
    [problem] = _oracle(_shared(None)).seen(claim)
    assert problem.message.endswith(
        f"its request asks for capacity ['{DRIVER}/cores'], which the device does not have"
    )


def test_a_subrequests_capacity_request_is_the_one_a_share_of_it_consumes() -> None:
    request = {
        "name": "req",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu", "capacity": {"requests": {"memory": "7Gi"}}},
            {
                "name": "small",
                "deviceClassName": "gpu",
                "capacity": {"requests": {"memory": "1Gi"}},
            },
        ],
    }
    small = {**_consumed("2Gi"), "request": "req/small"}
    assert _oracle(_shared(VALID_VALUES)).seen(_claim("a", [request], [small])) == []
    big = {**_consumed("6Gi"), "request": "req/big"}
    [problem] = _oracle(_shared(VALID_VALUES)).seen(_claim("b", [request], [big]))
    assert problem.message.endswith("the device may not be allocated to it")  # 7Gi: none valid


def test_a_whole_device_and_a_fractional_range_are_not_judged() -> None:
    whole = _share("a", "3Gi", _result("gpu-0"))  # no shareID, no consumedCapacity
    assert _oracle(_shared(VALID_VALUES)).seen(whole) == []
    fractional = {"default": "500m", "validRange": {"min": "500m", "step": "250m"}}
    odd = _share("b", "600m", _consumed("600m"))  # 750m or 1, by the gate: not said here
    assert _oracle(_shared(fractional, value="4")).seen(odd) == []
    plain = _slice(_device("gpu-0", capacity={"memory": {"value": "8Gi"}}))
    assert _oracle(plain).seen(_share("c", "3Gi", _consumed("1Gi"))) == []  # not shared


def test_a_share_finding_stands_only_if_a_list_after_the_allocation_has_it_too() -> None:
    claim = _share("a", "3Gi", _consumed("5Gi"))  # right for the range (min 2, step 3)
    lists = {
        "changed": [[_shared(VALID_VALUES)], [_shared(VALID_RANGE)]],
        "kept": [[_shared(VALID_VALUES)], [_shared(VALID_VALUES)]],
    }
    found = {}
    for case, answers in lists.items():
        oracle = AllocationOracle(lambda a=answers: a.pop(0) if len(a) > 1 else a[0])
        found[case] = _rules(oracle.seen(copy.deepcopy(claim)))
    assert found == {"changed": [], "kept": ["consumed capacity"]}
