"""``e2e-dra cluster up`` on the fake tree, and the host lock that serializes real clusters."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_k8s.harness import FakeTree, make_fake_tree

from e2e_dra.hostkit import poll
from e2e_dra.localupcluster._hostlock import HostLock
from e2e_dra.supervise import group_members


def e2e_dra() -> str:
    found = shutil.which("e2e-dra", path=str(Path(sys.executable).parent))
    assert found, "e2e-dra is not installed next to this Python (pip install -e .)"
    return found


@pytest.fixture
def tree(tmp_path: Path) -> FakeTree:
    return make_fake_tree(tmp_path / "fake")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cluster_up_prints_kubeconfig_and_stops_everything_on_a_signal(
    tree: FakeTree, tmp_path: Path, sig: signal.Signals
) -> None:
    env = {**os.environ, **tree.env, "E2E_DRA_HOST_LOCK": str(tmp_path / "lock")}
    argv = [e2e_dra(), "cluster", "up", "--source-dir", str(tree.source_dir), "--bin-dir",
            str(tree.old_bin), "--log-dir", str(tmp_path / "logs"), "--no-provision",
            "--skip-node-ready", "--feature-gates", "DRAThing=true"]  # fmt: skip
    child = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == f"kubeconfig: {tree.cert_dir / 'admin.kubeconfig'}\n"
        apiserver = tree.starts("kube-apiserver")
        assert "--feature-gates=AllAlpha=false,DRAThing=true" in apiserver[0]["argv"]
        assert group_members(apiserver[0]["pgid"])
        child.send_signal(sig)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0, stderr
    assert "cluster stopped" in stderr
    for name in ("etcd", "kube-apiserver", "kubelet", "kube-proxy"):
        assert not group_members(tree.starts(name)[0]["pgid"]), name


def test_cluster_up_rejects_bad_gates_in_one_line(tree: FakeTree) -> None:
    result = subprocess.run(
        [
            e2e_dra(),
            "cluster",
            "up",
            "--source-dir",
            str(tree.source_dir),
            "--bin-dir",
            str(tree.old_bin),
            "--feature-gates",
            "DRAThing",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3  # a malformed value
    assert result.stderr.strip().splitlines() == [
        "e2e-dra: error: invalid feature gate 'DRAThing' in --feature-gates 'DRAThing': "
        "give name=true or name=false pairs separated by commas (e.g. DRADeviceTaints=true)"
    ]


def test_host_lock_waits_for_another_holder(tmp_path: Path) -> None:
    lock_file = tmp_path / "host.lock"
    holder = subprocess.Popen(["flock", "-o", str(lock_file), "sleep", "30"])
    try:
        poll(lock_file.exists, timeout=10, interval=0.05)
        time.sleep(0.2)
        lock = HostLock(lock_file)
        acquired = threading.Event()
        thread = threading.Thread(target=lambda: (lock.acquire(), acquired.set()), daemon=True)
        thread.start()
        assert not acquired.wait(1.0), "took the lock another process holds"
        holder.kill()
        assert acquired.wait(10), "did not take the lock once it was free"
        assert lock.held
        lock.release()
        assert not lock.held
    finally:
        holder.kill()
        holder.wait()


def test_host_lock_held_by_an_ancestor_is_ours(tmp_path: Path) -> None:
    """`flock /tmp/e2e-dra-host.lock pytest ...` must not deadlock a cluster started inside."""
    lock_file = tmp_path / "host.lock"
    code = (
        "from pathlib import Path; from e2e_dra.localupcluster._hostlock import HostLock; "
        f"lock = HostLock(Path({str(lock_file)!r})); lock.acquire(); print('inside', lock.held)"
    )
    result = subprocess.run(
        ["flock", str(lock_file), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.stdout.strip() == "inside False", result.stderr
