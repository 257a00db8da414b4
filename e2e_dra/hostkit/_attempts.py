"""Steps that must each be tried even when an earlier one failed, as a tear-down's are.

A cleanup that stops at its first error strands what the later steps would have stopped (a
driver, the cluster, the host lock); one that swallows errors hides why a run broke. So every
step is tried, each failure is logged as it happens, and at the end the first one is raised with
the others as its notes: the report shows them all, in the order they happened.
"""

from __future__ import annotations

from collections.abc import Callable


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

    def __call__(self, step: str, fn: Callable[[], object]) -> None:
        """Run ``fn``; an error is logged and kept (an interrupt is not caught: it ends the run)."""
        try:
            fn()
        except Exception as exc:
            self._log(f"{self.what}: {step} failed: {exc}")
            self.errors.append(exc)

    def fail(self, exc: BaseException) -> None:
        """A failure found rather than raised (say, what a safety net still holds)."""
        self.errors.append(exc)

    def raise_first(self) -> None:
        """Raise the first failure, the others as its notes; nothing when every step passed."""
        if not self.errors:
            return
        first, *others = self.errors
        for other in others:
            first.add_note(f"{self._note}: {type(other).__name__}: {other}")
        raise first
