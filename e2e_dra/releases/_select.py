"""Where releases come from on this machine, and which two versions a run tests.

A machine that reaches dl.k8s.io (or the mirror in ``KUBERNETES_RELEASE_URL``) downloads release
tarballs: seconds instead of minutes. Anything else builds from the Go module proxy. The choice is
made by asking once, briefly, so an unreachable host costs a few seconds, not a long timeout:
:data:`PROBE_TIMEOUT` is the wall-clock deadline of the whole question (connecting and the
status line and headers, however slowly a server sends them), not a time per socket operation.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e_dra.errors import E2EDRAError, InputError, ReleaseError, VersionError
from e2e_dra.hostkit import redact
from e2e_dra.releases._checkout import recorded_deviations
from e2e_dra.releases._checkout_build import build_checkout, build_dir, builds_itself
from e2e_dra.releases._download import DownloadSource
from e2e_dra.releases._gobuild import BUILT_COMMANDS, GoBuildSource
from e2e_dra.releases._http import deadline, new_client, url_under
from e2e_dra.releases._release import Release, ReleaseSource
from e2e_dra.settings import RELEASE_SOURCES, settings
from e2e_dra.versions import is_minor, parse_version, previous_minor, source_version

logger = logging.getLogger(__name__)

PIN_ENV = "E2E_DRA_KUBERNETES_VERSION"
PREVIOUS_ENV = "E2E_DRA_PREVIOUS_VERSION"
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
    return _answers(url_under(settings().release_url, "stable.txt"))


@functools.cache
def _answers(url: str) -> bool:
    """Asked once per process: every later choice would be the same."""
    try:
        # only the status matters: the body is not read, whatever its size
        with (
            deadline(PROBE_TIMEOUT),
            new_client() as client,
            client.stream("GET", url, timeout=PROBE_TIMEOUT) as response,
        ):
            status = response.status_code
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        logger.info(
            redact(f"{url} does not answer ({type(exc).__name__}): building releases from source")
        )
        return False
    if status != 200:
        logger.info(redact(f"{url} answers {status}: building releases from source"))
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
class CurrentVersion:
    """The version under test and why it is that one, before anything is fetched."""

    version: str
    origin: str  # "local: <dir>", "$KUBE_GIT_VERSION_FILE", or "<spec>" and any fallback
    local: bool  # binaries given (a checkout's build or KUBERNETES_SERVER_BIN_DIR)


def resolve_current(
    source: ReleaseSource,
    commands: tuple[str, ...] = BUILT_COMMANDS,
    *,
    source_dir: Path | None = None,
    bin_dir: Path | None = None,
) -> CurrentVersion:
    """The one rule for the version under test, shared by ``e2e-dra versions`` and every run.

    In order: a local build (``bin_dir``/``source_dir``, else their environment variables), whose
    version its checkout, ``KUBE_GIT_VERSION_FILE`` or its kube-apiserver tells; else a version
    file alone, which names a release to fetch; else ``E2E_DRA_KUBERNETES_VERSION`` or the
    default (``latest``, falling back to ``stable`` where ``commands`` cannot be had here).
    """
    local = _local_version(source_dir, bin_dir)
    if local is not None:
        return CurrentVersion(*local, local=True)
    if version_file := settings().version_file:
        named = str(source_version(version_file=version_file))
        tag = resolve_release(named, source, what=f"{VERSION_FILE_ENV}={version_file} names")
        return CurrentVersion(tag, f"${VERSION_FILE_ENV}", local=False)
    version, why = chosen_release(source, commands)
    return CurrentVersion(version, why, local=False)


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
    current = resolve_current(source, source_dir=source_dir, bin_dir=bin_dir)
    origin = current.origin if current.local else f"{current.origin}, {source.name}"
    previous, line = previous_release(current.version, source)
    return VersionPlan(current.version, origin, line, previous, source.name)


def previous_release(current: str, source: ReleaseSource) -> tuple[str, str]:
    """The release a run upgrades from, and its release line (``("v1.36.5", "1.36")``).

    By default upstream's rule: the newest release of the previous minor (minor - 2 for an
    ``-alpha.0``). ``E2E_DRA_PREVIOUS_VERSION`` names another (an exact release or ``MAJOR.MINOR``)
    so that users test the upgrade from the patch release they run, or a patch-level upgrade;
    the version skew policy still holds: the control plane moves one minor at a time, and never
    to an older release.
    """
    default_line = previous_minor(current)
    spec = settings().previous_version
    if not spec:
        return source.resolve(str(default_line)), str(default_line)
    version = resolve_release(spec, source, what=PREVIOUS_ENV)
    older, newer = parse_version(version), parse_version(current)
    allowed = {default_line, newer.release_line}
    if older.release_line not in allowed or not older < newer:
        lines = " or ".join(f"of {line}" for line in sorted(allowed, key=str))
        raise VersionError(
            f"{PREVIOUS_ENV}={spec} ({version}) cannot be upgraded to {current} in one step: the "
            "version skew policy moves the control plane one minor at a time, to a newer release; "
            f"name an older release {lines}"
        )
    return version, str(older.release_line)


def versions_under_test(
    commands: tuple[str, ...] = BUILT_COMMANDS, source: ReleaseSource | None = None
) -> VersionsUnderTest:
    """Current = :func:`resolve_current`; previous = :func:`previous_release`. Of the current
    release only ``commands`` are needed (all of them unless a suite says less)."""
    source = source or release_source()
    current, choice = _current_and_choice(source, commands)
    previous_version, line = previous_release(current.version, source)
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
    current = resolve_current(source, commands)
    if current.local:
        return _local_current(current.version), current.origin
    release = source.fetch(current.version, commands)
    if release.source_dir is None:  # a download has binaries only; local-up-cluster.sh is in source
        release = dataclasses.replace(release, source_dir=_module_source_tree(release.version))
    return release, current.origin


_BINARIES = "the directory holding the server binaries (kube-apiserver, kubelet, ...)"
_MAKE_HINT = (
    'make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet '
    'cmd/kube-proxy cmd/kubectl" puts them in _output/local/bin/linux/<arch>'
)


@dataclass(frozen=True)
class _GivenDir:
    """A directory the user gave, and how: ``--bin-dir /x`` or ``KUBERNETES_SERVER_BIN_DIR=/x``.

    Messages name it the way it was given, so that the user fixes the flag they typed, not a
    variable they never set."""

    path: Path
    named: str
    by_flag: bool

    def fix(self, what: str) -> str:
        """The next step when this directory is not ``what``."""
        if self.by_flag:
            return f"give {what}"
        return f"point it at {what} or unset it"


def _given_dir(
    flag: str, from_flag: Path | None, variable: str, from_variable: Path | None, what: str
) -> _GivenDir | None:
    """The directory the flag, else the variable, named; it must exist."""
    if from_flag is not None:
        given = _GivenDir(from_flag, f"{flag} {from_flag}", by_flag=True)
    elif from_variable is not None:
        given = _GivenDir(from_variable, f"{variable}={from_variable}", by_flag=False)
    else:
        return None
    if not given.path.is_dir():
        raise InputError(f"{given.named} is not a directory; {given.fix(what)}")
    return dataclasses.replace(given, path=given.path.resolve())


def _local_dirs(
    source_dir: Path | None = None, bin_dir: Path | None = None
) -> tuple[Path | None, Path | None, str]:
    """``KUBERNETES_SOURCE_DIR`` and the binaries under test, as upstream takes them, and how
    the one that decides the version was given (for messages); ``--source-dir`` and
    ``--bin-dir`` (``source_dir``, ``bin_dir``) win over the variables."""
    given = settings()
    source = _given_dir(
        "--source-dir", source_dir, SOURCE_DIR_ENV, given.source_dir, "a Kubernetes checkout"
    )
    binaries = _given_dir("--bin-dir", bin_dir, BIN_DIR_ENV, given.server_bin_dir, _BINARIES)
    if source is None and binaries is None:
        return None, None, ""
    if source is not None and not (source.path / "hack" / "local-up-cluster.sh").is_file():
        raise InputError(
            f"{source.named} is not a Kubernetes source tree (no hack/local-up-cluster.sh); "
            f"{source.fix('a Kubernetes checkout')}"
        )
    if binaries is None:
        assert source is not None
        built = build_dir(source.path)
        if not (built / "kube-apiserver").is_file() and not builds_itself(source.path):
            bin_setting = "--bin-dir" if source.by_flag else BIN_DIR_ENV
            raise InputError(
                f"{source.named} has no build in {built}: build it ({_MAKE_HINT}) or give the "
                f"binaries with {bin_setting}"
            )
        return source.path, built, source.named
    if not (binaries.path / "kube-apiserver").is_file():
        raise InputError(
            f"{binaries.named} holds no kube-apiserver; {binaries.fix(_BINARIES)}: {_MAKE_HINT}"
        )
    return (source.path if source else None), binaries.path, (source or binaries).named


def _local_version(
    source_dir: Path | None = None, bin_dir: Path | None = None
) -> tuple[str, str] | None:
    """The version of a local build and where it came from, or None without one."""
    source_dir, bin_dir, named = _local_dirs(source_dir, bin_dir)
    if bin_dir is None:
        return None
    version = str(source_version(source_dir, bin_dir, version_file=settings().version_file))
    pinned = settings().kubernetes_version
    if pinned and not _pin_allows(pinned, version):
        raise E2EDRAError(
            f"{PIN_ENV}={pinned} contradicts {named} (which is {version}): unset one of them"
        )
    return version, f"local: {source_dir or bin_dir}"


def _pin_allows(pinned: str, version: str) -> bool:
    """Whether a local build of ``version`` is what ``pinned`` asks for. ``latest`` and
    ``stable`` name no release of their own beside a local build; ``1.37`` any 1.37 build; an
    exact release only itself."""
    text = pinned.strip()
    if text in {"latest", "stable"}:
        return True
    built = parse_version(version)
    if is_minor(text):
        return text.lstrip("v") == f"{built.major}.{built.minor}"
    try:
        parse_version(text)
    except VersionError:
        raise VersionError(f"{PIN_ENV} {pinned!r} is not {SPEC_HELP}") from None
    return text.lstrip("v") == version.lstrip("v")


def _local_current(version: str) -> Release:
    source_dir, bin_dir, _ = _local_dirs()
    assert bin_dir is not None
    if source_dir is None:
        source_dir = _module_source_tree(version)
    deviations: tuple[str, ...] = ()
    if bin_dir == build_dir(source_dir) and builds_itself(source_dir):
        built = build_checkout(source_dir, base_release=lambda tag: release_source().fetch(tag))
        deviations = (*recorded_deviations(source_dir), *built.deviations)
    return Release(
        version=version,
        bin_dir=bin_dir,
        source_dir=source_dir,
        origin="local",
        deviations=deviations,
    )


def _module_source_tree(version: str) -> Path:
    try:
        return GoBuildSource().source_tree(version)
    except ReleaseError as exc:
        raise ReleaseError(
            f"no source tree for Kubernetes {version} (hack/local-up-cluster.sh): {exc}; "
            f"set {SOURCE_DIR_ENV} to a checkout of it"
        ) from None
