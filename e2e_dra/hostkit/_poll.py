"""Waiting with a deadline: call a probe until its answer will do or the time is up.

Every wait on this host (a component's health endpoint, a daemon's socket, a process group
ending, a port being released, ResourceSlices appearing or going) is the same loop, so it is
written once, with one rule for the deadline: the probe runs at once, then every ``interval``
seconds, and a last time when the deadline has come (the sleep before it is shortened, never
overshooting). A wait thus looks for the whole ``timeout`` and ends at most one probe's duration
after it.

What the caller does when the time is up differs (raise its own error naming what it waited for,
stop a daemon, carry on with the last answer), so :func:`poll` returns what it saw rather than
raising. The clock and the sleep are parameters so that tests can run a wait on a fake clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Polled(Generic[T]):
    """How a :func:`poll` ended."""

    done: bool
    """``until`` held for the probe's answer before the deadline (False: the time ran out)."""
    value: T | None
    """The probe's last answer; None if it never answered (it raised every time)."""
    error: BaseException | None = None
    """What the last call of the probe raised (one of ``retry_on``); None when it answered."""


def poll(
    probe: Callable[[], T],
    *,
    timeout: float,
    interval: float,
    until: Callable[[T], bool] = bool,
    retry_on: tuple[type[BaseException], ...] = (),
    before_each: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Polled[T]:
    """Call ``probe`` until ``until(answer)`` holds or ``timeout`` seconds have passed.

    A probe that raises one of ``retry_on`` has not answered yet; any other exception ends the
    wait (a probe may raise to say that waiting is hopeless). ``before_each`` runs before every
    probe, its exceptions never retried: a check that makes any wait hopeless (a crashed cluster
    component) ends the wait even when the probe's own errors are retried.
    """
    deadline = clock() + timeout
    value: T | None = None
    while True:
        if before_each is not None:
            before_each()
        try:
            answer = probe()
        except retry_on as exc:
            error: BaseException | None = exc
        else:
            value, error = answer, None
            if until(answer):
                return Polled(True, answer)
        now = clock()
        if now >= deadline:
            return Polled(False, value, error)
        sleep(min(interval, deadline - now))
