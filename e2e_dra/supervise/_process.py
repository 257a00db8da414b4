"""A process we start and supervise: its own process group, its output in a log file, a trailer
saying why it ended; and running a command to completion (builds).

The log file is appended to and reads like upstream's: a restart of the same command adds a
``starting:`` header and keeps the earlier attempt above it, ``killing: <reason>`` says who stopped
it, and ``terminated, result: exit status 1`` says how it ended.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from e2e_dra.supervise._identity import ProcessId, group_members, terminate

_EOF = object()
_GATE = ("/bin/sh", "-c", 'IFS= read -r go && [ "$go" = go ] && exec "$@" </dev/null', "gate")
"""Holds a process until its parent writes ``go`` to its stdin, then becomes the command (same pid
and start time, so what the parent noted stays true); EOF instead: exit 1, the command never ran."""
_KILL_PATIENCE = 30.0
"""Seconds a SIGKILLed group may take to be gone (children under sudo die after their parent)."""


class ProcessError(Exception):
    """A process could not be started, did not end in time or survived SIGKILL; the message (one
    line) names it and its log."""


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


class Process:
    """A process started from ``argv`` as the leader of its own process group.

    ``new_session``: lead a session of its own too (no controlling terminal: it outlives ours and
    a Ctrl-C there does not reach it), as a daemon or a build does; else only its own group (a
    cluster component: Ctrl-C reaches only the foreground group, which is not it).
    ``env`` is added to our environment. With ``capture=True`` its merged stdout/stderr is read by a
    thread (so the process never blocks on a full pipe), copied to the log file and offered line
    by line by :meth:`lines`; otherwise the output goes straight to the log file.
    """

    error: ClassVar[type[Exception]] = ProcessError
    """The exception type this class raises: a user's subclass names its own."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        capture: bool = False,
        new_session: bool = False,
    ) -> None:
        if not argv or not argv[0]:
            raise self.error(f"command {name}: empty command line")
        self.name = name
        self.argv = list(argv)
        self.log_file = log_file
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.capture = capture
        self.new_session = new_session
        self.started_at: float | None = None
        self.identity: ProcessId | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        self._captured: list[str] = []
        self._threads: list[threading.Thread] = []
        self._log_lock = threading.RLock()  # a signal handler may log while we log
        self._ended = threading.Event()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, before_run: Callable[[ProcessId], None] | None = None) -> None:
        """Start the process. With ``before_run``, the process is held at a gate until
        ``before_run(identity)`` returned: a parent that must note what it started (a ledger for
        whoever cleans up after a crash) notes it before the command runs. If the parent dies
        first, or ``before_run`` raises, the gate closes and the process ends without running
        the command, so there is never a process that nobody knows of."""
        if self._proc is not None:
            raise self.error(f"command {self.name} was already started")
        env = {**os.environ, **(self.env or {})}
        self._append_log(f"starting: {' '.join(self.argv)}")
        log = open(self.log_file, "ab") if self.log_file and not self.capture else None  # noqa: SIM115
        if before_run is not None and shutil.which(self.argv[0], path=env.get("PATH")) is None:
            # behind the gate's shell a missing command would only be an exit status 127
            missing = os.strerror(errno.ENOENT)
            raise self.error(f"cannot start {self.name} ({self.argv[0]}): {missing}")
        gate, opener = os.pipe() if before_run is not None else (None, None)
        argv = [*_GATE, *self.argv] if before_run is not None else self.argv
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=gate if gate is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.capture else (log or subprocess.DEVNULL),
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.cwd,
                start_new_session=self.new_session,
                process_group=None if self.new_session else 0,
            )
        except OSError as exc:
            if opener is not None:
                os.close(opener)
            raise self.error(f"cannot start {self.name} ({self.argv[0]}): {exc.strerror}") from exc
        finally:
            if log is not None:
                log.close()
            if gate is not None:
                os.close(gate)
        self.started_at = time.monotonic()
        # Not reaped before our watcher waits for it, so its start time can always be read.
        self.identity = ProcessId.of(self._proc.pid) or ProcessId(self._proc.pid, -1)
        if self.capture:
            self._spawn(self._read_output, "output")
        self._spawn(self._watch, "watch")
        if opener is not None and before_run is not None:  # the one comes with the other
            try:
                before_run(self.identity)
                os.write(opener, b"go\n")
            finally:
                os.close(opener)  # without "go", the gate reads EOF and the process exits

    def _spawn(self, target: Callable[[], None], what: str) -> None:
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
            raise self.error(f"command {self.name} does not capture its output")
        while True:
            try:
                item = self._lines.get(timeout=idle_timeout)
            except queue.Empty:
                raise self.error(
                    f"command {self.name} printed nothing for {idle_timeout:g}s and did not end; "
                    f"log: {self.log_file}"
                ) from None
            if item is _EOF:
                self._lines.put(_EOF)
                return
            yield str(item)

    def follow(self, interval: float) -> Iterator[str | None]:
        """Output lines as they come (capture mode), and ``None`` each time another ``interval``
        seconds have passed, whether or not lines came: a caller's heartbeat. Ends when the
        process closes its output."""
        if not self.capture:
            raise self.error(f"command {self.name} does not capture its output")
        if interval <= 0:
            raise ValueError(f"interval must be positive, not {interval!r}")
        next_tick = time.monotonic() + interval
        while True:
            try:
                item = self._lines.get(timeout=max(0.0, next_tick - time.monotonic()))
            except queue.Empty:
                item = None
            if item is _EOF:
                self._lines.put(_EOF)
                return
            if item is not None:
                yield str(item)
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + interval
                yield None

    def wait(self, timeout: float | None = None) -> int:
        """Exit status, once the process has ended and its trailer is in the log."""
        if self._proc is None:
            raise self.error(f"command {self.name} was never started")
        try:
            returncode = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise self.error(f"command {self.name} did not finish within {timeout:g}s") from exc
        self._ended.wait(timeout=10)
        return returncode

    def stop(self, reason: str, *, grace: float = 0.0) -> None:
        """Signal the whole process group (SIGTERM first when ``grace`` > 0, then SIGKILL) and
        wait until every member is gone; raise when one survives."""
        if self._proc is None or self.identity is None:
            return
        if self._proc.poll() is None:
            self._append_log(f"killing: {reason}")
        else:
            grace = 0.0  # nothing left to ask politely; a child left in the group is killed
        stopped = terminate(self.identity, grace=grace, patience=_KILL_PATIENCE)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=_KILL_PATIENCE if stopped else 1)
        if self._proc.poll() is None or self.leftovers():
            raise self.error(
                f"command {self.name} (pid {self._proc.pid}) should have stopped but didn't"
            )
        self._ended.wait(timeout=10)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the whole process group: SIGSTOP freezes a command (its sockets
        stay open, a call to it is never answered) and SIGCONT thaws it."""
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signum)

    def leftovers(self) -> list[int]:
        """Processes of this command's group still alive (should be none after :meth:`stop`)."""
        return group_members(self._proc.pid) if self._proc else []

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
        return f"{type(self).__name__}({self.name!r}, pid={self.pid}, running={self.running()})"


