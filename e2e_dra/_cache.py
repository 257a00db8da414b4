"""A cache entry is a directory that is either complete and intact, or rebuilt.

Upstream takes ``<cache>/<version>/kube-apiserver`` existing as "complete" and writes in place,
so an interrupted download leaves a cache that later runs trust. Here an entry is filled in a
temporary sibling, marked complete, and renamed into place under an exclusive file lock, so two runs
sharing a cache neither race nor do the work twice, and a crash leaves only a temp dir that the next
fill removes.

The completion marker also records every file of the entry: its name, size, modification time and
SHA-256. An entry is trusted only while its files still match that record; a binary deleted,
truncated or rewritten by hand makes the entry incomplete, and the next fill rebuilds it.

Speed: a release entry is ~600 MB in ~10,000 files (a build keeps its source tree). Hashing all of
it on every run would cost seconds each time, so the routine check is a ``stat`` per file (names,
sizes and mtimes: tens of milliseconds), and only a file whose mtime changed is hashed (``touch``
or a copy that did not keep times costs one hash, not a rebuild). Digests are computed once when
the entry is written (SHA-256 runs at >1 GB/s where the CPU has SHA extensions, so that adds about
a second to a download or build that takes minutes) and re-checked in full on request
(``deep=True``, ``e2e-dra download --verify``), which also catches a rewrite that kept size and
time. Files added to an entry after it was written (a build's scratch files) are not judged: they
cannot change what a recorded file holds.

Entries written before files were recorded are adopted: their files are recorded as they are the
first time they are read (one hashing pass), rather than rebuilt (a build takes ten minutes).

Every OSError met while locking or filling (the cache dir is a file, read-only, the disk is full)
ends as one :class:`~e2e_dra.errors.LocalError` line naming the path and what to do.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from e2e_dra.errors import LocalError, describe_os_error
from hostkit import atomic_write_text

logger = logging.getLogger(__name__)

MARKER = ".e2e-dra-complete.json"
FILES_KEY = "files"
_CHUNK = 1 << 20


class CacheEntry:
    """``<root>/<key>``: filled once by :meth:`fill`, read by everyone after that."""

    def __init__(self, root: Path, key: str, *, holds: Collection[str] = ()) -> None:
        """``holds``: files (relative paths) a complete entry must have; an entry marked complete
        without one of them (written by an older or broken filler) is rebuilt."""
        if not key or "/" in key or key in {".", ".."} or "\0" in key:
            raise ValueError(f"invalid cache key {key!r}")
        self.root = Path(root)
        self.key = key
        self.path = self.root / key
        self.holds = tuple(holds)

    @property
    def marker(self) -> Path:
        return self.path / MARKER

    def is_complete(self, *, deep: bool = False) -> bool:
        """Whether the entry was filled and its recorded files are still what was written.

        ``deep`` re-hashes every file instead of trusting an unchanged size and mtime.
        """
        if not self.marker.is_file():
            return False
        meta = self.metadata()
        if FILES_KEY not in meta and not self._adopt():
            return False
        recorded = self.metadata().get(FILES_KEY)
        if recorded is None:  # a read-only cache written before files were recorded
            return all((self.path / name).is_file() for name in self.holds)
        lacking = [name for name in self.holds if name not in recorded]
        problem = (
            f"it lacks {', '.join(lacking)}"
            if lacking
            else _first_difference(self.path, recorded, deep=deep)
        )
        if problem is None:
            return True
        logger.info(f"cache entry {self.path} is damaged ({problem}); it will be rebuilt")
        return False

    def metadata(self) -> dict[str, Any]:
        """What the filler recorded about this entry (empty when incomplete)."""
        try:
            meta = json.loads(self.marker.read_text())
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock shared by every process that fills this key."""
        lock_dir = self.root / ".locks"
        try:
            lock_dir.mkdir(parents=True, exist_ok=True)
            handle = open(lock_dir / f"{self.key}.lock", "a+")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise self._local_error(exc) from None
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logger.info(f"waiting for another process that is filling {self.path} ...")
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def fill(
        self, populate: Callable[[Path], dict[str, Any] | None], *, deep: bool = False
    ) -> Path:
        """Return the entry's path, calling ``populate(tmp_dir)`` first if it is not complete.

        ``populate`` writes into an empty temporary directory and may return metadata to keep in
        the completion marker. If it raises, nothing is left that a later run takes for a hit.
        """
        if self.is_complete(deep=deep):
            return self.path
        with self.lock():
            if self.is_complete(deep=deep):  # another process filled it while we waited
                return self.path
            tmp = self.root / f".tmp-{self.key}-{uuid.uuid4().hex[:8]}"
            try:
                self._remove_leftovers()
                tmp.mkdir(parents=True)
                meta = dict(populate(tmp) or {})
                meta.setdefault("completed_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                meta[FILES_KEY] = record_files(tmp)
                _write_marker(tmp, meta)
                if self.path.exists():
                    _rmtree(self.path)  # an incomplete or damaged entry
                os.rename(tmp, self.path)
                _fsync_dir(self.root)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    _rmtree(tmp)
                if isinstance(exc, OSError):
                    raise self._local_error(exc) from None
                raise
        return self.path

    def _adopt(self) -> bool:
        """Record the files of an entry written before files were recorded; True when done."""
        try:
            with self.lock():
                meta = self.metadata()
                if FILES_KEY not in meta and self.marker.is_file():
                    logger.info(
                        f"recording the files of {self.path} (written before files were recorded)"
                    )
                    meta[FILES_KEY] = record_files(self.path)
                    _write_marker(self.path, meta)
        except (OSError, LocalError) as exc:  # read-only cache: trust it as older versions did
            logger.info(f"cannot record the files of {self.path} ({exc}); using it as it is")
            return True
        return self.marker.is_file()

    def _local_error(self, exc: OSError) -> LocalError:
        return LocalError(
            f"cache {self.root} is unusable: {describe_os_error(exc, self.root)} (choose another "
            "cache with --cache-dir, E2E_DRA_CACHE_DIR or KUBERNETES_SERVER_CACHE_DIR)"
        )

    def _remove_leftovers(self) -> None:
        for stale in self.root.glob(f".tmp-{self.key}-*"):
            _rmtree(stale)


def record_files(root: Path) -> dict[str, list[Any]]:
    """``{relative path: [size, mtime_ns, sha256]}`` of every file under ``root`` (symlinks:
    ``["->", target]``), the marker excepted."""
    files: dict[str, list[Any]] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            relative = path.relative_to(root).as_posix()
            if relative == MARKER:
                continue
            if path.is_symlink():
                files[relative] = ["->", os.readlink(path)]
                continue
            info = path.stat()
            files[relative] = [info.st_size, info.st_mtime_ns, _sha256(path)]
    return files


def _first_difference(root: Path, recorded: Any, *, deep: bool) -> str | None:
    """The first recorded file that is missing or differs, described; None when all match."""
    if not isinstance(recorded, dict):
        return "its record of files is unreadable"
    for relative, record in recorded.items():
        path = root / relative
        try:
            if record[:1] == ["->"]:
                if os.readlink(path) != record[1]:
                    return f"{relative} points elsewhere"
                continue
            size, mtime_ns, digest = record
            info = path.lstat()
        except FileNotFoundError:
            return f"{relative} is missing"
        except (OSError, ValueError, TypeError):
            return f"{relative} cannot be checked"
        if info.st_size != size:
            return f"{relative} has {info.st_size} bytes, {size} were written"
        if (deep or info.st_mtime_ns != mtime_ns) and _sha256(path) != digest:
            return f"{relative} does not hold what was written (sha256 differs)"
    return None


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _write_marker(directory: Path, meta: dict[str, Any]) -> None:
    atomic_write_text(directory / MARKER, json.dumps(meta, indent=1, sort_keys=True) + "\n")


def _rmtree(path: Path) -> None:
    """Remove a tree even when it holds read-only files and dirs (binaries are 0555)."""
    if not path.exists() and not path.is_symlink():
        return

    def make_writable_and_retry(func: Callable[..., Any], p: str, _exc: object) -> None:
        os.chmod(os.path.dirname(p), 0o755)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(p, 0o755)
        func(p)

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, onerror=make_writable_and_retry)  # onexc needs Python 3.12
    else:
        path.unlink()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
