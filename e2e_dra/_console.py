"""One place that decides how we talk to a person: rich on a terminal, plain lines in CI.

Plain lines are never wrapped: a log reader greps for URLs and paths, and rich's 80-column default
for a non-terminal would split them.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console

from e2e_dra.settings import settings


def in_ci() -> bool:
    return settings().ci


@functools.cache
def console() -> Console:
    """The stderr console; stdout stays free for values other tools read."""
    interactive = sys.stderr.isatty() and not in_ci()
    return Console(
        stderr=True,
        force_terminal=interactive or None,
        no_color=not interactive,
        highlight=False,
        log_path=False,
    )


_sinks: list[Callable[[str], None]] = []


def say(message: str) -> None:
    """A progress line: what we are doing now.

    Best effort: a reader that went away (a closed pipe, a full disk under the log) must not turn
    a progress line into an exception in the middle of stopping a cluster.
    """
    with contextlib.suppress(OSError, ValueError):
        if _sinks:
            _sinks[-1](message)
        elif console().is_terminal:
            console().log(message)
        else:
            stamp = time.strftime("[%H:%M:%S]")
            console().print(f"{stamp} {message}", soft_wrap=True, markup=False, highlight=False)


@contextlib.contextmanager
def said_through(sink: Callable[[str], None]) -> Iterator[None]:
    """Route progress lines to ``sink`` for a while: the suite shows them live between pytest's
    own lines, where stderr would be captured and seen only after a test ends."""
    _sinks.append(sink)
    try:
        yield
    finally:
        _sinks.remove(sink)


def fancy() -> bool:
    """Whether live displays (progress bars, live tables) make sense."""
    return console().is_terminal and not in_ci()
