"""TestFeatureGateCycle's cluster steps: per subtest its own cluster of the current release,
with the subtest's gates on, off, and on again (``phase-0-gate-on``, ``phase-1-gate-off``,
``phase-2-gate-on-again``).

The control plane may emulate an older version so that gates locked in the current release can
still be toggled; the kubelet has no such switch, so the engine keeps locked gates off its
command line.
"""

from __future__ import annotations

import re
from typing import Any

from e2e_dra._suite._backend import ClusterBackend
from e2e_dra._suite._plan import GATE_CYCLE_PHASES, Entry
from e2e_dra._suite._upgrade import RUNTIME_CONFIG
from localupcluster import PROBED_BINARY, refusal


class GateCycleBackend(ClusterBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dependents: dict[str, tuple[str, ...]] = {}

    def run_step(self, entry: Entry) -> None:
        step, name = entry.step, entry.subtest
        if step == "versions":
            self.resolve_versions()
        elif step == "node-runtime":
            self.prepare_node()
        elif step == "bring-up":
            self._bring_up(str(name))
        elif step == "gate-off":
            self._toggle(str(name), on=False)
        elif step == "gate-on-again":
            self._toggle(str(name), on=True)
        elif step == "cleanup":
            self.close()
        else:
            raise ValueError(f"unknown cluster step {step!r}")

    def tested_versions(self) -> tuple[str, ...]:
        assert self.versions is not None
        return (self.versions.current.version,)

    def unmet(self, name: str) -> str | None:
        assert self.versions is not None
        subtest = self.subtests[name]
        current = self.versions.current
        emulated = subtest.emulated_version
        if emulated and _minor(emulated) > _minor(current.version):
            return f"emulates {emulated}, newer than the current release {current.version}"
        if not emulated:
            binary = current.bin_dir / PROBED_BINARY
            for on in (True, False):
                gates = self._gates(name, on)
                why = refusal(binary, gates)
                if why is not None:
                    return f"{current.version} cannot run with --feature-gates={gates}: {why}"
        return super().unmet(name)

    def _gates(self, name: str, on: bool) -> str:
        subtest = self.subtests[name]
        toggled = (*subtest.toggled_gates, *self._dependent_gates(name))
        parts = [turn(subtest.enabled_gates, "true"), turn(toggled, str(on).lower())]
        return ",".join(part for part in parts if part)

    def _dependent_gates(self, name: str) -> tuple[str, ...]:
        """The subtest's dependent gates that the current release has (asked once)."""
        if name not in self._dependents:
            assert self.versions is not None
            binary = self.versions.current.bin_dir / PROBED_BINARY
            self._dependents[name] = tuple(
                gate
                for gate in self.subtests[name].dependent_gates
                if refusal(binary, f"{gate}=true") is None
            )
        return self._dependents[name]

    def _bring_up(self, name: str) -> None:
        assert self.versions is not None
        subtest = self.subtests[name]
        env = {"RUNTIME_CONFIG": ",".join([*RUNTIME_CONFIG, *subtest.extra_runtime_config])}
        if subtest.emulated_version:
            env["EMULATED_VERSION"] = subtest.emulated_version
        self.info.setdefault("subtests", {})[name] = {"env": env, "gates": self._gates(name, True)}
        self.bring_up(
            self.artifacts / name,
            GATE_CYCLE_PHASES[0],
            self.versions.current.bin_dir,
            env,
            self._gates(name, True),
        )

    def _toggle(self, name: str, *, on: bool) -> None:
        assert self.cluster is not None
        harness = self.harnesses.get(name)
        state = GATE_CYCLE_PHASES[2] if on else GATE_CYCLE_PHASES[1]
        if harness is not None and not on:
            # The apiserver drops the gated fields from re-published slices while the gate is off.
            harness.driver.set_expect_dropped_fields(True)
        self.cluster.toggle_feature_gates(state, self._gates(name, on))
        self.refresh_clients()
        if harness is not None and on:
            # While the gate was off the publisher settled on the stripped slices; publishing
            # again (to an apiserver that keeps the fields now) restores them.
            subtest = self.subtests[name]
            if subtest.resources is not None:
                harness.driver.publish(subtest.resources(self.nodes))
        self.harnesses.wait_for_slices(f"after {state}")
        if harness is not None and on:
            harness.driver.set_expect_dropped_fields(False)


def turn(gates: tuple[str, ...], value: str) -> str:
    """``("A", "B"), "true"`` -> ``"A=true,B=true"`` (upstream's turnFg)."""
    return ",".join(f"{gate.partition('=')[0]}={value}" for gate in gates)


def _minor(version: str) -> tuple[int, int]:
    match = re.match(r"v?(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"not a Kubernetes version: {version!r}")
    return int(match.group(1)), int(match.group(2))
