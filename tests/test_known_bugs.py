"""The known-bug verdicts on plain values: no pytest plugin run, no cluster.

:class:`KnownBugs` says which declared bug should break an entry on the releases running now, and
whether a failure is that bug. The plugin runs in ``tests/test_suite_plugin.py`` show the same
rules end to end; here each rule is one call, so a broken rule names itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from e2e_dra._suite import SUITES, UPGRADE_DOWNGRADE, Entry, SubtestPhase
from e2e_dra._suite._knownbugs import NET_NOTE, Expected, KnownBugs
from e2e_dra.subtest import KnownBug, Subtest

DOWN = "after-cluster-downgrade"
BUGGY = {"kube-scheduler": "v1.36.2"}
SAID = "known Kubernetes bug kubernetes#139651 (kube-scheduler v1.36.2): breaks the phase"


BUG = KnownBug(
    issue=139651,
    component="kube-scheduler",
    releases=">=1.36.0,<1.36.3",
    phase=DOWN,
    what="breaks the phase",
    sign="scheduler broke it",
)


def _bug(**changes: Any) -> KnownBug:
    """``BUG`` with other fields (checked again, as a declaration is)."""
    return dataclasses.replace(BUG, **changes)


def _subtest(name: str, *bugs: KnownBug) -> Subtest:
    return Subtest(name=name, initial=lambda ctx: None, known_bugs=bugs)


def _phase(subtest: str = "delta", phase: str = DOWN) -> SubtestPhase:
    return SubtestPhase(UPGRADE_DOWNGRADE, subtest, 1, phase)


def _step(name: str) -> Entry:
    """The plan's cluster step of that name."""
    return next(s for s in SUITES[UPGRADE_DOWNGRADE].plan([], 1) if s.id == name)


def _bugs(*subtests: Subtest) -> KnownBugs:
    return KnownBugs({s.name: s for s in subtests}, [s.name for s in subtests])


def _expected(bug: KnownBug | None = None, owner: str = "delta") -> Expected:
    """The bug ``delta`` declares, as expected on the buggy releases."""
    bugs = _bugs(_subtest(owner, bug or BUG))
    known = bugs.expected(_phase(owner), lambda: BUGGY)
    assert known is not None
    return known


def _failure(text: str, *notes: str) -> AssertionError:
    exc = AssertionError(text)
    for note in notes:
        exc.add_note(note)
    return exc


def test_a_failure_showing_the_sign_on_the_bugs_releases_is_that_bug() -> None:
    known = _expected()
    assert known.owner == "delta"
    assert known.said.startswith(SAID)

    verdict = KnownBugs.judge(known, _failure("pod x: scheduler broke it, twice"))

    assert verdict.expected and verdict.showed
    assert verdict.known is known
    assert verdict.seen == "pod x: scheduler broke it, twice"
    assert verdict.message == f"{known.said}; seen as: pod x: scheduler broke it, twice"


def test_the_sign_is_also_looked_for_in_the_notes_and_the_lines_collected() -> None:
    known = _expected()

    in_a_note = KnownBugs.judge(known, _failure("boom", "e2e-dra: scheduler broke it"))
    collected = KnownBugs.judge(known, _failure("boom"), ["e2e-dra: scheduler broke it"])

    assert in_a_note.expected and collected.expected
    assert in_a_note.message.endswith("; seen as: scheduler broke it")  # without "e2e-dra: "


def test_a_failure_without_the_sign_on_the_bugs_releases_is_a_failure_of_its_own() -> None:
    known = _expected()

    verdict = KnownBugs.judge(known, _failure("the claim was never allocated\nmore"))

    assert not verdict.expected and not verdict.showed
    assert verdict.message == "AssertionError: the claim was never allocated"
    assert "does not show its sign ('scheduler broke it')" in known.not_this()


def test_a_net_finding_the_sign_covers_stays_the_expected_bug() -> None:
    known = _expected(_bug(sign="scheduler broke it|rule 'constraints'"))
    failure = _failure("scheduler broke it", f"{NET_NOTE}rule 'constraints': claim z repeats")

    verdict = KnownBugs.judge(known, failure)

    assert verdict.expected
    assert verdict.beyond == ()


