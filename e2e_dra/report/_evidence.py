"""The production-readiness evidence of the KEPs the subtests exercise, from the summaries.

A KEP's production-readiness review (PRR) asks "Were upgrade and rollback tested? Was the
upgrade->downgrade->upgrade path tested?". Per KEP this says which subtests exercise it
(``keps_by_subtest`` of each summary) and, per suite run, the releases the cluster went through
(``binaries``), the cluster steps, the answer to each of those questions, and each phase's outcome
with the named checks (``steps``) that passed: a section of the page, and Markdown to paste into
the KEP (``prr-evidence.md``).

It never claims more than the summaries hold: a question is answered yes only when its phase
passed in every subtest of the run that names the KEP and proved something in at least one (a
subtest with nothing to prove on those releases is named, and refutes nothing); otherwise the
answer is NO and says, per subtest, what became of that phase (failed, failed on a known bug,
skipped, interrupted, did not run, passed with nothing to prove). A suite that has no phase for a
question (a staged variant: no re-upgrade leg) is not asked it. A KEP repeats its subtests'
phases, so the evidence has a text budget of its own (:data:`~._limits.MAX_EVIDENCE_TEXT`):
what is beyond it is left out, and said to be.
"""

from __future__ import annotations

import heapq
import itertools
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.report._keps import KEPS, kep_url
from e2e_dra.report._limits import MAX_EVIDENCE_TEXT
from e2e_dra.report._load import Result, SuiteRecord
from e2e_dra.report._schema import GATE_CYCLE_KIND, KEPS_BY_SUBTEST, STEP_PASSED, UPGRADE_KIND

EVIDENCE_FILE = "prr-evidence.md"

UPGRADE_QUESTIONS = tuple(
    zip(
        UPGRADE_KIND.phases[1:],
        (
            "Upgrade tested",
            "Rollback (downgrade) tested",
            "Upgrade -> downgrade -> upgrade tested",
        ),
        strict=True,
    )
)
"""(phase, the PRR question its passing answers) of the upgrade suites: the phase that runs
after each cluster change (:data:`~._schema.UPGRADE_KIND`)."""
GATE_QUESTIONS = tuple(
    zip(
        GATE_CYCLE_KIND.phases[1:],
        (
            "Feature gate switched off after use tested",
            "Feature gate switched on again tested",
        ),
        strict=True,
    )
)
"""The same for the gate cycle (:data:`~._schema.GATE_CYCLE_KIND`)."""

NOT_RUN = "did not run"
NOTHING_PROVED = "passed with nothing to prove"
KNOWN_BUG = "failed on a known Kubernetes bug (xfailed)"
SEVERITY = ("failed", "interrupted", KNOWN_BUG, "skipped", NOT_RUN, NOTHING_PROVED, "passed")
"""The statuses of a phase, the worst first: an answer lists its subtests in this order, and a
phase given twice (only a hand-made summary does that) counts as the worse of the two."""

CHECKS_SHOWN = 40
"""Passed checks named per phase; the rest are counted ("and 12 more"): a PRR answer needs what
was checked, not every iteration of a loop."""
CHECK_SHOWN = 160
"""Characters of one check's name shown."""
NOTE_SHOWN = 300
"""Characters of why a phase did not pass (its message, its skip reason) shown."""
ROW_COST = 64
"""Characters a row (or a heading) costs beyond its texts: the markup around it; each text
costs two more, its separator."""


