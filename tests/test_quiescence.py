"""The quiescence net: its rules on hand-built versions of DRA objects, as a watch delivers them.

Each version carries the managed fields the API server would keep for it: who owns which field,
and the time of each manager's last write that changed something. A write loop and a fight must
be findings naming the fields and the managers; the cluster's normal work (allocation,
reservation, release, a status written once, slices republished at the next generation) and
what the test itself writes must not.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from unreachable import unreachable_kube

from e2e_dra._suite._nets import Finding, VersionWatch, slice_collection
from e2e_dra._suite._quiescence import (
    FIGHT_HANDOVERS,
    FLAP_RETURNS,
    HISTORY,
    WINDOW,
    Quiescence,
    dotted,
    dra_owner,
    leaves,
)
from e2e_dra.builder import SUBTEST_LABEL
from e2e_dra.kube import Kube, default_field_manager

SUITE = "e2e-dra -- dra"  # the suite's own field manager (its client's user agent)
DRIVERS = {"core-dra": "core-dra.example.com", "other": "other.example.com"}
SCHEDULER, CONTROLLER = "kube-scheduler", "kube-controller-manager"
PARITY = "example.com/parity"


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def net(clock: Clock | None = None, *, objects: int = 1000) -> Quiescence:
    return Quiescence(
        lambda obj: dra_owner(obj, DRIVERS),
        asked=lambda: {SUITE},
        clock=clock or Clock(),
        objects=objects,
    )


def stamp(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_800_000_000 + second))


def entry(manager: str, second: int, fields: dict, *, subresource: str = "") -> dict:
    found = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "resource.k8s.io/v1",
        "time": stamp(second),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        found["subresource"] = subresource
    return found


def reserved_fields(*uids: str) -> dict:
    return {
        "f:status": {
            "f:allocation": {},
            "f:reservedFor": {
                ".": {},
                **{
                    f'k:{{"uid":"{uid}"}}': {".": {}, "f:name": {}, "f:resource": {}, "f:uid": {}}
                    for uid in uids
                },
            },
        }
    }


class Claim:
    """One claim's versions, each written by one manager: the object and managed fields the API
    server would store after each write (an Update takes the fields it changes)."""

    def __init__(self, name: str = "c", uid: str = "claim-uid") -> None:
        self.version = 100
        self.second = 0
        self.obj: dict = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": uid,
                "resourceVersion": "100",
                "labels": {SUBTEST_LABEL: "core-dra"},
                "managedFields": [
                    entry(SUITE, 0, {"f:metadata": {"f:labels": {f"f:{SUBTEST_LABEL}": {}}}})
                ],
            },
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
        }

    def write(self, manager: str, change: dict, fields: dict | None, *, second: int = 1) -> dict:
        """Apply ``change`` (top-level keys: metadata keys merged, status replaced) as
        ``manager``, who then owns ``fields`` (None: it took nothing, e.g. only removed); one
        version, as a watch delivers it."""
        self.version += 1
        self.second += second
        obj = self.obj
        for key, value in change.items():
            if key == "metadata":
                obj["metadata"].update(value)
                obj["metadata"] = {k: v for k, v in obj["metadata"].items() if v is not None}
            elif value is None:
                obj.pop(key, None)
            else:
                obj[key] = value
        obj["metadata"]["resourceVersion"] = str(self.version)
        managed = obj["metadata"]["managedFields"]
        if fields is not None:
            fields = copy.deepcopy(fields)
            for other in managed:
                if other["manager"] != manager:
                    _take(other["fieldsV1"], fields)
            managed[:] = [e for e in managed if set(e["fieldsV1"]) - {"."}]
            mine = [e for e in managed if e["manager"] == manager]
            if mine:
                mine[0]["fieldsV1"] = fields
                mine[0]["time"] = stamp(self.second)
            else:
                managed.append(entry(manager, self.second, fields))
        return copy.deepcopy(obj)


def _take(theirs: dict, taken: dict) -> None:
    """Remove from a manager's field set what another write took (its leaves)."""
    for name, sub in taken.items():
        if name == "." or name not in theirs:
            continue
        if sub and theirs[name]:
            _take(theirs[name], sub)
            if set(theirs[name]) - {"."}:
                continue
        del theirs[name]


