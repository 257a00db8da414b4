"""How much each run leaves behind: the size of its artifacts folder, so that a CI job that
keeps every run's artifacts sees which run (and, run after run, which change) made them grow.

A symlink is counted as itself, never followed: a link to a cache of release binaries, or to ``/``,
is not the run's to keep (CI uploads the folder, and does not follow it either). The walk is
bounded (:data:`MAX_ENTRIES`): a folder of millions of files is said to be "more than" what was
counted, not walked for minutes.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_ENTRIES = 200_000
"""Entries looked at per folder: a run writes a few hundred files (logs, dumps, pods' logs)."""


@dataclass(frozen=True)
class Size:
    """The bytes and files found under a folder; ``partial``: the walk stopped before its end
    (too many entries, or an entry it could not read), so these are at least what it holds."""

    bytes: int
    files: int
    partial: bool = False

    @property
    def said(self) -> str:
        """ "12.3 MiB in 240 files", with "at least" when the walk did not see everything."""
        files = f"{self.files} file" + ("" if self.files == 1 else "s")
        said = f"{human(self.bytes)} in {files}"
        return f"at least {said}" if self.partial else said

    def __add__(self, other: Size) -> Size:
        partial = self.partial or other.partial
        return Size(self.bytes + other.bytes, self.files + other.files, partial)


def human(count: int) -> str:
    """``1536`` -> ``1.5 KiB``; bytes under a KiB as they are."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover (the loop returns)


def folder_size(folder: Path, limit: int = MAX_ENTRIES) -> Size:
    """The size of every file under ``folder`` (a symlink's own size, its target never
    followed), at most ``limit`` entries looked at."""
    total = files = seen = 0
    partial = False
    stack = [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > limit:
                        return Size(total, files, True)
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        partial = True
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(Path(entry.path))
                    else:
                        total += info.st_size
                        files += 1
        except OSError:
            partial = True
    return Size(total, files, partial)
