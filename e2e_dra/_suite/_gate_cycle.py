"""TestFeatureGateCycle: per subtest its own cluster of the current release, with the subtest's
gates on, off, and on again (``phase-0-gate-on``, ``phase-1-gate-off``, ``phase-2-gate-on-again``).

The control plane may emulate an older version so that gates locked in the current release can
still be toggled; the kubelet has no such switch, so the engine keeps locked gates off its
command line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from e2e_dra._suite._state import RunState
from e2e_dra._suite._steps import (
    Checks,
    Cleanup,
    ClusterOps,
    ClusterStep,
    NodeRuntime,
    Order,
    Phases,
    Plan,
    StartNextEarly,
    Step,
    SubtestPackages,
)
from e2e_dra._suite._upgrade import RUNTIME_CONFIG
from e2e_dra.localupcluster import PROBED_BINARY, refusal
from e2e_dra.report import GATE_CYCLE_KIND, SuiteKind
from e2e_dra.subtest import Subtest, discover

GATE_CYCLE = GATE_CYCLE_KIND.name
GATE_CYCLE_PHASES = GATE_CYCLE_KIND.phases
GATE_OFF, GATE_ON_AGAIN = GATE_CYCLE_KIND.changes


@dataclass
class GateCycleState(RunState):
    """What the gate cycle's steps learn: per subtest its cluster's environment and gates, and
    which of its dependent gates the current release has (asked once per run)."""

    per_subtest: dict[str, dict[str, Any]] = field(default_factory=dict)
    dependent_gates: dict[str, tuple[str, ...]] = field(default_factory=dict)
    slice_removal_checked: bool = False  # by the first cluster's cleanup (GateCycleCleanup)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        if self.per_subtest:
            info["subtests"] = self.per_subtest
        return info


Ops = ClusterOps[GateCycleState]


@dataclass(frozen=True)
class CurrentRelease(ClusterStep[GateCycleState]):
    """Only the current release: the gate cycle upgrades nothing."""

    name: ClassVar[str] = "versions"

    def run(self, cluster: Ops) -> None:
        cluster.resolve_versions()


@dataclass(frozen=True)
class BringUpWithGatesOn(ClusterStep[GateCycleState]):
    """The subtest's own cluster, its gates on. Its control plane starts while the cluster
    before it waits for the kubelet's 30 s ResourceSlice wiping delay (the plan's
    :class:`StartNextEarly` line before it); its node when that cluster is gone."""

    name: ClassVar[str] = "bring-up"

    def run(self, cluster: Ops) -> None:
        log_dir, env, gates = self._arguments(cluster)
        cluster.state.per_subtest[self._subtest(cluster).name] = {"env": env, "gates": gates}
        current = cluster.state.current()
        cluster.bring_up(log_dir, GATE_CYCLE_PHASES[0], current.bin_dir, env, gates)

    def start_early(self, cluster: Ops) -> None:
        log_dir, env, gates = self._arguments(cluster)
        current = cluster.state.current()
        cluster.start_early(log_dir, GATE_CYCLE_PHASES[0], current.bin_dir, env, gates)

    def _subtest(self, cluster: Ops) -> Subtest:
        assert self.subtest is not None
        return cluster.subtests[self.subtest]

    def _arguments(self, cluster: Ops) -> tuple[Path, dict[str, str], str]:
        """The cluster's log directory, environment and ``--feature-gates``."""
        subtest = self._subtest(cluster)
        env = {"RUNTIME_CONFIG": ",".join(dict.fromkeys([*RUNTIME_CONFIG, *subtest.requires]))}
        if subtest.emulated_version:
            env["EMULATED_VERSION"] = subtest.emulated_version
        return cluster.artifacts / subtest.name, env, gate_flag(cluster.state, subtest, on=True)


@dataclass(frozen=True)
class _Toggle(ClusterStep[GateCycleState]):
    """The cluster restarted with the subtest's toggled gates ``on`` or off. While a gate is
    off the apiserver drops its fields from re-published slices, which the drivers are told to
    expect; once it is on again, the drivers publish their slices whole again."""

    on: ClassVar[bool]
    state_name: ClassVar[str]

    def run(self, cluster: Ops) -> None:
        assert self.subtest is not None
        subtest = cluster.subtests[self.subtest]
        harness = cluster.harness(subtest.name)
        drivers = harness.plugins if harness is not None else []
        if not self.on:
            for driver in drivers:
                driver.set_expect_dropped_fields(True)
        cluster.restart_with_gates(self.state_name, gate_flag(cluster.state, subtest, on=self.on))
        if harness is not None and self.on:
            # While the gate was off the publisher settled on the stripped slices; publishing
            # again (to an apiserver that keeps the fields now) restores them.
            if subtest.resources is not None and harness.plugin is not None:
                harness.plugin.publish(subtest.resources(list(cluster.nodes)))
            for other in subtest.other_drivers:
                harness.others[other.suffix].publish(other.resources(list(cluster.nodes)))
        cluster.wait_for_slices(f"after {self.state_name}")
        if self.on:
            for driver in drivers:
                driver.set_expect_dropped_fields(False)


