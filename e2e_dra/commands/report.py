"""``e2e-dra report``: one report of one or more runs, from their artifact folders.

Several machines may each run part of the matrix (a suite each, or a ``-k`` slice); merging their
``$ARTIFACTS`` folders here gives one page. The folders are read, never written; the report's
links are relative to the output folder, so keep the artifacts where they were (or copy the
output along with them).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    report = subparsers.add_parser(
        "report",
        help="build report.html and trace.json from the artifact folders of one or more runs",
        description="Read the summary.json of every suite under each DIR (an $ARTIFACTS folder, "
        "or one suite's folder) and write OUT/report.html (matrix of subtests by suite and "
        "phase, failures with links to their dumps and logs, versions, timelines) and "
        "OUT/trace.json (open it in ui.perfetto.dev). The last line of stdout is the page.",
    )
    report.add_argument("dirs", metavar="DIR", nargs="+", type=Path, help="an artifacts folder")
    report.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        metavar="OUT",
        help="where to write (default: the first DIR)",
    )
    report.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from e2e_dra.report import summaries_of, write_report

    summaries = summaries_of(args.dirs)
    written = write_report(summaries, args.output or args.dirs[0])
    print(written.trace)
    print(written.html)
    return 0