ALLOCATION = {"devices": {"results": [{"request": "r", "driver": DRIVERS["core-dra"], "pool": "p",
                                       "device": "d0"}]}}  # fmt: skip


def allocated_for(*pods: str) -> dict:
    status: dict = {"allocation": ALLOCATION}
    if pods:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods]
    return status


def settled_claim() -> tuple[Claim, list[dict]]:
    """A claim allocated and reserved for its running pod: the versions that got it there."""
    claim = Claim()
    versions = [copy.deepcopy(claim.obj)]
    versions.append(
        claim.write(
            SCHEDULER,
            {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}},
            {
                "f:metadata": {
                    "f:finalizers": {".": {}, 'v:"resource.kubernetes.io/delete-protection"': {}}
                }
            },
        )
    )
    versions.append(
        claim.write(SCHEDULER, {"status": allocated_for("p0")}, reserved_fields("uid-p0"))
    )
    return claim, versions


def feed(quiescence: Quiescence, versions: list[dict], clock: Clock, every: float = 0.05) -> None:
    for version in versions:
        clock.now += every
        quiescence.seen("MODIFIED", version)


def settled() -> tuple[Clock, Quiescence, Claim]:
    """A net that has seen :func:`settled_claim` get there, its clock, and the claim."""
    clock = Clock()
    quiescence = net(clock)
    claim, versions = settled_claim()
    feed(quiescence, versions, clock)
    return clock, quiescence, claim


def toggled(claim: Claim, manager: str, times: int, *, second: int = 0) -> list[dict]:
    """``manager`` writes the parity annotation ``times`` times, each time the other value (the
    first: "even", unless it is that already)."""
    writes = []
    for _ in range(times):
        now = (claim.obj["metadata"].get("annotations") or {}).get(PARITY)
        value = "odd" if now == "even" else "even"
        writes.append(
            claim.write(
                manager,
                {"metadata": {"annotations": {PARITY: value}}},
                {"f:metadata": {"f:annotations": {".": {}, f"f:{PARITY}": {}}}},
                second=second,
            )
        )
    return writes


def rules(found: list[Finding]) -> list[str]:
    return [f.message.split("'")[1] for f in found]


# --- the fields of a version and their owners ---------------------------------------------------


def test_a_keyed_list_is_taken_item_by_item_with_its_order_and_each_field_has_its_owner() -> None:
    _, versions = settled_claim()
    fields = leaves(versions[-1])
    item = ("status", "reservedFor", "[uid=uid-p0]", "name")
    assert fields[item].value == '"p0"'
    assert fields[item].owners == {SCHEDULER}
    assert fields[("status", "reservedFor")].value == '["[uid=uid-p0]"]'
    assert fields[("status", "allocation", "devices", "results")].owners == {SCHEDULER}
    assert fields[("metadata", "labels", SUBTEST_LABEL)].owners == {SUITE}
    assert not {("metadata", "resourceVersion"), ("metadata", "managedFields")} & fields.keys()
    assert dotted(item) == "status.reservedFor[uid=uid-p0].name"


def test_managed_fields_of_another_api_version_name_no_owner() -> None:
    _, versions = settled_claim()
    version = copy.deepcopy(versions[-1])
    for managed in version["metadata"]["managedFields"]:
        managed["apiVersion"] = "resource.k8s.io/v1beta2"
    fields = leaves(version)
    assert fields[("status", "allocation", "devices", "results")].owners == frozenset()
    assert fields[("status", "reservedFor")].value.startswith('[{"name":"p0"')  # one value


# --- rule (b): a flap ----------------------------------------------------------------------------


def test_a_settled_claim_rewritten_back_and_forth_is_a_flap_naming_the_field_and_manager() -> None:
    clock, quiescence = Clock(), net()
    quiescence = net(clock)
    claim, versions = settled_claim()
    feed(quiescence, versions, clock)
    feed(quiescence, toggled(claim, CONTROLLER, FLAP_RETURNS + 2), clock)
    found = quiescence.take()
    assert rules(found) == ["flap"]
    assert found[0].owner == "core-dra"
    assert f"metadata.annotations.{PARITY}" in found[0].message
    assert CONTROLLER in found[0].message
    assert "ResourceClaim ns/c" in found[0].message
    assert quiescence.take() == []


