"""Which Kubernetes versions a run is about: parsing, the previous minor, the version of a tree.

Kubernetes names its builds after ``git describe`` (``v1.37.0-alpha.0.812+0123abcd-dirty``), which
is neither PEP 440 nor something ``packaging`` parses, so the grammar is spelled out here. The
previous-minor rule carries upstream's ``-alpha.0`` exception: right after a release branch is cut,
master already calls itself the *next* minor's ``alpha.0`` while nothing of that minor has been
released, so "minor - 1" would point at a minor that is still being finished; going back one more
keeps the tested skew at a known-good pair.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from e2e_dra.errors import VersionError
from e2e_dra.supervise import ANSWER_LIMIT, ProcessError, ask

__all__ = [
    "KubeVersion",
    "Minor",
    "matches",
    "parse_minor",
    "parse_version",
    "previous_minor",
    "release_specifier",
    "source_version",
]

_EXAMPLES = "e.g. v1.36.3, v1.37.0-rc.1 or v1.37.0-alpha.0.812+0123abcd"

# {n} is a number: Kubernetes never writes one with a leading zero, and reading "v01.37.2" as
# v1.37.2 would change what the user asked for without saying so (see _LOOSE_VERSION_RE).
_VERSION_PATTERN = r"""
    v?(?P<major>{n})\.(?P<minor>{n})\.(?P<patch>{n})
    (?:-(?P<pre>alpha|beta|rc)\.(?P<pre_number>{n}))?
    # commits since the tag: ".812+<hash>" after a pre-release, "-812+<hash>" after a plain tag
    # (what hack/lib/version.sh and CI's markers write), or raw `git describe` output "-812-g<hash>"
    (?:[.-](?P<commits>{n})(?:\+|(?P<describe>-g))(?P<commit>[0-9a-f]{{7,40}}))?
    (?P<dirty>-dirty)?
    """
_NUMBER = r"(?:0|[1-9]\d*)"
_VERSION_RE = re.compile(
    _VERSION_PATTERN.format(n=_NUMBER),
    re.VERBOSE | re.ASCII,  # \d is 0-9 only, not other scripts' digits
)
_LOOSE_VERSION_RE = re.compile(_VERSION_PATTERN.format(n=r"\d+"), re.VERBOSE | re.ASCII)
"""The same grammar with leading zeros allowed: only to say why a version was refused."""
_MINOR_RE = re.compile(r"v?(?P<major>0|[1-9]\d{0,8})\.(?P<minor>0|[1-9]\d{0,8})", re.ASCII)
_LOOSE_MINOR_RE = re.compile(r"v?\d{1,9}\.\d{1,9}", re.ASCII)
VERSION_FILE_LIMIT = 64 * 1024  # bytes; hack/lib/version.sh writes a few hundred
RUN_TIMEOUT = 60.0  # seconds a --version or the workspace status script may take
_MAX_LENGTH = 128  # longer than any version git describe produces; int() of 4,300+ digits raises
_PRE_RANK = {"alpha": 0, "beta": 1, "rc": 2, None: 3}
_PEP440_PRE = {"alpha": "a", "beta": "b", "rc": "rc"}
_SPEC_VERSION_RE = re.compile(r"v?(\d+\.\d+(?:\.\d+)?)-(alpha|beta|rc)\.(\d+)", re.ASCII)


@dataclass(frozen=True)
class Minor:
    """A release line such as 1.36; ``str()`` gives ``"1.36"``, the form marker files use."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class KubeVersion:
    """One parsed Kubernetes version; ``text`` keeps the string exactly as it was given."""

    text: str
    major: int
    minor: int
    patch: int
    pre: str | None = None  # "alpha" | "beta" | "rc"
    pre_number: int | None = None
    commits: int | None = None  # commits after the tag, for builds between tags
    commit: str | None = None
    dirty: bool = False
    describe: bool = False  # raw `git describe` form ("-812-g<hash>"), never a published name

    @property
    def tag(self) -> str:
        """The release tag this build is at or after: ``v1.37.0-alpha.0``."""
        pre = f"-{self.pre}.{self.pre_number}" if self.pre else ""
        return f"v{self.major}.{self.minor}.{self.patch}{pre}"

    @property
    def pep440(self) -> str:
        """The same version in PEP 440 terms, for ``packaging`` specifiers.

        ``v1.38.0-beta.0`` -> ``1.38.0b0``; a build N commits after a tag is that tag's
        ``.postN`` (``v1.38.0-beta.0.1+abc`` -> ``1.38.0b0.post1``).
        """
        pre = f"{_PEP440_PRE[self.pre]}{self.pre_number}" if self.pre else ""
        post = f".post{self.commits}" if self.commits else ""
        return f"{self.major}.{self.minor}.{self.patch}{pre}{post}"

    @property
    def release_line(self) -> Minor:
        return Minor(self.major, self.minor)

    @property
    def is_release(self) -> bool:
        """Exactly a published tag (no commits after it, no local changes)."""
        return self.commits is None and not self.dirty

    @property
    def is_ci_build(self) -> bool:
        """A build between tags as CI publishes it (``v1.38.0-alpha.0.812+0123abcd``, what
        upstream's ``ci/latest.txt`` names): neither a local change nor raw ``git describe``."""
        return self.commits is not None and not self.dirty and not self.describe

    @property
    def published_name(self) -> str:
        """The name a release tree files it under: the tag of a release, the version as written
        (with its ``v``) of a CI build."""
        return self.tag if self.is_release else "v" + self.text.removeprefix("v")

    @property
    def is_stable(self) -> bool:
        return self.pre is None and self.is_release

    def _key(self) -> tuple[int, int, int, int, int, int]:
        return (
            self.major,
            self.minor,
            self.patch,
            _PRE_RANK[self.pre],
            self.pre_number or 0,
            self.commits or 0,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KubeVersion):
            return NotImplemented
        return self._key() == other._key() and self.commit == other.commit

    def __hash__(self) -> int:
        return hash((self._key(), self.commit))

    def __lt__(self, other: KubeVersion) -> bool:
        return self._key() < other._key()

    def __str__(self) -> str:
        return self.text


