"""A long-lived helper process of ours, found again by its PID file.

The node runtime outlives one e2e-dra run (containers and images survive between runs), so its
daemons are started detached in their own session and remembered in a PID file: the PID, the
process's start time and the program's name. A later run trusts the file only while that PID is
still the process that started then (a reused PID has another start time), and stops it by PID,
never by name: other runtimes on the host are not ours to touch. Starting, identifying and
stopping are the shared supervisor's (``e2e_dra.supervise``); this module adds the PID file and
waiting until the daemon is ready.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.errors import ProvisionError
from e2e_dra.hostkit import atomic_write_text, poll
from e2e_dra.supervise import Process, ProcessError, ProcessId, terminate


@dataclass(frozen=True)
class Daemon:
    name: str
    pid_file: Path
    log_file: Path

    def running(self) -> ProcessId | None:
        """The process from our file when it is alive and is still the one we started."""
        try:
            fields = self.pid_file.read_text().split()
            pid = int(fields[0])
            if len(fields) >= 3:  # pid, start time, program: written by start()
                if fields[2] != self.name:
                    return None  # another program's file
                who: ProcessId | None = ProcessId(pid, int(fields[1]))
            else:  # a bare PID (older e2e-dra): the program must match
                who = ProcessId.of(pid)
                if who is not None and who.name() != self.name:
                    return None
        except (OSError, ValueError, IndexError):
            return None
        return who if who is not None and who.alive() else None

    def running_pid(self) -> int | None:
        """The PID of :meth:`running`."""
        who = self.running()
        return who.pid if who else None

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
        process = Process(self.name, argv, log_file=self.log_file, env=env, new_session=True)
        try:  # the PID file is written before the daemon runs: a daemon we lost track of never runs
            process.start(
                before_run=lambda who: atomic_write_text(
                    self.pid_file, f"{who.pid} {who.start} {self.name}\n"
                )
            )
        except ProcessError as exc:
            raise ProvisionError(str(exc)) from exc
        assert process.identity is not None
        who = process.identity

        def up() -> bool:
            if not process.running():
                returncode = process.wait(timeout=10)  # its trailer is in the log then
                raise ProvisionError(
                    f"{self.name} exited with status {returncode} right after starting; "
                    f"see {self.log_file}: {_tail(self.log_file)}"
                )
            return ready()

        if poll(up, timeout=timeout, interval=0.2).done:
            return who.pid
        self.stop()
        raise ProvisionError(
            f"{self.name} did not become ready within {timeout:.0f}s; see {self.log_file}: "
            f"{_tail(self.log_file)}"
        )

    def stop(self, timeout: float = 20) -> bool:
        """SIGTERM our daemon's process group, SIGKILL it after ``timeout``; True if one ran."""
        who = self.running()
        if who is not None:
            terminate(who, grace=timeout, patience=5)
        self.pid_file.unlink(missing_ok=True)
        return who is not None


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
