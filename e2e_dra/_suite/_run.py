"""The state machine behind the reported tests: chains, skips, timings.

pytest calls :meth:`SuiteRun.execute` once per plan entry, in plan order. The run keeps what the
entries share: the callable each subtest's chain continues with, which chains broke (their later
phases are skipped, naming the phase that failed), and whether a cluster step broke the cluster
(everything after it is skipped, except the cleanup, which always runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import pytest

from e2e_dra._suite._artifacts import Summary
from e2e_dra._suite._plan import CLEANUP, Entry


class Backend(Protocol):
    """Where the cluster steps and phase contexts come from: the real cluster, or the dry seam."""

    def run_step(self, entry: Entry) -> None: ...

    def unmet(self, subtest: str) -> str | None:
        """Why ``subtest`` cannot run on the versions under test, or None."""
        ...

    def drop(self, subtest: str) -> None:
        """``subtest``'s chain ended early: stop waiting for its driver after restarts."""
        ...

    def context(self, entry: Entry) -> Any:
        """The context a phase runs with (sets up the subtest's driver before its first phase)."""
        ...

    def on_failure(self, entry: Entry, exc: BaseException) -> list[str]:
        """Collect what helps to debug ``exc``; lines naming the artifacts and logs to read."""
        ...

    def close(self) -> None:
        """Stop everything that is still running. Idempotent."""
        ...

    def describe(self) -> dict[str, Any]:
        """Versions, releases and settings for the summary."""
        ...


class SuiteRun:
    """One suite's run over its plan."""

    def __init__(
        self,
        suite: str,
        subtests: Mapping[str, Any],
        backend: Backend,
        summary: Summary,
        *,
        activity: Callable[[str], Any],
    ) -> None:
        self.suite = suite
        self.subtests = dict(subtests)
        self.backend = backend
        self.summary = summary
        self._activity = activity
        self._next: dict[str, Callable[[Any], Any] | None] = {}
        self._chain_broken: dict[str, str] = {}
        self._cluster_broken: str | None = None
        self._closed = False

    def execute(self, entry: Entry) -> None:
        """Run one entry; pytest sees a pass, a failure or a skip with its reason."""
        reason = self._skip_reason(entry)
        if reason:
            self.summary.record(entry, "skipped", 0.0, reason)
            pytest.skip(reason)
        started = time.monotonic()
        try:
            with self._activity(self._describe(entry)):
                if entry.is_step:
                    self._run_step(entry)
                else:
                    self._run_phase(entry)
        except pytest.skip.Exception as exc:
            self._mark_broken(entry, f"skipped in {self._where(entry)}: {exc.msg}")
            self.summary.record(entry, "skipped", time.monotonic() - started, exc.msg)
            raise
        except BaseException as exc:
            elapsed = time.monotonic() - started
            self._mark_broken(entry, f"{self._where(entry)} failed")
            for line in self._collect(entry, exc):
                exc.add_note(line)
            outcome = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            self.summary.record(entry, outcome, elapsed, _one_line(exc))
            raise
        self.summary.record(entry, "passed", time.monotonic() - started)

    def close(self) -> None:
        """Tear down once, also when pytest stopped early (``-x``, Ctrl-C)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.backend.close()
        finally:
            self.summary.finish(self.backend.describe())

    # --- internals ----------------------------------------------------------------------------

    def _skip_reason(self, entry: Entry) -> str | None:
        if entry.is_step and entry.step == CLEANUP:
            return None
        if self._cluster_broken:
            return f"cluster step {self._cluster_broken!r} failed"
        name = entry.subtest
        if name is None:
            return None
        if name in self._chain_broken:
            return self._chain_broken[name]
        if not entry.is_step and entry.phase_index == 0:
            unmet = self.backend.unmet(name)
            if unmet:
                self._chain_broken[name] = f"{name}: {unmet}"
                self.backend.drop(name)
                return self._chain_broken[name]
        return None

    def _mark_broken(self, entry: Entry, how: str) -> None:
        if entry.subtest is None:
            if entry.step != CLEANUP:
                self._cluster_broken = entry.step
        elif entry.subtest not in self._chain_broken:
            self._chain_broken[entry.subtest] = f"{entry.subtest}: {how}"
            self.backend.drop(entry.subtest)

    @staticmethod
    def _where(entry: Entry) -> str:
        return f"cluster step {entry.step!r}" if entry.is_step else f"phase {entry.phase!r}"

    def _run_step(self, entry: Entry) -> None:
        self.backend.run_step(entry)

    def _run_phase(self, entry: Entry) -> None:
        name = str(entry.subtest)
        if entry.phase_index == 0:
            phase = self.subtests[name].initial
        else:
            phase = self._next.get(name)
            if phase is None:
                raise AssertionError(
                    f"{name}: the phase before {entry.phase!r} returned nothing to continue with"
                )
        context = self.backend.context(entry)
        self._next[name] = phase(context)

    def _collect(self, entry: Entry, exc: BaseException) -> list[str]:
        owner = f" of subtest {entry.subtest!r}" if entry.subtest else ""
        lines = [f"e2e-dra: {self.suite}: {self._where(entry)}{owner} failed"]
        if isinstance(exc, KeyboardInterrupt):
            return lines
        try:
            lines += self.backend.on_failure(entry, exc)
        except Exception as dump_exc:  # collecting must never hide the real failure
            lines.append(f"e2e-dra: collecting artifacts failed too: {_one_line(dump_exc)}")
        return lines

    @staticmethod
    def _describe(entry: Entry) -> str:
        if entry.is_step:
            return f"cluster step {entry.id}"
        return f"{entry.phase}: {entry.subtest}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