def parse_version(text: str) -> KubeVersion:
    """Parse any version string Kubernetes produces; anything else raises :class:`VersionError`."""
    stripped = text.strip() if isinstance(text, str) else ""
    match = _VERSION_RE.fullmatch(stripped) if len(stripped) <= _MAX_LENGTH else None
    if not match:
        raise VersionError(f"not a Kubernetes version: {text[:80]!r} ({_why_not(stripped)})")
    number = match.group("pre_number")
    commits = match.group("commits")
    return KubeVersion(
        text=stripped,
        major=int(match["major"]),
        minor=int(match["minor"]),
        patch=int(match["patch"]),
        pre=match["pre"],
        pre_number=int(number) if number is not None else None,
        commits=int(commits) if commits is not None else None,
        commit=match["commit"],
        dirty=match["dirty"] is not None,
        describe=match["describe"] is not None,
    )


_LEADING_ZERO = "a number has a leading zero, which Kubernetes never writes"


def _why_not(text: str) -> str:
    """What to tell about a string that is not a version: its leading zero, else examples."""
    if len(text) <= _MAX_LENGTH and any(
        loose.fullmatch(text) for loose in (_LOOSE_VERSION_RE, _LOOSE_MINOR_RE)
    ):
        return f"{_LEADING_ZERO}; {_EXAMPLES}"
    return _EXAMPLES


def parse_minor(text: str) -> Minor:
    """Parse ``MAJOR.MINOR`` (``1.36`` or ``v1.36``)."""
    stripped = text.strip() if isinstance(text, str) else ""
    match = _MINOR_RE.fullmatch(stripped)
    if not match:
        zero = f"; {_LEADING_ZERO}" if _LOOSE_MINOR_RE.fullmatch(stripped) else ""
        raise VersionError(
            f"not a Kubernetes minor version: {text[:80]!r} (expected MAJOR.MINOR, e.g. 1.36{zero})"
        )
    return Minor(int(match["major"]), int(match["minor"]))


