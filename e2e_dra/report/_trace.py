"""``trace.json``: the same timelines in Chrome's trace-event format, for Perfetto
(ui.perfetto.dev) or chrome://tracing, which zoom and measure where the HTML page cannot.

One process per suite run; in it one thread for its cluster steps, one per component (each of
its starts until it was ready, state after state) and one per subtest (its phases, and each
phase's named steps inside it). Every entry is a complete event (``"ph": "X"``) in microseconds,
on one clock: the suites' own start times, so suites that ran one after another line up so.

A viewer draws one thread's slices as a stack: a slice that sticks out of its parent, or two
siblings that overlap, are drawn wrong (Perfetto breaks the thread's nesting, chrome://tracing
drops slices). The summary's times come from two clocks, rounded apart, so every thread is laid
out here (:class:`_Thread`): slices one after another on a thread never overlap (a later one
starts where the one before it ended), a step that lies inside another one of its phase is that
one's child, and one that ends after it is its sibling, moved to start when it ended; every step
is cut to its phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from e2e_dra.report._load import Result, SuiteRecord

CLUSTER_TID = 1
FIRST_TID = 2


def trace_events(records: list[SuiteRecord]) -> dict[str, Any]:
    """The trace of ``records``, as a JSON-able object."""
    starts = [r.started.timestamp() for r in records if r.started is not None]
    origin = min(starts) if starts else 0.0
    events: list[dict[str, Any]] = []
    for pid, record in enumerate(records, start=1):
        offset = record.started.timestamp() - origin if record.started else 0.0
        events += _process(pid, record, offset)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _process(pid: int, record: SuiteRecord, offset: float) -> list[dict[str, Any]]:
    """One suite run's events: its names, then each thread's slices."""
    name = f"{record.suite} ({record.directory.parent.name or record.directory})"
    events = [
        _meta("process_name", pid, 0, name),
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}},
    ]
    threads: dict[str, _Thread] = {"": _Thread(pid, CLUSTER_TID, "cluster")}

    def thread(key: str, label: str) -> _Thread:
        if key not in threads:
            threads[key] = _Thread(pid, FIRST_TID + len(threads) - 1, label)
        return threads[key]

    for t in sorted(record.ready, key=lambda t: t.started or 0.0):
        if t.started is None:
            continue
        ready = {"attempts": t.attempts, "state": t.state}
        lane = thread(f"component {t.component}", t.component)
        lane.slice(f"{t.component} {t.state}", "ready", offset + t.started, t.seconds, ready)
    for r in sorted(record.results, key=lambda r: r.start):
        lane = threads[""] if r.subtest is None else thread(f"subtest {r.subtest}", r.subtest)
        args: dict[str, Any] = {"outcome": r.outcome}
        if r.message:
            args["message"] = r.message
        if r.failed_step is not None:
            args["failed_step"] = r.failed_step
        lane.slice(r.id, r.outcome, offset + r.start, r.seconds, args, steps=(r, offset))
    for lane in threads.values():
        events.append(_meta("thread_name", pid, lane.tid, lane.label))
        events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pid,
                "tid": lane.tid,
                "args": {"sort_index": lane.tid},
            }
        )
        events += lane.events
    return events


@dataclass
class _Thread:
    """One thread's slices, laid out so that they nest: each top-level slice starts no earlier
    than the one before it ended."""

    pid: int
    tid: int
    label: str
    events: list[dict[str, Any]] = field(default_factory=list)
    free: int | None = None  # microseconds: where the last top-level slice ended

    def slice(
        self,
        name: str,
        category: str,
        start: float,
        seconds: float,
        args: dict[str, Any],
        steps: tuple[Result, float] | None = None,
    ) -> None:
        """A top-level slice from ``start`` for ``seconds`` (at least 1 µs), moved to start
        where the one before it ended when they overlap; ``steps``: (the result whose steps
        go inside it, the run's offset)."""
        ts = round(start * 1e6)
        end = ts + max(1, round(seconds * 1e6))
        if self.free is not None and ts < self.free:
            ts = self.free
            end = max(end, ts + 1)
        self.free = end
        self.events.append(self._event(name, category, ts, end, args))
        if steps is not None:
            self._steps(*steps, ts, end)

    def _steps(self, result: Result, offset: float, begin: int, end: int) -> None:
        """``result``'s steps inside its slice ``[begin, end]``, the earliest first: a step that
        lies inside an open one is its child; one that ends after it is its sibling, moved to
        start when it ended (two clocks rounded apart, or a summary made by hand); every one is
        cut to the phase."""
        open_: list[tuple[int, int]] = [(begin, end)]  # the phase, then the open steps
        last_end: dict[int, int] = {}  # depth -> where the last slice at that depth ended
        for step in sorted(result.steps, key=lambda s: (s.start, -s.seconds)):
            ts = round((offset + step.start) * 1e6)
            stop = max(ts, round((offset + step.start + step.seconds) * 1e6))
            while len(open_) > 1 and (ts >= open_[-1][1] or stop > open_[-1][1]):
                open_.pop()
            depth = len(open_)
            for deeper in [d for d in last_end if d > depth]:
                del last_end[deeper]  # a new parent: its children start afresh
            parent_begin, parent_end = open_[-1]
            ts = min(max(ts, parent_begin, last_end.get(depth, parent_begin)), parent_end)
            stop = min(max(stop, ts), parent_end)
            last_end[depth] = stop
            open_.append((ts, stop))
            args = {"outcome": step.outcome, "phase": result.id}
            self.events.append(self._event(step.name, f"step {step.outcome}", ts, stop, args))

    def _event(
        self, name: str, category: str, ts: int, end: int, args: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "name": name,
            "cat": category,
            "ph": "X",
            "ts": ts,
            "dur": end - ts,
            "pid": self.pid,
            "tid": self.tid,
            "args": args,
        }


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}
