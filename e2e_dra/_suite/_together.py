"""Phases that run at the same time: each in a thread of its own, its log records kept apart.

Within one phase of the plan every subtest has its own driver, devices and objects, so their
callbacks can run together: a phase then takes as long as its longest subtest, not the sum of
all. Each still has its own reported test, which replays the phase's outcome: its error (with
its traceback), its duration, and its log records, so a failure's report shows that subtest's
lines. Live, every line of a phase thread is prefixed with its subtest (:func:`subtest_of`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from e2e_dra.hostkit import join_all
from e2e_dra.waits import abort_when

THREAD_PREFIX = "phase:"
INTERRUPT_GRACE = 30.0
"""How long the threads get to end after Ctrl-C (every wait of theirs ends at once)."""

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """How one phase ended, kept until its own test reports it."""

    error: BaseException | None = None
    started: float = 0.0  # time.time()
    seconds: float = 0.0
    records: list[logging.LogRecord] = field(default_factory=list)


def subtest_of(record: logging.LogRecord) -> str | None:
    """The subtest whose phase thread logged ``record``, or None (the main thread, a driver)."""
    name = record.threadName or ""
    return name.removeprefix(THREAD_PREFIX) if name.startswith(THREAD_PREFIX) else None


@contextlib.contextmanager
def as_phase_thread(subtest: str) -> Iterator[None]:
    """The calling thread named as ``subtest``'s phase thread while a phase of it runs alone
    there: its lines (and those of the waits it starts, named after it) are that subtest's, live
    and in its narrative, as those of a phase run together are."""
    thread = threading.current_thread()
    before, thread.name = thread.name, THREAD_PREFIX + subtest
    try:
        yield
    finally:
        thread.name = before


class _Recorder(logging.Handler):
    """Keeps every record a phase thread logs, by subtest."""

    def __init__(self) -> None:
        super().__init__()
        self.records: dict[str, list[logging.LogRecord]] = {}
        self._lock_records = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        subtest = subtest_of(record)
        if subtest is not None:
            with self._lock_records:
                self.records.setdefault(subtest, []).append(record)


def run_together(jobs: Mapping[str, Callable[[], None]]) -> dict[str, Outcome]:
    """Run every job (by subtest) in its own thread; returns when all ended, how each ended.

    Ctrl-C in the main thread ends every wait of the jobs (they fail as interrupted) and is
    raised once they ended or after :data:`INTERRUPT_GRACE`.
    """
    outcomes = {name: Outcome() for name in jobs}
    recorder = _Recorder()
    root = logging.getLogger()
    root.addHandler(recorder)

    def run(name: str, job: Callable[[], None]) -> None:
        outcomes[name].started = time.time()
        started = time.monotonic()
        try:
            job()
        except BaseException as exc:  # reported by the subtest's own test, in the main thread
            outcomes[name].error = exc
        finally:
            outcomes[name].seconds = time.monotonic() - started

    threads = [
        threading.Thread(target=run, args=(name, job), name=THREAD_PREFIX + name, daemon=True)
        for name, job in jobs.items()
    ]
    try:
        for thread in threads:
            thread.start()
        join_all(threads)
    except KeyboardInterrupt:
        with abort_when(lambda: "interrupted"):
            deadline = time.monotonic() + INTERRUPT_GRACE
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        raise
    finally:
        root.removeHandler(recorder)
    for name, outcome in outcomes.items():
        outcome.records = recorder.records.get(name, [])
    return outcomes
