"""random-worlds without a cluster: worlds drawn again from their seed, the fit it expects of
the scheduler, the rules it holds each allocation to, and the objects a world is made of."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from kubernetes.client import models

from e2e_dra.builder import SubtestObjects
from e2e_dra.subtests._world_capacity import Capacity
from e2e_dra.subtests._world_objects import (
    Grounds,
    as_stored,
    claim_object,
    pool_name,
    rule_objects,
    slice_objects,
)
from e2e_dra.subtests._worlds import (
    Claim,
    Device,
    Rule,
    World,
    draw,
    held_by_others,
    simpler,
    used_by_others,
)
from e2e_dra.subtests._worlds import wrongs as _wrongs

DEVICES = (
    Device("d0", "a", 0, None),
    Device("d1", "a", 1, "k1"),
    Device("d2", "b", 1, None),
    Device("d3", "a", 1, "k2"),
)


def _world(*claims: Claim, **fields: Any) -> World:
    return World("w", fields.pop("devices", DEVICES), claims, **fields)


def _result(device: str, request: str = "my-request", **fields: Any) -> dict:
    return {"request": request, "driver": "drv", "pool": "p", "device": device, **fields}


def wrongs(world: World, **results: list[dict]) -> list[str]:
    return _wrongs(world, results)


def _builder() -> Any:
    objects = SubtestObjects("random-worlds", suite="upgrade-downgrade", image="example.test/b:1")
    return objects.builder(None)  # type: ignore[arg-type]  # building objects needs no client


def test_a_seed_draws_the_same_world_again_and_another_seed_another() -> None:
    first = draw(random.Random("7/after-cluster-upgrade/0"), "acu-0")
    assert draw(random.Random("7/after-cluster-upgrade/0"), "acu-0") == first
    others = {draw(random.Random(f"{seed}/after-cluster-upgrade/0"), "acu-0") for seed in range(60)}
    assert len(others) > 50
    assert {d.taint for w in others for d in w.devices} == {None, "k1", "k2"}
    claims = [c for w in others for c in w.claims]
    assert all(any(getattr(c, what) for c in claims) for what in ("same_numa", "all", "admin"))
    assert not any(c.admin and c.options for c in claims)  # subrequests have no admin access
    rules = {r for w in others for r in w.rules}
    assert {(r.pool, r.device is not None) for r in rules} == {
        (False, False),  # this driver's devices
        (True, False),  # the world's pool
        (True, True),  # one device of it
    }
    assert {w.counters for w in others} == {None, 3, 4}
    shared = [(w, d) for w in others for d in w.devices if d.capacity is not None]
    assert all(w.counters is None for w, _ in shared)  # a share's counters are not asked about
    assert all(len([d for d in w.devices if d.capacity]) == 1 for w, _ in shared)
    policies = {
        "none" if d.capacity.default is None else "values" if d.capacity.values else "range"
        for _, d in shared
        if d.capacity is not None
    }
    assert policies == {"none", "values", "range"}
    shares = [c for w, _ in shared for c in w.claims if c.amount is not None]
    assert {c.amount for c in shares} == {1, 2, 3, 5, 9}
    assert all(c.count == 1 and not c.options and not c.all for c in shares)


def test_a_claim_fits_devices_it_selects_and_tolerates_on_one_numa_node_if_asked() -> None:
    world = _world()
    assert world.fits(Claim("c", 1, None, "a", False), []) == [DEVICES[0]]
    assert world.fits(Claim("c", 2, None, "a", False), []) is None  # d1, d3 are tainted
    assert world.fits(Claim("c", 2, ("k1", "Exists"), "a", False), []) == list(DEVICES[:2])
    assert world.fits(Claim("c", 2, ("k1", "Equal"), "a", True), []) is None  # numa 0 and 1
    both = Claim("c", 2, ("k2", "Exists"), None, True)
    assert world.fits(both, []) == [DEVICES[2], DEVICES[3]]
    assert world.fits(both, [DEVICES[2]]) is None  # held by another claim


def test_a_first_available_claim_fits_its_first_choice_that_fits() -> None:
    world = _world(devices=(DEVICES[0], DEVICES[2], replace(DEVICES[1], numa=1)))
    claim = Claim("c", 0, None, None, False, (("a", 2), (None, 1)))
    assert claim.choices() == [("a", 2), (None, 1)]
    assert world.fits(claim, []) == [DEVICES[0]]  # d1 is tainted: two of model a do not fit
    assert world.fits(claim, [], 0) is None and world.fits(claim, [], 1) == [DEVICES[0]]
    tolerating = replace(claim, toleration=("k1", "Exists"))
    assert world.fits(tolerating, []) == [DEVICES[0], replace(DEVICES[1], numa=1)]


@pytest.mark.parametrize(
    "rule", [Rule("k2"), Rule("k2", pool=False), Rule("k2", device="d0")], ids=str
)
def test_a_rules_taint_counts_like_the_slices_own(rule: Rule) -> None:
    plain = Claim("c", 1, None, "a", False)
    world = _world(plain, rules=(rule,))
    assert world.taints(DEVICES[0]) == {"k2"} and world.taints(DEVICES[1]) == (
        {"k1"} if rule.device else {"k1", "k2"}
    )
    assert world.fits(plain, []) is None  # d0 is the only untainted device of model a
    assert world.fits(replace(plain, toleration=("k2", "Equal")), []) == [DEVICES[0]]
    (problem,) = wrongs(world, c=[_result("d0")])
    assert "with taints ['k2'], which its request does not accept" in problem


def test_a_request_for_all_devices_fits_only_if_every_one_it_matches_is_free_and_tolerated() -> (
    None
):
    every_b = Claim("c", 1, None, "b", False, all=True)
    world = _world(every_b)
    assert world.fits(every_b, []) == [DEVICES[2]]
    assert world.fits(every_b, [DEVICES[2]]) is None  # held by another claim
    every_a = replace(every_b, model="a", toleration=("k1", "Exists"))
    assert world.fits(every_a, []) is None  # d3 is tainted k2: "all" may not leave it out
    assert _world(every_a, rules=(Rule("k1", device="d0"),)).fits(every_a, []) is None
    untainted = _world(every_a, devices=DEVICES[:3])
    assert untainted.fits(every_a, []) == [DEVICES[0], DEVICES[1]]
    assert replace(untainted, counters=1).fits(every_a, []) is None  # two units, one counter


def test_a_request_for_all_devices_must_get_every_one_it_matches_and_tolerates() -> None:
    every_a = Claim("c", 1, ("k1", "Exists"), "a", False, all=True)
    world = _world(every_a)
    assert wrongs(world, c=[_result("d0"), _result("d1")]) == []
    (problem,) = wrongs(world, c=[_result("d0")])
    assert problem == (
        "claim c asks for all devices of model a, and was allocated ['d0'] without ['d1'], "
        "which it tolerates"
    )
    assert wrongs(world, c=[]) == []  # refused: whether a fit was free is the judge's


def test_half_the_worlds_are_staggered_so_that_a_request_for_all_meets_devices_held_before() -> (
    None
):
    """Made one at a time, a later claim for all devices of a model is allocated while an
    earlier one holds a device it matches: it must be refused, not given the rest."""
    worlds = [
        draw(random.Random(f"{seed}/after-cluster-upgrade/0"), "acu-0") for seed in range(200)
    ]
    staggered = [w for w in worlds if w.staggered]
    assert 60 < len(staggered) < 140
    assert any(any(c.all for c in w.claims[1:]) for w in staggered)
    held = Claim("c0", 1, None, "a", False)
    every_a = Claim("c", 1, ("k1", "Exists"), "a", False, all=True)
    world = _world(held, every_a, staggered=True)
    assert world.fits(every_a, [DEVICES[0]]) is None
    (problem,) = wrongs(world, c0=[_result("d0")], c=[_result("d1")])
    assert problem == (
        "claim c asks for all devices of model a, and was allocated ['d1'] without ['d0'], "
        "which it tolerates"
    )


def test_admin_access_gets_held_devices_holds_none_and_is_said_on_each_result() -> None:
    admin = Claim("admin", 1, None, "b", False, admin=True)
    ordinary = Claim("ordinary", 1, None, "b", False)
    world = _world(admin, ordinary)
    assert world.fits(admin, [DEVICES[2]]) == [DEVICES[2]]
    assert world.fits(ordinary, [DEVICES[2]]) is None
    taken = {"admin": [DEVICES[2]], "ordinary": []}
    assert held_by_others(world, taken, ordinary) == []  # the admin claim holds nothing
    both = {"admin": [_result("d2", adminAccess=True)], "ordinary": [_result("d2")]}
    assert wrongs(world, **both) == []
    flipped = {"admin": [_result("d2")], "ordinary": [_result("d2", adminAccess=True)]}
    assert [p.split(" got ")[0] for p in wrongs(world, **flipped)] == [
        "claim admin (admin access: True)",
        "claim ordinary (admin access: False)",
    ]


def test_devices_fit_within_the_shared_counter_and_admin_access_needs_it_free_too() -> None:
    devices = tuple(replace(d, taint=None, units=2) for d in DEVICES)
    one = Claim("one", 1, None, None, False)
    world = _world(one, devices=devices, counters=3)
    assert world.fits(one, []) == [devices[0]]
    assert world.fits(one, [devices[0]]) is None  # 2 of 3 units taken, each device needs 2
    assert world.fits(replace(one, admin=True), [devices[0]]) is None  # counted all the same
    two = Claim("two", 1, None, None, False)
    over = replace(world, claims=(one, two))
    (problem,) = wrongs(over, one=[_result("d0")], two=[_result("d1")])
    assert problem.endswith("consume 4 units of the shared counter, which has 3")
    admin = replace(over, claims=(one, replace(two, admin=True)))
    assert wrongs(admin, one=[_result("d0")], two=[_result("d1", adminAccess=True)]) == []


def test_a_first_available_request_must_get_its_first_choice_that_fits() -> None:
    first = Claim("c", 0, ("k1", "Exists"), None, False, (("a", 2), (None, 1)))
    world = _world(first)
    (problem,) = wrongs(world, c=[_result("d0", "my-request/o1")])
    assert "though its earlier choice ('a', 2) fits devices ['d0', 'd1']" in problem
    held = replace(world, claims=(first, Claim("other", 1, ("k1", "Exists"), None, False)))
    assert wrongs(held, c=[_result("d0", "my-request/o1")], other=[_result("d1")]) == []


def test_a_worlds_objects_are_valid_and_carry_what_it_is_made_of() -> None:
    b = _builder()
    world = _world(
        Claim("all", 1, ("k1", "Equal"), "b", False, all=True),
        Claim("admin", 2, None, None, True, admin=True),
        devices=(replace(DEVICES[1], units=2), DEVICES[2]),
        rules=(Rule("k1", pool=False), Rule("k2"), Rule("k1", device="d2")),
        counters=3,
    )
    devices, counters = slice_objects(b, world)
    for slice_ in (devices, counters):
        models.V1ResourceSlice.model_validate(slice_)
        assert slice_["spec"]["pool"] == {
            "name": pool_name(b, world),
            "generation": 0,
            "resourceSliceCount": 2,
        }
    assert "devices" not in counters["spec"] and "sharedCounters" not in devices["spec"]
    assert counters["spec"]["sharedCounters"] == [
        {"name": "shared", "counters": {"units": {"value": "3"}}}
    ]
    tainted, plain = devices["spec"]["devices"]
    assert tainted["consumesCounters"] == [
        {"counterSet": "shared", "counters": {"units": {"value": "2"}}}
    ]
    assert tainted["attributes"] == {
        "world": {"string": "w"},
        "name": {"string": "d1"},
        "model": {"string": "a"},
        "numa": {"int": 1},
    }
    (taint,) = tainted["taints"]
    assert (taint["key"], taint["value"], taint["effect"]) == ("k1", "x", "NoSchedule")
    assert taint["timeAdded"].endswith("Z") and "taints" not in plain

    rules = rule_objects(b, world, "resource.k8s.io/v1alpha3")
    for rule in rules:
        models.V1alpha3DeviceTaintRule.model_validate(rule)
        assert rule["spec"]["taint"] == {"key": rule["spec"]["taint"]["key"], "value": "x"} | {
            "effect": "NoSchedule"
        }
    driver, pool = b.driver_name, pool_name(b, world)
    assert [r["spec"]["deviceSelector"] for r in rules] == [
        {"driver": driver},
        {"driver": driver, "pool": pool},
        {"driver": driver, "pool": pool, "device": "d2"},
    ]
    assert rule_objects(b, world, None) == []  # not served: no rules

    every = claim_object(b, world, world.claims[0], "elsewhere")
    models.ResourceV1ResourceClaim.model_validate(every)
    assert every["metadata"]["namespace"] == "elsewhere"
    (asked,) = every["spec"]["devices"]["requests"]
    assert asked["exactly"]["allocationMode"] == "All" and "count" not in asked["exactly"]
    assert asked["exactly"]["tolerations"] == [
        {"key": "k1", "operator": "Equal", "value": "x", "effect": "NoSchedule"}
    ]
    admin = claim_object(b, world, world.claims[1], "elsewhere")
    (asked,) = admin["spec"]["devices"]["requests"]
    assert asked["exactly"]["adminAccess"] is True and asked["exactly"]["count"] == 2
    assert admin["spec"]["devices"]["constraints"] == [{"matchAttribute": f"{driver}/numa"}]


def test_a_world_is_judged_without_what_the_server_dropped_as_it_stored_it() -> None:
    b = _builder()
    world = _world(
        Claim("c", 1, ("k1", "Exists"), None, False, admin=True),
        devices=DEVICES[:2],
        counters=2,
    )
    slices = slice_objects(b, world)
    claims = {"c": claim_object(b, world, world.claims[0], "ns")}
    assert as_stored(world, slices, claims) == world
    for slice_ in slices:  # as stored with the gates off
        slice_["spec"].pop("sharedCounters", None)
        for device in slice_["spec"].get("devices") or []:
            device.pop("consumesCounters")
            device.pop("taints", None)
    del claims["c"]["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"]
    del claims["c"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"]
    stored = as_stored(world, slices, claims)
    assert stored.counters is None and stored.devices[1].taint is None
    assert stored.claims == (Claim("c", 1, None, None, False),)


def test_each_simpler_world_takes_away_one_thing_and_the_smallest_has_nothing_to_take() -> None:
    world = World(
        "w",
        (Device("d0", "a", 0, "k1"), Device("d1", "b", 1, None)),
        (
            Claim("c0", 2, ("k1", "Exists"), "a", True),
            Claim("c1", 0, None, None, False, (("a", 2), (None, 1))),
        ),
    )
    found = list(simpler(world))

    sizes = [(len(w.devices), len(w.claims)) for w in found]
    assert sizes[:4] == [(2, 1), (2, 1), (1, 2), (1, 2)]  # a claim fewer, then a device fewer
    c0 = [w.claims[0] for w in found[4:] if w.claims[1] == world.claims[1]]
    assert [(c.toleration, c.model, c.same_numa, c.count) for c in c0] == [
        (None, "a", True, 2),
        (("k1", "Exists"), None, True, 2),
        (("k1", "Exists"), "a", False, 2),
        (("k1", "Exists"), "a", False, 1),
    ]
    both = [w for w in found if len(w.claims) == 2 and w.claims[0] == world.claims[0]]
    assert both[-1].claims[1].options == () and both[-1].claims[1].count == 1
    smallest = World("w", (Device("d0", "a", 0, None),), (Claim("c0", 1, None, None, False),))
    assert list(simpler(smallest)) == []


def test_the_shrinker_takes_away_rules_the_counter_mode_all_and_admin_access() -> None:
    claim = Claim("c0", 1, None, None, False, all=True, admin=True)
    world = _world(claim, devices=DEVICES[:1], rules=(Rule("k1"), Rule("k2")), counters=2)
    found = list(simpler(world))
    assert [w.rules for w in found[:2]] == [(Rule("k2"),), (Rule("k1"),)]
    assert found[2] == replace(world, counters=None)
    assert [w.claims[0] for w in found[3:]] == [
        replace(claim, all=False),
        replace(claim, admin=False),
    ]


def test_where_no_device_taint_rules_are_served_a_world_goes_without_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = _world(Claim("c", 1, None, None, False), rules=(Rule("k1"),))
    assert Grounds(_builder(), "acc", "resource.k8s.io/v1beta2").fitted(world) == world
    without = Grounds(_builder(), "acc", None)
    with caplog.at_level("INFO", logger="e2e_dra.builder"):
        assert without.fitted(world) == replace(world, rules=())
        assert without.fitted(world) == replace(world, rules=())
    assert [r.getMessage() for r in caplog.records] == [
        "the API server serves no DeviceTaintRules: the worlds go without them"
    ]


# --- shares of a device that allows multiple allocations (KEP-5075) ---------------------------

NO_POLICY = Capacity(8)
VALID_VALUES = Capacity(8, 2, values=(2, 4, 6))
VALID_RANGE = Capacity(8, 2, minimum=2, maximum=5, step=3)
OPEN_RANGE = Capacity(8, 3, minimum=2)


@pytest.mark.parametrize(
    ("capacity", "asked", "consumed"),
    [
        (NO_POLICY, None, 8),  # no amount, no policy: the whole capacity
        (NO_POLICY, 3, 3),
        (NO_POLICY, 9, None),  # more than there is
        (VALID_VALUES, None, 2),  # the default
        (VALID_VALUES, 3, 4),  # rounded up to a valid value
        (VALID_VALUES, 6, 6),
        (VALID_VALUES, 7, None),  # above every valid value
        (VALID_RANGE, None, 2),
        (VALID_RANGE, 1, 2),  # below min: min
        (VALID_RANGE, 3, 5),  # min + n * step, not a multiple of the step (6)
        (VALID_RANGE, 6, None),  # rounded to 8, above max
        (OPEN_RANGE, None, 3),
        (OPEN_RANGE, 1, 2),
        (OPEN_RANGE, 7, 7),  # no step: as asked
        (OPEN_RANGE, 9, None),
    ],
)
def test_a_share_consumes_what_the_request_policy_makes_of_its_amount(
    capacity: Capacity, asked: int | None, consumed: int | None
) -> None:
    assert capacity.consumed(asked) == consumed


SHARED = Device("s", "a", 0, None, capacity=VALID_VALUES)
PLAIN = Device("d", "a", 0, None)


def test_shares_fit_while_the_device_has_room_and_admin_access_needs_room_too() -> None:
    three = Claim("three", 1, None, None, False, amount=3)  # consumes 4
    world = _world(three, devices=(SHARED, PLAIN))
    assert world.fits(three, []) == [SHARED]  # only the shared device has the capacity
    assert world.fits(three, [SHARED], used={"s": 4}) == [SHARED]  # held, but shared
    assert world.fits(three, [SHARED], used={"s": 6}) is None  # 6 + 4 > 8
    assert world.fits(replace(three, amount=7), []) is None  # above every valid value
    one = Claim("one", 1, None, None, False)  # consumes the default, 2
    assert world.fits(one, [PLAIN], used={"s": 6}) == [SHARED]
    assert world.fits(one, [PLAIN], used={"s": 7}) is None
    admin = replace(one, admin=True)
    assert world.fits(replace(admin, device="s"), [PLAIN], used={"s": 7}) is None
    assert world.fits(replace(admin, device="s"), [PLAIN], used={"s": 6}) == [SHARED]
    every = Claim("every", 1, None, "a", False, all=True)
    assert world.fits(every, [], used={"s": 6}) == [SHARED, PLAIN]
    assert world.fits(every, [], used={"s": 7}) is None


def test_the_shares_held_are_counted_as_their_policy_rounds_them_admin_access_aside() -> None:
    a = Claim("a", 1, None, None, False, amount=3)
    b = Claim("b", 1, None, None, False, device="s")
    admin = Claim("admin", 1, None, None, False, amount=5, admin=True)
    world = _world(a, b, admin, devices=(SHARED, PLAIN))
    taken = {"a": [SHARED], "b": [SHARED], "admin": [SHARED]}
    assert used_by_others(world, taken) == {"s": 6}  # 4 for 3, the default 2; admin: none
    assert used_by_others(world, taken, a) == {"s": 2}


def test_shares_over_the_capacity_or_its_policy_and_amounts_on_other_devices_are_wrongs() -> None:
    a = Claim("a", 1, None, None, False, amount=3)
    b = Claim("b", 1, None, None, False, amount=4)
    c = Claim("c", 1, None, None, False, device="s")
    world = _world(a, b, c, devices=(SHARED, PLAIN))
    share = _result("s", shareID="x")
    assert wrongs(world, a=[share], b=[share]) == []  # 4 + 4
    assert wrongs(world, a=[share], b=[share], c=[share]) == [
        "the shares of s held without admin access consume 10 GiB of its capacity, which is 8"
    ]
    admin = replace(world, claims=(a, b, replace(c, admin=True)))
    assert wrongs(admin, a=[share], b=[share], c=[{**share, "adminAccess": True}]) == []
    big = _world(Claim("big", 1, None, None, False, amount=7), devices=(SHARED,))
    (refused,) = wrongs(big, big=[share])
    assert refused.startswith("claim big asks for 7 GiB of capacity and was given a share of s")
    (elsewhere,) = wrongs(world, a=[_result("d")])
    assert "capacity asked 3" in elsewhere and "which its request does not accept" in elsewhere


def test_a_shared_device_and_a_share_claim_are_valid_objects() -> None:
    b = _builder()
    share = Claim("c", 1, None, None, False, device="s", amount=3)
    ranged = Device("r", "b", 1, None, capacity=VALID_RANGE)
    world = _world(share, devices=(SHARED, ranged, Device("n", "b", 0, None, capacity=NO_POLICY)))
    (devices,) = slice_objects(b, world)
    models.V1ResourceSlice.model_validate(devices)
    values, bounds, whole = devices["spec"]["devices"]
    assert values["allowMultipleAllocations"] is True
    assert values["capacity"] == {
        "memory": {
            "value": "8Gi",
            "requestPolicy": {"default": "2Gi", "validValues": ["2Gi", "4Gi", "6Gi"]},
        }
    }
    assert bounds["capacity"]["memory"]["requestPolicy"] == {
        "default": "2Gi",
        "validRange": {"min": "2Gi", "max": "5Gi", "step": "3Gi"},
    }
    assert whole["capacity"] == {"memory": {"value": "8Gi"}}
    (plain,) = slice_objects(b, _world(devices=(PLAIN,)))[0]["spec"]["devices"]
    assert "allowMultipleAllocations" not in plain and "capacity" not in plain
    claim = claim_object(b, world, share, "ns")
    models.ResourceV1ResourceClaim.model_validate(claim)
    (asked,) = claim["spec"]["devices"]["requests"]
    assert asked["exactly"]["capacity"] == {"requests": {"memory": "3Gi"}}
    driver = b.driver_name
    assert asked["exactly"]["selectors"][-1] == {
        "cel": {"expression": f'device.attributes["{driver}"].name == "s"'}
    }


def test_a_world_is_judged_without_shares_where_the_server_dropped_them() -> None:
    b = _builder()
    world = _world(Claim("c", 1, None, None, False, amount=3), devices=(SHARED, PLAIN))
    slices = slice_objects(b, world)
    claims = {"c": claim_object(b, world, world.claims[0], "ns")}
    assert as_stored(world, slices, claims) == world
    for device in slices[0]["spec"]["devices"]:  # as stored with DRAConsumableCapacity off
        device.pop("allowMultipleAllocations", None)
        device.get("capacity", {}).get("memory", {}).pop("requestPolicy", None)
    del claims["c"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]
    stored = as_stored(world, slices, claims)
    assert stored.devices == (replace(SHARED, capacity=None), PLAIN)
    assert stored.claims == (Claim("c", 1, None, None, False),)


def test_the_shrinker_makes_a_shared_device_plainer_and_takes_a_claims_share_away() -> None:
    claim = Claim("c", 1, None, None, False, device="s", amount=3)
    world = _world(claim, devices=(SHARED,))
    assert list(simpler(world)) == [
        replace(world, devices=(replace(SHARED, capacity=None),)),
        replace(world, devices=(replace(SHARED, capacity=Capacity(8)),)),
        replace(world, claims=(replace(claim, device=None),)),
        replace(world, claims=(replace(claim, amount=None),)),
    ]
