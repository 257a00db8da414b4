"""The disruption net's second look: pods found untouched right after a step, looked at again
once the phases after it ran (plain pods as the API lists them)."""

from __future__ import annotations

from e2e_dra._suite._disruption import Container, PodRecord, restarted_since
from e2e_dra.builder import DISRUPTION_ANNOTATION


def pod(*, uid: str = "u1", cid: str = "c-1", restarts: int = 0, started: str = "t0") -> dict:
    return {
        "metadata": {"namespace": "ns", "name": "p", "uid": uid},
        "status": {
            "containerStatuses": [
                {
                    "name": "main",
                    "containerID": cid,
                    "restartCount": restarts,
                    "state": {"running": {"startedAt": started}},
                }
            ]
        },
    }


RECORD = PodRecord("ns", "p", "u1", "core-dra", {"main": Container("c-1", 0, "t0", "marker")})


def test_a_pod_still_running_its_containers_is_fine() -> None:
    assert restarted_since([RECORD], [pod()], "upgrade") == []


def test_a_container_restarted_since_the_step_is_a_finding_of_its_subtest() -> None:
    (finding,) = restarted_since([RECORD], [pod(cid="c-2", restarts=1, started="t9")], "upgrade")
    assert finding.owner == "core-dra"
    assert finding.message.startswith("pod ns/p of core-dra, untouched right after the upgrade,")
    assert "{'main': (('c-1', 0, 't0'), ('c-2', 1, 't9'))}" in finding.message


def test_a_container_that_stopped_is_a_finding() -> None:
    stopped = pod()
    stopped["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 137}}
    assert len(restarted_since([RECORD], [stopped], "upgrade")) == 1


def test_pods_their_subtests_let_go_are_no_finding() -> None:
    assert restarted_since([RECORD], [], "upgrade") == []  # deleted
    assert restarted_since([RECORD], [pod(uid="u2", cid="c-9")], "upgrade") == []  # made again
    going = pod(cid="c-2")
    going["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    assert restarted_since([RECORD], [going], "upgrade") == []
    expected = pod(cid="c-2")
    expected["metadata"]["annotations"] = {DISRUPTION_ANNOTATION: "deleted while kubelet down"}
    assert restarted_since([RECORD], [expected], "upgrade") == []
