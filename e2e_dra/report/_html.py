"""``report.html``: one self-contained page (inline CSS and SVG, no script, nothing fetched) of
one or more runs: the matrix of subtests by suite and phase, each failure with links to what
explains it, the production-readiness evidence of the KEPs the subtests exercise, a version strip
and a timeline per suite.

Links are relative to the page, so the artifacts folder can be copied or served as it is; each
follows the rule of :func:`~._links.href` (inside the artifacts, no scheme), but the one to the
evidence's Markdown, written next to the page. A KEP's tracking issue is shown as its address, not
linked: nothing on the page leads off the artifacts. Every name and
message is HTML-escaped where it is put, and the page as a whole holds only text UTF-8 can
encode: a lone surrogate (a file name's byte that is not UTF-8, or a ``\\udXXX`` escape in a
summary) is shown as its escape (:func:`printable`), so a strange name never fails the writer.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from html import escape
from pathlib import Path

from e2e_dra.report._evidence import (
    EVIDENCE_FILE,
    KNOWN_BUG,
    LEFT_OUT,
    NO_KEPS,
    NOT_RUN,
    NOTHING_PROVED,
    PREAMBLE,
    Evidence,
    PhaseEvidence,
    RunEvidence,
    left_out_said,
)
from e2e_dra.report._links import MAX_LINKS, Explainer, href
from e2e_dra.report._load import Result, SuiteRecord
from e2e_dra.report._timeline import COLORS, Timeline

PALETTE = ("#cfe3ff", "#ffe0b3", "#d9f2d0", "#f3d1f0", "#fff3a6", "#d6d6f5")
MARK = {"passed": "✓", "failed": "✗", "xfailed": "\u2298", "skipped": "\u2013", "interrupted": "!"}

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; margin: 0 0 .3em; } h2 { margin-top: 1.6em; } h3 { margin-bottom: .3em; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.cell { text-align: center; min-width: 3.5em; }
table.matrix tr > th:first-child { white-space: nowrap; }
td.passed { background: #d9f2d0; } td.failed { background: #f9c9cf; }
td.skipped { background: #ececec; color: #666; } td.interrupted { background: #ffe3a6; }
td.xfailed { background: #f3dcc0; }
td.none { background: #fff; }
.links a { display: block; font-size: 11px; } .mark { font-weight: 700; }
.step { display: block; font-size: 11px; max-width: 14em; margin: 0 auto; color: #555; }
.summary span { margin-right: 1.2em; } .muted { color: #777; }
.timeline text { font: 11px system-ui, sans-serif; } .timeline .barlabel { fill: #fff; }
ul.failures li { margin-bottom: .5em; } code { font-size: 12px; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
.yes { color: #1a7f37; } .no { color: #b3261e; } table.evidence td { font-size: 12px; }
"""

EVIDENCE_CLASS = {KNOWN_BUG: "xfailed", NOT_RUN: "skipped", NOTHING_PROVED: "skipped"}
"""The matrix's cell class of an evidence status that is not an outcome."""