def test_one_return_less_is_no_flap() -> None:
    clock, quiescence, claim = settled()
    feed(quiescence, toggled(claim, CONTROLLER, FLAP_RETURNS + 1), clock)
    assert quiescence.take() == []
    feed(quiescence, toggled(claim, CONTROLLER, 1), clock)
    assert rules(quiescence.take()) == ["flap"]


def test_a_flapping_status_condition_is_a_flap_though_its_transition_time_is_new_each_time() -> (
    None
):
    clock, quiescence, claim = settled()
    device = {"driver": DRIVERS["core-dra"], "pool": "p", "device": "d0"}
    key = 'k:{"device":"d0","driver":"core-dra.example.com","pool":"p"}'
    ready = {".": {}, "f:type": {}, "f:status": {}, "f:lastTransitionTime": {}, "f:reason": {},
             "f:message": {}}  # fmt: skip
    conditions = {".": {}, 'k:{"type":"Ready"}': ready}
    owned = {"f:status": {"f:devices": {".": {}, key: {".": {}, "f:conditions": conditions}}}}
    flips = []
    for i in range(FLAP_RETURNS + 2):
        condition = {"type": "Ready", "status": "True" if i % 2 else "False",
                     "lastTransitionTime": stamp(10 + i), "reason": "R", "message": ""}  # fmt: skip
        status = {**allocated_for("p0"), "devices": [{**device, "conditions": [condition]}]}
        flips.append(claim.write("gpu-driver", {"status": status}, owned))
    feed(quiescence, flips, clock)
    found = quiescence.take()
    assert rules(found) == ["flap"]
    condition = "status.devices[device=d0,driver=core-dra.example.com,pool=p].conditions"
    assert f"{condition}[type=Ready].status" in found[0].message
    assert "gpu-driver" in found[0].message


def test_writes_by_the_test_in_between_restart_the_story() -> None:
    clock, quiescence, claim = settled()
    for i in range(3 * FLAP_RETURNS):
        feed(quiescence, toggled(claim, CONTROLLER, 1), clock)
        side = "odd" if i % 2 else "even"  # no news either: two values by turns
        label = {"metadata": {"labels": {SUBTEST_LABEL: "core-dra", "round": side}}}
        owned = {"f:metadata": {"f:labels": {f"f:{SUBTEST_LABEL}": {}, "f:round": {}}}}
        feed(quiescence, [claim.write(SUITE, label, owned)], clock)
    assert quiescence.take() == []


def test_the_tests_own_flapping_is_asked_for() -> None:
    clock, quiescence, claim = settled()
    feed(quiescence, toggled(claim, SUITE, 3 * FLAP_RETURNS), clock)
    assert quiescence.take() == []


def test_changes_further_apart_than_the_window_do_not_add_up() -> None:
    clock, quiescence, claim = settled()
    feed(quiescence, toggled(claim, CONTROLLER, 3 * FLAP_RETURNS), clock, every=WINDOW / 2)
    assert quiescence.take() == []


# --- rule (a): a fight ---------------------------------------------------------------------------


def test_two_managers_taking_a_field_from_each_other_is_a_fight_naming_both() -> None:
    clock, quiescence, claim = settled()
    owned = {"f:metadata": {"f:annotations": {".": {}, f"f:{PARITY}": {}}}}
    writes = []
    for i in range(FIGHT_HANDOVERS + 2):
        manager, value = (SCHEDULER, "even") if i % 2 else (CONTROLLER, "odd")
        writes.append(claim.write(manager, {"metadata": {"annotations": {PARITY: value}}}, owned))
    feed(quiescence, writes, clock)
    found = quiescence.take()
    assert rules(found) == ["fight"]
    assert CONTROLLER in found[0].message and SCHEDULER in found[0].message
    assert "hand-overs" in found[0].message


def test_a_fight_over_ever_new_timestamps_is_a_fight_and_no_flap() -> None:
    clock, quiescence, claim = settled()
    owned = {"f:metadata": {"f:annotations": {".": {}, "f:example.com/heartbeat": {}}}}
    writes = [
        claim.write(
            SCHEDULER if i % 2 else CONTROLLER,
            {"metadata": {"annotations": {"example.com/heartbeat": stamp(100 + i)}}},
            owned,
        )
        for i in range(FIGHT_HANDOVERS + 2)
    ]
    feed(quiescence, writes, clock)
    assert rules(quiescence.take()) == ["fight"]


