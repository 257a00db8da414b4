"""A matrix of the page: a row per subtest, a group of columns per run (each headed by the run's
label and verdict), a column per phase of that run.

Columns are keyed by run, never by suite: two runs of one suite (the default pair and the stable
pair) have columns of their own, so a cell holds one outcome and says which pair it was. A row
whose subtest failed (or was interrupted) in any run is red, so a reader scanning the subtests
finds the broken ones without reading every cell. The gate cycle has a table of its own
(:attr:`~._runs.Run.kind`): its subtests each run their own cluster through other phases,
and a row named like an upgrade suite's subtest would mean another test.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from e2e_dra.report._load import Result
from e2e_dra.report._runs import FAILING, Run
from e2e_dra.report._timeline import clock

MARK = {"passed": "✓", "failed": "✗", "xfailed": "\u2298", "skipped": "\u2013", "interrupted": "!"}
EXPLAINED = ("failed", "xfailed", "interrupted")
"""The outcomes whose cell names the step the failure ended and links what explains it (and
that the page's failures list names)."""
NO_COLUMN = "(no phase)"
"""The one column of a run in which no subtest ran (it failed before its first phase)."""

Explain = Callable[[Run, Result], str]
"""What a cell of ``result`` shows below its mark: the failed step and links (HTML)."""


class Matrix:
    """One table of ``runs``; ``explain`` renders what a cell that did not pass links to."""

    def __init__(self, runs: list[Run], explain: Explain) -> None:
        self.runs = runs
        self.explain = explain
        self.columns = [_columns(run) for run in runs]

    def html(self) -> str:
        cells: dict[tuple[str, int, str], list[Result]] = {}
        failing: set[str] = set()
        for index, run in enumerate(self.runs):
            for r in run.record.results:
                if r.subtest is None:
                    continue
                name = _column(r)
                if name in self.columns[index]:
                    cells.setdefault((r.subtest, index, name), []).append(r)
                    if r.outcome in FAILING:
                        failing.add(r.subtest)
        subtests = sorted({subtest for subtest, _, _ in cells})
        if not subtests:
            return "<p>No subtest ran.</p>"
        rows = []
        for subtest in subtests:
            tds = [
                self._cell(self.runs[index], cells.get((subtest, index, name), []))
                for index, columns in enumerate(self.columns)
                for name in columns
            ]
            css = "subtest failed" if subtest in failing else "subtest"
            title = ' title="failed in at least one run"' if subtest in failing else ""
            rows.append(f'<tr><th class="{css}"{title}>{escape(subtest)}</th>{"".join(tds)}</tr>')
        return f'<table class="matrix">{self._head()}{"".join(rows)}</table>'

    def _head(self) -> str:
        runs = "".join(
            f'<th colspan={len(columns)} class="run {run.css}" '
            f'title="{escape(str(run.record.path), quote=True)}">{escape(run.label)}'
            f'<span class="verdict">{escape(run.said)}; '
            f"{clock(run.record.wall_seconds)}</span></th>"
            for run, columns in zip(self.runs, self.columns, strict=True)
        )
        names = "".join(
            f'<th class="column">{escape(name)}</th>'
            for columns in self.columns
            for name in columns
        )
        return f"<tr><th rowspan=2>subtest</th>{runs}</tr><tr>{names}</tr>"

    def _cell(self, run: Run, entries: list[Result]) -> str:
        if not entries:
            return '<td class="cell none"></td>'
        worst = _worst([r.outcome for r in entries])
        marks = " ".join(MARK[r.outcome] for r in entries)
        tip = "\n".join(
            f"{run.label}: {r.outcome}, ran {clock(r.seconds)}"
            + (f": {r.message}" if r.message else "")
            for r in entries
        )
        explained = "".join(self.explain(run, r) for r in entries if r.outcome in EXPLAINED)
        return (
            f'<td class="cell {worst}" title="{escape(tip, quote=True)}">'
            f'<span class="mark">{marks}</span>{explained}</td>'
        )


def _column(result: Result) -> str:
    """The column of a subtest's entry: its phase, or (the gate cycle) its own cluster step."""
    return result.phase or result.step or result.id.rpartition("/")[2]


def _columns(run: Run) -> list[str]:
    """A run's columns in the order they first ran: its phases; in the gate cycle, each
    subtest's own cluster steps too (``bring-up``, ``gate-off``...: a cycle that broke there
    shows where)."""
    results = run.record.results
    if run.kind.cycles_gates:
        names = [_column(r) for r in results if r.subtest is not None]
    else:
        names = [r.phase for r in results if r.phase is not None and r.subtest is not None]
    return list(dict.fromkeys(names)) or [NO_COLUMN]


def _worst(outcomes: list[str]) -> str:
    """The class of a cell of several entries (only a hand-made summary has them): green only
    when every one passed; a skip next to a pass is not a pass."""
    for outcome in ("failed", "interrupted", "xfailed", "skipped", "passed"):
        if outcome in outcomes:
            return outcome
    return "none"
