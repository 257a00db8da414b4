"""How much a report reads, in all: the bounds on its input, per field and across every summary.

A report merges summaries from anywhere, so its input may be hostile. Each bound here keeps the
report's time and memory proportional to a real run's (a suite's summary is a few hundred KiB,
a merged page a few MiB), and each is checked once, where the input is read (:mod:`._load`):

- numbers: seconds (durations and the offsets of starts) finite and within :data:`MAX_SECONDS`;
  counts (``attempts``, ``schema_version``) small integers; start times between 1970 and 2200,
  so the timeline's axis and the trace's microseconds stay a few hundred values;
- sizes: bytes, JSON values, entries and characters of text summed over ALL the summaries of
  one report (:class:`Budget`), not only per file, since many files each under the per-file cap
  add up; and the page's quadratic parts (the matrix, the version strips) bounded by cells, the
  production-readiness evidence (a subtest's phases once per KEP it names) by its text.

Every bound that is hit is one :class:`SummaryError` naming the file, the field and the way out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from e2e_dra.errors import InputError

MiB = 1024 * 1024

MAX_SUMMARY_BYTES = 32 * MiB
"""A summary of the largest plan is a few hundred KiB; anything near this is not one of ours."""
MAX_REPORT_BYTES = 64 * MiB
"""All the summaries of one report together: a hundred runs of the largest plan fit."""
MAX_JSON_VALUES = 2_000_000
"""JSON values (and keys) of all the summaries together, counted before parsing: each costs
about 80 bytes parsed, whatever its size in the file (``[{},{},...]``), so this bounds memory
where the byte count cannot."""
MAX_SUMMARIES = 1000
"""Summaries of one report (one per suite run)."""
MAX_ENTRIES = 100_000
"""Results, their logs, ready times, binaries and deviations of all the summaries together."""
MAX_TEXT = 2 * MiB
"""Characters of every name and message the report shows, all summaries together: each is
shown several times (matrix, timeline, failures, trace) and HTML-escaping multiplies it."""
MAX_NAME = 4096
"""Characters of one name (suite, id, subtest, phase, step, state, label, path)."""
MAX_MESSAGE = 8192
"""Characters of one result's message that the report keeps; the rest is cut (a traceback's
long line), the logs the result names hold it all."""
MAX_MATRIX_CELLS = 250_000
"""Subtests x columns of the matrix, all summaries together: a column is one run's phase (or, in
the gate cycle, one of its subtests' own cluster steps), so two runs of a suite count twice."""
MAX_VERSION_CELLS = 20_000
"""States x components of the version strips, all summaries together."""
MAX_SECONDS = 7 * 24 * 3600
"""A suite's entries start and end within a week of its start (a real one takes hours)."""
MAX_KEPS = 32
"""KEPs one subtest names in ``keps_by_subtest`` (a real one names one to three)."""
MAX_KEP_NUMBER = 99_999
"""The largest KEP number read: they are the issue numbers of kubernetes/enhancements (about
6 500 in 2026)."""
MAX_EVIDENCE_TEXT = 4 * MiB
"""Characters of the production-readiness evidence (the page's section, ``prr-evidence.md``),
all summaries together: it repeats a subtest's phases and checks once for each KEP the subtest
names, so it is bounded on its own; beyond this the rest is left out, and said to be."""
MAX_ATTEMPTS = 10_000
MAX_SCHEMA = 1000
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)

FEWER = "give fewer folders to one report, or leave out what e2e-dra did not write"


class SummaryError(InputError):
    """A summary.json (or the folder that should hold one) that cannot be reported on."""


def json_values(data: bytes) -> int:
    """An upper bound of the JSON values and keys ``data`` parses to, counted without parsing:
    every array element follows ``[`` or ``,``, every key follows ``{`` or ``,`` and every
    member's value follows ``:`` (the same bytes inside strings only raise the bound)."""
    return 1 + data.count(b"[") + data.count(b"{") + data.count(b",") + 2 * data.count(b":")


@dataclass
class Tally:
    """What one summary adds to its report: counted while it is read, admitted at its end."""

    entries: int = 0
    text: int = 0
    subtests: set[str] = field(default_factory=set)
    columns: set[tuple[str, str]] = field(default_factory=set)  # (its summary, phase or step)
    version_cells: int = 0


class Budget:
    """The bounds shared by all the summaries of one report. A summary over a bound is refused
    whole (a lenient report, a run's own, goes on with the others); what it shows counts only
    once it is admitted, its bytes as soon as they are read."""

    def __init__(self) -> None:
        self.summaries = 0
        self.bytes = 0
        self.values = 0
        self.entries = 0
        self.text = 0
        self.subtests: set[str] = set()
        self.columns: set[tuple[str, str]] = set()
        self.version_cells = 0

    def admit_file(self, path: object, data: bytes) -> None:
        """Before parsing ``data`` (read from ``path``): its bytes and JSON values still fit."""
        if self.summaries + 1 > MAX_SUMMARIES:
            raise SummaryError(
                f"{path}: more than {MAX_SUMMARIES} summaries in one report; {FEWER}"
            )
        if self.bytes + len(data) > MAX_REPORT_BYTES:
            raise SummaryError(
                f"{path}: with the summaries before it, more than {MAX_REPORT_BYTES // MiB} MiB "
                f"of summaries in one report; {FEWER}"
            )
        values = json_values(data)
        if self.values + values > MAX_JSON_VALUES:
            raise SummaryError(
                f"{path}: about {values} JSON values, with the summaries before it more than "
                f"{MAX_JSON_VALUES} (not a summary of e2e-dra?); {FEWER}"
            )
        self.summaries += 1
        self.bytes += len(data)
        self.values += values

    def admit(self, path: object, tally: Tally) -> None:
        """After reading a summary: what it shows still fits with the others."""
        entries = self.entries + tally.entries
        if entries > MAX_ENTRIES:
            raise SummaryError(
                f"{path}: results, logs and components_ready hold {tally.entries} entries, with "
                f"the summaries before it more than {MAX_ENTRIES}; {FEWER}"
            )
        if self.text + tally.text > MAX_TEXT:
            raise SummaryError(
                f"{path}: names and messages of {tally.text} characters, with the summaries "
                f"before it more than {MAX_TEXT}; {FEWER}"
            )
        subtests = len(self.subtests | tally.subtests)
        columns = len(self.columns | tally.columns)
        if subtests * columns > MAX_MATRIX_CELLS:
            raise SummaryError(
                f"{path}: results[].subtest and .phase make a matrix of {subtests} subtests x "
                f"{columns} phases with the summaries before it, more than {MAX_MATRIX_CELLS} "
                f"cells; {FEWER}"
            )
        if self.version_cells + tally.version_cells > MAX_VERSION_CELLS:
            raise SummaryError(
                f"{path}: binaries makes a table of {tally.version_cells} states x components, "
                f"with the summaries before it more than {MAX_VERSION_CELLS}; {FEWER}"
            )
        self.entries = entries
        self.text += tally.text
        self.subtests |= tally.subtests
        self.columns |= tally.columns
        self.version_cells += tally.version_cells