def test_a_version_two_managers_stamped_at_once_tells_no_writer() -> None:
    """A list after the watch broke may skip versions: whoever of the two removed the field,
    the hand-over is not told, and does not count."""
    clock = Clock()
    quiescence = net(clock)
    claim, versions = settled_claim()
    owned = {"f:metadata": {"f:labels": {"f:other": {}}}}
    versions.append(claim.write(SCHEDULER, {"metadata": {"labels": {"other": "x"}}}, owned))
    feed(quiescence, versions, clock)
    owned = {"f:metadata": {"f:annotations": {".": {}, f"f:{PARITY}": {}}}}
    writes = []
    for _ in range(FIGHT_HANDOVERS):
        writes.append(claim.write(CONTROLLER, {"metadata": {"annotations": {PARITY: "1"}}}, owned))
        writes.append(claim.write(CONTROLLER, {"metadata": {"annotations": None}}, None))
        for managed in writes[-1]["metadata"]["managedFields"]:
            if managed["manager"] in (SCHEDULER, CONTROLLER):
                managed["time"] = stamp(claim.second)  # both wrote since the version before
        claim.obj["metadata"]["managedFields"] = writes[-1]["metadata"]["managedFields"]
    feed(quiescence, writes[: FIGHT_HANDOVERS + 1], clock)
    assert quiescence.take() == []


def test_one_manager_writing_ever_new_timestamps_is_neither() -> None:
    clock, quiescence, claim = settled()
    owned = {"f:metadata": {"f:annotations": {".": {}, "f:example.com/heartbeat": {}}}}
    writes = [
        claim.write(
            CONTROLLER, {"metadata": {"annotations": {"example.com/heartbeat": stamp(i)}}}, owned
        )
        for i in range(3 * FIGHT_HANDOVERS)
    ]
    feed(quiescence, writes, clock)
    assert quiescence.take() == []


# --- (c): normal work is no finding --------------------------------------------------------------


def reuse(claim: Claim, pod: str) -> list[dict]:
    """One pod's turn with a claim: the scheduler adds its finalizer, allocates the same device
    and reserves the claim for the pod; the pod ends, the resource claim controller removes the
    reservation and the allocation (taking no field: no stamp), then its finalizer."""
    protection = "resource.kubernetes.io/delete-protection"
    finalizer = {"f:metadata": {"f:finalizers": {".": {}, f'v:"{protection}"': {}}}}
    return [
        claim.write(SCHEDULER, {"metadata": {"finalizers": [protection]}}, finalizer),
        claim.write(SCHEDULER, {"status": allocated_for(pod)}, reserved_fields(f"uid-{pod}")),
        claim.write(CONTROLLER, {"status": None}, None),
        claim.write(CONTROLLER, {"metadata": {"finalizers": None}}, None),
    ]


def test_a_claim_allocated_reserved_and_released_for_pod_after_pod_is_no_finding() -> None:
    clock = Clock()
    quiescence = net(clock)
    claim = Claim()
    feed(quiescence, [copy.deepcopy(claim.obj)], clock)
    for i in range(3 * FLAP_RETURNS):
        feed(quiescence, reuse(claim, f"p{i}"), clock, every=0.01)
    assert quiescence.take() == []


def test_the_same_pods_allocation_written_and_withdrawn_again_and_again_is_a_flap() -> None:
    """The rule above holds because each turn brings a new consumer; without one it flaps."""
    clock = Clock()
    quiescence = net(clock)
    claim = Claim()
    feed(quiescence, [copy.deepcopy(claim.obj)], clock)
    for _ in range(FLAP_RETURNS):
        feed(quiescence, reuse(claim, "p0"), clock)
    assert rules(quiescence.take()) == ["flap"]


