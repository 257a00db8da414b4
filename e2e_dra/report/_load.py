"""Reading ``summary.json`` files back: bounded, checked, and said in one line when wrong.

A report merges artifact folders from several machines and several e2e-dra releases, so the
reader trusts nothing: a file too large, not JSON, or of the wrong shape is named with what is
wrong, never a traceback; a number out of its field's range (:mod:`._limits`) is refused before a
timeline tries to draw it, and everything a summary adds to a report is counted against the
report's :class:`~._limits.Budget`, shared by all its summaries. Summaries from before
``schema_version`` 1 (no ``start`` per result) still read: their entries ran one after another,
so each one's start is the sum of the ones before it; summaries from before ``schema_version``
2 have no ``steps`` per phase, and read with none; summaries from before 3 name no KEPs
(``keps_by_subtest``), and read with none.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from e2e_dra.errors import LocalError, describe_os_error
from e2e_dra.report._drivers import driver_builds
from e2e_dra.report._json import FIX, parse_json, read_summary
from e2e_dra.report._limits import (
    EARLIEST,
    LATEST,
    MAX_ATTEMPTS,
    MAX_KEP_NUMBER,
    MAX_KEPS,
    MAX_MESSAGE,
    MAX_NAME,
    MAX_SCHEMA,
    MAX_SECONDS,
    MAX_SUMMARIES,
    MAX_SUMMARY_BYTES,
    Budget,
    SummaryError,
    Tally,
)
from e2e_dra.report._schema import (
    KEPS_BY_SUBTEST,
    NOTHING_TO_PROVE,
    STEP_OUTCOMES,
    SUMMARY_FILE,
    SuiteKind,
)

ENVIRONMENT = (
    ("machine", ("environment", "machine")),
    ("e2e-dra", ("environment", "e2e_dra")),
    ("Python", ("environment", "python")),
    ("release source", ("release_source",)),
    ("binaries of the version under test", ("current", "origin")),
    ("Go of the version under test", ("current", "go")),
    ("version chosen", ("current", "chosen")),
    ("binaries of the previous release", ("previous", "origin")),
    ("Go of the previous release", ("previous", "go")),
    ("node runtime", ("node_runtime",)),
)
"""(what the page calls it, where the summary keeps it) of each fact about the machine and the
build that a summary records today; each one missing from a summary is left out of the page."""

__all__ = ["MAX_SUMMARY_BYTES", "SummaryError"]  # re-exported: where readers found them before

OUTCOMES = ("passed", "failed", "xfailed", "skipped", "interrupted")
"""``xfailed``: a phase that a known Kubernetes bug broke, as its subtest declares it must."""

"""What to do about a summary that is not one e2e-dra wrote (the suite rewrites its own)."""

MAX_SCANNED = 100_000
"""Entries of one artifacts folder looked at for suites' folders: a real one holds a few."""


@dataclass(frozen=True)
class StepResult:
    """One named step of a phase (``ctx.step``): its start (seconds since the suite started,
    as a result's), how long it took and how it ended (one of ``STEP_OUTCOMES``)."""

    name: str
    start: float
    seconds: float
    outcome: str


@dataclass(frozen=True)
class Result:
    """One entry of a suite's plan as it ended: a cluster step or a subtest's phase."""

    id: str
    outcome: str
    seconds: float
    start: float
    step: str | None = None
    phase: str | None = None
    subtest: str | None = None
    message: str = ""
    logs: tuple[tuple[str, str], ...] = ()  # (label, path relative to the suite's directory)
    steps: tuple[StepResult, ...] = ()  # a phase's named steps, in the order they started
    failed_step: str | None = None  # the innermost step a failure ended, if it was in one


@dataclass(frozen=True)
class ReadyTime:
    """A component of a cluster state, started and ready at seconds since the suite started."""

    state: str
    component: str
    seconds: float
    started: float | None
    attempts: int = 1


