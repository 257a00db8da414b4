"""One place that decides how we talk to a person: rich on a terminal, plain lines in CI.

Progress goes through one channel, stdlib :mod:`logging`: every module logs to its own logger under
``e2e_dra`` (the engine is handed one), and the front end decides where records show. The command
line installs one handler here (:func:`show_progress`); under pytest, the plugin turns on pytest's
own live logging instead, so lines show between pytest's lines while a test runs.

Plain lines are never wrapped: a log reader greps for URLs and paths, and rich's 80-column default
for a non-terminal would split them.

The standard streams are also decided here, once for every command (:func:`standard_streams`):

- a stream closed when the program starts (``>&-``, ``2>&-``, ``<&-``) has ``/dev/null`` opened in
  its place, so that no file the command opens later gets its number (progress lines written into
  a tarball being downloaded, an answer into a cache marker);
- stdout that nobody reads (closed from the start, or a pipe whose reader exited: ``| head``)
  stops the command at its next write with :class:`StdoutGone`, which the command line ends with
  a quiet exit status 141 (128 + SIGPIPE, what a shell shows for a tool killed by SIGPIPE, as
  ``yes | head`` is), like every well-behaved filter; stdout that fails otherwise (a full disk,
  an I/O error) is :class:`StdoutFailed`, a failure of this machine worth a line;
- stderr that cannot be written (closed, its reader gone, full) costs nothing but its own lines:
  they are dropped and the command goes on to its own exit status.

In each case the failed stream's descriptor is pointed at ``/dev/null``, so that the interpreter's
own flush at exit has nothing left to fail on (no "Exception ignored ... BrokenPipeError").
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from e2e_dra.settings import settings

if TYPE_CHECKING:
    from rich.console import Console

PROGRESS_LOGGERS = ("e2e_dra",)
"""Loggers whose INFO records are progress lines; other libraries' (httpx, kubernetes) show from
WARNING on, as they would without us."""

LINE_FORMAT = "[%(asctime)s] %(message)s"
TIME_FORMAT = "%H:%M:%S"


def in_ci() -> bool:
    return settings().ci


@functools.cache
def console() -> Console:
    """The stderr console; stdout stays free for values other tools read."""
    from rich.console import Console  # heavy: kept out of e2e-dra --help

    interactive = sys.stderr.isatty() and not in_ci()
    return Console(
        stderr=True,
        force_terminal=interactive or None,
        no_color=not interactive,
        highlight=False,
        log_path=False,
    )


def fancy() -> bool:
    """Whether live displays (progress bars, live tables) make sense."""
    return console().is_terminal and not in_ci()


_URLLIB3_POOL = "urllib3.connectionpool"


def is_progress(record: logging.LogRecord) -> bool:
    """Whether a record shows: ours from INFO on, anyone's from WARNING on, except urllib3's
    "Retrying ..." (every restart of the API server breaks the open connections; the retry that
    follows is ours to report if it fails)."""
    if record.levelno >= logging.WARNING:
        return not (record.name == _URLLIB3_POOL and str(record.msg).startswith("Retrying "))
    return record.levelno >= logging.INFO and record.name.split(".")[0] in PROGRESS_LOGGERS


HEADLINE = "e2e_dra_headline"
"""The attribute that marks a record as a headline: a line a suite's console shows by default
(a suite or cluster step starting, a batch of phases done, a failure, a known bug, a verdict).
Every other progress line (object traffic, driver registration, object dumps) goes to the saved
narrative, and to the console only when asked (``-v``, ``E2E_DRA_CONSOLE=detail``)."""


def as_headline() -> dict[str, bool]:
    """The ``extra`` of a headline record: ``logger.info(line, extra=as_headline())``."""
    return {HEADLINE: True}


def is_headline(record: logging.LogRecord) -> bool:
    """Whether a progress record is one a suite's console shows by default: marked as a
    headline, or a warning (something went wrong that nobody else says)."""
    if not is_progress(record):
        return False
    return bool(getattr(record, HEADLINE, False)) or record.levelno >= logging.WARNING


class _PlainHandler(logging.StreamHandler):
    """``[HH:MM:SS] message`` on stderr, one line each, never wrapped.

    Best effort: a reader that went away (a closed pipe, a full disk under the log) must not turn
    a progress line into an exception in the middle of stopping a cluster.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter(LINE_FORMAT, TIME_FORMAT))

    def handleError(self, record: logging.LogRecord) -> None:
        pass