@dataclass(frozen=True)
class PhaseEvidence:
    """One phase of one subtest in one suite run, as the evidence shows it."""

    subtest: str
    phase: str
    status: str  # one of SEVERITY
    checks: tuple[str, ...]  # the named steps that passed, in order, cut
    more: int = 0  # passed checks not named
    note: str = ""  # why it did not pass (or proved nothing); "" for a plain pass

    @property
    def proves(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Answer:
    """A PRR question answered for one suite run: ``yes`` only when ``phase`` passed with
    something to prove in every subtest; ``said`` tells, per status, in which subtests."""

    question: str
    phase: str
    yes: bool
    said: str


@dataclass(frozen=True)
class RunEvidence:
    """What one suite run shows of one KEP."""

    suite: str
    where: str  # the summary, relative to the report, when it started, whether it finished
    releases: str  # "v1.37.2 -> v1.38.0-beta.0 -> v1.37.2"
    states: tuple[str, ...]  # the states of ``binaries``, in order
    cluster_steps: tuple[tuple[str, str], ...]  # (entry id, outcome)
    answers: tuple[Answer, ...]
    phases: tuple[PhaseEvidence, ...]
    cut: bool = False  # phases left out: the evidence's budget was spent
    position: int = 0  # the run's place among the report's records (and its runs)


@dataclass(frozen=True)
class KepEvidence:
    """One KEP: the subtests that name it (in any run) and what each run shows of it."""

    number: int
    subtests: tuple[str, ...]
    runs: tuple[RunEvidence, ...]
    complete: bool = True  # False: runs or phases of it left out (the budget)

    @property
    def title(self) -> str | None:
        return KEPS.get(self.number)

    @property
    def url(self) -> str:
        return kep_url(self.number)

    @property
    def heading(self) -> str:
        if self.title is None:
            return f"KEP-{self.number} (not in this e2e-dra's table of KEPs)"
        return f"KEP-{self.number}: {self.title}"


@dataclass(frozen=True)
class Evidence:
    """The evidence of every KEP the summaries name, in KEP order; ``left_out``: the KEPs the
    budget left no room for."""

    keps: tuple[KepEvidence, ...]
    runs: int
    left_out: tuple[int, ...] = ()

    @classmethod
    def of(cls, records: Sequence[SuiteRecord], base: Path) -> Evidence:
        """The evidence of ``records`` for a report written into ``base``."""
        return _Builder(records, base).build()

    @property
    def cut(self) -> bool:
        return bool(self.left_out) or not all(k.complete for k in self.keps)

    def markdown(self, when: str) -> str:
        """The evidence as Markdown (CommonMark with GitHub's tables), every text from a
        summary escaped: ``prr-evidence.md``."""
        return _markdown(self, when)


LEFT_OUT = (
    f"the evidence holds at most {MAX_EVIDENCE_TEXT // (1024 * 1024)} Mi characters of text; "
    "give fewer folders to one report"
)
NO_KEPS = (
    f"No summary names the KEPs its subtests exercise ({KEPS_BY_SUBTEST}: e2e-dra writes it since "
    "summary schema 3), so there is no evidence to show."
)
PREAMBLE = (
    "For each KEP: the e2e-dra subtests that exercise it and, per suite run, the releases the "
    "cluster went through, whether the phase after each cluster change passed, and each phase's "
    "outcome with the named checks that passed. Only a phase that passed, with something to "
    "prove, is evidence: a question is answered yes only when that phase passed in every subtest "
    "of the run that names the KEP, and proved something in at least one."
)


STEPS_SHOWN = 50
"""Cluster steps named per run (a real one has fewer than ten, the gate cycle four a subtest)."""


@dataclass(frozen=True)
class _Run:
    """What every KEP's block of one suite run shares, read from its record once: the work a
    KEP costs is then that of its own subtests' results, however many KEPs a run names."""

    record: SuiteRecord
    where: str
    releases: str
    states: tuple[str, ...]
    results: dict[str, list[Result]]  # subtest -> its phases' results, in order
    suite_steps: tuple[tuple[int, str, str], ...]  # (position, id, outcome) of suite-wide steps
    own_steps: dict[str, tuple[tuple[int, str, str], ...]]  # subtest -> its own cluster steps
    nothing: dict[tuple[str, str], str]  # (subtest, phase) -> why it had nothing to prove

    @classmethod
    def of(cls, record: SuiteRecord, base: Path) -> _Run:
        results: dict[str, list[Result]] = {}
        suite_steps: list[tuple[int, str, str]] = []
        own: dict[str, list[tuple[int, str, str]]] = {}
        for position, r in enumerate(record.results):
            if r.phase is not None and r.subtest is not None:
                results.setdefault(r.subtest, []).append(r)
            elif r.subtest is None:
                suite_steps.append((position, r.id, r.outcome))
            else:
                own.setdefault(r.subtest, []).append((position, r.id, r.outcome))
        releases, states = _releases(record)
        return cls(
            record=record,
            where=_where(record, base),
            releases=releases,
            states=states,
            results=results,
            suite_steps=tuple(suite_steps),
            own_steps={k: tuple(v) for k, v in own.items()},
            nothing={(s, p): why for s, p, why in record.nothing_to_prove},
        )

    def steps(self, subtests: list[str]) -> tuple[tuple[str, str], ...]:
        """(id, outcome) of the cluster steps of the run and of ``subtests`` (the gate cycle's
        are each subtest's own), in the order they ran, at most :data:`STEPS_SHOWN`."""
        merged = heapq.merge(self.suite_steps, *(self.own_steps.get(s, ()) for s in subtests))
        steps = [(i, o) for _, i, o in itertools.islice(merged, STEPS_SHOWN + 1)]
        if len(steps) > STEPS_SHOWN:
            steps[-1] = ("and more", "not shown")
        return tuple(steps)


class _Builder:
    """Builds :class:`Evidence` within :data:`MAX_EVIDENCE_TEXT` characters."""

    def __init__(self, records: Sequence[SuiteRecord], base: Path) -> None:
        self.records = records
        self.base = base
        self.left = MAX_EVIDENCE_TEXT
        self._runs: dict[int, _Run] = {}

    def charge(self, *texts: str) -> bool:
        """Whether ``texts`` (and a row's markup) still fit; they are counted when they do."""
        cost = ROW_COST + sum(len(t) + 2 for t in texts)
        if cost > self.left:
            self.left = 0
            return False
        self.left -= cost
        return True

    def build(self) -> Evidence:
        # KEP -> index of the record -> the subtests of that record that name it
        named: dict[int, dict[int, list[str]]] = {}
        for index, record in enumerate(self.records):
            for subtest, numbers in record.keps.items():
                for number in numbers:
                    named.setdefault(number, {}).setdefault(index, []).append(subtest)
        keps: list[KepEvidence] = []
        kep_numbers = sorted(named)
        for position, number in enumerate(kep_numbers):
            subtests = tuple(sorted({s for names in named[number].values() for s in names}))
            if not self.charge(KEPS.get(number, ""), *subtests):
                return Evidence(tuple(keps), len(self.records), tuple(kep_numbers[position:]))
            runs = []
            complete = True
            for index, names in named[number].items():
                run = self.run(index, sorted(set(names)))
                if run is not None:
                    runs.append(run)
                if run is None or run.cut:
                    complete = False
                    break
            keps.append(KepEvidence(number, subtests, tuple(runs), complete))
            if not complete:
                left_out = tuple(kep_numbers[position + 1 :])
                return Evidence(tuple(keps), len(self.records), left_out)
        return Evidence(tuple(keps), len(self.records))

    def run(self, index: int, subtests: list[str]) -> RunEvidence | None:
        """What the ``index``-th record shows of the KEP its ``subtests`` name; None when not
        even its heading fits any more."""
        if index not in self._runs:
            self._runs[index] = _Run.of(self.records[index], self.base)
        run = self._runs[index]
        results = {name: run.results.get(name, []) for name in subtests}
        steps = run.steps(subtests)
        answers = tuple(
            _answer(run.record, question, phase, results, run.nothing)
            for phase, question in _questions(run.record)
        )
        texts = [run.where, run.releases, *run.states, *(t for step in steps for t in step)]
        if not self.charge(*texts, *(t for a in answers for t in (a.question, a.said))):
            return None
        head = (run.record.suite, run.where, run.releases, run.states, steps, answers)
        phases: list[PhaseEvidence] = []
        for subtest in subtests:
            rows = [_phase(r, run.nothing) for r in results[subtest]] or [
                PhaseEvidence(subtest, "-", NOT_RUN, (), note="no phase of it in this summary")
            ]
            for row in rows:
                if not self.charge(row.subtest, row.phase, row.note, *row.checks):
                    return RunEvidence(*head, tuple(phases), cut=True, position=index)
                phases.append(row)
        return RunEvidence(*head, tuple(phases), position=index)


def _where(record: SuiteRecord, base: Path) -> str:
    """The run's summary relative to the report, when it started, and whether it finished."""
    try:
        shown = Path(os.path.relpath(record.path, base)).as_posix()
    except ValueError:  # another drive
        shown = str(record.path)
    started = record.started.isoformat() if record.started else "unknown start"
    state = "finished" if record.finished else "NOT finished (still running or cancelled)"
    return f"{shown}: started {started}, {state}"


def _questions(record: SuiteRecord) -> tuple[tuple[str, str], ...]:
    """The gate cycle's questions for a run of its phases, the upgrade suites' otherwise; only
    those whose phase the suite has (a staged variant has no re-upgrade leg: not a "NO")."""
    gate_phases = {phase for phase, _ in GATE_QUESTIONS} | {"phase-0-gate-on"}
    phases = set(record.phases()) | _planned_phases(record)
    questions = GATE_QUESTIONS if gate_phases & phases else UPGRADE_QUESTIONS
    return tuple((phase, question) for phase, question in questions if phase in phases)


def _planned_phases(record: SuiteRecord) -> set[str]:
    """The phase names of the suite's plan (``plan``: its entries' ids, ``<subtest>/<phase>``),
    so that a run that did not get to a phase still asks about it. Only compared with the known
    phase names, never shown: a plan that is not a list of strings counts for nothing."""
    plan = record.raw.get("plan")
    if not isinstance(plan, list):
        return set()
    return {entry.rpartition("/")[2] for entry in plan if isinstance(entry, str)}


def _status(result: Result, nothing: dict[tuple[str, str], str]) -> str:
    if result.outcome == "xfailed":
        return KNOWN_BUG
    if result.outcome == "passed" and (str(result.subtest), str(result.phase)) in nothing:
        return NOTHING_PROVED
    return result.outcome


def _worst(statuses: list[str]) -> str:
    return min(statuses, key=SEVERITY.index) if statuses else NOT_RUN


def _answer(
    record: SuiteRecord,
    question: str,
    phase: str,
    results: dict[str, list[Result]],
    nothing: dict[tuple[str, str], str],
) -> Answer:
    by_status: dict[str, list[str]] = {}
    for subtest, ended in results.items():
        status = _worst([_status(r, nothing) for r in ended if r.phase == phase])
        by_status.setdefault(status, []).append(subtest)
    # Yes when no subtest failed, was skipped or did not run, and one proved something there:
    # a subtest with nothing to prove on these releases is said, but refutes nothing.
    yes = "passed" in by_status and set(by_status) <= {"passed", NOTHING_PROVED}
    said = "; ".join(
        f"{status} in {', '.join(by_status[status])}" for status in SEVERITY if status in by_status
    )
    if set(by_status) == {NOT_RUN} and not record.finished:
        said += " (the run did not finish)"
    return Answer(question, phase, yes, f"{phase} {said}")


def _phase(result: Result, nothing: dict[tuple[str, str], str]) -> PhaseEvidence:
    status = _status(result, nothing)
    passed = [s.name for s in result.steps if s.outcome == STEP_PASSED]
    checks = tuple(_cut(_line(name), CHECK_SHOWN) for name in passed[:CHECKS_SHOWN])
    if status == NOTHING_PROVED:
        note = "nothing to prove: " + nothing[(str(result.subtest), str(result.phase))]
    elif status == "passed":
        note = ""
    elif result.message:
        note = result.message
    else:
        note = f"in step {result.failed_step!r}" if result.failed_step else ""
    return PhaseEvidence(
        subtest=str(result.subtest),
        phase=str(result.phase),
        status=status,
        checks=checks,
        more=max(0, len(passed) - CHECKS_SHOWN),
        note=_cut(_line(note), NOTE_SHOWN),
    )


def _releases(record: SuiteRecord) -> tuple[str, tuple[str, ...]]:
    """The releases of the run's states, in order ("v1.37.2 -> v1.38.0-beta.0"), and the
    states' names; a run without ``binaries`` (the gate cycle) ran one release throughout."""
    if record.binaries:
        path = " -> ".join(_release(row) for row in record.binaries.values())
        return path, tuple(record.binaries)
    if record.current != "unknown":
        return f"{record.current} throughout (no upgrade or downgrade)", ()
    return "not recorded in the summary", ()


def _release(components: dict[str, str]) -> str:
    """One state's release: the version most of its components run, and the others by name
    ("v1.38.0-beta.0 (kubelet v1.35.3)")."""
    if not components:
        return "no components recorded"
    main = Counter(components.values()).most_common(1)[0][0]
    others = ", ".join(f"{c} {v}" for c, v in components.items() if v != main)
    return f"{main} ({others})" if others else main


_SPACE = re.compile(r"\s+")


def _line(text: str) -> str:
    """``text`` on one line (a message's newlines and tabs become spaces)."""
    return _SPACE.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- Markdown ----------------------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<|~&#!])")


def md(text: str) -> str:
    """``text`` from a summary as Markdown that shows it as it is: one line, every character
    that could start emphasis, code, a link, an HTML tag or entity, a heading's end or a table
    cell backslash-escaped. (``>`` quotes only at the start of a line, and no line of the
    evidence starts with a summary's text: "->" stays as it is.)"""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _line(text))


