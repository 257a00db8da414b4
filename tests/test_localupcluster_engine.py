"""The engine against a fake source tree: a script printing RUN lines like local-up-cluster.sh
and fake components serving health endpoints (tests/fake_k8s)."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_k8s.harness import NEW_VERSION, OLD_VERSION, FakeTree, make_fake_tree

from e2e_dra.hostkit import poll
from e2e_dra.localupcluster import (
    KUBE_CLUSTER_COMPONENTS,
    STARTED_TOGETHER,
    Cluster,
    ClusterError,
    ModifyOptions,
)
from e2e_dra.localupcluster._claim import slot_settings
from e2e_dra.supervise import group_members

ALL = ("etcd", *KUBE_CLUSTER_COMPONENTS)
WAVES = [{"etcd"}, {"kube-apiserver"}, set(STARTED_TOGETHER), {"kube-proxy"}]
"""The start order: the components started together are one set, in whatever order they ran."""


def waves(names: list[str]) -> list[set[str]]:
    """``names`` in start order, with each run of components started together as one set."""
    grouped: list[set[str]] = []
    for name in names:
        if grouped and name in STARTED_TOGETHER and grouped[-1] <= set(STARTED_TOGETHER):
            grouped[-1].add(name)
        else:
            grouped.append({name})
    return grouped


@pytest.fixture
def tree(tmp_path: Path) -> FakeTree:
    return make_fake_tree(tmp_path / "fake")


def leftovers(tree: FakeTree) -> dict[str, list[int]]:
    """Processes still alive in any process group a fake component ever ran in."""
    alive = {}
    for name in ALL:
        for record in tree.starts(name):
            members = group_members(record["pgid"])
            if members:
                alive[name] = members
    return alive


@pytest.fixture
def cluster(tree: FakeTree, tmp_path: Path) -> Iterator[Cluster]:
    engine = tree.cluster(tmp_path / "logs")
    yield engine
    engine.stop()
    assert leftovers(tree) == {}


def versions(tree: FakeTree, name: str) -> list[str]:
    return [record["version"] for record in tree.starts(name)]


@pytest.mark.parametrize("generation", ["new", "old"])
def test_start_runs_components_in_order_with_the_scripts_command_lines(
    tree: FakeTree, cluster: Cluster, generation: str
) -> None:
    env = {**tree.env, "FAKE_SCRIPT_GENERATION": generation}
    cluster.start("0-initial", tree.old_bin, env, feature_gates="DRAThing=true")

    started = [name for name, _ in tree.start_order()]
    assert waves(started) == WAVES
    assert all(versions(tree, c) == [OLD_VERSION] for c in KUBE_CLUSTER_COMPONENTS)
    assert cluster.settings["API_SECURE_PORT"] == str(tree.ports["API_SECURE_PORT"])
    assert cluster.kubeconfig == tree.cert_dir / "admin.kubeconfig"
    assert len(tree.starts("kubectl")) == 3
    apiserver = tree.starts("kube-apiserver")[0]["argv"]
    assert "" in apiserver  # the empty "${priv_arg}" word reached the process
    assert "--feature-gates=AllAlpha=false,DRAThing=true" in apiserver
    assert tree.starts("kubelet")[0]["argv"][-1] == "--feature-gates=DRAThing=true"
    assert not any(a.startswith("--feature-gates") for a in tree.starts("kube-proxy")[0]["argv"])
    # New scripts print etcd as a RUN line (ours to run); old ones run it themselves.
    ours = ALL if generation == "new" else KUBE_CLUSTER_COMPONENTS
    assert set(cluster.running) == set(ours)
    for component in ours:
        assert cluster.running[component].running()
        assert cluster.log_path(component) == cluster.log_dir / f"{component}-0-initial.log"
    assert "etcd" in leftovers(tree)  # running, whoever started it
    assert cluster.command_line("kubelet")[:2] == ["sudo", "-E"]

    cluster.stop()
    assert leftovers(tree) == {}
    for component in ours:
        lines = (cluster.log_dir / f"{component}-0-initial.log").read_text().splitlines()
        assert lines[-2].endswith("killing: cluster stopped")
        assert lines[-1].endswith("terminated, result: signal: killed")


def test_components_that_need_only_the_api_server_start_before_any_of_them_is_ready(
    tree: FakeTree, cluster: Cluster
) -> None:
    """The kubelet is not held back by a slow controller-manager: all three start at once, and
    each one's ready time is its own; kube-proxy still waits for the kubelet."""
    tree.ready_delay("kube-controller-manager", 2.0)
    cluster.start("0-initial", tree.old_bin, tree.env)
    started = {name: tree.starts(name)[0]["time"] for name in ALL}
    ready = {t.component: t for t in cluster.ready_times}
    assert max(started[c] for c in STARTED_TOGETHER) < ready["kube-controller-manager"].at
    assert ready["kube-controller-manager"].seconds >= 2.0
    assert ready["kubelet"].seconds < 1.5  # not the controller-manager's wait
    assert started["kube-proxy"] > ready["kubelet"].at


