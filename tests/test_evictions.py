"""The eviction net: pods the device-taint eviction controller deletes are due for it (KEP-5055)
and carry its DisruptionTarget condition (KEP-3329), judged on versions as the watches deliver
them and events as the controller writes them."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from e2e_dra._suite._evictions import EvictionNet

DRIVER, POOL, DEVICE = "d.example.com", "pool-a", "dev-0"
TAINT = {"key": "k", "value": "v", "effect": "NoExecute"}
T0 = 1_800_000_000.0  # when the taint was added


def _at(seconds: float) -> str:
    return datetime.fromtimestamp(T0 + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _slice(taints: list[dict]) -> dict:
    device: dict = {"name": DEVICE}
    if taints:
        device["taints"] = [{**t, "timeAdded": _at(0)} for t in taints]
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "pool": {"name": POOL}, "devices": [device]},
    }


def _claim(tolerations: list[dict]) -> dict:
    result = {"request": "r", "driver": DRIVER, "pool": POOL, "device": DEVICE}
    if tolerations:
        result["tolerations"] = tolerations
    return {
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "labels": {"e2e-dra/subtest": "sub"}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def _pod(*, marked_at: float | None = None, deleting: bool = False) -> dict:
    pod: dict = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "pod-1"},
        "spec": {"resourceClaims": [{"name": "x", "resourceClaimName": "c"}]},
        "status": {"phase": "Running", "conditions": []},
    }
    if marked_at is not None:
        pod["status"]["conditions"].append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByDeviceTaintManager",
                "lastTransitionTime": _at(marked_at),
            }
        )
    if deleting:
        pod["metadata"]["deletionTimestamp"] = _at(marked_at or 0)
    return pod


def _event(at: float, message: str = "Marking for deletion") -> dict:
    return {
        "reason": "DeviceTaintManagerEviction",
        "message": message,
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": "pod-1"},
        "firstTimestamp": _at(at),
    }


def _net(clock: Clock) -> EvictionNet:
    return EvictionNet(lambda claim: claim["metadata"]["labels"].get("e2e-dra/subtest"), clock)


def _evicted(
    clock: Clock, taints: list[dict], tolerations: list[dict], at: float, *, condition: bool = True
) -> tuple[EvictionNet, list[str]]:
    """The net after a pod with a claim allocated ``tolerations`` on a device tainted ``taints``
    (from T0 on) was evicted ``at`` seconds after T0, with or without its condition."""
    net = _net(clock)
    net.seen("ADDED", _claim(tolerations))
    net.seen("ADDED", _slice(taints))
    net.seen("ADDED", _pod())
    clock.now = T0 + at
    marked = at if condition else None
    net.seen("MODIFIED", _pod(marked_at=marked))
    net.seen("MODIFIED", _pod(marked_at=marked, deleting=True))
    net.seen("DELETED", _pod(marked_at=marked, deleting=True))
    return net, [f.message for f in net.judge([_event(at)])]


@pytest.mark.parametrize(
    ("tolerations", "at"),
    [
        ([], 0),  # not tolerated: at once
        ([{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}], 20),
        # the shortest bound of the matching tolerations counts, as for node taints
        ([{"operator": "Exists"}, {"key": "k", "operator": "Exists", "tolerationSeconds": 5}], 5),
        ([{"key": "other", "operator": "Exists"}], 1),  # another key tolerates nothing here
    ],
)
def test_an_eviction_that_was_due_is_no_finding(tolerations: list[dict], at: float) -> None:
    assert _evicted(Clock(), [TAINT], tolerations, at)[1] == []


def test_an_eviction_before_the_toleration_is_over_is_not_due() -> None:
    bounded = [{"key": "k", "operator": "Equal", "value": "v", "tolerationSeconds": 60}]
    (found,) = _evicted(Clock(), [TAINT], bounded, 20)[1]
    assert "rule 'due': pod ns/p" in found
    assert f"{DRIVER}/{POOL}/{DEVICE} tolerating" in found and "'tolerationSeconds': 60" in found


@pytest.mark.parametrize(
    "tolerations", [[{"operator": "Exists"}], [{"key": "k", "operator": "Exists"}]]
)
def test_an_eviction_of_a_pod_tolerating_the_taint_for_good_is_not_due(
    tolerations: list[dict],
) -> None:
    (found,) = _evicted(Clock(), [TAINT], tolerations, 1)[1]
    assert "rule 'due'" in found


def test_only_noexecute_taints_evict() -> None:
    no_schedule = {**TAINT, "effect": "NoSchedule"}
    (found,) = _evicted(Clock(), [no_schedule], [], 1)[1]
    assert "rule 'due'" in found


def test_a_taint_removed_before_the_eviction_cancels_it() -> None:
    """The taint goes 10 s after it came; its toleration would have ended at 20 s."""
    clock = Clock()
    net = _net(clock)
    bounded = [{"key": "k", "operator": "Exists", "tolerationSeconds": 20}]
    net.seen("ADDED", _claim(bounded))
    net.seen("ADDED", _slice([TAINT]))
    net.seen("ADDED", _pod())
    clock.now = T0 + 10
    net.seen("MODIFIED", _slice([]))
    clock.now = T0 + 20
    net.seen("MODIFIED", _pod(marked_at=20, deleting=True))
    (found,) = [f.message for f in net.judge([_event(20)])]
    assert "rule 'due'" in found


def test_a_taint_removed_just_after_the_eviction_still_explains_it() -> None:
    clock = Clock()
    net = _net(clock)
    net.seen("ADDED", _claim([]))
    net.seen("ADDED", _slice([TAINT]))
    net.seen("ADDED", _pod())
    clock.now = T0 + 1
    net.seen("MODIFIED", _pod(marked_at=1, deleting=True))
    clock.now = T0 + 2
    net.seen("MODIFIED", _slice([]))
    assert net.judge([_event(1)]) == []


def test_a_device_taint_rule_explains_an_eviction() -> None:
    clock = Clock()
    net = _net(clock)
    net.seen("ADDED", _claim([]))
    net.seen("ADDED", _slice([]))
    rule = {
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r", "uid": "r1", "generation": 1},
        "spec": {"deviceSelector": {"pool": POOL}, "taint": {**TAINT, "timeAdded": _at(0)}},
    }
    net.seen("ADDED", rule)
    net.seen("ADDED", _pod())
    clock.now = T0 + 1
    net.seen("DELETED", _pod(marked_at=1, deleting=True))
    assert net.judge([_event(1)]) == []
    other = {**rule, "spec": {**rule["spec"], "deviceSelector": {"pool": "pool-b"}}}
    clock2 = Clock()
    net2 = _net(clock2)
    for obj in (_claim([]), _slice([]), other, _pod()):
        net2.seen("ADDED", obj)
    clock2.now = T0 + 1
    net2.seen("DELETED", _pod(marked_at=1, deleting=True))
    (found,) = [f.message for f in net2.judge([_event(1)])]
    assert "rule 'due'" in found


def test_a_deleted_pod_without_its_condition_is_a_finding_of_its_claims_subtest() -> None:
    net, found = _evicted(Clock(), [TAINT], [], 0, condition=False)
    assert len(found) == 1 and "rule 'condition': pod ns/p" in found[0]
    assert "DisruptionTarget" in found[0]
    assert net.judge([_event(0)]) == []  # said once
    twice = _net(Clock())
    for obj in (_claim([]), _slice([TAINT]), _pod()):
        twice.seen("ADDED", obj)
    twice.seen("DELETED", _pod(deleting=True))
    again = twice.judge([_event(0)] * 2)
    assert [f.owner for f in again] == ["sub"]  # once per pod, though two events name it


def test_the_condition_is_judged_once_the_pod_is_deleted() -> None:
    clock = Clock()
    net = _net(clock)
    for obj in (_claim([]), _slice([TAINT]), _pod()):
        net.seen("ADDED", obj)
    assert net.judge([_event(0)]) == []  # due, and not deleted yet: no condition needed yet
    net.seen("MODIFIED", _pod(deleting=True))
    (found,) = [f.message for f in net.judge([_event(0)])]
    assert "rule 'condition'" in found
    assert net.judge([_event(0)]) == []  # said once


def test_what_the_net_never_saw_or_a_cancelled_deletion_is_not_judged() -> None:
    net = _net(Clock())
    assert net.judge([_event(0)]) == []  # a pod it never saw
    for obj in (_claim([{"operator": "Exists"}]), _slice([TAINT]), _pod()):
        net.seen("ADDED", obj)
    assert net.judge([_event(0, "Cancelling deletion")]) == []


def test_the_net_names_kubernetes_143376_as_device_tolerations_declares_it() -> None:
    """v1.37.2 evicts a pod whose claim tolerates every taint (kubernetes#143376): the net sees
    it too, and the known bug's sign covers what the net says of it, and of nothing else."""
    from e2e_dra.subtests.device_tolerations import SUBTEST

    (bug,) = SUBTEST.known_bugs
    (every_taint,) = _evicted(Clock(), [TAINT], [{"operator": "Exists"}], 1)[1]
    assert bug.seen_in(every_taint)
    (by_key,) = _evicted(Clock(), [TAINT], [{"key": "k", "operator": "Exists"}], 1)[1]
    assert not bug.seen_in(by_key)


def test_the_claim_made_for_extended_resources_counts_as_the_pods() -> None:
    """A pod that got its device through an extended resource (KEP-5004) names its claim only
    in ``status.extendedResourceClaimStatus``: its eviction is judged by that claim too."""
    clock = Clock()
    net = _net(clock)
    pod = _pod()
    pod["spec"]["resourceClaims"] = []
    pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "c"}
    for obj in (_claim([{"operator": "Exists"}]), _slice([TAINT]), pod):
        net.seen("ADDED", obj)
    clock.now = T0 + 1
    gone = copy.deepcopy(pod)
    gone["metadata"]["deletionTimestamp"] = _at(1)
    net.seen("DELETED", gone)
    found = net.judge([_event(1)])
    assert [f.owner for f in found] == ["sub", "sub"]  # not due, and no condition
    assert "rule 'due'" in found[0].message and "rule 'condition'" in found[1].message
