"""The kubelet's side of the kubelet plugin API, as the test driver judges it (pure rules; the
driver's reading of the API server is exercised on a real cluster)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from e2e_dra.driver._node_service import ClaimRef
from e2e_dra.driver._protocol import (
    KubeletProtocol,
    prepare_problems,
    ran_after,
    still_running_with,
)

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
    protocol = KubeletProtocol(NODE, Kube(closed), lambda: True, lambda: now[0], start=_now)
    protocol.unprepare_asked(CLAIM)  # its look at the pods cannot be done: left for the take
    now[0] += SETTLE + 1

    assert protocol.take([CLAIM, ClaimRef("ns", "gone", "uid-2")]) == []
    assert protocol._unprepares == [(CLAIM, 1_800_000_000.0)]  # still due


def _protocol_at(now: list[float], sleep: Callable[[float], None]) -> KubeletProtocol:
    """A protocol whose clock is ``now[0]`` and whose API server is not there: the rules that
    need no reading are driven directly."""
    from kubernetes import client

    from e2e_dra.kube import Kube

    closed = client.Configuration()
    closed.host = "https://127.0.0.1:9"
    closed.retries = 0
    return KubeletProtocol(NODE, Kube(closed), lambda: True, lambda: now[0], sleep)


def test_a_gone_claim_the_kubelet_is_about_to_unprepare_is_waited_for_not_said() -> None:
    """At a phase's end the kubelet may be a moment from its call: the look waits for it and
    stops waiting as soon as it came."""
    now = [1_800_000_000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds
        if len(slept) == 3:
            protocol.unprepare_asked(CLAIM)

    protocol = _protocol_at(now, sleep)
    protocol._gone_since[CLAIM.uid] = now[0]

    assert protocol._leaked([CLAIM]) == []
    assert len(slept) == 3


def test_a_gone_claim_never_unprepared_is_said_once_after_the_grace() -> None:
    from e2e_dra.driver._protocol import LEAK_AFTER

    now = [1_800_000_000.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    protocol = _protocol_at(now, sleep)
    protocol._gone_since[CLAIM.uid] = now[0] - 10  # seen gone at the phase before's end

    found = protocol._leaked([CLAIM])

    assert found == [
        f"ResourceClaim ns/c (uid-1) is gone from the API server since at least "
        f"{LEAK_AFTER:.0f}s, but the kubelet of node {NODE} never asked to unprepare it: it "
        "stays prepared"
    ]
    assert now[0] == 1_800_000_000.0 - 10 + LEAK_AFTER  # waited the grace out, no longer
    assert protocol._leaked([CLAIM]) == []


def _now(look: Callable[[], None]) -> None:
    look()


AT = 1_800_000_000.0  # the unprepare call, epoch seconds


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_now(state: dict, deleted: float | None = None) -> dict:
    meta: dict = {"name": "p"}
    if deleted is not None:
        meta["deletionTimestamp"] = _stamp(deleted)
    return {"metadata": meta, "status": {"containerStatuses": [{"state": state}]}}


def test_a_pod_that_ran_at_the_unprepare_and_on_after_it_is_named() -> None:
    """A pod that ran with the claim when the kubelet gave it up: still running, deleted or
    ended after the call, or gone seconds later (so deleted after it) ran without its claim."""
    running = {"running": {"startedAt": _stamp(AT - 60)}}
    assert ran_after(["p"], {"p": _pod_now(running)}, AT) == ["p"]
    assert ran_after(["p"], {"p": _pod_now(running, deleted=AT + 3)}, AT) == ["p"]
    ended_after = {"terminated": {"finishedAt": _stamp(AT + 3)}}
    assert ran_after(["p"], {"p": _pod_now(ended_after)}, AT) == ["p"]
    assert ran_after(["p"], {}, AT) == ["p"]


def test_a_pod_deleted_or_ended_by_the_unprepare_did_not_run_on() -> None:
    """The kubelet unprepares a pod's claim as the pod ends: its deletion or its containers' end
    at the call (whole seconds) is no finding, although its status said so a moment later."""
    running = {"running": {"startedAt": _stamp(AT - 60)}}
    assert ran_after(["p"], {"p": _pod_now(running, deleted=AT - 1)}, AT) == []
    assert ran_after(["p"], {"p": _pod_now(running, deleted=AT)}, AT) == []
    ended = {"terminated": {"finishedAt": _stamp(AT)}}
    assert ran_after(["p"], {"p": _pod_now(ended)}, AT) == []
    assert ran_after(["p"], {"p": _pod_now({"waiting": {}})}, AT) == []


def test_a_phase_end_waits_for_the_looks_of_its_unprepares() -> None:
    """What a look started by an unprepare sees belongs to the phase it happened in: the take
    at the phase's end waits for the looks still going (here one that could not read the pods
    and leaves its claim to the take)."""
    import threading
    import time

    now = [AT]

    def later(look: Callable[[], None]) -> None:
        threading.Thread(target=lambda: (time.sleep(0.5), look())).start()

    protocol = _protocol_at(now, lambda seconds: None)
    protocol._start = later
    protocol.unprepare_asked(CLAIM)

    assert protocol.take([]) == []
    assert protocol._unprepares == [(CLAIM, AT)]