class Page:
    """The page for ``records`` (each one suite's summary), written into ``out``'s folder."""

    def __init__(
        self,
        records: list[SuiteRecord],
        out: Path,
        problems: list[str],
        evidence: Evidence | None = None,
    ) -> None:
        self.records = records
        self.base = out.parent
        self.problems = problems
        self.evidence = Evidence.of(records, self.base) if evidence is None else evidence
        self._versions: dict[str, str] = {}
        self._explainers: dict[int, Explainer] = {}
        self._links_left = MAX_LINKS

    def relative(self, path: Path) -> str:
        return Path(os.path.relpath(path, self.base)).as_posix()

    def anchor(self, path: Path, record: SuiteRecord, text: str) -> str:
        """A link to ``path`` (a file of ``record``'s suite run) showing ``text`` (HTML already);
        only the text when the file must not be linked (:func:`~._links.href`)."""
        url = href(path, record.directory, self.base)
        return text if url is None else f'<a href="{escape(url, quote=True)}">{text}</a>'

    def explainer(self, record: SuiteRecord) -> Explainer:
        if id(record) not in self._explainers:
            self._explainers[id(record)] = Explainer(record)
        return self._explainers[id(record)]

    def html(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S %z")
        body = [
            "<h1>e2e-dra report</h1>",
            f'<p class="muted">written {escape(when)}; {len(self.records)} suite run(s)</p>',
            self._problems(),
            self._runs(),
            "<h2>Matrix</h2>",
            self._legend(),
            self._matrix(),
            self._failures(),
            self._evidence(),
        ]
        for record in self.records:
            body.append(f"<h2>{escape(record.suite)}</h2>")
            body.append(f'<p class="muted">{escape(self._where(record))}</p>')
            body.append(self._versions_strip(record))
            body.append("<h3>Timeline</h3>")
            body.append(Timeline(record).svg())
        return printable(
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            "<title>e2e-dra report</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
        )

    # --- parts --------------------------------------------------------------------------------

    def _problems(self) -> str:
        if not self.problems:
            return ""
        items = "".join(f"<li>{escape(p)}</li>" for p in self.problems)
        return f"<p>Left out:</p><ul>{items}</ul>"

    def _where(self, record: SuiteRecord) -> str:
        started = record.started.isoformat() if record.started else "unknown start"
        state = "finished" if record.finished else "not finished (still running or cancelled)"
        return (
            f"{self.relative(record.path)}: started {started}, {record.wall_seconds:.0f}s, {state}"
        )

    def _runs(self) -> str:
        rows = []
        for record in self.records:
            counts: dict[str, int] = {}
            for r in record.results:
                counts[r.outcome] = counts.get(r.outcome, 0) + 1
            said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
            link = self.anchor(record.path, record, "summary.json")
            rows.append(
                f"<tr><td>{escape(record.suite)}</td><td>{escape(self._where(record))}</td>"
                f"<td>{escape(said)}</td><td>{link}</td></tr>"
            )
        return (
            "<table class=summary><tr><th>suite</th><th>run</th><th>results</th><th></th></tr>"
            + "".join(rows)
            + "</table>"
        )

    def _legend(self) -> str:
        return (
            '<p class="legend">'
            + "".join(
                f'<span><i style="background:{COLORS[o]}"></i>{MARK[o]} {o}</span>'
                for o in ("passed", "failed", "xfailed", "skipped", "interrupted")
            )
            + "</p>"
        )

    def _columns(self) -> list[tuple[str, str]]:
        columns: dict[tuple[str, str], None] = {}
        for record in self.records:
            for phase in record.phases():
                columns[(record.suite, phase)] = None
        return list(columns)

    def _matrix(self) -> str:
        columns = self._columns()
        cells: dict[tuple[str, str, str], list[tuple[SuiteRecord, Result]]] = {}
        for record in self.records:
            for r in record.results:
                if r.phase is not None and r.subtest is not None:
                    cells.setdefault((r.subtest, record.suite, r.phase), []).append((record, r))
        subtests = sorted({key[0] for key in cells})
        if not subtests:
            return "<p>No subtest ran.</p>"
        spans = Counter(suite for suite, _ in columns)  # in the order the suites come
        head = "<tr><th rowspan=2>subtest</th>" + "".join(
            f"<th colspan={span}>{escape(suite)}</th>" for suite, span in spans.items()
        )
        head += "</tr><tr>" + "".join(f"<th>{escape(p)}</th>" for _, p in columns) + "</tr>"
        rows = []
        for subtest in subtests:
            tds = [self._cell(cells.get((subtest, suite, phase), [])) for suite, phase in columns]
            rows.append(f"<tr><th>{escape(subtest)}</th>{''.join(tds)}</tr>")
        return f'<table class="matrix">{head}{"".join(rows)}</table>'

    def _cell(self, entries: list[tuple[SuiteRecord, Result]]) -> str:
        if not entries:
            return '<td class="cell none"></td>'
        worst = _worst([r.outcome for _, r in entries])
        marks = " ".join(MARK[r.outcome] for _, r in entries)
        tip = "\n".join(
            f"{r.outcome} after {r.seconds:.1f}s" + (f": {r.message}" if r.message else "")
            for _, r in entries
        )
        links = ""
        for record, r in entries:
            if r.outcome in ("failed", "xfailed", "interrupted"):
                links += _step_named(r) + self._links(record, r, short=True)
        return (
            f'<td class="cell {worst}" title="{escape(tip, quote=True)}">'
            f'<span class="mark">{marks}</span>{links}</td>'
        )

    def _links(self, record: SuiteRecord, result: Result, *, short: bool) -> str:
        """Links to what explains ``result``: short names in a matrix cell, file names below."""
        if self._links_left <= 0:
            return ""
        found = self.explainer(record).links(result)[: self._links_left]
        self._links_left -= len(found)
        anchors = "".join(
            self.anchor(path, record, escape(_short(label) if short else f"{label}: {path.name}"))
            for label, path in found
        )
        return f'<span class="links">{anchors}</span>' if anchors else ""

    def _failures(self) -> str:
        items = []
        for record in self.records:
            for r in record.results:
                if r.outcome not in ("failed", "xfailed", "interrupted"):
                    continue
                items.append(
                    f"<li><b>{escape(record.suite)}</b> <code>{escape(r.id)}</code> {r.outcome}"
                    f" after {r.seconds:.1f}s: {escape(r.message)}"
                    f"{self._links(record, r, short=False)}</li>"
                )
        if not items:
            return "<h2>Failures</h2><p>None.</p>"
        return f'<h2>Failures</h2><ul class="failures">{"".join(items)}</ul>'

    def _evidence(self) -> str:
        """Per KEP, what each run shows of it (:mod:`._evidence`), and the link to the same as
        Markdown."""
        evidence = self.evidence
        parts = [
            "<h2>Production-readiness evidence</h2>",
            f'<p>As Markdown, to paste into a KEP: <a href="{EVIDENCE_FILE}">{EVIDENCE_FILE}</a>. '
            f"{escape(PREAMBLE)}</p>",
        ]
        if not evidence.keps and not evidence.left_out:
            parts.append(f"<p>{escape(NO_KEPS)}</p>")
        for kep in evidence.keps:
            parts.append(f"<h3>{escape(kep.heading)}</h3>")
            parts.append(
                f"<p>tracking issue: <code>{escape(kep.url)}</code>; subtests: "
                f"{escape(', '.join(kep.subtests))}</p>"
            )
            parts += [_run_evidence(run) for run in kep.runs]
            if not kep.complete:
                parts.append(
                    f"<p><b class=no>The rest of the evidence of KEP-{kep.number} is left out</b>: "
                    f"{escape(LEFT_OUT)}.</p>"
                )
        if evidence.left_out:
            said = left_out_said(evidence.left_out)
            parts.append(f"<p><b class=no>Left out</b>: {escape(said)}: {escape(LEFT_OUT)}.</p>")
        return "\n".join(parts)

    def _color(self, version: str) -> str:
        if version not in self._versions:
            self._versions[version] = PALETTE[len(self._versions) % len(PALETTE)]
        return self._versions[version]

    def _versions_strip(self, record: SuiteRecord) -> str:
        parts = ["<h3>Versions</h3>"]
        if record.binaries:
            components = list(dict.fromkeys(c for row in record.binaries.values() for c in row))
            head = "<tr><th>state</th>" + "".join(f"<th>{escape(c)}</th>" for c in components)
            rows = []
            for state, row in record.binaries.items():
                tds = "".join(
                    f'<td style="background:{self._color(row[c])}">{escape(row[c])}</td>'
                    if c in row
                    else "<td></td>"
                    for c in components
                )
                rows.append(f"<tr><th>{escape(state)}</th>{tds}</tr>")
            parts.append(f'<table class="versions">{head}</tr>{"".join(rows)}</table>')
        else:
            parts.append(f"<p>every component: {escape(record.current)}</p>")
        facts = []
        for key, what in (
            ("feature_gates_dropped", "dropped feature gates"),
            ("runtime_config_dropped", "dropped runtime config"),
        ):
            if dropped := record.dropped.get(key):
                said = "; ".join(f"{k}: {v}" for k, v in dropped.items())
                facts.append(f"<li>{what}: {escape(said)}</li>")
        facts += [
            f"<li>{escape(version)} deviates: {escape(deviation)}</li>"
            for version, deviation in record.deviations
        ]
        facts += [
            f"<li>{escape(subtest)} {escape(phase)}: nothing to prove: {escape(why)}</li>"
            for subtest, phase, why in record.nothing_to_prove
        ]
        parts.append(
            f"<ul>{''.join(facts)}</ul>"
            if facts
            else "<p>No dropped gates, no deviations, every phase had something to prove.</p>"
        )
        return "\n".join(parts)


def _run_evidence(run: RunEvidence) -> str:
    """What one suite run shows of a KEP: releases, cluster steps, the PRR questions answered,
    and a row per phase."""
    states = f" (states: {escape(', '.join(run.states))})" if run.states else ""
    steps = ", ".join(f"{i} {o}" for i, o in run.cluster_steps) or "none recorded"
    items = [
        f"<li>releases: {escape(run.releases)}{states}</li>",
        f"<li>cluster steps: {escape(steps)}</li>",
    ]
    for answer in run.answers:
        verdict = "<b class=yes>yes</b>" if answer.yes else "<b class=no>NO</b>"
        items.append(f"<li>{escape(answer.question)}: {verdict}: {escape(answer.said)}</li>")
    rows = "".join(_phase_evidence(p) for p in run.phases)
    cut = "<p><b class=no>More phases of this run are left out.</b></p>" if run.cut else ""
    return (
        f"<h4>{escape(run.suite)}</h4><p class=muted>{escape(run.where)}</p>"
        f"<ul>{''.join(items)}</ul><table class=evidence><tr><th>subtest</th><th>phase</th>"
        f"<th>outcome</th><th>checks that passed</th></tr>{rows}</table>{cut}"
    )


def _phase_evidence(phase: PhaseEvidence) -> str:
    css = EVIDENCE_CLASS.get(phase.status, phase.status)
    note = f": {escape(phase.note)}" if phase.note else ""
    checks = "; ".join(escape(c) for c in phase.checks)
    if phase.more:
        checks += f"; and {phase.more} more"
    if not phase.checks and phase.proves:
        checks = '<span class="muted">none named</span>'
    return (
        f"<tr><td>{escape(phase.subtest)}</td><td>{escape(phase.phase)}</td>"
        f'<td class="{css}">{escape(phase.status)}{note}</td><td>{checks}</td></tr>'
    )


STEP_SHOWN = 60
"""Characters of a failing step's name a matrix cell shows; the cell's tooltip holds it all."""


def _step_named(result: Result) -> str:
    """The step a failed cell's failure ended, small and cut, so the matrix says which check
    broke without opening anything; nothing when it failed outside every step."""
    name = result.failed_step
    if not name:
        return ""
    shown = name if len(name) <= STEP_SHOWN else name[: STEP_SHOWN - 1] + "…"
    return f'<span class="step">in step “{escape(shown)}”</span>'


def _worst(outcomes: list[str]) -> str:
    for outcome in ("failed", "interrupted", "xfailed", "passed", "skipped"):
        if outcome in outcomes:
            return outcome
    return "none"


def _short(label: str) -> str:
    """A link's text inside a matrix cell: "kube-apiserver log" stays, the dump's long label
    ("DRA objects, pods and events") becomes "dump"."""
    lowered = label.lower()
    if "dra objects" in lowered or lowered == "dump":
        return "dump"
    if "grpc" in lowered:
        return "gRPC calls"
    return label.removesuffix(" log") + " log" if "log" in lowered else label


_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each lone surrogate shown as an escape: ``\\xNN`` for a byte of a file name
    that is not UTF-8 (Python keeps it as U+DC80..U+DCFF), ``\\uNNNN`` for any other."""
    return _SURROGATE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