@dataclass(frozen=True)
class Finished:
    """A command run to completion: its exit status and merged output."""

    returncode: int
    output: str

    def tail(self, count: int = 15) -> str:
        return "\n".join(self.output.splitlines()[-count:])


def run(
    name: str,
    argv: Sequence[str],
    *,
    log_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    on_line: Callable[[str], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick: float = 30.0,
) -> Finished:
    """Run ``argv`` to completion in a session of its own, its output captured (and appended to
    ``log_file``). A timeout, an interrupt or any other exception while it runs (one raised by a
    callback too) kills its whole group first (an interrupted build must not leave compilers
    running), then propagates; a timeout raises :class:`ProcessError`.

    ``on_line`` is called with each output line as it comes, and ``on_tick`` every ``tick``
    seconds while the command runs (a heartbeat for a long build), both in the calling thread.
    """
    process = Process(
        name, argv, log_file=log_file, env=env, cwd=cwd, capture=True, new_session=True
    )
    deadline = None if timeout is None else time.monotonic() + timeout
    process.start()
    try:
        if on_line is not None or on_tick is not None:
            for line in process.follow(tick):
                if line is None:
                    if on_tick is not None:
                        on_tick()
                elif on_line is not None:
                    on_line(line)
                if deadline is not None and time.monotonic() > deadline:
                    raise ProcessError(f"command {name} did not finish within {timeout:g}s")
        if deadline is None:
            returncode = process.wait()
        else:
            try:
                returncode = process.wait(max(0.0, deadline - time.monotonic()))
            except ProcessError:
                raise ProcessError(f"command {name} did not finish within {timeout:g}s") from None
    except BaseException as exc:
        why = (
            "timed out" if isinstance(exc, ProcessError) else f"interrupted ({type(exc).__name__})"
        )
        with contextlib.suppress(ProcessError):
            process.stop(why)
        raise
    return Finished(returncode, process.output())
