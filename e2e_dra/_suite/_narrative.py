"""What a suite says while it runs (:class:`Narrator`), and the narrative it leaves behind
(:class:`Narrative`).

A main job runs four suites of about 200 entries each, and its subtests log every object they
create and delete: thousands of lines in which a failure, or how far the run got, is lost. So the
console shows headlines by default, each a record marked with :func:`~e2e_dra._console.as_headline`
and prefixed with the suite's place in the run (``[2/4] gate-cycle``): the suite's start with its
release pair, each cluster step, each batch of phases when its last phase is reported (with a
done/total count), each known Kubernetes bug seen, each failure, and a verdict that says where the
summary, the narrative and the report are. Every progress line, headline or not, is kept whole
in ``<suite>/console.log`` and a phase's lines also in ``<suite>/console/<subtest>.log``, so the
detail a console no longer shows is one file away, next to the logs it talks about; a failure's
notes name its subtest's narrative, so the report links it from the failed cell.

Free of pytest: the plugin attaches the narrative's handler and shows the headlines.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from e2e_dra._console import LINE_FORMAT, TIME_FORMAT, as_headline, is_progress
from e2e_dra._suite._steps import Entry, SubtestPhase
from e2e_dra._suite._together import subtest_of
from e2e_dra.report import safe_name

NARRATIVE = "console.log"
"""Under a suite's folder: every progress line of the suite, as the console shows it at ``-v``."""
SUBTEST_NARRATIVES = "console"
"""Under a suite's folder: ``<subtest>.log``, the lines its phases logged."""
REPLAYED = "e2e_dra_replayed"
"""The attribute of a record logged again for a phase's own test (it was written once already)."""
MAX_SAID = 400
"""Characters of a message a headline carries; the summary and the report keep it whole."""

logger = logging.getLogger(__name__)


class LineFormatter(logging.Formatter):
    """``[HH:MM:SS] message``, a phase thread's line naming its subtest (several run at once):
    ``[HH:MM:SS] core-dra: message``. The console and the narrative write the same lines."""

    def __init__(self) -> None:
        super().__init__(LINE_FORMAT, TIME_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        subtest = subtest_of(record)
        if subtest is None:
            return line
        stamp, _, message = line.partition("] ")
        return f"{stamp}] {subtest}: {message}"


class Narrative(logging.Handler):
    """Every progress record of a suite in ``<directory>/console.log``, a phase's also in
    ``<directory>/console/<subtest>.log``; written as they come (line-buffered), so a run that
    is killed still leaves what it said."""

    def __init__(self, directory: Path) -> None:
        super().__init__(logging.INFO)
        self.directory = directory
        self.setFormatter(LineFormatter())
        self.addFilter(is_progress)
        self._files: dict[str, IO[str]] = {}  # "" is the suite's; else a subtest's
        self._broken: set[str] = set()  # files that could not be written: not tried again
        self._subtests: set[str] = set()  # those with a narrative, also once closed

    @property
    def path(self) -> Path:
        return self.directory / NARRATIVE

    def subtest_path(self, subtest: str) -> Path:
        return self.directory / SUBTEST_NARRATIVES / f"{safe_name(subtest)}.log"

    @contextlib.contextmanager
    def attached(self) -> Iterator[Narrative]:
        """Recording while the block runs (on the root logger: the engine's, the drivers' and
        other libraries' warnings too); the files closed after it."""
        root = logging.getLogger()
        root.addHandler(self)
        try:
            yield self
        finally:
            root.removeHandler(self)
            self.close()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, REPLAYED, False):
            return
        try:
            line = self.format(record) + "\n"
        except Exception:  # a record that cannot be formatted must not fail a test
            self.handleError(record)
            return
        self._write("", self.path, line)
        subtest = subtest_of(record)
        if subtest is not None:
            self._write(subtest, self.subtest_path(subtest), line)

    def _write(self, key: str, path: Path, line: str) -> None:
        """Best effort: a full disk costs the narrative, never the run."""
        if key in self._broken:
            return
        try:
            out = self._files.get(key)
            if out is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                out = self._files[key] = path.open("a", encoding="utf-8", buffering=1)
                self._subtests.update([key] if key else [])
            out.write(line)
        except (OSError, ValueError):
            self._broken.add(key)

    def files(self) -> dict[str, Any]:
        """For ``summary.json``'s ``console``: the narratives written so far, relative to the
        suite's folder (``{"log": "console.log", "subtests": {"core-dra": "console/..."}}``)."""
        found: dict[str, Any] = {}
        if self.path.is_file():
            found["log"] = NARRATIVE
        subtests = {
            key: str(self.subtest_path(key).relative_to(self.directory))
            for key in sorted(self._subtests)
            if self.subtest_path(key).is_file()
        }
        if subtests:
            found["subtests"] = subtests
        return found

    def close(self) -> None:
        with self.lock or contextlib.nullcontext():
            for out in self._files.values():
                with contextlib.suppress(OSError, ValueError):
                    out.close()
            self._files.clear()
        super().close()