def test_upgrade_then_downgrade_swaps_binaries_in_reverse_then_forward_order(
    tree: FakeTree, cluster: Cluster
) -> None:
    cluster.start("0-initial", tree.old_bin, tree.env)
    first_etcd_pid = cluster.running["etcd"].pid
    undo = cluster.modify("1-upgraded", ModifyOptions(bin_dir=tree.new_bin))

    assert undo.file_by_component == {c: tree.old_bin / c for c in KUBE_CLUSTER_COMPONENTS}
    assert all(versions(tree, c) == [OLD_VERSION, NEW_VERSION] for c in KUBE_CLUSTER_COMPONENTS)
    restarted = tree.start_order()[len(ALL) :]
    assert {version for _, version in restarted} == {NEW_VERSION}
    assert waves([name for name, _ in restarted]) == WAVES[1:]
    assert cluster.running["etcd"].pid == first_etcd_pid  # etcd is never modified
    # Stopped in reverse order: the kube-proxy log was closed first, the apiserver's last.
    killed_at = {
        c: (cluster.log_dir / f"{c}-0-initial.log").read_text().splitlines()[-2].split(": ")[0]
        for c in KUBE_CLUSTER_COMPONENTS
    }
    assert sorted(KUBE_CLUSTER_COMPONENTS, key=killed_at.__getitem__, reverse=True) == list(
        KUBE_CLUSTER_COMPONENTS
    )
    assert cluster.command_line("kubelet")[2] == str(tree.new_bin / "kubelet")
    assert cluster.log_path("kubelet") == cluster.log_dir / "kubelet-1-upgraded.log"

    restore = cluster.modify("2-restored", undo)
    assert all(versions(tree, c)[-1] == OLD_VERSION for c in KUBE_CLUSTER_COMPONENTS)
    assert restore.file_by_component == {c: tree.new_bin / c for c in KUBE_CLUSTER_COMPONENTS}
    assert {t.state for t in cluster.ready_times} == {"0-initial", "1-upgraded", "2-restored"}
    assert all(t.at > 0 for t in cluster.ready_times)  # when, for the report's timeline