def test_a_device_status_written_once_and_a_deleted_claim_are_no_finding() -> None:
    clock, quiescence, claim = settled()
    device = {"driver": DRIVERS["core-dra"], "pool": "p", "device": "d0", "data": {"a": 1}}
    key = 'k:{"device":"d0","driver":"core-dra.example.com","pool":"p"}'
    owned = {"f:status": {"f:devices": {".": {}, key: {".": {}, "f:data": {}}}}}
    status = {**allocated_for("p0"), "devices": [device]}
    written = claim.write("core-dra.example.com", {"status": status}, owned)
    feed(quiescence, [written, written], clock)  # a repeated version changes nothing
    gone = claim.write(CONTROLLER, {"metadata": {"deletionTimestamp": stamp(99)}}, None)
    feed(quiescence, [gone], clock)
    quiescence.seen("DELETED", gone)
    assert quiescence.take() == []


def slice_version(generation: int, devices: list[str], version: int) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": "node-core-dra-abc",
            "uid": "slice-uid",
            "resourceVersion": str(version),
            "generation": generation,
            "managedFields": [
                entry("dra-helper", generation, {"f:spec": {"f:devices": {}, "f:pool": {}}})
            ],
        },
        "spec": {
            "driver": DRIVERS["core-dra"],
            "nodeName": "node",
            "pool": {"name": "node", "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": name} for name in devices],
        },
    }


def test_slices_republished_at_the_next_generation_are_no_finding() -> None:
    clock = Clock()
    quiescence = net(clock)
    versions = [slice_version(g, ["d0", "d1"], 10 + g) for g in range(1, 3 * FLAP_RETURNS)]
    feed(quiescence, versions, clock)
    assert quiescence.take() == []


def test_two_releases_republishing_each_their_devices_is_a_flap_of_the_slice() -> None:
    """The generation moves on with every write: a counter, no news; the devices go back."""
    clock = Clock()
    quiescence = net(clock)
    versions = [
        slice_version(g, ["d0", "d1"] if g % 2 else ["d0"], 10 + g)
        for g in range(1, FLAP_RETURNS + 3)
    ]
    feed(quiescence, versions, clock)
    found = quiescence.take()
    assert rules(found) == ["flap"]
    assert found[0].owner == "core-dra"  # by the slice's driver
    assert "spec.devices" in found[0].message and "dra-helper" in found[0].message


# --- what is kept --------------------------------------------------------------------------------


def test_each_object_and_rule_is_said_once() -> None:
    clock, quiescence, claim = settled()
    feed(quiescence, toggled(claim, CONTROLLER, 4 * FLAP_RETURNS), clock)
    assert len(quiescence.take()) == 1
    feed(quiescence, toggled(claim, CONTROLLER, 4 * FLAP_RETURNS), clock)
    assert quiescence.take() == []


def test_a_new_api_version_or_a_deletion_restarts_the_story() -> None:
    clock, quiescence, claim = settled()
    flips = toggled(claim, CONTROLLER, FLAP_RETURNS + 2)
    feed(quiescence, flips[:3], clock)
    other = copy.deepcopy(flips[3])
    other["apiVersion"] = "resource.k8s.io/v1beta2"
    feed(quiescence, [other], clock)
    quiescence.seen("DELETED", other)
    feed(quiescence, flips[4:], clock)
    assert quiescence.take() == []


def test_objects_beyond_the_bound_are_forgotten_oldest_first() -> None:
    clock = Clock()
    quiescence = net(clock, objects=2)
    first, versions = settled_claim()
    feed(quiescence, versions, clock)
    feed(quiescence, toggled(first, CONTROLLER, FLAP_RETURNS + 1), clock)  # one write short
    for name in ("b", "c"):
        feed(quiescence, [Claim(name, f"uid-{name}").obj], clock)
    feed(quiescence, toggled(first, CONTROLLER, 1), clock)
    assert quiescence.take() == []  # its story began again with this write


def test_a_field_keeps_a_bounded_history() -> None:
    clock, quiescence, claim = settled()
    feed(quiescence, toggled(claim, CONTROLLER, 5 * HISTORY), clock)
    stories = list(quiescence._stories.values())
    assert max(len(kept) for story in stories for kept in story.changes.values()) == HISTORY


# --- whose, and the suite's own field managers ---------------------------------------------------


