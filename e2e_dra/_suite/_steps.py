"""What a plan is made of: cluster steps and groups of phases, read top to bottom.

A suite's plan is a literal list, as upstream's test function reads::

    [Versions, NodeRuntime, BringUp, Phases(0), Upgrade, Phases(1), Downgrade, Phases(2), Cleanup]

A :class:`ClusterStep` changes the cluster in :meth:`ClusterStep.run`, over the narrow
:class:`ClusterOps` (so a step runs as well over a recording fake as over the real cluster). A
:class:`Phases` group is one position of the chains: the same phase of several subtests, run
together. A :class:`StartNextEarly` line between one cluster's cleanup and the next cluster's
bring-up has that bring-up's control plane started during the cleanup. Each entry pytest reports
(an :class:`Entry`: a cluster step, or one :class:`SubtestPhase`) says what the run needs to
know of it as data (``always``, ``chain_position``, ``restarts_allowed``, ``kind``) and
:meth:`~ClusterStep.perform` hands itself to the runner's method for its kind, so the run asks no
entry for its type.

Free of the cluster machinery, so plans and selection are built and tested without a cluster.
"""

from __future__ import annotations

import dataclasses
import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from e2e_dra._suite._state import RunState

if TYPE_CHECKING:
    from e2e_dra.driver import Driver
    from e2e_dra.localupcluster import ModifyOptions
    from e2e_dra.releases import VersionsUnderTest
    from e2e_dra.report import SuiteKind
    from e2e_dra.subtest import Subtest

S = TypeVar("S", bound=RunState)
S_co = TypeVar("S_co", bound=RunState, covariant=True)
S_contra = TypeVar("S_contra", bound=RunState, contravariant=True)


class Runner(Protocol):
    """What runs the entries pytest reports: a cluster step, or a subtest's phase."""

    def run_cluster_step(self, step: ClusterStep[Any]) -> None: ...

    def run_phase(self, phase: SubtestPhase) -> None: ...


class SubtestDrivers(Protocol):
    """A subtest's e2e-dra plugins, as a step that restarts the cluster handles them (a real
    driver is the same program before and after: nothing to tell it)."""

    @property
    def plugin(self) -> Driver | None:
        """Its own plugin, unless it runs a real driver."""
        ...

    @property
    def others(self) -> Mapping[str, Driver]: ...

    @property
    def plugins(self) -> list[Driver]:
        """Its own plugin (if any), then its others."""
        ...


