"""A cache entry is a directory that is either complete or absent.

Upstream takes ``<cache>/<version>/kube-apiserver`` existing as "complete" and writes in place,
so an interrupted download leaves a cache that later runs trust. Here an entry is filled in a
temporary sibling, marked complete, and renamed into place under an exclusive file lock, so two runs
sharing a cache neither race nor do the work twice, and a crash leaves only a temp dir that the next
fill removes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MARKER = ".e2e-dra-complete.json"


class CacheEntry:
    """``<root>/<key>``: filled once by :meth:`fill`, read by everyone after that."""

    def __init__(self, root: Path, key: str) -> None:
        if not key or "/" in key or key in {".", ".."}:
            raise ValueError(f"invalid cache key {key!r}")
        self.root = Path(root)
        self.key = key
        self.path = self.root / key

    @property
    def marker(self) -> Path:
        return self.path / MARKER

    def is_complete(self) -> bool:
        return self.marker.is_file()

    def metadata(self) -> dict[str, Any]:
        """What the filler recorded about this entry (empty when incomplete)."""
        try:
            return json.loads(self.marker.read_text())
        except (OSError, ValueError):
            return {}

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock shared by every process that fills this key."""
        lock_dir = self.root / ".locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        with open(lock_dir / f"{self.key}.lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                from e2e_dra._console import say

                say(f"waiting for another process that is filling {self.path} ...")
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def fill(self, populate: Callable[[Path], dict[str, Any] | None]) -> Path:
        """Return the entry's path, calling ``populate(tmp_dir)`` first if it is not complete.

        ``populate`` writes into an empty temporary directory and may return metadata to keep in
        the completion marker. If it raises, nothing is left that a later run takes for a hit.
        """
        if self.is_complete():
            return self.path
        with self.lock():
            if self.is_complete():  # another process filled it while we waited
                return self.path
            self._remove_leftovers()
            tmp = self.root / f".tmp-{self.key}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir(parents=True)
            try:
                meta = dict(populate(tmp) or {})
                meta.setdefault("completed_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                (tmp / MARKER).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
                if self.path.exists():
                    _rmtree(self.path)  # an incomplete entry from an older layout or a crash
                os.rename(tmp, self.path)
                _fsync_dir(self.root)
            except BaseException:
                _rmtree(tmp)
                raise
        return self.path

    def remove(self) -> None:
        with self.lock():
            _rmtree(self.path)

    def _remove_leftovers(self) -> None:
        for stale in self.root.glob(f".tmp-{self.key}-*"):
            _rmtree(stale)


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
