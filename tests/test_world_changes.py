"""random-worlds' changes without a cluster: what each change makes of a world, how they are
drawn with the claims whose fit they flip, what the second round is judged by, how a changed
world shrinks, and the updates that make the changes on the live objects."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes.client import models

from e2e_dra.builder import SubtestObjects
from e2e_dra.subtests._world_objects import (
    Grounds,
    edited_rule,
    pool_name,
    republished,
    rule_objects,
    slice_objects,
)
from e2e_dra.subtests._worlds import (
    ADD,
    REKEY,
    REMODEL,
    REMOVE,
    RETARGET,
    RULE_CHANGES,
    SLICE_CHANGES,
    TAINT,
    UNRULE,
    UNTAINT,
    Change,
    Claim,
    Device,
    Rule,
    World,
    draw,
    simpler,
    wrongs,
)

DEVICES = (
    Device("d0", "a", 0, None),
    Device("d1", "a", 1, "k1"),
    Device("d2", "b", 1, None),
)
RULES = (Rule("k1", device="d0"), Rule("k2"), Rule("k1", pool=False))


def _builder() -> Any:
    objects = SubtestObjects("random-worlds", suite="upgrade-downgrade", image="example.test/b:1")
    return objects.builder(None)  # type: ignore[arg-type]  # building objects needs no client


def _result(device: str) -> dict:
    return {"request": "my-request", "driver": "drv", "pool": "p", "device": device}


def _changed(*changes: Change, **fields: Any) -> World:
    return World("w", DEVICES, (), rules=RULES, changes=changes, **fields)


@pytest.mark.parametrize(
    ("change", "devices"),
    [
        (Change(UNTAINT, device="d1"), (DEVICES[0], replace(DEVICES[1], taint=None), DEVICES[2])),
        (Change(TAINT, device="d0", to="k2"), (replace(DEVICES[0], taint="k2"), *DEVICES[1:])),
        (Change(REMODEL, device="d2", to="a"), (*DEVICES[:2], replace(DEVICES[2], model="a"))),
        (Change(ADD, device="d3", to="b"), (*DEVICES, Device("d3", "b", 0, None))),
        (Change(REMOVE, device="d1"), (DEVICES[0], DEVICES[2])),
    ],
    ids=str,
)
def test_a_change_of_the_pool_changes_its_devices_and_leaves_the_rules(
    change: Change, devices: tuple[Device, ...]
) -> None:
    later = _changed(change).after()
    assert later == World("w", devices, (), rules=RULES)  # and no changes left to make


@pytest.mark.parametrize(
    ("change", "rules"),
    [
        (Change(UNRULE, rule=1), (RULES[0], None, RULES[2])),
        (Change(REKEY, rule=0, to="k2"), (Rule("k2", device="d0"), *RULES[1:])),
        (Change(RETARGET, rule=0, device="d2"), (Rule("k1", device="d2"), *RULES[1:])),
    ],
    ids=str,
)
def test_a_change_of_a_rule_deletes_or_edits_that_rule(
    change: Change, rules: tuple[Rule | None, ...]
) -> None:
    world = _changed(change)
    assert world.rules_after() == rules
    assert world.after() == World("w", DEVICES, (), rules=tuple(r for r in rules if r))


def test_changes_apply_in_order_and_a_deleted_rule_stays_deleted() -> None:
    world = _changed(
        Change(UNRULE, rule=0), Change(REKEY, rule=0, to="k2"), Change(TAINT, "d2", to="k1")
    )
    assert world.rules_after() == (None, *RULES[1:])
    assert world.after().devices[2].taint == "k1"


def test_the_second_round_is_judged_by_the_world_after_its_changes() -> None:
    probe = Claim("p0", 1, None, None, False, device="d0")  # tolerates nothing
    ruled = World("w", DEVICES, (probe,), rules=(Rule("k1", device="d0"),))
    assert ruled.fits(probe, []) is None
    unruled = replace(ruled, changes=(Change(UNRULE, rule=0),)).after()
    assert unruled.fits(probe, []) == [DEVICES[0]]  # a scheduler still seeing the rule refuses
    assert wrongs(unruled, {"p0": [_result("d0")]}) == []
    tainted = replace(unruled, changes=(Change(TAINT, device="d0", to="k2"),)).after()
    (problem,) = wrongs(tainted, {"p0": [_result("d0")]})  # a scheduler that missed the taint
    assert "with taints ['k2'], which its request does not accept" in problem
    gone = replace(unruled, changes=(Change(REMOVE, device="d0"),)).after()
    assert gone.fits(probe, []) is None
    (problem,) = wrongs(gone, {"p0": [_result("d0")]})
    assert problem == (
        "claim p0 was allocated device d0, which the world's pool does not have: it has "
        "['d1', 'd2']"
    )


def _worlds(count: int = 200) -> list[World]:
    return [
        draw(random.Random(f"{seed}/after-cluster-upgrade/0"), "acu-0") for seed in range(count)
    ]


def _takes(world: World, claim: Claim) -> bool:
    return any(
        d.name == claim.device and world.accepts(claim, d, claim.model) for d in world.devices
    )


def test_every_drawn_world_changes_and_its_probes_fit_before_or_after_not_both() -> None:
    worlds = _worlds()
    assert all(1 <= len(w.changes) <= 2 for w in worlds)
    assert {c.kind for w in worlds for c in w.changes} == {*SLICE_CHANGES, *RULE_CHANGES}
    flips = []
    for world in worlds:
        names = {d.name for d in world.devices}
        for change in world.changes:
            if change.kind in RULE_CHANGES:
                assert change.rule is not None and change.rule < len(world.rules)
            if change.kind == ADD:
                assert change.device not in names
            elif change.kind == RETARGET:
                assert change.device != world.rules[change.rule or 0].device
            elif change.kind in SLICE_CHANGES:
                assert change.device in names
        probes = [c for c in world.claims if c.name.startswith("p")]
        assert [p.name for p in probes] == [f"p{i}" for i in range(len(probes))]
        later = world.after()
        for probe in probes:
            assert probe.device is not None and _takes(world, probe) != _takes(later, probe)
            flips.append(_takes(later, probe))
    assert set(flips) == {True, False}  # probes that now fit, and probes that no longer do
    assert sum(1 for w in worlds if any(c.name.startswith("p") for c in w.claims)) > 180


def test_where_no_rules_are_served_a_world_goes_without_their_changes() -> None:
    world = _changed(Change(UNRULE, rule=0), Change(UNTAINT, device="d1"))
    fitted = Grounds(_builder(), "acc", None).fitted(world)
    assert fitted.rules == () and fitted.changes == (Change(UNTAINT, device="d1"),)
    assert Grounds(_builder(), "acc", "resource.k8s.io/v1").fitted(world) == world


def test_the_shrinker_takes_changes_away_with_their_device_or_rule_and_renumbers_rules() -> None:
    changes = (Change(REKEY, rule=2, to="k2"), Change(UNRULE, rule=0), Change(UNTAINT, "d1"))
    world = _changed(*changes)
    found = list(simpler(world))
    without_d1 = next(w for w in found if len(w.devices) == 2 and DEVICES[1] not in w.devices)
    assert without_d1.changes == changes[:2]
    without_rule_0 = next(w for w in found if w.rules == RULES[1:])
    assert without_rule_0.changes == (Change(REKEY, rule=1, to="k2"), changes[2])
    assert without_rule_0.after().rules == (RULES[1], Rule("k2", pool=False))
    without_rule_2 = next(w for w in found if w.rules == RULES[:2])
    assert without_rule_2.changes == changes[1:]
    fewer = [w.changes for w in found if w.devices == DEVICES and w.rules == RULES]
    assert fewer[:3] == [changes[1:], (changes[0], changes[2]), changes[:2]]


def test_the_pool_is_republished_at_the_next_generation_with_its_old_taints_kept() -> None:
    b = _builder()
    devices = (Device("d0", "a", 0, "k1"), Device("d1", "a", 1, None), Device("d2", "b", 0, "k2"))
    world = World(
        "w",
        devices,
        (),
        counters=3,
        changes=(
            Change(TAINT, device="d1", to="k2"),
            Change(REMOVE, device="d2"),
            Change(ADD, device="d3", to="b"),
            Change(REMODEL, device="d0", to="b"),
        ),
    )
    stored = slice_objects(b, world)  # as the server answered: with a resourceVersion
    for slice_ in stored:
        slice_["metadata"]["resourceVersion"] = "7"
    old_taint = stored[0]["spec"]["devices"][0]["taints"][0]
    started = datetime.now(UTC).replace(microsecond=0)

    device_update, counter_update = republished(stored, world)

    for update, before in ((device_update, stored[0]), (counter_update, stored[1])):
        models.V1ResourceSlice.model_validate(update)
        assert update["metadata"] == before["metadata"]  # the same objects, updated in place
        assert update["spec"]["pool"] == {**before["spec"]["pool"], "generation": 1}
    assert counter_update["spec"]["sharedCounters"] == stored[1]["spec"]["sharedCounters"]
    assert "devices" not in counter_update["spec"]
    d0, d1, d3 = device_update["spec"]["devices"]
    assert (d0["name"], d1["name"], d3["name"]) == ("d0", "d1", "d3")
    assert d0["taints"] == [old_taint] and d0["attributes"]["model"] == {"string": "b"}
    (new_taint,) = d1["taints"]
    assert new_taint["key"] == "k2"
    added = datetime.fromisoformat(new_taint["timeAdded"].replace("Z", "+00:00"))
    assert started <= added <= datetime.now(UTC)  # tainted now, not a minute back
    assert added - datetime.fromisoformat(old_taint["timeAdded"].replace("Z", "+00:00")) >= (
        timedelta(seconds=59)
    )
    assert d3["attributes"]["name"] == {"string": "d3"} and "taints" not in d3
    assert d3["consumesCounters"] == d0["consumesCounters"]


def test_an_edited_rule_takes_its_new_selector_and_key_and_keeps_the_rest() -> None:
    b = _builder()
    world = World("w", DEVICES, (), rules=(Rule("k1", device="d0"),))
    (stored,) = rule_objects(b, world, "resource.k8s.io/v1")
    stored["metadata"]["resourceVersion"] = "9"
    stored["spec"]["taint"]["timeAdded"] = "2026-12-06T10:00:00Z"
    stored["status"] = {"conditions": []}

    edit = edited_rule(b, stored, world, Rule("k2", device="d2"))

    models.V1DeviceTaintRule.model_validate(edit)
    assert edit["metadata"] == stored["metadata"] and edit["status"] == stored["status"]
    assert edit["spec"] == {
        "deviceSelector": {"driver": b.driver_name, "pool": pool_name(b, world), "device": "d2"},
        "taint": {
            "key": "k2",
            "value": "x",
            "effect": "NoSchedule",
            "timeAdded": "2026-12-06T10:00:00Z",
        },
    }
    assert stored["spec"]["taint"]["key"] == "k1"  # the stored object is left as it was
