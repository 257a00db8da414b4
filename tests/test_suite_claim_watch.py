"""The claim watch's own bookkeeping, without a cluster: what it keeps of a claim, and when it says
that it cannot see at all.

Claims go in through :meth:`ClaimWatch.check`, the door the watch and the sweep use. A watch that
never lists talks to a closed local port: nothing answers, as when the API server is gone. Its
real runs (claims of other namespaces, a restarting API server):
``tests/real/test_claim_watch_real.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from unreachable import unreachable_kube

from e2e_dra._suite._nets import ClaimWatch, Finding, WatchHealth, claim_owner
from e2e_dra._suite._oracle import Problem
from e2e_dra.builder import SUBTEST_LABEL
from e2e_dra.kube import Kube

NETS_LOG = "e2e_dra._suite._nets"
DRIVERS = {"admin-access": "defaultadmin-access.k8s.io", "core-dra": "defaultcore-dra.k8s.io"}


def _claim(
    namespace: str, name: str, *, finalizers: list[str] | None = None, labels: dict | None = None
) -> dict:
    """A claim allocated by core-dra's driver, with ``finalizers`` (none by default)."""
    metadata = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "resourceVersion": "7",
        "labels": labels or {},
    }
    if finalizers:
        metadata["finalizers"] = finalizers
    result = {"request": "r", "driver": DRIVERS["core-dra"], "pool": "p", "device": "d"}
    return {"metadata": metadata, "status": {"allocation": {"devices": {"results": [result]}}}}


def _suites_owner(claim: dict) -> str | None:
    return claim_owner(claim, DRIVERS)


def _watch(owner: Callable[[dict], str | None] = _suites_owner) -> ClaimWatch:
    """A watch that is never started: only :meth:`ClaimWatch.check` feeds it (no client used)."""
    return ClaimWatch(None, owner, grace=0)  # type: ignore[arg-type]


def _kept(watch: ClaimWatch) -> list[Finding]:
    """What the watch kept, without the finding of its own blindness (it never listed)."""
    return [f for f in watch.take() if "safety net not working" not in f.message]


# --- what a claim yields --------------------------------------------------------------------------


def test_a_claim_of_another_namespace_is_named_by_its_namespace_and_owned_by_its_label() -> None:
    watch = _watch()
    labelled = "defaultadmin-access-labelled"
    watch.check(_claim(labelled, "admin-claim", labels={SUBTEST_LABEL: "admin-access"}))
    [finding] = _kept(watch)
    assert finding.owner == "admin-access"
    assert finding.message.startswith(
        f"ResourceClaim {labelled}/admin-claim allocated without any finalizer (finalizers [], "
        "resourceVersion 7, seen "
    )


def test_a_claim_is_reported_once_and_a_protected_claim_not_at_all() -> None:
    watch = _watch()
    claim = _claim("default", "c")
    watch.check(claim)
    watch.check(claim)
    watch.check(_claim("default", "safe", finalizers=["resource.kubernetes.io/delete-protection"]))
    assert [f.owner for f in _kept(watch)] == ["core-dra"]  # by the driver that allocated it
    watch.check(claim)
    assert _kept(watch) == []


def test_a_finding_whose_owner_lookup_raised_is_kept_as_nobodys_and_says_why() -> None:
    def broken(claim: dict) -> str | None:
        raise KeyError("drivers")

    watch = _watch(broken)
    watch.check(_claim("other", "c"))
    [finding] = _kept(watch)
    assert finding.owner is None
    assert finding.message.startswith("ResourceClaim other/c allocated without any finalizer")
    assert finding.message.endswith("; its owner lookup failed: KeyError: 'drivers')")
    watch.check(_claim("other", "c"))  # kept once, like any other
    assert _kept(watch) == []


def test_the_oracles_problems_are_findings_of_the_claims_subtest_once_each() -> None:
    watch = _watch()
    claim = _claim("default", "c", finalizers=["resource.kubernetes.io/delete-protection"])
    problem = Problem(claim, "count", "request r asks for 2 device(s) and got 1")
    watch.judged([problem, problem])
    [finding] = _kept(watch)
    assert finding.owner == "core-dra"
    assert finding.message.startswith(
        "allocation oracle, rule 'count': ResourceClaim default/c (allocation seen "
    )
    assert finding.message.endswith("): request r asks for 2 device(s) and got 1")
    watch.judged([problem])
    assert _kept(watch) == []


