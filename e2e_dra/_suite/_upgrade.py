"""TestUpgradeDowngrade and its staged variants: the plan, and the steps that move the cluster.

``upgrade-downgrade`` (upstream's): previous release -> current -> previous, every component at
once. ``control-plane-first``: the upgrade moves kube-apiserver, kube-controller-manager and
kube-scheduler to the current release while the kubelet and kube-proxy stay behind; the downgrade
moves them back. ``kubelet-last``: the control plane runs the current release throughout; the
upgrade moves the kubelet and kube-proxy from an older release (``E2E_DRA_KUBELET_VERSION``, by
default the previous minor, at most three minors behind as the skew policy allows) to the current
one, and the downgrade moves them back. The subtests are the same three-phase chains in every
variant: before the change, after it, after undoing it. A :class:`Variant` is all that differs,
and it is a value: kubelet-last's names its kubelet (:class:`KubeletLast`), so that a run of
several kubelets (``_skew``, the skew matrix) is several values, each planned as a suite. A new
variant is one line of :data:`VARIANTS` (``KubeletLast(suite="kubelet-skew-2", skew=2)``) and a
suite module declaring its name (``e2e_dra/test_kubelet_skew_2.py``: ``E2E_DRA_SUITE =
"kubelet-skew-2"``).

States name what moved and to which release (``0-initial-1.36``, ``1-cp-v1.37.2``,
``2-kubelet-restored-v1.36.5``), so each component's log file says which binary wrote it, and
``summary.json`` records every component's release in every state (``binaries``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from e2e_dra._suite._artifacts import binaries_used, write_json
from e2e_dra._suite._gates import choose_gates, choose_runtime_config
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
    Step,
    SubtestPackages,
)
from e2e_dra.errors import InputError
from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS, ModifyOptions
from e2e_dra.releases import (
    CONTROL_PLANE_COMMANDS,
    NODE_COMMANDS,
    Release,
    ReleaseSource,
    VersionsUnderTest,
    release_source,
    resolve_release,
)
from e2e_dra.report import UPGRADE_KIND, SuiteKind
from e2e_dra.subtest import Subtest, discover
from e2e_dra.versions import parse_version

logger = logging.getLogger(__name__)

RUNTIME_CONFIG = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
FEATURE_GATES = (
    "DRADeviceTaintRules",
    "DRADeviceTaints",
    "DRAExtendedResource",
    "DRAPartitionableDevices",
)
"""Upstream's base settings; subtests add their own ``requires`` and ``feature_gates``."""

CONTROL_PLANE = tuple(c for c in CONTROL_PLANE_COMMANDS if c in KUBE_CLUSTER_COMPONENTS)
NODE = ("kubelet", "kube-proxy")
KUBELET_VERSION_ENV = "E2E_DRA_KUBELET_VERSION"
MAX_KUBELET_SKEW = 3  # minors a kubelet may be behind the API server

UPGRADE_DOWNGRADE = "upgrade-downgrade"
CONTROL_PLANE_FIRST = "control-plane-first"
KUBELET_LAST = "kubelet-last"


# --- which release runs where --------------------------------------------------------------------


@dataclass(frozen=True)
class Releases:
    """Which release each component starts on, and the release the upgrade moves ``moved`` to."""

    initial: Mapping[str, Release]
    current: Release
    moved: tuple[str, ...]

    @property
    def older(self) -> Release:
        """The release the moved components start on (and go back to)."""
        return self.initial[self.moved[0]]

    def upgraded(self) -> dict[str, Release]:
        return {**self.initial, **dict.fromkeys(self.moved, self.current)}

    def runs(self, component: str) -> tuple[str, ...]:
        """The releases ``component`` runs in this suite: its first, and the current one if the
        upgrade moves it."""
        first = self.initial[component].version
        moved = component in self.moved
        return tuple(dict.fromkeys([first, self.current.version] if moved else [first]))

    def all(self) -> list[Release]:
        """Every release of the suite, older first: the ones gates and API versions must suit."""
        return [self.older, self.current]


