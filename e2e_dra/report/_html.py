"""``report.html``: one self-contained page (inline CSS and SVG, no script, nothing fetched) of
one or more runs, laid out to answer "what failed?" within minutes: a headline (verdict, pairs,
seeds, wall time, the first real failure with its files), the counts per run and in all
(passed, failed, known Kubernetes bugs seen, skipped; each run's time and artifacts' size), a
table of contents, the failures (only real ones), the known bugs seen (apart, with their upstream
issues), the timelines, the matrix of subtests by run and phase (the gate cycle's in a table of
its own), the production-readiness evidence as one KEP x run table (its details folded), and per
run (anchored ``run-<n>``) its version strip.

Links are relative to the page, so the artifacts folder can be copied or served as it is, or,
given a base (``--link-base``), that base followed by the same path, for a page that is read
where relative links break (Prow's Spyglass). Each follows the rule of :class:`~._links.LinkRule`
(inside the artifacts, no scheme from the input), but the one to the evidence's Markdown,
written next to the page, the page's own anchors (``#...``), and a known bug's upstream issue,
made from its number alone (:mod:`._knownbugs`). A KEP's tracking issue is shown as its address,
not linked. Every name and message is HTML-escaped where it is put, and
the page as a whole holds only text UTF-8 can encode: a lone surrogate (a file name's byte that
is not UTF-8, or a ``\\udXXX`` escape in a summary) is shown as its escape (:func:`printable`),
so a strange name never fails the writer."""

from __future__ import annotations

import os
import re
import time
from html import escape
from pathlib import Path

from e2e_dra.report._evidence import Evidence
from e2e_dra.report._failures import FAILURES_ID, KNOWN_BUGS_ID, failures_html, known_bugs_html
from e2e_dra.report._headline import Headline, counts_html, environment_html, headline_html
from e2e_dra.report._links import MAX_LINKS, Explainer, Link, LinkRule
from e2e_dra.report._load import Result, SuiteRecord
from e2e_dra.report._matrix import MARK, Matrix
from e2e_dra.report._prr import EVIDENCE_FILE, PRR_ID, evidence_html
from e2e_dra.report._runs import Run, expected_failures, real_failures, runs_of
from e2e_dra.report._sizes import Size, folder_size
from e2e_dra.report._timeline import COLORS, Timeline

LEGEND = {"xfailed": "known Kubernetes bug (xfailed)"}
"""An outcome as the matrix's legend names it, where its name alone says little."""
TIMELINES_ID, MATRIX_ID, GATE_CYCLE_ID, RUNS_ID = "timelines", "matrix", "gate-cycle", "runs"

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
.first .links a, .failures .links a, .known-bugs .links a { display: inline-block;
  margin-right: 1em; font-size: 12px; } .known-bugs .links { display: block; }
