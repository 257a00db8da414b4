"""Writing ``report.html`` and ``trace.json`` from summaries, atomically (a reader never sees
half a page, and a run cancelled while writing leaves the previous report)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.errors import E2EDRAError, LocalError, describe_os_error
from e2e_dra.hostkit import atomic_write_text
from e2e_dra.report._html import Page
from e2e_dra.report._load import SuiteRecord, find_summaries, load_summary
from e2e_dra.report._trace import trace_events

REPORT_FILE = "report.html"
TRACE_FILE = "trace.json"


@dataclass(frozen=True)
class Written:
    """What a report run wrote, and the summaries it had to leave out (lenient mode)."""

    html: Path
    trace: Path
    suites: int
    left_out: tuple[str, ...] = ()


def summaries_of(directories: Iterable[Path]) -> list[Path]:
    """Every summary of the given artifacts folders, in the order given."""
    found: list[Path] = []
    for directory in directories:
        found += [p for p in find_summaries(directory) if p not in found]
    return found


def write_report(summaries: Iterable[Path], out: Path, *, lenient: bool = False) -> Written:
    """``out/report.html`` and ``out/trace.json`` of ``summaries``. A summary that cannot be
    read fails the whole report, or with ``lenient`` (a run's own report, where a half-written
    summary must not cost the others) is left out and said on the page."""
    records: list[SuiteRecord] = []
    left_out: list[str] = []
    for path in summaries:
        try:
            records.append(load_summary(path))
        except E2EDRAError as exc:
            if not lenient:
                raise
            left_out.append(str(exc))
    records.sort(key=lambda r: (r.started.timestamp() if r.started else 0.0, r.suite))
    html, trace = out / REPORT_FILE, out / TRACE_FILE
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(html, Page(records, html, left_out).html())
        atomic_write_text(trace, json.dumps(trace_events(records)) + "\n")
    except OSError as exc:
        raise LocalError(describe_os_error(exc, out)) from None
    return Written(html, trace, len(records), tuple(left_out))