def versions_said(description: Mapping[str, Any]) -> str:
    """``v1.37.2 -> v1.38.0-beta.0`` from a backend's description: the release the suite starts
    on (the kubelet's own in kubelet-last), then the one under test; empty when not known yet."""

    def version(key: str) -> str:
        value = description.get(key)
        return str(value.get("version") or "") if isinstance(value, Mapping) else ""

    current = version("current")
    older = version("kubelet") or version("previous")
    if current and older and older != current:
        return f"{older} -> {current}"
    return current


class Narrator:
    """The headlines of one suite's run (see the module's docstring); ``position`` of
    ``suites`` is its place in the run, ``total`` the entries (tests) it runs, ``subtests`` how
    many subtests they belong to, ``versions`` the release pair once known
    (:func:`versions_said`)."""

    def __init__(
        self,
        suite: str,
        *,
        position: int = 1,
        suites: int = 1,
        total: int = 0,
        subtests: int = 0,
        versions: Callable[[], str] = lambda: "",
        narrative: Narrative | None = None,
    ) -> None:
        self.prefix = f"[{position}/{suites}] {suite}"
        self.total = total
        self.subtests = subtests
        self.narrative = narrative
        self._versions = versions
        self._banner_said = False
        self._done = 0
        self._started = time.monotonic()
        self._batch_of: dict[SubtestPhase, int] = {}  # a phase not reported yet -> its batch
        self._batches: dict[int, _Batch] = {}

    def say(self, message: str) -> None:
        logger.info(f"{self.prefix}{message}", extra=as_headline())

    def begin(self, entry: Entry) -> None:
        """``entry`` starts: the suite's banner once its releases are known, a cluster step's
        own line."""
        self._banner()
        if entry.chain_position is None:
            self.say(f": {entry.title} ({self._done}/{self.total} done)")

    def batch(self, phases: Sequence[SubtestPhase]) -> None:
        """``phases`` start together (one alone: a batch of one); said when the last is
        reported."""
        key = len(self._batches)
        self._batches[key] = _Batch([p.subtest for p in phases], phases[0].name)
        self._batch_of.update(dict.fromkeys(phases, key))

    def ended(self, entry: Entry, outcome: str, message: str = "") -> None:
        """``entry`` was reported: a failure and a known bug are said at once; a batch when its
        last phase is."""
        self._done += 1
        said = _short(message)
        if outcome in ("failed", "interrupted"):
            self._banner()
            self.say(f": {outcome.upper()} {entry.id}" + (f": {said}" if said else ""))
        elif outcome == "xfailed":
            self.say(f": known bug seen in {entry.id}: {said}")
        key = self._batch_of.pop(entry, None) if isinstance(entry, SubtestPhase) else None
        if key is None:
            return
        batch = self._batches[key]
        batch.outcomes[outcome] += 1
        if sum(batch.outcomes.values()) == len(batch.subtests):
            del self._batches[key]
            self.say(f": {batch.describe()} ({self._done}/{self.total} done)")

    def notes(self, entry: Entry) -> list[str]:
        """For a failure's notes (which the summary turns into the result's ``logs``): the
        narrative of its subtest, or the suite's for a cluster step."""
        if self.narrative is None:
            return []
        if entry.subtest is not None:
            path = self.narrative.subtest_path(entry.subtest)
            if path.is_file():
                return [f"e2e-dra: {entry.subtest}'s console lines: {path}"]
        path = self.narrative.path
        return [f"e2e-dra: the suite's console lines: {path}"] if path.is_file() else []

    def verdict(
        self, results: Sequence[Mapping[str, Any]], summary: Path, report: Path | None
    ) -> str:
        """The suite's last line: how it went, in counts, and where to read more; returned."""
        self._banner()
        counts = Counter(str(r.get("outcome")) for r in results)
        if counts["interrupted"]:
            word = "INTERRUPTED"
        elif counts["failed"]:
            word = "FAILED"
        else:
            word = "PASSED"
        parts = [f"{counts[o]} {o}" for o in ("passed", "failed", "interrupted") if counts[o]]
        if counts["xfailed"]:
            parts.append(f"{counts['xfailed']} known bug{'s' * (counts['xfailed'] > 1)}")
        if counts["skipped"]:
            parts.append(f"{counts['skipped']} skipped")
        if self.total > len(results):
            parts.append(f"{self.total - len(results)} not run")
        where = [f"summary {summary}"]
        if self.narrative is not None and self.narrative.path.is_file():
            where.append(f"console log {self.narrative.path}")
        if report is not None:
            where.append(f"report {report}")
        elapsed = _duration(time.monotonic() - self._started)
        line = f": {word}: {', '.join(parts) or 'nothing ran'} in {elapsed}; {'; '.join(where)}"
        self.say(line)
        return self.prefix + line

    def _banner(self) -> None:
        """The suite's first headline, with its release pair: said once the pair is known (the
        versions step resolves it), or before anything else it says after its first entry."""
        if self._banner_said:
            return
        try:
            pair = self._versions()
        except Exception:  # a description that cannot be read costs the pair, not the run
            pair = ""
        if not pair and self._done == 0:
            return
        self._banner_said = True
        many = f"{self.subtests} subtest{'s' * (self.subtests != 1)}, {self.total} tests"
        self.say(f" {pair}: {many}" if pair else f": {many}")


class _Batch:
    """The phases of one batch: their subtests, and how those reported so far ended."""

    def __init__(self, subtests: list[str], phase: str) -> None:
        self.subtests = subtests
        self.phase = phase
        self.outcomes: Counter[str] = Counter()
        self.started = time.monotonic()

    def describe(self) -> str:
        took = _duration(time.monotonic() - self.started)
        if len(self.subtests) == 1:
            (outcome,) = self.outcomes
            return f"{self.phase}: {self.subtests[0]} alone, {_outcome(outcome)} in {took}"
        order = {o: i for i, o in enumerate(_ORDER)}
        ranked = sorted(self.outcomes.items(), key=lambda item: order.get(item[0], len(order)))
        counts = ", ".join(f"{n} {_outcome(o)}" for o, n in ranked)
        return f"{self.phase}: {len(self.subtests)} subtests together in {took}: {counts}"


_ORDER = ("passed", "failed", "interrupted", "xfailed", "skipped")


def _outcome(outcome: str) -> str:
    return "known bug" if outcome == "xfailed" else outcome


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``: how long, at a glance."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _short(message: str) -> str:
    """A message's first line, cut to :data:`MAX_SAID` characters."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first if len(first) <= MAX_SAID else first[: MAX_SAID - 3] + "..."