def test_a_stopped_watch_keeps_nothing_more() -> None:
    watch = _watch()
    watch.stop()
    watch.check(_claim("default", "late"))
    assert watch.take() == []  # and no word of its blindness either: it was told to stop


# --- a watch that never lists ---------------------------------------------------------------------


@pytest.fixture
def nowhere(tmp_path: Path) -> Iterator[Kube]:
    """A client of an API server at a local port that nobody listens on."""
    kube = unreachable_kube(tmp_path)
    yield kube
    kube.close()


def test_a_watch_that_never_listed_says_so_once_with_its_last_error(nowhere: Kube) -> None:
    watch = ClaimWatch(nowhere, lambda claim: None, grace=1.0)
    watch.start()
    try:
        [finding] = watch.take()
        assert finding.owner is None
        assert finding.message.startswith(
            "safety net not working: the ResourceClaim watch has never listed ResourceClaims: "
        )
        assert (
            "attempt(s) failed since " in finding.message
            and ", the last with KubeError: GET /apis/resource.k8s.io/v1/resourceclaims: 0 "
            in finding.message
        )
        assert "Connection refused" in finding.message
        started = time.monotonic()
        assert watch.take() == []  # the same spell: said once, and no second wait
        assert time.monotonic() - started < 0.5
    finally:
        watch.stop()


# --- WatchHealth: when blindness is a finding, and what is logged ---------------------------------


class Clock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failures_the_next_list_repairs_are_no_finding() -> None:
    health = WatchHealth(clock=Clock())
    health.listed()
    for _ in range(5):  # the API server restarts
        health.failed(ConnectionRefusedError("connection refused"))
    health.listed()
    assert health.blind(0) is None


def test_a_watch_that_stops_listing_after_it_worked_says_since_when_once_per_spell() -> None:
    health = WatchHealth(clock=Clock())
    health.listed()
    health.failed(ConnectionRefusedError("connection refused"))
    health.failed(PermissionError("403 Forbidden"))
    said = health.blind(0)
    assert said is not None
    assert said.startswith(
        "safety net not working: the ResourceClaim watch has not listed ResourceClaims since "
    )
    assert ": 2 attempt(s) failed, the last with PermissionError: 403 Forbidden. A claim" in said
    assert health.blind(0) is None  # said once for this spell
    health.listed()
    health.failed(TimeoutError("read timed out"))
    again = health.blind(0)  # a new spell is said again
    assert again is not None and ": 1 attempt(s) failed, the last with TimeoutError" in again


def test_a_watch_whose_first_request_never_came_back_says_so() -> None:
    assert WatchHealth().blind(0) == (
        "safety net not working: the ResourceClaim watch has never listed ResourceClaims: "
        "no answer yet. A claim allocated without a finalizer, or against the API's rules, "
        "meanwhile may have gone unnoticed"
    )


def test_blind_waits_its_grace_for_a_watch_that_recovers() -> None:
    health = WatchHealth()
    health.failed(ConnectionRefusedError("connection refused"))
    threading.Timer(0.1, health.listed).start()
    assert health.blind(5.0) is None


def test_failures_are_logged_as_warnings_only_when_they_last_and_then_rarely(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=NETS_LOG)
    clock = Clock()
    health = WatchHealth(warn_after=30, warn_every=60, clock=clock)

    def warnings_after(seconds: float) -> list[str]:
        clock.now += seconds
        caplog.clear()
        health.failed(ConnectionRefusedError("connection refused"))
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    assert warnings_after(0) == []  # a restart begins: debug only
    assert warnings_after(10) == []
    assert warnings_after(25) == [
        "ResourceClaim watch failing for 35 s (3 attempts): "
        "ConnectionRefusedError: connection refused"
    ]
    assert warnings_after(1) == []  # not at every retry
    assert warnings_after(58) == []
    assert warnings_after(1) == [
        "ResourceClaim watch failing for 95 s (6 attempts): "
        "ConnectionRefusedError: connection refused"
    ]
    caplog.clear()
    clock.now += 5
    health.listed()
    assert [r.getMessage() for r in caplog.records] == [
        "ResourceClaim watch works again after 100 s"
    ]
