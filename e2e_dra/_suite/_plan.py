"""The order of a run: cluster steps and (subtest, phase) entries, each one reported test.

Kept pure (no cluster, no pytest) so that the order, the seeded shuffling and the selection rules
can be reasoned about and tested on their own.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from e2e_dra.subtest import GATE_CYCLE_PHASES
from e2e_dra.subtest import PHASES as UPGRADE_PHASES

UPGRADE_DOWNGRADE = "upgrade-downgrade"
CONTROL_PLANE_FIRST = "control-plane-first"
KUBELET_LAST = "kubelet-last"
UPGRADE_SUITES = (UPGRADE_DOWNGRADE, CONTROL_PLANE_FIRST, KUBELET_LAST)
"""The upgrade/downgrade suite and its staged variants: the same plan and subtests, different
components moved by the upgrade."""
GATE_CYCLE = "gate-cycle"
CLEANUP = "cleanup"


@dataclass(frozen=True)
class Entry:
    """One reported test: a cluster step, or one phase of one subtest."""

    suite: str
    step: str | None = None  # cluster step name; None for a phase entry
    subtest: str | None = None  # the subtest of a phase; the owner of a per-subtest step
    phase: str | None = None
    phase_index: int = -1

    @property
    def is_step(self) -> bool:
        return self.step is not None

    @property
    def id(self) -> str:
        """The test id: ``core-dra/after-cluster-upgrade``, ``upgrade``, ``core-dra/gate-off``."""
        last = self.step if self.is_step else self.phase
        return f"{self.subtest}/{last}" if self.subtest else str(last)


def shuffled(names: Sequence[str], rng: random.Random) -> list[str]:
    order = sorted(names)
    rng.shuffle(order)
    return order


def upgrade_downgrade_plan(
    subtests: Sequence[str], seed: int, suite: str = UPGRADE_DOWNGRADE
) -> list[Entry]:
    """Bring up the previous release, then every subtest's phase between the cluster changes.

    Every phase gets its own random order (drawn from ``seed``): subtests must not depend on each
    other, and a fixed order would hide it when they do.
    """
    rng = random.Random(seed)
    plan = [Entry(suite, step="versions"), Entry(suite, step="node-runtime")]
    plan.append(Entry(suite, step="bring-up"))
    steps_after = ("upgrade", "downgrade", None)
    for index, (phase, step) in enumerate(zip(UPGRADE_PHASES, steps_after, strict=True)):
        for name in shuffled(subtests, rng):
            plan.append(Entry(suite, subtest=name, phase=phase, phase_index=index))
        if step:
            plan.append(Entry(suite, step=step))
    plan.append(Entry(suite, step=CLEANUP))
    return plan


def gate_cycle_plan(subtests: Sequence[str], seed: int) -> list[Entry]:
    """Per subtest (in random order) its own cluster: gate on, off, on again, then cleanup."""
    rng = random.Random(seed)
    suite = GATE_CYCLE
    plan: list[Entry] = []
    toggles = ("gate-off", "gate-on-again", None)
    for name in shuffled(subtests, rng):
        plan.append(Entry(suite, step="bring-up", subtest=name))
        for index, (phase, step) in enumerate(zip(GATE_CYCLE_PHASES, toggles, strict=True)):
            plan.append(Entry(suite, subtest=name, phase=phase, phase_index=index))
            if step:
                plan.append(Entry(suite, step=step, subtest=name))
        plan.append(Entry(suite, step=CLEANUP, subtest=name))
    plan.insert(0, Entry(suite, step="versions"))
    plan.insert(1, Entry(suite, step="node-runtime"))
    return plan


def needed(plan: Sequence[Entry], selected: Iterable[Entry]) -> list[Entry]:
    """What must run for ``selected`` to make sense, in plan order.

    A phase needs the earlier phases of its subtest (they return the callable it runs) and the
    cluster steps around it; a per-subtest step is needed only when its subtest is. Without any
    selected phase nothing is needed: the suite was deselected as a whole.
    """
    chosen = set(selected)
    subtests = {entry.subtest for entry in chosen if not entry.is_step}
    if not subtests:
        return []
    last_phase: dict[str, int] = {}
    for entry in chosen:
        if not entry.is_step and entry.subtest:
            last_phase[entry.subtest] = max(last_phase.get(entry.subtest, -1), entry.phase_index)
    keep: list[Entry] = []
    for entry in plan:
        if entry.is_step:
            if entry.subtest is None or entry.subtest in subtests:
                keep.append(entry)
        elif entry.subtest in last_phase and entry.phase_index <= last_phase[entry.subtest]:
            keep.append(entry)
    return keep
