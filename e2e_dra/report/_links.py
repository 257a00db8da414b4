"""Which files explain a failed entry (its dump, its driver's gRPC calls and log, the logs of the
cluster state it ran in, the node's own logs of that state and the cluster as the suite left it),
and the one rule every link of the page follows (:class:`LinkRule`).

Only files that exist are named, so no link of a report is dead; and only files inside their
suite's folder, as a relative URL without a scheme, so no link of a report leads out of the
artifacts or runs anything (a folder named ``javascript:...`` stays a folder). A report read
where relative links break (Prow's Spyglass inlines the page into its own) is given a base: each
link is then that base, an http(s) URL checked by :func:`e2e_dra._urls.report_link_base`,
followed by the same relative path.

A summary of schema 1 lists a failure's own files (``logs``, from its notes); for an older one
the names are derived from the conventions the suite writes them by. The node's logs of a state
(``containerd-<state>.log``, ``pods-<state>/``) and the final dump (``dumps/dump-final.json``)
are always found by those conventions (``e2e_dra._suite``'s ``_nodelogs`` and ``_cluster``):
the suite writes them when a state ends, after the failure was recorded.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from e2e_dra.report._load import Result, SuiteRecord
from e2e_dra.report._schema import DRIVERS_DIR, DUMPS_DIR, dump_file_name

MAX_LISTED = 10_000
"""Names of one folder looked at for an old summary's conventional files: a suite writes a few
dozen; a folder of millions is not searched whole for each failure."""
MAX_LINKS_PER_ENTRY = 32
"""Files linked for one failure: a real one has a dump, a log per component and its driver's."""
MAX_LINKS = 20_000
"""Links of one page: a page with a hundred failures has a few thousand."""
FINAL_DUMP = "dump-final.json"
"""Under a cluster's ``dumps/``: its DRA objects, pods and events as the suite left them."""


@dataclass(frozen=True)
class Link:
    """A file (or, ``folder``, a folder of files) that helps to debug a failure."""

    label: str
    path: Path
    folder: bool = False


def href(
    path: Path, tree: Path, page_dir: Path, base: str | None = None, *, folder: bool = False
) -> str | None:
    """The URL of ``path`` for a page in ``page_dir``, or None when it must not be linked.

    A link is a relative path (percent-encoded, so neither a ``:`` making a scheme nor a
    non-UTF-8 byte of a name survives as itself) to a regular file (``folder``: a directory,
    the URL ending in ``/``) that, symlinks followed, is inside ``tree``; with ``base`` (the URL
    the page's folder is served at, already checked) it is ``<base>/<that path>``."""
    usable = _is_dir(path) if folder else _is_file(path)
    if not usable or not _contains(_real(tree), path):
        return None
    try:
        relative = Path(os.path.relpath(path, page_dir)).as_posix()
        url = quote(os.fsencode(relative), safe="/") + ("/" if folder else "")
    except (ValueError, OSError):  # a name no file system encodes, a path on another drive
        return None
    return url if base is None else under(base, url)


def base_depth(base: str) -> int:
    """How many folders deep the path of ``base`` is: how far up a link may climb under it."""
    return len([p for p in urlsplit(base).path.split("/") if p])


def under(base: str, relative: str) -> str | None:
    """``relative`` (a path the page's folder links to) under ``base`` (the URL that folder is
    served at), its ``..`` taken off the base's path as a browser would: ``https://h/a/report``
    and ``../run/x.log`` make ``https://h/a/run/x.log``, never ``https://h/a/report/../run/...``
    (which a viewer that does not resolve it, or a copy of the link, gets wrong). None when it
    climbs above the host's root."""
    scheme, host, path, _, _ = urlsplit(base)
    segments = [p for p in path.split("/") if p]
    for part in relative.split("/"):
        if part == "..":
            if not segments:
                return None
            segments.pop()
        elif part != ".":
            segments.append(part)  # the last one "" when the link is to a folder
    return urlunsplit((scheme, host, "/" + "/".join(segments), "", ""))


class LinkRule:
    """Where the links of one page point: relative to the page's folder, or under ``base``."""

    def __init__(self, page_dir: Path, base: str | None = None) -> None:
        self.page_dir = page_dir
        self.base = base

    def artifact(self, link: Link, tree: Path) -> str | None:
        """The URL of ``link``, a file of the run whose folder is ``tree`` (:func:`href`)."""
        return href(link.path, tree, self.page_dir, self.base, folder=link.folder)

    def own(self, name: str) -> str:
        """The URL of ``name``, a file the report writes next to the page."""
        url = quote(name, safe="")
        return url if self.base is None else f"{self.base.rstrip('/')}/{url}"