def test_a_net_finding_the_sign_does_not_cover_fails_the_phase_naming_both() -> None:
    known = _expected()
    failure = _failure(
        "scheduler broke it", f"{NET_NOTE}claim z allocated without any finalizer", "other note"
    )

    verdict = KnownBugs.judge(known, failure)

    assert not verdict.expected
    assert verdict.showed  # the bug showed too: what it acts on is still contained
    assert verdict.beyond == ("claim z allocated without any finalizer",)
    assert verdict.message == (
        f"safety net: claim z allocated without any finalizer (beside {known.said}, which showed)"
    )


def test_a_net_finding_without_the_bugs_sign_is_a_plain_failure() -> None:
    known = _expected()
    failure = _failure("timed out", f"{NET_NOTE}claim z allocated without any finalizer")

    verdict = KnownBugs.judge(known, failure)

    assert not verdict.expected and not verdict.showed
    assert verdict.message == "AssertionError: timed out"


@pytest.mark.parametrize(
    "releases",
    [{"kube-scheduler": "v1.36.3"}, {"kube-scheduler": "v1.35.9"}, {"kubelet": "v1.36.2"}, {}],
    ids=["fixed", "older", "component-not-told", "nothing-told"],
)
def test_a_bug_declared_for_other_releases_does_not_apply(releases: dict[str, str]) -> None:
    bugs = _bugs(_subtest("delta", _bug()))

    assert bugs.expected(_phase(), lambda: releases) is None
    assert bugs.expected(_phase(), lambda: BUGGY) is not None


def test_a_bug_of_one_phase_does_not_apply_to_another_nor_to_another_subtest() -> None:
    bugs = _bugs(_subtest("delta", _bug()), _subtest("echo"))

    assert bugs.expected(_phase(phase="after-cluster-upgrade"), lambda: BUGGY) is None
    assert bugs.expected(_phase("echo"), lambda: BUGGY) is None


def test_without_a_declaring_subtest_the_releases_are_not_asked() -> None:
    """Telling the releases may ask the cluster: only a declared bug is worth it."""

    def never() -> Mapping[str, str]:
        raise AssertionError("asked for the releases")

    bugs = _bugs(_subtest("echo"))

    assert bugs.expected(_phase("echo"), never) is None
    assert bugs.expected(_step("downgrade"), never) is None


def test_during_limits_the_bug_to_failures_of_its_step_of_the_phase() -> None:
    known = _expected(_bug(during="wait for the pod"))
    failure = _failure("scheduler broke it")

    in_its_step = KnownBugs.judge(known, failure, step="wait for the pod to run")
    elsewhere = KnownBugs.judge(known, failure, step="create the claim")
    outside_every_step = KnownBugs.judge(known, failure)

    assert in_its_step.expected
    assert in_its_step.message.startswith("in step 'wait for the pod to run': " + known.said)
    assert not elsewhere.expected and not elsewhere.showed
    assert elsewhere.message == "in step 'create the claim': AssertionError: scheduler broke it"
    assert not outside_every_step.expected
    assert "in a step named with 'wait for the pod'" in known.not_this()


def test_without_during_a_failure_of_any_step_can_be_the_bug() -> None:
    verdict = KnownBugs.judge(_expected(), _failure("scheduler broke it"), step="any step")

    assert verdict.expected
    assert verdict.step == "any step"


def test_a_bug_of_a_cluster_step_is_declared_by_a_subtest_whose_chain_goes_on() -> None:
    bugs = _bugs(_subtest("delta", _bug(phase=None, step="downgrade")), _subtest("echo"))

    known = bugs.expected(_step("downgrade"), lambda: BUGGY)

    assert known is not None and known.owner == "delta"
    assert bugs.expected(_step("upgrade"), lambda: BUGGY) is None
    assert bugs.expected(_step("downgrade"), lambda: BUGGY, ended={"delta"}) is None
    assert bugs.expected(_step("cleanup"), lambda: BUGGY) is None  # it always runs


def test_no_bug_and_a_failure_that_cannot_be_one_give_the_failure_as_it_is() -> None:
    verdict = KnownBugs.judge(None, _failure("scheduler broke it"), step="s")

    assert not verdict.expected and not verdict.showed
    assert verdict.message == "in step 's': AssertionError: scheduler broke it"


def test_a_bug_that_should_have_broken_a_passing_entry_says_the_declaration_must_change() -> None:
    said = _expected().not_seen("phase 'after-cluster-downgrade'")

    assert said.startswith(f"{SAID} (https://")
    assert "should have broken phase 'after-cluster-downgrade', and it passed" in said
