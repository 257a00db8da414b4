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

Two more rules hold for everything under the cache root, because anyone who can write there can
plant things for the next run to trip on:

* **No link is followed inside the cache.** Directories we create or enter (``.locks``,
  ``.partial/<key>``) are made by :func:`real_dir`, which removes a symbolic link found in their
  place instead of entering it, and files we open there (the lock file, a partial download, its
  stamp, a marker) are opened by :func:`open_nofollow` (``O_NOFOLLOW``): a link planted as one
  of them is removed and the file made anew, never written or read through. An entry or a
  marker that is a link is not complete. (The cache root itself is the user's choice and may be
  a link.)
* **No wait for the lock is without end.** A process waiting for another one to fill a key waits
  at most ``lock_wait`` seconds (:data:`DEFAULT_LOCK_WAIT`, or what the caller has left of its
  own deadline), and at once gives up when the holder is stopped (SIGSTOP, Ctrl-Z): then it would
  wait for ever. Both end as one line naming the holder's PID (each holder writes its PID into
  the lock file; ``/proc/locks`` is asked first) and what to do about it.

Every OSError met while locking or filling (the cache dir is a file, read-only, the disk is full)
ends as one :class:`~e2e_dra.errors.LocalError` line naming the path and what to do.
"""

from __future__ import annotations

import contextlib
import errno
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
DEFAULT_LOCK_WAIT = 3600.0  # seconds: longer than any fill of ours (a build from source) takes
STOPPED_GRACE = 1.0  # seconds a holder must stay stopped before we stop waiting for it
MARKER_LIMIT = 64 << 20  # bytes: a marker records ~10,000 files in ~1 MB; more is not one


class CacheEntry:
    """``<root>/<key>``: filled once by :meth:`fill`, read by everyone after that."""

    def __init__(
        self,
        root: Path,
        key: str,
        *,
        holds: Collection[str] = (),
        lock_wait: float | None = None,
    ) -> None:
        """``holds``: files (relative paths) a complete entry must have; an entry marked complete
        without one of them (written by an older or broken filler) is rebuilt. ``lock_wait``:
        seconds to wait for another process that fills this key (:data:`DEFAULT_LOCK_WAIT` when
        None)."""
        if not key or "/" in key or key in {".", ".."} or "\0" in key:
            raise ValueError(f"invalid cache key {key!r}")
        self.root = Path(root)
        self.key = key
        self.path = self.root / key
        self.holds = tuple(holds)
        self.lock_wait = DEFAULT_LOCK_WAIT if lock_wait is None else max(0.0, lock_wait)
        self._locked = False  # this object holds the lock now (flock does not nest)

    @property
    def marker(self) -> Path:
        return self.path / MARKER

    def is_complete(self, *, deep: bool = False) -> bool:
        """Whether the entry was filled and its recorded files are still what was written.

        ``deep`` re-hashes every file instead of trusting an unchanged size and mtime. A damaged
        entry is moved aside before this returns False (see the module's rule).
        """
        try:
            entry, marker = self.path.lstat(), self.marker.lstat()
        except OSError:
            return False
        if not stat.S_ISDIR(entry.st_mode) or not stat.S_ISREG(marker.st_mode):
            return False  # missing, or a link planted in place of the entry or its marker
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
            fd = os.open(self.marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return {}
                meta = json.loads(handle.read(MARKER_LIMIT + 1)[:MARKER_LIMIT])
        except (OSError, ValueError, RecursionError):
            return {}
        return meta if isinstance(meta, dict) else {}

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock shared by every process that fills this key (taken again by its holder,
        it is already held)."""
        if self._locked:
            yield
            return
        try:
            lock_file = real_dir(self.root, ".locks") / f"{self.key}.lock"
            fd = open_nofollow(lock_file, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise self._local_error(exc) from None
        try:
            self._wait_for_lock(fd, lock_file)
            with contextlib.suppress(OSError):  # who holds it, for the next one who waits
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._locked = True
            try:
                yield
            finally:
                self._locked = False
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _wait_for_lock(self, fd: int, lock_file: Path) -> None:
        """Take the lock on ``fd``, waiting at most :attr:`lock_wait` seconds, and not at all for
        a holder that is stopped (see the module's rule)."""
        started = time.monotonic()
        stopped_since: float | None = None
        pause = 0.05
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            holder = _lock_holder(fd)
            who = f"process {holder}" if holder else "another process"
            if not said:
                logger.info(f"waiting for {who}, which is filling {self.path} ...")
                said = True
            now = time.monotonic()
            if holder and _is_stopped(holder):
                stopped_since = now if stopped_since is None else stopped_since
                if now - stopped_since >= STOPPED_GRACE:
                    raise LocalError(
                        f"cache entry {self.path} is locked by {who}, which is stopped (SIGSTOP or "
                        f"Ctrl-Z) while filling it; resume it (kill -CONT {holder}) or end it "
                        f"(kill {holder}), then run again"
                    )
            else:
                stopped_since = None
            if now - started >= self.lock_wait:
                end = (
                    f"end it (kill {holder})" if holder else f"end the process holding {lock_file}"
                )
                raise LocalError(
                    f"waited {self.lock_wait:.0f}s for {who} to finish filling cache entry "
                    f"{self.path} (it holds {lock_file}); let it finish or {end}, then run again"
                )
            time.sleep(min(pause, max(0.0, self.lock_wait - (now - started)) + 0.01))
            pause = min(pause * 2, 0.5)

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
                if self.path.exists() or self.path.is_symlink():
                    _rmtree(self.path)  # an incomplete or damaged entry, or a planted link
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


def real_dir(root: Path, *parts: str) -> Path:
    """``root/parts...`` as real directories, made where missing; a symbolic link in the place of
    one is removed, not entered (see the module's rule). Something else in the way (a file) is an
    OSError for the caller to report."""
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)  # the root may be a link: the user chose it
    for part in parts:
        path = path / part
        try:
            info = path.lstat()
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # made by a racing process meanwhile
                path.mkdir()
            info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            logger.warning(f"removed {path}, a link planted in the cache (to {os.readlink(path)})")
            path.unlink()
            path.mkdir()
            info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise OSError(errno.EEXIST, "a file is in the way of a directory", str(path))
    return path


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags)`` that never goes through a link at ``path``: a link (or a FIFO,
    a device) there is removed first (a file we create is then made anew), and one that appears
    meanwhile fails the open (ELOOP) instead of being followed. The parent directory must come from
    :func:`real_dir`."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            logger.warning(f"removed {path}, a link planted in the cache (to {os.readlink(path)})")
            os.unlink(path)
        elif not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a FIFO would block a read
            logger.warning(f"removed {path}, a special file planted in the cache")
            os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted there
        os.close(fd)
        raise OSError(errno.EEXIST, "not a regular file (planted?); remove it", str(path))
    return fd


def _lock_holder(fd: int) -> int | None:
    """The PID holding the flock on ``fd``'s file: as ``/proc/locks`` says, else as the holder
    wrote into the file; None when neither tells."""
    info = os.fstat(fd)
    wanted = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    with contextlib.suppress(OSError, ValueError), open("/proc/locks") as locks:
        for line in locks:
            fields = line.split()
            if len(fields) < 6 or fields[1] == "->" or fields[1] != "FLOCK":
                continue
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == wanted and int(fields[4]) > 0:
                return int(fields[4])
    with contextlib.suppress(OSError, ValueError):
        written = os.pread(fd, 32, 0).decode().strip()
        if written.isdecimal() and int(written) > 0:
            return int(written)
    return None


def _is_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (state T) or a tracer (t)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in {"T", "t"}


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
