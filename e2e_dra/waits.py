"""Polling with explicit deadlines: ``eventually`` and ``consistently``.

Upstream leans on Gomega's Eventually/Consistently, whose defaults depend on how the test binary
was started. Here every wait names its timeout and poll interval, and a failed wait says what it
was waiting for and the last thing it saw -- the one line a person needs to debug a red run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from e2e_dra.errors import ExecError
from e2e_dra.kube import KubeError, transient

T = TypeVar("T")

RETRIED_BY_DEFAULT: tuple[type[BaseException], ...] = (AssertionError, KubeError, ExecError)
"""Errors a probe may raise while the awaited state is not there yet (Gomega retries those too).

Programming errors (KeyError, TypeError, ...) are not in this list: they fail at once.
"""


class WaitTimeout(AssertionError):
    """A condition did not become (or did not stay) true in time."""


def eventually(
    probe: Callable[[], T],
    *,
    what: str,
    timeout: float,
    poll: float = 2.0,
    until: Callable[[T], bool] = bool,
    retry_on: tuple[type[BaseException], ...] = RETRIED_BY_DEFAULT,
) -> T:
    """Call ``probe`` until ``until(value)`` holds; return that value.

    A probe that raises one of ``retry_on`` counts as "not yet". On timeout, raise
    :class:`WaitTimeout` naming ``what`` and the last value or error seen.
    """
    deadline = time.monotonic() + timeout
    last = "nothing observed yet"
    while True:
        try:
            value = probe()
        except retry_on as exc:
            last = f"last error: {_short(exc)}"
        else:
            if until(value):
                return value
            last = f"last value: {_short(value)}"
        if time.monotonic() + poll > deadline:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; {last}")
        time.sleep(poll)


def consistently(
    probe: Callable[[], T],
    *,
    what: str,
    duration: float,
    poll: float = 1.0,
    holds: Callable[[T], bool] = bool,
) -> T:
    """Check that ``holds(probe())`` stays true for ``duration`` seconds; return the last value.

    Transient API errors (a restarted apiserver answering EOF or a bogus 403) are not
    observations and are skipped; any other error or a false check fails at once. At least
    one real observation is required.
    """
    start = time.monotonic()
    deadline = start + duration
    value: T | None = None
    observed = False
    skipped = ""
    while True:
        try:
            value = probe()
        except Exception as exc:
            if not transient(exc):
                raise
            skipped = _short(exc)
        else:
            observed = True
            if not holds(value):
                elapsed = time.monotonic() - start
                raise WaitTimeout(
                    f"{what} stopped holding after {elapsed:.1f}s of {duration:g}s; "
                    f"value: {_short(value)}"
                )
        if time.monotonic() >= deadline:
            break
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
    if not observed:
        raise WaitTimeout(f"could not observe {what} for {duration:g}s; last error: {skipped}")
    return value  # type: ignore[return-value]


def _short(value: object, limit: int = 600) -> str:
    text = (
        repr(value) if not isinstance(value, BaseException) else f"{type(value).__name__}: {value}"
    )
    return text if len(text) <= limit else text[: limit - 3] + "..."
