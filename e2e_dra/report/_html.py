"""``report.html``: one self-contained page (inline CSS and SVG, no script, nothing fetched) of
one or more runs: a headline (verdict, pairs, seeds, wall time, the first failure with its files,
the environment), the matrix of subtests by run and phase (the gate cycle's in a table of its
own), each failure with links to what explains it, the production-readiness evidence of the KEPs
the subtests exercise, and per run a version strip and a timeline.

Links are relative to the page, so the artifacts folder can be copied or served as it is, or,
given a base (``--link-base``), that base followed by the same path, for a page that is read
where relative links break (Prow's Spyglass). Each follows the rule of :class:`~._links.LinkRule`
(inside the artifacts, no scheme from the input), but the one to the evidence's Markdown,
written next to the page. A KEP's tracking issue is shown as its address, not linked: nothing on
the page leads off the artifacts. Every name and message is HTML-escaped where it is put, and
the page as a whole holds only text UTF-8 can encode: a lone surrogate (a file name's byte that
is not UTF-8, or a ``\\udXXX`` escape in a summary) is shown as its escape (:func:`printable`),
so a strange name never fails the writer.
"""

from __future__ import annotations

import os
import re
import time
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
from e2e_dra.report._headline import Headline, headline_html
from e2e_dra.report._links import MAX_LINKS, Explainer, Link, LinkRule
from e2e_dra.report._load import Result, SuiteRecord
from e2e_dra.report._matrix import EXPLAINED, MARK, Matrix
from e2e_dra.report._runs import Run, runs_of
from e2e_dra.report._timeline import COLORS, Timeline, clock