@dataclass(frozen=True)
class GatesOff(_Toggle):
    """The apiserver drops the gated fields from what is written while the gate is off."""

    name: ClassVar[str] = GATE_OFF
    on: ClassVar[bool] = False
    state_name: ClassVar[str] = GATE_CYCLE_PHASES[1]


@dataclass(frozen=True)
class GatesOnAgain(_Toggle):
    """The fields are kept again; the driver publishes its slices whole again."""

    name: ClassVar[str] = GATE_ON_AGAIN
    on: ClassVar[bool] = True
    state_name: ClassVar[str] = GATE_CYCLE_PHASES[2]


@dataclass(frozen=True)
class GateCycleCleanup(Cleanup):
    """A subtest's cluster torn down. Every cluster of the gate cycle runs the same kubelet, so
    the first cleanup of a run waits for it to remove the stopped drivers' slices (the slice
    removal net) and the later ones do not wait the kubelet's 30 s again."""

    def checks_slice_removal(self, state: RunState) -> bool:
        assert isinstance(state, GateCycleState)
        first, state.slice_removal_checked = not state.slice_removal_checked, True
        return first


@dataclass(frozen=True)
class GateCycleSuite:
    """Every subtest in a cluster of its own, its gates cycled on, off, on."""

    kind: ClassVar[SuiteKind] = GATE_CYCLE_KIND
    name: ClassVar[str] = GATE_CYCLE
    phases: ClassVar[tuple[str, ...]] = GATE_CYCLE_PHASES

    def find_subtests(self, packages: SubtestPackages) -> list[Subtest]:
        """The gate cycle's own package: each subtest names the gates it toggles."""
        return discover(packages.gate_cycle, kind=self.kind)

    def plan(self, subtests: Sequence[str], seed: int) -> Plan:
        """Upstream's TestFeatureGateCycle: per subtest (in an order drawn from ``seed``) bring
        up, phase, gates off, phase, gates on again, phase, cleanup; each cluster after the
        first has its control plane started during the cleanup before it."""
        steps: list[Step] = [CurrentRelease(), NodeRuntime()]
        for at, name in enumerate(Order(subtests, seed).next()):

            def phase(index: int, name: str = name) -> Phases:
                return Phases(index, (name,), names=GATE_CYCLE_PHASES)

            if at:
                steps.append(StartNextEarly())
            steps += [
                BringUpWithGatesOn(name),
                phase(0),
                GatesOff(name),
                phase(1),
                GatesOnAgain(name),
                phase(2),
                GateCycleCleanup(name),
            ]
        return Plan(self.name, steps)

    def new_state(self) -> GateCycleState:
        return GateCycleState()

    def unmet(self, cluster: Checks[GateCycleState], subtest: Subtest) -> str | None:
        """An emulated version newer than the release, gates the release refuses on or off,
        releases the subtest excludes, or an API version the server does not serve."""
        current = cluster.state.current()
        emulated = subtest.emulated_version
        if emulated and _minor(emulated) > _minor(current.version):
            return f"emulates {emulated}, newer than the current release {current.version}"
        if not emulated:
            binary = current.bin_dir / PROBED_BINARY
            for on in (True, False):
                gates = gate_flag(cluster.state, subtest, on=on)
                why = refusal(binary, gates)
                if why is not None:
                    return f"{current.version} cannot run with --feature-gates={gates}: {why}"
        if why := subtest.unmet_release((current.version,), (current.version,)):
            return why
        return cluster.unserved(subtest)


def gate_flag(state: GateCycleState, subtest: Subtest, *, on: bool) -> str:
    """``--feature-gates`` of ``subtest``'s cluster: its gates on, the toggled (and dependent)
    ones ``on``."""
    toggled = (*subtest.toggled_gates, *dependent_gates(state, subtest))
    parts = [turn(subtest.feature_gates, "true"), turn(toggled, str(on).lower())]
    return ",".join(part for part in parts if part)


def dependent_gates(state: GateCycleState, subtest: Subtest) -> tuple[str, ...]:
    """The subtest's dependent gates that the current release has (asked once per run)."""
    known = state.dependent_gates
    if subtest.name not in known:
        binary = state.current().bin_dir / PROBED_BINARY
        known[subtest.name] = tuple(
            gate for gate in subtest.dependent_gates if refusal(binary, f"{gate}=true") is None
        )
    return known[subtest.name]


def turn(gates: tuple[str, ...], value: str) -> str:
    """``("A", "B"), "true"`` -> ``"A=true,B=true"`` (upstream's turnFg)."""
    return ",".join(f"{gate.partition('=')[0]}={value}" for gate in gates)


def _minor(version: str) -> tuple[int, int]:
    match = re.match(r"v?(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"not a Kubernetes version: {version!r}")
    return int(match.group(1)), int(match.group(2))
