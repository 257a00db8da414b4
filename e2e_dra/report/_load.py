"""Reading ``summary.json`` files back: bounded, checked, and said in one line when wrong.

A report merges artifact folders from several machines and several e2e-dra releases, so the
reader trusts nothing: a file too large, not JSON, or of the wrong shape is named with what is
wrong, never a traceback. Summaries from before ``schema_version`` 1 (no ``start`` per result)
still read: their entries ran one after another, so each one's start is the sum of the ones
before it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from e2e_dra.errors import InputError, LocalError, describe_os_error
from e2e_dra.report._schema import SUMMARY_FILE

MAX_SUMMARY_BYTES = 32 * 1024 * 1024
"""A summary of the largest plan is a few hundred KiB; anything near this is not one of ours."""

OUTCOMES = ("passed", "failed", "xfailed", "skipped", "interrupted")
"""``xfailed``: a phase that a known Kubernetes bug broke, as its subtest declares it must."""


class SummaryError(InputError):
    """A summary.json (or the folder that should hold one) that cannot be reported on."""


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
    """One suite's summary, as the report needs it; ``raw`` keeps the rest."""

    path: Path
    suite: str
    started: datetime | None
    wall_seconds: float
    finished: bool
    results: tuple[Result, ...]
    binaries: dict[str, dict[str, str]] = field(default_factory=dict)
    ready: tuple[ReadyTime, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        return self.path.parent

    def phases(self) -> list[str]:
        """The phases of this suite, in the order they first ran."""
        return list(dict.fromkeys(r.phase for r in self.results if r.phase))


def find_summaries(directory: Path) -> list[Path]:
    """The summaries of one artifacts folder: its own, or those of its suites' folders."""
    if not directory.exists():
        raise SummaryError(f"{directory}: no such directory")
    if not directory.is_dir():
        raise SummaryError(f"{directory}: not a directory (give an artifacts folder)")
    own = directory / SUMMARY_FILE
    if own.is_file():
        return [own]
    found = sorted(p for p in directory.glob(f"*/{SUMMARY_FILE}") if p.is_file())
    if not found:
        raise SummaryError(
            f"{directory}: no {SUMMARY_FILE} in it or in a folder under it (not an artifacts dir?)"
        )
    return found


def load_summary(path: Path) -> SuiteRecord:
    """``path`` read and checked; :class:`SummaryError` (or LocalError) names what is wrong."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SUMMARY_BYTES + 1)
    except FileNotFoundError:
        raise SummaryError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SummaryError(f"{path}: is a directory, not a summary.json") from None
    except OSError as exc:
        raise LocalError(describe_os_error(exc, path)) from None
    if len(data) > MAX_SUMMARY_BYTES:
        limit = MAX_SUMMARY_BYTES // (1024 * 1024)
        raise SummaryError(f"{path}: larger than {limit} MiB, not a summary of e2e-dra")
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise SummaryError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise SummaryError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise SummaryError(f"{path}: JSON nested too deeply") from None
    return _Checker(path).record(document)


class _Checker:
    """Turns a parsed summary into a :class:`SuiteRecord`, naming the first key that is wrong."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, what: str) -> SummaryError:
        return SummaryError(f"{self.path}: {where} {what}")

    def record(self, doc: Any) -> SuiteRecord:
        if not isinstance(doc, dict):
            raise self.fail("the top level", "is not a JSON object")
        version = doc.get("schema_version", 0)
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise self.fail("schema_version", "is not a non-negative integer")
        suite = doc.get("suite")
        if not isinstance(suite, str) or not suite:
            raise self.fail("suite", "is missing or not a non-empty string")
        raw_results = doc.get("results")
        if not isinstance(raw_results, list):
            raise self.fail("results", "is missing or not a list")
        results = self.results(raw_results)
        return SuiteRecord(
            path=self.path,
            suite=suite,
            started=self.started(doc.get("started")),
            wall_seconds=self.number(doc.get("wall_seconds", 0), "wall_seconds"),
            finished=bool(doc.get("finished", False)),
            results=results,
            binaries=self.binaries(doc.get("binaries", {})),
            ready=self.ready(doc.get("components_ready", [])),
            raw=doc,
        )

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.fail(where, "is not a non-negative number")
        return float(value)

    def text(self, value: Any, where: str, *, required: bool = False) -> str | None:
        if value is None and not required:
            return None
        if not isinstance(value, str):
            raise self.fail(where, "is missing or not a string" if required else "is not a string")
        return value

    def started(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail("started", "is not a string")
        try:
            return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            example = "2026-12-01T18:10:12+0000"
            raise self.fail("started", f"is not a time like {example}: {value[:40]!r}") from None

    def results(self, raw: list[Any]) -> tuple[Result, ...]:
        results = []
        clock = 0.0  # before schema 1: the entries ran one after another
        for index, item in enumerate(raw):
            where = f"results[{index}]"
            if not isinstance(item, dict):
                raise self.fail(where, "is not a JSON object")
            outcome = self.text(item.get("outcome"), f"{where}.outcome", required=True)
            if outcome not in OUTCOMES:
                raise self.fail(f"{where}.outcome", f"is {outcome!r}, not one of {OUTCOMES}")
            seconds = self.number(item.get("seconds", 0), f"{where}.seconds")
            start = item.get("start")
            start = clock if start is None else self.number(start, f"{where}.start")
            clock = start + seconds
            result = Result(
                id=str(self.text(item.get("id"), f"{where}.id", required=True)),
                outcome=str(outcome),
                seconds=seconds,
                start=start,
                step=self.text(item.get("step"), f"{where}.step"),
                phase=self.text(item.get("phase"), f"{where}.phase"),
                subtest=self.text(item.get("subtest"), f"{where}.subtest"),
                message=self.text(item.get("message"), f"{where}.message") or "",
                logs=self.logs(item.get("logs", []), f"{where}.logs"),
            )
            if result.phase is not None and result.subtest is None:
                raise self.fail(where, "has a phase but no subtest")
            results.append(result)
        return tuple(results)

    def logs(self, raw: Any, where: str) -> tuple[tuple[str, str], ...]:
        if not isinstance(raw, list):
            raise self.fail(where, "is not a list")
        logs = []
        for index, item in enumerate(raw):
            if not isinstance(item, dict):
                raise self.fail(f"{where}[{index}]", "is not a JSON object")
            path = self.text(item.get("path"), f"{where}[{index}].path", required=True)
            label = self.text(item.get("label"), f"{where}[{index}].label") or str(path)
            logs.append((label, str(path)))
        return tuple(logs)

    def binaries(self, raw: Any) -> dict[str, dict[str, str]]:
        if not isinstance(raw, dict) or not all(
            isinstance(state, str)
            and isinstance(components, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in components.items())
            for state, components in raw.items()
        ):
            raise self.fail("binaries", "is not an object of states to {component: version}")
        return raw

    def ready(self, raw: Any) -> tuple[ReadyTime, ...]:
        if not isinstance(raw, list):
            raise self.fail("components_ready", "is not a list")
        times = []
        for index, item in enumerate(raw):
            where = f"components_ready[{index}]"
            if not isinstance(item, dict):
                raise self.fail(where, "is not a JSON object")
            started = item.get("started")
            attempts = item.get("attempts", 1)
            times.append(
                ReadyTime(
                    state=str(self.text(item.get("state"), f"{where}.state", required=True)),
                    component=str(
                        self.text(item.get("component"), f"{where}.component", required=True)
                    ),
                    seconds=self.number(item.get("seconds", 0), f"{where}.seconds"),
                    started=self.optional_float(started, f"{where}.started"),
                    attempts=attempts if isinstance(attempts, int) else 1,
                )
            )
        return tuple(times)

    def optional_float(self, value: Any, where: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, "is not a number")
        return float(value)
