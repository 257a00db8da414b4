"""A phase's context: what one phase of one subtest runs with, built for it and closed after it.

Like upstream's per-phase ``TContext``, it carries a client of its own, made from the cluster's
admin client as the cluster is in that phase, so nothing is re-pointed after a restart: the next
phase simply gets a new one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from e2e_dra._suite._harnesses import Harness
from e2e_dra._suite._live_cluster import LiveCluster
from e2e_dra._suite._steps import SubtestPhase
from e2e_dra.localupcluster import COMPONENTS, Cluster
from e2e_dra.subtest import Context

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def phase_context(
    phase: SubtestPhase,
    live: LiveCluster,
    harness: Harness,
    *,
    artifacts: Path,
    namespace: str,
    facts: dict[str, Any],
    releases: Mapping[str, str],
) -> Iterator[Context]:
    """``phase``'s context over a fresh client of ``live``'s (closed when the phase ends),
    with its subtest's drivers and a builder of that client."""
    kube = live.api.fresh()
    try:
        yield Context(
            kube=kube,
            plugin=harness.plugin,
            real_driver=harness.real_driver,
            releases=releases,
            others=dict(harness.others),
            builder=harness.objects.builder(kube, phase.name),
            nodes=list(live.nodes),
            phase=phase.name,
            artifacts=artifacts,
            namespace=namespace,
            log=logger.info,
            facts=facts,
            started=started(live.cluster),
            logs=component_logs(live.cluster),
        )
    finally:
        kube.close()


def started(cluster: Cluster) -> dict[str, float]:
    """When each component's current process started: its last ready time less how long it
    took to be ready (the engine's ready times come in the order they happened)."""
    return {t.component: t.at - t.seconds for t in cluster.ready_times}


def component_logs(cluster: Cluster) -> dict[str, Path]:
    """The log file of each component running now."""
    return {c: path for c in COMPONENTS if (path := cluster.log_path(c)) is not None}
