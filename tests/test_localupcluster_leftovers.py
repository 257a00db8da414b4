"""The engine after a hard death and during a crash, on fake components (no real cluster needed):
a cluster whose owner was SIGKILLed is stopped by the next one to start, and a component that dies
under a running cluster is named, with its log, by ``Cluster.exited`` and by every wait."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_k8s.harness import FakeTree, make_fake_tree

from e2e_dra.errors import ComponentCrashed
from e2e_dra.supervise import group_members
from e2e_dra.waits import abort_when, eventually

OWNER = """
import json, sys, time
from pathlib import Path
from e2e_dra.localupcluster import Cluster
tree = json.loads(sys.argv[1])
cluster = Cluster(
    Path(tree["source_dir"]),
    Path(tree["logs"]),
    wait_for_nodes=False,
    host_lock=Path(tree["host_lock"]),
)
cluster.start("0-initial", Path(tree["old_bin"]), tree["env"])
print("ready", flush=True)
time.sleep(300)
"""


@pytest.fixture
def tree(tmp_path: Path) -> FakeTree:
    return make_fake_tree(tmp_path / "fake")


def alive_groups(tree: FakeTree, name: str) -> list[int]:
    return [r["pgid"] for r in tree.starts(name) if group_members(r["pgid"])]


def test_a_cluster_whose_owner_was_killed_is_stopped_by_the_next(
    tree: FakeTree, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = {
        "source_dir": str(tree.source_dir),
        "old_bin": str(tree.old_bin),
        "logs": str(tmp_path / "dead-logs"),
        "env": tree.env,
        "host_lock": str(tree.host_lock),
    }
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, json.dumps(spec)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CI": "true"},
    )
    assert owner.stdout is not None
    assert owner.stdout.readline() == "ready\n"
    owner.send_signal(signal.SIGKILL)  # no handler runs: its components live on
    owner.wait()
    left = alive_groups(tree, "kube-apiserver")
    assert left, "nothing survived the owner: the test would prove nothing"

    cluster = tree.cluster(tmp_path / "logs")
    try:
        with caplog.at_level(logging.INFO, logger="e2e_dra.localupcluster"):
            cluster.start(
                "0-initial", tree.old_bin, tree.env
            )  # the same ports: only works if reaped
        err = caplog.text
        assert f"a previous run (pid {owner.pid}) died and left" in err
        assert f"kube-apiserver-0-initial (pid {left[0]})" in err
        assert all(not group_members(pgid) for pgid in left)
    finally:
        cluster.stop()
    assert not any(alive_groups(tree, name) for name in ("kube-apiserver", "kubelet"))


def test_a_component_that_dies_is_named_with_its_log_and_ends_waits(
    tree: FakeTree, tmp_path: Path
) -> None:
    cluster = tree.cluster(tmp_path / "logs")
    try:
        cluster.start("0-initial", tree.old_bin, tree.env)
        assert cluster.exited() == []
        scheduler = cluster.running["kube-scheduler"]
        os.kill(int(scheduler.pid or 0), signal.SIGKILL)

        def crashed() -> str | None:
            return "\n".join(cluster.exited()) or None

        started = time.monotonic()
        with abort_when(crashed), pytest.raises(ComponentCrashed) as caught:
            eventually(lambda: False, what="something that needs the scheduler", timeout=60)
        assert time.monotonic() - started < 10  # not the 60 s timeout
        message = str(caught.value)
        assert f"kube-scheduler-0-initial (pid {scheduler.pid}) ended (signal: killed)" in message
        assert str(cluster.log_dir / "kube-scheduler-0-initial.log") in message
        assert "last lines:" in message
    finally:
        cluster.stop()
    assert cluster.exited() == []
