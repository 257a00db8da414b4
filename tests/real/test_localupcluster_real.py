"""The engine with real Kubernetes: start the previous release, upgrade to the current one,
downgrade back; after each step the apiserver and the node report the expected version and no
process of the replaced binaries is left.

Needs root, the releases under test and the node runtime (`e2e-dra provision`). The cluster holds
the host lock (/tmp/e2e-dra-host.lock), so it waits for any other real cluster on this host.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from e2e_dra.kube import Kube, path
from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS, Cluster, ModifyOptions
from e2e_dra.releases import VersionsUnderTest
from e2e_dra.settings import settings
from e2e_dra.supervise import group_members

pytestmark = pytest.mark.real


@pytest.fixture
def cluster(versions: VersionsUnderTest, tmp_path: Path) -> Iterator[Cluster]:
    engine = Cluster(versions.current.source_dir, tmp_path / "logs", host_lock=settings().host_lock)
    try:
        yield engine
    finally:
        engine.stop()


def processes_using(directory: Path) -> list[str]:
    """Command lines of live processes whose executable or argv lives in ``directory``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info["cmdline"] or []
        if any(word.startswith(f"{directory}/") for word in argv):
            found.append(f"{proc.pid}: {' '.join(argv)[:120]}")
    return found


def assert_versions(cluster: Cluster, expected: str) -> None:
    """The apiserver at once; the node once the new kubelet has synced its status (<= 60 s)."""
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    try:
        assert kube.get("/version")["gitVersion"] == expected
        deadline = time.monotonic() + 60
        while True:
            nodes = kube.list(path("v1", "nodes"))
            reported = [n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes]
            if reported == [expected] or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert reported == [expected]
    finally:
        kube.close()
    for component in KUBE_CLUSTER_COMPONENTS:
        assert cluster.component_version(component) == expected


def test_upgrade_and_downgrade_swap_every_component(
    versions: VersionsUnderTest, node_env: dict[str, str], cluster: Cluster
) -> None:
    previous, current = versions.previous, versions.current
    assert previous.version != current.version

    cluster.start(f"0-initial-{versions.previous_minor}", previous.bin_dir, node_env)
    assert_versions(cluster, previous.version)
    initial = {c: cluster.running[c].pid for c in KUBE_CLUSTER_COMPONENTS}

    undo = cluster.modify(f"1-{current.version}", ModifyOptions(bin_dir=current.bin_dir))
    assert_versions(cluster, current.version)
    assert processes_using(previous.bin_dir) == []
    assert all(not group_members(pid) for pid in initial.values() if pid)

    upgraded = {c: cluster.running[c].pid for c in KUBE_CLUSTER_COMPONENTS}
    cluster.modify(f"2-restored-{versions.previous_minor}", undo)
    assert_versions(cluster, previous.version)
    assert processes_using(current.bin_dir) == []
    assert all(not group_members(pid) for pid in upgraded.values() if pid)

    logs = cluster.log_dir
    for component in KUBE_CLUSTER_COMPONENTS:
        for state in (f"0-initial-{versions.previous_minor}", f"1-{current.version}"):
            last = (logs / f"{component}-{state}.log").read_text().splitlines()[-1]
            assert last.endswith("terminated, result: signal: killed"), (component, state)

    cluster.stop()
    assert processes_using(previous.bin_dir) == []
    assert [c for c in ("etcd", *KUBE_CLUSTER_COMPONENTS) if c in cluster.running] == []
