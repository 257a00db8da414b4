"""How the engine talks: one progress line at a time, to whatever its user hands it.

The engine imports nothing of the e2e-dra harness, so it does not know its console; a user passes
a :class:`logging.Logger` (lines go to ``info``) or any callable taking one line. Without one,
lines go to stderr with a time stamp, as plain text.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable

Say = Callable[[str], None]
Log = logging.Logger | Say


def to_stderr(message: str) -> None:
    """Best effort: a reader that went away must not stop a cluster halfway."""
    with contextlib.suppress(OSError, ValueError):
        print(f"{time.strftime('[%H:%M:%S]')} {message}", file=sys.stderr, flush=True)


def sayer(log: Log | None) -> Say:
    """One callable for a logger, a callable or nothing (stderr)."""
    if log is None:
        return to_stderr
    if isinstance(log, logging.Logger):
        return log.info
    return log
