"""What hack/local-up-cluster.sh must be told so its kubelet runs on this kind of host.

Test machines have cgroup v1 and no systemd: the kubelet needs the cgroupfs driver, and kubelets
that refuse cgroup v1 by default (1.35 and newer) need ``--fail-cgroupv1=false``. Cluster DNS is
off because CoreDNS would have to be pulled from a registry. The script reads
``KUBE_ENABLE_CLUSTER_DNS`` (not ``ENABLE_CLUSTER_DNS``), so both are set.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

#: directories a DRA kubelet plugin and the kubelet share; created up front so that a driver
#: running outside the kubelet can bind its sockets before the kubelet first starts.
HOST_DIRS = (
    Path("/var/lib/kubelet/plugins"),
    Path("/var/lib/kubelet/plugins_registry"),
    Path("/var/run/cdi"),
)


#: the kubelet's root directory (local-up-cluster.sh's default): the filesystem it calls nodefs.
KUBELET_ROOT = Path("/var/lib/kubelet")

_THRESHOLD = re.compile(r"^\s*([a-z.]+[A-Za-z]*)\s*<\s*([0-9.]+)\s*(%|Ki|Mi|Gi|Ti|k|M|G|T)?\s*$")
_UNITS = {
    None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}  # fmt: skip


def disk_pressure(eviction_hard: str, filesystems: Mapping[str, Path]) -> str | None:
    """Why the kubelet would report DiskPressure as soon as it starts, and so evict every pod of
    the run: a filesystem with less free space (or fewer free inodes) than ``eviction_hard``
    (``EVICTION_HARD``) allows. ``filesystems``: ``nodefs`` (the kubelet's root) and
    ``imagefs`` (the container runtime's) to the directory each is for. None when all is well.

    Free space on a shared disk changes under a run; this only catches the run that could not
    pass from its start, with one line instead of evicted pods in every subtest.
    """
    for item in eviction_hard.split(","):
        found = _THRESHOLD.match(item)
        if found is None:
            continue
        signal, number, unit = found.groups()
        fs, _, resource = signal.partition(".")
        if fs not in filesystems or resource not in {"available", "inodesFree"}:
            continue
        where = filesystems[fs]
        existing = next(p for p in (where, *where.parents) if p.exists())
        stats = os.statvfs(existing)
        if resource == "available":
            total, free = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
            have = f"{free / 10**9:.1f} GB free"
        else:
            total, free = stats.f_files, stats.f_favail
            have = f"{free} inodes free"
        floor = float(number) * (total / 100 if unit == "%" else _UNITS[unit])
        if free < floor:
            return (
                f"only {have} on the filesystem of {where}: the kubelet evicts every pod while "
                f"{signal} is below {number}{unit or ''} (EVICTION_HARD={eviction_hard}); free "
                "some disk space, or lower that floor in EVICTION_HARD"
            )
    return None


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
