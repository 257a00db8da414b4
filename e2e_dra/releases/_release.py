"""What a release is, and the interface every source of releases has: the names the rest of
the package builds on (the face re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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
