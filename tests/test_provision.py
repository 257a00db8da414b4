"""The node runtime's pure parts: rendered configs, image archives, state detection."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from environment import Environ

from e2e_dra import cli
from e2e_dra._cache import CacheEntry
from e2e_dra.errors import ProvisionError
from e2e_dra.provision import (
    PAUSE_IMAGE,
    TEST_IMAGE,
    NodeRuntime,
    _apt,
    _cni,
    _containerd,
    _gobuilds,
    _images,
    _kubelet,
    ensure_node_runtime,
)
from e2e_dra.provision._containerd import ContainerdLayout
from e2e_dra.provision._daemon import Daemon


@pytest.fixture
def isolated(tmp_path: Path, environ: Environ) -> Path:
    """Empty cache and node dirs, so nothing of the host's real runtime is seen or touched."""
    environ.set("E2E_DRA_CACHE_DIR", str(tmp_path / "cache"))
    environ.set("E2E_DRA_NODE_DIR", str(tmp_path / "node"))
    for var in ("E2E_DRA_CONTAINERD_VERSION", "E2E_DRA_CFSSL_VERSION", "E2E_DRA_ETCD_VERSION"):
        environ.unset(var)
    return tmp_path


# --- containerd config ---------------------------------------------------------------------


def test_containerd_config_keeps_all_state_under_its_dir_and_reads_cdi_specs(tmp_path: Path):
    layout = ContainerdLayout(tmp_path / "containerd")
    config = tomllib.loads(
        _containerd.render_config(
            layout, sandbox_image=PAUSE_IMAGE, runc=Path("/x/runc"), restrict_oom_score_adj=True
        )
    )
    assert config["version"] == 3
    assert config["root"] == str(layout.base / "root")
    assert config["state"] == str(layout.base / "state")
    assert config["grpc"]["address"] == str(layout.socket)
    plugins = config["plugins"]
    runtime = plugins["io.containerd.cri.v1.runtime"]
    assert "/var/run/cdi" in runtime["cdi_spec_dirs"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["cni"]["conf_dir"] == str(tmp_path / "cni" / "net.d")
    assert runtime["cni"]["bin_dirs"] == [str(_cni.CNI_BIN_DIR)]
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {"BinaryName": "/x/runc", "SystemdCgroup": False}
    images = plugins["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == PAUSE_IMAGE
    assert layout.endpoint == f"unix://{layout.socket}"


def test_oom_score_clamping_follows_the_capability(tmp_path: Path, monkeypatch):
    layout = ContainerdLayout(tmp_path)
    for capable in (True, False):
        monkeypatch.setattr(_containerd, "can_lower_oom_score_adj", lambda c=capable: c)
        config = tomllib.loads(_containerd.render_config(layout, sandbox_image=PAUSE_IMAGE))
        assert config["plugins"]["io.containerd.cri.v1.runtime"]["restrict_oom_score_adj"] is (
            not capable
        )


def test_config_is_rewritten_only_when_it_changes(tmp_path: Path):
    layout = ContainerdLayout(tmp_path / "containerd")
    assert _containerd.write_config(layout, sandbox_image=PAUSE_IMAGE)
    assert not _containerd.write_config(layout, sandbox_image=PAUSE_IMAGE)
    assert _containerd.write_config(layout, sandbox_image="example.invalid/pause:1")
    assert sorted(p.name for p in layout.base.iterdir()) == ["config.toml"]  # no temp file left


# --- CNI ------------------------------------------------------------------------------------


def test_pod_network_reaches_nowhere():
    (bridge,) = _cni.conflist()["plugins"]
    assert bridge["type"] == "bridge"
    assert bridge["isGateway"] is False and bridge["isDefaultGateway"] is False
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["routes"] == []
    assert bridge["ipam"]["type"] == "host-local"


def test_cni_plugins_are_copied_once_and_missing_ones_are_named(tmp_path: Path):
    source, target = tmp_path / "src", tmp_path / "opt"
    source.mkdir()
    for plugin in ("bridge", "host-local"):
        (source / plugin).write_text("#!/bin/sh\n")
        (source / plugin).chmod(0o755)
    with pytest.raises(ProvisionError, match=r"loopback is missing"):
        _cni.install_plugins(source, target)
    (source / "loopback").write_text("#!/bin/sh\n")
    (source / "loopback").chmod(0o755)
    assert sorted(_cni.install_plugins(source, target)) == ["bridge", "host-local", "loopback"]
    assert _cni.missing_plugins(target) == []
    assert _cni.install_plugins(source, target) == []


# --- images ---------------------------------------------------------------------------------


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def _read(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read()


def test_busybox_layer_links_every_applet_and_is_reproducible():
    layer = _images.busybox_layer(b"\x7fELF fake busybox", ["sh", "sleep", "env", "busybox"])
    assert layer == _images.busybox_layer(b"\x7fELF fake busybox", ["env", "sleep", "sh"])
    members = _members(layer)
    assert members["bin/busybox"].mode == 0o755
    for applet in ("sh", "sleep", "env"):
        assert members[f"bin/{applet}"].issym() and members[f"bin/{applet}"].linkname == "busybox"
    assert members["tmp"].mode == 0o1777
    assert {m.mtime for m in members.values()} == {0}


def test_image_archive_is_a_valid_oci_layout_with_the_exact_name():
    layer = _images.busybox_layer(b"busybox", ["sh"])
    image = _images.image_archive(TEST_IMAGE, layer, entrypoint=None, cmd=["sh"], arch="amd64")
    assert json.loads(_read(image.data, "oci-layout")) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(_read(image.data, "index.json"))["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == TEST_IMAGE
    assert entry["digest"] == image.manifest_digest

    def blob(digest: str) -> bytes:
        data = _read(image.data, "blobs/sha256/" + digest.split(":")[1])
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest  # content-addressed
        return data

    manifest = json.loads(blob(entry["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))
    (layer_ref,) = manifest["layers"]
    assert blob(layer_ref["digest"]) == layer
    assert config["rootfs"]["diff_ids"] == [layer_ref["digest"]]
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["config"]["Cmd"] == ["sh"]


def test_digest_tells_images_apart_and_is_stable():
    layer = _images.busybox_layer(b"busybox", ["sh"])

    def build(name, entrypoint):
        return _images.image_archive(name, layer, entrypoint=entrypoint, cmd=None, arch="amd64")

    assert build(PAUSE_IMAGE, ["/bin/sh"]).data == build(PAUSE_IMAGE, ["/bin/sh"]).data
    assert build(PAUSE_IMAGE, ["/bin/sh"]).manifest_digest != (
        build(PAUSE_IMAGE, ["/bin/true"]).manifest_digest
    )


def test_node_images_need_a_busybox_with_sh(tmp_path: Path):
    fake = tmp_path / "busybox"
    fake.write_text("#!/bin/sh\necho true false\n")
    fake.chmod(0o755)
    with pytest.raises(ProvisionError, match="no `sh` applet"):
        _images.node_images(fake)
    with pytest.raises(ProvisionError, match="busybox-static"):
        _images.node_images(tmp_path / "absent")


def test_node_images_are_pause_and_test_image(tmp_path: Path):
    fake = tmp_path / "busybox"
    fake.write_text("#!/bin/sh\necho sh sleep\n")
    fake.chmod(0o755)
    pause, test = _images.node_images(fake)
    assert (pause.name, test.name) == (PAUSE_IMAGE, TEST_IMAGE)
    assert ":" in TEST_IMAGE and not TEST_IMAGE.endswith(":latest")


# --- tools and versions ---------------------------------------------------------------------


def test_etcd_version_comes_from_the_kubernetes_tree(tmp_path: Path, environ: Environ):
    environ.unset("E2E_DRA_ETCD_VERSION")
    lib = tmp_path / "hack" / "lib"
    lib.mkdir(parents=True)
    (lib / "etcd.sh").write_text("#!/bin/bash\n\nETCD_VERSION=${ETCD_VERSION:-3.6.4}\n")
    assert _gobuilds.etcd_version_for(tmp_path) == "v3.6.4"
    assert _gobuilds.etcd_version_for(None) == _gobuilds.DEFAULT_ETCD_VERSION
    environ.set("E2E_DRA_ETCD_VERSION", "3.5.21")
    assert _gobuilds.etcd_version_for(tmp_path) == "v3.5.21"


def test_unreadable_or_odd_etcd_settings_are_named(tmp_path: Path, environ: Environ):
    environ.unset("E2E_DRA_ETCD_VERSION")
    with pytest.raises(ProvisionError, match=r"etcd\.sh"):
        _gobuilds.etcd_version_for(tmp_path)
    (tmp_path / "hack" / "lib").mkdir(parents=True)
    (tmp_path / "hack" / "lib" / "etcd.sh").write_text("ETCD_VERSION=latest\n")
    with pytest.raises(ProvisionError, match="does not set ETCD_VERSION"):
        _gobuilds.etcd_version_for(tmp_path)
    environ.set("E2E_DRA_CONTAINERD_VERSION", "2.x")
    with pytest.raises(ProvisionError, match=r"not a release version: '2\.x'"):
        _gobuilds.containerd_tool()


def test_tools_are_cached_per_version(isolated: Path):
    tool = _gobuilds.cfssl_tool("v1.6.5")
    assert tool.key == "cfssl-v1.6.5"
    assert _gobuilds.cached_bin_dir(tool) is None
    entry = CacheEntry(_gobuilds.runtime_cache_dir(), tool.key)

    def binaries(tmp: Path) -> None:
        (tmp / "bin").mkdir()
        for name in tool.binaries:
            (tmp / "bin" / name).write_text("#!/bin/sh\n")

    entry.fill(binaries)
    assert _gobuilds.cached_bin_dir(tool) == entry.path / "bin"
    assert _gobuilds.cached_bin_dir(_gobuilds.cfssl_tool("v1.6.4")) is None


def test_a_tool_entry_without_its_binaries_is_no_hit(isolated: Path):
    # Marked complete but empty (an older or broken filler): local-up-cluster.sh would find no
    # cfssl and try GitHub for minutes. Such an entry is no hit and is rebuilt.
    tool = _gobuilds.cfssl_tool("v1.6.5")
    CacheEntry(_gobuilds.runtime_cache_dir(), tool.key).fill(lambda tmp: (tmp / "bin").mkdir())
    assert _gobuilds.cached_bin_dir(tool) is None


def test_containerd_is_installed_from_its_cmd_packages():
    tool = _gobuilds.containerd_tool("2.4.2")
    assert tool.version == "v2.4.2"
    assert tool.binaries == ("containerd", "ctr", "containerd-shim-runc-v2")
    assert all(p.startswith(tool.module + "/cmd/") for p in tool.packages)
    assert f"version.Version={tool.version}" in tool.ldflags
    assert _gobuilds.etcd_tool("3.7.0").main_source is not None  # its go.mod has replaces


# --- what local-up-cluster.sh is told -------------------------------------------------------


def test_local_up_env_for_a_cgroup_v1_host():
    env = _kubelet.local_up_env(
        runtime_endpoint="unix:///n/containerd.sock",
        path_dirs=[Path("/e/etcd"), Path("/c/cfssl")],
        cgroup_v1=True,
        eviction_hard="memory.available<1Gi",
        base={"PATH": "/usr/bin", "KUBELET_FLAGS": "--v=4"},
    )
    assert env["CONTAINER_RUNTIME_ENDPOINT"] == "unix:///n/containerd.sock"
    assert env["PATH"] == "/e/etcd:/c/cfssl:/usr/bin"
    assert env["CGROUP_DRIVER"] == "cgroupfs"
    assert env["KUBELET_FLAGS"] == "--v=4 --fail-cgroupv1=false"
    assert env["EVICTION_HARD"] == "memory.available<1Gi"
    # the script reads KUBE_ENABLE_CLUSTER_DNS; CoreDNS cannot be pulled here
    assert env["KUBE_ENABLE_CLUSTER_DNS"] == "false"
    v2 = _kubelet.local_up_env(
        runtime_endpoint="unix:///s", path_dirs=[], cgroup_v1=False, eviction_hard="", base={}
    )
    assert v2["KUBELET_FLAGS"] == ""


def test_eviction_floors_are_bytes_unless_the_user_sets_them(environ: Environ):
    environ.unset("EVICTION_HARD")
    env = _node_env()
    assert "%" not in env["EVICTION_HARD"].replace("inodesFree<5%", "")  # no share of the disk
    assert "imagefs.available<2Gi" in env["EVICTION_HARD"]
    mine = "memory.available<1Gi"
    environ.set("EVICTION_HARD", mine)
    assert _node_env()["EVICTION_HARD"] == mine


def _node_env() -> dict[str, str]:
    """What a prepared node hands local-up-cluster.sh."""
    return NodeRuntime(root=Path("/nonexistent"), runtime_endpoint="unix:///s").env()


def test_cgroup_version_is_detected_from_the_hierarchy(tmp_path: Path):
    assert _kubelet.uses_cgroup_v1(tmp_path)
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    assert not _kubelet.uses_cgroup_v1(tmp_path)


def test_missing_packages_are_those_whose_file_is_absent(tmp_path: Path):
    (tmp_path / "runc").write_text("")
    packages = {"runc": str(tmp_path / "runc"), "sudo": str(tmp_path / "sudo")}
    assert _apt.missing_packages(packages) == ["sudo"]


# --- daemons --------------------------------------------------------------------------------


def test_daemon_is_found_by_pid_file_and_stopped_by_pid(tmp_path: Path):
    sleep = Daemon("sleep", tmp_path / "sleep.pid", tmp_path / "sleep.log")
    assert sleep.running_pid() is None
    pid = sleep.start(["sleep", "300"], env=os.environ, ready=lambda: True)
    try:
        assert sleep.running_pid() == pid
        assert os.getsid(pid) == pid  # own session: Ctrl-C on our terminal does not reach it
        assert Daemon("containerd", sleep.pid_file, sleep.log_file).running_pid() is None
    finally:
        assert sleep.stop()
    assert sleep.running_pid() is None and not sleep.pid_file.exists()
    assert not sleep.stop()


def test_a_stale_pid_file_is_not_trusted(tmp_path: Path):
    done = subprocess.run(["true"], check=True)
    assert done.returncode == 0
    pid_file = tmp_path / "x.pid"
    pid_file.write_text(f"{os.getpid()}\n")  # alive, but it is python, not "containerd"
    assert Daemon("containerd", pid_file, tmp_path / "x.log").running_pid() is None
    pid_file.write_text("garbage\n")
    assert Daemon("containerd", pid_file, tmp_path / "x.log").running_pid() is None
    pid_file.write_text(f"{os.getpid()} 1 python\n")  # the program, but not its start time
    assert Daemon("python", pid_file, tmp_path / "x.log").running_pid() is None


def test_a_daemon_that_dies_at_once_is_reported_with_its_log(tmp_path: Path):
    broken = Daemon("sh", tmp_path / "sh.pid", tmp_path / "sh.log")
    with pytest.raises(ProvisionError, match=r"sh exited with status 3 .*no config here"):
        broken.start(
            ["sh", "-c", "echo no config here; exit 3"], env=os.environ, ready=lambda: False
        )


# --- state detection ------------------------------------------------------------------------


def test_check_only_names_every_missing_piece_and_changes_nothing(isolated: Path):
    with pytest.raises(ProvisionError) as caught:
        ensure_node_runtime(None, check_only=True)
    message = str(caught.value)
    for piece in (
        "containerd (not there)",
        "etcd (not there)",
        "cfssl (not there)",
        "containerd daemon",
        "images",
    ):
        assert piece in message
    assert message.endswith("run `e2e-dra provision`")
    assert "\n" not in message
    assert not (isolated / "node").exists()
    assert not (isolated / "cache" / "runtime").exists()


def test_provision_check_from_the_command_line(isolated: Path, capsys):
    assert cli.main(["provision", "--check", "--runtime-only"]) == 7  # provisioning
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("e2e-dra: error: node runtime incomplete:")


def test_provision_is_listed_in_help():
    proc = subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", "provision", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    assert "--check" in proc.stdout and "--stop" in proc.stdout


def test_too_little_free_disk_for_eviction_hard_is_one_line_naming_it(tmp_path: Path):
    """The kubelet evicts every pod while a filesystem is under EVICTION_HARD's floor (a soak
    saw it when other work filled a shared disk): said before a cluster starts."""
    from e2e_dra.provision._kubelet import disk_pressure

    stats = os.statvfs(tmp_path)
    free_mi = stats.f_bavail * stats.f_frsize // 2**20
    where = {"nodefs": tmp_path / "kubelet", "imagefs": tmp_path}  # the first does not exist yet
    ours = "memory.available<100Mi,nodefs.available<1Mi,imagefs.available<1Mi,nodefs.inodesFree<1%"
    assert disk_pressure(ours, where) is None

    above = f"memory.available<100Mi,nodefs.available<{free_mi + 1024}Mi"
    said = disk_pressure(above, where)
    assert said is not None
    assert re.match(r"only \d+\.\d GB free on the filesystem of ", said), said
    assert f"{tmp_path / 'kubelet'}: the kubelet evicts every pod while nodefs.available" in said
    assert f"is below {free_mi + 1024}Mi (EVICTION_HARD={above})" in said

    assert "imagefs.available is below 100%" in (
        disk_pressure("imagefs.available<100%", where) or ""
    )
    assert "inodes free" in (disk_pressure("nodefs.inodesFree<100%", where) or "")
    assert disk_pressure("pid.available<10,nodefs.available<nonsense", where) is None
