"""What every suite's steps learn about their cluster, in one typed place.

Each kind of suite extends :class:`RunState` with its own fields (the upgrade suites: which
release runs where and what undoes the upgrade; the gate cycle: each subtest's gates), so a step
reads typed fields of its own kind and no suite carries another's. ``summary.json`` is rendered
from :meth:`RunState.describe` and never read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e_dra._gotool import binary_go_version
from e2e_dra.releases import Release, VersionsUnderTest


@dataclass
class RunState:
    """The versions under test, the node runtime, the cluster's environment and logs, which
    release each component ran in each state, and what the subtests recorded (facts)."""

    versions: VersionsUnderTest | None = None
    node_runtime: Path | None = None
    node_env: dict[str, str] = field(default_factory=dict)
    cluster_env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    kubeconfig: Path | None = None
    binaries: dict[str, dict[str, str]] = field(default_factory=dict)  # state -> component
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def current(self) -> Release:
        if self.versions is None:
            raise AssertionError("the versions step has not run")
        return self.versions.current

    def record_binaries(self, state: str, releases: Mapping[str, Release]) -> None:
        self.binaries[state] = {c: r.version for c, r in releases.items()}

    def releases_now(self) -> dict[str, str]:
        """Each component's release in the state the cluster is in (the last one recorded)."""
        return dict(list(self.binaries.values())[-1]) if self.binaries else {}

    def describe(self) -> dict[str, Any]:
        """Versions, runtime, environment and releases per state, for ``summary.json``."""
        info: dict[str, Any] = {}
        versions = self.versions
        if versions is not None:
            current, previous = versions.current, versions.previous
            info.update(
                current={
                    "version": current.version,
                    "origin": current.origin,
                    "bin_dir": str(current.bin_dir),
                    "source_dir": str(current.source_dir),
                    "deviations": list(current.deviations),
                    "chosen": versions.choice,
                    **_built_with(current.bin_dir),
                },
                previous={
                    "version": previous.version,
                    "origin": previous.origin,
                    "bin_dir": str(previous.bin_dir),
                    "deviations": list(previous.deviations),
                    **_built_with(previous.bin_dir),
                },
                previous_minor=versions.previous_minor,
                release_source=versions.source,
            )
        if self.node_runtime is not None:
            info["node_runtime"] = str(self.node_runtime)
        if self.log_dir is not None:
            info.update(cluster_env=self.cluster_env, log_dir=str(self.log_dir))
        if self.kubeconfig is not None:
            info["kubeconfig"] = str(self.kubeconfig)
        if self.binaries:
            info["binaries"] = self.binaries
        if self.facts:
            info["facts"] = self.facts
        return info


def _built_with(bin_dir: Path) -> dict[str, str]:
    """``{"go": "go1.27.3"}``: the Go that built the release's API server, as its binary says;
    empty when it cannot be told."""
    go = binary_go_version(bin_dir / "kube-apiserver")
    return {"go": go} if go else {}
