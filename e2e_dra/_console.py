"""One place that decides how we talk to a person: rich on a terminal, plain lines in CI.

Progress goes through one channel, stdlib :mod:`logging`: every module logs to its own logger under
``e2e_dra`` (the engine is handed one), and the front end decides where records show. The command
line installs one handler here (:func:`show_progress`); under pytest, the plugin turns on pytest's
own live logging instead, so lines show between pytest's lines while a test runs.

Plain lines are never wrapped: a log reader greps for URLs and paths, and rich's 80-column default
for a non-terminal would split them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from e2e_dra.settings import settings

if TYPE_CHECKING:
    from rich.console import Console

PROGRESS_LOGGERS = ("e2e_dra", "localupcluster")
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
