"""``e2e-dra``: the command line of every area, assembled from :mod:`e2e_dra.commands`.

:mod:`e2e_dra.cli` is the entry point; it imports this module once it can handle a signal that
arrives while the imports run.

Start-up stays fast because only argparse-level modules are imported before a command runs; the
handlers import what they need. Progress lines are log records; while a command runs, one handler
shows them on stderr (:func:`e2e_dra._console.showing_progress`). Every failure ends as one line
on stderr and an exit status of its kind (:mod:`e2e_dra.errors`), credentials in any URL it shows
masked (:func:`e2e_dra.hostkit.redact`): a user's mistake or a machine's fault names the input and
what to do; a bug of ours still prints one line, and the traceback goes
to a file that line names, so a user never has to read one to know what happened. SIGTERM is
handled like Ctrl-C, so what a command was writing (a cache entry's temp dir) is removed on the
way out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from e2e_dra import __version__
from e2e_dra._console import StdoutFailed, StdoutGone, showing_progress
from e2e_dra.commands import build, cluster, driver, provision, releases, report
from e2e_dra.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_LOCAL,
    EXIT_STATUS_HELP,
    EXIT_STDOUT_GONE,
    EXIT_TERMINATED,
    E2EDRAError,
    describe_os_error,
)
from e2e_dra.hostkit import handling_interrupts, redact
from e2e_dra.localupcluster import ClusterError

PROG = "e2e-dra"

# One module per area, in the order --help lists them; each has ``register(subparsers) -> None``.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    releases,
    build,
    provision,
    driver,
    cluster,
    report,
)


class _OneLineErrorParser(argparse.ArgumentParser):
    """Usage mistakes as one line, like every other error of ours."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {shortened(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrorParser(
        prog=PROG,
        description="Kubernetes DRA upgrade/downgrade test harness: versions, releases, clusters.",
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(
        title="commands", metavar="COMMAND", required=True, parser_class=_OneLineErrorParser
    )
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that it unwinds exactly as after Ctrl-C."""


def main(argv: Sequence[str] | None = None) -> int:
    """The program's edge: Ctrl-C and SIGTERM are handled here, for every command (what runs
    registers what must stop at once, as the engine does for its cluster). The standard streams
    were settled by :mod:`e2e_dra.cli` (:func:`e2e_dra._console.standard_streams`)."""
    with handling_interrupts(terminated=Terminated):
        return _run(argv)


def _run(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        with showing_progress():
            status = int(args.handler(args) or 0)
    except StdoutGone:  # nobody reads the answer: stop quietly, as a filter killed by SIGPIPE
        return EXIT_STDOUT_GONE
    except StdoutFailed as exc:
        return _fail(EXIT_LOCAL, _stdout_failed(exc))
    except (E2EDRAError, ClusterError) as exc:
        return _fail(exc.exit_status, str(exc))
    except Terminated:
        return _fail(EXIT_TERMINATED, "terminated (SIGTERM); what was half-written was removed")
    except KeyboardInterrupt:
        return _fail(EXIT_INTERRUPTED, "interrupted")
    except OSError as exc:
        return _fail(EXIT_LOCAL, describe_os_error(exc))
    except SystemExit as exc:  # argparse: --help and --version print, then exit 0
        if not exc.code and (failed := _delivered()):
            return failed
        raise
    except GeneratorExit:
        raise
    except BaseException as exc:  # a bug: one line here, the traceback in a file
        return _fail(EXIT_INTERNAL, _internal_error(exc))
    return _delivered() or status


def _delivered() -> int:
    """0 once what the command printed has reached stdout (the answer is the interface: failing to
    write it is a failure), else the status that says why it did not."""
    try:
        sys.stdout.flush()
    except StdoutGone:
        return EXIT_STDOUT_GONE
    except StdoutFailed as exc:
        return _fail(EXIT_LOCAL, _stdout_failed(exc))
    return 0


def _stdout_failed(exc: StdoutFailed) -> str:
    return (
        f"cannot write the result to stdout: {exc}; check where stdout goes (free some space if "
        "it is full) or redirect it elsewhere, then run again"
    )


MAX_LINE = 1000
"""Characters of an error line: a value pasted by mistake (a 128 kB argument) is cut in the middle,
so that the line keeps what it names first and the advice it ends with."""


def shortened(message: str) -> str:
    """``message`` as one line of at most :data:`MAX_LINE` characters."""
    line = " ".join(message.split())  # one line, whatever the message held
    if len(line) <= MAX_LINE:
        return line
    head, tail = line[: MAX_LINE // 2], line[-(MAX_LINE // 2 - 60) :]
    return f"{head} ...[{len(line) - len(head) - len(tail)} characters left out]... {tail}"


def _fail(status: int, message: str) -> int:
    line = shortened(redact(message))  # whatever made it, a URL's credentials are not printed
    with contextlib.suppress(OSError):
        print(f"{PROG}: error: {line}", file=sys.stderr, flush=True)
    return status


def _internal_error(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    try:
        fd, path = tempfile.mkstemp(prefix=f"{PROG}-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as out:
            out.write(f"{PROG} {__version__}\nargv: {sys.argv!r}\n\n{text}")
    except OSError:
        path = "(could not be written; it follows on stderr)"
        print(text, file=sys.stderr)
    return (
        f"internal error {type(exc).__name__}: {exc} -- a bug in {PROG}; the traceback is in "
        f"{path}, please attach it to a bug report"
    )