def test_an_object_belongs_to_its_label_else_to_its_driver() -> None:
    _, versions = settled_claim()
    assert dra_owner(versions[-1], DRIVERS) == "core-dra"
    unlabelled = copy.deepcopy(versions[-1])
    unlabelled["metadata"]["labels"] = {}
    assert dra_owner(unlabelled, DRIVERS) == "core-dra"  # by the allocating driver
    rule = {"kind": "DeviceTaintRule", "metadata": {"labels": {SUBTEST_LABEL: "other"}}}
    assert dra_owner(rule, DRIVERS) == "other"
    assert dra_owner({"kind": "DeviceTaintRule", "metadata": {}}, DRIVERS) is None


def test_the_default_field_manager_is_the_user_agent_up_to_its_first_slash() -> None:
    assert default_field_manager(SUITE) == SUITE
    assert default_field_manager("kubectl/v1.38.0 (linux/amd64)") == "kubectl"
    assert default_field_manager("a\tb/c") == "ab"
    assert len(default_field_manager("x" * 300)) == 128


@pytest.fixture
def nowhere(tmp_path: Path) -> Iterator[Kube]:
    """A client of an API server at a local port that nobody listens on."""
    kube = unreachable_kube(tmp_path, user_agent="suite/1.0")
    yield kube
    kube.close()


def test_every_client_of_a_server_knows_the_field_managers_the_suites_writes_used(
    nowhere: Kube,
) -> None:
    other = nowhere.fresh()
    with pytest.raises(Exception, match=r"127\.0\.0\.1|Connection|refused"):
        other.patch("/apis/x/v1/things/t", {}, kind="apply", fieldManager="manager-1")
    with pytest.raises(Exception, match=r"127\.0\.0\.1|Connection|refused"):
        other.request("GET", "/apis/x/v1/things", query={"fieldManager": "read-only"})
    assert nowhere.field_managers() == {"suite", "manager-1"}
    other.close()


def test_a_slice_watch_that_cannot_list_says_so(nowhere: Kube) -> None:
    watch = VersionWatch(nowhere, "ResourceSlice", slice_collection, lambda e, o: None, grace=0.5)
    watch.start()
    try:
        found = watch.take()
    finally:
        watch.stop()
    assert len(found) == 1 and found[0].owner is None
    assert "the ResourceSlice watch has never listed ResourceSlices" in found[0].message
    assert "A ResourceSlice written back and forth meanwhile may have gone unnoticed" in (
        found[0].message
    )


def test_a_version_the_net_cannot_follow_is_said_once_and_breaks_no_watch() -> None:
    clock = Clock()
    quiescence = net(clock)
    broken = Claim().obj
    broken["metadata"]["managedFields"] = ["not an entry"]
    quiescence.seen("LISTED", broken)  # raises nothing: the watch that calls goes on
    quiescence.seen("LISTED", broken)
    found = quiescence.take()
    assert len(found) == 1 and found[0].owner is None
    assert "the quiescence net could not follow a version of ResourceClaim c" in found[0].message


def test_the_tests_own_finalizer_written_through_another_version_is_asked_for() -> None:
    """The test adds a finalizer beside the scheduler's and takes it away, again and again within
    one second, through ``v1beta2``: its managed-fields entry is of another version than the
    watched object (so it names no field the net compares), keeps its time (whole seconds) but
    not its fields. Each of those versions is a write of the test's, not a flap."""
    clock, quiescence, claim = settled()
    label = {"f:metadata": {"f:labels": {".": {}, "f:mine": {}}}}
    finalizer = {"f:metadata": {"f:finalizers": {'v:"test.example/x"': {}}}}
    protection = ["resource.kubernetes.io/delete-protection"]

    def through_v1beta2(version: dict) -> dict:
        for managed in version["metadata"]["managedFields"]:
            if managed["manager"] == SUITE:
                managed["apiVersion"] = "resource.k8s.io/v1beta2"
        return version

    versions = [through_v1beta2(claim.write(SUITE, {"metadata": {"labels": {"mine": "x"}}}, label))]
    for _ in range(2 * FLAP_RETURNS):
        with_it = {"metadata": {"finalizers": [*protection, "test.example/x"]}}
        owned = {"f:metadata": {**label["f:metadata"], **finalizer["f:metadata"]}}
        versions.append(through_v1beta2(claim.write(SUITE, with_it, owned, second=0)))
        without = {"metadata": {"finalizers": protection}}
        versions.append(through_v1beta2(claim.write(SUITE, without, label, second=0)))
    feed(quiescence, versions, clock)
    assert quiescence.take() == []