PALETTE = ("#cfe3ff", "#ffe0b3", "#d9f2d0", "#f3d1f0", "#fff3a6", "#d6d6f5")

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
td.none { background: #fff; } td.verdict-passed { background: #d9f2d0; }
td.verdict-failed { background: #f2a5ae; } td.verdict-interrupted { background: #ffe3a6; }
th.run { text-align: center; }
th.run .verdict { display: block; font-weight: 400; font-size: 12px; }
th.run.passed { background: #bfe6b3; } th.run.failed { background: #f2a5ae; }
th.run.interrupted { background: #ffd27a; } th.column { font-weight: 400; font-size: 12px; }
th.subtest.failed { background: #c0392b; color: #fff; }
.headline { border-left: 8px solid #999; padding: .4em .9em; margin: .6em 0 1em; }
.headline.passed { border-color: #2e9e4f; background: #eef8ea; }
.headline.failed { border-color: #d7263d; background: #fdeef0; }
.headline.interrupted { border-color: #f0a202; background: #fff6e0; }
.headline .verdict { font-size: 1.6em; font-weight: 700; margin: 0; }
.headline .facts span { margin-right: 1.4em; } .headline ul { margin: .2em 0; }
.headline pre.message { white-space: pre-wrap; background: #fff; padding: .3em .5em;
  border: 1px solid #e3c2c6; font-size: 12px; max-height: 12em; overflow: auto; }
table.environment caption { text-align: left; font-weight: 600; }
table.environment th, table.environment td { font-size: 12px; }
.links a { display: block; font-size: 11px; } .mark { font-weight: 700; }
.first .links a { display: inline-block; margin-right: 1em; font-size: 12px; }
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
    """The page for ``records`` (each one suite's summary), written into ``out``'s folder; its
    links under ``link_base`` when one is given (checked by the caller)."""

    def __init__(
        self,
        records: list[SuiteRecord],
        out: Path,
        problems: list[str],
        evidence: Evidence | None = None,
        link_base: str | None = None,
    ) -> None:
        self.records = records
        self.runs = runs_of(records)
        self.base = out.parent
        self.problems = problems
        self.evidence = Evidence.of(records, self.base) if evidence is None else evidence
        self.rule = LinkRule(self.base, link_base)
        self._versions: dict[str, str] = {}
        self._explainers: dict[int, Explainer] = {}
        self._links_left = MAX_LINKS

    def relative(self, path: Path) -> str:
        return Path(os.path.relpath(path, self.base)).as_posix()

    def anchor(self, link: Link, record: SuiteRecord, text: str) -> str:
        """A link to ``link`` (a file of ``record``'s suite run) showing ``text`` (HTML
        already); only the text when it must not be linked (:func:`~._links.href`)."""
        url = self.rule.artifact(link, record.directory)
        return text if url is None else f'<a href="{escape(url, quote=True)}">{text}</a>'

    def explainer(self, record: SuiteRecord) -> Explainer:
        if id(record) not in self._explainers:
            self._explainers[id(record)] = Explainer(record)
        return self._explainers[id(record)]

    def html(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S %z")
        upgrades = [run for run in self.runs if not run.gate_cycle]
        cycles = [run for run in self.runs if run.gate_cycle]
        body = [
            "<h1>e2e-dra report</h1>",
            f'<p class="muted">written {escape(when)}; {len(self.records)} suite run(s)</p>',
            self._problems(),
            headline_html(Headline.of(self.runs), self._headline_links),
            "<h2>Runs</h2>",
            self._runs(),
            "<h2>Matrix</h2>",
            self._legend(),
        ]
        if upgrades or not cycles:
            body.append(Matrix(upgrades, self._cell_links).html())
        if cycles:
            body.append("<h2>Feature-gate cycle</h2>")
            body.append(
                '<p class="muted">Each subtest brings up a cluster of its own and switches its '
                "feature gates off and on again: its columns are its own cluster steps and "
                "phases.</p>"
            )
            body.append(Matrix(cycles, self._cell_links).html())
        body += [self._failures(), self._evidence(), "<h2>Timelines</h2>", _timeline_legend()]
        for run in self.runs:
            record = run.record
            body.append(f"<h2>{escape(run.label)}</h2>")
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
        for run in self.runs:
            record = run.record
            link = self.anchor(Link("summary", record.path), record, "summary.json")
            rows.append(
                f"<tr><td>{escape(run.label)}</td>"
                f'<td class="verdict-{run.css}">{escape(run.said)}</td>'
                f"<td>{escape(self._where(record))}</td><td>{link}</td></tr>"
            )
        return (
            "<table class=summary><tr><th>run</th><th>verdict</th><th>summary</th><th></th></tr>"
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
            + '<span><i style="background:#c0392b"></i>a subtest that failed in a run</span>'
            + "</p>"
        )

    def _cell_links(self, run: Run, result: Result) -> str:
        """A matrix cell's: the step its failure ended, and short links."""
        return _step_named(result) + self._links(run.record, result, short=True)

    def _headline_links(self, run: Run, result: Result) -> str:
        return self._links(run.record, result, short=False)

    def _links(self, record: SuiteRecord, result: Result, *, short: bool) -> str:
        """Links to what explains ``result``: short names in a matrix cell, file names below."""
        if self._links_left <= 0:
            return ""
        found = self.explainer(record).links(result)[: self._links_left]
        self._links_left -= len(found)
        anchors = "".join(
            self.anchor(
                link,
                record,
                escape(_short(link.label) if short else f"{link.label}: {_name(link)}"),
            )
            for link in found
        )
        return f'<span class="links">{anchors}</span>' if anchors else ""

    def _failures(self) -> str:
        items = []
        for run in self.runs:
            for r in run.record.results:
                if r.outcome not in EXPLAINED:
                    continue
                items.append(
                    f"<li><b>{escape(run.label)}</b> <code>{escape(r.id)}</code> {r.outcome}"
                    f" after {clock(r.seconds)}: {escape(r.message)}"
                    f"{self._links(run.record, r, short=False)}</li>"
                )
        if not items:
            return "<h2>Failures</h2><p>None.</p>"
        return f'<h2>Failures</h2><ul class="failures">{"".join(items)}</ul>'

    def _evidence(self) -> str:
        """Per KEP, what each run shows of it (:mod:`._evidence`), and the link to the same as
        Markdown."""
        evidence = self.evidence
        markdown = self.rule.own(EVIDENCE_FILE)
        parts = [
            "<h2>Production-readiness evidence</h2>",
            f'<p>As Markdown, to paste into a KEP: <a href="{escape(markdown, quote=True)}">'
            f"{EVIDENCE_FILE}</a>. {escape(PREAMBLE)}</p>",
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


def _short(label: str) -> str:
    """A link's text inside a matrix cell: "kube-apiserver log" stays, the dump's long label
    ("DRA objects, pods and events") becomes "dump"."""
    lowered = label.lower()
    if "dra objects" in lowered or lowered == "dump":
        return "dump"
    if "grpc" in lowered:
        return "gRPC calls"
    if lowered.endswith(("logs", "dump")):  # "pod logs", "final dump": as they are
        return label
    return label.removesuffix(" log") + " log" if "log" in lowered else label


def _name(link: Link) -> str:
    """A link's file name as the failures list shows it; a folder's ends in ``/``."""
    return f"{link.path.name}/" if link.folder else link.path.name


def _timeline_legend() -> str:
    """What the timelines' colours and marks mean, once for all of them."""
    items = (
        ("ready", "a component's start until it was ready"),
        ("retried", "one that needed restarts (↻n: how many)"),
        ("restart", "| a component restarted into a later state"),
        ("setup", "what ran before the bring-up (releases, node runtime), collapsed"),
    )
    return (
        '<p class="legend">'
        + "".join(
            f'<span><i style="background:{COLORS[c]}"></i>{escape(t)}</span>' for c, t in items
        )
        + " Times count from the cluster's bring-up (from the suite's start when nothing ran "
        "before it).</p>"
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each lone surrogate shown as an escape: ``\\xNN`` for a byte of a file name
    that is not UTF-8 (Python keeps it as U+DC80..U+DCFF), ``\\uNNNN`` for any other."""
    return _SURROGATE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
