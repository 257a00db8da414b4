"""What hack/local-up-cluster.sh must be told so its kubelet runs on this kind of host.

Test machines have cgroup v1 and no systemd: the kubelet needs the cgroupfs driver, and kubelets
that refuse cgroup v1 by default (1.35 and newer) need ``--fail-cgroupv1=false``. Cluster DNS is
off because CoreDNS would have to be pulled from a registry. The script reads
``KUBE_ENABLE_CLUSTER_DNS`` (not ``ENABLE_CLUSTER_DNS``), so both are set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

#: directories a DRA kubelet plugin and the kubelet share; created up front so that a driver
#: running outside the kubelet can bind its sockets before the kubelet first starts.
HOST_DIRS = (
    Path("/var/lib/kubelet/plugins"),
    Path("/var/lib/kubelet/plugins_registry"),
    Path("/var/run/cdi"),
)


def uses_cgroup_v1(cgroup_root: Path = Path("/sys/fs/cgroup")) -> bool:
    """A unified (v2) hierarchy has cgroup.controllers at its root; v1 and hybrid do not."""
    return not (cgroup_root / "cgroup.controllers").exists()


def kubelet_flags(*, cgroup_v1: bool) -> list[str]:
    return ["--fail-cgroupv1=false"] if cgroup_v1 else []


def local_up_env(
    *,
    runtime_endpoint: str,
    path_dirs: Sequence[Path],
    cgroup_v1: bool,
    eviction_hard: str,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables to add to hack/local-up-cluster.sh's environment (not the whole env).

    ``eviction_hard`` is ``EVICTION_HARD`` (:mod:`e2e_dra.settings`: the user's, else floors in
    bytes). ``base`` is the environment the script inherits (ours): its ``PATH`` and
    ``KUBELET_FLAGS`` are passed on, with our directories and flags added.
    """
    base = os.environ if base is None else base
    flags = " ".join([base.get("KUBELET_FLAGS", "").strip(), *kubelet_flags(cgroup_v1=cgroup_v1)])
    path = ":".join(
        [*(str(d) for d in path_dirs), base.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")]
    )
    return {
        "CONTAINER_RUNTIME_ENDPOINT": runtime_endpoint,
        "PATH": path,
        "CGROUP_DRIVER": "cgroupfs",
        "KUBELET_FLAGS": flags.strip(),
        "FAIL_SWAP_ON": "false",
        "ENABLE_CLUSTER_DNS": "false",
        "KUBE_ENABLE_CLUSTER_DNS": "false",
        "EVICTION_HARD": eviction_hard,
    }


def missing_host_dirs() -> list[Path]:
    return [d for d in HOST_DIRS if not d.is_dir()]


def make_host_dirs() -> None:
    for d in HOST_DIRS:
        d.mkdir(parents=True, exist_ok=True)