class Explainer:
    """The files that explain the failures of one suite run (its folder read once, each file
    looked at once, each failure's list made once)."""

    def __init__(self, record: SuiteRecord) -> None:
        self.record = record
        self.directory = record.directory
        self._root = _real(record.directory)
        self._listed: dict[Path, list[str]] = {}
        self._usable: dict[tuple[Path, bool], bool] = {}
        self._links: dict[int, list[Link]] = {}
        self._by_convention: dict[tuple[tuple[Path, str] | None, str | None], list[Link]] = {}
        self._places = _gate_cycle_places(record) if record.kind.cycles_gates else _states(record)

    def place(self, result: Result) -> tuple[Path, str] | None:
        """(the folder of its cluster's logs, the state) ``result`` ran in; None when that cannot
        be told, or the folder is not inside the suite's (a subtest named ``../x``)."""
        found = self._places.get(id(result))
        if found is None:
            return None
        folder, state = found
        return (folder, state) if self._usable_path(folder, folder=True) else None

    def links(self, result: Result) -> list[Link]:
        """Each existing file inside the suite's folder that helps to debug ``result``, at most
        :data:`MAX_LINKS_PER_ENTRY`: its own (dump, driver's calls and log, the components' logs
        of its state), then the node's logs of its state and the final dump."""
        if id(result) not in self._links:
            candidates: list[Link]
            if result.logs:
                candidates = [Link(label, self.directory / path) for label, path in result.logs]
            else:  # a summary from before schema 1: the files by their conventions
                dump = self.directory / DUMPS_DIR / dump_file_name(result.id)
                candidates = [Link("dump", dump), *self._conventional(result)]
            candidates += self._node(result)
            links: dict[Path, Link] = {}
            for link in candidates:
                if len(links) >= MAX_LINKS_PER_ENTRY:
                    break
                if link.path not in links and self._usable_path(link.path, folder=link.folder):
                    links[link.path] = link
            self._links[id(result)] = list(links.values())
        return self._links[id(result)]

    def _usable_path(self, path: Path, *, folder: bool = False) -> bool:
        """Whether ``path`` is a file (or folder) inside the suite's folder (asked once)."""
        key = (path, folder)
        if key not in self._usable:
            kind = _is_dir(path) if folder else _is_file(path)
            self._usable[key] = kind and _contains(self._root, path)
        return self._usable[key]

    def _node(self, result: Result) -> list[Link]:
        """The node's logs of the state ``result`` ran in, and its cluster's final dump."""
        place = self.place(result)
        if place is None:
            return []
        folder, state = place
        return [
            Link("containerd log", folder / f"containerd-{state}.log"),
            Link("pod logs", folder / f"pods-{state}", folder=True),
            Link("final dump", folder / DUMPS_DIR / FINAL_DUMP),
        ]

    def _conventional(self, result: Result) -> list[Link]:
        """The logs of the state ``result`` ran in and its driver's files (one list for all the
        results of one state and subtest)."""
        place = self.place(result)
        key = (place, result.subtest)
        if key in self._by_convention:
            return self._by_convention[key]
        found = []
        if place is not None:
            folder, state = place
            tail = f"-{state}.log"
            found += [
                Link(f"{name.removesuffix(tail)} log", folder / name)
                for name in self._names(folder, "", tail)
                if not name.startswith("containerd-")  # the node's: with the others of it
            ]
        if result.subtest:
            drivers = self.directory / DRIVERS_DIR
            suffix = f"{result.subtest}.k8s.io"
            found += [
                Link("gRPC calls", drivers / name)
                for name in self._names(drivers, "grpc-calls-", f"{suffix}.json")
            ]
            found += [
                Link("driver log", drivers / name)
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


def _states(record: SuiteRecord) -> dict[int, tuple[Path, str]]:
    """(the suite's folder, the state) of an upgrade suite's results (by ``id()``): the n-th of
    ``binaries`` after the n-th cluster step that started one."""
    states = list(record.binaries)
    found = {}
    started = 0
    for entry in record.results:
        if entry.subtest is None and entry.step in STATE_STEPS and entry.outcome != "skipped":
            started += 1
        if 0 < started <= len(states):
            found[id(entry)] = (record.directory, states[started - 1])
    return found


def _gate_cycle_places(record: SuiteRecord) -> dict[int, tuple[Path, str]]:
    """(``<suite folder>/<subtest>``, the state) of a gate cycle's results (by ``id()``): each
    subtest's cluster logs into a folder of its own, its states named after its phases; a
    cluster step is in the state of the subtest's next phase (``bring-up`` starts the first),
    or, when none follows (``cleanup``), of the one before it."""
    found: dict[int, tuple[Path, str]] = {}
    waiting: dict[str, list[Result]] = {}  # subtest -> its steps before its next phase
    last: dict[str, str] = {}
    for entry in record.results:
        subtest = entry.subtest
        if subtest is None:
            continue
        if entry.phase is None:
            waiting.setdefault(subtest, []).append(entry)
            continue
        folder = record.directory / subtest
        for step in waiting.pop(subtest, []):
            found[id(step)] = (folder, entry.phase)
        found[id(entry)] = (folder, entry.phase)
        last[subtest] = entry.phase
    for subtest, steps in waiting.items():
        if subtest in last:
            for step in steps:
                found[id(step)] = (record.directory / subtest, last[subtest])
    return found


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):  # gone, or a name no file system encodes
        return False


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
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
