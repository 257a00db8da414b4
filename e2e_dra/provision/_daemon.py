"""A long-lived helper process of ours, found again by its PID file.

The node runtime outlives one e2e-dra run (containers and images survive between runs), so its
daemons are started detached in their own session and remembered in a PID file. A later run trusts
the file only while that PID still runs the same program, and stops it by PID, never by name: other
runtimes on the host are not ours to touch.
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

from e2e_dra.errors import ProvisionError


@dataclass(frozen=True)
class Daemon:
    name: str
    pid_file: Path
    log_file: Path

    def running_pid(self) -> int | None:
        """The PID from our file when that process is alive and is still our program."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            return None
        if not cmdline or Path(os.fsdecode(cmdline[0])).name != self.name:
            return None  # the PID was reused by something else
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None
        return None if state == "Z" else pid

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
        tmp.write_text(f"{proc.pid}\n")
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
