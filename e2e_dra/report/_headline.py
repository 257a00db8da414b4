"""The top of the page: what a reader opening the report asks first, answered before the matrix.
Did it pass? Which releases? With which seed (to run it again)? How long did it take? And, when
it failed, where it failed first (suite run, subtest, phase, the step that broke, the message)
with the files that explain it; below it, what the summaries record of where it ran.

Only what the summaries hold is shown: the machine, e2e-dra's and Python's versions and the Go
that built each release since summaries record them, and a fact no summary records (one written
by an older e2e-dra) is left out, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html import escape

from e2e_dra.report._load import OUTCOMES, Result
from e2e_dra.report._runs import SAID, VERDICT_CLASS, Run, overall, real_failures
from e2e_dra.report._timeline import clock

MESSAGE_SHOWN = 600
"""Characters of the first failure's message the headline shows; the failures list has it all."""


@dataclass(frozen=True)
class FirstFailure:
    """The entry that failed (or was interrupted) first, and its run."""

    run: Run
    result: Result

    @property
    def where(self) -> tuple[tuple[str, str], ...]:
        """(what, value) naming it: the run, the subtest, the phase or cluster step, the step."""
        r = self.result
        found = [("run", self.run.label)]
        if r.subtest:
            found.append(("subtest", r.subtest))
        if r.phase:
            found.append(("phase", r.phase))
        else:
            found.append(("cluster step", r.step or r.id))
        if r.failed_step:
            found.append(("failing step", r.failed_step))
        return tuple(found)

    @property
    def message(self) -> str:
        text = self.result.message
        return text if len(text) <= MESSAGE_SHOWN else text[: MESSAGE_SHOWN - 1] + "…"


@dataclass(frozen=True)
class Headline:
    """The report's verdict, pairs, seeds, wall time, first failure and environment."""

    verdict: str
    pairs: tuple[str, ...]
    seeds: tuple[str, ...]
    wall_seconds: float
    spanned: bool  # the wall time runs from the first run's start to the last one's end
    first: FirstFailure | None
    environment: tuple[tuple[str, str], ...]  # (what, the values the runs recorded)
    runs: int
    known_bugs: int = 0  # entries that failed on a known Kubernetes bug, as declared (xfailed)
    failed: int = 0  # entries that really failed, in all runs
    interrupted: int = 0

    @classmethod
    def of(cls, runs: list[Run]) -> Headline:
        wall, spanned = _wall(runs)
        return cls(
            verdict=overall(runs),
            pairs=_pairs(runs),
            seeds=_distinct(run.record.seed for run in runs if run.record.seed is not None),
            wall_seconds=wall,
            spanned=spanned,
            first=_first_failure(runs),
            environment=_environment(runs),
            runs=len(runs),
            known_bugs=sum(run.count("xfailed") for run in runs),
            failed=sum(run.count("failed") for run in runs),
            interrupted=sum(run.count("interrupted") for run in runs),
        )