def progress_handler() -> logging.Handler:
    """Rich's handler on a terminal (time column, live displays kept below), plain lines else."""
    handler: logging.Handler
    if fancy():
        from rich.highlighter import NullHighlighter
        from rich.logging import RichHandler

        handler = RichHandler(
            console=console(),
            show_level=False,
            show_path=False,
            markup=False,
            highlighter=NullHighlighter(),
            log_time_format=f"[{TIME_FORMAT}]",
        )
    else:
        handler = _PlainHandler()
    handler.addFilter(is_progress)
    return handler


@contextlib.contextmanager
def showing_progress() -> Iterator[None]:
    """Progress lines on stderr while a command runs: one handler on the root logger, and our
    loggers let INFO through (the root keeps its WARNING for everyone else)."""
    root = logging.getLogger()
    handler = progress_handler()
    ours = [logging.getLogger(name) for name in PROGRESS_LOGGERS]
    levels = [logger.level for logger in ours]
    root.addHandler(handler)
    for logger in ours:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for logger, level in zip(ours, levels, strict=True):
            logger.setLevel(level)


# --- the standard streams -------------------------------------------------------------------------


class StdoutGone(Exception):
    """Nobody reads stdout: it was closed when the program started, or it is a pipe whose reader
    exited (EPIPE). The answer cannot reach anyone, so the command stops, quietly."""


class StdoutFailed(Exception):
    """Writing stdout failed for a reason of this machine (a full disk, an I/O error)."""


_NOBODY_READS = {errno.EPIPE, errno.EBADF, errno.ECONNRESET}


def _point_at_devnull(stream: IO[Any] | None) -> None:
    """Point ``stream``'s descriptor at /dev/null: what is still buffered for it, and the
    interpreter's flush at exit, go nowhere instead of failing again."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):  # no descriptor (an in-memory stream): nothing to point
        return
    if fd < 0:
        return
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


class _Stdout:
    """``sys.stdout`` whose failures say whether anyone still reads it (:class:`StdoutGone`) or
    the machine failed (:class:`StdoutFailed`); every other attribute is the stream's."""

    def __init__(self, stream: IO[Any], *, gone: bool = False) -> None:
        self._stream = stream
        self._gone = gone

    def _failed(self, exc: BaseException) -> Exception:
        _point_at_devnull(self._stream)
        if isinstance(exc, ValueError) or getattr(exc, "errno", None) in _NOBODY_READS:
            self._gone = True  # ValueError: the stream was closed under us
            return StdoutGone()
        return StdoutFailed(getattr(exc, "strerror", None) or str(exc))

    def write(self, text: str) -> int:
        if self._gone:
            raise StdoutGone()
        try:
            return self._stream.write(text)
        except (OSError, ValueError) as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        if self._gone:
            return  # nothing was written since it went (a write raised already)
        try:
            self._stream.flush()
        except (OSError, ValueError) as exc:
            raise self._failed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Stderr:
    """``sys.stderr`` that never fails: a line that cannot be shown is dropped (the command goes
    on, and ends with its own status), and the descriptor is pointed at /dev/null at the first
    failure so that nothing after it fails again."""

    def __init__(self, stream: IO[Any]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            self._stream.write(text)
        except (OSError, ValueError):
            self._drop()
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self._drop()

    def _drop(self) -> None:
        _point_at_devnull(self._stream)
        with contextlib.suppress(OSError, ValueError):  # what is buffered goes to /dev/null now
            self._stream.flush()

    def isatty(self) -> bool:
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _reopen_closed_descriptors() -> None:
    """Open /dev/null on each of 0, 1 and 2 that is closed: a file the command opens later must
    not become its stdin, stdout or stderr."""
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        with contextlib.suppress(OSError):
            opened = os.open(os.devnull, flags)  # the lowest free number: ``fd`` if all below are
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)


@contextlib.contextmanager
def standard_streams() -> Iterator[None]:
    """While a command runs: closed descriptors replaced, stdout's failures told apart
    (:class:`StdoutGone`, :class:`StdoutFailed`), stderr's dropped (see the module's docstring).
    ``sys.stdout`` and ``sys.stderr`` are given back as they were afterwards."""
    _reopen_closed_descriptors()
    stdout, stderr = sys.stdout, sys.stderr
    opened: list[IO[Any]] = []  # closed at start: Python made them None; /dev/null is there now

    def on_devnull(fd: int) -> IO[Any]:
        stream = open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        opened.append(stream)
        return stream

    sys.stdout = _Stdout(stdout or on_devnull(1), gone=stdout is None)
    sys.stderr = _Stderr(stderr or on_devnull(2))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        for stream in opened:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