@dataclass(frozen=True)
class SuiteRecord:
    """One suite's summary, as the report needs it; ``raw`` keeps the rest (unchecked: the
    page shows only the fields above, each checked)."""

    path: Path
    suite: str
    started: datetime | None
    wall_seconds: float
    finished: bool
    results: tuple[Result, ...]
    binaries: dict[str, dict[str, str]] = field(default_factory=dict)
    ready: tuple[ReadyTime, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)
    current: str = "unknown"  # the version of every component, when there is no ``binaries``
    dropped: dict[str, dict[str, str]] = field(default_factory=dict)  # feature gates, config
    deviations: tuple[tuple[str, str], ...] = ()  # (version, how its build deviates)
    nothing_to_prove: tuple[tuple[str, str, str], ...] = ()  # (subtest, phase, why)
    keps: dict[str, tuple[int, ...]] = field(default_factory=dict)  # subtest -> KEP numbers
    previous: str | None = None  # the release upgraded from (``previous.version``)
    kubelet: str | None = None  # the kubelet's first release when it differs (kubelet-last)
    seed: str | None = None
    environment: tuple[tuple[str, str], ...] = ()  # (what, value) of :data:`ENVIRONMENT`
    drivers: tuple[tuple[str, str], ...] = ()  # (driver beside kubelet, its build): drivers suite

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def kind(self) -> SuiteKind:
        """Upgrade or gate cycle, told by the suite's name or its phases (a summary names no
        kind). A gate cycle's subtests each have their own cluster, in
        ``<suite folder>/<subtest>/``, its states named after its phases, so the report shows
        them apart from the upgrade suites."""
        return SuiteKind.of(self.suite, self.phases())

    def phases(self) -> list[str]:
        """The phases of this suite, in the order they first ran."""
        return list(dict.fromkeys(r.phase for r in self.results if r.phase))


def find_summaries(directory: Path) -> list[Path]:
    """The summaries of one artifacts folder: its own, or those of its suites' folders.

    Only files inside the folder count: a summary.json leading out of it (a symlink) is
    refused, since the page would link out of the artifacts; one that is not a regular file (a
    FIFO) is no summary."""
    try:
        if not directory.exists():
            raise SummaryError(f"{directory}: no such directory; check the path")
        if not directory.is_dir():
            raise SummaryError(f"{directory}: not a directory (give an artifacts folder)")
        own = directory / SUMMARY_FILE
        if own.is_file():
            return [_within(directory, own)]
        found = []
        with os.scandir(directory) as entries:
            for scanned, entry in enumerate(entries, start=1):
                if scanned > MAX_SCANNED:
                    raise SummaryError(
                        f"{directory}: more than {MAX_SCANNED} entries, not an artifacts folder; "
                        "give the folders of the suites to report"
                    )
                candidate = Path(entry.path) / SUMMARY_FILE
                if candidate.is_file():
                    found.append(_within(directory, candidate))
                if len(found) > MAX_SUMMARIES:
                    raise SummaryError(
                        f"{directory}: more than {MAX_SUMMARIES} suites' summaries; give fewer "
                        "folders to one report"
                    )
    except OSError as exc:
        raise LocalError(describe_os_error(exc, directory)) from None
    if not found:
        raise SummaryError(
            f"{directory}: no {SUMMARY_FILE} in it or in a folder under it (not an artifacts "
            "dir?); give an $ARTIFACTS folder or a suite's folder"
        )
    return sorted(found)


def _within(directory: Path, summary: Path) -> Path:
    """``summary``, refused when it resolves outside ``directory`` (a symlink leading out)."""
    target = summary.resolve()
    try:
        target.relative_to(directory.resolve())
    except ValueError:
        raise SummaryError(
            f"{summary}: leads out of {directory} (to {target}); copy it in, or give the folder "
            "it is in as a DIR of its own"
        ) from None
    return summary


def load_summary(path: Path, budget: Budget | None = None) -> SuiteRecord:
    """``path`` read and checked; :class:`SummaryError` (or LocalError) names what is wrong.
    ``budget``: what the report's other summaries already hold (default: this one alone)."""
    budget = Budget() if budget is None else budget
    data = read_summary(path)
    budget.admit_file(path, data)
    checker = _Checker(path)
    record = checker.record(parse_json(path, data))
    budget.admit(path, checker.tally)
    return record


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} ...[{len(text) - limit} characters cut; the logs hold them]"


