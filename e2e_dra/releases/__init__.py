"""Where Kubernetes server binaries come from: a release download, or a build from source."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from e2e_dra.releases._download import DownloadSource
    from e2e_dra.releases._gobuild import GoBuildSource
    from e2e_dra.releases._select import (
        VersionsUnderTest,
        current_release,
        release_source,
        versions_under_test,
    )

__all__ = [
    "DownloadSource",
    "GoBuildSource",
    "Release",
    "ReleaseSource",
    "VersionsUnderTest",
    "current_release",
    "release_source",
    "versions_under_test",
]

_LAZY = {
    "DownloadSource": "e2e_dra.releases._download",
    "GoBuildSource": "e2e_dra.releases._gobuild",
    "VersionsUnderTest": "e2e_dra.releases._select",
    "current_release": "e2e_dra.releases._select",
    "release_source": "e2e_dra.releases._select",
    "versions_under_test": "e2e_dra.releases._select",
}


@dataclass(frozen=True)
class Release:
    """Server binaries of one Kubernetes version, ready to run."""

    version: str
    bin_dir: Path
    source_dir: Path | None
    origin: str  # "download" | "build" | "local"


class ReleaseSource(Protocol):
    """One way of getting releases; the harness does not care which."""

    name: str

    def resolve(self, minor: str) -> str:
        """``"1.36"`` -> ``"v1.36.5"``: newest stable of that minor, else its newest pre-release."""
        ...

    def latest_stable(self) -> str:
        """The newest stable release of all."""
        ...

    def fetch(self, version: str) -> Release:
        """The binaries of ``version``, from the cache when they are there."""
        ...


def __getattr__(name: str) -> Any:  # lazy, so that importing the types stays cheap
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
