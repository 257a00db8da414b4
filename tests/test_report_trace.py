"""``trace.json`` as Perfetto reads it: a thread per component and per subtest, and on each
thread slices that nest (a child never ends after its parent, siblings never overlap), whatever
rounding or a hand-made summary did to the times."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from synthetic_run import COMPONENTS, synthetic_run

from e2e_dra.report import load_summary, summaries_of, trace_events, write_report


def _threads(trace: dict[str, Any]) -> dict[tuple[int, int], str]:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def _check_nesting(trace: dict[str, Any]) -> int:
    """Asserts that each thread's slices form a stack: every slice lies inside the one open
    when it starts, or starts after it ended. Returns how many were nested in another."""
    lanes: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["ts"], int), e
            lanes[(e["pid"], e["tid"])].append(e)
    nested = 0
    for events in lanes.values():
        # a viewer's order: by start, the longer (the parent) first
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[int] = []  # ends of the open slices
        for e in events:
            while stack and e["ts"] >= stack[-1] and not (e["dur"] == 0 and e["ts"] == stack[-1]):
                stack.pop()
            end = e["ts"] + e["dur"]
            assert not stack or end <= stack[-1], (e, stack)  # never ends after its parent
            nested += bool(stack)
            stack.append(end)
    return nested


def test_each_component_has_a_thread_of_its_own(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path / "artifacts")

    trace = json.loads(write_report(summaries_of([run]), run).trace.read_text())

    names = _threads(trace)
    upgrade = {name for (pid, _), name in names.items() if pid == 1}
    assert set(COMPONENTS) <= upgrade
    assert len(names) == len(set(names))  # one tid per thread name and process
    kubelet = next(tid for (pid, tid), n in names.items() if (pid, n) == (1, "kubelet"))
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == kubelet
              and e["pid"] == 1]  # fmt: skip
    assert [e["args"]["state"] for e in slices] == [
        "0-initial-1.37", "1-v1.38.0-beta.0", "2-restored-1.37"]  # fmt: skip
    assert all(e["name"].startswith("kubelet ") for e in slices)
    _check_nesting(trace)


def _summary(tmp_path: Path, results: list[dict[str, Any]], ready: list[dict[str, Any]]) -> Path:
    path = tmp_path / "s" / "summary.json"
    path.parent.mkdir(parents=True)
    doc = {"schema_version": 2, "suite": "s", "results": results, "components_ready": ready}
    path.write_text(json.dumps(doc))
    return path


def test_slices_nest_and_siblings_never_overlap_whatever_the_times_say(tmp_path: Path) -> None:
    """Steps that overlap their siblings, stick out of their parent or their phase, phases of
    one subtest that overlap, and a component whose starts overlap: laid out as a stack."""
    steps = [
        {"name": "a", "start": 9.0, "seconds": 4.0, "outcome": "passed"},  # before its phase
        {"name": "a.0", "start": 10.5, "seconds": 1.0, "outcome": "passed"},  # inside a
        {"name": "b", "start": 12.5, "seconds": 2.0, "outcome": "passed"},  # overlaps a's end
        {"name": "d", "start": 14.2, "seconds": 9.0, "outcome": "failed"},  # beyond the phase
    ]
    results = [
        {"id": "x/p", "outcome": "failed", "seconds": 6.0, "start": 10.0, "phase": "p",
         "subtest": "x", "steps": steps, "failed_step": "d"},
        {"id": "x/q", "outcome": "passed", "seconds": 2.0, "start": 15.5, "phase": "q",
         "subtest": "x"},  # starts before x/p ended
        {"id": "up", "outcome": "passed", "seconds": 3.0, "start": 0.0, "step": "up"},
        {"id": "down", "outcome": "passed", "seconds": 3.0, "start": 2.0, "step": "down"},
    ]  # fmt: skip
    ready = [
        {"state": "0", "component": "k", "seconds": 5.0, "started": 0.0},
        {"state": "1", "component": "k", "seconds": 1.0, "started": 4.0},  # before 0 was ready
    ]

    trace = trace_events([load_summary(_summary(tmp_path, results, ready))])

    assert _check_nesting(trace) == 4  # the four steps, inside the phase (a.0 inside a)
    x = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"] if e["ph"] == "X"}
    assert x["x/p"] == (10_000_000, 16_000_000)
    assert x["a"] == (10_000_000, 13_000_000)  # cut to its phase
    assert x["a.0"] == (10_500_000, 11_500_000)  # a child, as it was
    assert x["b"] == (13_000_000, 14_500_000)  # a sibling, from a's end
    assert x["d"] == (14_500_000, 16_000_000)  # after b, cut to the phase's end
    assert x["x/q"][0] == 16_000_000  # the next phase on the thread starts when p ended
    assert x["down"][0] == 3_000_000 and x["k 1"][0] == 5_000_000
    tid = {e["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert tid["k 1"] == tid["k 0"] != tid["x/p"] != tid["up"]
