"""Which files explain a failed entry: its dump, its driver's gRPC calls and log, the logs of
the cluster state it ran in. Only files that exist are named, so no link of a report is dead.

A summary of schema 1 lists them (``logs``, from the failure's own notes); for an older one the
names are derived from the conventions the suite writes them by.
"""

from __future__ import annotations

from pathlib import Path

from e2e_dra.report._load import Result, SuiteRecord
from e2e_dra.report._schema import DRIVERS_DIR, DUMPS_DIR, dump_file_name


def failure_links(record: SuiteRecord, result: Result) -> list[tuple[str, Path]]:
    """(label, file) for each existing file that helps to debug ``result``."""
    directory = record.directory
    links: dict[Path, str] = {}
    for label, relative in result.logs:
        path = _inside(directory, relative)
        if path is not None and path.is_file():
            links.setdefault(path, label)
    if not result.logs:  # a summary from before schema 1: the files by their conventions
        for label, path in _conventional(record, result):
            if path.is_file():
                links.setdefault(path, label)
    return [(label, path) for path, label in links.items()]


STATE_STEPS = ("bring-up", "upgrade", "downgrade")
"""The cluster steps that start a new state of an upgrade suite, in ``binaries``' order."""


def _conventional(record: SuiteRecord, result: Result) -> list[tuple[str, Path]]:
    directory = record.directory
    found = [("dump", directory / DUMPS_DIR / dump_file_name(result.id))]
    state = _state_of(record, result)
    if state is not None:
        found += [
            (f"{path.name.removesuffix(f'-{state}.log')} log", path)
            for path in sorted(directory.glob(f"*-{state}.log"))
        ]
    if result.subtest:
        drivers = directory / DRIVERS_DIR
        suffix = f"{result.subtest}.k8s.io"
        found += [("gRPC calls", p) for p in sorted(drivers.glob(f"grpc-calls-*{suffix}.json"))]
        found += [("driver log", p) for p in sorted(drivers.glob(f"driver-*{suffix}.log"))]
    return found


def _state_of(record: SuiteRecord, result: Result) -> str | None:
    """The state of an upgrade suite ``result`` ran in: the n-th of ``binaries`` after the n-th
    cluster step that started one. None when that cannot be told (the gate cycle)."""
    states = list(record.binaries)
    started = 0
    for entry in record.results:
        if entry.subtest is None and entry.step in STATE_STEPS and entry.outcome != "skipped":
            started += 1
        if entry is result:
            break
    return states[started - 1] if 0 < started <= len(states) else None


def _inside(directory: Path, relative: str) -> Path | None:
    """``relative`` under ``directory``, or None when it would leave it (``..``, absolute)."""
    path = directory / relative
    try:
        path.resolve().relative_to(directory.resolve())
    except (ValueError, OSError):
        return None
    return path
