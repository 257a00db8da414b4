"""The node's own logs of each cluster state, kept next to its components' logs.

A failure in a pod or a prepare call is often explained by containerd's log or by what the pod's
container printed, and neither lives in the suite's artifacts by itself: containerd's log spans
every run on this host, and the kubelet deletes a pod's logs together with the pod. So when a
cluster state ends (a restart, or the end of the suite) its part of containerd's log becomes
``containerd-<state>.log`` and every pod's container logs are copied under
``pods-<state>/<namespace>_<pod>_<uid>/<container>/``, each file bounded to its last
:data:`MAX_BYTES`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from e2e_dra.hostkit import atomic_copy_tail

POD_LOGS = Path("/var/log/pods")
"""Where the kubelet keeps the containers' logs (its default ``--pod-logs-dir``)."""
MAX_BYTES = 8 << 20
"""Per file: a failure needs the end of a log, and a run must not fill the disk."""
MAX_FILES = 500
"""Per state: the test pods are a few dozen; more means something else runs on this node."""

logger = logging.getLogger(__name__)


class StateLogs:
    """Copies containerd's log and the pods' logs of each cluster state next to its components'
    logs."""

    def __init__(self, containerd_log: Path, pod_logs: Path = POD_LOGS) -> None:
        self.containerd_log = containerd_log
        self.pod_logs = pod_logs
        self._state: str | None = None
        self._into = Path()
        self._since = 0

    def begin(self, state: str, into: Path) -> None:
        """``state`` starts, its components logging into ``into``: containerd's log counts from
        here on."""
        self._state = state
        self._into = into
        self._since = _size(self.containerd_log)

    def end(self) -> list[Path]:
        """The current state ends: copy its logs; what was copied (nothing without a state)."""
        state, self._state = self._state, None
        if state is None:
            return []
        self._into.mkdir(parents=True, exist_ok=True)
        copied = []
        if self.containerd_log.is_file():
            target = self._into / f"containerd-{state}.log"
            self._since = atomic_copy_tail(
                self.containerd_log, target, since=self._since, limit=MAX_BYTES
            )
            copied.append(target)
        sources = pod_log_files(self.pod_logs)
        if len(sources) > MAX_FILES:
            logger.info(f"{self.pod_logs}: {len(sources)} pod logs, copying the first {MAX_FILES}")
        for source in sources[:MAX_FILES]:
            target = self._into / f"pods-{state}" / source.relative_to(self.pod_logs)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                atomic_copy_tail(source, target, limit=MAX_BYTES)
            except FileNotFoundError:  # its pod was deleted meanwhile
                continue
            copied.append(target)
        return copied


def pod_log_files(root: Path) -> list[Path]:
    """The kubelet's container logs under ``root`` (``<pod>/<container>/<n>.log``), sorted. The
    kubelet removes a deleted pod's directory whenever it likes, also while this looks: a
    directory gone meanwhile has no logs (``Path.glob`` raises there)."""
    return sorted(
        log
        for pod in _entries(root)
        for container in _entries(pod)
        for log in _entries(container)
        if log.name.endswith(".log")
    )


def _entries(directory: Path) -> list[Path]:
    """What ``directory`` holds but hidden entries; nothing when it is gone or no directory."""
    try:
        with os.scandir(directory) as entries:
            return [Path(entry.path) for entry in entries if not entry.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
