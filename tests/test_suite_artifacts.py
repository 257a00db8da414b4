"""A suite's folder keeps each cluster state's node logs; a rerun sets the last run aside."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from e2e_dra._suite import _nodelogs
from e2e_dra._suite._artifacts import set_aside
from e2e_dra._suite._nodelogs import StateLogs
from e2e_dra.hostkit import atomic_copy_tail


def pod_log(root: Path, pod: str, container: str, text: str) -> Path:
    path = root / f"default_{pod}_0123" / container / "0.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_each_state_gets_its_own_part_of_containerd_log_and_the_pods_logs(tmp_path: Path) -> None:
    containerd = tmp_path / "containerd.log"
    containerd.write_text("an earlier run\n")
    pods = tmp_path / "pods"
    into = tmp_path / "artifacts"
    logs = StateLogs(containerd, pods)
    logs.begin("0-initial", into)
    with containerd.open("a") as out:
        out.write("initial: RunPodSandbox\n")
    pod_log(pods, "claim-pod", "ctr", "hello\n")
    logs.end()
    logs.begin("1-upgraded", into)
    with containerd.open("a") as out:
        out.write("upgraded: StopPodSandbox\n")
    copied = logs.end()

    assert (into / "containerd-0-initial.log").read_text() == "initial: RunPodSandbox\n"
    assert (into / "containerd-1-upgraded.log").read_text() == "upgraded: StopPodSandbox\n"
    assert (into / "pods-0-initial/default_claim-pod_0123/ctr/0.log").read_text() == "hello\n"
    assert into / "pods-1-upgraded/default_claim-pod_0123/ctr/0.log" in copied
    assert logs.end() == []  # no state: nothing to copy twice


def test_a_missing_node_copies_nothing_and_fails_nothing(tmp_path: Path) -> None:
    logs = StateLogs(tmp_path / "no-containerd.log", tmp_path / "no-pods")
    logs.begin("0-initial", tmp_path / "a")
    assert logs.end() == []


def test_a_copy_is_bounded_to_the_end_of_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_nodelogs, "MAX_BYTES", 10)
    containerd = tmp_path / "containerd.log"
    containerd.write_text("")
    logs = StateLogs(containerd, tmp_path / "pods")
    logs.begin("0-initial", tmp_path / "a")
    containerd.write_text("0123456789abcdefghij")
    logs.end()
    assert (tmp_path / "a" / "containerd-0-initial.log").read_text() == "abcdefghij"


def test_a_rotated_log_is_copied_from_its_start(tmp_path: Path) -> None:
    source, target = tmp_path / "log", tmp_path / "copy"
    source.write_text("short\n")
    assert atomic_copy_tail(source, target, since=100, limit=1000) == 6
    assert target.read_text() == "short\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "log"]  # no temporary left


def a_run(artifacts: Path, suite: str, ended: float, text: str) -> Path:
    folder = artifacts / suite
    folder.mkdir(parents=True)
    summary = folder / "summary.json"
    summary.write_text(text)
    os.utime(summary, (ended, ended))
    return folder


def test_a_rerun_sets_the_last_run_aside_and_keeps_the_newest(tmp_path: Path) -> None:
    day = time.mktime((2026, 12, 1, 10, 0, 0, 0, 0, -1))
    kept = []
    for n in range(4):
        kept.append(set_aside(a_run(tmp_path, "upgrade-downgrade", day + n * 60, f"run {n}"), 3))
    shelf = tmp_path / "earlier" / "upgrade-downgrade"
    assert [p.name for p in sorted(shelf.iterdir())] == [
        "20261201-100100",
        "20261201-100200",
        "20261201-100300",
    ]
    assert kept[-1] == shelf / "20261201-100300"
    assert (shelf / "20261201-100300" / "summary.json").read_text() == "run 3"
    assert not (tmp_path / "upgrade-downgrade").exists()  # the new run starts on an empty folder
    # two runs that ended in the same second are both kept
    again = set_aside(a_run(tmp_path, "upgrade-downgrade", day + 180, "run 3 again"), 3)
    assert again == shelf / "20261201-100300-2"
    # nothing to set aside; and 0 keeps nothing
    assert set_aside(tmp_path / "kubelet-last", 3) is None
    assert set_aside(a_run(tmp_path, "kubelet-last", day, "x"), 0) is None
    assert not (tmp_path / "kubelet-last").exists()
    assert not (tmp_path / "earlier" / "kubelet-last").exists()


def test_pod_logs_of_a_pod_whose_directory_goes_while_they_are_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet removes a deleted pod's log directory at any time: one that is listed, then
    gone when it is read, has no logs, and the others are copied (a race seen in an upgrade step:
    ``Path.glob`` raised FileNotFoundError there)."""
    pods = tmp_path / "pods"
    for pod in ("default_kept_uid1", "default_gone_uid2"):
        (pods / pod / "c").mkdir(parents=True)
        (pods / pod / "c" / "0.log").write_text("x")
    (pods / "default_kept_uid1" / "c" / "notes.txt").write_text("not a log")
    real_scandir = os.scandir

    def removed_meanwhile(path: Any) -> Any:
        if "default_gone_uid2" in str(path):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", removed_meanwhile)
    assert _nodelogs.pod_log_files(pods) == [pods / "default_kept_uid1" / "c" / "0.log"]
    assert _nodelogs.pod_log_files(tmp_path / "no-pods") == []
