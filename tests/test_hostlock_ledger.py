"""The host lock's ledger: what a dead holder left running is stopped by the next holder, and
nothing else is (a pid that was reused, a holder that is still alive)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from e2e_dra.hostkit import poll
from e2e_dra.localupcluster._hostlock import HostLock, _alive, start_time

HOLDER = """
import subprocess, sys, time
from pathlib import Path
import pytest

from e2e_dra.localupcluster._hostlock import HostLock
lock = HostLock(Path(sys.argv[1]))
lock.acquire()
child = subprocess.Popen(["sleep", "300"], process_group=0)
lock.record("sleepy-component", child.pid)
print(child.pid, flush=True)
time.sleep(300)
"""


def holder_that_dies(lock: Path) -> int:
    """A process that takes the lock, starts a component, records it, and is SIGKILLed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert start_time(child) is not None  # the component outlived its holder
    return child


def gone(pid: int, timeout: float = 15.0) -> bool:
    def ended() -> bool:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    return poll(ended, timeout=timeout, interval=0.05).done


def test_the_engine_talks_through_the_logger_it_is_given(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine imports nothing of e2e-dra: its lines are records on its user's logger."""
    lock = tmp_path / "host.lock"
    child = holder_that_dies(lock)
    successor = HostLock(lock, log=logging.getLogger("engine-test"))
    with caplog.at_level(logging.INFO, logger="engine-test"):
        successor.acquire()
    try:
        assert gone(child)
        said = [r.getMessage() for r in caplog.records if r.name == "engine-test"]
        assert any(f"left sleepy-component (pid {child}) running" in line for line in said)
        assert "sleepy-component" not in capsys.readouterr().err
    finally:
        successor.release()


def test_the_next_holder_stops_what_a_dead_holder_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lock = tmp_path / "host.lock"
    child = holder_that_dies(lock)
    successor = HostLock(lock)
    with caplog.at_level(logging.INFO, logger="e2e_dra.localupcluster"):
        successor.acquire()  # without a logger of the user's: the engine's own
    try:
        assert gone(child)
        assert f"left sleepy-component (pid {child}) running; stopping them" in caplog.text
        ledger = json.loads(lock.with_name("host.lock.json").read_text())
        assert ledger["pid"] == os.getpid() and ledger["processes"] == []
        successor.record("mine", os.getpid())
        assert [e["name"] for e in json.loads(lock.with_name("host.lock.json").read_text())[
            "processes"]] == ["mine"]  # fmt: skip
    finally:
        successor.release()


def test_a_reused_pid_is_not_touched(tmp_path: Path) -> None:
    lock = tmp_path / "host.lock"
    bystander = subprocess.Popen(["sleep", "300"], process_group=0)
    try:
        entry = {"name": "kubelet", "pid": bystander.pid, "start": "1"}  # not its start time
        ledger = {"processes": [{**entry, "owner": 999_999_999, "owner_start": "1"}]}  # dead owner
        lock.with_name("host.lock.json").write_text(json.dumps(ledger))
        successor = HostLock(lock)
        successor.acquire()
        successor.release()
        assert bystander.poll() is None  # still running: its start time is not the recorded one
    finally:
        bystander.kill()
        bystander.wait()


def test_the_records_of_a_live_owner_are_kept_and_its_processes_spared(tmp_path: Path) -> None:
    lock = tmp_path / "host.lock"
    component = subprocess.Popen(["sleep", "300"], process_group=0)
    owner = subprocess.Popen(["sleep", "300"])  # alive, but not holding the lock
    try:
        entry = {"name": "etcd", "pid": component.pid, "start": start_time(component.pid)}
        entry |= {"owner": owner.pid, "owner_start": start_time(owner.pid)}
        lock.with_name("host.lock.json").write_text(json.dumps({"processes": [entry]}))
        successor = HostLock(lock)
        successor.acquire()
        successor.release()
        assert component.poll() is None
        kept = json.loads(lock.with_name("host.lock.json").read_text())["processes"]
        assert kept == [entry]
        owner.kill()
        owner.wait()
        successor.acquire()  # now its owner is dead: stopped
        successor.release()
        assert gone(component.pid)
    finally:
        for proc in (component, owner):
            proc.kill()
            proc.wait()


def test_start_times_are_the_kernels_clock_ticks_as_older_versions_wrote_them() -> None:
    """Runs of older and newer versions share the host's ledger: both must read its start times."""
    me = os.getpid()
    stat = Path(f"/proc/{me}/stat").read_text()
    assert start_time(me) == stat[stat.rfind(")") + 2 :].split()[19]
    assert _alive(me, start_time(me)) and not _alive(me, "1") and not _alive(me, None)


def test_the_next_holder_removes_the_temporary_files_of_dead_owners_only(tmp_path: Path) -> None:
    """A run killed before its cluster stopped leaves that cluster's temporary files (etcd's
    data, a few hundred MB) in the lock's scratch directory: whoever takes the lock next removes
    them, unless their owner still lives."""
    path = tmp_path / "host.lock"
    mine = HostLock(path).new_scratch()  # owned by this process, which lives
    (mine / "member").mkdir()
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_owner = f"{ended.stdout.strip()}-{start_time(os.getpid())}"  # that pid has ended
    dead = path.with_name("host.lock.d") / f"cluster-{dead_owner}-abcdef"
    (dead / "member").mkdir(parents=True)

    lock = HostLock(path)
    lock.acquire()
    try:
        assert not dead.exists()
        assert (mine / "member").is_dir()
        assert mine.parent == lock.scratch
    finally:
        lock.release()


def test_two_clusters_of_one_process_share_the_lock_and_keep_their_own_records(
    tmp_path: Path,
) -> None:
    """The next cluster's control plane starts while the last cluster still runs: the flock
    stays until both are done, and the first to stop leaves the other's records for a
    successor that would have to clean up after a crash."""
    path = tmp_path / "host.lock"
    first, second = HostLock(path), HostLock(path)
    first.acquire()
    second.acquire()  # does not wait for the first: the same reservation
    first.record("first-component", os.getpid())
    second.record("second-component", os.getppid())

    first.release()
    names = [e["name"] for e in json.loads(first.ledger.read_text())["processes"]]
    assert names == ["second-component"]
    fd = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # still held for the second
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        second.release()
        assert json.loads(first.ledger.read_text())["processes"] == []
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once both are done
    finally:
        os.close(fd)


LEADER = """
import subprocess, sys
member = subprocess.Popen(["sleep", "300"])  # stays in the leader's group when the leader ends
print(member.pid, flush=True)
"""


def test_what_a_dead_recorded_process_left_in_its_group_is_stopped(tmp_path: Path) -> None:
    """A recorded process (upstream's test binary, say) that ends before the components it
    started in its group: they hold the ports all the same, and are stopped by the group."""
    lock = tmp_path / "host.lock"
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, process_group=0
    )
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    started = start_time(leader.pid)
    leader.wait()
    try:
        assert not _alive(leader.pid, started) and start_time(member) is not None
        entry = {"name": "e2e_dra.test", "pid": leader.pid, "start": started}
        entry |= {"owner": 999_999_999, "owner_start": "1"}  # a dead owner
        lock.with_name("host.lock.json").write_text(json.dumps({"processes": [entry]}))
        successor = HostLock(lock)
        successor.acquire()
        successor.release()
        assert gone(member)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)
