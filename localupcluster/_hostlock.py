"""One real cluster per host: ports, /var/run/kubernetes and the kubelet's dirs are shared.

``Cluster.start`` holds an exclusive ``flock`` on ``E2E_DRA_HOST_LOCK`` (default
``/tmp/e2e-dra-host.lock``) until ``stop``. When an ancestor process already holds it (someone ran
``flock /tmp/e2e-dra-host.lock pytest ...``) we are inside that reservation and go ahead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from e2e_dra._console import say

DEFAULT_PATH = "/tmp/e2e-dra-host.lock"


def lock_path() -> Path:
    return Path(os.environ.get("E2E_DRA_HOST_LOCK") or DEFAULT_PATH)


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat[stat.rfind(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _holders(path: Path) -> set[int]:
    """PIDs holding a flock on ``path`` according to /proc/locks."""
    try:
        inode = path.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return set()
    holders = set()
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
            with contextlib.suppress(ValueError):
                holders.add(int(fields[4]))
    return holders


class HostLock:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or lock_path()
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = _holders(self.path)
            if holders & _ancestors():
                os.close(fd)
                return
            who = ", ".join(f"pid {pid}" for pid in sorted(holders)) or "another process"
            say(f"waiting for another e2e-dra cluster on this host ({who} holds {self.path}) ...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
