"""Which test a safety net's finding fails, without a cluster.

The findings come in through the seam the backend uses for the drivers' dropped fields
(``Findings(more=...)``); no claim watch runs. Their real runs: ``tests/real/test_nets_real.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e_dra._suite import SUITES, UPGRADE_DOWNGRADE, Entry, SubtestPhase
from e2e_dra._suite._cluster import RealCluster
from e2e_dra._suite._findings import Findings
from e2e_dra._suite._nets import Finding, claim_owner
from e2e_dra._suite._steps import Cleanup
from e2e_dra.builder import SUBTEST_LABEL, SubtestObjects

FIRST, SECOND = "after-cluster-creation", "after-cluster-upgrade"


def _phase(subtest: str, phase: str = FIRST) -> SubtestPhase:
    return SubtestPhase(UPGRADE_DOWNGRADE, subtest, 0, phase)


def _step(step: str) -> Entry:
    """The plan's cluster step of that name."""
    plan = SUITES[UPGRADE_DOWNGRADE].plan([], 1)
    return next(s for s in plan if s.id == step)


class Nets:
    """What the nets find by the end of the next entry (``found``), through the backend's seam."""

    def __init__(self) -> None:
        self.found: list[Finding] = []
        self.findings = Findings(self._take)

    def _take(self) -> list[Finding]:
        found, self.found = self.found, []
        return found

    def after(self, entry: Entry, *found: Finding) -> list[str]:
        self.found += found
        return self.findings.checks(entry)


def test_a_finding_of_the_subtest_whose_phase_ended_fails_that_phase() -> None:
    nets = Nets()
    assert nets.after(_phase("a"), Finding("a", "claim x allocated without any finalizer")) == [
        f"claim x allocated without any finalizer [subtest 'a'; seen during phase '{FIRST}']"
    ]
    assert nets.after(_phase("a", SECOND)) == []  # reported once


def test_a_finding_of_another_subtest_waits_for_that_subtests_next_phase() -> None:
    nets = Nets()
    assert nets.after(_phase("a"), Finding("b", "driver y dropped fields")) == []
    assert nets.after(_step("upgrade"), Finding("b", "claim z allocated")) == []
    assert nets.after(_phase("c", SECOND)) == []
    assert nets.after(_phase("b", SECOND)) == [
        f"driver y dropped fields [subtest 'b'; seen during phase '{FIRST}']",
        "claim z allocated [subtest 'b'; seen during cluster step 'upgrade']",
    ]


def test_a_finding_of_nobody_fails_the_entry_at_hand() -> None:
    nets = Nets()
    assert nets.after(_step("upgrade"), Finding(None, "claim q allocated")) == [
        "claim q allocated [no known subtest; seen during cluster step 'upgrade']"
    ]


def test_the_cleanup_step_reports_what_still_waits_by_subtest() -> None:
    nets = Nets()
    nets.after(_step("bring-up"), Finding("b", "two"), Finding("a", "one"))
    assert nets.after(Cleanup(suite=UPGRADE_DOWNGRADE)) == [
        "one [subtest 'a'; seen during cluster step 'bring-up']",
        "two [subtest 'b'; seen during cluster step 'bring-up']",
    ]
    assert nets.findings.still_waiting() is None


def test_what_the_cleanup_finds_fails_it_as_one_safety_net_error() -> None:
    nets = Nets()
    nets.after(_phase("a"), Finding("b", "dropped earlier"))
    nets.findings.hold([Finding("b", "dropped at the end"), Finding(None, "claim w allocated")])
    waiting = nets.findings.still_waiting()
    assert isinstance(waiting, AssertionError)
    assert str(waiting).splitlines() == [
        "safety net:",
        "claim w allocated [no known subtest; seen during the cleanup]",
        f"dropped earlier [subtest 'b'; seen during phase '{FIRST}']",
        "dropped at the end [subtest 'b'; seen during the cleanup]",
    ]
    assert nets.findings.still_waiting() is None


def test_a_backend_without_a_cluster_fails_its_cleanup_with_what_waits_once(
    tmp_path: Path,
) -> None:
    backend = RealCluster(SUITES[UPGRADE_DOWNGRADE], {}, tmp_path)
    backend.findings.route(_phase("a"), [Finding("b", "claim x allocated")])
    with pytest.raises(AssertionError) as raised:
        backend.close()
    assert str(raised.value) == (
        f"safety net:\nclaim x allocated [subtest 'b'; seen during phase '{FIRST}']"
    )
    backend.close()  # nothing left: a second cleanup passes


# --- whose claim: claim_owner ---------------------------------------------------------------------

DRIVERS = {
    "extended-resource": "defaultextended-resource.k8s.io",
    "extended-resource-explicit": "defaultextended-resource-explicit.k8s.io",
    "core-dra": "defaultcore-dra.k8s.io",
}


def _allocated(claim: dict, driver: str) -> dict:
    result = {"request": "r", "driver": driver, "pool": "p", "device": "d"}
    return {**claim, "status": {"allocation": {"devices": {"results": [result]}}}}


def test_a_claim_belongs_to_the_subtest_its_label_names() -> None:
    claim = SubtestObjects("core-dra", suite="upgrade-downgrade").builder(None).external_claim()  # type: ignore[arg-type]
    assert claim["metadata"]["labels"][SUBTEST_LABEL] == "core-dra"
    assert claim_owner(claim, DRIVERS) == "core-dra"
    # The label wins over the driver that allocated it.
    assert claim_owner(_allocated(claim, DRIVERS["extended-resource"]), DRIVERS) == "core-dra"


def test_a_name_that_contains_another_subtests_name_does_not_decide() -> None:
    """``external-claimextended-resource-explicit`` contains "extended-resource": the label, not
    the name, says whose it is; without a label or an allocation it is nobody's."""
    b = SubtestObjects("extended-resource", suite="feature-gate-cycle").builder(None)  # type: ignore[arg-type]
    claim = b.external_claim()
    claim["metadata"]["name"] = "external-claimextended-resource-explicit"
    claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "core-dra-class"
    assert claim_owner(claim, DRIVERS) == "extended-resource"
    del claim["metadata"]["labels"]
    assert claim_owner(claim, DRIVERS) is None


def test_a_claim_without_the_label_belongs_to_the_driver_that_allocated_it() -> None:
    special = {"metadata": {"name": "tester-extended-resource-explicit-1-x"}}  # the scheduler's
    allocated = _allocated(special, DRIVERS["extended-resource-explicit"])
    assert claim_owner(allocated, DRIVERS) == "extended-resource-explicit"
    assert claim_owner(_allocated(special, "someone-else.k8s.io"), DRIVERS) is None
    # A label naming no subtest of this run counts for nothing.
    foreign = {"metadata": {"labels": {SUBTEST_LABEL: "gone"}}}
    assert claim_owner(_allocated(foreign, DRIVERS["core-dra"]), DRIVERS) == "core-dra"
