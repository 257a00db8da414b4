"""e2e_dra.hostkit: a file is the old one or the new one, never half of either; a wait probes
until its deadline and says what it saw last. Waits run on a fake clock: no test sleeps or times
itself."""

from __future__ import annotations

import itertools
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e_dra.hostkit import atomic_copy, atomic_write_text, poll, write_if_changed

# --- files -----------------------------------------------------------------------------------


@pytest.fixture
def umask() -> Iterator[int]:
    """A known umask (027) for the test, the old one restored after it."""
    old = os.umask(0o027)
    try:
        yield 0o027
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_write_replaces_the_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    target.write_text("old\n")
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]


def test_a_write_that_fails_midway_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "spec.json"
    target.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "half \udcff")  # a lone surrogate: encoding fails
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]


def test_a_write_whose_rename_fails_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # a directory cannot be replaced by a file
    with pytest.raises(IsADirectoryError):
        atomic_write_text(target, "text")
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]
    assert list(target.iterdir()) == []


def test_a_new_file_gets_the_mode_a_plain_write_would(tmp_path: Path, umask: int) -> None:
    """Not tempfile's 0600: a ledger or config others read stays readable."""
    plain, atomic = tmp_path / "plain", tmp_path / "atomic"
    plain.write_text("x")
    atomic_write_text(atomic, "x")
    assert _mode(atomic) == _mode(plain) == 0o666 & ~umask


def test_mode_is_applied_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "spec.json"
    atomic_write_text(target, "{}", mode=0o644)
    assert _mode(target) == 0o644


def test_a_copy_keeps_content_mode_and_time(tmp_path: Path) -> None:
    source, target = tmp_path / "bridge", tmp_path / "bin" / "bridge"
    source.write_bytes(b"\x7fELF plugin")
    source.chmod(0o755)
    os.utime(source, ns=(1_000_000_000, 2_000_000_000))
    target.parent.mkdir()
    target.write_bytes(b"old")
    atomic_copy(source, target)
    assert target.read_bytes() == b"\x7fELF plugin"
    assert _mode(target) == 0o755
    assert target.stat().st_mtime_ns == 2_000_000_000
    assert [p.name for p in target.parent.iterdir()] == ["bridge"]


