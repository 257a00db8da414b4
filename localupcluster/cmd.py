"""One external process: its own process group, its output in a log file, a trailer saying why
it ended.

Components are often wrapped in ``sudo``; killing only the wrapper would orphan the component,
which keeps holding its ports. So every command gets its own process group and is stopped by
signalling the whole group (SIGKILL like upstream, optionally after a SIGTERM grace period).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from localupcluster._errors import ClusterError

_EOF = object()


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="milliseconds")


def describe_exit(returncode: int | None) -> str:
    """Go's wording, so logs read like upstream's: "exit status 1", "signal: killed"."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return "signal: killed" if name == "SIGKILL" else f"signal: {name}"
    return f"exit status {returncode}"


def _stat_fields(stat_file: Path) -> list[str]:
    """Fields after the parenthesised command of a /proc stat file: state ppid pgrp ..."""
    stat = stat_file.read_text()
    return stat[stat.rfind(")") + 2 :].split()


def _exiting_done(proc: Path) -> bool:
    """A zombie leader whose other threads are gone: its files (and ports) are released.

    A SIGKILLed multi-threaded process shows its leader as a zombie while other threads are
    still tearing down and holding the process's file descriptors.
    """
    try:
        return all(_stat_fields(task / "stat")[0] in "ZX" for task in (proc / "task").iterdir())
    except OSError:
        return True


def process_group_members(pgid: int) -> list[int]:
    """PIDs whose process group is ``pgid`` (from /proc): what would be orphaned if left."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat_fields(entry / "stat")
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid:
            if fields[0] in "ZX" and _exiting_done(entry):
                continue
            members.append(int(entry.name))
    return members


class Cmd:
    """A process in its own process group, started from ``argv``.

    With ``capture=True`` its merged stdout/stderr is read by a thread (so the process never blocks
    on a full pipe), copied to the log file and offered line by line by :meth:`lines`; otherwise the
    output goes straight to the log file. The log file is appended to: a restart of the same command
    adds a ``starting:`` header and keeps the earlier attempt above it.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        capture: bool = False,
    ) -> None:
        if not argv or not argv[0]:
            raise ClusterError(f"command {name}: empty command line")
        self.name = name
        self.argv = list(argv)
        self.log_file = log_file
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.capture = capture
        self.started_at: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        self._captured: list[str] = []
        self._threads: list[threading.Thread] = []
        self._log_lock = threading.RLock()  # a signal handler may log while we log
        self._ended = threading.Event()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._proc is not None:
            raise ClusterError(f"command {self.name} was already started")
        env = {**os.environ, **(self.env or {})}
        self._append_log(f"starting: {' '.join(self.argv)}")
        log = open(self.log_file, "ab") if self.log_file and not self.capture else None  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.capture else (log or subprocess.DEVNULL),
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.cwd,
                process_group=0,
            )
        except OSError as exc:
            raise ClusterError(
                f"cannot start {self.name} ({self.argv[0]}): {exc.strerror}"
            ) from exc
        finally:
            if log is not None:
                log.close()
        self.started_at = time.monotonic()
        if self.capture:
            self._spawn(self._read_output, "output")
        self._spawn(self._watch, "watch")

    def _spawn(self, target: object, what: str) -> None:
        thread = threading.Thread(target=target, name=f"{self.name}-{what}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _read_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        with self._proc.stdout:
            for raw in self._proc.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                self._captured.append(line)
                self._write_log(line + "\n")
                self._lines.put(line)
        self._lines.put(_EOF)

    def _watch(self) -> None:
        assert self._proc is not None
        returncode = self._proc.wait()
        if self.capture:
            self._threads[0].join(timeout=5)
        self._append_log(f"terminated, result: {describe_exit(returncode)}")
        self._ended.set()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def lines(self, idle_timeout: float | None = None) -> Iterator[str]:
        """Output lines as they come, until the process closes its output (capture mode).

        ``idle_timeout``: give up (raise) when no line came for that long: a hung script must
        not hang the run.
        """
        if not self.capture:
            raise ClusterError(f"command {self.name} does not capture its output")
        while True:
            try:
                item = self._lines.get(timeout=idle_timeout)
            except queue.Empty:
                raise ClusterError(
                    f"command {self.name} printed nothing for {idle_timeout:g}s and did not end; "
                    f"log: {self.log_file}"
                ) from None
            if item is _EOF:
                self._lines.put(_EOF)
                return
            yield str(item)

    def wait(self, timeout: float | None = None) -> int:
        """Exit status, once the process has ended and its trailer is in the log."""
        if self._proc is None:
            raise ClusterError(f"command {self.name} was never started")
        try:
            returncode = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"command {self.name} did not finish within {timeout:g}s") from exc
        self._ended.wait(timeout=10)
        return returncode

    def stop(self, reason: str, *, grace: float = 0.0) -> None:
        """Signal the whole process group (SIGTERM first when ``grace`` > 0, then SIGKILL)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._append_log(f"killing: {reason}")
        if grace > 0 and self._proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=grace)
        # Also when the leader is gone: a child it left in the group must not survive it.
        self._signal_group(signal.SIGKILL)
        deadline = time.monotonic() + 30
        try:
            self._proc.wait(timeout=30)
            # The leader is reaped first; children (e.g. under sudo) may still be dying and
            # holding their ports for a moment. Wait for the whole group.
            while self.leftovers() and time.monotonic() < deadline:
                time.sleep(0.02)
        except subprocess.TimeoutExpired:
            pass
        if self._proc.poll() is None or self.leftovers():
            raise ClusterError(
                f"command {self.name} (pid {self._proc.pid}) should have stopped but didn't"
            )
        self._ended.wait(timeout=10)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def leftovers(self) -> list[int]:
        """Processes of this command's group still alive (should be none after :meth:`stop`)."""
        return process_group_members(self._proc.pid) if self._proc else []

    # -- output --------------------------------------------------------------------------------

    def output(self) -> str:
        """Captured output, else the log file's content."""
        if self.capture:
            return "\n".join(self._captured)
        if self.log_file and self.log_file.exists():
            return self.log_file.read_text(errors="replace")
        return ""

    def tail(self, count: int = 20) -> str:
        return "\n".join(self.output().splitlines()[-count:])

    def _append_log(self, message: str) -> None:
        self._write_log(f"{_now()}: {message}\n")

    def _write_log(self, text: str) -> None:
        if self.log_file is None:
            return
        with self._log_lock, open(self.log_file, "a", encoding="utf-8") as log:
            log.write(text)

    def __repr__(self) -> str:
        return f"Cmd({self.name!r}, pid={self.pid}, running={self.running()})"
