"""Each suite's plan, run step by step over a recording cluster: what every step asks of it.

The steps talk to the cluster only through ``ClusterOps``; :class:`RecordingCluster` is that
interface over nothing, writing down each call. The releases are stand-in programs that answer
``--feature-gates`` as a release's kube-apiserver does (``fake_k8s.gate_validator``), so the
settings step really asks them. What a bring-up or a restart then does to real components is the
real lane's (``tests/real``) and the main job's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_k8s.gate_validator import fake_release

from e2e_dra._suite import (
    CONTROL_PLANE_FIRST,
    GATE_CYCLE,
    KUBELET_LAST,
    SUITES,
    UPGRADE_DOWNGRADE,
    ClusterStep,
    Plan,
)
from e2e_dra._suite._artifacts import binaries_used
from e2e_dra._suite._cluster import RealCluster
from e2e_dra._suite._steps import Cleanup, NodeRuntime, Phases, StartNextEarly, SubtestPhase
from e2e_dra._suite._upgrade import FEATURE_GATES, Downgrade, Versions
from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS, ModifyOptions
from e2e_dra.releases import Program, Release, VersionsUnderTest
from e2e_dra.subtest import discover

GATES = " ".join([*FEATURE_GATES, "DRAConsumableCapacity", "DRADeviceBindingConditions"])


@dataclass
class Recorded:
    """A driver's calls that a gate toggle makes."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def set_expect_dropped_fields(self, expect: bool) -> None:
        self.calls.append(("expect-dropped", expect))

    def publish(self, resources: Any) -> None:
        self.calls.append(("publish", resources))


@dataclass
class Drivers:
    plugin: Recorded
    others: dict[str, Recorded] = field(default_factory=dict)

    @property
    def plugins(self) -> list[Recorded]:
        return [self.plugin, *self.others.values()]


