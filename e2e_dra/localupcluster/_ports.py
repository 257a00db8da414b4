"""Who is listening on a port: a stranger there makes a component fail in confusing ways."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Listener:
    port: int
    pid: int | None
    command: str | None

    def describe(self) -> str:
        if self.pid is None:
            return f"port {self.port} is in use by a process we cannot see"
        return f"port {self.port} is in use by pid {self.pid} ({self.command})"


def listener(port: int) -> Listener | None:
    """The process listening on TCP ``port`` on any address, or None when the port is free."""
    pids = [
        conn.pid
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
    ]
    if not pids:
        return None
    for pid in pids:
        if pid is None:
            continue
        try:
            return Listener(port, pid, " ".join(psutil.Process(pid).cmdline())[:200])
        except psutil.Error:
            continue
    return Listener(port, None, None)


def process_group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