def _distinct(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def _pairs(runs: list[Run]) -> tuple[str, ...]:
    """The pairs of the upgrade suites, each once; a gate cycle's release only when no upgrade
    suite ran it (it is the current release of their pair otherwise)."""
    pairs = _distinct(run.releases for run in runs if run.releases and not run.kind.cycles_gates)
    currents = {run.record.current for run in runs if not run.kind.cycles_gates}
    alone = _distinct(
        run.releases for run in runs if run.kind.cycles_gates and run.record.current not in currents
    )
    return (*pairs, *alone)


def _wall(runs: list[Run]) -> tuple[float, bool]:
    """From the first run's start to the last one's end when every run says when it started
    (runs of several machines overlap: their sum would overstate it); else their sum."""
    spans = []
    for run in runs:
        started = run.record.started
        if started is None:
            return sum(r.record.wall_seconds for r in runs), False
        spans.append((started.timestamp(), started.timestamp() + run.record.wall_seconds))
    if not spans:
        return 0.0, False
    return max(end for _, end in spans) - min(start for start, _ in spans), True


def _first_failure(runs: list[Run]) -> FirstFailure | None:
    """The real failure (failed or interrupted, never a known bug's expected one) that ended
    first, on the runs' own clocks (a run without a start time counts as starting with the
    earliest)."""
    found = real_failures(runs)
    return FirstFailure(*found[0]) if found else None


def _environment(runs: list[Run]) -> tuple[tuple[str, str], ...]:
    """(what, the values the runs recorded, each once) of every fact some summary records."""
    values: dict[str, dict[str, None]] = {}
    for run in runs:
        for what, value in (*run.record.environment, *run.record.drivers):
            values.setdefault(what, {})[value] = None
    return tuple((what, "; ".join(found)) for what, found in values.items())


Links = Callable[[Run, Result], str]
"""The links (HTML) to what explains a failing entry, with their file names."""


def headline_html(headline: Headline, links: Links) -> str:
    """The headline as HTML, every text from a summary escaped."""
    css = VERDICT_CLASS[headline.verdict]
    wall = clock(headline.wall_seconds)
    wall += " (first start to last end)" if headline.spanned and headline.runs > 1 else ""
    facts = [f"<span><b>{headline.runs}</b> run(s)</span>", f"<span>wall time <b>{wall}</b></span>"]
    if headline.pairs:
        said = "; ".join(escape(p) for p in headline.pairs)
        facts.append(
            f"<span>{'pair' if len(headline.pairs) == 1 else 'pairs'} <b>{said}</b></span>"
        )
    if headline.seeds:
        said = ", ".join(escape(s) for s in headline.seeds)
        facts.append(
            f"<span>{'seed' if len(headline.seeds) == 1 else 'seeds'} <b>{said}</b></span>"
        )
    parts = [
        f'<div class="headline {css}"><p class="verdict">{_verdict_said(headline)}</p>',
        f'<p class="facts">{"".join(facts)}</p>',
    ]
    if headline.first is not None:
        parts.append(_first_failure_html(headline.first, links))
    parts.append("</div>")
    return "\n".join(parts)


def environment_html(headline: Headline) -> str:
    """What the summaries record of where the runs ran, folded: it matters once a failure is
    understood, not while a reader looks for it."""
    if not headline.environment:
        return ""
    rows = "".join(
        f"<tr><th>{escape(what)}</th><td>{escape(value)}</td></tr>"
        for what, value in headline.environment
    )
    return (
        '<details class="environment"><summary>Environment</summary>'
        f'<table class="environment">{rows}</table></details>'
    )


def _verdict_said(headline: Headline) -> str:
    """The verdict in capitals, the first thing a reader sees, then how many entries really
    failed (or were interrupted) before anything else is counted; known Kubernetes bugs seen are
    said apart, so that their entries below do not read as failures."""
    said = escape(headline.verdict.upper())
    real = [(headline.failed, "failed"), (headline.interrupted, "interrupted")]
    if any(n for n, _ in real):
        said += ": " + ", ".join(f"{n} {what}" for n, what in real if n)
    if headline.known_bugs:
        said += (
            f' <span class="known">({headline.known_bugs} known Kubernetes bug(s) seen, as '
            "expected: not failures)</span>"
        )
    return said


RunCells = Callable[[Run], str]
"""The cells (HTML) a run's row of the counts table ends with: its artifacts' size, its summary."""


def counts_html(runs: list[Run], label: Callable[[Run], str], cells: RunCells, total: str) -> str:
    """Per run and in all: the verdict and how many entries passed, failed, failed on a known
    Kubernetes bug (``xfailed``), were skipped (and interrupted, when one was), how long the run
    ran, then ``cells`` (the last row's: ``total``). ``label``: a run's name as HTML (a link to
    its section)."""
    shown = [o for o in OUTCOMES if o != "interrupted" or any(r.count(o) for r in runs)]
    head = "".join(f"<th>{escape(SAID.get(o, o))}</th>" for o in shown)
    rows = []
    for run in runs:
        numbers = "".join(_count_cell(o, run.count(o)) for o in shown)
        rows.append(
            f'<tr><td>{label(run)}</td><td class="verdict-{run.css}">{escape(run.verdict)}</td>'
            f"{numbers}<td>ran {clock(run.record.wall_seconds)}</td>{cells(run)}</tr>"
        )
    if len(runs) > 1:
        numbers = "".join(_count_cell(o, sum(r.count(o) for r in runs)) for o in shown)
        verdict = overall(runs)
        rows.append(
            f'<tr class="all"><th>all {len(runs)} runs</th>'
            f'<td class="verdict-{VERDICT_CLASS[verdict]}">{escape(verdict)}</td>{numbers}'
            f"<td></td>{total}</tr>"
        )
    return (
        '<table class="counts"><tr><th>run</th><th>verdict</th>'
        f"{head}<th>time</th><th>artifacts</th><th></th></tr>{''.join(rows)}</table>"
    )


def _count_cell(outcome: str, n: int) -> str:
    """A count, coloured as the matrix colours its outcome when there is any."""
    css = f' class="count-{outcome}"' if n and outcome != "passed" else ""
    return f"<td{css}>{n}</td>"


def _first_failure_html(first: FirstFailure, links: Links) -> str:
    named = "".join(
        f"<li><b>{escape(what)}</b>: {escape(value)}</li>" for what, value in first.where
    )
    message = f'<pre class="message">{escape(first.message)}</pre>' if first.message else ""
    kind = "failure" if first.result.outcome == "failed" else f"{first.result.outcome} entry"
    into = first.result.start + first.result.seconds
    return (
        f'<div class="first"><p><b>First {escape(kind)}</b> (ran {clock(first.result.seconds)}, '
        f"ended {clock(into)} into its run):</p><ul>{named}</ul>{message}"
        f"{links(first.run, first.result)}</div>"
    )