@dataclass(frozen=True)
class Variant:
    """Which components an upgrade moves, where the cluster starts, and how states are named."""

    suite: str
    moved: tuple[str, ...]
    label: str  # in state names: "1-<label>v1.37.2"
    current_commands: tuple[str, ...] | None = None
    """The commands of the current release the suite needs (None: all)."""
    re_upgrade: bool = False
    """After the downgrade, upgrade once more (a fourth state and phase)."""
    real_drivers: bool = False
    """Its subtests include one per real driver of ``E2E_DRA_DRIVERS`` (``_drivers``)."""

    @property
    def phases(self) -> tuple[str, ...]:
        """The upgrade's phases: before the upgrade, after it, after the downgrade, and after
        the re-upgrade if there is one."""
        return UPGRADE_KIND.phases[: 4 if self.re_upgrade else 3]

    def releases(self, versions: VersionsUnderTest) -> Releases:
        initial = dict.fromkeys(KUBE_CLUSTER_COMPONENTS, versions.previous)
        return Releases(initial, versions.current, self.moved)

    def initial_state(self, versions: VersionsUnderTest, releases: Releases) -> str:
        return f"0-initial-{versions.previous_minor}"

    def upgraded_state(self, releases: Releases) -> str:
        return f"1-{self.label}{releases.current.version}"

    def restored_state(self, versions: VersionsUnderTest, releases: Releases) -> str:
        return f"2-{self.label}restored-{releases.older.version}"

    def re_upgraded_state(self, releases: Releases) -> str:
        return f"3-{self.label}re-upgraded-{releases.current.version}"


class AllAtOnce(Variant):
    """Upstream's: every component moves, and states are named by the previous minor."""

    def restored_state(self, versions: VersionsUnderTest, releases: Releases) -> str:
        return f"2-restored-{versions.previous_minor}"


@dataclass(frozen=True)
class KubeletLast(Variant):
    """The control plane runs the current release throughout; the node starts older: on
    ``kubelet`` (a release, or ``MAJOR.MINOR`` for its newest), ``skew`` minors behind the
    version under test, or (neither given) on the previous release.

    ``KubeletLast(kubelet="1.35")`` and ``KubeletLast(skew=2)`` are whole suites: the plan takes
    the kubelet from the value, never from a setting, so one run can hold several of them."""

    suite: str = KUBELET_LAST
    moved: tuple[str, ...] = NODE
    label: str = "kubelet-"
    kubelet: str | None = None
    skew: int | None = None

    def __post_init__(self) -> None:
        if self.kubelet is not None and self.skew is not None:
            raise ValueError("a kubelet-last variant names its kubelet or its skew, not both")
        if self.skew is not None and not 1 <= self.skew <= MAX_KUBELET_SKEW:
            raise ValueError(f"skew={self.skew}: the skew policy allows 1 to {MAX_KUBELET_SKEW}")

    @property
    def pinned(self) -> bool:
        """Whether the value names its kubelet: then ``E2E_DRA_KUBELET_VERSION`` does not."""
        return self.kubelet is not None or self.skew is not None

    def kubelet_spec(self, current: str) -> str | None:
        """What names the kubelet's release under the version under test ``current``:
        ``kubelet``, or the minor ``skew`` behind it; None: the previous release."""
        if self.skew is None:
            return self.kubelet
        line = parse_version(current).release_line
        return f"{line.major}.{line.minor - self.skew}"

    def kubelet_version(self, current: str, source: ReleaseSource) -> str | None:
        """The exact release the kubelet starts on (None: the previous release), refused where
        the skew policy does not allow it under ``current``."""
        spec = self.kubelet_spec(current)
        if spec is None:
            return None
        version = resolve_release(spec, source, what=KUBELET_VERSION_ENV)
        if why := skew_refused(current, version):
            raise InputError(f"{KUBELET_VERSION_ENV}={spec} ({version}) {why}")
        return version

    def kubelet_release(self, versions: VersionsUnderTest) -> Release:
        """The kubelet's release, fetched: its kubelet and kube-proxy only (see NODE_COMMANDS).
        The previous release asks nothing of a release source."""
        if self.kubelet_spec(versions.current.version) is None:
            return versions.previous
        source = release_source()
        version = self.kubelet_version(versions.current.version, source)
        assert version is not None  # a spec resolves to a release, or raises
        return source.fetch(version, NODE_COMMANDS)  # three binaries of six

    def releases(self, versions: VersionsUnderTest) -> Releases:
        old = self.kubelet_release(versions)
        initial = {c: old if c in NODE else versions.current for c in KUBE_CLUSTER_COMPONENTS}
        return Releases(initial, versions.current, self.moved)

    def initial_state(self, versions: VersionsUnderTest, releases: Releases) -> str:
        return f"0-initial-cp-{releases.current.version}-kubelet-{releases.older.version}"