def test_the_cluster_holds_the_host_lock_its_caller_names(tree: FakeTree, cluster: Cluster) -> None:
    cluster.start("0-initial", tree.old_bin, tree.env)
    fd = os.open(tree.host_lock, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # held: another taker would have to wait
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        cluster.stop()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released with the cluster
    finally:
        os.close(fd)


def test_modify_restarts_only_what_it_changes(tree: FakeTree, cluster: Cluster) -> None:
    cluster.start("0-initial", tree.old_bin, tree.env)
    undo = cluster.modify(
        "1-new-kubelet", ModifyOptions(file_by_component={"kubelet": tree.new_bin / "kubelet"})
    )
    assert undo == ModifyOptions(file_by_component={"kubelet": tree.old_bin / "kubelet"})
    assert versions(tree, "kubelet") == [OLD_VERSION, NEW_VERSION]
    for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
        assert versions(tree, component) == [OLD_VERSION]


def test_what_must_happen_while_the_kubelet_is_down_runs_with_the_control_plane_up(
    tree: FakeTree, cluster: Cluster
) -> None:
    """A pod deleted while the node is down: the hook runs after every component that
    restarts before the kubelet is ready again, and before the kubelet starts."""
    cluster.start("0-initial", tree.old_bin, tree.env)
    seen: list[dict[str, int]] = []

    def while_down() -> None:
        seen.append({c: len(tree.starts(c)) for c in KUBE_CLUSTER_COMPONENTS})
        assert all(cluster.running[c].running() for c in ("kube-apiserver", "kube-scheduler"))

    cluster.modify(
        "1-upgraded", ModifyOptions(bin_dir=tree.new_bin), before_kubelet_starts=while_down
    )
    assert seen == [
        {
            "kube-apiserver": 2,
            "kube-controller-manager": 2,
            "kube-scheduler": 2,
            "kubelet": 1,
            "kube-proxy": 1,
        }
    ]
    assert versions(tree, "kubelet") == [OLD_VERSION, NEW_VERSION]


def test_a_failing_while_down_hook_still_brings_the_kubelet_back_then_fails(
    tree: FakeTree, cluster: Cluster
) -> None:
    cluster.start("0-initial", tree.old_bin, tree.env)

    def broken() -> None:
        raise RuntimeError("could not delete the pod")

    only_kubelet = ModifyOptions(file_by_component={"kubelet": tree.new_bin / "kubelet"})
    with pytest.raises(RuntimeError, match="could not delete the pod"):
        cluster.modify("1-new-kubelet", only_kubelet, before_kubelet_starts=broken)
    assert cluster.running["kubelet"].running()
    assert versions(tree, "kubelet") == [OLD_VERSION, NEW_VERSION]
    # a step that does not restart the kubelet never calls it
    cluster.modify(
        "2-new-proxy",
        ModifyOptions(file_by_component={"kube-proxy": tree.new_bin / "kube-proxy"}),
        before_kubelet_starts=broken,
    )


def test_toggle_feature_gates_restarts_gated_components_and_spares_kube_proxy(
    tree: FakeTree, cluster: Cluster
) -> None:
    cluster.start("0-initial", tree.new_bin, tree.env, feature_gates="DRAThing=false")
    cluster.toggle_feature_gates("1-on", "DRAThing=true,DRAExtendedResource=false")

    apiserver = tree.starts("kube-apiserver")[-1]["argv"]
    assert "--feature-gates=AllAlpha=false,DRAExtendedResource=false,DRAThing=true" in apiserver
    kubelet = tree.starts("kubelet")[-1]["argv"]
    # DRAExtendedResource is locked in 1.37: the kubelet (no --emulated-version) must not get it.
    assert [a for a in kubelet if a.startswith("--feature-gates")] == [
        "--feature-gates=DRAThing=true"
    ]
    assert len(tree.starts("kube-proxy")) == 1
    assert len(tree.starts("kube-scheduler")) == 2

    cluster.toggle_feature_gates("2-off", "DRAThing=false")
    assert (
        "--feature-gates=AllAlpha=false,DRAExtendedResource=false,DRAThing=false"
        in (tree.starts("kube-controller-manager")[-1]["argv"])
    )


def test_component_that_dies_early_is_retried(tree: FakeTree, cluster: Cluster) -> None:
    tree.die_early("kube-apiserver", 3)
    cluster.retry_delay = 0.1
    cluster.start("0-initial", tree.old_bin, tree.env)
    assert len(tree.starts("kube-apiserver")) == 4
    assert [t.attempts for t in cluster.ready_times if t.component == "kube-apiserver"] == [4]
    log = (cluster.log_dir / "kube-apiserver-0-initial.log").read_text()
    assert log.count("starting: ") == 4
    assert log.count("dying early on purpose") == 3


def test_component_that_keeps_dying_fails_naming_it_and_its_log(
    tree: FakeTree, cluster: Cluster
) -> None:
    tree.die_early("kube-controller-manager", 100)
    cluster.retry_delay = 0.1
    with pytest.raises(ClusterError) as caught:
        cluster.start("0-initial", tree.old_bin, tree.env)
    message = str(caught.value)
    assert message.startswith("kube-controller-manager-0-initial did not get ready")
    assert "11 attempts" in message
    assert str(cluster.log_dir / "kube-controller-manager-0-initial.log") in message
    assert "dying early on purpose" in message
    assert cluster.running == {}
    assert leftovers(tree) == {}


def test_component_that_never_gets_ready_fails_after_the_timeout(
    tree: FakeTree, tmp_path: Path
) -> None:
    tree.ready_delay("kube-scheduler", 3600)
    engine = tree.cluster(tmp_path / "logs", ready_timeout=2)
    with pytest.raises(
        ClusterError, match=r"kube-scheduler-0-initial did not get ready: GET https"
    ):
        engine.start("0-initial", tree.old_bin, tree.env)
    assert leftovers(tree) == {}


def test_failing_script_shows_its_last_lines_and_leaves_nothing_running(
    tree: FakeTree, cluster: Cluster
) -> None:
    env = {**tree.env, "FAKE_SCRIPT_FAIL_AFTER": "kube-scheduler"}
    with pytest.raises(ClusterError, match=r"(?s)failed \(exit status 3\).*fake failure after"):
        cluster.start("0-initial", tree.old_bin, env)
    assert leftovers(tree) == {}


def test_failing_kubectl_command_is_reported(tree: FakeTree, cluster: Cluster) -> None:
    env = {**tree.env, "FAKE_KUBECTL_EXIT": "1"}
    with pytest.raises(ClusterError, match=r"kubectl command failed \(exit status 1\)"):
        cluster.start("0-initial", tree.old_bin, env)


def test_port_held_by_a_stranger_is_named(tree: FakeTree, cluster: Cluster) -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", tree.ports["API_SECURE_PORT"]))
        stranger.listen()
        with pytest.raises(ClusterError) as caught:
            cluster.start("0-initial", tree.old_bin, tree.env)
    port = tree.ports["API_SECURE_PORT"]
    assert f"cannot start kube-apiserver: port {port} is in use by pid {os.getpid()}" in str(
        caught.value
    )
    assert tree.starts("kube-apiserver") == []


def test_missing_binaries_are_named_before_anything_starts(
    tree: FakeTree, cluster: Cluster
) -> None:
    (tree.old_bin / "kube-proxy").unlink()
    (tree.old_bin / "kubelet").unlink()
    with pytest.raises(ClusterError, match=r"lacks component binaries: kubelet, kube-proxy$"):
        cluster.start("0-initial", tree.old_bin, tree.env)
    assert tree.starts("etcd") == []


def test_missing_cfssl_is_named_before_the_script_runs(
    tree: FakeTree, cluster: Cluster, tmp_path: Path
) -> None:
    # Without cfssl on PATH the script would try GitHub for many minutes before printing anything.
    tools = tmp_path / "fake" / "tools"
    (tools / "cfssljson").unlink()
    env = {**tree.env, "PATH": f"{tools}:/usr/bin:/bin"}  # no cfssljson of this host's either
    with pytest.raises(ClusterError, match=r"^cfssljson not found on PATH: hack/local-up-cluster"):
        cluster.start("0-initial", tree.old_bin, env)
    assert tree.starts("etcd") == []
    assert not (tmp_path / "logs" / "local-up-cluster-0-initial.log").exists()


def test_modify_with_a_missing_binary_changes_nothing(tree: FakeTree, cluster: Cluster) -> None:
    cluster.start("0-initial", tree.old_bin, tree.env)
    missing = r"component binary .*/nowhere/kube-apiserver for kube-apiserver is missing"
    with pytest.raises(ClusterError, match=missing):
        cluster.modify("1-x", ModifyOptions(bin_dir=tree.source_dir / "nowhere"))
    assert all(cluster.running[c].running() for c in KUBE_CLUSTER_COMPONENTS)
    assert all(len(tree.starts(c)) == 1 for c in KUBE_CLUSTER_COMPONENTS)


def test_sudo_is_dropped_when_it_is_absent_and_we_are_root(
    tree: FakeTree, cluster: Cluster
) -> None:
    if os.geteuid() != 0:
        pytest.skip("dropping sudo only happens as root")
    # A PATH with everything the fake script needs but without sudo.
    bare = tree.records.parent / "bare-path"
    bare.mkdir()
    for tool in (
        "bash",
        "mktemp",
        "openssl",
        "base64",
        "curl",
        "seq",
        "sleep",
        "cat",
        "rm",
        "touch",
        "mkdir",
        "dirname",
        "env",
    ):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True)
        (bare / tool).symlink_to(found.stdout.strip())
    etcd_dir = tree.env["PATH"].split(":")[0]
    env = {**tree.env, "PATH": f"{etcd_dir}:{bare}", "FAKE_CONTROLPLANE_SUDO": "sudo -E"}
    cluster.start("0-initial", tree.old_bin, env)
    assert cluster.command_line("kube-apiserver")[:2] == ["sudo", "-E"]
    assert cluster.running["kube-apiserver"].argv[0] == str(tree.old_bin / "kube-apiserver")
    assert cluster.running["kube-proxy"].argv[0] == str(tree.old_bin / "kube-proxy")


