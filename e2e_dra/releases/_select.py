"""Where releases come from on this machine, and which two versions a run tests.

A machine that reaches dl.k8s.io (or the mirror in ``KUBERNETES_RELEASE_URL``) downloads release
tarballs: seconds instead of minutes. Anything else builds from the Go module proxy. The choice is
made by asking once, briefly, so an unreachable host costs a few seconds, not a long timeout.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e_dra._console import say
from e2e_dra.errors import E2EDRAError, ReleaseError, VersionError
from e2e_dra.releases import Release, ReleaseSource

SOURCE_ENV = "E2E_DRA_RELEASE_SOURCE"
PIN_ENV = "E2E_DRA_KUBERNETES_VERSION"
SOURCE_DIR_ENV = "KUBERNETES_SOURCE_DIR"
BIN_DIR_ENV = "KUBERNETES_SERVER_BIN_DIR"
SOURCE_KINDS = ("download", "build")
PROBE_TIMEOUT = 3.0  # seconds dl.k8s.io gets to answer before we build instead


@dataclass(frozen=True)
class VersionsUnderTest:
    """The release a run upgrades to ("current") and the one it upgrades from ("previous")."""

    current: Release
    previous: Release
    previous_minor: str  # "1.36"
    source: str  # the release source that provided "previous" ("download" | "build")


def release_source(kind: str | None = None) -> ReleaseSource:
    """``kind`` or ``E2E_DRA_RELEASE_SOURCE``; by default download when dl.k8s.io answers."""
    chosen = kind or os.environ.get(SOURCE_ENV, "").strip() or None
    if chosen is not None and chosen not in SOURCE_KINDS:
        where = "release source" if kind else SOURCE_ENV
        raise ReleaseError(f"{where}={chosen!r} is not one of {', '.join(SOURCE_KINDS)}")
    if chosen is None:
        chosen = "download" if download_reachable() else "build"
    if chosen == "download":
        from e2e_dra.releases._download import DownloadSource

        return DownloadSource()
    from e2e_dra.releases._gobuild import GoBuildSource

    return GoBuildSource()


def download_reachable() -> bool:
    from e2e_dra.releases._download import BASE_URL_ENV, DEFAULT_BASE_URL

    base = (os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
    return _answers(f"{base}/stable.txt")


@functools.cache
def _answers(url: str) -> bool:
    """Asked once per process: every later choice would be the same."""
    try:
        response = httpx.get(url, timeout=PROBE_TIMEOUT, follow_redirects=True)
    except httpx.HTTPError as exc:
        say(f"{url} does not answer ({type(exc).__name__}): building releases from source")
        return False
    if response.status_code != 200:
        say(f"{url} answers {response.status_code}: building releases from source")
        return False
    return True


def versions_under_test() -> VersionsUnderTest:
    """Current = a local checkout/build, else the pinned version, else the newest stable release;
    previous = the newest release of the previous minor (upstream's rule, alpha.0 included)."""
    from e2e_dra.versions import previous_minor

    source = release_source()
    current = current_release(source)
    line = str(previous_minor(current.version))
    previous_version = source.resolve(line)
    say(
        f"Kubernetes under test: {current.version} ({current.origin}); previous: {previous_version}"
    )
    previous = source.fetch(previous_version)
    return VersionsUnderTest(
        current=current, previous=previous, previous_minor=line, source=source.name
    )


def current_release(source: ReleaseSource | None = None) -> Release:
    """The release under test alone, with a source tree (for suites that need no other)."""
    return _local_current() or _fetched_current(source or release_source())


def _fetched_current(source: ReleaseSource) -> Release:
    version = _pinned_version(source) or source.latest_stable()
    release = source.fetch(version)
    if release.source_dir is None:  # a download has binaries only; local-up-cluster.sh is in source
        release = dataclasses.replace(release, source_dir=_module_source_tree(release.version))
    return release


def _local_current() -> Release | None:
    """``KUBERNETES_SOURCE_DIR`` and/or ``KUBERNETES_SERVER_BIN_DIR``, as upstream takes them."""
    from e2e_dra.versions import source_version

    source_dir = _env_dir(SOURCE_DIR_ENV)
    bin_dir = _env_dir(BIN_DIR_ENV)
    if source_dir is None and bin_dir is None:
        return None
    if source_dir is not None and not (source_dir / "hack" / "local-up-cluster.sh").is_file():
        raise E2EDRAError(
            f"{SOURCE_DIR_ENV}={source_dir} is not a Kubernetes source tree "
            "(no hack/local-up-cluster.sh)"
        )
    if bin_dir is None:
        assert source_dir is not None
        bin_dir = source_dir / "_output" / "local" / "bin" / "linux" / _go_arch()
        if not (bin_dir / "kube-apiserver").is_file():
            raise E2EDRAError(
                f"{SOURCE_DIR_ENV}={source_dir} has no build in {bin_dir}: build it "
                f"(make WHAT=cmd/...) or set {BIN_DIR_ENV}"
            )
    elif not (bin_dir / "kube-apiserver").is_file():
        raise E2EDRAError(f"{BIN_DIR_ENV}={bin_dir} holds no kube-apiserver")
    version = str(source_version(source_dir, bin_dir))
    pinned = os.environ.get(PIN_ENV, "").strip()
    if pinned and pinned.lstrip("v") != version.lstrip("v"):
        given = SOURCE_DIR_ENV if source_dir else BIN_DIR_ENV
        raise E2EDRAError(
            f"{PIN_ENV}={pinned} contradicts {given} (which is {version}): unset one of them"
        )
    if source_dir is None:
        source_dir = _module_source_tree(version)
    return Release(version=version, bin_dir=bin_dir, source_dir=source_dir, origin="local")


def _pinned_version(source: ReleaseSource) -> str | None:
    """``E2E_DRA_KUBERNETES_VERSION``: an exact release, or ``MAJOR.MINOR`` for its newest."""
    from e2e_dra.versions import parse_minor, parse_version

    pinned = os.environ.get(PIN_ENV, "").strip()
    if not pinned:
        return None
    try:
        return parse_version(pinned).tag
    except VersionError:
        pass
    try:
        return source.resolve(str(parse_minor(pinned)))
    except VersionError:
        raise VersionError(
            f"{PIN_ENV}={pinned!r} is neither a Kubernetes release (v1.36.5) nor MAJOR.MINOR"
        ) from None


def _module_source_tree(version: str) -> Path:
    from e2e_dra.releases._gobuild import GoBuildSource

    try:
        return GoBuildSource().source_tree(version)
    except ReleaseError as exc:
        raise ReleaseError(
            f"no source tree for Kubernetes {version} (hack/local-up-cluster.sh): {exc}; "
            f"set {SOURCE_DIR_ENV} to a checkout of it"
        ) from None


def _env_dir(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise E2EDRAError(f"{name}={value} is not a directory")
    return path.resolve()


def _go_arch() -> str:
    from e2e_dra.releases._download import host_platform

    return host_platform()[1]
