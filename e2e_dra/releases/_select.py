"""Where releases come from on this machine, and which two versions a run tests.

A machine that reaches dl.k8s.io (or the mirror in ``KUBERNETES_RELEASE_URL``) downloads release
tarballs: seconds instead of minutes. Anything else builds from the Go module proxy. The choice is
made by asking once, briefly, so an unreachable host costs a few seconds, not a long timeout.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e_dra._platform import host_platform
from e2e_dra.errors import E2EDRAError, ReleaseError, VersionError
from e2e_dra.releases._download import DownloadSource
from e2e_dra.releases._gobuild import BUILT_COMMANDS, GoBuildSource
from e2e_dra.releases._release import Release, ReleaseSource
from e2e_dra.settings import RELEASE_SOURCES, settings
from e2e_dra.versions import is_minor, parse_version, previous_minor, source_version

logger = logging.getLogger(__name__)

PIN_ENV = "E2E_DRA_KUBERNETES_VERSION"
SOURCE_DIR_ENV = "KUBERNETES_SOURCE_DIR"
BIN_DIR_ENV = "KUBERNETES_SERVER_BIN_DIR"
VERSION_FILE_ENV = "KUBE_GIT_VERSION_FILE"
DEFAULT_SPEC = "latest"
SPEC_HELP = (
    "a Kubernetes release (v1.38.0-beta.0), MAJOR.MINOR (its newest release), "
    "'stable' (the newest stable release) or 'latest' (the newest, pre-releases included)"
)
PROBE_TIMEOUT = 3.0  # seconds dl.k8s.io gets to answer before we build instead


@dataclass(frozen=True)
class VersionsUnderTest:
    """The release a run upgrades to ("current") and the one it upgrades from ("previous")."""

    current: Release
    previous: Release
    previous_minor: str  # "1.36"
    source: str  # the release source that provided "previous" ("download" | "build")
    choice: str = ""  # why "current" is the one: "latest", the pin, or the fallback and its reason


def release_source(kind: str | None = None) -> ReleaseSource:
    """``kind`` or ``E2E_DRA_RELEASE_SOURCE``; by default download when dl.k8s.io answers."""
    chosen = kind or settings().release_source
    if chosen is not None and chosen not in RELEASE_SOURCES:
        raise ReleaseError(f"release source={chosen!r} is not one of {', '.join(RELEASE_SOURCES)}")
    if chosen is None:
        chosen = "download" if download_reachable() else "build"
    if chosen == "download":
        return DownloadSource()
    return GoBuildSource()


def download_reachable() -> bool:
    return _answers(f"{settings().release_url.rstrip('/')}/stable.txt")


@functools.cache
def _answers(url: str) -> bool:
    """Asked once per process: every later choice would be the same."""
    try:
        response = httpx.get(url, timeout=PROBE_TIMEOUT, follow_redirects=True)
    except httpx.HTTPError as exc:
        logger.info(f"{url} does not answer ({type(exc).__name__}): building releases from source")
        return False
    if response.status_code != 200:
        logger.info(f"{url} answers {response.status_code}: building releases from source")
        return False
    return True


def resolve_release(spec: str, source: ReleaseSource, *, what: str = "version") -> str:
    """The exact release tag ``spec`` names on ``source``.

    ``spec`` is an exact release or pre-release (``v1.38.0-beta.0``), ``MAJOR.MINOR`` (its newest
    release, else its newest pre-release), ``stable`` (the newest stable release) or ``latest``
    (the newest release including pre-releases, as upstream's ``latest.txt``).
    """
    text = spec.strip()
    if text == "stable":
        return source.latest_stable()
    if text == "latest":
        return source.latest()
    if is_minor(text):
        return source.resolve(text)
    try:
        parsed = parse_version(text)
    except VersionError:
        raise VersionError(f"{what} {spec!r} is not {SPEC_HELP}") from None
    if not parsed.is_release:
        raise VersionError(
            f"{what} {spec!r} is a build between releases: point {SOURCE_DIR_ENV} at its "
            "checkout instead"
        )
    return parsed.tag


def chosen_release(
    source: ReleaseSource, commands: tuple[str, ...] = BUILT_COMMANDS
) -> tuple[str, str]:
    """The release to test when no build is given, and why that one.

    ``E2E_DRA_KUBERNETES_VERSION`` when set, resolved as it says. Otherwise ``latest``, unless
    this machine cannot get it (the module proxy refuses what ``commands`` need): then ``stable``,
    and the reason is said. A pin never falls back.
    """
    pinned = settings().kubernetes_version
    if pinned:
        return resolve_release(pinned, source, what=PIN_ENV), pinned
    latest = source.latest()
    why = source.unobtainable(latest, commands)
    if why is None:
        return latest, DEFAULT_SPEC
    stable = source.latest_stable()
    logger.info(
        f"the default release, latest ({latest}), cannot be had here: {why}. Testing stable "
        f"({stable}) instead; {PIN_ENV}=latest insists on {latest}"
    )
    return stable, f"stable, as latest {latest} cannot be had here"


@dataclass(frozen=True)
class VersionPlan:
    """The versions a run is about, before anything is fetched."""

    current: str
    current_origin: str  # "local (<dir>)" or "<spec>, <source>"
    previous_minor: str
    previous: str
    source: str  # the release source that resolves them ("download" | "build")


def plan_versions(
    source: ReleaseSource | None = None,
    *,
    source_dir: Path | None = None,
    bin_dir: Path | None = None,
) -> VersionPlan:
    """What ``versions_under_test`` would fetch, resolved but not fetched.

    ``source_dir`` and ``bin_dir`` stand in for their environment variables.
    """
    source = source or release_source()
    local = _local_version(source_dir, bin_dir)
    if local is not None:
        current, origin = local
    elif version_file := settings().version_file:  # a build's version file names the version
        current, origin = str(source_version(version_file=version_file)), f"${VERSION_FILE_ENV}"
    else:
        current, why = chosen_release(source)
        origin = f"{why}, {source.name}"
    line = str(previous_minor(current))
    return VersionPlan(current, origin, line, source.resolve(line), source.name)


def versions_under_test(commands: tuple[str, ...] = BUILT_COMMANDS) -> VersionsUnderTest:
    """Current = a local checkout/build, else ``E2E_DRA_KUBERNETES_VERSION`` (default: latest);
    previous = the newest release of the previous minor (upstream's rule, alpha.0 included).
    Of the current release only ``commands`` are needed (all of them unless a suite says less)."""
    source = release_source()
    current, choice = _current_and_choice(source, commands)
    line = str(previous_minor(current.version))
    previous_version = source.resolve(line)
    logger.info(
        f"Kubernetes under test: {current.version} ({current.origin}); previous: {previous_version}"
    )
    previous = source.fetch(previous_version)
    return VersionsUnderTest(
        current=current, previous=previous, previous_minor=line, source=source.name, choice=choice
    )


def current_release(source: ReleaseSource | None = None) -> Release:
    """The release under test alone, with a source tree (for suites that need no other)."""
    return _current_and_choice(source or release_source(), BUILT_COMMANDS)[0]


def _current_and_choice(source: ReleaseSource, commands: tuple[str, ...]) -> tuple[Release, str]:
    local = _local_current()
    if local is not None:
        return local, "local build"
    version, choice = chosen_release(source, commands)
    release = source.fetch(version, commands)
    if release.source_dir is None:  # a download has binaries only; local-up-cluster.sh is in source
        release = dataclasses.replace(release, source_dir=_module_source_tree(release.version))
    return release, choice


def _local_dirs(
    source_dir: Path | None = None, bin_dir: Path | None = None
) -> tuple[Path | None, Path | None]:
    """``KUBERNETES_SOURCE_DIR`` and the binaries under test, as upstream takes them."""
    given = settings()
    source_dir = source_dir.resolve() if source_dir else _env_dir(SOURCE_DIR_ENV, given.source_dir)
    bin_dir = bin_dir.resolve() if bin_dir else _env_dir(BIN_DIR_ENV, given.server_bin_dir)
    if source_dir is None and bin_dir is None:
        return None, None
    if source_dir is not None and not (source_dir / "hack" / "local-up-cluster.sh").is_file():
        raise E2EDRAError(
            f"{SOURCE_DIR_ENV}={source_dir} is not a Kubernetes source tree "
            "(no hack/local-up-cluster.sh)"
        )
    if bin_dir is None:
        assert source_dir is not None
        bin_dir = source_dir / "_output" / "local" / "bin" / "linux" / host_platform()[1]
        if not (bin_dir / "kube-apiserver").is_file():
            raise E2EDRAError(
                f"{SOURCE_DIR_ENV}={source_dir} has no build in {bin_dir}: build it "
                f"(make WHAT=cmd/...) or set {BIN_DIR_ENV}"
            )
    elif not (bin_dir / "kube-apiserver").is_file():
        raise E2EDRAError(f"{BIN_DIR_ENV}={bin_dir} holds no kube-apiserver")
    return source_dir, bin_dir


def _local_version(
    source_dir: Path | None = None, bin_dir: Path | None = None
) -> tuple[str, str] | None:
    """The version of a local build and where it came from, or None without one."""
    source_dir, bin_dir = _local_dirs(source_dir, bin_dir)
    if bin_dir is None:
        return None
    version = str(source_version(source_dir, bin_dir, version_file=settings().version_file))
    pinned = settings().kubernetes_version
    if pinned and pinned.lstrip("v") != version.lstrip("v"):
        given = SOURCE_DIR_ENV if source_dir else BIN_DIR_ENV
        raise E2EDRAError(
            f"{PIN_ENV}={pinned} contradicts {given} (which is {version}): unset one of them"
        )
    return version, f"local: {source_dir or bin_dir}"


def _local_current() -> Release | None:
    local = _local_version()
    if local is None:
        return None
    source_dir, bin_dir = _local_dirs()
    assert bin_dir is not None
    version = local[0]
    if source_dir is None:
        source_dir = _module_source_tree(version)
    return Release(version=version, bin_dir=bin_dir, source_dir=source_dir, origin="local")


def _module_source_tree(version: str) -> Path:
    try:
        return GoBuildSource().source_tree(version)
    except ReleaseError as exc:
        raise ReleaseError(
            f"no source tree for Kubernetes {version} (hack/local-up-cluster.sh): {exc}; "
            f"set {SOURCE_DIR_ENV} to a checkout of it"
        ) from None


def _env_dir(name: str, path: Path | None) -> Path | None:
    """The directory a variable named, checked: it must exist."""
    if path is None:
        return None
    if not path.is_dir():
        raise E2EDRAError(f"{name}={path} is not a directory")
    return path.resolve()
