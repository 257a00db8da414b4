"""Acceptance of the node runtime: upstream's hack/local-up-cluster.sh runs a pod on it.

The script runs as upstream documents it (not in dry-run), with the provisioned binaries, the DRA
feature gates and nothing but ``NodeRuntime.env()`` to tell it about this host. It must bring the
node to Ready, run a pod of the test image to completion, show its output in ``kubectl logs``, and
leave no component process behind when it is interrupted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from conftest import DRA_FEATURE_GATES, DRA_RUNTIME_CONFIG, missing
from environment import Environ

from e2e_dra.errors import E2EDRAError, ProvisionError
from e2e_dra.localupcluster._hostlock import HostLock
from e2e_dra.provision import (
    PAUSE_IMAGE,
    TEST_IMAGE,
    NodeRuntime,
    ensure_node_runtime,
    stop_node_runtime,
)
from e2e_dra.releases import Release
from e2e_dra.settings import settings

logger = logging.getLogger(__name__)

pytestmark = pytest.mark.real

CERT_DIR = Path("/var/run/kubernetes")


@pytest.fixture(scope="module")
def runtime(as_root: None, release: Release) -> NodeRuntime:
    """Provisions what is missing (the other real tests only check)."""
    try:
        return ensure_node_runtime(release.source_dir)
    except E2EDRAError as exc:
        missing(f"cannot provision the node runtime ({exc})")


def test_a_second_provisioning_does_nothing(release: Release, runtime: NodeRuntime):
    again = ensure_node_runtime(release.source_dir)
    assert [(r.name, r.action) for r in again.results] == [
        (r.name, "found") for r in runtime.results
    ]


def test_checking_a_provisioned_node_reports_every_piece_found(
    release: Release, runtime: NodeRuntime
):
    checked = ensure_node_runtime(release.source_dir, check_only=True)
    assert {r.action for r in checked.results} == {"found"}
    assert checked.env() == runtime.env()


def test_a_containerd_found_gone_is_started_again(
    release: Release, runtime: NodeRuntime, environ: Environ
):
    """On a node dir of its own, so the shared containerd (and any cluster on it) is untouched."""
    node = Path(tempfile.mkdtemp(prefix="e2e-dra-node-"))
    environ.set("E2E_DRA_NODE_DIR", str(node))
    try:
        first = ensure_node_runtime(release.source_dir)
        actions = {r.name: r.action for r in first.results}
        assert actions["containerd daemon"] == actions["images"] == "made"
        assert first.runtime_endpoint == f"unix://{node}/containerd/containerd.sock"
        assert stop_node_runtime()
        with pytest.raises(ProvisionError, match=r"containerd daemon \(not running\)"):
            ensure_node_runtime(release.source_dir, check_only=True)
        again = ensure_node_runtime(release.source_dir)
        actions = {r.name: r.action for r in again.results}
        assert actions["containerd daemon"] == "made"
        assert actions["images"] == "found"  # they live in the node dir, not in the daemon
        images = subprocess.run(
            [*again.ctr(), "-n", "k8s.io", "images", "ls", "-q"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert TEST_IMAGE in images and PAUSE_IMAGE in images
    finally:
        stop_node_runtime()
        shutil.rmtree(node, ignore_errors=True)


@pytest.fixture
def host_lock() -> Iterator[None]:
    """One real cluster per host: its ports and /var/run/kubernetes are shared."""
    lock = HostLock(settings().host_lock)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


CTRL_C_AS_IN_A_TERMINAL = (
    # A shell without job control starts background commands (``nohup ./run.sh pytest tests &``)
    # with SIGINT ignored, children inherit that, and bash cannot trap a signal it was started
    # ignoring: the script's Ctrl-C cleanup would never run, and the test would blame the script.
    # A launcher that execs, not ``preexec_fn``: see ``tests/test_failures.py``'s launcher.
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


class LocalUpCluster:
    """hack/local-up-cluster.sh running in its own session, as a person would run it."""

    def __init__(self, source_dir: Path, bin_dir: Path, env: dict[str, str], log_dir: Path):
        self.kubectl_path = bin_dir / "kubectl"
        self.log_dir = log_dir
        self.kubeconfig = CERT_DIR / "admin.kubeconfig"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.output = log_dir / "local-up-cluster.out"
        script = ["bash", str(source_dir / "hack" / "local-up-cluster.sh"), "-o", str(bin_dir)]
        with open(self.output, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", CTRL_C_AS_IN_A_TERMINAL, *script],
                cwd=source_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        proc = subprocess.run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def wait_for(self, what: str, condition: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"local-up-cluster.sh exited ({self.proc.returncode}) while waiting for "
                    f"{what}; last output:\n{self.tail()}"
                )
            if condition():
                return
            time.sleep(1)
        raise AssertionError(f"no {what} within {timeout:.0f}s; last output:\n{self.tail()}")

    def node_ready(self) -> bool:
        if not self.kubeconfig.exists():
            return False
        raw = self.kubectl("get", "nodes", "-o", "json", check=False)
        try:
            nodes = json.loads(raw)["items"]
        except (ValueError, KeyError):
            return False
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for node in nodes
            for c in node.get("status", {}).get("conditions", [])
        )

    def interrupt(self, timeout: float = 120) -> None:
        """Ctrl-C, as a person would: the script's trap stops every component it started."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)

    def leftovers(self, component_dirs: list[Path]) -> dict[int, str]:
        """Processes in the script's session, or running a component binary (``sudo`` may give
        the kubelet a session of its own); we hold the host lock, so any such process is ours."""
        dirs = {d.resolve() for d in component_dirs}
        left = {}
        for proc in psutil.process_iter(["cmdline", "exe", "status"]):
            try:
                in_session = os.getsid(proc.pid) == self.proc.pid
            except OSError:
                continue
            exe = Path(proc.info["exe"] or "/")
            zombie = proc.info["status"] == psutil.STATUS_ZOMBIE
            if not zombie and (in_session or exe.parent in dirs):
                left[proc.pid] = " ".join(proc.info["cmdline"] or [])[:120]
        return left

    def kill(self, pids: dict[int, str]) -> None:
        for pid in [self.proc.pid, *pids]:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if pid == self.proc.pid else os.kill)(pid, signal.SIGKILL)

    def tail(self, lines: int = 25) -> str:
        return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])


