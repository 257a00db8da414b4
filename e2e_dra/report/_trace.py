"""``trace.json``: the same timelines in Chrome's trace-event format, for Perfetto
(ui.perfetto.dev) or chrome://tracing, which zoom and measure where the HTML page cannot.

One process per suite run, one thread for its cluster steps, one for the components' ready
times and one per subtest; every entry is a complete event (``"ph": "X"``) in microseconds, on
one clock: the suites' own start times, so suites that ran one after another line up so. A
phase's named steps are complete events on its subtest's thread too, inside the phase's, so
Perfetto draws them nested under it.
"""

from __future__ import annotations

from typing import Any

from e2e_dra.report._load import Result, SuiteRecord

CLUSTER_TID = 1
COMPONENTS_TID = 2


def trace_events(records: list[SuiteRecord]) -> dict[str, Any]:
    """The trace of ``records``, as a JSON-able object."""
    starts = [r.started.timestamp() for r in records if r.started is not None]
    origin = min(starts) if starts else 0.0
    events: list[dict[str, Any]] = []
    for pid, record in enumerate(records, start=1):
        offset = record.started.timestamp() - origin if record.started else 0.0
        name = f"{record.suite} ({record.directory.parent.name or record.directory})"
        events.append(_meta("process_name", pid, 0, name))
        events.append(_meta("thread_name", pid, CLUSTER_TID, "cluster"))
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
        )
        tids: dict[str, int] = {}
        if record.ready:
            events.append(_meta("thread_name", pid, COMPONENTS_TID, "components ready"))
        for t in record.ready:
            if t.started is None:
                continue
            events.append(
                _complete(
                    f"{t.component} {t.state}",
                    pid,
                    COMPONENTS_TID,
                    offset + t.started,
                    t.seconds,
                    {"attempts": t.attempts},
                )
            )
        for r in record.results:
            if r.subtest is None:
                tid = CLUSTER_TID
            else:
                if r.subtest not in tids:
                    tids[r.subtest] = COMPONENTS_TID + 1 + len(tids)
                    events.append(_meta("thread_name", pid, tids[r.subtest], r.subtest))
                tid = tids[r.subtest]
            args: dict[str, Any] = {"outcome": r.outcome}
            if r.message:
                args["message"] = r.message
            if r.failed_step is not None:
                args["failed_step"] = r.failed_step
            events.append(_complete(r.id, pid, tid, offset + r.start, r.seconds, args))
            events += _steps(r, pid, tid, offset)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _steps(result: Result, pid: int, tid: int, offset: float) -> list[dict[str, Any]]:
    """The steps of ``result`` as slices inside its own: cut to its interval (the two clocks
    may differ by rounding), since a slice that sticks out does not nest."""
    begin = round((offset + result.start) * 1e6)
    end = begin + max(1, round(result.seconds * 1e6))
    events = []
    for step in result.steps:
        ts = min(max(begin, round((offset + step.start) * 1e6)), end - 1)
        stop = min(end, max(ts + 1, round((offset + step.start + step.seconds) * 1e6)))
        events.append(
            {
                "name": step.name,
                "cat": f"step {step.outcome}",
                "ph": "X",
                "ts": ts,
                "dur": stop - ts,
                "pid": pid,
                "tid": tid,
                "args": {"outcome": step.outcome, "phase": result.id},
            }
        )
    return events


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def _complete(
    name: str, pid: int, tid: int, start: float, seconds: float, args: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": name,
        "cat": args.get("outcome", "ready"),
        "ph": "X",
        "ts": round(start * 1e6),
        "dur": max(1, round(seconds * 1e6)),
        "pid": pid,
        "tid": tid,
        "args": args,
    }
