"""TestUpgradeDowngrade's cluster steps, and the staged upgrades real clusters go through.

``upgrade-downgrade`` (upstream's): previous release -> current -> previous, every component at
once. ``control-plane-first``: the upgrade moves kube-apiserver, kube-controller-manager and
kube-scheduler to the current release while the kubelet and kube-proxy stay behind; the downgrade
moves them back. ``kubelet-last``: the control plane runs the current release throughout; the
upgrade moves the kubelet and kube-proxy from an older release (``E2E_DRA_KUBELET_VERSION``, by
default the previous minor, at most three minors behind as the skew policy allows) to the current
one, and the downgrade moves them back. The subtests are the same three-phase chains in every
variant: before the change, after it, after undoing it.

States name what moved and to which release (``0-initial-1.36``, ``1-cp-v1.37.2``,
``2-kubelet-restored-v1.36.5``), so each component's log file says which binary wrote it, and
``summary.json`` records every component's release in every state (``binaries``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e_dra._suite._backend import ClusterBackend
from e2e_dra._suite._gates import choose_gates, choose_runtime_config
from e2e_dra._suite._plan import CONTROL_PLANE_FIRST, KUBELET_LAST, UPGRADE_DOWNGRADE, Entry
from e2e_dra.errors import InputError
from e2e_dra.releases import CONTROL_PLANE_COMMANDS, Release, release_source, resolve_release
from e2e_dra.settings import settings
from e2e_dra.versions import parse_version
from localupcluster import KUBE_CLUSTER_COMPONENTS, ModifyOptions

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


@dataclass(frozen=True)
class Variant:
    """Which components an upgrade moves, and how its states are named."""

    moved: tuple[str, ...]
    label: str  # in state names: "1-<label>v1.37.2"


VARIANTS = {
    UPGRADE_DOWNGRADE: Variant(moved=KUBE_CLUSTER_COMPONENTS, label=""),
    CONTROL_PLANE_FIRST: Variant(moved=CONTROL_PLANE, label="cp-"),
    KUBELET_LAST: Variant(moved=NODE, label="kubelet-"),
}


class UpgradeDowngradeBackend(ClusterBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.variant = VARIANTS[self.suite]
        self._restore: Any = None
        self._feature_gates = ""
        self._runtime_config = ""
        # kubelet-last: the release the kubelet starts on (the previous one elsewhere)
        self._old: Release | None = None

    def run_step(self, entry: Entry) -> None:
        step = entry.step
        if step == "versions":
            self._versions()
        elif step == "node-runtime":
            self.prepare_node()
        elif step == "bring-up":
            self._bring_up()
        elif step == "upgrade":
            self._upgrade()
        elif step == "downgrade":
            self._downgrade()
        elif step == "cleanup":
            self.close()
        else:
            raise ValueError(f"unknown cluster step {step!r}")

    def _versions(self) -> None:
        # control plane first needs only the control plane of the release it upgrades to
        versions = self.resolve_versions(
            CONTROL_PLANE_COMMANDS if self.suite == CONTROL_PLANE_FIRST else None
        )
        self._old = versions.previous
        if self.suite == KUBELET_LAST:
            self._old = _kubelet_release(versions.current, versions.previous)
            self.info["kubelet"] = {"version": self._old.version, "bin_dir": str(self._old.bin_dir)}
        control_plane, kubelet = self.control_plane_versions(), self.kubelet_versions()
        active = [
            s for s in self.subtests.values() if s.unmet_release(control_plane, kubelet) is None
        ]
        runtime_config = [*RUNTIME_CONFIG]
        runtime_config += sorted({gv for s in active for gv in s.requires} - set(RUNTIME_CONFIG))
        wanted = ",".join(
            _with_value(gate)
            for gate in [*FEATURE_GATES, *(g for s in active for g in s.feature_gates)]
        )
        choice = choose_gates(wanted, [r.bin_dir for r in self._releases()])
        for gate, why in sorted(choice.dropped.items()):
            logger.info(f"FEATURE_GATES: dropping {gate}: {why}")
        self._feature_gates = choice.flag_value
        runtime_config, runtime_dropped = choose_runtime_config(
            runtime_config, [r.source_dir for r in self._releases()]
        )
        for group_version, why in sorted(runtime_dropped.items()):
            logger.info(f"RUNTIME_CONFIG: dropping {group_version}: {why}")
        self._runtime_config = ",".join(runtime_config)
        self.info.update(
            feature_gates=self._feature_gates,
            feature_gates_dropped=choice.dropped,
            runtime_config=self._runtime_config,
            runtime_config_dropped=runtime_dropped,
        )

    def tested_versions(self) -> tuple[str, ...]:
        return tuple(release.version for release in self._releases())

    def control_plane_versions(self) -> tuple[str, ...]:
        return self._runs("kube-apiserver")

    def kubelet_versions(self) -> tuple[str, ...]:
        return self._runs("kubelet")

    def _runs(self, component: str) -> tuple[str, ...]:
        """The releases ``component`` runs in this suite: its first, and the current one if the
        upgrade moves it."""
        assert self.versions is not None
        first = self._initial()[component].version
        moved = component in self.variant.moved
        return tuple(dict.fromkeys([first, self.versions.current.version] if moved else [first]))

    def _releases(self) -> list[Release]:
        assert self.versions is not None and self._old is not None
        older = [self.versions.previous] if self.suite != KUBELET_LAST else [self._old]
        return [*older, self.versions.current]

    def _initial(self) -> dict[str, Release]:
        """Which release each component starts on."""
        assert self.versions is not None and self._old is not None
        if self.suite == KUBELET_LAST:
            return {c: self._old if c in NODE else self.versions.current for c in self._components}
        return dict.fromkeys(self._components, self.versions.previous)

    @property
    def _components(self) -> tuple[str, ...]:
        return KUBE_CLUSTER_COMPONENTS

    def _record(self, state: str, releases: dict[str, Release]) -> None:
        self.info.setdefault("binaries", {})[state] = {c: r.version for c, r in releases.items()}

    def _bring_up(self) -> None:
        assert self.versions is not None and self._old is not None
        env = {"RUNTIME_CONFIG": self._runtime_config, "FEATURE_GATES": self._feature_gates}
        initial = self._initial()
        if self.suite == KUBELET_LAST:
            state = f"0-initial-cp-{self.versions.current.version}-kubelet-{self._old.version}"
        else:
            state = f"0-initial-{self.versions.previous_minor}"
        self._record(state, initial)
        self.bring_up(self.artifacts, state, _bin_dir(self.artifacts / "bin-initial", initial), env)

    def _upgrade(self) -> None:
        assert self.cluster is not None and self.versions is not None
        current = self.versions.current
        moved = self.variant.moved
        state = f"1-{self.variant.label}{current.version}"
        logger.info(f"upgrading {', '.join(moved)} to {current.version}")
        self._record(state, {**self._initial(), **dict.fromkeys(moved, current)})
        self._restore = self.cluster.modify(
            state, ModifyOptions(file_by_component={c: current.bin_dir / c for c in moved})
        )
        self.refresh_clients()
        self.harnesses.wait_for_slices(f"after the upgrade to {current.version} ({state})")

    def _downgrade(self) -> None:
        assert self.cluster is not None and self._restore is not None
        initial = self._initial()
        old = initial[self.variant.moved[0]]
        state = f"2-{self.variant.label}restored-{old.version}"
        if self.suite == UPGRADE_DOWNGRADE:
            state = f"2-restored-{self.versions.previous_minor if self.versions else old.version}"
        logger.info(f"downgrading {', '.join(self.variant.moved)} to {old.version}")
        self._record(state, initial)
        self.cluster.modify(state, self._restore)
        self.refresh_clients()
        self.harnesses.wait_for_slices(f"after the downgrade to {old.version} ({state})")


def _bin_dir(path: Path, releases: dict[str, Release]) -> Path:
    """A directory holding each component's binary from its release (symlinks), plus kubectl
    of the newest: what hack/local-up-cluster.sh starts a cluster of mixed releases from. A single
    release is started from its own directory, as upstream does."""
    if len({release.bin_dir for release in releases.values()}) == 1:
        return next(iter(releases.values())).bin_dir
    path.mkdir(parents=True, exist_ok=True)
    newest = max(releases.values(), key=lambda r: parse_version(r.version))
    for component, release in {**releases, "kubectl": newest}.items():
        link = path / component
        link.unlink(missing_ok=True)
        link.symlink_to(release.bin_dir / component)
    return path


def _kubelet_release(current: Release, previous: Release) -> Release:
    """``E2E_DRA_KUBELET_VERSION`` (a release or MAJOR.MINOR), by default the previous one."""
    spec = settings().kubelet_version
    if not spec:
        return previous
    source = release_source()
    version = resolve_release(spec, source, what=KUBELET_VERSION_ENV)
    newer, older = parse_version(current.version), parse_version(version)
    behind = newer.minor - older.minor
    if newer.major != older.major or not 0 <= behind <= MAX_KUBELET_SKEW:
        raise InputError(
            f"{KUBELET_VERSION_ENV}={spec} ({version}) is not within {MAX_KUBELET_SKEW} minors "
            f"behind the control plane ({current.version}), as the version skew policy requires"
        )
    return source.fetch(version)


def _with_value(gate: str) -> str:
    return gate if "=" in gate else f"{gate}=true"
