"""This machine as Go and Kubernetes release files name it (``linux``, ``amd64``), and as a
report describes it (cores, memory, kernel, cgroup version)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
CGROUP2_CONTROLLERS = Path("/sys/fs/cgroup/cgroup.controllers")  # only a unified (v2) mount has it
MEMINFO_READ = 64 << 10

_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def host_platform() -> tuple[str, str]:
    """This machine as Go names it: ``("linux", "amd64")``."""
    machine = platform.machine().lower()
    return platform.system().lower(), _GO_ARCH.get(machine, machine)


def describe_machine() -> str:
    """``x86_64, 2 CPUs, 24 GiB, Linux 6.1.0, cgroup v1``: what a reader of a run's report
    needs to compare its times and tell its node apart; a part that cannot be read is left out."""
    parts = [platform.machine() or "unknown machine"]
    if os.cpu_count():
        parts.append(f"{os.cpu_count()} CPUs")
    memory = _memory_gib()
    if memory is not None:
        parts.append(f"{memory} GiB")
    parts.append(f"{platform.system()} {platform.release()}".strip())
    if platform.system() == "Linux":
        parts.append("cgroup v2" if CGROUP2_CONTROLLERS.exists() else "cgroup v1")
    return ", ".join(parts)


def _memory_gib() -> int | None:
    try:
        with MEMINFO.open("rb") as f:
            text = f.read(MEMINFO_READ).decode("ascii", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdecimal():
                return round(int(fields[1]) / (1 << 20))
    return None
