"""Steps that must each be tried even when an earlier one failed, as a tear-down's are.

A cleanup that stops at its first error strands what the later steps would have stopped (a
driver, the cluster, the host lock); one that swallows errors hides why a run broke. So every
step is tried, each failure is logged as it happens and kept with the step's name, and at the end
the first one is raised with the others as its notes: the report shows them all, in the order
they happened.

A :class:`Teardown` is such a sequence written down before it runs: an ordered list of named
:class:`Attempt` s under one deadline. What frees something (a process, a thread, a client) runs
whatever the time; a look or a copy that would start after the deadline is not tried, and that
is a failure of its own, named: a net that did not look must not pass for one that found
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


class Attempts:
    """The failures of one sequence of steps (``what``: "cleanup"), raised together at the end.

    ``note``: how the other failures are introduced on the first ("e2e-dra: cleanup also
    failed: ..."; by default ``what`` + " also failed").
    """

    def __init__(self, what: str, log: Callable[[str], object], *, note: str | None = None) -> None:
        self.what = what
        self._log = log
        self._note = note if note is not None else f"{what} also failed"
        self.errors: list[BaseException] = []
        self.failed: list[tuple[str, BaseException]] = []
        """Each failure with the name of the step it was ("" when none was given)."""

    def __call__(self, step: str, fn: Callable[[], object]) -> None:
        """Run ``fn``; an error is logged and kept (an interrupt is not caught: it ends the run)."""
        try:
            fn()
        except Exception as exc:
            self._log(f"{self.what}: {step} failed: {exc}")
            self._keep(step, exc)

    def fail(self, exc: BaseException, step: str = "") -> None:
        """A failure found rather than raised (say, what a safety net still holds)."""
        self._keep(step, exc)

    def raise_first(self) -> None:
        """Raise the first failure, the others as its notes; nothing when every step passed."""
        if not self.errors:
            return
        first, *others = self.errors
        for other in others:
            first.add_note(f"{self._note}: {type(other).__name__}: {other}")
        raise first

    def _keep(self, step: str, exc: BaseException) -> None:
        self.errors.append(exc)
        self.failed.append((step, exc))


@dataclass(frozen=True)
class Attempt:
    """One named step of a :class:`Teardown`. ``look``: it only looks or copies, and is not
    tried once the deadline passed; every other step frees something (stops a process or a
    thread, closes a client) and runs whatever the time."""

    name: str
    run: Callable[[], object]
    look: bool = False


class NotTried(TimeoutError):
    """A step of a tear-down that would have started after its deadline."""


class Teardown(Attempts):
    """Ordered, named attempts under one deadline (``timeout`` seconds from now, on ``clock``):
    each tried in turn, each failure kept with its name, the first raised at the end."""

    def __init__(
        self,
        what: str,
        log: Callable[[str], object],
        *,
        timeout: float,
        note: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(what, log, note=note)
        self.timeout = timeout
        self._clock = clock
        self.deadline = clock() + timeout

    def left(self) -> float:
        """Seconds until the deadline (0 once it passed)."""
        return max(0.0, self.deadline - self._clock())

    def run(self, attempts: Iterable[Attempt]) -> None:
        """Each of ``attempts`` in order (a generator may decide the next from what the last
        did); a look is not tried once the deadline passed, which is kept as its failure."""
        for attempt in attempts:
            if attempt.look and self.left() <= 0:
                said = f"not tried: the {self.what}'s {self.timeout:g} s were up"
                self._log(f"{self.what}: {attempt.name}: {said}")
                self.fail(NotTried(f"{attempt.name}: {said}"), attempt.name)
                continue
            self(attempt.name, attempt.run)