class RecordingCluster:
    """The steps' view of a cluster, over nothing: each call written to :attr:`calls`."""

    def __init__(self, suite: str, subtests: dict[str, Any], tmp_path: Path) -> None:
        self.state = SUITES[suite].new_state()
        self.artifacts = tmp_path / "artifacts"
        self.scratch = tmp_path / "scratch"
        self.subtests = subtests
        self.nodes = ["node-1"]
        self.calls: list[tuple[Any, ...]] = []
        self.drivers = Drivers(Recorded())
        self.undo = ModifyOptions(bin_dir=tmp_path / "undo")
        self._previous = self._release(tmp_path, "v1.37.2")
        self._current = self._release(tmp_path, "v1.38.0-beta.0")

    @staticmethod
    def _release(tmp_path: Path, version: str) -> Release:
        bin_dir = fake_release(tmp_path, version, GATES)
        for component in (*KUBE_CLUSTER_COMPONENTS, "kubectl"):
            (bin_dir / component).touch()
        return Release(version, bin_dir, source_dir=None, origin="build")

    def resolve_versions(self, commands: tuple[str, ...] | None = None) -> VersionsUnderTest:
        self.calls.append(("resolve_versions", commands))
        versions = VersionsUnderTest(self._current, self._previous, "1.37", "build")
        self.state.versions = versions
        return versions

    def prepare_node(self) -> None:
        self.calls.append(("prepare_node",))

    def bring_up(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        self.calls.append(("bring_up", state, bin_dir, env, gates))

    def start_early(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        self.calls.append(("start_early", state, gates))

    def modify(self, state: str, options: ModifyOptions, why: str) -> ModifyOptions:
        self.calls.append(("modify", state, options))
        return self.undo

    def restart_with_gates(self, state: str, gates: str) -> None:
        self.calls.append(("restart_with_gates", state, gates))

    def wait_for_slices(self, why: str) -> None:
        self.calls.append(("wait_for_slices", why))

    def harness(self, subtest: str) -> Drivers:
        return self.drivers

    def close(self, *, slice_removal: bool = True) -> None:
        self.calls.append(("close", slice_removal))

    def unserved(self, subtest: Any) -> str | None:
        return None


def run_cluster_steps(plan: Plan, cluster: RecordingCluster) -> list[str]:
    """Every cluster step of ``plan`` run in order over ``cluster``; their ids."""
    ran = []
    for entry in plan:
        if entry.chain_position is None:
            assert isinstance(entry, ClusterStep)
            entry.run(cluster)
            ran.append(entry.id)
    return ran


def calls_named(cluster: RecordingCluster, name: str) -> list[tuple[Any, ...]]:
    return [call for call in cluster.calls if call[0] == name]


def test_the_upgrade_downgrade_plan_reads_as_upstreams_test_function() -> None:
    plan = SUITES[UPGRADE_DOWNGRADE].plan(["b", "a"], 3)
    lines = [type(step).__name__ for step in plan.steps]
    assert lines == [
        "Versions",
        "NodeRuntime",
        "BringUp",
        "Phases",
        "Upgrade",
        "Phases",
        "Downgrade",
        "Phases",
        "ReUpgrade",
        "Phases",
        "Cleanup",
    ]
    groups = [step for step in plan.steps if isinstance(step, Phases)]
    assert [g.index for g in groups] == [0, 1, 2, 3]
    assert all(sorted(g.order) == ["a", "b"] for g in groups)
    assert all(step.suite == UPGRADE_DOWNGRADE for step in plan.steps)
    first = next(e for e in plan if isinstance(e, SubtestPhase))
    assert plan.together(first) == groups[0].phases()


def test_the_gate_cycle_plan_starts_each_next_cluster_early_during_the_cleanup_before_it() -> None:
    """Its own line between one subtest's cleanup and the next one's bring-up; never before the
    first bring-up, never after the last cleanup; and no test of its own."""
    plan = SUITES[GATE_CYCLE].plan(["a", "b", "c"], 4)
    per_subtest = [
        "BringUpWithGatesOn",
        "Phases",
        "GatesOff",
        "Phases",
        "GatesOnAgain",
        "Phases",
        "GateCycleCleanup",
    ]
    assert [type(step).__name__ for step in plan.steps] == [
        "CurrentRelease",
        "NodeRuntime",
        *per_subtest,
        "StartNextEarly",
        *per_subtest,
        "StartNextEarly",
        *per_subtest,
    ]
    assert all(step.suite == GATE_CYCLE for step in plan.steps)
    assert len(plan.entries) == 2 + 3 * len(per_subtest)  # it reports nothing itself
    lines = plan.steps
    for at, line in enumerate(lines):
        if isinstance(line, StartNextEarly):
            assert lines[at - 1].entries()[0].name == "cleanup"
            assert lines[at + 1].entries()[0].name == "bring-up"
    cleanups = [entry for entry in plan if entry.name == "cleanup"]
    assert [entry for entry in plan if plan.starts_next_early(entry)] == cleanups[:2]


@pytest.mark.parametrize("suite", [UPGRADE_DOWNGRADE, CONTROL_PLANE_FIRST, KUBELET_LAST])
def test_an_upgrade_plan_starts_nothing_early(suite: str) -> None:
    plan = SUITES[suite].plan(["a", "b"], 4)
    assert not any(isinstance(step, StartNextEarly) for step in plan.steps)
    assert not any(plan.starts_next_early(entry) for entry in plan)


@pytest.mark.parametrize(
    "steps",
    [
        [StartNextEarly(), NodeRuntime()],
        [Phases(0, ("a",), names=("p",)), StartNextEarly(), Cleanup()],
    ],
    ids=["first", "after-phases"],
)
def test_a_start_next_early_line_follows_a_cluster_step(steps: list[Any]) -> None:
    with pytest.raises(ValueError, match="must follow a cluster step"):
        Plan("x", steps)


def test_upgrade_downgrade_moves_every_component_back_and_forth(tmp_path: Path) -> None:
    cluster = RecordingCluster(UPGRADE_DOWNGRADE, {}, tmp_path)
    plan = SUITES[UPGRADE_DOWNGRADE].plan([], 1)

    ran = run_cluster_steps(plan, cluster)

    steps = ["versions", "node-runtime", "bring-up", "upgrade", "downgrade", "re-upgrade"]
    assert ran == [*steps, "cleanup"]
    (bring_up,) = calls_named(cluster, "bring_up")
    assert bring_up[1:3] == ("0-initial-1.37", cluster._previous.bin_dir)
    assert set(bring_up[3]) == {"FEATURE_GATES", "RUNTIME_CONFIG"}
    assert "DRADeviceTaints=true" in bring_up[3]["FEATURE_GATES"]
    upgrade, downgrade, again = calls_named(cluster, "modify")
    current = cluster._current.bin_dir
    assert upgrade[1] == "1-v1.38.0-beta.0"
    assert upgrade[2].file_by_component == {c: current / c for c in KUBE_CLUSTER_COMPONENTS}
    assert downgrade[1:] == ("2-restored-1.37", cluster.undo)  # what the upgrade returned
    assert again[1] == "3-re-upgraded-v1.38.0-beta.0"
    assert again[2].file_by_component == upgrade[2].file_by_component
    assert cluster.state.binaries["3-re-upgraded-v1.38.0-beta.0"]["kubelet"] == "v1.38.0-beta.0"
    assert cluster.state.binaries["1-v1.38.0-beta.0"]["kubelet"] == "v1.38.0-beta.0"
    assert cluster.state.binaries["2-restored-1.37"]["kube-apiserver"] == "v1.37.2"
    assert cluster.calls[-1] == ("close", True)  # and waits for the kubelet's slice removal


def test_control_plane_first_moves_only_the_control_plane(tmp_path: Path) -> None:
    cluster = RecordingCluster(CONTROL_PLANE_FIRST, {}, tmp_path)
    ran = run_cluster_steps(SUITES[CONTROL_PLANE_FIRST].plan([], 1), cluster)

    assert "re-upgrade" not in ran  # only upgrade-downgrade goes up again
    assert calls_named(cluster, "resolve_versions")[0][1] is not None  # only what it needs
    upgrade, downgrade = calls_named(cluster, "modify")
    assert set(upgrade[2].file_by_component) == {
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    }
    assert (upgrade[1], downgrade[1]) == ("1-cp-v1.38.0-beta.0", "2-cp-restored-v1.37.2")


def test_kubelet_last_starts_a_mixed_cluster_from_links(tmp_path: Path) -> None:
    cluster = RecordingCluster(KUBELET_LAST, {}, tmp_path)
    (cluster._previous.bin_dir / "kubelet").write_bytes(b"the older kubelet")
    run_cluster_steps(SUITES[KUBELET_LAST].plan([], 1), cluster)

    (bring_up,) = calls_named(cluster, "bring_up")
    state, bin_dir = bring_up[1:3]
    assert state == "0-initial-cp-v1.38.0-beta.0-kubelet-v1.37.2"
    assert (bin_dir / "kubelet").resolve() == cluster._previous.bin_dir / "kubelet"
    assert (bin_dir / "kube-apiserver").resolve() == cluster._current.bin_dir / "kube-apiserver"
    upgrade, _ = calls_named(cluster, "modify")
    assert set(upgrade[2].file_by_component) == {"kubelet", "kube-proxy"}
    # the links are kept out of the artifacts; what ran is recorded there as data
    assert bin_dir.is_relative_to(cluster.scratch)
    assert [p for p in cluster.artifacts.rglob("*") if p.is_symlink()] == []
    used = json.loads((cluster.artifacts / "bin-initial.json").read_text())
    assert sorted(used) == sorted([*KUBE_CLUSTER_COMPONENTS, "kubectl"])
    assert used["kubelet"] == {
        "release": "v1.37.2",
        "path": str(cluster._previous.bin_dir / "kubelet"),
        "size": len(b"the older kubelet"),
        "sha256": hashlib.sha256(b"the older kubelet").hexdigest(),
    }
    assert used["kube-apiserver"]["release"] == used["kubectl"]["release"] == "v1.38.0-beta.0"


def test_a_binary_that_cannot_be_read_is_said_in_place_of_its_digest(tmp_path: Path) -> None:
    release = Release("v1.37.2", tmp_path / "bin", source_dir=None, origin="build")
    used = binaries_used({"kubelet": release})
    assert used["kubelet"]["path"] == str(tmp_path / "bin" / "kubelet")
    assert "sha256" not in used["kubelet"]
    assert used["kubelet"]["error"].startswith("cannot read it: ")


def test_a_downgrade_without_the_upgrades_undo_says_so(tmp_path: Path) -> None:
    cluster = RecordingCluster(UPGRADE_DOWNGRADE, {}, tmp_path)
    variant = SUITES[UPGRADE_DOWNGRADE].variant  # type: ignore[attr-defined]
    Versions(variant=variant).run(cluster)
    with pytest.raises(AssertionError, match="needs the upgrade's options to undo"):
        Downgrade(variant=variant).run(cluster)


def test_the_gate_cycle_toggles_gates_and_has_the_drivers_publish_whole_again(
    tmp_path: Path,
) -> None:
    subtests = {s.name: s for s in discover("e2e_dra.subtests.gate_cycle", gate_cycle=True)}
    name = "consumable-capacity"
    cluster = RecordingCluster(GATE_CYCLE, {name: subtests[name]}, tmp_path)
    plan = SUITES[GATE_CYCLE].plan([name], 1)
    cleanup = next(e for e in plan if e.id == f"{name}/cleanup")
    bring_up = next(e for e in plan if e.id == f"{name}/bring-up")

    ran = run_cluster_steps(plan, cluster)
    bring_up.start_early(cluster)
    cleanup.start_early(cluster)  # the cleanup starts nothing early

    assert ran == [
        "versions",
        "node-runtime",
        f"{name}/bring-up",
        f"{name}/gate-off",
        f"{name}/gate-on-again",
        f"{name}/cleanup",
    ]
    off, on = calls_named(cluster, "restart_with_gates")
    assert "DRAConsumableCapacity=false" in off[2] and off[1] == "phase-1-gate-off"
    assert "DRAConsumableCapacity=true" in on[2] and on[1] == "phase-2-gate-on-again"
    (early,) = calls_named(cluster, "start_early")
    assert early[2] == calls_named(cluster, "bring_up")[0][4]  # the same gates as its bring-up
    calls = cluster.drivers.plugin.calls
    assert [call[0] for call in calls] == ["expect-dropped", "publish", "expect-dropped"]
    assert (calls[0][1], calls[2][1]) == (True, False)  # fields dropped only while it is off
    assert cluster.calls.index(on) < cluster.calls.index(("wait_for_slices", f"after {on[1]}"))
    assert cluster.state.describe()["subtests"][name]["gates"] == early[2]


def test_the_gate_cycle_waits_for_the_kubelets_slice_removal_in_its_first_cluster_only(
    tmp_path: Path,
) -> None:
    """Its clusters all run the current kubelet: the first cleanup of a run checks that it
    removes the stopped drivers' slices, the later ones do not wait its 30 s again."""
    subtests = {s.name: s for s in discover("e2e_dra.subtests.gate_cycle", gate_cycle=True)}
    cluster = RecordingCluster(GATE_CYCLE, subtests, tmp_path)

    run_cluster_steps(SUITES[GATE_CYCLE].plan(sorted(subtests), 5), cluster)

    closes = calls_named(cluster, "close")
    assert closes == [("close", True)] + [("close", False)] * (len(subtests) - 1)


@dataclass
class RecordedKind:
    """A driver kind that records which kubelet releases it was built for."""

    label: str = "recorded"
    built: list[str] = field(default_factory=list)

    def program(self, kubelet: str, upgraded: bool = False) -> Program:
        self.built.append(f"{kubelet}{' (upgraded)' if upgraded else ''}")
        return Program("drv", f"for-{kubelet}", Path("/bin/drv"))

    def describe(self) -> dict[str, Any]:
        return {"kind": "recorded"}


def test_upgrade_downgrade_builds_each_real_driver_for_every_kubelet_before_the_cluster_is_up(
    tmp_path: Path,
) -> None:
    kind = RecordedKind()
    subtest = SimpleNamespace(
        name="driver-recorded",
        node_driver=kind,
        requires=(),
        feature_gates=(),
        unmet_release=lambda *_: None,
    )
    cluster = RecordingCluster(UPGRADE_DOWNGRADE, {"driver-recorded": subtest}, tmp_path)
    ran = run_cluster_steps(SUITES[UPGRADE_DOWNGRADE].plan(["driver-recorded"], 1), cluster)

    assert ran[:4] == ["versions", "node-runtime", "driver-builds", "bring-up"]
    assert ran[4:] == ["upgrade", "downgrade", "re-upgrade", "cleanup"]
    assert kind.built == ["v1.37.2", "v1.38.0-beta.0 (upgraded)"]
    described = cluster.state.describe()["drivers"]["recorded"]
    assert described["v1.37.2"]["version"] == "for-v1.37.2"
    assert described["v1.38.0-beta.0"]["kind"] == "recorded"


def test_the_real_clusters_scratch_is_outside_the_artifacts_and_gone_once_it_closed(
    tmp_path: Path,
) -> None:
    artifacts = tmp_path / "artifacts"
    backend: RealCluster[Any] = RealCluster(SUITES[KUBELET_LAST], {}, artifacts)
    scratch = backend.steps.scratch
    assert scratch.is_dir() and not scratch.resolve().is_relative_to(artifacts.resolve())
    assert backend.steps.scratch == scratch  # one per suite
    (scratch / "bin-initial").mkdir()
    (scratch / "bin-initial" / "kubelet").symlink_to(tmp_path)

    backend.close()

    assert not scratch.exists()
