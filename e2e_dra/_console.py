"""One place that decides how we talk to a person: rich on a terminal, plain lines in CI."""

from __future__ import annotations

import functools
import os
import sys

from rich.console import Console


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


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


def say(message: str) -> None:
    """A progress line: what we are doing now."""
    console().log(message)


def fancy() -> bool:
    """Whether live displays (progress bars, live tables) make sense."""
    return console().is_terminal and not in_ci()