def _writable_tree(source_dir: Path, into: Path) -> Path:
    """The parts of the tree the script uses, writable (the module cache is read-only)."""
    for part in ("hack", "cluster"):
        shutil.copytree(source_dir / part, into / part, symlinks=True)
    for path in into.rglob("*"):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    return into


def test_local_up_cluster_runs_a_pod_of_the_test_image(
    release: Release, runtime: NodeRuntime, host_lock: None, tmp_path: Path
):
    assert release.source_dir is not None
    tree = _writable_tree(release.source_dir, tmp_path / "kubernetes")
    env = dict(os.environ)
    env.update(runtime.env())
    env.update(
        PATH=f"{release.bin_dir}:{env['PATH']}",  # the script's kubectl lookup uses PATH
        FEATURE_GATES=DRA_FEATURE_GATES,
        RUNTIME_CONFIG=DRA_RUNTIME_CONFIG,
        LOG_DIR=str(tmp_path / "logs"),
    )
    started = time.monotonic()
    cluster = LocalUpCluster(tree, release.bin_dir, env, tmp_path / "logs")
    try:
        cluster.wait_for("Ready node", cluster.node_ready, timeout=300)
        logger.info(
            f"local-up-cluster.sh: node Ready {time.monotonic() - started:.1f}s after start"
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "hello", "namespace": "default"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "hello",
                        "image": TEST_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", "echo hello from $(hostname)"],
                    }
                ],
            },
        }
        cluster.wait_for(
            "default service account",
            lambda: bool(cluster.kubectl("get", "serviceaccount", "default", check=False)),
            timeout=120,
        )
        cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
        cluster.wait_for(
            "pod hello Succeeded",
            lambda: (
                cluster.kubectl(
                    "get", "pod", "hello", "-o", "jsonpath={.status.phase}", check=False
                )
                == "Succeeded"
            ),
            timeout=180,
        )
        assert cluster.kubectl("logs", "hello").strip() == "hello from hello"
        logger.info(
            f"local-up-cluster.sh: pod output seen {time.monotonic() - started:.1f}s after start"
        )
        cluster.kubectl("delete", "pod", "hello", "--wait=true", "--timeout=60s")
    finally:
        cluster.interrupt()
        etcd_dirs = [d for d in runtime.path_dirs if (d / "etcd").exists()]
        left = cluster.leftovers([release.bin_dir, *etcd_dirs])  # not containerd: it stays up
        cluster.kill(left)
    assert cluster.proc.returncode is not None, "local-up-cluster.sh ignored Ctrl-C"
    assert left == {}, f"processes left after Ctrl-C: {left}"
