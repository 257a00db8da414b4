"""A cache entry is a directory that is either complete and verified, or rebuilt.

Upstream takes ``<cache>/<version>/kube-apiserver`` existing as "complete" and writes in place,
so an interrupted download leaves a cache that later runs trust. Here an entry is filled in a
temporary sibling, marked complete, and renamed into place under an exclusive file lock, so two runs
sharing a cache neither race nor do the work twice, and a crash leaves only a temp dir that the next
fill removes.

The rule: **an entry is served only while its recorded manifest is readable and every file it
names still matches it.** The completion marker is that manifest: every file of the entry with
its size, modification time and SHA-256, written when the entry was filled. So:

* a marker that is missing, unreadable, or has no manifest means the entry is incomplete. It is
  rebuilt, never re-recorded from whatever happens to be on disk then;
* a file missing, resized or (by hash) rewritten means the entry is damaged. It is moved aside
  at once (``.damaged-<key>-*``, removed by the next fill of that key; a process still running
  one of its binaries keeps it), so no later run can serve it, even one that only looks at
  sizes and times, and even when the rebuild that should follow fails;
* ``deep=True`` (``e2e-dra download --verify``) hashes every file instead of only those whose
  mtime changed, which also finds a rewrite that kept size and time.

Speed: a release entry is ~600 MB in ~10,000 files (a build keeps its source tree). Hashing all of
it on every run would cost seconds each time, so the routine check is a ``stat`` per file (names,
sizes and mtimes: tens of milliseconds), and only a file whose mtime changed is hashed (``touch``
or a copy that did not keep times costs one hash, not a rebuild). Digests are computed once when
the entry is written (SHA-256 runs at >1 GB/s where the CPU has SHA extensions, so that adds about
a second to a download or build that takes minutes). Files added to an entry after it was written
(a build's scratch files) are not judged: they cannot change what a recorded file holds.

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
import stat
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from e2e_dra.errors import LocalError, describe_os_error
from e2e_dra.hostkit import atomic_write_text

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
        self._locked = False  # this object holds the lock now (flock does not nest)

    @property
    def marker(self) -> Path:
        return self.path / MARKER

    def is_complete(self, *, deep: bool = False) -> bool:
        """Whether the entry was filled and its recorded files are still what was written.

        ``deep`` re-hashes every file instead of trusting an unchanged size and mtime. A damaged
        entry is moved aside before this returns False (see the module's rule).
        """
        if not self.marker.is_file():
            return False
        recorded = self.metadata().get(FILES_KEY)
        if not isinstance(recorded, dict):
            logger.info(
                f"cache entry {self.path} has no readable record of its files; it will be rebuilt"
            )
            return False
        lacking = [name for name in self.holds if name not in recorded]
        problem = (
            f"it lacks {', '.join(lacking)}"
            if lacking
            else _first_difference(self.path, recorded, deep=deep)
        )
        if problem is None:
            return True
        logger.warning(f"cache entry {self.path} is damaged ({problem}); it will be rebuilt")
        self._move_aside()
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
        """Exclusive lock shared by every process that fills this key (taken again by its holder,
        it is already held)."""
        if self._locked:
            yield
            return
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
            self._locked = True
            try:
                yield
            finally:
                self._locked = False
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

    def _move_aside(self) -> None:
        """Take a damaged entry out of every later run's way (see the module's rule)."""
        aside = self.root / f".damaged-{self.key}-{uuid.uuid4().hex[:8]}"
        try:
            with self.lock():
                if self.path.is_dir():
                    os.rename(self.path, aside)
        except (OSError, LocalError) as exc:  # a read-only cache: at least say so
            logger.warning(f"cannot move the damaged entry {self.path} aside ({exc})")

    def _local_error(self, exc: OSError) -> LocalError:
        return LocalError(
            f"cache {self.root} is unusable: {describe_os_error(exc, self.root)} (choose another "
            "cache with --cache-dir, E2E_DRA_CACHE_DIR or KUBERNETES_SERVER_CACHE_DIR)"
        )

    def _remove_leftovers(self) -> None:
        for prefix in (".tmp", ".damaged"):
            for stale in self.root.glob(f"{prefix}-{self.key}-*"):
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
        if not stat.S_ISREG(info.st_mode):  # a directory or link in its place: never hashed
            return f"{relative} is not a regular file"
        if info.st_size != size:
            return f"{relative} has {info.st_size} bytes, {size} were written"
        if deep or info.st_mtime_ns != mtime_ns:
            try:
                if _sha256(path) != digest:
                    return f"{relative} does not hold what was written (sha256 differs)"
            except OSError as exc:
                return f"{relative} cannot be read ({exc.strerror or exc})"
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
