"""The step side of the real cluster: what the cluster steps of a plan do to it.

:class:`ClusterSteps` implements :class:`~e2e_dra._suite._steps.ClusterOps`, the narrow view the
steps (``_upgrade``, ``_gate_cycle``, ``_steps``) have: resolve versions, prepare the node, bring
a cluster up (a :class:`~e2e_dra._suite._live_cluster.LiveCluster`; its control plane may have
been started early, :class:`~e2e_dra._suite._early.EarlyStart`), restart components and wait
until every driver's ResourceSlices are back, and clean up in an order that leaves nothing
behind. It keeps the suite's parts that outlive one cluster: the typed state its steps learn
(``suite.new_state()``), the subtests' harnesses and the safety nets. What the run asks of a
phase is ``RealCluster``'s (``_cluster``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Generic

from e2e_dra._suite._early import BringUpArgs, EarlyStart
from e2e_dra._suite._harnesses import Harness
from e2e_dra._suite._live_cluster import LiveCluster, Starting
from e2e_dra._suite._nodelogs import StateLogs
from e2e_dra._suite._run_releases import resolved_versions
from e2e_dra._suite._steps import ClusterStep, Entry, S, Suite
from e2e_dra._suite._suite_nets import SuiteNets
from e2e_dra.errors import E2EDRAError
from e2e_dra.hostkit import Attempt, Teardown
from e2e_dra.localupcluster import Cluster, ModifyOptions
from e2e_dra.provision import ensure_node_runtime
from e2e_dra.releases import VersionsUnderTest
from e2e_dra.settings import settings
from e2e_dra.subtest import Subtest

CONNECTIONS_PER_SUBTEST = 4
"""Requests of one subtest that may be in flight at once on the suite's shared client: its
driver's (ResourceSlices published and watched, a gRPC call's claim read) and its phase's
waits. Every driver of a phase's batch uses the shared client at the same time."""
SHARED_CONNECTIONS = 8
"""Beyond the subtests': the safety nets, the failure dumps, the cleanup."""
CLEANUP_TIMEOUT = 1800.0
"""The cleanup's one deadline: a look or a copy that would start after it is not tried (a
failure of the cleanup, named); what stops something runs whatever the time. A cleanup takes a
few minutes at most: each of its waits has a deadline of its own, well within this one."""

logger = logging.getLogger(__name__)


