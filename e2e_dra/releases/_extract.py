"""Unpacking the few binaries we run from a server tarball, and nothing that could escape.

A server tarball holds images, licenses and a dozen binaries; we want five of them (and kubectl).
Reading the gzip stream once and copying only those members keeps time and disk small. A member
with an absolute path, a ``..`` component, or anything but a regular file where a binary should be
(a link, a directory) is refused: a real release never has one, so it is a sign of a broken or
hostile mirror. Messages say what is wrong with the archive's contents; the caller names where the
archive came from.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO

from e2e_dra.errors import ReleaseError

BINARY_MODE = 0o555
_COPY_CHUNK = 1 << 20


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