class ClusterOps(Protocol[S_co]):
    """What a cluster step may do to the cluster, and the typed state of its kind of suite."""

    @property
    def state(self) -> S_co: ...

    @property
    def artifacts(self) -> Path: ...

    @property
    def scratch(self) -> Path:
        """A directory of this suite's run outside ``artifacts``, for what must not be kept
        there (links to release binaries: an uploader follows them); gone when the suite
        ends."""
        ...

    @property
    def subtests(self) -> Mapping[str, Subtest]: ...

    @property
    def nodes(self) -> Sequence[str]: ...

    def resolve_versions(self, commands: tuple[str, ...] | None = None) -> VersionsUnderTest:
        """The releases under test (of the current one only ``commands``, when given)."""
        ...

    def prepare_node(self) -> None:
        """containerd, etcd, CNI and the rest a kubelet needs."""
        ...

    def bring_up(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        """A cluster in ``state``, ready (the one started early for these arguments, if any)."""
        ...

    def start_early(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        """The control plane :meth:`bring_up` will be asked for, started now, its node held."""
        ...

    def modify(self, state: str, options: ModifyOptions, why: str) -> ModifyOptions:
        """Components restarted as ``options`` say, every driver's slices back; the undo."""
        ...

    def restart_with_gates(self, state: str, gates: str) -> None:
        """The cluster restarted with ``--feature-gates=gates``; slices not waited for."""
        ...

    def wait_for_slices(self, why: str) -> None:
        """Until every driver's ResourceSlices are back."""
        ...

    def harness(self, subtest: str) -> SubtestDrivers | None:
        """``subtest``'s drivers, once its first phase set them up."""
        ...

    def close(self, *, slice_removal: bool = True) -> None:
        """Objects torn down, drivers stopped, the nets' last look, the cluster stopped;
        ``slice_removal``: wait until the kubelet removed the stopped drivers' slices."""
        ...


@dataclass(frozen=True)
class ClusterStep(ABC, Generic[S_contra]):
    """A step that changes the cluster; ``subtest`` names the subtest a per-subtest step (the
    gate cycle's own cluster) belongs to. The :class:`Plan` fills in ``suite``."""

    subtest: str | None = None
    suite: str = field(default="", kw_only=True)

    name: ClassVar[str] = ""
    always: ClassVar[bool] = False
    """Runs also after a cluster step failed (the cleanup)."""
    kind: ClassVar[str] = "step"
    chain_position: ClassVar[int | None] = None
    restarts_allowed: ClassVar[bool] = True
    """The components may restart during it: the liveness net must not call that a crash."""

    @property
    def id(self) -> str:
        """The test id: ``upgrade``, ``core-dra/gate-off``."""
        return f"{self.subtest}/{self.name}" if self.subtest else self.name

    @property
    def where(self) -> str:
        return f"cluster step {self.id!r}"

    @property
    def title(self) -> str:
        """What the log says when it starts."""
        return f"cluster step {self.id}"

    def entries(self) -> list[Entry]:
        """What pytest reports of this line of the plan: the step itself."""
        return [self]

    def phases(self) -> list[SubtestPhase]:
        """The phases of this line of the plan: none."""
        return []

    def perform(self, runner: Runner) -> None:
        runner.run_cluster_step(self)

    @abstractmethod
    def run(self, cluster: ClusterOps[S_contra]) -> None:
        """Do this step's part to the cluster."""

    def start_early(self, cluster: ClusterOps[S_contra]) -> None:
        """Start what this step can start while the step before it waits for the cluster it is
        done with (the next cluster's control plane, while the last one's kubelet removes
        ResourceSlices), when a :class:`StartNextEarly` line of the plan comes before it;
        :meth:`run` uses it, or does everything itself. Nothing by default."""
        del cluster  # most steps need the cluster they follow


@dataclass(frozen=True)
class SubtestPhase:
    """One phase of one subtest: ``index`` 0 calls the subtest's ``initial``, each later one the
    callable the phase before returned."""

    suite: str
    subtest: str
    index: int
    name: str

    always: ClassVar[bool] = False
    kind: ClassVar[str] = "phase"
    restarts_allowed: ClassVar[bool] = False

    @property
    def chain_position(self) -> int:
        return self.index

    @property
    def id(self) -> str:
        """The test id: ``core-dra/after-cluster-upgrade``."""
        return f"{self.subtest}/{self.name}"

    @property
    def where(self) -> str:
        return f"phase {self.name!r}"

    @property
    def title(self) -> str:
        return f"{self.name}: {self.subtest}"

    def perform(self, runner: Runner) -> None:
        runner.run_phase(self)

    def start_early(self, cluster: object) -> None:
        """A phase needs the cluster it runs on: nothing starts early."""
        del cluster


Entry = ClusterStep | SubtestPhase
"""What pytest reports: a cluster step, or one subtest's phase."""


@dataclass(frozen=True)
class Phases:
    """One position of every chain: phase ``index`` of each subtest, in ``order`` (drawn for
    this position alone: subtests must not depend on each other, and a fixed order would hide
    it when they do). The phases of a group run at the same time."""

    index: int
    order: tuple[str, ...]
    names: tuple[str, ...] = field(kw_only=True)
    suite: str = field(default="", kw_only=True)

    def phases(self) -> list[SubtestPhase]:
        return [SubtestPhase(self.suite, s, self.index, self.names[self.index]) for s in self.order]

    def entries(self) -> list[Entry]:
        return list(self.phases())


@dataclass(frozen=True)
class StartNextEarly:
    """A line between one cluster's cleanup and the next cluster's bring-up: the bring-up's
    control plane (:meth:`ClusterStep.start_early`) starts during that cleanup, once its drivers
    stopped, while the kubelet wipes their ResourceSlices (about 30 s); the bring-up then only
    starts the node. Not a test of its own: it happens inside the step before it, for the entry
    that runs after it (the next one selected, if it runs)."""

    suite: str = field(default="", kw_only=True)

    def entries(self) -> list[Entry]:
        return []

    def phases(self) -> list[SubtestPhase]:
        return []


Step = ClusterStep | Phases | StartNextEarly
"""What a plan lists."""


class Plan:
    """A suite's steps in order, each bound to the suite; the entries pytest reports."""

    def __init__(self, suite: str, steps: Iterable[Step]) -> None:
        self.suite = suite
        self.steps: list[Step] = [dataclasses.replace(step, suite=suite) for step in steps]
        self.entries = [entry for step in self.steps for entry in step.entries()]
        self._together: dict[SubtestPhase, list[SubtestPhase]] = {}  # each phase's line of the plan
        self._early_during: set[Entry] = set()  # the steps a StartNextEarly line follows
        for before, step in zip([None, *self.steps], self.steps, strict=False):
            line = step.phases()
            self._together.update(dict.fromkeys(line, line))
            if isinstance(step, StartNextEarly):
                if not isinstance(before, ClusterStep):
                    raise ValueError(f"{suite}: a StartNextEarly line must follow a cluster step")
                self._early_during.add(before)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __contains__(self, entry: object) -> bool:
        return entry in self.entries

    def together(self, phase: SubtestPhase) -> list[SubtestPhase]:
        """The phases of ``phase``'s line of the plan: those that run at the same time."""
        return list(self._together.get(phase, [phase]))

    def starts_next_early(self, entry: Entry) -> bool:
        """Whether a :class:`StartNextEarly` line follows ``entry``: during it, the entry that
        runs after it starts early."""
        return entry in self._early_during


@dataclass(frozen=True)
class SubtestPackages:
    """Where the suites' subtest modules live (the pytest ini options name them)."""

    upgrade: str = "e2e_dra.subtests"
    gate_cycle: str = "e2e_dra.subtests.gate_cycle"


class Suite(Protocol[S]):
    """A suite: its plan (the flow, top to bottom), its run state, and why a subtest cannot run
    in it."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> SuiteKind:
        """Upgrade or gate cycle: the phases its chains may run, the steps that change the
        cluster between them, which subtests it takes."""
        ...

    @property
    def phases(self) -> tuple[str, ...]: ...

    def find_subtests(self, packages: SubtestPackages) -> list[Subtest]:
        """Its subtests: the modules of its package, or what its settings name."""
        ...

    def plan(self, subtests: Sequence[str], seed: int) -> Plan: ...

    def new_state(self) -> S:
        """The typed state its steps share, empty."""
        ...

    def unmet(self, cluster: Checks[S], subtest: Subtest) -> str | None: ...


class Checks(Protocol[S_co]):
    """What a suite asks the cluster to tell whether a subtest can run on it."""

    @property
    def state(self) -> S_co: ...

    def unserved(self, subtest: Subtest) -> str | None:
        """The first API version ``subtest`` requires that the server does not serve, said."""
        ...


@dataclass(frozen=True)
class Cleanup(ClusterStep[RunState]):
    """Tear everything down; runs whatever failed before."""

    name: ClassVar[str] = "cleanup"
    always: ClassVar[bool] = True

    def run(self, cluster: ClusterOps[RunState]) -> None:
        cluster.close(slice_removal=self.checks_slice_removal(cluster.state))

    def checks_slice_removal(self, state: RunState) -> bool:
        """Whether this cleanup waits for the kubelet to remove the stopped drivers' slices
        (about 30 s, the kubelet's delay after a plugin unregisters): in every suite's cluster;
        a suite of many clusters of one release says otherwise."""
        return True


@dataclass(frozen=True)
class NodeRuntime(ClusterStep[RunState]):
    """containerd, etcd, CNI and the rest a kubelet needs, provisioned once per host."""

    name: ClassVar[str] = "node-runtime"

    def run(self, cluster: ClusterOps[RunState]) -> None:
        cluster.prepare_node()


class Order:
    """The subtests, in a new order drawn from one seed each time one is asked for."""

    def __init__(self, subtests: Iterable[str], seed: int) -> None:
        self._sorted = sorted(subtests)
        self._rng = random.Random(seed)

    def next(self) -> tuple[str, ...]:
        order = list(self._sorted)
        self._rng.shuffle(order)
        return tuple(order)


def needed(plan: Iterable[Entry], selected: Iterable[Entry]) -> list[Entry]:
    """What must run for ``selected`` to make sense, in plan order.

    A phase needs the earlier phases of its subtest (they return the callable it runs) and the
    cluster steps around it; a per-subtest step is needed only when its subtest is. Without any
    selected phase nothing is needed: the suite was deselected as a whole.
    """
    last_phase: dict[str, int] = {}
    for entry in selected:
        if entry.chain_position is not None and entry.subtest is not None:
            known = last_phase.get(entry.subtest, -1)
            last_phase[entry.subtest] = max(known, entry.chain_position)
    if not last_phase:
        return []
    keep: list[Entry] = []
    for entry in plan:
        if entry.chain_position is not None:
            if entry.chain_position <= last_phase.get(entry.subtest or "", -1):
                keep.append(entry)
        elif entry.subtest is None or entry.subtest in last_phase:
            keep.append(entry)
    return keep
