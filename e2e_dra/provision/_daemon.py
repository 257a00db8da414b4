"""A long-lived helper process of ours, found again by its PID file.

The node runtime outlives one e2e-dra run (containers and images survive between runs), so its
daemons are started detached in their own session and remembered in a PID file: the PID, the
process's start time and the program's name. A later run trusts the file only while that PID is
still the process that started then (a reused PID has another start time), and stops it by PID,
never by name: other runtimes on the host are not ours to touch. The start time is read from the
kernel's process table, which has it from the fork on; the command line is no identity, as it reads
empty for a moment right after exec.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from e2e_dra.errors import ProvisionError


@dataclass(frozen=True)
class Daemon:
    name: str
    pid_file: Path
    log_file: Path

    def running_pid(self) -> int | None:
        """The PID from our file when that process is alive and is still the one we started."""
        try:
            fields = self.pid_file.read_text().split()
            pid = int(fields[0])
            proc = psutil.Process(pid)
            if len(fields) >= 3:  # pid, start time, program: written by start()
                if fields[2] != self.name or int(fields[1]) != _started(proc):
                    return None  # another program's file, or the PID was reused
            elif proc.name() != self.name:  # a bare PID (older e2e-dra): the program must match
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
        except (OSError, ValueError, IndexError, psutil.Error):
            return None
        return pid

    def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        ready: Callable[[], bool],
        timeout: float = 60,
    ) -> int:
        """Start ``argv`` detached (own session, log file) and wait until ``ready()``."""
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,
                close_fds=True,
            )
        tmp = self.pid_file.with_suffix(".tmp")
        try:
            started = _started(psutil.Process(proc.pid))
        except psutil.Error:  # gone already: the loop below reports how it ended
            started = -1
        tmp.write_text(f"{proc.pid} {started} {self.name}\n")
        os.replace(tmp, self.pid_file)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ProvisionError(
                    f"{self.name} exited with status {proc.returncode} right after starting; "
                    f"see {self.log_file}: {_tail(self.log_file)}"
                )
            if ready():
                return proc.pid
            time.sleep(0.2)
        self.stop()
        raise ProvisionError(
            f"{self.name} did not become ready within {timeout:.0f}s; see {self.log_file}: "
            f"{_tail(self.log_file)}"
        )

    def stop(self, timeout: float = 20) -> bool:
        """SIGTERM our daemon's process group, SIGKILL it after ``timeout``; True if one ran."""
        pid = self.running_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.running_pid() == pid:
            time.sleep(0.2)
        if self.running_pid() == pid:
            _signal_group(pid, signal.SIGKILL)
            time.sleep(0.5)
        self.pid_file.unlink(missing_ok=True)
        return True


def _started(proc: psutil.Process) -> int:
    """Clock ticks from boot to the process's fork (/proc/<pid>/stat's start time): with the PID,
    who the process is. Unlike its wall-clock start time, it does not move when the clock is set."""
    return round((proc.create_time() - psutil.boot_time()) * os.sysconf("SC_CLK_TCK"))


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the daemon's own process group (it leads its session), or just it if that fails."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
