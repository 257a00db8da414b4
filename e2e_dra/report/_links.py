"""Which files explain a failed entry (its dump, its driver's gRPC calls and log, the logs of the
cluster state it ran in), and the one rule every link of the page follows (:func:`href`).

Only files that exist are named, so no link of a report is dead; and only files inside their
suite's folder, as a relative URL without a scheme, so no link of a report leads out of the
artifacts or runs anything (a folder named ``javascript:...`` stays a folder).

A summary of schema 1 lists them (``logs``, from the failure's own notes); for an older one the
names are derived from the conventions the suite writes them by.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import quote

from e2e_dra.report._load import Result, SuiteRecord
from e2e_dra.report._schema import DRIVERS_DIR, DUMPS_DIR, dump_file_name

MAX_LISTED = 10_000
"""Names of one folder looked at for an old summary's conventional files: a suite writes a few
dozen; a folder of millions is not searched whole for each failure."""
MAX_LINKS_PER_ENTRY = 32
"""Files linked for one failure: a real one has a dump, a log per component and its driver's."""
MAX_LINKS = 20_000
"""Links of one page: a page with a hundred failures has a few thousand."""


def href(path: Path, tree: Path, page_dir: Path) -> str | None:
    """The URL of ``path`` for a page in ``page_dir``, or None when it must not be linked.

    A link is a relative path (percent-encoded, so neither a ``:`` making a scheme nor a
    non-UTF-8 byte of a name survives as itself) to a regular file that, symlinks followed, is
    inside ``tree``."""
    if not _is_file(path) or not _contains(_real(tree), path):
        return None
    try:
        relative = Path(os.path.relpath(path, page_dir)).as_posix()
        return quote(os.fsencode(relative), safe="/")
    except (ValueError, OSError):  # a name no file system encodes, a path on another drive
        return None


class Explainer:
    """The files that explain the failures of one suite run (its folder read once, each file
    looked at once, each failure's list made once)."""

    def __init__(self, record: SuiteRecord) -> None:
        self.record = record
        self.directory = record.directory
        self._root = _real(record.directory)
        self._listed: dict[Path, list[str]] = {}
        self._usable: dict[Path, bool] = {}
        self._links: dict[int, list[tuple[str, Path]]] = {}
        self._by_convention: dict[tuple[str | None, str | None], list[tuple[str, Path]]] = {}
        self._states = _states(record)

    def links(self, result: Result) -> list[tuple[str, Path]]:
        """(label, file) for each existing file inside the suite's folder that helps to debug
        ``result``, at most :data:`MAX_LINKS_PER_ENTRY`."""
        if id(result) not in self._links:
            if result.logs:
                candidates = [(label, self.directory / relative) for label, relative in result.logs]
            else:  # a summary from before schema 1: the files by their conventions
                dump = self.directory / DUMPS_DIR / dump_file_name(result.id)
                candidates = [("dump", dump), *self._conventional(result)]
            links: dict[Path, str] = {}
            for label, path in candidates:
                if len(links) >= MAX_LINKS_PER_ENTRY:
                    break
                if self._usable_file(path):
                    links.setdefault(path, label)
            self._links[id(result)] = [(label, path) for path, label in links.items()]
        return self._links[id(result)]

    def _usable_file(self, path: Path) -> bool:
        """Whether ``path`` is a file inside the suite's folder (asked once per path)."""
        if path not in self._usable:
            self._usable[path] = _is_file(path) and _contains(self._root, path)
        return self._usable[path]

    def _conventional(self, result: Result) -> list[tuple[str, Path]]:
        """The logs of the state ``result`` ran in and its driver's files (one list for all the
        results of one state and subtest)."""
        state = self._states.get(id(result))
        key = (state, result.subtest)
        if key in self._by_convention:
            return self._by_convention[key]
        directory = self.directory
        found = []
        if state is not None:
            tail = f"-{state}.log"
            found += [
                (f"{name.removesuffix(tail)} log", directory / name)
                for name in self._names(directory, "", tail)
            ]
        if result.subtest:
            drivers = directory / DRIVERS_DIR
            suffix = f"{result.subtest}.k8s.io"
            found += [
                ("gRPC calls", drivers / name)
                for name in self._names(drivers, "grpc-calls-", f"{suffix}.json")
            ]
            found += [
                ("driver log", drivers / name)
                for name in self._names(drivers, "driver-", f"{suffix}.log")
            ]
        self._by_convention[key] = found
        return found

    def _names(self, folder: Path, head: str, tail: str) -> list[str]:
        """The names in ``folder`` matching ``head*tail`` (a glob whose parts, from a summary,
        are matched as text, never as a pattern), sorted."""
        if folder not in self._listed:
            names = []
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        names.append(entry.name)
                        if len(names) >= MAX_LISTED:
                            break
            except OSError:
                pass
            self._listed[folder] = sorted(names)
        return [
            name
            for name in self._listed[folder]
            if len(name) >= len(head) + len(tail) and name.startswith(head) and name.endswith(tail)
        ][:MAX_LINKS_PER_ENTRY]


STATE_STEPS = ("bring-up", "upgrade", "downgrade", "re-upgrade")
"""The cluster steps that start a new state of an upgrade suite, in ``binaries``' order."""


def _states(record: SuiteRecord) -> dict[int, str]:
    """The state of an upgrade suite each result ran in (by ``id()``): the n-th of ``binaries``
    after the n-th cluster step that started one. Absent when that cannot be told (the gate
    cycle)."""
    states = list(record.binaries)
    found = {}
    started = 0
    for entry in record.results:
        if entry.subtest is None and entry.step in STATE_STEPS and entry.outcome != "skipped":
            started += 1
        if 0 < started <= len(states):
            found[id(entry)] = states[started - 1]
    return found


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):  # gone, or a name no file system encodes
        return False


def _contains(root: str, path: Path) -> bool:
    """Whether ``path``, symlinks followed, is the folder ``root`` (a real path) or under it."""
    real = _real(path)
    return bool(root and real) and (real == root or real.startswith(root.rstrip("/") + "/"))


def _real(path: Path) -> str:
    """``path`` with every symlink followed ("" when that fails: nothing is under it)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return ""