def release_specifier(text: str) -> tuple[SpecifierSet, ...]:
    """A ``packaging`` specifier on Kubernetes releases (``">=1.36.3"``, ``">=1.38.0-beta.0"``),
    or alternatives of them joined by ``||`` (a fix backported to several release lines:
    ``">=1.34.0,<1.34.12 || >=1.35.0,<1.35.10"``), one specifier set per alternative.

    Kubernetes pre-release names are turned into PEP 440 ones; :func:`matches` applies it.
    """
    if not text.strip():
        return (SpecifierSet("", prereleases=True),)  # every release
    alternatives = []
    for part in text.split("||"):
        converted = _SPEC_VERSION_RE.sub(
            lambda m: f"{m[1]}{_PEP440_PRE[m[2]]}{m[3]}", part.replace(" ", "")
        )
        try:
            if not converted:
                raise InvalidSpecifier(part)
            alternatives.append(SpecifierSet(converted.replace("v", ""), prereleases=True))
        except InvalidSpecifier:
            raise VersionError(
                f"not a release specifier: {text!r} (e.g. '>=1.36.3', '>=1.37,<1.39' or "
                "'<1.34.12 || >=1.35,<1.35.10')"
            ) from None
    return tuple(alternatives)


def matches(specifier: str, version: str | KubeVersion) -> bool:
    """Whether the release ``version`` satisfies ``specifier`` (one of its alternatives;
    pre-releases count as such)."""
    parsed = version if isinstance(version, KubeVersion) else parse_version(version)
    return any(
        alternative.contains(parsed.pep440, prereleases=True)
        for alternative in release_specifier(specifier)
    )


def is_minor(text: str) -> bool:
    """``1.36`` (a release line), as opposed to a release such as ``v1.36.5``."""
    try:
        parse_minor(text)
    except VersionError:
        return False
    return True


def previous_minor(version: str | KubeVersion) -> Minor:
    """The release line to upgrade from: minor - 1, or minor - 2 for an ``-alpha.0`` build.

    A bare ``MAJOR.MINOR`` is accepted too and simply goes back one.
    """
    if isinstance(version, KubeVersion):
        parsed, text = version, version.text
    else:
        text = version
        try:
            parsed = parse_version(version)
        except VersionError:
            try:
                line = parse_minor(version)
            except VersionError:
                raise VersionError(
                    f"not a Kubernetes version: {version[:80]!r} "
                    f"({_why_not(version.strip())}, or MAJOR.MINOR)"
                ) from None
            parsed = KubeVersion(text=version, major=line.major, minor=line.minor, patch=0)
    back = 2 if (parsed.pre, parsed.pre_number) == ("alpha", 0) else 1
    minor = parsed.minor - back
    if minor < 0:
        raise VersionError(
            f"{text!r} has no previous minor release to upgrade from; give a version of a later "
            "minor"
        )
    return Minor(parsed.major, minor)


def source_version(
    source_dir: Path | None = None,
    bin_dir: Path | None = None,
    *,
    version_file: Path | None = None,
) -> KubeVersion:
    """The version of the Kubernetes under test, from the best evidence there is.

    In order: a git checkout's ``hack/print-workspace-status.sh`` (``gitVersion``), the version
    file (``KUBE_GIT_VERSION_FILE``: what builds without a git tree use), and finally
    ``<bin_dir>/kube-apiserver --version``.
    """
    tried: list[str] = []
    if source_dir is not None:
        script = Path(source_dir) / "hack" / "print-workspace-status.sh"
        if script.is_file() and (Path(source_dir) / ".git").exists():
            # the script reads the version file too (hack/lib/version.sh): it gets the same one
            env = {k: v for k, v in os.environ.items() if k != "KUBE_GIT_VERSION_FILE"}
            if version_file is not None:
                env["KUBE_GIT_VERSION_FILE"] = str(version_file)
            printed = _workspace_git_version(Path(source_dir), script, env)
            try:
                return parse_version(printed)
            except VersionError as exc:
                raise VersionError(
                    f"{script} printed gitVersion {printed!r}, which is no version we can use: "
                    f"{exc}; check the checkout's tags (git describe) or KUBE_GIT_VERSION_FILE"
                ) from None
        tried.append(f"{script} in a git checkout")
    if version_file is not None:
        named = _version_file_git_version(version_file)
        try:
            return parse_version(named)
        except VersionError as exc:
            raise VersionError(
                f"KUBE_GIT_VERSION_FILE {version_file} names no version we can use: {exc}; "
                "write it as KUBE_GIT_VERSION='v1.37.0' or unset KUBE_GIT_VERSION_FILE"
            ) from None
    tried.append("KUBE_GIT_VERSION_FILE")
    if bin_dir is not None:
        apiserver = Path(bin_dir) / "kube-apiserver"
        if apiserver.is_file():
            try:
                return parse_version(_binary_version(apiserver))
            except VersionError as exc:
                raise VersionError(
                    f"{exc}; check that {bin_dir} holds a working Kubernetes build"
                ) from None
        tried.append(str(apiserver))
    raise VersionError(
        "cannot tell the Kubernetes version under test: found none of " + ", ".join(tried)
    )