INTERRUPTIBLE = """
import logging, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from fake_k8s.harness import FakeTree
from e2e_dra.hostkit import handling_interrupts
from e2e_dra.localupcluster import Cluster
logging.basicConfig(level=logging.INFO)  # a standalone user shows the engine's records
env = {env!r}
cluster = Cluster(
    Path({source!r}), Path({logs!r}), wait_for_nodes=False, host_lock=Path({host_lock!r})
)
with handling_interrupts(terminated=None):  # the script is the program's edge
    cluster.start("0-initial", Path({bin_dir!r}), env)
    print("READY", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize(("signal_name", "exit_code"), [("SIGINT", -2), ("SIGTERM", -15)])
def test_interrupted_run_leaves_no_process_and_says_so(
    tree: FakeTree, tmp_path: Path, signal_name: str, exit_code: int
) -> None:
    import signal

    code = INTERRUPTIBLE.format(
        tests=str(Path(__file__).parent),
        env=tree.env,
        source=str(tree.source_dir),
        logs=str(tmp_path / "logs"),
        bin_dir=str(tree.old_bin),
        host_lock=str(tree.host_lock),
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "READY"
        assert len(tree.starts("kube-proxy")) == 1 and leftovers(tree) != {}
        child.send_signal(getattr(signal, signal_name))
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == exit_code
    assert f"interrupted ({signal_name})" in " ".join(stderr.split())
    assert leftovers(tree) == {}
    assert (
        "killing: interrupted" in (tmp_path / "logs" / "kube-apiserver-0-initial.log").read_text()
    )


def test_environment_values_must_be_strings(tree: FakeTree, cluster: Cluster) -> None:
    env = {**tree.env, "RUNTIME_CONFIG": ("resource.k8s.io/v1beta1",), "X": 1}
    with pytest.raises(
        ClusterError, match=r"environment values must be strings: RUNTIME_CONFIG, X$"
    ):
        cluster.start("0-initial", tree.old_bin, env)  # type: ignore[arg-type]
    assert tree.starts("etcd") == []


@pytest.mark.parametrize("generation", ["new", "old"])
def test_the_scripts_temporary_files_go_with_the_cluster(
    tree: FakeTree, cluster: Cluster, generation: str
) -> None:
    """What the script makes with mktemp (etcd's data dir among it) lands in the cluster's own
    directory next to the host lock, and is removed when the cluster stops: left in /tmp, one
    main job's clusters added hundreds of MB, and the kubelet evicted pods for DiskPressure."""
    cluster.start("0-initial", tree.old_bin, {**tree.env, "FAKE_SCRIPT_GENERATION": generation})
    scratch = tree.host_lock.with_name(tree.host_lock.name + ".d")
    [mine] = list(scratch.iterdir())
    made = sorted(p.name for p in mine.iterdir())
    assert len(made) >= 2, made  # the script's TMP_DIR and etcd's data dir
    assert cluster.setting("LOG_DIR") == str(mine)  # the API server's audit log goes there too
    cluster.stop()
    assert not mine.exists()


def test_a_held_node_starts_when_asked_while_another_cluster_shares_the_host_lock(
    tree: FakeTree, cluster: Cluster, tmp_path: Path
) -> None:
    """The next cluster's control plane runs beside the last cluster; its kubelet and
    kube-proxy start only once asked (the last cluster's node is gone by then)."""
    cluster.start("0-initial", tree.old_bin, tree.env)
    other = make_fake_tree(tmp_path / "other")
    after = Cluster(
        other.source_dir,
        tmp_path / "logs-after",
        wait_for_nodes=False,
        ready_timeout=30,
        host_lock=tree.host_lock,  # the same host: one lock
    )
    try:
        after.start("0-initial", other.old_bin, other.env, hold_node=True)
        assert after.node_held
        control_plane = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
        assert {name for name, _ in other.start_order()} == control_plane
        assert after.settings["API_SECURE_PORT"] == str(other.ports["API_SECURE_PORT"])

        cluster.stop()
        fd = os.open(tree.host_lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # the later cluster still holds the host
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)

        after.start_node()
        assert not after.node_held
        assert [name for name, _ in other.start_order()][-2:] == ["kubelet", "kube-proxy"]
        assert set(after.running) == set(ALL)
        with pytest.raises(ClusterError, match="no node is held back"):
            after.start_node()
    finally:
        after.stop()
    assert leftovers(other) == {}


def test_a_second_control_plane_takes_other_ports_and_certificates() -> None:
    assert slot_settings(0) == {}
    assert slot_settings(1) == {
        "ETCD_PORT": "2389",
        "API_SECURE_PORT": "6453",
        "KCM_SECURE_PORT": "10267",
        "SCHEDULER_SECURE_PORT": "10269",
        "CERT_DIR": "/var/run/kubernetes-1",
    }


def test_a_held_node_is_not_started_on_a_control_plane_that_died(
    tree: FakeTree, cluster: Cluster
) -> None:
    cluster.start("0-initial", tree.old_bin, tree.env, hold_node=True)
    apiserver = cluster.running["kube-apiserver"]
    os.killpg(apiserver.pid, signal.SIGKILL)
    poll(lambda: not apiserver.running(), timeout=10, interval=0.05)

    with pytest.raises(ClusterError, match=r"did not last: kube-apiserver-0-initial .* ended"):
        cluster.start_node()
    assert tree.starts("kubelet") == []
    assert cluster.running == {}  # stopped: nothing is left waiting for a node
