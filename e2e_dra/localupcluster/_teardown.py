"""Stopping every process of a cluster, in reverse start order, whatever one of them does.

One process that will not die must not keep the others running: each failure is logged and
collected, and the caller decides what it means (the host lock stays held while a process lives).
"""

from __future__ import annotations

from collections.abc import Iterable

from e2e_dra.hostkit import Attempts
from e2e_dra.localupcluster._components import COMPONENTS
from e2e_dra.localupcluster._log import Log
from e2e_dra.localupcluster.cmd import Cmd


def stop_processes(
    helpers: Iterable[Cmd],
    running: dict[str, Cmd],
    script: Cmd | None,
    *,
    reason: str,
    log: Log,
) -> tuple[list[str], list[BaseException]]:
    """Stop the helpers still running, the components in reverse start order (taking them out of
    ``running``), then the script. Returns the names of those that were still running, and the
    failures to stop."""
    stopped: list[str] = []
    attempts = Attempts("cluster stop", log.warning)

    def attempt(cmd: Cmd) -> None:
        attempts(f"stop {cmd.name}", lambda: cmd.stop(reason))

    for helper in helpers:
        if helper.running():
            attempt(helper)
    for component in reversed(COMPONENTS):
        cmd = running.pop(component, None)
        if cmd is not None:
            if cmd.running():
                log.info(f"stopping {cmd.name} (pid {cmd.pid})")
                stopped.append(cmd.name)
            attempt(cmd)
    if script is not None:
        if script.running():
            stopped.append(script.name)
        attempt(script)
    return stopped, attempts.errors
