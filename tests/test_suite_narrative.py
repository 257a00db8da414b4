"""A suite's narrative: every progress line kept whole under its folder, each phase's also in its
subtest's file, whatever the console showed; and the headlines' own wording."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e_dra._suite._narrative import REPLAYED, Narrative, Narrator, versions_said
from e2e_dra._suite._steps import SubtestPhase
from e2e_dra._suite._together import as_phase_thread, run_together

log = logging.getLogger("e2e_dra.narrative_test")


@pytest.fixture(autouse=True)
def _info_recorded() -> Iterator[None]:
    """Our loggers record INFO, as in a suite's run (the plugin sets that)."""
    ours = logging.getLogger("e2e_dra")
    before = ours.level
    ours.setLevel(logging.INFO)
    yield
    ours.setLevel(before)


def test_phases_run_together_each_keep_their_lines_and_the_suite_all(tmp_path: Path) -> None:
    narrative = Narrative(tmp_path)
    with narrative.attached():
        log.info("cluster step upgrade")
        run_together({name: (lambda n=name: log.info(f"{n} creates a pod")) for name in "ab"})
        logging.getLogger("httpx").info("HTTP Request: not progress")
        logging.getLogger("kubernetes.client").warning("a warning of theirs")

    suite = [line.split("] ", 1)[1] for line in narrative.path.read_text().splitlines()]
    assert len(suite) == 4  # not another library's INFO line
    assert (suite[0], suite[-1]) == ("cluster step upgrade", "a warning of theirs")
    assert sorted(suite[1:3]) == ["a: a creates a pod", "b: b creates a pod"]  # any order
    assert narrative.subtest_path("a").read_text().endswith("] a: a creates a pod\n")
    assert "b creates" not in narrative.subtest_path("a").read_text()
    assert narrative.files() == {
        "log": "console.log",
        "subtests": {"a": "console/a.log", "b": "console/b.log"},
    }


def test_a_replayed_record_and_lines_after_the_suite_are_not_written_again(tmp_path: Path) -> None:
    narrative = Narrative(tmp_path)
    with narrative.attached(), as_phase_thread("a"):
        record = log.makeRecord(log.name, logging.INFO, __file__, 1, "once", None, None)
        log.handle(record)
        setattr(record, REPLAYED, True)
        log.handle(record)
    log.info("after the suite")
    assert narrative.path.read_text().count("once") == 1
    assert "after the suite" not in narrative.path.read_text()
    assert threading.current_thread().name == "MainThread"  # named back


def test_a_narrative_that_cannot_be_written_costs_nothing_but_itself(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    narrative = Narrative(blocked)
    with narrative.attached():
        log.info("nowhere to go")
        log.info("still nowhere")
    assert narrative.files() == {}


@pytest.mark.parametrize(
    ("description", "said"),
    [
        (
            {"current": {"version": "v1.38.0-beta.0"}, "previous": {"version": "v1.37.2"}},
            "v1.37.2 -> v1.38.0-beta.0",
        ),
        (
            {
                "current": {"version": "v1.38.0-beta.0"},
                "previous": {"version": "v1.37.2"},
                "kubelet": {"version": "v1.35.4"},  # kubelet-last's own older kubelet
            },
            "v1.35.4 -> v1.38.0-beta.0",
        ),
        ({"current": {"version": "v1.38.0"}}, "v1.38.0"),
        ({"dry_run": True}, ""),
    ],
)
def test_the_release_pair_a_banner_says(description: dict, said: str) -> None:
    assert versions_said(description) == said


def test_a_batch_is_said_once_its_last_phase_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    pair = "v1.37.2 -> v1.38.0-beta.0"
    narrator = Narrator(
        "upgrade-downgrade", position=2, suites=4, total=5, subtests=2, versions=lambda: pair
    )
    phases = [SubtestPhase("upgrade-downgrade", n, 1, "after-cluster-upgrade") for n in "ab"]
    with caplog.at_level(logging.INFO):
        narrator.begin(phases[0])  # a phase has no line of its own; the banner comes first
        narrator.batch(phases)
        narrator.ended(phases[0], "xfailed", "known Kubernetes bug kubernetes#1; seen as: x")
        said_before_the_last = [r.getMessage() for r in caplog.records]
        narrator.ended(phases[1], "passed")
    lines = [r.getMessage() for r in caplog.records]
    assert said_before_the_last == [
        "[2/4] upgrade-downgrade v1.37.2 -> v1.38.0-beta.0: 2 subtests, 5 tests",
        "[2/4] upgrade-downgrade: known bug seen in a/after-cluster-upgrade: "
        "known Kubernetes bug kubernetes#1; seen as: x",
    ]
    assert lines[-1] == (
        "[2/4] upgrade-downgrade: after-cluster-upgrade: 2 subtests together in 0s: "
        "1 passed, 1 known bug (2/5 done)"
    )
