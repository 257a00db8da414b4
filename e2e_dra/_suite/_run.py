"""The state machine behind the reported tests: chains, skips, timings.

pytest calls :meth:`SuiteRun.execute` once per step of the plan, in plan order. The run keeps
what the steps share: the callable each subtest's chain continues with, which chains broke
(their later phases are skipped, naming the phase that failed), and whether a cluster step broke
the cluster (everything after it is skipped, except the cleanup, which always runs).

The phases of one plan position run together (``_together``): the first of their tests runs them
all, and each test reports its own subtest's outcome. A subtest declared ``alone`` runs by itself
when its own test comes, and so does a phase that a known Kubernetes bug is expected to break
there, and every phase with ``together`` off (the serial mode, kept to compare against).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import pytest

from e2e_dra._suite._artifacts import Summary
from e2e_dra._suite._knownbugs import NET_NOTE, Expected, KnownBugs, one_line
from e2e_dra._suite._narrative import REPLAYED, Narrator
from e2e_dra._suite._steps import ClusterStep, Entry, Plan, SubtestPhase
from e2e_dra._suite._together import Outcome, as_phase_thread, run_together
from e2e_dra.errors import ComponentCrashed
from e2e_dra.subtest import THREE_PHASES, IndependentPhase, StepTime, failing_step
from e2e_dra.waits import check_abort

logger = logging.getLogger(__name__)


class SafetyNetFailure(AssertionError):
    """An entry that passed its own checks, failed by what a safety net found meanwhile."""


class KnownBugNotSeen(AssertionError):
    """A phase that a known Kubernetes bug should have broken passed: the release fixed it, or
    the suite no longer sees it. Either way the declaration must change."""


class Backend(Protocol):
    """Where the cluster steps run and phase contexts come from: the real cluster
    (``RealCluster``), or the backend another plugin of the run returns from the
    ``pytest_e2e_dra_backend`` hook (our tests: one without a cluster)."""

    def run_step(self, step: ClusterStep[Any], early: Entry | None = None) -> None:
        """Run ``step``; ``early`` is the entry that runs right after it when the plan has it
        started during this step (a ``StartNextEarly`` line between them): it may start early
        what does not need this step's cluster (:meth:`ClusterStep.start_early`)."""
        ...

    def unmet(self, subtest: str) -> str | None:
        """Why ``subtest`` cannot run on the versions under test, or None."""
        ...

    def drop(self, subtest: str) -> None:
        """``subtest``'s chain ended early: stop waiting for its driver after restarts."""
        ...

    def context(self, phase: SubtestPhase) -> AbstractContextManager[Any]:
        """The context a phase runs with, for as long as it runs (sets up the subtest's driver
        before its first phase)."""
        ...

    def contain(self, subtest: str) -> str:
        """A known bug broke a phase of ``subtest``: remove its objects now (what the bug acts
        on must not break the phases after it), start again, as they were, the components that
        ended, and wait until the drivers' ResourceSlices are back; what was done, said."""
        ...

    def releases_now(self) -> Mapping[str, str]:
        """The release each component runs now (component -> ``v1.36.2``), for the known bugs
        of the phases about to run; empty when it cannot be told."""
        ...

    def checks(self, entry: Entry) -> list[str]:
        """What the safety nets (claim watch, dropped fields, ...) found that fails ``entry``,
        which just ended; empty when nothing did."""
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
        plan: Plan,
        kept: Sequence[Entry] | None = None,
        *,
        together: bool = True,
        narrator: Narrator | None = None,
    ) -> None:
        self.suite = suite
        self.subtests = dict(subtests)
        self.backend = backend
        self.summary = summary
        self.plan = plan  # its lines say which phases run together
        self.kept = list(plan if kept is None else kept)  # the entries that run, in order
        self.together = together
        self.narrator = narrator or Narrator(suite, total=len(self.kept))
        planned = (e.subtest for e in self.kept if e.chain_position is not None)
        self.known_bugs = KnownBugs(self.subtests, planned)  # which bug breaks what, and verdicts
        self._outcomes: dict[SubtestPhase, Outcome] = {}  # ran in a batch, not reported yet
        self._seconds: dict[Entry, float] = {}  # a phase's own time, when it ran in a batch
        self._started: dict[Entry, float] = {}  # and when it started (time.time())
        self._steps: dict[Entry, list[StepTime]] = {}  # a phase's named steps, as they ended
        self._next: dict[str, Callable[[Any], Any] | None] = {}
        self._chain_broken: dict[str, str] = {}
        self._cluster_broken: str | None = None
        self._closed = False

    def execute(self, entry: Entry) -> None:
        """Run one entry; pytest sees a pass, a failure or a skip with its reason."""
        reason = self._skip_reason(entry)
        if reason:
            self._record(entry, "skipped", 0.0, reason)
            pytest.skip(reason)
        started = time.monotonic()
        # A phase's releases are those running when it starts; a step's, those it started.
        known = self._known_bug(entry) if entry.chain_position is not None else None
        try:
            self.narrator.begin(entry)
            if entry.chain_position is not None:  # a cluster step's line is the narrator's
                logger.info(self._describe(entry))
            self._run_checked(entry)
            known = known or self._known_bug(entry)
            if known is not None:
                raise KnownBugNotSeen(known.not_seen(self._where(entry)))
        except pytest.skip.Exception as exc:
            self._mark_broken(entry, f"skipped in {self._where(entry)}: {exc.msg}")
            self._record(
                entry,
                "skipped",
                time.monotonic() - started,
                exc.msg or "",
                steps=self._steps.pop(entry, []),
            )
            raise
        except BaseException as exc:
            elapsed = self._seconds.pop(entry, time.monotonic() - started)
            outcome = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            notes = self._collect(entry, exc)
            known = known or self._known_bug(entry)
            # Only a failure of the entry's own can be the bug's: not Ctrl-C, not "it passed".
            bug = known if outcome == "failed" and not isinstance(exc, KnownBugNotSeen) else None
            verdict = self.known_bugs.judge(bug, exc, notes, failing_step(exc))
            following = self._following(entry, bug) if verdict.showed else None
            if following is None:
                self._mark_broken(entry, f"{self._where(entry)} failed", exc)
            if bug is not None:
                notes.append(
                    self._contain(entry, bug, following) if verdict.showed else bug.not_this()
                )
            for line in notes:
                exc.add_note(line)
            self._record(
                entry,
                "xfailed" if verdict.expected else outcome,
                elapsed,
                verdict.message,
                notes,
                self._started.pop(entry, None),
                steps=self._steps.pop(entry, []),
                failed_step=verdict.step,
            )
            if bug is not None and verdict.expected:
                logger.info(f"{entry.id}: failed as expected, by {bug.said}")
                pytest.xfail(verdict.message)
            raise
        elapsed = self._seconds.pop(entry, time.monotonic() - started)
        self._record(
            entry,
            "passed",
            elapsed,
            started=self._started.pop(entry, None),
            steps=self._steps.pop(entry, []),
        )

    def _record(
        self,
        entry: Entry,
        outcome: str,
        seconds: float,
        message: str = "",
        notes: list[str] | None = None,
        started: float | None = None,
        *,
        steps: Sequence[StepTime] = (),
        failed_step: str | None = None,
    ) -> None:
        """How ``entry`` ended, in the summary (see :meth:`Summary.record`) and the headlines."""
        self.summary.record(
            entry, outcome, seconds, message, notes, started, steps=steps, failed_step=failed_step
        )
        self.narrator.ended(entry, outcome, message)

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

    def _contain(self, entry: Entry, known: Expected, following: IndependentPhase | None) -> str:
        """After a known bug broke ``entry``: the objects of the subtest that declares it are
        removed and what it crashed started again, so that the suite goes on (one known bug must
        not cost every later phase, nor the other subtests); what was done, said. The declaring
        subtest's chain ends there, unless its phases are independent of each other
        (``following``: the one its chain goes on with). If containing fails, the cluster counts
        as broken."""
        if following is not None:
            self._next[known.owner] = following
        elif known.owner not in self._chain_broken:
            self._chain_broken[known.owner] = f"{known.owner}: {known.said} broke {entry.id}"
            self.backend.drop(known.owner)
        if known.bug.confined:
            said = f"known bug confined to {known.owner}'s own objects: nothing contained"
            logger.info(f"{entry.id}: {said}")
            return f"e2e-dra: {said}"
        try:
            done = self.backend.contain(known.owner)
        except Exception as exc:
            self._cluster_broken = f"{entry.id} (containing a known bug failed)"
            return f"e2e-dra: containing the known bug failed: {one_line(exc)}"
        self._cluster_broken = None  # a crash it caused is over: the components run again
        logger.info(f"{entry.id}: known bug contained: {done}")
        return f"e2e-dra: known bug contained: {done}"

    def _following(self, entry: Entry, known: Expected | None) -> IndependentPhase | None:
        """The phase ``entry``'s chain goes on with after its own known bug broke it: the next
        one, when its phases are independent of each other; else None (the chain ends)."""
        position, name = entry.chain_position, entry.subtest
        if position is None or name is None or known is None or known.owner != name:
            return None
        ran = self.subtests[name].initial if position == 0 else self._next.get(name)
        return ran.following if isinstance(ran, IndependentPhase) else None

    def _known_bug(self, entry: Entry) -> Expected | None:
        """The known bug that should break ``entry`` on the releases running now (a cluster
        step's: one a subtest whose chain goes on declares); see :meth:`KnownBugs.expected`."""
        return self.known_bugs.expected(entry, self.backend.releases_now, self._chain_broken)

    def _skip_reason(self, entry: Entry) -> str | None:
        if entry.always:
            return None
        if entry in self._outcomes:
            return None  # it ran in an earlier test's batch: report how it ended
        if self._cluster_broken:
            return f"cluster step {self._cluster_broken!r} failed"
        name = entry.subtest
        if name is None:
            return None
        if name in self._chain_broken:
            return self._chain_broken[name]
        if entry.chain_position == 0:
            unmet = self.backend.unmet(name)
            if unmet:
                self._chain_broken[name] = f"{name}: {unmet}"
                self.backend.drop(name)
                return self._chain_broken[name]
        past_three = (entry.chain_position or 0) >= len(THREE_PHASES)
        if past_three and name in self._next and self._next[name] is None:
            return f"{name}: its chain ends after the downgrade (its third phase returned None)"
        return None

    def _mark_broken(self, entry: Entry, how: str, exc: BaseException | None = None) -> None:
        if isinstance(exc, ComponentCrashed):  # nothing after it can pass: stop the run cleanly
            self._cluster_broken = f"{entry.id} (a cluster component crashed)"
        if entry.subtest is None:
            if not entry.always:
                self._cluster_broken = entry.id
        elif entry.subtest not in self._chain_broken:
            self._chain_broken[entry.subtest] = f"{entry.subtest}: {how}"
            self.backend.drop(entry.subtest)

    @staticmethod
    def _where(entry: Entry) -> str:
        return entry.where

    def _run_checked(self, entry: Entry) -> None:
        """Run the entry, then ask the safety nets: a finding fails an entry that passed, and is
        added to the report of one that failed anyway."""
        try:
            entry.perform(self)
            if not entry.always:
                check_abort()  # a component that ended while nothing waited fails this entry
        except Exception as exc:
            if not isinstance(exc, pytest.skip.Exception):
                for line in self._checks(entry):
                    exc.add_note(f"{NET_NOTE}{line}")
            raise
        found = self._checks(entry)
        if found:
            more = f" (and {len(found) - 1} more, below)" if len(found) > 1 else ""
            raise SafetyNetFailure(
                f"safety net: {found[0]}{more}" + "".join(f"\n- {line}" for line in found[1:])
            )

    def _checks(self, entry: Entry) -> list[str]:
        try:
            return self.backend.checks(entry)
        except Exception as exc:  # a net that cannot look must say so, not pass
            return [f"the safety nets could not check: {one_line(exc)}"]

    def run_cluster_step(self, step: ClusterStep[Any]) -> None:
        """Run a cluster step of the plan (its test asked)."""
        if not step.always:
            check_abort()  # a component that died since the last entry: say so, do not go on
        self.backend.run_step(step, self._started_early(step))

    def _started_early(self, step: Entry) -> Entry | None:
        """The entry ``step`` starts early: the one that runs next, if it will, when the plan
        has a ``StartNextEarly`` line after ``step``."""
        if not self.plan.starts_next_early(step):
            return None
        at = self.kept.index(step) if step in self.kept else -1
        following = self.kept[at + 1] if 0 <= at < len(self.kept) - 1 else None
        if following is not None and self._skip_reason(following) is None:
            return following
        return None

    def run_phase(self, phase: SubtestPhase) -> None:
        """Run ``phase`` (with the phases it runs together with, the first time), or replay how
        it ended when it ran in an earlier test's batch."""
        if not self.together or self._alone(phase):
            self._call_alone(phase)
            return
        outcome = self._outcomes.pop(phase, None)
        if outcome is None:
            batch = self._batch(phase)
            if batch == [phase]:
                self._call_alone(phase)
                return
            jobs = {p.subtest: (lambda p=p: self._call_phase(p)) for p in batch}
            self.narrator.batch(batch)
            logger.info(f"{phase.name}: {len(batch)} subtests at once: {', '.join(jobs)}")
            done = run_together(jobs)
            self._outcomes.update((p, done[p.subtest]) for p in batch)
            outcome = self._outcomes.pop(phase)
        else:  # its lines were logged during another test: this test's report shows them too
            for record in outcome.records:
                setattr(record, REPLAYED, True)
                logging.getLogger(record.name).handle(record)
        self._seconds[phase] = outcome.seconds
        self._started[phase] = outcome.started
        if outcome.error is not None:
            raise outcome.error

    def _call_alone(self, phase: SubtestPhase) -> None:
        """Run ``phase`` by itself, in this thread, named as its phase thread meanwhile."""
        self.narrator.batch([phase])
        with as_phase_thread(phase.subtest):
            self._call_phase(phase)

    def _alone(self, phase: SubtestPhase) -> bool:
        """Runs by itself: declared so, or a known bug is expected to break it on the releases
        running now (a component it crashes then fails no other subtest's phase), unless that
        bug is confined to the subtest's own objects."""
        known = self._known_bug(phase)
        alone = known is not None and not known.bug.confined
        return bool(self.subtests[phase.subtest].alone) or alone

    def _batch(self, phase: SubtestPhase) -> list[SubtestPhase]:
        """The phases that run together with ``phase``, the first of its line of the plan to
        run: it and the phases of that line after it that run, but those that run alone or are
        skipped."""
        line = [p for p in self.plan.together(phase) if p in self.kept]
        batch = []
        for other in line[line.index(phase) if phase in line else 0 :]:
            if self._alone(other):
                continue
            if other == phase or self._skip_reason(other) is None:
                batch.append(other)
        return batch or [phase]

    def _call_phase(self, phase: SubtestPhase) -> None:
        check_abort()
        name = phase.subtest
        if phase.index == 0:
            run = self.subtests[name].initial
        else:
            run = self._next.get(name)
            if run is None:
                raise AssertionError(
                    f"{name}: the phase before {phase.name!r} returned nothing to continue with"
                )
        with self.backend.context(phase) as context:
            try:
                self._next[name] = run(context)
            finally:  # kept for the phase's own test, which records it (a batch: later)
                self._steps[phase] = list(getattr(context, "steps", ()))

    def _collect(self, entry: Entry, exc: BaseException) -> list[str]:
        owner = f" of subtest {entry.subtest!r}" if entry.subtest else ""
        lines = [f"e2e-dra: {self.suite}: {self._where(entry)}{owner} failed"]
        if isinstance(exc, KeyboardInterrupt):
            return lines
        try:
            lines += self.backend.on_failure(entry, exc)
        except Exception as dump_exc:  # collecting must never hide the real failure
            lines.append(f"e2e-dra: collecting artifacts failed too: {one_line(dump_exc)}")
        return lines + self.narrator.notes(entry)

    @staticmethod
    def _describe(entry: Entry) -> str:
        return entry.title
