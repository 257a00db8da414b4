"""The kubelet's side of the kubelet plugin API, as the test driver judges it (pure rules; the
driver's reading of the API server is exercised on a real cluster)."""

from __future__ import annotations

from datetime import UTC, datetime

from e2e_dra.driver._node_service import ClaimRef
from e2e_dra.driver._protocol import prepare_problems, still_running_with

CLAIM = ClaimRef("ns", "c", "uid-1")
NODE = "node-a"


def _claim(nodes: list[str] | None, reserved: bool = True, by_label: bool = False) -> dict:
    term: dict = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": nodes}]}
    if by_label:
        term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}
    allocation = {"devices": {"results": []}}
    if nodes is not None or by_label:
        allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
    status: dict = {"allocation": allocation}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-1"}]
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "uid-1"}, "status": status}


def test_a_claim_of_this_node_reserved_for_a_pod_may_be_prepared() -> None:
    assert prepare_problems(CLAIM, _claim([NODE]), NODE) == []
    assert prepare_problems(CLAIM, _claim(None), NODE) == []  # a network-attached device
    assert prepare_problems(CLAIM, _claim(None, by_label=True), NODE) == []  # not judged


def test_preparing_another_nodes_claim_or_one_reserved_for_nobody_is_said() -> None:
    [other] = prepare_problems(CLAIM, _claim(["node-b"]), NODE)
    assert other == (
        "the kubelet of node node-a asked to prepare ResourceClaim ns/c (uid-1), allocated to "
        "node(s) ['node-b'] only"
    )
    [unreserved] = prepare_problems(CLAIM, _claim([NODE], reserved=False), NODE)
    assert "reserved for no pod" in unreserved and "ns/c (uid-1)" in unreserved


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(
    name: str, started: float, *, claim: str = "c", phase: str = "Running", **meta: str
) -> dict:
    return {
        "metadata": {"name": name, **meta},
        "spec": {"resourceClaims": [{"name": "r", "resourceClaimName": claim}]},
        "status": {
            "phase": phase,
            "containerStatuses": [{"state": {"running": {"startedAt": _stamp(started)}}}],
        },
    }


def test_only_a_pod_that_runs_with_the_claim_since_before_the_unprepare_still_uses_it() -> None:
    asked = 1_800_000_000.0
    pods = [
        _pod("sharer", asked - 60),  # runs on: the unprepare came too early
        _pod("leaving", asked - 60, deletionTimestamp=_stamp(asked - 2)),
        _pod("done", asked - 60, phase="Succeeded"),
        _pod("other-claim", asked - 60, claim="d"),
        _pod("newer", asked + 3),  # started after the unprepare: prepared again since
    ]
    made = _pod("templated", asked - 60, claim="x")
    made["spec"]["resourceClaims"] = [{"name": "r", "resourceClaimTemplateName": "t"}]
    made["status"]["resourceClaimStatuses"] = [{"name": "r", "resourceClaimName": "c"}]

    assert still_running_with(CLAIM, [*pods, made], asked) == ["sharer", "templated"]


def test_an_api_server_that_does_not_answer_leaves_the_look_for_later_and_raises_nothing() -> None:
    """A driver is asked for its findings while a component restarts, and once more as it stops
    after the cluster is gone: neither may fail, and an unprepare not looked at stays due."""
    from kubernetes import client

    from e2e_dra.driver._protocol import SETTLE, KubeletProtocol
    from e2e_dra.kube import Kube

    closed = client.Configuration()
    closed.host = "https://127.0.0.1:9"  # the discard port: nothing listens
    closed.retries = 0
    now = [1_800_000_000.0]
    protocol = KubeletProtocol(NODE, Kube(closed), lambda: True, lambda: now[0])
    protocol.unprepare_asked(CLAIM)
    now[0] += SETTLE + 1

    assert protocol.take([CLAIM, ClaimRef("ns", "gone", "uid-2")]) == []
    assert protocol._unprepares == [(CLAIM, 1_800_000_000.0)]  # still due
