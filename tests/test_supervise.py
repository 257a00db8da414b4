"""The process supervisor with tiny real processes: groups and sessions, identity by pid and start
time, stopping whole groups, running to completion, timeouts and interrupts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e_dra.hostkit import poll
from e2e_dra.supervise import (
    Process,
    ProcessError,
    ProcessId,
    describe_exit,
    group_members,
    run,
    start_ticks,
    terminate,
)


def eventually(check: Callable[[], bool], seconds: float = 10) -> bool:
    return poll(check, timeout=seconds, interval=0.02).done


def pid_from(path: Path) -> int:
    assert eventually(lambda: path.exists() and path.read_text().strip() != "")
    return int(path.read_text())


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts by hand; killed and reaped whatever the test did."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


# --- identity -----------------------------------------------------------------------------------


def test_a_process_is_identified_by_pid_and_start_time_from_the_moment_it_exists(
    children: list[subprocess.Popen[bytes]],
) -> None:
    """The start time is there right after the fork, before and after exec (the command line is
    not: it reads empty for a moment right after exec)."""
    for _ in range(20):
        proc = subprocess.Popen(["sleep", "300"])
        children.append(proc)
        who = ProcessId.of(proc.pid)
        assert who is not None and who.alive()
        assert ProcessId.of(proc.pid) == who
        assert not ProcessId(proc.pid, who.start - 1).alive()


def test_another_start_time_an_ended_process_and_a_zombie_are_not_alive(
    children: list[subprocess.Popen[bytes]],
) -> None:
    me = ProcessId.of(os.getpid())
    assert me is not None and me.alive() and me.name()
    assert me.exe() == Path(sys.executable).resolve()
    assert not ProcessId(me.pid, me.start + 1).alive()  # the pid, reused by another process
    assert ProcessId.of(2**22 + 1) is None and start_ticks(2**22 + 1) is None

    proc = subprocess.Popen(["true"])
    children.append(proc)
    who = ProcessId.of(proc.pid)
    assert who is not None
    assert eventually(lambda: not who.alive())  # a zombie until reaped: ended all the same
    assert who.name() is None and who.exe() is None
    proc.wait()
    assert not who.alive() and ProcessId.of(proc.pid) is None


def test_start_ticks_are_the_kernels() -> None:
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    assert start_ticks(os.getpid()) == int(stat[stat.rfind(")") + 2 :].split()[19])


# --- groups ---------------------------------------------------------------------------------------


def test_a_process_leads_its_own_group_and_on_request_its_own_session(tmp_path: Path) -> None:
    grouped = Process("grouped", ["sleep", "300"], log_file=tmp_path / "g.log")
    detached = Process("detached", ["sleep", "300"], log_file=tmp_path / "d.log", new_session=True)
    for process in (grouped, detached):
        process.start()
    try:
        assert grouped.pid is not None and detached.pid is not None
        assert os.getpgid(grouped.pid) == grouped.pid
        assert os.getsid(grouped.pid) == os.getsid(0) != grouped.pid
        assert os.getpgid(detached.pid) == os.getsid(detached.pid) == detached.pid
        assert group_members(grouped.pid) == [grouped.pid]
    finally:
        for process in (grouped, detached):
            process.stop("test is done")
    assert grouped.leftovers() == [] and detached.leftovers() == []


def test_group_members_leave_out_finished_zombies(children: list[subprocess.Popen[bytes]]) -> None:
    leader = subprocess.Popen(["sleep", "300"], process_group=0)
    children.append(leader)
    member = subprocess.Popen(["true"], process_group=leader.pid)
    children.append(member)
    assert leader.pid in group_members(leader.pid)
    assert eventually(lambda: group_members(leader.pid) == [leader.pid])  # `true`: a zombie
    assert member.poll() == 0


# --- stopping -----------------------------------------------------------------------------------


def test_stop_kills_a_child_the_leader_left_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    process = Process("wrapper", ["sh", "-c", f"sleep 300 & echo $! > {pid_file}; exit 0"])
    process.start()
    assert process.wait(timeout=10) == 0
    child = pid_from(pid_file)
    assert process.leftovers() == [child]
    process.stop("its leader is gone")
    assert process.leftovers() == [] and not psutil_alive(child)


def psutil_alive(pid: int) -> bool:
    who = ProcessId.of(pid)
    return who is not None and who.alive()


def test_stop_after_grace_kills_a_process_that_ignores_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "stubborn.log"
    ready = tmp_path / "ready"
    script = f"trap '' TERM; touch {ready}; while true; do sleep 0.05; done"
    process = Process("stubborn", ["sh", "-c", script], log_file=log)
    process.start()
    assert eventually(ready.exists)
    started = time.monotonic()
    process.stop("test is done", grace=0.5)
    assert time.monotonic() - started >= 0.5
    assert process.leftovers() == [] and not process.running()
    assert log.read_text().rstrip().endswith("terminated, result: signal: killed")


def _state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_a_frozen_group_answers_nothing_until_thawed_and_a_frozen_one_still_stops(
    tmp_path: Path,
) -> None:
    """SIGSTOP reaches every member (a child of the leader too), SIGCONT wakes them; a group
    left frozen is still stopped for good."""
    pid_file, ticks = tmp_path / "child.pid", tmp_path / "ticks"
    script = f"(while true; do echo >> {ticks}; sleep 0.05; done) & echo $! > {pid_file}; wait"
    process = Process("ticker", ["sh", "-c", script], new_session=True)
    process.start()
    try:
        child = pid_from(pid_file)
        assert eventually(lambda: ticks.exists() and ticks.stat().st_size > 0)

        process.signal_group(signal.SIGSTOP)
        # The child may have been vforking its `sleep` as the signal came: it then waits for its
        # stopped child to exec, uninterruptibly (D), and runs no more than a stopped one (T).
        frozen = eventually(lambda: _state(child) in ("T", "D") and _state(process.pid or 0) == "T")
        assert frozen, f"states: leader {_state(process.pid or 0)}, child {_state(child)}"
        size = ticks.stat().st_size
        time.sleep(0.3)
        assert ticks.stat().st_size == size  # nothing runs while frozen

        process.signal_group(signal.SIGCONT)
        assert eventually(lambda: ticks.stat().st_size > size)

        process.signal_group(signal.SIGSTOP)
        process.stop("frozen at the end", grace=0.2)
        assert process.leftovers() == [] and not psutil_alive(child)
    finally:  # a failed look must not leave the group frozen behind the run
        process.stop("the test ends", grace=0.2)


def test_terminate_stops_a_process_that_is_not_our_child(tmp_path: Path) -> None:
    """A daemon of an earlier run: found by pid and start time, stopped with its group."""
    pid_file = tmp_path / "daemon.pid"
    subprocess.run(
        [
            "sh",
            "-c",
            f"setsid sh -c 'sleep 300 & sleep 300 & wait' > /dev/null 2>&1 & echo $! > {pid_file}",
        ],
        check=True,
    )
    daemon = ProcessId.of(pid_from(pid_file))
    assert daemon is not None
    assert eventually(lambda: len(group_members(daemon.pid)) == 3)
    assert terminate(daemon, grace=5)
    assert not daemon.alive() and group_members(daemon.pid) == []


def test_terminate_signals_a_process_outside_a_group_of_its_own_only_while_it_is_itself(
    children: list[subprocess.Popen[bytes]],
) -> None:
    proc = subprocess.Popen(["sleep", "300"])  # in our own process group
    children.append(proc)
    who = ProcessId.of(proc.pid)
    assert who is not None
    assert terminate(ProcessId(who.pid, who.start + 1), grace=1)  # a reused pid: not touched
    assert proc.poll() is None
    assert terminate(who, grace=5)
    assert proc.wait(timeout=5) == -signal.SIGTERM


# --- waiting and running to completion ----------------------------------------------------------


def test_wait_with_a_timeout_raises_and_leaves_the_process_running(tmp_path: Path) -> None:
    process = Process("slow", ["sleep", "300"], log_file=tmp_path / "slow.log")
    process.start()
    try:
        with pytest.raises(ProcessError, match=r"command slow did not finish within 0\.2s"):
            process.wait(timeout=0.2)
        assert process.running()
    finally:
        process.stop("test is done")


def test_run_captures_output_and_the_exit_status(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    done = run("build", ["sh", "-c", "echo compiling; echo oops >&2; exit 2"], log_file=log)
    assert done.returncode == 2
    assert done.output == "compiling\noops"
    assert done.tail(1) == "oops"
    text = log.read_text()
    assert "starting: sh -c" in text and "compiling\noops\n" in text
    assert text.rstrip().endswith("terminated, result: exit status 2")


def test_run_hands_over_each_line_as_it_comes_and_ticks_while_the_command_is_quiet(
    tmp_path: Path,
) -> None:
    """A long build's heartbeat: ticks come while nothing is printed, lines as they are printed,
    and both before the command has ended."""
    events: list[str] = []
    script = "echo one; sleep 0.6; echo two; sleep 0.6"
    done = run(
        "build",
        ["sh", "-c", script],
        log_file=tmp_path / "b.log",
        on_line=lambda line: events.append(line),
        on_tick=lambda: events.append("tick"),
        tick=0.1,
    )
    assert done.returncode == 0 and done.output == "one\ntwo"
    assert events[0] == "one"
    assert events.index("two") >= 3  # ticks came during the first sleep
    assert events.count("tick") - events.index("two") >= 2  # and after the last line, too
    assert "one\ntwo\n" in (tmp_path / "b.log").read_text()


def test_a_callback_that_raises_kills_the_whole_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; echo started; wait"

    def refuse(line: str) -> None:
        raise ValueError(f"refused {line}")

    with pytest.raises(ValueError, match="refused started"):
        run("build", ["sh", "-c", script], log_file=tmp_path / "b.log", on_line=refuse)
    for pid in map(int, pids.read_text().split()):
        assert not psutil_alive(pid)
    assert "killing: interrupted (ValueError)" in (tmp_path / "b.log").read_text()


def test_run_with_a_heartbeat_still_times_out(tmp_path: Path) -> None:
    started = time.monotonic()
    ticks: list[float] = []
    with pytest.raises(ProcessError, match=r"did not finish within 0\.5s"):
        run("hung", ["sleep", "300"], timeout=0.5, on_tick=lambda: ticks.append(1), tick=0.1)
    assert time.monotonic() - started < 15
    assert len(ticks) >= 3


def test_run_kills_the_whole_group_on_timeout(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait"
    started = time.monotonic()
    with pytest.raises(ProcessError, match=r"did not finish within 0\.5s"):
        run("hung", ["sh", "-c", script], timeout=0.5)
    assert time.monotonic() - started < 15
    for pid in map(int, pids.read_text().split()):
        assert not psutil_alive(pid)


def test_run_kills_the_whole_group_when_interrupted(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait"

    class Interrupted(Exception):
        pass

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(Interrupted):
            run("build", ["sh", "-c", script], log_file=tmp_path / "b.log")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    for pid in map(int, pids.read_text().split()):
        assert not psutil_alive(pid)
    assert "killing: interrupted (Interrupted)" in (tmp_path / "b.log").read_text()


def test_a_missing_program_is_a_process_error(tmp_path: Path) -> None:
    with pytest.raises(ProcessError, match=r"cannot start ghost \(.*nothing-here\)"):
        run("ghost", [str(tmp_path / "nothing-here")])
    with pytest.raises(ProcessError, match="empty command line"):
        Process("blank", [""])


@pytest.mark.parametrize(
    ("returncode", "wording"),
    [
        (None, "still running"),
        (0, "exit status 0"),
        (3, "exit status 3"),
        (-9, "signal: killed"),
        (-15, "signal: SIGTERM"),
        (-99, "signal: 99"),
    ],
)
def test_exits_are_described_in_gos_words(returncode: int | None, wording: str) -> None:
    assert describe_exit(returncode) == wording


# --- a start held until the parent noted it -------------------------------------------------


def test_a_held_process_runs_its_command_only_after_the_parent_noted_it(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    noted: list[tuple[ProcessId, bool]] = []
    process = Process(
        "held", ["sh", "-c", f"echo $$ > {ran}; sleep 300"], log_file=tmp_path / "log"
    )
    process.start(before_run=lambda who: noted.append((who, ran.exists())))
    try:
        # the command had not run when the parent noted it; it runs as the noted process itself
        ((who, had_run),) = noted
        assert not had_run
        assert who == process.identity
        assert pid_from(ran) == who.pid and who.alive()
    finally:
        process.stop("test over")


def test_a_held_process_whose_noting_failed_never_runs_its_command(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    process = Process("held", ["sh", "-c", f"touch {ran}"], log_file=tmp_path / "log")

    def fail(who: ProcessId) -> None:
        raise OSError("ledger not writable")

    with pytest.raises(OSError, match="ledger not writable"):
        process.start(before_run=fail)
    assert process.wait(timeout=10) == 1
    assert not ran.exists()


def test_a_parent_killed_before_it_noted_its_child_leaves_nothing_running(tmp_path: Path) -> None:
    """The window a SIGKILL of ours once fell into: a component started, not yet in the host
    lock's ledger, so no successor knew to stop it. Held, the child never runs its command."""
    ran, child = tmp_path / "ran", tmp_path / "child"
    parent = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys; from pathlib import Path\n"
            "from e2e_dra.supervise import Process\n"
            f"p = Process('held', ['sh', '-c', 'touch {ran}; sleep 300'])\n"
            f"def die(who):\n"
            f"    Path('{child}').write_text(str(who.pid))\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            "p.start(before_run=die)\n",
        ],
        check=False,
    )
    assert parent.returncode == -signal.SIGKILL
    pid = pid_from(child)
    assert eventually(lambda: ProcessId.of(pid) is None or not ProcessId.of(pid).alive())  # type: ignore[union-attr]
    assert not ran.exists()


def test_a_held_start_of_a_missing_command_fails_at_once(tmp_path: Path) -> None:
    noted: list[ProcessId] = []
    process = Process("ghost", [str(tmp_path / "nothing-here")], log_file=tmp_path / "log")
    with pytest.raises(ProcessError, match=r"cannot start ghost \(.*nothing-here\)"):
        process.start(before_run=noted.append)
    assert noted == []
