"""Builds a throw-away fake Kubernetes tree for engine tests: the fake script's source dir, two
binary dirs of fake components (an "old" and a "new" release), etcd, kubectl and cfssl on PATH,
free ports."""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS, Cluster

HERE = Path(__file__).resolve().parent
FAKE_COMPONENT = HERE / "fake_component.py"
OLD_VERSION = "v1.36.9"
NEW_VERSION = "v1.37.2"
PORT_VARS = (
    "API_SECURE_PORT",
    "KCM_SECURE_PORT",
    "SCHEDULER_SECURE_PORT",
    "PROXY_HEALTHZ_PORT",
    "KUBELET_PORT",
    "ETCD_PORT",
)


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def write_wrapper(path: Path, name: str, version: str, records: Path) -> None:
    """An executable named like the component; the record dir is baked in (sudo drops the env)."""
    path.write_text(
        "#!/bin/sh\n"
        f'export FAKE_RECORD_DIR="{records}"\n'
        f'exec "{sys.executable}" "{FAKE_COMPONENT}" --fake-name={name} --fake-version={version}'
        ' "$@"\n'
    )
    path.chmod(0o755)


@dataclass
class FakeTree:
    source_dir: Path
    old_bin: Path
    new_bin: Path
    records: Path
    cert_dir: Path
    env: dict[str, str]
    ports: dict[str, int]
    host_lock: Path  # the engine's one-cluster-per-host lock, private to this tree

    def cluster(self, log_dir: Path, *, ready_timeout: float = 30) -> Cluster:
        """The engine on this tree: its own host lock, no node to wait for."""
        return Cluster(
            self.source_dir,
            log_dir,
            wait_for_nodes=False,
            ready_timeout=ready_timeout,
            host_lock=self.host_lock,
        )

    def starts(self, name: str) -> list[dict]:
        """Every recorded start of ``name`` (argv, version, pid, pgid), oldest first."""
        path = self.records / f"{name}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def start_order(self) -> list[tuple[str, str]]:
        """(name, version) of all component starts, in time order."""
        events = [
            (record["time"], name, record["version"])
            for name in ("etcd", *KUBE_CLUSTER_COMPONENTS)
            for record in self.starts(name)
        ]
        return [(name, version) for _, name, version in sorted(events)]

    def die_early(self, name: str, times: int) -> None:
        (self.records / f"{name}.die-early").write_text(str(times))

    def ready_delay(self, name: str, seconds: float) -> None:
        (self.records / f"{name}.ready-delay").write_text(str(seconds))


def make_fake_tree(root: Path) -> FakeTree:
    old_bin, new_bin, tools = root / "bin-old", root / "bin-new", root / "tools"
    records, cert_dir = root / "records", root / "certs"
    for directory in (old_bin, new_bin, tools, records):
        directory.mkdir(parents=True)
    for component in KUBE_CLUSTER_COMPONENTS:
        write_wrapper(old_bin / component, component, OLD_VERSION, records)
        write_wrapper(new_bin / component, component, NEW_VERSION, records)
    write_wrapper(tools / "etcd", "etcd", "3.6.0", records)
    write_wrapper(tools / "kubectl", "kubectl", NEW_VERSION, records)
    for tool in ("cfssl", "cfssljson"):  # looked for on PATH before the script runs
        write_wrapper(tools / tool, tool, "1.6.5", records)
    ports = dict(zip(PORT_VARS, free_ports(len(PORT_VARS)), strict=True))
    env = {
        "PATH": f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "FAKE_RECORD_DIR": str(records),
        "CERT_DIR": str(cert_dir),
        **{var: str(port) for var, port in ports.items()},
    }
    return FakeTree(HERE, old_bin, new_bin, records, cert_dir, env, ports, root / "host.lock")
