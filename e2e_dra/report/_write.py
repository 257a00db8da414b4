"""Writing ``report.html``, ``trace.json``, ``prr-evidence.md`` and ``metadata.json`` from
summaries: the whole report rendered first, then written atomically, the page last (a reader
never sees half a page; a report that fails, in rendering or in writing, or a run cancelled while
writing, leaves the previous page whole)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from e2e_dra._urls import report_link_base
from e2e_dra.errors import E2EDRAError, InputError, LocalError, describe_os_error
from e2e_dra.hostkit import atomic_write_text
from e2e_dra.report._evidence import EVIDENCE_FILE, Evidence
from e2e_dra.report._headline import Headline
from e2e_dra.report._html import Page, printable
from e2e_dra.report._limits import FEWER, MAX_SUMMARIES, Budget, SummaryError
from e2e_dra.report._links import base_depth
from e2e_dra.report._load import SuiteRecord, find_summaries, load_summary
from e2e_dra.report._metadata import METADATA_FILE, merged, metadata
from e2e_dra.report._runs import runs_of
from e2e_dra.report._trace import trace_events
from e2e_dra.settings import parsed

REPORT_FILE = "report.html"
TRACE_FILE = "trace.json"


@dataclass(frozen=True)
class Written:
    """What a report run wrote, and the summaries it had to leave out (lenient mode)."""

    html: Path
    trace: Path
    suites: int
    left_out: tuple[str, ...] = ()
    evidence: Path | None = None  # prr-evidence.md
    metadata: Path | None = None  # metadata.json, for Prow


def summaries_of(directories: Iterable[Path]) -> list[Path]:
    """Every summary of the given artifacts folders, in the order given (at most
    :data:`~._limits.MAX_SUMMARIES` in all)."""
    found: list[Path] = []
    for directory in directories:
        found += [p for p in find_summaries(directory) if p not in found]
        if len(found) > MAX_SUMMARIES:
            raise SummaryError(
                f"{directory}: with the folders before it, more than {MAX_SUMMARIES} summaries; "
                f"{FEWER}"
            )
    return found


def write_report(
    summaries: Iterable[Path],
    out: Path,
    *,
    lenient: bool = False,
    link_base: str | None = None,
) -> Written:
    """``out/report.html``, ``out/trace.json``, ``out/prr-evidence.md`` (the production-
    readiness evidence of the KEPs the subtests exercise, as Markdown) and ``out/metadata.json``
    (pair, seed, verdict and commit for Prow, :mod:`._metadata`) of ``summaries``. A
    summary that cannot be read, or that would take the report over its budget (:mod:`._limits`,
    all summaries together), fails the whole report, or with ``lenient`` (a run's own report,
    where a half-written summary must not cost the others) is left out and said on the page.
    ``link_base``: the http(s) URL ``out`` is served at, which every link of the page then
    starts with (:func:`e2e_dra._urls.report_link_base`; one it refuses is an InputError
    naming it, before anything is read), the path of ``out`` to each file's ``..`` resolved
    (:func:`~._links.under`); one under which a run's folder would have no URL (``out`` more
    folders below it than the base's path is deep) is an InputError too, before anything is
    written."""
    if link_base is not None:
        link_base = parsed(report_link_base, link_base, "the report's link base")
    records: list[SuiteRecord] = []
    left_out: list[str] = []
    budget = Budget()
    for path in summaries:
        try:
            records.append(load_summary(path, budget))
        except E2EDRAError as exc:
            if not lenient:
                raise
            left_out.append(str(exc))
    records.sort(key=lambda r: (r.started.timestamp() if r.started else 0.0, r.suite))
    if link_base is not None:
        _reachable(records, out, link_base)
    html, trace, markdown = out / REPORT_FILE, out / TRACE_FILE, out / EVIDENCE_FILE
    meta = out / METADATA_FILE
    evidence = Evidence.of(records, out)
    page = Page(records, html, left_out, evidence, link_base).html()
    prr = printable(evidence.markdown(time.strftime("%Y-%m-%d %H:%M:%S %z")))
    events = json.dumps(trace_events(records)) + "\n"
    facts = printable(merged(meta, metadata(Headline.of(runs_of(records)))))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalError(describe_os_error(exc, out)) from None
    _write(trace, events)
    _write(markdown, prr)
    _write(meta, facts)
    _write(html, page)  # last: whatever failed before it left the previous page
    return Written(html, trace, len(records), tuple(left_out), markdown, meta)


def _reachable(records: list[SuiteRecord], out: Path, link_base: str) -> None:
    """Refuses a link base under which a run's folder has no URL: one more folders above
    ``out`` than the base's path has (``-o /tmp/x`` for runs under ``/logs``, served at
    ``https://host/x``), whose links would climb out of the host's root."""
    depth = base_depth(link_base)
    for record in records:
        try:
            relative = Path(os.path.relpath(record.directory, out)).parts
        except ValueError:  # another drive
            relative = (os.pardir,) * (depth + 1)
        ups = len(relative) - len([p for p in relative if p != os.pardir])
        if ups > depth:
            raise InputError(
                f"the report's link base {link_base!r} is {depth} folder(s) deep, but "
                f"{record.directory} is {ups} folder(s) above the output folder {out}: its "
                "links would lead out of the URL's host; write the report into the artifacts "
                "(-o inside the folder that holds the runs), or give the URL that folder is "
                "served at"
            )


def _write(path: Path, text: str) -> None:
    """``path`` replaced by ``text``; a failure names ``path`` (not the temporary file)."""
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        unnamed = OSError(exc.errno, exc.strerror)
        raise LocalError(describe_os_error(unnamed, path)) from None
