"""The process wrapper: process groups, log trailers, no orphans."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from e2e_dra.hostkit import poll
from e2e_dra.localupcluster import ClusterError, Cmd
from e2e_dra.supervise import group_members


def test_command_runs_in_its_own_process_group_and_logs_why_it_ended(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    cmd = Cmd("x", ["sh", "-c", "echo hello; exit 3"], log_file=log)
    cmd.start()
    assert cmd.wait(timeout=10) == 3
    text = log.read_text()
    assert "starting: sh -c echo hello; exit 3" in text
    assert "\nhello\n" in text
    assert text.rstrip().endswith("terminated, result: exit status 3")


def test_stop_kills_the_whole_group_including_grandchildren(tmp_path: Path) -> None:
    log = tmp_path / "sleepy.log"
    # A wrapper (like sudo) whose child would keep a port open if only the wrapper died.
    cmd = Cmd("sleepy", ["sh", "-c", "sleep 300 & sleep 300 & wait"], log_file=log)
    cmd.start()
    assert cmd.pid is not None and os.getpgid(cmd.pid) == cmd.pid != os.getpgid(0)
    poll(lambda: len(group_members(cmd.pid)), timeout=5, interval=0.05, until=lambda n: n >= 3)
    assert len(group_members(cmd.pid)) == 3
    cmd.stop("test is done")
    assert cmd.leftovers() == []
    assert not cmd.running()
    lines = log.read_text().splitlines()
    assert lines[-2].endswith("killing: test is done")
    assert lines[-1].endswith("terminated, result: signal: killed")


def test_stop_with_grace_sends_sigterm_first(tmp_path: Path) -> None:
    log = tmp_path / "trap.log"
    script = "trap 'echo got-term; exit 0' TERM; while true; do sleep 0.05; done"
    cmd = Cmd("trap", ["bash", "-c", script], log_file=log)
    cmd.start()
    time.sleep(0.3)  # let bash install its trap
    cmd.stop("clean stop", grace=5)
    text = log.read_text()
    assert "got-term" in text
    assert text.rstrip().endswith("terminated, result: exit status 0")


def test_capture_offers_lines_while_running_and_copies_them_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "talk.log"
    cmd = Cmd(
        "talk", ["sh", "-c", "echo one; echo two >&2; echo three"], log_file=log, capture=True
    )
    cmd.start()
    assert list(cmd.lines()) == ["one", "two", "three"]
    assert cmd.wait(timeout=10) == 0
    assert cmd.output() == "one\ntwo\nthree"
    assert "one\ntwo\nthree\n" in log.read_text()
    assert cmd.tail(1) == "three"


def test_environment_is_added_to_ours(tmp_path: Path) -> None:
    cmd = Cmd("env", ["sh", "-c", "echo $ADDED-$HOME"], env={"ADDED": "yes"}, capture=True)
    cmd.start()
    cmd.wait(timeout=10)
    assert cmd.output() == f"yes-{os.environ['HOME']}"


def test_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    cmd = Cmd("ghost", [str(tmp_path / "no-such-binary")], log_file=tmp_path / "g.log")
    with pytest.raises(ClusterError, match=r"cannot start ghost \(.*no-such-binary\)"):
        cmd.start()
