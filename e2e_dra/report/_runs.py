"""The runs of a report, told apart: a run is one suite's summary, named by its suite (the
variant) and the releases it went through, with its verdict.

A merged report holds several runs of one suite (the default pair and the stable pair, or the
same pair on two machines); a page that keyed its columns by suite alone put their outcomes in
one cell, and nobody could tell which pair failed. Every column, heading and failure of the page
names its run by :attr:`Run.label`, unique within the report.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from e2e_dra.report._load import OUTCOMES, Result, SuiteRecord
from e2e_dra.report._schema import SuiteKind

FAILING = ("failed", "interrupted")
"""The outcomes that make a run, a row or the report fail (an expected failure, ``xfailed``, is
a known Kubernetes bug the subtest declares: it does not)."""
PASSED, FAILED, INTERRUPTED, UNFINISHED = "passed", "failed", "interrupted", "not finished"
VERDICT_CLASS = {
    PASSED: "passed",
    FAILED: "failed",
    INTERRUPTED: "interrupted",
    UNFINISHED: "interrupted",
}
"""The CSS class (the matrix's colours) of each verdict."""
SAID = {"xfailed": "known bugs seen"}
"""An outcome as the page says it, where its name is not plain English: ``xfailed`` is a known
Kubernetes bug the subtest declares, seen as expected."""


@dataclass(frozen=True)
class Run:
    """One suite run as the page names it, and how it ended."""

    record: SuiteRecord
    label: str  # unique in the report: "upgrade-downgrade v1.37.2 → v1.38.0-beta.0"
    pair: str  # the releases: "v1.37.2 → v1.38.0-beta.0", "…, kubelet v1.37.2"; "" if unknown
    verdict: str  # PASSED, FAILED, INTERRUPTED or UNFINISHED
    counts: tuple[tuple[str, int], ...]  # (outcome, how many entries ended so), in OUTCOMES order
    kind: SuiteKind  # upgrade or gate cycle: which table shows it

    @property
    def releases(self) -> str:
        """The pair as the headline names it: the kubelet only when it starts at another release
        than the rest (kubelet-last with ``E2E_DRA_KUBELET_VERSION``), so the variants of one
        pair are named once."""
        record = self.record
        if record.kubelet and record.kubelet == record.previous:
            return pair_of(record).removesuffix(f", kubelet {record.kubelet}")
        return self.pair

    @property
    def css(self) -> str:
        return VERDICT_CLASS[self.verdict]

    @property
    def said(self) -> str:
        """ "failed: 40 passed, 1 failed, 2 known bugs seen, 2 skipped"."""
        counts = ", ".join(f"{n} {SAID.get(outcome, outcome)}" for outcome, n in self.counts)
        return f"{self.verdict}: {counts}" if counts else f"{self.verdict}: nothing ran"

    def count(self, outcome: str) -> int:
        """How many entries of this run ended ``outcome``."""
        return dict(self.counts).get(outcome, 0)

    def ended(self, result: Result) -> float:
        """When ``result`` ended, in seconds since the epoch on the run's own clock (a run
        without a start time counts as starting with the earliest)."""
        started = self.record.started.timestamp() if self.record.started else float("-inf")
        return started + result.start + result.seconds

    def failures(self) -> list[Result]:
        """The entries that failed or were interrupted, in the order they ended."""
        failing = [r for r in self.record.results if r.outcome in FAILING]
        return sorted(failing, key=lambda r: r.start + r.seconds)


def runs_of(records: list[SuiteRecord]) -> list[Run]:
    """A :class:`Run` per record, in the records' order; two runs that would be named alike (one
    pair run twice) get ``#2``, ``#3``... in that order."""
    named = [(_label(r), r) for r in records]
    total = Counter(label for label, _ in named)
    seen: Counter[str] = Counter()
    runs = []
    for label, record in named:
        seen[label] += 1
        if total[label] > 1:
            label = f"{label} #{seen[label]}"
        runs.append(
            Run(
                record=record,
                label=label,
                pair=pair_of(record),
                verdict=_verdict(record),
                counts=_counts(record),
                kind=record.kind,
            )
        )
    return runs


def pair_of(record: SuiteRecord) -> str:
    """The releases a run went through: previous → current (the gate cycle runs the current one
    only), and the kubelet's first release when the suite starts it apart (kubelet-last)."""
    current = record.current if record.current != "unknown" else ""
    if record.kind.cycles_gates or not record.previous:
        pair = current
    else:
        pair = f"{record.previous} → {current or 'unknown'}"
    if record.kubelet:
        pair += f", kubelet {record.kubelet}" if pair else f"kubelet {record.kubelet}"
    return pair


def _label(record: SuiteRecord) -> str:
    """The suite (the variant) and its pair: what tells two runs apart."""
    pair = pair_of(record)
    return f"{record.suite} {pair}" if pair else record.suite


def _verdict(record: SuiteRecord) -> str:
    """Failed when an entry failed; else interrupted, or not finished (cancelled, or still
    running: its summary is rewritten after every entry); else passed."""
    outcomes = {r.outcome for r in record.results}
    if "failed" in outcomes:
        return FAILED
    if "interrupted" in outcomes:
        return INTERRUPTED
    if not record.finished:
        return UNFINISHED
    return PASSED


def _counts(record: SuiteRecord) -> tuple[tuple[str, int], ...]:
    counted = Counter(r.outcome for r in record.results)
    return tuple((outcome, counted[outcome]) for outcome in OUTCOMES if counted[outcome])


def overall(runs: list[Run]) -> str:
    """The report's verdict: the worst of its runs' (failed, interrupted, not finished,
    passed); a report of no run has not finished."""
    verdicts = {run.verdict for run in runs}
    for verdict in (FAILED, INTERRUPTED, UNFINISHED):
        if verdict in verdicts:
            return verdict
    return PASSED if runs else UNFINISHED


def real_failures(runs: list[Run]) -> list[tuple[Run, Result]]:
    """Every entry that failed or was interrupted (never an expected failure: a known bug), the
    one that ended first first, across the runs' clocks; the runs' order breaks ties."""
    found = [
        (run.ended(result), position, index, run, result)
        for position, run in enumerate(runs)
        for index, result in enumerate(run.failures())
    ]
    found.sort(key=lambda f: (f[0], f[1], f[2]))
    return [(run, result) for _, _, _, run, result in found]


def expected_failures(runs: list[Run]) -> list[tuple[Run, Result]]:
    """Every entry a known Kubernetes bug broke as declared (``xfailed``), run by run, in the
    order they ran."""
    return [
        (run, result)
        for run in runs
        for result in sorted(run.record.results, key=lambda r: r.start)
        if result.outcome == "xfailed"
    ]
