"""Who a process is, who is in its group, and stopping them: process inspection through psutil.

A pid alone is no identity: it is reused once its process has ended. With the process's start
time (clock ticks from boot to its fork, as the kernel's process table has it from the fork on)
it is: unlike the command line, which reads empty for a moment right after exec, the start time
never changes, and unlike a wall-clock start time it does not move when the clock is set.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import psutil

from e2e_dra.hostkit import poll

_POLL = 0.05


def start_ticks(pid: int) -> int | None:
    """Clock ticks from boot to the process's fork (field 22 of /proc/<pid>/stat); None: no such
    process."""
    try:
        since_boot = psutil.Process(pid).create_time() - psutil.boot_time()
    except psutil.Error:
        return None
    return round(since_boot * os.sysconf("SC_CLK_TCK"))


@dataclass(frozen=True)
class ProcessId:
    """A process: its pid and its start time (see :func:`start_ticks`)."""

    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        """The process that has ``pid`` now; None when there is none."""
        start = start_ticks(pid)
        return None if start is None else cls(pid, start)

    def _process(self) -> psutil.Process | None:
        """The psutil handle while this process still runs (a zombie has ended)."""
        try:
            proc = psutil.Process(self.pid)
            if start_ticks(self.pid) != self.start or proc.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            return None
        return proc

    def alive(self) -> bool:
        """This very process still runs: same pid, same start time, not a zombie."""
        return self._process() is not None

    def name(self) -> str | None:
        """Its program's name (as the kernel has it from exec on); None when it has ended."""
        proc = self._process()
        with contextlib.suppress(psutil.Error):
            return proc.name() if proc else None
        return None

    def exe(self) -> Path | None:
        """The program file it runs; None when it has ended or that cannot be read."""
        proc = self._process()
        with contextlib.suppress(psutil.Error):
            return Path(proc.exe()) if proc and proc.exe() else None
        return None


def _finished(proc: psutil.Process) -> bool:
    """A zombie whose other threads are gone: its files (and ports) are released.

    A SIGKILLed multi-threaded process shows its leader as a zombie while other threads are
    still tearing down and holding the process's file descriptors.
    """
    try:
        return proc.status() == psutil.STATUS_ZOMBIE and all(
            thread.id == proc.pid for thread in proc.threads()
        )
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def group_members(pgid: int) -> list[int]:
    """PIDs whose process group is ``pgid``, finished zombies aside: what would be orphaned if
    left."""
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) != pgid or _finished(psutil.Process(pid)):
                continue
        except (OSError, psutil.NoSuchProcess):
            continue
        members.append(pid)
    return members


def _signal(who: ProcessId, sig: signal.Signals) -> None:
    """Signal the group ``who`` leads; just ``who`` (while it is still who it was) when it leads
    none or we may not signal the group."""
    try:
        os.killpg(who.pid, sig)
    except (ProcessLookupError, PermissionError):
        if who.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(who.pid, sig)


def terminate(who: ProcessId, *, grace: float = 10.0, patience: float = 30.0) -> bool:
    """Stop ``who`` and its process group: SIGTERM first when ``grace`` > 0 and up to that long
    for them to end, then SIGKILL to what is left and up to ``patience`` seconds until it is gone.
    True when nothing is left.

    The group is signalled even when ``who`` has ended already: a child it left in its group must
    not survive it.
    """

    def gone() -> bool:
        return not who.alive() and not group_members(who.pid)

    if grace > 0:
        _signal(who, signal.SIGTERM)
        if poll(gone, timeout=grace, interval=_POLL).done:
            return True
    _signal(who, signal.SIGKILL)
    return poll(gone, timeout=patience, interval=_POLL).done
