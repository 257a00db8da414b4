"""Where Kubernetes server binaries come from: a release download, or a build from source."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from e2e_dra.releases._download import DownloadSource
    from e2e_dra.releases._gobuild import BUILT_COMMANDS, CONTROL_PLANE_COMMANDS, GoBuildSource
    from e2e_dra.releases._http import Budget
    from e2e_dra.releases._select import (
        VersionsUnderTest,
        current_release,
        plan_versions,
        release_source,
        resolve_release,
        versions_under_test,
    )

__all__ = [
    "BUILT_COMMANDS",
    "CONTROL_PLANE_COMMANDS",
    "SERVER_COMPONENTS",
    "Budget",
    "DownloadSource",
    "GoBuildSource",
    "Release",
    "ReleaseSource",
    "VersionsUnderTest",
    "current_release",
    "plan_versions",
    "release_source",
    "resolve_release",
    "versions_under_test",
]

_LAZY = {
    "BUILT_COMMANDS": "e2e_dra.releases._gobuild",
    "CONTROL_PLANE_COMMANDS": "e2e_dra.releases._gobuild",
    "Budget": "e2e_dra.releases._http",
    "DownloadSource": "e2e_dra.releases._download",
    "GoBuildSource": "e2e_dra.releases._gobuild",
    "VersionsUnderTest": "e2e_dra.releases._select",
    "current_release": "e2e_dra.releases._select",
    "plan_versions": "e2e_dra.releases._select",
    "release_source": "e2e_dra.releases._select",
    "resolve_release": "e2e_dra.releases._select",
    "versions_under_test": "e2e_dra.releases._select",
}


SERVER_COMPONENTS: tuple[str, ...] = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
)
"""The long-running server binaries a release must have, in the order a cluster starts them (the
engine, which imports nothing of ours, keeps the same list: a unit test holds them equal)."""


@dataclass(frozen=True)
class Release:
    """Server binaries of one Kubernetes version, ready to run."""

    version: str
    bin_dir: Path
    source_dir: Path | None
    origin: str  # "download" | "build" | "local"
    # How these binaries differ from the release as published, e.g. a pinned module the Go module
    # proxy does not serve and the version built instead. Empty for a faithful release.
    deviations: tuple[str, ...] = ()


class ReleaseSource(Protocol):
    """One way of getting releases; the harness does not care which."""

    name: str

    def resolve(self, minor: str) -> str:
        """``"1.36"`` -> ``"v1.36.5"``: newest stable of that minor, else its newest pre-release."""
        ...

    def latest_stable(self) -> str:
        """The newest stable release of all."""
        ...

    def latest(self) -> str:
        """The newest release of all, pre-releases included."""
        ...

    def unobtainable(self, version: str, commands: tuple[str, ...] = ...) -> str | None:
        """Why ``version`` (its ``commands``) cannot be had here, if that can be told in seconds."""
        ...

    def fetch(self, version: str, commands: tuple[str, ...] = ...) -> Release:
        """The binaries of ``version``, from the cache when they are there."""
        ...


def __getattr__(name: str) -> Any:  # lazy, so that importing the types stays cheap
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