.step { display: block; font-size: 11px; max-width: 14em; margin: 0 auto; color: #555; }
.summary span { margin-right: 1.2em; } .muted { color: #777; }
.timeline text { font: 11px system-ui, sans-serif; } .timeline .barlabel { fill: #fff; }
ul.failures li { margin-bottom: .5em; } code { font-size: 12px; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
.yes { color: #1a7f37; } .no { color: #b3261e; } table.evidence td { font-size: 12px; }
.headline .known { font-size: .55em; font-weight: 400; color: #555; }
table.counts td, table.counts th { font-size: 13px; }
td.count-failed { background: #f9c9cf; } td.count-xfailed { background: #f3dcc0; }
td.count-skipped { background: #ececec; } td.count-interrupted { background: #ffe3a6; }
table.counts tr.all { font-weight: 600; }
nav.toc { background: #f7f7f7; border: 1px solid #ddd; padding: .3em .9em; margin: 1em 0; }
nav.toc ol { display: flex; flex-wrap: wrap; gap: .1em 1.4em; list-style: none; margin: .2em 0;
  padding: 0; }
ol.failures li, ul.known-bugs > li { margin-bottom: .6em; }
pre.message { white-space: pre-wrap; font-size: 12px; max-height: 10em; overflow: auto;
  background: #fafafa; border: 1px solid #e3e3e3; padding: .3em .5em; margin: .2em 0; }
table.prr td.cell a { color: inherit; font-weight: 600; } .kep-title { font-weight: 400; }
table.prr .kep-title::before { content: " "; } details { margin: .3em 0; }
details > summary { cursor: pointer; font-weight: 600; } :target { scroll-margin-top: .5em; }
"""


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
        self._positions = {id(run): index for index, run in enumerate(self.runs)}
        self._sizes: dict[int, Size] = {}

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
        """The page: what failed first (headline, counts, failures, known bugs), then where to
        go from there (contents, matrix, timelines, evidence), then each run's details."""
        when = time.strftime("%Y-%m-%d %H:%M:%S %z")
        upgrades = [run for run in self.runs if not run.kind.cycles_gates]
        cycles = [run for run in self.runs if run.kind.cycles_gates]
        headline = Headline.of(self.runs)
        body = [
            "<h1>e2e-dra report</h1>",
            f'<p class="muted">written {escape(when)}; {len(self.records)} suite run(s)</p>',
            self._problems(),
            headline_html(headline, self._headline_links),
            counts_html(self.runs, self._run_link, self._run_cells, self._total_cells()),
            environment_html(headline),
            self._contents(bool(cycles)),
            failures_html(self.runs, self._long_links, self.run_id),
            known_bugs_html(self.runs, self._short_links, self.run_id),
            f'<h2 id="{MATRIX_ID}">Matrix</h2>',
            self._legend(),
        ]
        if upgrades or not cycles:
            body.append(Matrix(upgrades, self._cell_links).html())
        if cycles:
            body.append(f'<h2 id="{GATE_CYCLE_ID}">Feature-gate cycle</h2>')
            body.append(
                '<p class="muted">Each subtest brings up a cluster of its own and switches its '
                "feature gates off and on again: its columns are its own cluster steps and "
                "phases.</p>"
            )
            body.append(Matrix(cycles, self._cell_links).html())
        body += [f'<h2 id="{TIMELINES_ID}">Timelines</h2>', _timeline_legend()]
        for index, run in enumerate(self.runs):
            body.append(
                f'<h3 id="timeline-{index + 1}"><a href="#{self.run_id(run)}">'
                f"{escape(run.label)}</a></h3>"
            )
            body.append(Timeline(run.record).svg())
        body.append(evidence_html(self.evidence, self.runs, self.rule.own(EVIDENCE_FILE)))
        body.append(f'<h2 id="{RUNS_ID}">Runs</h2>')
        for run in self.runs:
            record = run.record
            body.append(f'<h2 id="{self.run_id(run)}">{escape(run.label)}</h2>')
            body.append(f'<p class="muted">{escape(self._where(record))}</p>')
            body.append(f"<p>artifacts: {escape(self.size(run).said)}</p>")
            body.append(self._versions_strip(record))
        return printable(
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            "<title>e2e-dra report</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
        )

    # --- parts --------------------------------------------------------------------------------

    def run_id(self, run: Run) -> str:
        """The anchor of ``run``'s section: ``run-<n>``, its place in the report."""
        return f"run-{self._positions[id(run)] + 1}"

    def size(self, run: Run) -> Size:
        """The size of ``run``'s artifacts folder (walked once)."""
        if id(run) not in self._sizes:
            self._sizes[id(run)] = folder_size(run.record.directory)
        return self._sizes[id(run)]

    def _contents(self, cycles: bool) -> str:
        """The table of contents: every section, and each run's details and timeline."""
        failures, known = len(real_failures(self.runs)), len(expected_failures(self.runs))
        sections = [
            (FAILURES_ID, f"Failures ({failures})"),
            (KNOWN_BUGS_ID, f"Known Kubernetes bugs seen ({known})"),
            (MATRIX_ID, "Matrix"),
            *([(GATE_CYCLE_ID, "Feature-gate cycle")] if cycles else []),
            (TIMELINES_ID, "Timelines"),
            (PRR_ID, "Production-readiness evidence"),
        ]
        items = "".join(f'<li><a href="#{i}">{escape(t)}</a></li>' for i, t in sections)
        runs = "".join(
            f'<li><a href="#{self.run_id(run)}">{escape(run.label)}</a> '
            f'<span class="muted">{escape(run.verdict)}</span> · '
            f'<a href="#timeline-{index + 1}">timeline</a></li>'
            for index, run in enumerate(self.runs)
        )
        return (
            f'<nav class="toc" aria-label="contents"><b>Contents</b><ol class="sections">{items}'
            f'<li><a href="#{RUNS_ID}">Runs</a></li></ol><ol class="runs">{runs}</ol></nav>'
        )

    def _problems(self) -> str:
        if not self.problems:
            return ""
        items = "".join(f"<li>{escape(p)}</li>" for p in self.problems)
        return f"<p>Left out:</p><ul>{items}</ul>"

    def _where(self, record: SuiteRecord) -> str:
        started = record.started.isoformat() if record.started else "unknown start"
        state = "finished" if record.finished else "not finished (still running or cancelled)"
        return f"{self.relative(record.path)}: started {started}, {state}"

    def _run_link(self, run: Run) -> str:
        return f'<a href="#{self.run_id(run)}">{escape(run.label)}</a>'

    def _run_cells(self, run: Run) -> str:
        """A run's last cells in the counts table: its artifacts' size, its summary."""
        record = run.record
        link = self.anchor(Link("summary", record.path), record, "summary.json")
        return f"<td>{escape(self.size(run).said)}</td><td>{link}</td>"

    def _total_cells(self) -> str:
        if len(self.runs) < 2:
            return ""
        total = sum((self.size(run) for run in self.runs), Size(0, 0))
        return f"<td>{escape(total.said)}</td><td></td>"

    def _legend(self) -> str:
        return (
            '<p class="legend">'
            + "".join(
                f'<span><i style="background:{COLORS[o]}"></i>{MARK[o]} {LEGEND.get(o, o)}</span>'
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

    def _long_links(self, run: Run, result: Result) -> str:
        return self._links(run.record, result, short=False)

    def _short_links(self, run: Run, result: Result) -> str:
        return self._links(run.record, result, short=True)

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