VARIANTS: dict[str, Variant] = {
    variant.suite: variant
    for variant in (
        AllAtOnce(
            UPGRADE_DOWNGRADE, KUBE_CLUSTER_COMPONENTS, "", re_upgrade=True, real_drivers=True
        ),
        Variant(CONTROL_PLANE_FIRST, CONTROL_PLANE, "cp-", current_commands=CONTROL_PLANE_COMMANDS),
        KubeletLast(),  # the previous release's kubelet, or E2E_DRA_KUBELET_VERSION's (``_skew``)
    )
}
"""Every upgrade variant by its suite's name: a line each (``e2e_dra._suite.SUITES`` makes
each a suite, and a suite module runs it)."""


# --- the cluster's settings ----------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterSettings:
    """FEATURE_GATES and RUNTIME_CONFIG every release of the suite accepts, and what was dropped
    from what the subtests asked for (with why)."""

    feature_gates: str
    runtime_config: str
    feature_gates_dropped: Mapping[str, str] = field(default_factory=dict)
    runtime_config_dropped: Mapping[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {"RUNTIME_CONFIG": self.runtime_config, "FEATURE_GATES": self.feature_gates}


def cluster_settings(active: Sequence[Subtest], releases: Sequence[Release]) -> ClusterSettings:
    """Upstream's gates and API versions plus what ``active`` subtests need, minus what one of
    ``releases`` refuses (said, never silent)."""
    wanted_config = [*RUNTIME_CONFIG]
    wanted_config += sorted({gv for s in active for gv in s.requires} - set(RUNTIME_CONFIG))
    gates_asked = [*FEATURE_GATES, *(gate for s in active for gate in s.feature_gates)]
    wanted_gates = ",".join(_with_value(gate) for gate in gates_asked)
    gates = choose_gates(wanted_gates, [r.bin_dir for r in releases])
    for gate, why in sorted(gates.dropped.items()):
        logger.info(f"FEATURE_GATES: dropping {gate}: {why}")
    config, config_dropped = choose_runtime_config(wanted_config, [r.source_dir for r in releases])
    for group_version, why in sorted(config_dropped.items()):
        logger.info(f"RUNTIME_CONFIG: dropping {group_version}: {why}")
    return ClusterSettings(gates.flag_value, ",".join(config), gates.dropped, config_dropped)


# --- the run state -------------------------------------------------------------------------------


@dataclass
class UpgradeState(RunState):
    """What an upgrade suite's steps learn: which release runs where, the settings every release
    accepts, and the options that undo the upgrade (the downgrade's)."""

    releases: Releases | None = None
    settings: ClusterSettings | None = None
    undo: ModifyOptions | None = None

    def inputs(self) -> tuple[VersionsUnderTest, Releases, ClusterSettings]:
        if self.versions is None or self.releases is None or self.settings is None:
            raise AssertionError("the versions step has not run")
        return self.versions, self.releases, self.settings

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        if self.releases is not None:
            kubelet = self.releases.initial["kubelet"]
            if kubelet is not self.releases.initial["kube-apiserver"]:
                info["kubelet"] = {"version": kubelet.version, "bin_dir": str(kubelet.bin_dir)}
        if self.settings is not None:
            info.update(
                feature_gates=self.settings.feature_gates,
                feature_gates_dropped=dict(self.settings.feature_gates_dropped),
                runtime_config=self.settings.runtime_config,
                runtime_config_dropped=dict(self.settings.runtime_config_dropped),
            )
        return info


# --- the steps -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Versions(ClusterStep[UpgradeState]):
    """The releases under test, where each component starts, and the settings they all accept."""

    variant: Variant
    name: ClassVar[str] = "versions"

    def run(self, cluster: ClusterOps[UpgradeState]) -> None:
        versions = cluster.resolve_versions(self.variant.current_commands)
        releases = self.variant.releases(versions)
        cluster.state.releases = releases
        active = [
            s
            for s in cluster.subtests.values()
            if s.unmet_release(releases.runs("kube-apiserver"), releases.runs("kubelet")) is None
        ]
        cluster.state.settings = cluster_settings(active, releases.all())


@dataclass(frozen=True, kw_only=True)
class BringUp(ClusterStep[UpgradeState]):
    """A cluster of the releases each component starts on (mixed: one link per binary)."""

    variant: Variant
    name: ClassVar[str] = "bring-up"

    def run(self, cluster: ClusterOps[UpgradeState]) -> None:
        versions, releases, settings_ = cluster.state.inputs()
        state = self.variant.initial_state(versions, releases)
        cluster.state.record_binaries(state, releases.initial)
        started = with_kubectl(releases.initial)
        write_json(cluster.artifacts / "bin-initial.json", binaries_used(started))
        bin_dir = link_binaries(cluster.scratch / "bin-initial", started)
        cluster.bring_up(cluster.artifacts, state, bin_dir, settings_.env())


@dataclass(frozen=True, kw_only=True)
class Upgrade(ClusterStep[UpgradeState]):
    """The moved components restart on the current release; what undoes it is kept."""

    variant: Variant
    name: ClassVar[str] = UPGRADE_KIND.changes[0]

    def state_name(self, releases: Releases) -> str:
        return self.variant.upgraded_state(releases)

    def run(self, cluster: ClusterOps[UpgradeState]) -> None:
        _, releases, _ = cluster.state.inputs()
        state = self.state_name(releases)
        current = releases.current
        logger.info(f"upgrading {', '.join(releases.moved)} to {current.version}")
        cluster.state.record_binaries(state, releases.upgraded())
        files = {c: current.bin_dir / c for c in releases.moved}
        cluster.state.undo = cluster.modify(
            state,
            ModifyOptions(file_by_component=files),
            f"after the upgrade to {current.version} ({state})",
        )


@dataclass(frozen=True, kw_only=True)
class Downgrade(ClusterStep[UpgradeState]):
    """What the upgrade changed, undone."""

    variant: Variant
    name: ClassVar[str] = UPGRADE_KIND.changes[1]

    def run(self, cluster: ClusterOps[UpgradeState]) -> None:
        versions, releases, _ = cluster.state.inputs()
        undo = cluster.state.undo
        if undo is None:
            raise AssertionError("the downgrade needs the upgrade's options to undo, and has none")
        state = self.variant.restored_state(versions, releases)
        old = releases.older.version
        logger.info(f"downgrading {', '.join(releases.moved)} to {old}")
        cluster.state.record_binaries(state, releases.initial)
        cluster.modify(state, undo, f"after the downgrade to {old} ({state})")


@dataclass(frozen=True, kw_only=True)
class ReUpgrade(Upgrade):
    """The downgraded cluster upgraded again: what the older release wrote is read by the newer
    one, where storage and validation-ratcheting bugs show."""

    name: ClassVar[str] = UPGRADE_KIND.changes[2]

    def state_name(self, releases: Releases) -> str:
        return self.variant.re_upgraded_state(releases)


# --- the suite -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpgradeSuite:
    """One upgrade/downgrade variant: every subtest's chain around an upgrade and a downgrade."""

    variant: Variant
    kind: ClassVar[SuiteKind] = UPGRADE_KIND

    def find_subtests(self, packages: SubtestPackages) -> list[Subtest]:
        """Every module of the upgrade subtests' package."""
        return discover(packages.upgrade, kind=self.kind)

    @property
    def name(self) -> str:
        return self.variant.suite

    @property
    def phases(self) -> tuple[str, ...]:
        return self.variant.phases

    def plan(self, subtests: Sequence[str], seed: int) -> Plan:
        """Upstream's test function: versions, bring-up, then each phase of every subtest
        between the cluster changes; every phase in its own order (drawn from ``seed``)."""
        order, v = Order(subtests, seed), self.variant

        def phases(index: int) -> Phases:
            return Phases(index, order.next(), names=self.kind.phases)

        steps: list[Step] = [
            *self.before_bring_up(subtests),
            BringUp(variant=v),
            phases(0),
            Upgrade(variant=v),
            phases(1),
            Downgrade(variant=v),
            phases(2),
        ]
        if v.re_upgrade:
            steps += [ReUpgrade(variant=v), phases(3)]
        return Plan(self.name, [*steps, Cleanup()])

    def before_bring_up(self, subtests: Sequence[str]) -> list[Step]:
        """What the cluster needs before it comes up for ``subtests``: the releases, the node
        runtime."""
        return [Versions(variant=self.variant), NodeRuntime()]

    def new_state(self) -> UpgradeState:
        return UpgradeState()

    def unmet(self, cluster: Checks[UpgradeState], subtest: Subtest) -> str | None:
        """Releases the subtest excludes, a gate it needs that a release refused, or an API
        version the server does not serve."""
        releases = cluster.state.releases
        if releases is not None and (
            why := subtest.unmet_release(releases.runs("kube-apiserver"), releases.runs("kubelet"))
        ):
            return why
        dropped = cluster.state.settings.feature_gates_dropped if cluster.state.settings else {}
        for gate in subtest.feature_gates:
            gate_name = gate.partition("=")[0]
            if gate_name in dropped:
                return f"needs feature gate {gate_name}, {dropped[gate_name]}"
        return cluster.unserved(subtest)


UPGRADE_SUITES = {name: UpgradeSuite(variant) for name, variant in VARIANTS.items()}
"""Each variant planned as a plain upgrade suite (``SUITES`` adds the real drivers where a
variant asks for them)."""


# --- helpers -------------------------------------------------------------------------------------


def with_kubectl(releases: Mapping[str, Release]) -> dict[str, Release]:
    """Each component's release, and kubectl of the newest (what the script's cluster is
    driven with)."""
    newest = max(releases.values(), key=lambda r: parse_version(r.version))
    return {**releases, "kubectl": newest}


def link_binaries(path: Path, releases: Mapping[str, Release]) -> Path:
    """A directory holding each component's binary from its release (symlinks), plus kubectl
    of the newest: what hack/local-up-cluster.sh starts a cluster of mixed releases from. A single
    release is started from its own directory, as upstream does. ``path`` must not be under
    ARTIFACTS (an uploader follows links: 515 MB of binaries); what ran is recorded there as
    data instead (:func:`~e2e_dra._suite._artifacts.binaries_used`)."""
    if len({release.bin_dir for release in releases.values()}) == 1:
        return next(iter(releases.values())).bin_dir
    path.mkdir(parents=True, exist_ok=True)
    for component, release in with_kubectl(releases).items():
        link = path / component
        link.unlink(missing_ok=True)
        link.symlink_to(release.bin_dir / component)
    return path


def skew_refused(current: str, kubelet: str) -> str | None:
    """Why the version skew policy refuses a kubelet of ``kubelet`` under a control plane of
    ``current`` (another major, or more than MAX_KUBELET_SKEW minors behind), or None."""
    newer, older = parse_version(current), parse_version(kubelet)
    behind = newer.minor - older.minor
    if newer.major != older.major or not 0 <= behind <= MAX_KUBELET_SKEW:
        return (
            f"is not within {MAX_KUBELET_SKEW} minors behind the control plane ({current}), as "
            "the version skew policy requires"
        )
    return None


def _with_value(gate: str) -> str:
    return gate if "=" in gate else f"{gate}=true"
