"""Who is listening on a port: a stranger there makes a component fail in confusing ways."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    port: int
    pid: int | None
    command: str | None

    def describe(self) -> str:
        if self.pid is None:
            return f"port {self.port} is in use by a process we cannot see"
        return f"port {self.port} is in use by pid {self.pid} ({self.command})"


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def _owner(inodes: set[str]) -> tuple[int, str] | None:
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in wanted:
                    raw = (proc / "cmdline").read_bytes().replace(b"\0", b" ").strip()
                    return int(proc.name), raw.decode(errors="replace")[:200]
            except OSError:
                continue
    return None


def listener(port: int) -> Listener | None:
    """The process listening on TCP ``port`` on any address, or None when the port is free."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    owner = _owner(inodes)
    if owner is None:
        return Listener(port, None, None)
    return Listener(port, owner[0], owner[1])


def process_group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
