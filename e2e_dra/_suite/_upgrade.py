"""TestUpgradeDowngrade's cluster steps: previous release -> current -> previous again.

States are named as upstream (``0-initial-1.36``, ``1-v1.37.2``, ``2-restored-1.36``), so each
component's log file says which binary wrote it.
"""

from __future__ import annotations

from typing import Any

from e2e_dra._suite._gates import choose_gates
from e2e_dra._suite._plan import Entry
from e2e_dra._suite._real import ClusterBackend
from e2e_dra.subtest import too_old

RUNTIME_CONFIG = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
FEATURE_GATES = (
    "DRADeviceTaintRules",
    "DRADeviceTaints",
    "DRAExtendedResource",
    "DRAPartitionableDevices",
)
"""Upstream's base settings; subtests add their own ``requires`` and ``feature_gates``."""


class UpgradeDowngradeBackend(ClusterBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._restore: Any = None
        self._feature_gates = ""
        self._runtime_config = ""

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
        versions = self.resolve_versions()
        active = [
            s
            for s in self.subtests.values()
            if too_old(s.since, versions.previous.version, versions.current.version) is None
        ]
        runtime_config = [*RUNTIME_CONFIG]
        runtime_config += sorted({gv for s in active for gv in s.requires} - set(RUNTIME_CONFIG))
        wanted = ",".join(
            _with_value(gate)
            for gate in [*FEATURE_GATES, *(g for s in active for g in s.feature_gates)]
        )
        choice = choose_gates(wanted, [versions.previous.bin_dir, versions.current.bin_dir])
        for gate, why in sorted(choice.dropped.items()):
            self.say(f"FEATURE_GATES: dropping {gate}: {why}")
        self._feature_gates = choice.flag_value
        self._runtime_config = ",".join(runtime_config)
        self.info.update(
            feature_gates=self._feature_gates,
            feature_gates_dropped=choice.dropped,
            runtime_config=self._runtime_config,
        )

    @property
    def _previous_state(self) -> str:
        assert self.versions is not None
        return self.versions.previous_minor

    def _bring_up(self) -> None:
        assert self.versions is not None
        env = {"RUNTIME_CONFIG": self._runtime_config, "FEATURE_GATES": self._feature_gates}
        self.bring_up(
            self.artifacts,
            f"0-initial-{self._previous_state}",
            self.versions.previous.bin_dir,
            env,
        )

    def _upgrade(self) -> None:
        from localupcluster import ModifyOptions

        assert self.cluster is not None and self.versions is not None
        current = self.versions.current
        self.say(f"upgrading to {current.version}")
        self._restore = self.cluster.modify(
            f"1-{current.version}", ModifyOptions(bin_dir=current.bin_dir)
        )
        self.refresh_clients()
        self.wait_for_slices(f"after the upgrade to {current.version}")

    def _downgrade(self) -> None:
        assert self.cluster is not None and self._restore is not None
        self.say(f"downgrading to {self._previous_state}")
        self.cluster.modify(f"2-restored-{self._previous_state}", self._restore)
        self.refresh_clients()
        self.wait_for_slices(f"after the downgrade to {self._previous_state}")


def _with_value(gate: str) -> str:
    return gate if "=" in gate else f"{gate}=true"
