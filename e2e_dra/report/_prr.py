"""The production-readiness evidence on the page: one compact table, KEP by run, of yes/no
answers (upgrade, rollback, upgrade again; the gate cycle's gate off, gate on again), each
answer linking to its details, which stay folded (``<details>``) until asked for.

The evidence in full (per run, the releases, the cluster steps, each phase and the checks that
passed) used to fill most of the page's height, pushing everything below it out of reach; a
reviewer wants the answers first, and the Markdown (``prr-evidence.md``) holds it all to paste
into a KEP. A browser opens a folded ``<details>`` when a link leads into it.
"""

from __future__ import annotations

from html import escape

from e2e_dra.report._evidence import (
    EVIDENCE_FILE,
    GATE_QUESTIONS,
    KNOWN_BUG,
    LEFT_OUT,
    NO_KEPS,
    NOT_RUN,
    NOTHING_PROVED,
    UPGRADE_QUESTIONS,
    Evidence,
    KepEvidence,
    PhaseEvidence,
    RunEvidence,
    left_out_said,
)
from e2e_dra.report._runs import Run

PRR_ID = "prr"
SHORT = {
    "after-cluster-upgrade": "upgrade",
    "after-cluster-downgrade": "rollback",
    "after-cluster-re-upgrade": "upgrade again",
    "phase-1-gate-off": "gate off",
    "phase-2-gate-on-again": "gate on again",
}
"""A question's column, by its phase: what a reviewer asks, in two words."""
ORDER = [phase for phase, _ in (*UPGRADE_QUESTIONS, *GATE_QUESTIONS)]

EVIDENCE_CLASS = {KNOWN_BUG: "xfailed", NOT_RUN: "skipped", NOTHING_PROVED: "skipped"}
"""The matrix's cell class of an evidence status that is not an outcome."""


def kep_id(number: int) -> str:
    return f"kep-{number}"


def details_id(number: int, position: int) -> str:
    """The anchor of one run's evidence of KEP ``number``, inside the KEP's folded details."""
    return f"kep-{number}-run-{position + 1}"


def evidence_html(evidence: Evidence, runs: list[Run], markdown_url: str) -> str:
    """The section: the link to the Markdown, the KEP x run table, the folded details."""
    parts = [
        f'<h2 id="{PRR_ID}">Production-readiness evidence</h2>',
        f"<p>Per KEP the subtests exercise and per run: did the phase after each cluster change "
        f"pass, with something to prove, in every subtest of the run that names the KEP? Each "
        f"answer links to its evidence below (folded); all of it, to paste into a KEP: "
        f'<a href="{escape(markdown_url, quote=True)}">{EVIDENCE_FILE}</a>.</p>',
    ]
    if not evidence.keps and not evidence.left_out:
        parts.append(f"<p>{escape(NO_KEPS)}</p>")
    if evidence.keps:
        parts.append(_table(evidence, runs))
    for kep in evidence.keps:
        parts.append(_details(kep))
    if evidence.left_out:
        said = left_out_said(evidence.left_out)
        parts.append(f"<p><b class=no>Left out</b>: {escape(said)}: {escape(LEFT_OUT)}.</p>")
    return "\n".join(parts)


def _table(evidence: Evidence, runs: list[Run]) -> str:
    """A row per KEP, a column group per run that shows any, a column per question asked."""
    asked: dict[int, list[str]] = {}
    for kep in evidence.keps:
        for run in kep.runs:
            asked.setdefault(run.position, []).extend(a.phase for a in run.answers)
    columns = {p: sorted(set(phases), key=ORDER.index) for p, phases in sorted(asked.items())}
    columns = {p: phases or ["-"] for p, phases in columns.items() if p < len(runs)}
    head = "".join(
        f'<th colspan={len(phases)} class="run {runs[p].css}">{escape(runs[p].label)}</th>'
        for p, phases in columns.items()
    )
    names = "".join(
        f'<th class="column">{escape(SHORT.get(phase, phase))}</th>'
        for phases in columns.values()
        for phase in phases
    )
    rows = []
    for kep in evidence.keps:
        by_run = {run.position: run for run in kep.runs}
        cells = "".join(
            _cell(kep.number, by_run.get(p), phase, kep.complete)
            for p, phases in columns.items()
            for phase in phases
        )
        title = f" {escape(kep.title)}" if kep.title else ""
        rows.append(
            f'<tr><th><a href="#{kep_id(kep.number)}">KEP-{kep.number}</a>'
            f'<span class="kep-title">{title}</span></th>{cells}</tr>'
        )
    return (
        f'<table class="prr"><tr><th rowspan=2>KEP</th>{head}</tr><tr>{names}</tr>'
        f"{''.join(rows)}</table>"
    )


def _cell(number: int, run: RunEvidence | None, phase: str, complete: bool) -> str:
    """One answer: yes or NO, its reasons as the tooltip, linking to the run's evidence."""
    if run is None:
        said = "left out (the evidence's budget)" if not complete else "does not name this KEP"
        return f'<td class="cell none" title="{escape(said, quote=True)}"></td>'
    answer = next((a for a in run.answers if a.phase == phase), None)
    if answer is None:
        return '<td class="cell none" title="not asked of this run"></td>'
    css, text = ("passed", "yes") if answer.yes else ("failed", "NO")
    href = details_id(number, run.position)
    return (
        f'<td class="cell {css}" title="{escape(f"{answer.question}: {answer.said}", quote=True)}">'
        f'<a href="#{href}">{text}</a></td>'
    )


def _details(kep: KepEvidence) -> str:
    """A KEP's evidence in full, folded."""
    blocks = [_run_evidence(kep.number, run) for run in kep.runs]
    if not kep.complete:
        blocks.append(
            f"<p><b class=no>The rest of the evidence of KEP-{kep.number} is left out</b>: "
            f"{escape(LEFT_OUT)}.</p>"
        )
    return (
        f'<details id="{kep_id(kep.number)}" class="kep"><summary>{escape(kep.heading)}</summary>'
        f"<p>tracking issue: <code>{escape(kep.url)}</code>; subtests: "
        f"{escape(', '.join(kep.subtests))}</p>{''.join(blocks)}</details>"
    )


def _run_evidence(number: int, run: RunEvidence) -> str:
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
        f'<h4 id="{details_id(number, run.position)}">{escape(run.suite)}</h4>'
        f"<p class=muted>{escape(run.where)}</p>"
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
