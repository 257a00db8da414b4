"""A control plane started before the step that brings its cluster up.

Between two clusters (the gate cycle's subtests each have their own) the kubelet of the one that
ends needs about 30 s to wipe the drivers' ResourceSlices. The next cluster's control plane needs
no node, so it starts meanwhile, its node held back; the bring-up then only starts the node. A
bring-up asked for other arguments than the ones started early gets a cluster of its own, and
the early one is stopped: what starts early must never be taken for something else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.localupcluster import Cluster

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BringUpArgs:
    """What a bring-up is asked for: the cluster's logs, state, binaries, environment, gates."""

    log_dir: Path
    state: str
    bin_dir: Path
    env: dict[str, str]
    gates: str = ""


class EarlyStart:
    """At most one control plane started early, and the arguments it was started for."""

    def __init__(self, new_cluster: Callable[[Path], Cluster]) -> None:
        self._new_cluster = new_cluster
        self._started: tuple[BringUpArgs, Cluster] | None = None

    def start(self, args: BringUpArgs, node_env: dict[str, str]) -> None:
        """The control plane of ``args`` started, its node held back (the cluster up now still
        holds the node); one started earlier for other arguments is stopped."""
        self.stop("another cluster is started early")
        logger.info(f"starting the control plane of state {args.state} early, with {args.bin_dir}")
        cluster = self._new_cluster(args.log_dir)
        env = {**node_env, **args.env}
        cluster.start(args.state, args.bin_dir, env, args.gates, hold_node=True)
        self._started = (args, cluster)

    def take(self, args: BringUpArgs) -> Cluster | None:
        """The cluster started early, if it was started for ``args``; any other is stopped."""
        if self._started is not None and self._started[0] == args:
            cluster, self._started = self._started[1], None
            return cluster
        self.stop("it was started for another bring-up")
        return None

    def stop(self, why: str) -> None:
        if self._started is not None:
            cluster, self._started = self._started[1], None
            logger.info(f"stopping the control plane started early: {why}")
            cluster.stop(reason=why)