def _shown(value: Any) -> str:
    """A number as an error message names it: short, whatever it is."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "infinite (or beyond 1e308)"
    return repr(value)[:40]


class _Checker:
    """Turns a parsed summary into a :class:`SuiteRecord`, naming the first key that is wrong,
    and counts in ``tally`` what the record adds to its report."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tally = Tally()

    def fail(self, where: str, what: str) -> SummaryError:
        return SummaryError(f"{self.path}: {where} {what}; {FIX}")

    def record(self, doc: Any) -> SuiteRecord:
        if not isinstance(doc, dict):
            raise self.fail("the top level", "is not a JSON object")
        version = doc.get("schema_version", 0)
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise self.fail("schema_version", "is not a non-negative integer")
        if version > MAX_SCHEMA:
            raise self.fail("schema_version", f"is {_shown(version)}, more than {MAX_SCHEMA}")
        suite = doc.get("suite")
        if not isinstance(suite, str) or not suite:
            raise self.fail("suite", "is missing or not a non-empty string")
        suite = self.name(suite, "suite")
        raw_results = doc.get("results")
        if not isinstance(raw_results, list):
            raise self.fail("results", "is missing or not a list")
        results = self.results(raw_results)
        for r in results:
            if r.subtest is not None:  # a column of this run's own (a gate cycle's steps too)
                self.tally.subtests.add(r.subtest)
                self.tally.columns.add((str(self.path), r.phase or r.step or r.id))
        binaries = self.binaries(doc.get("binaries", {}))
        return SuiteRecord(
            path=self.path,
            suite=suite,
            started=self.started(doc.get("started")),
            wall_seconds=self.seconds(doc.get("wall_seconds", 0), "wall_seconds"),
            finished=bool(doc.get("finished", False)),
            results=results,
            binaries=binaries,
            ready=self.ready(doc.get("components_ready", [])),
            raw=doc,
            current=self.current(doc),
            dropped=self.dropped(doc),
            deviations=self.deviations(doc),
            nothing_to_prove=self.nothing_to_prove(doc.get("facts")),
            keps=self.keps(doc.get(KEPS_BY_SUBTEST)),
            previous=self.previous(doc),
            kubelet=self.fact(doc, ("kubelet", "version")),
            seed=self.seed(doc.get("seed")),
            environment=self.environment(doc),
            drivers=driver_builds(doc.get("drivers"), self.said),
        )

    # --- numbers: finite, and in their field's range ------------------------------------------

    def seconds(self, value: Any, where: str, *, low: float = 0.0) -> float:
        """Seconds, a duration or an offset from the suite's start: at most a week."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, "is not a non-negative number")
        if math.isnan(value) or (value < 0 and low == 0):
            raise self.fail(where, f"is {_shown(value)}, not a non-negative number")
        if not low <= value <= MAX_SECONDS:
            raise self.fail(
                where, f"is {_shown(value)}, not a number of seconds from {low:g} to {MAX_SECONDS}"
            )
        return float(value)

    def count(self, value: Any, where: str, high: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
            raise self.fail(where, f"is {_shown(value)}, not a whole number from 1 to {high}")
        return value

    def started(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail("started", "is not a string")
        try:
            when = datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            example = "2026-12-01T18:10:12+0000"
            raise self.fail("started", f"is not a time like {example}: {value[:40]!r}") from None
        if not EARLIEST <= when < LATEST:
            raise self.fail("started", f"is {value[:40]!r}, not a time from 1970 to 2199")
        return when

    # --- text: bounded names, cut messages, all counted -----------------------------------------

    def text(self, value: Any, where: str, *, required: bool = False) -> str | None:
        if value is None and not required:
            return None
        if not isinstance(value, str):
            raise self.fail(where, "is missing or not a string" if required else "is not a string")
        if len(value) > MAX_NAME:
            raise self.fail(where, f"is {len(value)} characters long, more than {MAX_NAME}")
        self.tally.text += len(value)
        return value

    def name(self, value: Any, where: str) -> str:
        return str(self.text(value, where, required=True))

    def said(self, value: Any, where: str) -> str:
        """A scalar the page shows as text (a message, a reason), cut to :data:`MAX_MESSAGE`."""
        if isinstance(value, dict | list):
            raise self.fail(where, "is not a string")
        shown = _cut(str(value), MAX_MESSAGE)
        self.tally.text += len(shown)
        return shown

    # --- the parts --------------------------------------------------------------------------------

    def entry(self, item: Any, where: str, outcomes: tuple[str, ...]) -> str:
        """One more entry counted against the budget: a JSON object whose ``outcome`` is one of
        ``outcomes``; that outcome."""
        self.tally.entries += 1
        if not isinstance(item, dict):
            raise self.fail(where, "is not a JSON object")
        outcome = self.name(item.get("outcome"), f"{where}.outcome")
        if outcome not in outcomes:
            raise self.fail(f"{where}.outcome", f"is {outcome[:40]!r}, not one of {outcomes}")
        return outcome

    def results(self, raw: list[Any]) -> tuple[Result, ...]:
        results = []
        clock = 0.0  # before schema 1: the entries ran one after another
        for index, item in enumerate(raw):
            where = f"results[{index}]"
            outcome = self.entry(item, where, OUTCOMES)
            seconds = self.seconds(item.get("seconds", 0), f"{where}.seconds")
            start = item.get("start")
            start = clock if start is None else self.seconds(start, f"{where}.start")
            if start + seconds > MAX_SECONDS:
                raise self.fail(where, f"ends {start + seconds:g}s after the suite started, "
                                f"more than {MAX_SECONDS}")  # fmt: skip
            clock = start + seconds
            message = item.get("message")
            result = Result(
                id=self.name(item.get("id"), f"{where}.id"),
                outcome=outcome,
                seconds=seconds,
                start=start,
                step=self.text(item.get("step"), f"{where}.step"),
                phase=self.text(item.get("phase"), f"{where}.phase"),
                subtest=self.text(item.get("subtest"), f"{where}.subtest"),
                message="" if message is None else self.message(message, f"{where}.message"),
                logs=self.logs(item.get("logs", []), f"{where}.logs"),
                steps=self.steps(item.get("steps", []), f"{where}.steps"),
                failed_step=self.text(item.get("failed_step"), f"{where}.failed_step"),
            )
            if result.phase is not None and result.subtest is None:
                raise self.fail(where, "has a phase but no subtest")
            results.append(result)
        return tuple(results)

    def message(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, "is not a string")
        return self.said(value, where)

    def logs(self, raw: Any, where: str) -> tuple[tuple[str, str], ...]:
        if not isinstance(raw, list):
            raise self.fail(where, "is not a list")
        logs = []
        for index, item in enumerate(raw):
            self.tally.entries += 1
            if not isinstance(item, dict):
                raise self.fail(f"{where}[{index}]", "is not a JSON object")
            path = self.name(item.get("path"), f"{where}[{index}].path")
            label = self.text(item.get("label"), f"{where}[{index}].label") or path
            logs.append((label, path))
        return tuple(logs)

    def steps(self, raw: Any, where: str) -> tuple[StepResult, ...]:
        if not isinstance(raw, list):
            raise self.fail(where, "is not a list")
        steps = []
        for index, item in enumerate(raw):
            at = f"{where}[{index}]"
            outcome = self.entry(item, at, STEP_OUTCOMES)
            start = self.seconds(item.get("start"), f"{at}.start")
            seconds = self.seconds(item.get("seconds"), f"{at}.seconds")
            if start + seconds > MAX_SECONDS:
                raise self.fail(at, f"ends {start + seconds:g}s after the suite started, "
                                f"more than {MAX_SECONDS}")  # fmt: skip
            name = self.name(item.get("name"), f"{at}.name")
            steps.append(StepResult(name=name, start=start, seconds=seconds, outcome=outcome))
        return tuple(steps)

    def binaries(self, raw: Any) -> dict[str, dict[str, str]]:
        if not isinstance(raw, dict) or not all(
            isinstance(state, str)
            and isinstance(components, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in components.items())
            for state, components in raw.items()
        ):
            raise self.fail("binaries", "is not an object of states to {component: version}")
        components: set[str] = set()
        for state, row in raw.items():
            self.name(state, "binaries")
            for component, version in row.items():
                self.tally.entries += 1
                components.add(self.name(component, f"binaries[{state[:40]!r}]"))
                self.name(version, f"binaries[{state[:40]!r}][{component[:40]!r}]")
        self.tally.version_cells += len(raw) * len(components)
        return raw

    def ready(self, raw: Any) -> tuple[ReadyTime, ...]:
        if not isinstance(raw, list):
            raise self.fail("components_ready", "is not a list")
        times = []
        for index, item in enumerate(raw):
            where = f"components_ready[{index}]"
            self.tally.entries += 1
            if not isinstance(item, dict):
                raise self.fail(where, "is not a JSON object")
            seconds = self.seconds(item.get("seconds", 0), f"{where}.seconds")
            started = item.get("started")
            if started is not None:
                started = self.seconds(started, f"{where}.started", low=-MAX_SECONDS)
                if started + seconds > MAX_SECONDS:
                    raise self.fail(where, f"ends more than {MAX_SECONDS}s after the suite started")
            times.append(
                ReadyTime(
                    state=self.name(item.get("state"), f"{where}.state"),
                    component=self.name(item.get("component"), f"{where}.component"),
                    seconds=seconds,
                    started=started,
                    attempts=self.count(item.get("attempts", 1), f"{where}.attempts", MAX_ATTEMPTS),
                )
            )
        return tuple(times)

    # --- what the version strip shows ----------------------------------------------------------

    def version(self, doc: dict[str, Any], which: str) -> Any:
        part = doc.get(which)
        version = part.get("version") if isinstance(part, dict) else None
        if isinstance(version, dict | list):
            raise self.fail(f"{which}.version", "is not a string")
        return version

    def current(self, doc: dict[str, Any]) -> str:
        version = self.version(doc, "current")
        return self.said(version or "unknown", "current.version")

    def previous(self, doc: dict[str, Any]) -> str | None:
        version = self.version(doc, "previous")
        return None if version is None else self.said(version, "previous.version")

    def fact(self, doc: dict[str, Any], keys: tuple[str, ...]) -> str | None:
        """The text at ``keys`` (``("current", "origin")``: ``doc["current"]["origin"]``),
        cut as a message is; None when it is missing or not a string (a fact only shown, never
        relied on: another shape is not refused, just not shown)."""
        value: Any = doc
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str) or not value:
            return None
        return self.said(value, ".".join(keys))

    def seed(self, value: Any) -> str | None:
        """The run's seed as text: a whole number (a JSON integer of more than 20 digits reads
        as infinite and is not shown)."""
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return str(value)

    def environment(self, doc: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        found = []
        for what, keys in ENVIRONMENT:
            value = self.fact(doc, keys)
            if value is not None:
                found.append((what, value))
        return tuple(found)

    def dropped(self, doc: dict[str, Any]) -> dict[str, dict[str, str]]:
        """The gates and runtime config a state dropped; another shape is not shown."""
        found = {}
        for key in ("feature_gates_dropped", "runtime_config_dropped"):
            dropped = doc.get(key)
            if isinstance(dropped, dict) and dropped:
                self.tally.entries += len(dropped)
                found[key] = {
                    self.said(name, key): self.said(why, f"{key}[{name[:40]!r}]")
                    for name, why in dropped.items()
                }
        return found

    def deviations(self, doc: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        """(version, deviation) of the previous release's build, then the current one's."""
        found = []
        for which in ("previous", "current"):
            part = doc.get(which)
            deviations = part.get("deviations") if isinstance(part, dict) else None
            if isinstance(deviations, list):
                version = self.said(self.version(doc, which), f"{which}.version")
                for index, deviation in enumerate(deviations):
                    self.tally.entries += 1
                    found.append((version, self.said(deviation, f"{which}.deviations[{index}]")))
        return tuple(found)

    def nothing_to_prove(self, facts: Any) -> tuple[tuple[str, str, str], ...]:
        """(subtest, phase, why) of every phase that passed with nothing to prove, from the
        summary's ``facts`` (per subtest, ``nothing_to_prove/<phase>``: why); anything else in
        there, or of another shape, is not the report's business."""
        if not isinstance(facts, dict):
            return ()
        prefix = f"{NOTHING_TO_PROVE}/"
        found = []
        for subtest, said in sorted(facts.items()):
            if not isinstance(said, dict):
                continue
            for key, why in said.items():
                if key.startswith(prefix):
                    self.tally.entries += 1
                    where = f"facts[{subtest[:40]!r}][{key[:60]!r}]"
                    found.append(
                        (
                            self.said(subtest, where),
                            self.said(key.removeprefix(prefix), where),
                            self.said(why, where),
                        )
                    )
        return tuple(found)

    def keps(self, raw: Any) -> dict[str, tuple[int, ...]]:
        """Per subtest, the numbers of the KEPs it exercises (``keps_by_subtest``, schema 3),
        each once, in the order given; a summary from before names none."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(KEPS_BY_SUBTEST, "is not an object of subtest names to KEP numbers")
        found = {}
        for subtest, numbers in raw.items():
            name = self.name(subtest, KEPS_BY_SUBTEST)
            where = f"{KEPS_BY_SUBTEST}[{name[:40]!r}]"
            self.tally.entries += 1
            if not isinstance(numbers, list):
                raise self.fail(where, "is not a list of KEP numbers")
            if len(numbers) > MAX_KEPS:
                raise self.fail(where, f"names {len(numbers)} KEPs, more than {MAX_KEPS}")
            self.tally.entries += len(numbers)
            found[name] = tuple(
                dict.fromkeys(
                    self.count(number, f"{where}[{index}]", MAX_KEP_NUMBER)
                    for index, number in enumerate(numbers)
                )
            )
        return found
