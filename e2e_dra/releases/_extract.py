"""Unpacking the few binaries we run from a server tarball, and nothing that could escape.

A server tarball holds images, licenses and a dozen binaries; we want five of them (and kubectl).
Reading the gzip stream once and copying only those members keeps time and disk small. A member
with an absolute path, a ``..`` component, or anything but a regular file where a binary should be
(a link, a directory) is refused: a real release never has one, so it is a sign of a broken or
hostile mirror. Messages say what is wrong with the archive's contents; the caller names where the
archive came from.

A binary that unpacked is not yet a binary that works. Before an entry counts as complete, every
one is checked (:func:`check_binaries`): it is executable in the archive (a real release's binaries
are 0755), not empty, executable where it now lies (a cache on a ``noexec`` mount is this
machine's problem, not the mirror's), and, where that is cheap (a program for this machine, an ELF
file or a script), its ``--version`` names the release. The fake binaries of the tests' loopback
release tree are bytes that no machine runs (``tests/release_server.py``: ``fake_binary``); they
pass the checks that apply to them and are not run.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO

from e2e_dra.errors import LocalError, ReleaseError
from e2e_dra.supervise import ProcessError, ask

BINARY_MODE = 0o555
_COPY_CHUNK = 1 << 20
VERSION_TIMEOUT = 20.0  # seconds a binary gets to print its --version
VERSION_CHECKED = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
_RUNNABLE_MAGIC = (b"\x7fELF", b"#!")


def extract_binaries(
    tarball: Path, target: Path, *, required: Iterable[str], optional: Iterable[str] = ()
) -> list[str]:
    """Copy the wanted binaries (matched by base name) into ``target``; return their names."""
    required = tuple(required)
    wanted = set(required) | set(optional)
    found: list[str] = []
    try:
        with tarfile.open(tarball, mode="r|gz") as archive:
            for member in archive:
                _refuse_unsafe(member)
                name = PurePosixPath(member.name).name
                if name not in wanted:
                    continue
                if not member.isreg():
                    raise ReleaseError(
                        f"member {member.name!r} is {_kind(member)}, not a file; refusing it"
                    )
                if name in found:
                    raise ReleaseError(f"it holds {name} twice ({member.name!r})")
                if not member.mode & 0o100:
                    raise ReleaseError(
                        f"its {name} is not executable (mode {member.mode:04o}, not 0755)"
                    )
                source = archive.extractfile(member)
                if source is None:  # pragma: no cover - isreg() members always have data
                    raise ReleaseError(f"cannot read member {member.name!r}")
                _write_binary(source, target / name)
                found.append(name)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise ReleaseError(f"it is not a readable .tar.gz ({exc})") from None
    missing = [name for name in required if name not in found]
    if missing:
        raise ReleaseError(f"it lacks {', '.join(missing)}")
    return found


def _kind(member: tarfile.TarInfo) -> str:
    """What a member that is not a regular file is, in words."""
    if member.issym():
        return f"a symbolic link to {member.linkname!r}"
    if member.islnk():
        return f"a hard link to {member.linkname!r}"
    if member.isdir():
        return "a directory"
    return "a device, FIFO or other special file"


def _refuse_unsafe(member: tarfile.TarInfo) -> None:
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts:
        raise ReleaseError(f"member {member.name!r} would land outside the target; refusing it")


def _write_binary(source: IO[bytes], destination: Path) -> None:
    fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(source, out, _COPY_CHUNK)
    os.chmod(destination, BINARY_MODE)


def check_binaries(
    target: Path, names: Iterable[str], *, version: str, runnable: bool, timeout: float
) -> None:
    """Refuse binaries that cannot be what the release holds (see the module's docstring):
    ReleaseError for the archive's fault, LocalError for this machine's. ``runnable``: the
    binaries are for this machine's OS and architecture, so asking their version is cheap."""
    for name in names:
        path = target / name
        size = path.lstat().st_size
        if size == 0:
            raise ReleaseError(f"its {name} is empty (0 bytes)")
        if not os.access(path, os.X_OK):
            raise LocalError(
                f"{path} cannot be executed here (a file system mounted noexec?); choose a cache "
                "on another file system with --cache-dir, E2E_DRA_CACHE_DIR or "
                "KUBERNETES_SERVER_CACHE_DIR"
            )
        if runnable and name in VERSION_CHECKED and _looks_runnable(path):
            _check_version(path, version, min(VERSION_TIMEOUT, max(timeout, 1.0)))


def _looks_runnable(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4).startswith(_RUNNABLE_MAGIC)


def _check_version(path: Path, version: str, timeout: float) -> None:
    """``path --version`` must say ``Kubernetes <version>``."""
    try:
        answer = ask(path.name, [str(path), "--version"], timeout=timeout, cwd=path.parent)
    except ProcessError as exc:
        raise ReleaseError(f"its {path.name} does not run here ({exc})") from None
    words = answer.stdout.split()
    if answer.returncode != 0 or words[:1] != ["Kubernetes"] or len(words) < 2:
        said = " ".join(answer.stdout.split())[:80] or f"exit {answer.returncode}, no output"
        raise ReleaseError(
            f"its {path.name} --version printed {said!r}, not 'Kubernetes {version}'"
        )
    if words[1] != version:
        raise ReleaseError(f"its {path.name} is {words[1][:80]!r}, not {version}")