def test_a_copy_that_cannot_read_its_source_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "loopback"
    target.write_bytes(b"old")
    with pytest.raises(IsADirectoryError):
        atomic_copy(tmp_path, target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["loopback"]


def test_write_if_changed_writes_only_a_change(tmp_path: Path) -> None:
    target = tmp_path / "net.d" / "10-e2e-dra.conflist"
    assert write_if_changed(target, "a\n")  # its directory is created
    inode = target.stat().st_ino
    assert not write_if_changed(target, "a\n")
    assert target.stat().st_ino == inode  # not rewritten: a daemon sees no change
    assert write_if_changed(target, "b\n")
    assert target.read_text() == "b\n"


# --- waits -----------------------------------------------------------------------------------


class FakeClock:
    """A monotonic clock that moves only when slept on (or when a probe says it took time)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _counting(answers: Callable[[int], object]) -> tuple[Callable[[], object], list[int]]:
    calls: list[int] = []

    def probe() -> object:
        calls.append(len(calls))
        return answers(len(calls) - 1)

    return probe, calls


def test_poll_returns_the_first_answer_that_will_do(clock: FakeClock) -> None:
    counter = itertools.count()
    result = poll(
        lambda: next(counter),
        timeout=10,
        interval=1,
        until=lambda n: n >= 3,
        clock=clock,
        sleep=clock.sleep,
    )
    assert (result.done, result.value, result.error) == (True, 3, None)
    assert clock.sleeps == [1, 1, 1]


def test_poll_times_out_with_the_last_answer_after_a_last_look_at_the_deadline(
    clock: FakeClock,
) -> None:
    probe, calls = _counting(lambda n: f"Pending {n}")
    result = poll(
        probe,
        timeout=2.5,
        interval=1,
        until=lambda v: v == "Running",
        clock=clock,
        sleep=clock.sleep,
    )
    assert not result.done
    assert result.value == "Pending 3"
    assert clock.sleeps == [1, 1, 0.5]  # the last sleep ends at the deadline, not past it
    assert len(calls) == 4


def test_poll_probes_once_even_without_time(clock: FakeClock) -> None:
    result = poll(lambda: False, timeout=0, interval=1, clock=clock, sleep=clock.sleep)
    assert (result.done, result.value) == (False, False)
    assert clock.sleeps == []


def test_a_slow_probe_does_not_push_the_deadline(clock: FakeClock) -> None:
    def slow() -> bool:
        clock.now += 0.75
        return False

    poll(slow, timeout=3, interval=1, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == [1, 0.5]  # probes start at 0, 1.75 and 3: the deadline
    assert clock.now == 100 + 3 + 0.75  # the deadline and one probe


def test_retried_errors_are_no_answer_and_the_last_error_is_kept(clock: FakeClock) -> None:
    def answers(n: int) -> object:
        if n == 0:
            return 7
        raise ConnectionError(f"refused {n}")

    probe, _ = _counting(answers)
    result = poll(
        probe,
        timeout=2,
        interval=1,
        until=lambda n: n > 10,
        retry_on=(ConnectionError,),
        clock=clock,
        sleep=clock.sleep,
    )
    assert not result.done
    assert result.value == 7  # the last answer, from before the errors
    assert isinstance(result.error, ConnectionError) and str(result.error) == "refused 2"


def test_an_answer_after_errors_clears_the_error(clock: FakeClock) -> None:
    def answers(n: int) -> object:
        if n < 2:
            raise OSError("not yet")
        return n

    probe, _ = _counting(answers)
    result = poll(probe, timeout=5, interval=1, retry_on=(OSError,), clock=clock, sleep=clock.sleep)
    assert (result.done, result.value, result.error) == (True, 2, None)


def test_an_error_not_retried_ends_the_wait_at_once(clock: FakeClock) -> None:
    probe, calls = _counting(lambda n: {}["status"])
    with pytest.raises(KeyError):
        poll(probe, timeout=5, interval=1, retry_on=(OSError,), clock=clock, sleep=clock.sleep)
    assert len(calls) == 1 and clock.sleeps == []


def test_before_each_runs_before_every_probe_and_is_never_retried(clock: FakeClock) -> None:
    order: list[str] = []

    def check() -> None:
        order.append("check")
        if order.count("check") == 3:
            raise RuntimeError("component crashed")

    def probe() -> bool:
        order.append("probe")
        return False

    with pytest.raises(RuntimeError, match="component crashed"):
        poll(
            probe,
            timeout=10,
            interval=1,
            retry_on=(Exception,),
            before_each=check,
            clock=clock,
            sleep=clock.sleep,
        )
    assert order == ["check", "probe", "check", "probe", "check"]


INTERRUPTED = """
import os, signal, sys, time
from e2e_dra.hostkit import handling_interrupts, on_interrupt

def note(what):
    def stop(why):
        with open(sys.argv[1], "a") as out:
            out.write(f"{what}:{why}\\n")
    return stop

def broken(why):
    raise RuntimeError("this stop fails")

on_interrupt(note("first"))
cancelled = on_interrupt(note("cancelled"))
cancelled()
on_interrupt(broken)
on_interrupt(note("last"))
terminated = None if sys.argv[2] == "die" else SystemExit
try:
    with handling_interrupts(terminated=terminated):
        os.kill(os.getpid(), getattr(signal, sys.argv[3]))
        time.sleep(30)
except KeyboardInterrupt as exc:
    print(f"KeyboardInterrupt {exc}")
"""


@pytest.mark.parametrize(
    ("how", "sig", "returncode", "said"),
    [
        ("die", "SIGTERM", -15, ""),  # as without any handler
        ("raise", "SIGTERM", "SIGTERM", ""),  # the edge's exception (here: SystemExit)
        ("die", "SIGINT", 0, "KeyboardInterrupt SIGINT"),  # Ctrl-C raises where the program is
    ],
)
def test_an_interrupt_runs_every_registered_stop_then_ends_as_the_edge_chose(
    tmp_path: Path, how: str, sig: str, returncode: object, said: str
) -> None:
    notes = tmp_path / "notes"
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(notes), how, sig],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    # newest first; a stop that fails is said and does not keep the older ones from running
    assert notes.read_text().splitlines() == [f"last:{sig}", f"first:{sig}"]
    assert "stopping after " + sig + " failed: this stop fails" in done.stderr
    if returncode == "SIGTERM":  # SystemExit("SIGTERM"): its message, status 1
        assert done.returncode == 1 and done.stderr.strip().endswith("SIGTERM")
    else:
        assert done.returncode == returncode
    assert done.stdout.strip() == said


HOLDS_A_LOCK = """
import os, signal, sys, threading, time
from e2e_dra.hostkit import handling_interrupts, on_interrupt

terminal = threading.Lock()  # what a log handler holds while it writes a line

def stop(why):
    with terminal:  # the stop logs too
        with open(sys.argv[1], "a") as out:
            out.write(f"stopped:{why}\\n")

on_interrupt(stop)
with handling_interrupts(terminated=SystemExit):
    with terminal:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
"""


def test_a_stop_never_waits_for_a_lock_the_interrupted_main_thread_holds(tmp_path: Path) -> None:
    """The signal arrives while the main thread writes a line (holding the writer's lock) and
    the stop logs a line too: the stop must not run inside the handler, or it waits for ever."""
    notes = tmp_path / "notes"
    done = subprocess.run(
        [sys.executable, "-c", HOLDS_A_LOCK, str(notes)],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert done.returncode == 1, done.stderr
    assert notes.read_text() == "stopped:SIGTERM\n"  # ran, once the main thread let go
