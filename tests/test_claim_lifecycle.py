"""The claim lifecycle net: its rules on plain claims and pods, and its patience."""

from __future__ import annotations

from e2e_dra._suite._lifecycle import (
    GRACE,
    POLL,
    PROTECTION,
    RESPITE,
    ClaimLifecycle,
    breaches,
)


def pod(name: str = "p", uid: str = "pu", *, phase: str = "Running", node: str = "n") -> dict:
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def claim(
    *,
    reserved: tuple[tuple[str, str], ...] = (),
    allocated: bool = True,
    owner: tuple[str, str] | None = None,
    deleting: bool = False,
    finalizers: tuple[str, ...] = (PROTECTION,),
) -> dict:
    meta: dict = {"namespace": "ns", "name": "c", "uid": "cu", "finalizers": list(finalizers)}
    meta["labels"] = {"e2e-dra/subtest": "finished-pods"}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner[0],
                "uid": owner[1],
                "controller": True,
            }
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    status: dict = {"reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in reserved]}
    if allocated:
        status["allocation"] = {"devices": {"results": []}}
    return {"metadata": meta, "status": status}


def messages(
    claims: list[dict], pods: list[dict], reserved_once: frozenset[str] = frozenset()
) -> list[str]:
    return [b.message for b in breaches(claims, pods, set(reserved_once))]


def test_a_claim_reserved_for_its_running_pod_is_fine() -> None:
    assert messages([claim(reserved=(("p", "pu"),))], [pod()], frozenset({"cu"})) == []


def test_a_reservation_for_a_pod_that_will_not_run_again_is_a_breach() -> None:
    reserved = [claim(reserved=(("p", "pu"),))]
    assert messages(reserved, []) == [
        "ResourceClaim ns/c is still reserved for pod p, which is gone"
    ]
    (replaced,) = messages(reserved, [pod(uid="other")])
    assert "was replaced (uid pu is now other)" in replaced
    assert messages(reserved, [pod(phase="Succeeded")]) == [
        "ResourceClaim ns/c is still reserved for pod p, which has finished (Succeeded)"
    ]
    unscheduled = pod(node="")
    unscheduled["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    assert "deleted before it was scheduled" in messages(reserved, [unscheduled])[0]
    terminating = pod()
    terminating["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    assert messages(reserved, [terminating]) == []  # its kubelet still has to stop it


def test_a_claim_whose_last_pod_went_must_be_deallocated_once_it_was_reserved() -> None:
    unreserved = [claim()]
    assert messages(unreserved, []) == []  # never seen reserved: not unused yet
    (breach,) = messages(unreserved, [], frozenset({"cu"}))
    assert "is still allocated, although no pod uses it any more" in breach
    assert messages([claim(allocated=False)], [], frozenset({"cu"})) == []


def test_a_generated_claim_goes_with_its_pod() -> None:
    made = [claim(allocated=False, owner=("p", "pu"))]
    assert messages(made, [pod()]) == []
    assert messages(made, [pod(phase="Failed")]) == [
        "ResourceClaim ns/c was made for pod p, which has finished (Failed), and is still there"
    ]
    assert "which is gone" in messages(made, [])[0]
    in_use = [claim(owner=("p", "pu"), reserved=(("p", "pu"),))]
    assert messages(in_use, [pod()], frozenset({"cu"})) == []


def test_a_deleted_claim_loses_the_allocators_finalizer_but_may_keep_others() -> None:
    (breach,) = messages([claim(allocated=False, deleting=True)], [])
    assert (
        "is being deleted (since 2026-12-07T10:00:00Z), no pod uses it, and it still has the "
        f"finalizer {PROTECTION}" in breach
    )
    held = claim(allocated=False, deleting=True, finalizers=("example.com/mine",))
    assert messages([held], []) == []
    still_used = claim(deleting=True, reserved=(("p", "pu"),))
    assert messages([still_used], [pod()]) == []


def test_podgroup_reservations_are_not_judged() -> None:
    grouped = claim()
    grouped["status"]["reservedFor"] = [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "gu"}
    ]
    assert messages([grouped], [], frozenset({"cu"})) == []


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_breach_that_mends_within_the_grace_is_no_finding() -> None:
    clock = Clock()
    net = ClaimLifecycle(lambda c: "finished-pods", clock=clock, sleep=clock.sleep)
    stuck: tuple[list[dict], list[dict]] = ([claim(reserved=(("p", "pu"),))], [])
    mended: tuple[list[dict], list[dict]] = ([claim(allocated=False)], [])
    looks = iter([stuck] * 3 + [mended])
    assert net.judge(lambda: next(looks)) == []
    assert clock.now == 3 * POLL  # it waited for the controller, and no longer


def test_a_breach_that_lasts_is_said_once_with_its_owner_after_the_grace() -> None:
    clock = Clock()
    net = ClaimLifecycle(lambda c: "finished-pods", clock=clock, sleep=clock.sleep)
    stuck = ([claim(reserved=(("p", "pu"),))], [pod(phase="Succeeded")])
    (finding,) = net.judge(lambda: stuck)
    assert finding.owner == "finished-pods"
    assert finding.message.startswith("claim lifecycle: ResourceClaim ns/c is still reserved")
    assert f"({GRACE:.0f}s after it was first seen)" in finding.message
    assert GRACE <= clock.now < GRACE + 2 * POLL
    waited = clock.now
    clock.now += RESPITE
    assert net.judge(lambda: stuck) == []  # said once; and no more waiting for it
    assert clock.now == waited + RESPITE


def test_the_watch_tells_it_which_claims_were_reserved() -> None:
    clock = Clock()
    net = ClaimLifecycle(lambda c: None, clock=clock, sleep=clock.sleep)
    net.seen(claim(reserved=(("p", "pu"),)))
    (finding,) = net.judge(lambda: ([claim()], []))
    assert "is still allocated, although no pod uses it any more" in finding.message


def test_phases_ending_together_are_judged_once() -> None:
    clock = Clock()
    net = ClaimLifecycle(lambda c: None, clock=clock, sleep=clock.sleep)
    looked: list[float] = []

    def look() -> tuple[list[dict], list[dict]]:
        looked.append(clock.now)
        return [], []

    for _ in range(3):
        net.judge(look)
        clock.now += 1.0
    assert looked == [0.0]
    clock.now = RESPITE + 0.5
    net.judge(look)
    assert looked == [0.0, RESPITE + 0.5]