def _workspace_git_version(root: Path, script: Path, env: dict[str, str]) -> str:
    version = workspace_status(root, env=env, script=script).get("gitVersion", "")
    if not version:
        raise VersionError(f"{script} printed no gitVersion")
    return version


def workspace_status(
    root: Path,
    *,
    env: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
    script: Path | None = None,
) -> dict[str, str]:
    """What a checkout's ``hack/print-workspace-status.sh`` says of it (``gitVersion``,
    ``gitCommit``, ``gitTreeState``, ``buildDate``...): the values upstream's build stamps.

    ``env`` is the script's environment (by default ours without ``KUBE_GIT_VERSION_FILE``, so
    that the checkout itself says its version), with ``extra`` added."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "KUBE_GIT_VERSION_FILE"}
    script = script or root / "hack" / "print-workspace-status.sh"
    proc = _run(["bash", str(script)], cwd=root, env={**env, **(extra or {})}, what=str(script))
    status = (line.split(" ", 1) for line in proc.splitlines() if " " in line)
    return {key: value.strip() for key, value in status}


def _version_file_git_version(path: Path) -> str:
    text = _read_version_file(path)
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "KUBE_GIT_VERSION":
            try:
                words = shlex.split(value, comments=True)
            except ValueError as exc:
                raise VersionError(
                    f"KUBE_GIT_VERSION_FILE {path}: cannot parse {line.strip()[:80]!r} ({exc}); "
                    "write it as KUBE_GIT_VERSION='v1.37.0'"
                ) from None
            if words:
                return words[0]
    raise VersionError(f"KUBE_GIT_VERSION_FILE {path} sets no KUBE_GIT_VERSION")


def _read_version_file(path: Path) -> str:
    """The version file's text: a regular file of at most ``VERSION_FILE_LIMIT`` bytes (a FIFO
    would hang the read, ``/dev/zero`` would never end)."""
    what = f"KUBE_GIT_VERSION_FILE {path}"
    fix = "; point KUBE_GIT_VERSION_FILE at the version file of a build or unset it"
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise VersionError(f"{what} is not a regular file{fix}")
        with open(path, "rb") as handle:
            data = handle.read(VERSION_FILE_LIMIT + 1)
    except OSError as exc:
        raise VersionError(f"cannot read {what}: {exc.strerror}{fix}") from None
    if len(data) > VERSION_FILE_LIMIT:
        raise VersionError(
            f"{what} is larger than {VERSION_FILE_LIMIT} bytes: not a version file{fix}"
        )
    if b"\0" in data:
        raise VersionError(f"{what} is not a text file{fix}")
    return data.decode(errors="replace")


def _binary_version(binary: Path) -> str:
    output = _run([str(binary), "--version"], cwd=None, env=None, what=str(binary))
    words = output.split()  # "Kubernetes v1.36.3"
    if len(words) >= 2 and words[0] == "Kubernetes":
        try:
            return str(parse_version(words[1]))
        except VersionError as exc:
            raise VersionError(f"{binary} --version: {exc}") from None
    shown = output.strip()
    shown = shown if len(shown) <= 80 else shown[:80] + "..."
    raise VersionError(f"{binary} --version printed {shown!r}, not 'Kubernetes vX.Y.Z'")


def _run(cmd: list[str], *, cwd: Path | None, env: dict[str, str] | None, what: str) -> str:
    """``cmd``'s output, bounded in size and time (see :func:`e2e_dra.supervise.ask`)."""
    try:
        answer = ask(what, cmd, cwd=cwd, env=env, timeout=RUN_TIMEOUT)
    except ProcessError as exc:
        raise VersionError(str(exc)) from None
    if answer.returncode != 0:
        last = (answer.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise VersionError(f"{what} failed (exit {answer.returncode}): {last}")
    if answer.truncated:
        raise VersionError(f"{what} printed more than {ANSWER_LIMIT} bytes: not a version answer")
    return answer.stdout
