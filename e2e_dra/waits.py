"""Polling with explicit deadlines: ``eventually``, ``consistently`` and
``consistently_throughout``.

Upstream leans on Gomega's Eventually/Consistently, whose defaults depend on how the test binary
was started. Here every wait names its timeout and poll interval, and a failed wait says what it
was waiting for and the last thing it saw -- the one line a person needs to debug a red run.

A wait also ends at once when a registered check (:func:`abort_when`) reports a reason: a cluster
component that crashed makes every wait hopeless, and saying so with the component's name and log
beats a timeout five minutes later that blames the condition.

The loop and its deadline rule are :func:`e2e_dra.hostkit.poll`'s; this module adds the abort
checks, which errors count as "not yet", and the messages.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar, cast

from e2e_dra.errors import ComponentCrashed, ExecError
from e2e_dra.hostkit import poll as poll_until
from e2e_dra.kube import KubeError

T = TypeVar("T")

RETRIED_BY_DEFAULT: tuple[type[BaseException], ...] = (AssertionError, KubeError, ExecError)
"""Errors a probe may raise while the awaited state is not there yet (Gomega retries those too).

Programming errors (KeyError, TypeError, ...) are not in this list: they fail at once.
"""


POLL = 0.5
"""Seconds between two looks of :func:`eventually`. A look is one GET or LIST of a few objects (a
few milliseconds of the API server's time), while most waits end within a second or two (a pod
starting, a claim being allocated): with upstream's 2 s (e2e framework.Poll), every wait took the
next multiple of 2 s."""


class WaitTimeout(AssertionError):
    """A condition did not become (or did not stay) true in time."""


_abort_checks: list[Callable[[], str | None]] = []


@contextlib.contextmanager
def abort_when(check: Callable[[], str | None]) -> Iterator[None]:
    """While inside, every wait polls ``check`` and raises :class:`ComponentCrashed` with the
    reason it returns."""
    _abort_checks.append(check)
    try:
        yield
    finally:
        _abort_checks.remove(check)


def check_abort() -> None:
    for check in list(_abort_checks):
        reason = check()
        if reason:
            raise ComponentCrashed(reason)


def eventually(
    probe: Callable[[], T],
    *,
    what: str,
    timeout: float,
    poll: float = POLL,
    until: Callable[[T], bool] = bool,
    retry_on: tuple[type[BaseException], ...] = RETRIED_BY_DEFAULT,
) -> T:
    """Call ``probe`` until ``until(value)`` holds; return that value.

    A probe that raises one of ``retry_on`` counts as "not yet". On timeout, raise
    :class:`WaitTimeout` naming ``what`` and the last value or error seen.
    """
    result = poll_until(
        probe,
        timeout=timeout,
        interval=poll,
        until=until,
        retry_on=retry_on,
        before_each=check_abort,
    )
    if result.done:
        return cast(T, result.value)  # done: the probe answered
    last = (
        f"last error: {_short(result.error)}"
        if result.error is not None
        else f"last value: {_short(result.value)}"
    )
    raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; {last}")


def consistently(
    probe: Callable[[], T],
    *,
    what: str,
    duration: float,
    poll: float = 1.0,
    holds: Callable[[T], bool] = bool,
) -> T:
    """Check that ``holds(probe())`` stays true for ``duration`` seconds; return the last value.

    As Gomega's Consistently: an error from ``probe`` fails at once, like a false check. An
    error is no observation, and "it held whenever we could look" proves nothing. Callers wait
    for the API server after a restart before they start (the suite waits for the ResourceSlices).
    """
    start = time.monotonic()
    look = _looking(probe, what, start, f"{duration:g}s")
    result = poll_until(
        look, timeout=duration, interval=poll, until=lambda v: not holds(v), before_each=check_abort
    )
    if result.done:
        elapsed = time.monotonic() - start
        raise WaitTimeout(
            f"{what} stopped holding after {elapsed:.1f}s of {duration:g}s; "
            f"value: {_short(result.value)}"
        )
    return cast(T, result.value)  # the probe answered: look() raises for every error


@contextlib.contextmanager
def consistently_throughout(
    probe: Callable[[], T],
    *,
    what: str,
    after: float,
    poll: float = 1.0,
    holds: Callable[[T], bool] = bool,
) -> Iterator[None]:
    """Check that ``holds(probe())`` stays true while the block runs and for ``after`` seconds
    after it ends, looked at every ``poll`` seconds from a thread of its own.

    One watch instead of a :func:`consistently` after each step of the block: every change the
    block makes is still watched for at least ``after`` seconds, and the moments between the
    steps are watched too, but the windows are not waited out one after another. Errors count as
    in :func:`consistently`. A break is raised when the block ends (the block is not interrupted);
    an error of the block itself wins, the break added as its note. ``probe`` runs in a thread
    beside the block: it must not share an API client with the block's steps.
    """
    start = time.monotonic()
    span = f"the steps and {after:g}s after them"
    look = _looking(probe, what, start, span)
    ended: list[float] = []  # when the block ended (time.monotonic())
    block_failed = threading.Event()  # nothing left to watch for
    failed: list[BaseException] = []

    def seen_enough(value: T) -> bool:
        if block_failed.is_set() or not holds(value):
            return True
        return bool(ended and time.monotonic() >= ended[0] + after)

    def watch() -> None:
        try:
            result = poll_until(
                look, timeout=math.inf, interval=poll, until=seen_enough, before_each=check_abort
            )
            if not holds(cast(T, result.value)):
                elapsed = time.monotonic() - start
                when = (
                    f"{elapsed - (ended[0] - start):.1f}s after the steps"
                    if ended
                    else f"{elapsed:.1f}s into the steps"
                )
                failed.append(
                    WaitTimeout(
                        f"{what} stopped holding {when} (watched: {span}); "
                        f"value: {_short(result.value)}"
                    )
                )
        except BaseException as exc:  # raised by the caller's thread
            failed.append(exc)

    # Named as the caller's thread: what it logs belongs to the same subtest.
    watcher = threading.Thread(target=watch, name=threading.current_thread().name, daemon=True)
    watcher.start()
    try:
        yield
    except BaseException as exc:
        block_failed.set()
        watcher.join()
        if failed:
            exc.add_note(f"e2e-dra: meanwhile: {failed[0]}")
        raise
    ended.append(time.monotonic())
    watcher.join()
    if failed:
        raise failed[0]


def _looking(probe: Callable[[], T], what: str, start: float, span: str) -> Callable[[], T]:
    """``probe``, its errors turned into a failed check that says when it could not look."""

    def look() -> T:
        try:
            return probe()
        except Exception as exc:
            elapsed = time.monotonic() - start
            raise WaitTimeout(
                f"could not check that {what} after {elapsed:.1f}s of {span}: {_short(exc)}"
            ) from exc

    return look


def _short(value: object, limit: int = 600) -> str:
    text = (
        repr(value) if not isinstance(value, BaseException) else f"{type(value).__name__}: {value}"
    )
    return text if len(text) <= limit else text[: limit - 3] + "..."
