"""Debian packages the node runtime takes as they are.

runc, the CNI plugins and busybox from Debian are recent enough for a test node; containerd and
etcd are not (see ``_gobuilds``). ``sudo`` is here because hack/local-up-cluster.sh runs the kubelet
and kube-proxy with ``sudo`` and signals every component with ``sudo kill`` even when run as root.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterable

from e2e_dra.errors import ProvisionError

logger = logging.getLogger(__name__)

#: package -> a file it installs that we need (what we check for).
PACKAGES: dict[str, str] = {
    "runc": "/usr/sbin/runc",
    "containernetworking-plugins": "/usr/lib/cni/bridge",
    "busybox-static": "/bin/busybox",
    "sudo": "/usr/bin/sudo",
    "iptables": "/usr/sbin/iptables",
    "conntrack": "/usr/sbin/conntrack",
    "openssl": "/usr/bin/openssl",
    "curl": "/usr/bin/curl",
    "iproute2": "/usr/bin/ss",
}


def missing_packages(packages: dict[str, str] = PACKAGES) -> list[str]:
    """Packages whose file is not there: the file, not dpkg's database, is what we run."""
    return sorted(name for name, path in packages.items() if not os.path.exists(path))


def install(packages: Iterable[str]) -> None:
    """``apt-get install`` the packages; only on Debian-like hosts, only as root."""
    wanted = sorted(set(packages))
    if not wanted:
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise ProvisionError(
            f"missing Debian packages {', '.join(wanted)}: install them "
            "(apt-get install -y " + " ".join(wanted) + ") or run `e2e-dra provision` as root "
            "on a Debian/Ubuntu host"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    logger.info(f"apt: installing {', '.join(wanted)}")
    for argv in (
        [apt, "update", "-q"],
        [apt, "install", "-y", "-q", "--no-install-recommends", *wanted],
    ):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise ProvisionError(
                f"`{' '.join(argv[:2])}` failed ({proc.returncode}) for {', '.join(wanted)}: "
                + " | ".join(tail)
            )