def _outcome_md(phase: PhaseEvidence) -> str:
    shown = phase.status if phase.proves else f"**{phase.status}**"
    return f"{shown}: {md(phase.note)}" if phase.note else shown


def _checks_md(phase: PhaseEvidence) -> str:
    if not phase.checks:
        return "none named" if phase.proves else ""
    named = "; ".join(md(c) for c in phase.checks)
    return f"{named}; and {phase.more} more" if phase.more else named


def _markdown(evidence: Evidence, when: str) -> str:
    lines = [
        "# Production-readiness evidence",
        "",
        f"Written {md(when)} by `e2e-dra report` from {evidence.runs} suite run(s). {PREAMBLE}",
        "",
    ]
    if not evidence.keps and not evidence.left_out:
        lines += [NO_KEPS, ""]
    for kep in evidence.keps:
        lines += [
            f"## {md(kep.heading)}",
            "",
            f"Tracking issue: <{kep.url}>  ",
            f"Subtests: {md(', '.join(kep.subtests))}",
            "",
        ]
        for run in kep.runs:
            states = f" (states: {md(', '.join(run.states))})" if run.states else ""
            steps = ", ".join(f"{i} {o}" for i, o in run.cluster_steps) or "none recorded"
            lines += [
                f"### {md(run.suite)}",
                "",
                f"Run: {md(run.where)}",
                "",
                f"- Releases: {md(run.releases)}{states}",
                f"- Cluster steps: {md(steps)}",
            ]
            lines += [
                f"- {a.question}: {'**yes**' if a.yes else '**NO**'}: {md(a.said)}"
                for a in run.answers
            ]
            lines += [
                "",
                "| subtest | phase | outcome | checks that passed |",
                "| --- | --- | --- | --- |",
            ]
            lines += [
                f"| {md(p.subtest)} | {md(p.phase)} | {_outcome_md(p)} | {_checks_md(p)} |"
                for p in run.phases
            ]
            lines.append("")
        if not kep.complete:
            lines += [
                f"**The rest of the evidence of KEP-{kep.number} is left out**: {LEFT_OUT}.",
                "",
            ]
    if evidence.left_out:
        lines += [f"**Left out**: {left_out_said(evidence.left_out)}: {LEFT_OUT}.", ""]
    return "\n".join(lines)


def left_out_said(numbers: tuple[int, ...], shown: int = 100) -> str:
    """ "the evidence of KEP-1, KEP-2 and 3 more KEPs", naming at most ``shown`` of them."""
    named = ", ".join(f"KEP-{n}" for n in numbers[:shown])
    more = f" and {len(numbers) - shown} more KEPs" if len(numbers) > shown else ""
    return f"the evidence of {named}{more}"
