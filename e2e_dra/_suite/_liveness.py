"""The component net: after every phase and cluster step, is every component still the process
the suite started, and did none of them panic?

A component that ends fails the wait at hand at once (``waits.abort_when``), and the entry that
just ended when nothing waited (``SuiteRun``). Two ways for a broken component remain that no
wait sees, and real DRA bugs have taken both: it panics and recovers (``HandleCrash`` logs
"Observed a panic" where the binary does not re-panic; the API server answers 500 and logs
"apiserver panic'd"), so the run stays green while the component misbehaves; or its process is
replaced behind the suite's back. Each is a finding of the entry that just ended, naming the
component, quoting its log and linking it.

The logs are read incrementally: each look reads only what was written since the last one, line
by line with a bounded line length, so a component that logs gigabytes costs time, not memory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

PANIC = re.compile(
    rb'^panic: |^fatal error: |"Observed a panic"|Observed a panic: |"apiserver panic\'d"'
)
"""Lines that say a Go component panicked: the runtime's own (the process dies after it),
``HandleCrash``'s log line (it may recover), the API server's recovered handler panic."""
MAX_LINE = 64 * 1024  # a longer log line is read in pieces; only its start is quoted
QUOTE_CHARS = 400  # of the panic's line, in the finding
STACK_LINES = 6  # lines after the panic's, quoted with it (the start of the stack)
MAX_PANICS = 3  # per component and look: the first ones say enough, the log has the rest


@dataclass(frozen=True)
class Running:
    """One component as the engine runs it: its process id and where it logs."""

    pid: int | None
    log: Path | None


class ComponentNet:
    """What the components did since the last look.

    :meth:`look` is called after every entry with the components running now.
    ``restarts_allowed`` is true after a
    cluster step, which restarts components on purpose; after a phase, a component whose
    process changed was replaced behind the suite's back.
    """

    def __init__(self) -> None:
        self._offsets: dict[Path, int] = {}  # every log seen: how far it was read
        self._pids: dict[str, int | None] = {}

    def look(
        self,
        running: Mapping[str, Running],
        *,
        restarts_allowed: bool,
    ) -> list[str]:
        """The findings: each replaced component, each panic logged since the last look."""
        found: list[str] = []
        for component, now in running.items():
            before = self._pids.get(component)
            if not restarts_allowed and component in self._pids and before != now.pid:
                found.append(
                    f"{component} was restarted behind the suite's back (pid {before} -> "
                    f"{now.pid}); log: {now.log}"
                )
            self._pids[component] = now.pid
            if now.log is not None:
                self._offsets.setdefault(now.log, 0)
        for log in list(self._offsets):  # a restarted component's earlier log too: its last words
            for quote in self._panics(log):
                found.append(f"{_component_of(log, running)} panicked: {quote}; log: {log}")
        return found

    def restarted(self, running: Mapping[str, Running]) -> None:
        """The suite itself started these processes again (after a known bug crashed one): the
        next look takes them as the ones it started."""
        for component, now in running.items():
            self._pids[component] = now.pid
            if now.log is not None:
                self._offsets.setdefault(now.log, 0)

    def _panics(self, log: Path) -> list[str]:
        """The panics written to ``log`` since the last look, each quoted."""
        quotes: list[str] = []
        try:
            with log.open("rb") as stream:
                stream.seek(self._offsets[log])
                while True:
                    line = stream.readline(MAX_LINE)
                    if not line:
                        break
                    if len(quotes) < MAX_PANICS and PANIC.search(line):
                        quotes.append(_quote(line, stream))
                self._offsets[log] = stream.tell()
        except FileNotFoundError:
            self._offsets.pop(log, None)
        return quotes


def _quote(line: bytes, stream: BinaryIO) -> str:
    """The panic's line and the start of the stack after it, on one line (up to the next panic's
    line, which is left to be read as a panic of its own)."""
    following = []
    for _ in range(STACK_LINES):
        at = stream.tell()
        more = stream.readline(MAX_LINE)
        if not more:
            break
        if PANIC.search(more):
            stream.seek(at)
            break
        following.append(more.decode(errors="replace").strip()[:200])
    head = line.decode(errors="replace").strip()[:QUOTE_CHARS]
    return head + "".join(f" | {text}" for text in following if text)


def _component_of(log: Path, running: Mapping[str, Running]) -> str:
    """The component that writes (or wrote) ``log``: by the running ones, else by its name
    (``kube-scheduler-1-v1.37.2.log``)."""
    for component, now in running.items():
        if now.log == log:
            return component
    names = sorted(running, key=len, reverse=True)
    return next((c for c in names if log.name.startswith(c + "-")), log.name)
