"""What a plan is made of: steps, each one reported test.

A :class:`Phase` runs one phase of one subtest's chain; every other step changes the cluster
(:class:`ClusterStep`: bring it up, upgrade it, toggle gates, clean up) and does its work in
:meth:`ClusterStep.run`, over the suite's :class:`~e2e_dra._suite._cluster.ClusterRun`. A suite
is the list of its steps; nothing looks a step up by name.

Kept free of the cluster machinery (it is imported only for types), so plans and selection can be
built and tested without a cluster.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from e2e_dra._suite._cluster import ClusterRun
    from e2e_dra.subtest import Subtest


@dataclass(frozen=True)
class ClusterStep(ABC):
    """A step that changes the cluster; ``subtest`` names the subtest a per-subtest step (the
    gate cycle's own cluster) belongs to."""

    suite: str
    subtest: str | None = None

    name: ClassVar[str] = ""
    always: ClassVar[bool] = False
    """Runs also after a cluster step failed (the cleanup)."""

    @property
    def id(self) -> str:
        """The test id: ``upgrade``, ``core-dra/gate-off``."""
        return f"{self.subtest}/{self.name}" if self.subtest else self.name

    @abstractmethod
    def run(self, cluster: ClusterRun) -> None:
        """Do this step's part to the cluster."""

    def prepare(self, cluster: ClusterRun) -> None:
        """Start early what this step can start while the step before it waits for the cluster
        it is done with (the next cluster's control plane, while the last one's kubelet removes
        ResourceSlices); :meth:`run` uses it, or does everything itself. Nothing by default."""
        del cluster  # most steps need the cluster they follow


@dataclass(frozen=True)
class Phase:
    """One phase of one subtest: ``index`` 0 calls the subtest's ``initial``, each later one the
    callable the phase before returned."""

    suite: str
    subtest: str
    index: int
    name: str

    @property
    def id(self) -> str:
        """The test id: ``core-dra/after-cluster-upgrade``."""
        return f"{self.subtest}/{self.name}"


Step = ClusterStep | Phase


class Suite(Protocol):
    """A suite: its plan (the flow, top to bottom), and why a subtest cannot run in it."""

    @property
    def name(self) -> str: ...

    @property
    def phases(self) -> tuple[str, ...]: ...

    @property
    def gate_cycle(self) -> bool:
        """Its subtests live in the gate cycle's package and toggle gates."""
        ...

    def plan(self, subtests: Sequence[str], seed: int) -> list[Step]: ...

    def unmet(self, cluster: ClusterRun, subtest: Subtest) -> str | None: ...


@dataclass(frozen=True)
class Cleanup(ClusterStep):
    """Tear everything down; runs whatever failed before."""

    name: ClassVar[str] = "cleanup"
    always: ClassVar[bool] = True

    def run(self, cluster: ClusterRun) -> None:
        cluster.close()


@dataclass(frozen=True)
class NodeRuntime(ClusterStep):
    """containerd, etcd, CNI and the rest a kubelet needs, provisioned once per host."""

    name: ClassVar[str] = "node-runtime"

    def run(self, cluster: ClusterRun) -> None:
        cluster.prepare_node()


def shuffled(names: Iterable[str], rng: random.Random) -> list[str]:
    """``names`` in an order drawn from ``rng``: subtests must not depend on each other, and a
    fixed order would hide it when they do."""
    order = sorted(names)
    rng.shuffle(order)
    return order


def needed(plan: Sequence[Step], selected: Iterable[Step]) -> list[Step]:
    """What must run for ``selected`` to make sense, in plan order.

    A phase needs the earlier phases of its subtest (they return the callable it runs) and the
    cluster steps around it; a per-subtest step is needed only when its subtest is. Without any
    selected phase nothing is needed: the suite was deselected as a whole.
    """
    last_phase: dict[str, int] = {}
    for step in selected:
        if isinstance(step, Phase):
            last_phase[step.subtest] = max(last_phase.get(step.subtest, -1), step.index)
    if not last_phase:
        return []
    keep: list[Step] = []
    for step in plan:
        if isinstance(step, Phase):
            if step.index <= last_phase.get(step.subtest, -1):
                keep.append(step)
        elif step.subtest is None or step.subtest in last_phase:
            keep.append(step)
    return keep