class ClusterSteps(Generic[S]):
    """The real cluster as the steps of one suite see it (``ClusterOps``)."""

    def __init__(self, suite: Suite[S], subtests: Mapping[str, Subtest], artifacts: Path) -> None:
        self.suite_name = suite.name
        self.subtests = dict(subtests)
        self.artifacts = artifacts
        self.state: S = suite.new_state()
        self.nets = SuiteNets(self.subtests, artifacts, suite.name)
        self.harnesses = self.nets.harnesses
        self.early = EarlyStart(self._new_cluster)
        self.live: LiveCluster | None = None  # the cluster that is up
        self.clusters: list[Cluster] = []  # every one brought up: their components' ready times
        self._starting: Starting | None = None  # a bring-up's cluster until it answers
        self._containerd_log: Path | None = None  # once the node runtime is known
        self._next_early: Entry | None = None  # while a step runs: what it starts early
        self._scratch: Path | None = None  # made when first asked for

    @property
    def scratch(self) -> Path:
        """This suite's directory outside ARTIFACTS (see ``ClusterOps.scratch``), made when
        first asked for and removed once its cluster stopped."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix=f"e2e-dra-{self.suite_name}-"))
        return self._scratch

    @property
    def pool_size(self) -> int:
        """Connections each client of the cluster keeps: room for every subtest's requests at
        once, so that none is thrown away ("Connection pool is full")."""
        return CONNECTIONS_PER_SUBTEST * len(self.subtests) + SHARED_CONNECTIONS

    @property
    def nodes(self) -> list[str]:
        return self.live.nodes if self.live is not None else []

    @property
    def engine(self) -> Cluster | None:
        """The engine's cluster of now: the live one, or one whose bring-up failed before it
        answered (its logs say why)."""
        if self.live is not None:
            return self.live.cluster
        return self._starting.cluster if self._starting is not None else None

    def up(self) -> LiveCluster:
        """The cluster that is up; asking for it when none is, is a bug of the caller."""
        if self.live is None:
            raise AssertionError("no cluster is up")
        return self.live

    def run_step(self, step: ClusterStep[S], early: Entry | None = None) -> None:
        """Run ``step`` (``early``: the entry it starts early, as the plan says); one that
        changes a cluster that is up must leave the subtests' running pods as they were (the
        disruption net) and its DRA objects readable as they were (the read-back net)."""
        self._next_early = early
        watched = self.live if not step.always else None
        try:
            if watched is not None:
                self.nets.before(watched.api, step.id)
            step.run(self)
            if watched is not None and self.live is not None:
                self.nets.after(self.live.api)
        finally:
            self._next_early = None

    # --- the steps' services (ClusterOps) -------------------------------------------------------

    def resolve_versions(self, commands: tuple[str, ...] | None = None) -> VersionsUnderTest:
        """The releases of this run; of the current one only ``commands``, when given."""
        versions = resolved_versions(commands)
        self.state.versions = versions
        return versions

    def prepare_node(self) -> None:
        runtime = ensure_node_runtime(self.state.current().source_dir)
        pressure = runtime.disk_pressure()
        if pressure is not None:
            raise E2EDRAError(f"the node cannot run the subtests' pods: {pressure}")
        self.state.node_env = runtime.env()
        self.state.node_runtime = runtime.root
        self._containerd_log = runtime.containerd_log

    def bring_up(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        """A cluster in ``state``, ready: the one started early with these arguments (its node
        started now), else a new one."""
        if self.live is not None or self._containerd_log is None:
            raise AssertionError("a bring-up needs the node runtime, and no cluster up")
        started_early = self.early.take(BringUpArgs(log_dir, state, bin_dir, env, gates))
        node_env = self.state.node_env
        self.state.cluster_env = {k: env[k] for k in sorted(env) if k not in node_env}
        self.state.log_dir = log_dir
        node_logs = StateLogs(self._containerd_log)
        node_logs.begin(state, log_dir)
        if started_early is not None:
            logger.info(f"bringing up state {state}: its control plane runs, starting the node")
            self._starting = Starting(started_early, node_logs)
            started_early.start_node()
        else:
            logger.info(f"bringing up state {state} with {bin_dir}")
            self._starting = Starting(self._new_cluster(log_dir), node_logs)
            self._starting.cluster.start(state, bin_dir, {**node_env, **env}, gates)
        # every wait of the run ends at once when a component crashes (the crash watch)
        self.live = LiveCluster.of(self._starting, self.nets.findings, pool_size=self.pool_size)
        self._starting = None
        self.live.watch_claims(self.harnesses.driver_names())
        self.live.find_nodes()
        self.state.kubeconfig = self.live.cluster.kubeconfig

    def start_early(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        self.early.start(BringUpArgs(log_dir, state, bin_dir, env, gates), self.state.node_env)

    def modify(self, state: str, options: ModifyOptions, why: str) -> ModifyOptions:
        """Restart components as ``options`` say; returns the options that undo it. Every client
        learns the server anew, and every driver's slices are waited for (the kubelet wipes
        them when it restarts)."""
        undo = self.up().modify(state, options, self.state.log_dir)
        self.harnesses.wait_for_slices(why)
        return undo

    def restart_with_gates(self, state: str, gates: str) -> None:
        self.up().restart_with_gates(state, gates, self.state.log_dir)

    def wait_for_slices(self, why: str) -> None:
        self.harnesses.wait_for_slices(why)

    def harness(self, subtest: str) -> Harness | None:
        return self.harnesses.get(subtest)

    # --- the cleanup ----------------------------------------------------------------------------

    def close(self, *, slice_removal: bool = True) -> None:
        """Objects torn down, drivers stopped, the nets' last look, cluster stopped: each an
        attempt of one teardown (:meth:`cleanup_attempts`), under one deadline, the first error
        raised (the others as its notes)."""
        teardown = Teardown(
            "cleanup", logger.info, timeout=CLEANUP_TIMEOUT, note="e2e-dra: cleanup also failed"
        )
        early = self._next_early  # the plan's StartNextEarly: the step that closes starts it
        teardown.run(self.cleanup_attempts(teardown, slice_removal=slice_removal, early=early))
        teardown.raise_first()

    def cleanup_attempts(
        self, teardown: Teardown, *, slice_removal: bool, early: Entry | None
    ) -> Iterator[Attempt]:
        """The cleanup's attempts, in order: the nets' and the drivers' (:meth:`SuiteNets.
        cleanup`), then the cluster's own stop (:meth:`LiveCluster.stop`), the scratch
        directory, what the harnesses kept of the cluster.

        Each driver stops as soon as its objects are gone, so the kubelet's wiping delay (30 s
        after a plugin unregisters) runs for all of them at once; meanwhile ``early`` (the entry
        the plan starts during this cleanup) starts its control plane; then one wait checks
        that the kubelet removed the ResourceSlices of every driver (upstream: ``IsGone`` per
        driver), unless ``slice_removal`` is False.
        """
        live, starting = self.live, self._starting
        if early is not None:  # while the kubelet removes the drivers' slices
            meanwhile = Attempt(f"start {early.id} early", lambda: self._start_early(early))
        else:
            meanwhile = Attempt(
                "stop what started early", lambda: self.early.stop("the suite ends")
            )
        dumps = (self.state.log_dir or self.artifacts) / "dumps"  # a gate cycle has several
        yield from self.nets.cleanup(
            teardown,
            live,
            starting,
            meanwhile=meanwhile,
            slice_removal=slice_removal,
            dumps=dumps,
        )
        if live is not None:
            self.live = None
            yield from live.stop()
        elif starting is not None:
            self._starting = None
            yield Attempt("stop the cluster", starting.cluster.stop)
        if self._scratch is not None and early is None:  # nothing runs from it now
            yield Attempt("remove the scratch directory", self._remove_scratch)
        yield Attempt("forget the cluster's harnesses", self.harnesses.forget)

    def _remove_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # --- internals ------------------------------------------------------------------------------

    def _new_cluster(self, log_dir: Path) -> Cluster:
        source_dir = self.state.current().source_dir
        assert source_dir is not None
        cluster = Cluster(source_dir, log_dir, log=logger, host_lock=settings().host_lock)
        self.clusters.append(cluster)
        return cluster

    def _start_early(self, entry: Entry) -> None:
        """``entry``'s early start; what fails there is the step's to report when it runs."""
        try:
            entry.start_early(self)
        except Exception as exc:
            logger.warning(f"{entry.id}: starting early failed ({exc}); it starts when it runs")
