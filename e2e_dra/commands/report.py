"""``e2e-dra report``: one report of one or more runs, from their artifact folders.

Several machines may each run part of the matrix (a suite each, or a ``-k`` slice); merging their
``$ARTIFACTS`` folders here gives one page. The folders are read, never written; the report's
links are relative to the output folder, so keep the artifacts where they were (or copy the
output along with them); or, with ``--link-base``, they start with the URL the output folder is
served at, for a page read where relative links break (Prow's Spyglass).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    report = subparsers.add_parser(
        "report",
        help="build report.html, prr-evidence.md and trace.json from the artifact folders of one "
        "or more runs",
        description="Read the summary.json of every suite under each DIR (an $ARTIFACTS folder, "
        "or one suite's folder) and write OUT/report.html (matrix of subtests by suite and "
        "phase, failures with links to their dumps and logs, the production-readiness evidence "
        "of each KEP the subtests exercise, versions, timelines), OUT/prr-evidence.md (that "
        "evidence as Markdown, to paste into a KEP), OUT/trace.json (open it in "
        "ui.perfetto.dev) and OUT/metadata.json (pair, seed, verdict, commit: Prow's job "
        "metadata). The last line of stdout is the page.",
    )
    report.add_argument("dirs", metavar="DIR", nargs="+", help="an artifacts folder")
    report.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="OUT",
        help="where to write (default: the first DIR)",
    )
    report.add_argument(
        "--link-base",
        default=None,
        metavar="URL",
        help="the http(s) URL at which OUT is served: every link of the page becomes URL/<path "
        "relative to OUT>, its ../ resolved (the artifacts served as they lie on disk), so the "
        "links work where relative ones break (Prow's Spyglass inlines report.html into its own "
        "page); default: $E2E_DRA_REPORT_LINK_BASE, else relative links",
    )
    report.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from e2e_dra._urls import report_link_base
    from e2e_dra.report import summaries_of, write_report
    from e2e_dra.settings import parsed, settings

    base = settings().report_link_base
    if args.link_base is not None:
        base = parsed(report_link_base, args.link_base, "--link-base")
    dirs = [_path(text, "DIR") for text in args.dirs]
    out = dirs[0] if args.output is None else _path(args.output, "-o/--output")
    if out.exists() and not out.is_dir():
        from e2e_dra.errors import InputError

        raise InputError(f"-o/--output {out}: not a directory; give a folder to write into")
    summaries = summaries_of(dirs)
    written = write_report(summaries, out, link_base=base)
    print(written.trace)
    print(written.evidence)
    print(written.metadata)
    print(written.html)
    return 0


def _path(text: str, what: str) -> Path:
    """``text`` as every command reads a path (:func:`e2e_dra.settings.path`): an empty one is
    refused rather than read as the current directory (``Path("")`` is ``.``: a report of, or
    into, wherever the command was started)."""
    from e2e_dra.settings import parsed, path

    return parsed(path, text, what)
