"""The real cluster behind one suite: the services its steps use, and what the run asks of it.

The steps (``_upgrade``, ``_gate_cycle``, ``_steps``) say what happens, over the narrow
:class:`~e2e_dra._suite._steps.ClusterOps`; :class:`RealCluster` is how: resolve versions,
prepare the node, bring a cluster up (:class:`~e2e_dra._suite._early.EarlyStart` has its control
plane started early), restart components and wait until every driver's ResourceSlices are back,
give each phase its context (``_contexts``), contain a known bug, and clean up in an order that
leaves nothing behind. What the steps learn is the suite's own typed state (``suite.new_state()``).

The pieces each do one thing: ``_harnesses`` the subtests' drivers and objects, ``_findings``
which test a safety net's finding fails, ``_report`` what a failure's notes name.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Generic

from e2e_dra._suite._artifacts import dump_cluster
from e2e_dra._suite._contexts import phase_context
from e2e_dra._suite._disruption import DisruptionNet
from e2e_dra._suite._early import BringUpArgs, EarlyStart
from e2e_dra._suite._findings import Findings
from e2e_dra._suite._harnesses import DriverHost, Harness, Harnesses
from e2e_dra._suite._liveness import ComponentNet, Running
from e2e_dra._suite._nodelogs import StateLogs
from e2e_dra._suite._readback import ReadBackNet
from e2e_dra._suite._report import crash_reason, failure_report
from e2e_dra._suite._steps import ClusterStep, Entry, S, SubtestPhase, Suite
from e2e_dra.builder import SUITE_LABEL
from e2e_dra.errors import E2EDRAError
from e2e_dra.hostkit import Attempts
from e2e_dra.kube import Kube, path, retrying
from e2e_dra.localupcluster import Cluster, ModifyOptions
from e2e_dra.provision import ensure_node_runtime
from e2e_dra.releases import (
    BUILT_COMMANDS,
    ReleaseSource,
    VersionsUnderTest,
    release_source,
    versions_under_test,
)
from e2e_dra.settings import Settings, settings
from e2e_dra.subtest import Context, Subtest, WhileKubeletDown
from e2e_dra.waits import abort_when, eventually

NAMESPACE = "default"
USER_AGENT = "e2e-dra -- dra"
NODES_TIMEOUT = 300.0
CONNECTIONS_PER_SUBTEST = 4
"""Requests of one subtest that may be in flight at once on the suite's shared client: its
driver's (ResourceSlices published and watched, a gRPC call's claim read) and its phase's
waits. Every driver of a phase's batch uses the shared client at the same time."""
SHARED_CONNECTIONS = 8
"""Beyond the subtests': the safety nets, the failure dumps, the cleanup."""

logger = logging.getLogger(__name__)


@functools.cache
def run_release_source(run_settings: Settings) -> ReleaseSource:
    """One release source for every suite of a run (``run_settings``: the run's settings).

    It remembers what the module proxy said exists, so the proxy is asked once per run, not
    about fourteen times per suite, and every suite of a run tests the same releases even if
    one appears in the middle of it. Each suite still takes its binaries from the cache, which
    verifies them every time.
    """
    del run_settings  # the key: another run (other settings) gets a source of its own
    return release_source()


class RealCluster(Generic[S]):
    """The real cluster behind one suite: runs its steps, gives its phases their context."""

    def __init__(self, suite: Suite[S], subtests: Mapping[str, Subtest], artifacts: Path) -> None:
        self.suite = suite
        self.subtests = dict(subtests)
        self.artifacts = artifacts
        self.state: S = suite.new_state()
        self.cluster: Cluster | None = None
        self.api: Kube | None = None  # the cluster's admin client; all others are made from it
        self.nodes: list[str] = []
        self.harnesses = Harnesses(self.subtests, artifacts / "drivers", NAMESPACE, suite.name)
        self.disruption = DisruptionNet({SUITE_LABEL: suite.name})
        self.read_back = ReadBackNet()
        self.findings = Findings(
            lambda: [
                *self.harnesses.take_slice_findings(),
                *self.disruption.take(),
                *self.read_back.take(),
            ]
        )
        self.early = EarlyStart(self._new_cluster)
        self._components = ComponentNet()
        self._watch: contextlib.AbstractContextManager[None] | None = None  # for crashes
        self._clusters: list[Cluster] = []  # every one brought up: their components' ready times
        self._upcoming: Entry | None = None  # while a step runs: the entry after it
        self._node_logs: StateLogs | None = None  # once the node runtime is known
        self._kubelet_down: list[WhileKubeletDown] = []  # asked by phases, for the next step
        self._scratch: Path | None = None  # made when first asked for

    @property
    def scratch(self) -> Path:
        """This suite's directory outside ARTIFACTS (see ``ClusterOps.scratch``), made when
        first asked for and removed once its cluster stopped."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix=f"e2e-dra-{self.suite.name}-"))
        return self._scratch

    @property
    def pool_size(self) -> int:
        """Connections each client of the cluster keeps: room for every subtest's requests at
        once, so that none is thrown away ("Connection pool is full")."""
        return CONNECTIONS_PER_SUBTEST * len(self.subtests) + SHARED_CONNECTIONS

    # --- what the suite run asks ----------------------------------------------------------------

    def run_step(self, step: ClusterStep[S], upcoming: Entry | None = None) -> None:
        """Run ``step``; one that changes a cluster that is up must leave the subtests' running
        pods as they were (the disruption net) and its DRA objects readable as they were (the
        read-back net)."""
        self._upcoming = upcoming
        watched = self.api is not None and not step.always
        try:
            if watched:
                assert self.api is not None
                self.disruption.before(self.api, step.id, self.harnesses.running())
                self.read_back.before(self.api, step.id)
            step.run(self)
            if watched and self.api is not None:
                self.disruption.after(self.api)
                self.read_back.after(self.api)
        finally:
            self._upcoming = None

    def unmet(self, subtest: str) -> str | None:
        """Why ``subtest`` cannot run in this suite on these releases, or None."""
        return self.suite.unmet(self, self.subtests[subtest])

    def drop(self, subtest: str) -> None:
        self.harnesses.drop(subtest)

    @contextlib.contextmanager
    def context(self, phase: SubtestPhase) -> Iterator[Context]:
        """``phase``'s context, with a client of its own (closed when the phase ends): the
        subtest's driver is set up before its first phase."""
        if self.api is None:
            raise AssertionError("no cluster is up")
        releases = self.releases_now()
        harness = self.harnesses.ready(
            phase.subtest, self.api, self.nodes, self._driver_host(releases)
        )
        with phase_context(
            phase,
            self.api,
            harness,
            self.nodes,
            artifacts=self.artifacts / "subtests" / phase.subtest,
            namespace=NAMESPACE,
            facts=self.state.facts.setdefault(phase.subtest, {}),
            cluster=self.cluster,
            releases=releases,
        ) as context:
            yield context
        self._kubelet_down += context.kubelet_down  # a phase that passed: its asks stand

    def contain(self, subtest: str) -> str:
        """After a known bug broke a phase of ``subtest``: its objects torn down (the crash
        watch set aside meanwhile: a crashed component must not end the tear-down's waits), the
        components that ended started again in a state of their own (``<state>-restarted``: the
        crash's log is kept), every driver's slices waited for; what was done, said."""
        cluster, api = self._up()
        done = []
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.__exit__(None, None, None)
        kube = api.fresh()
        try:
            try:
                if self.harnesses.tear_down(subtest, kube):
                    done.append(f"the objects of {subtest} removed")
            except Exception as exc:  # what is left is the cleanup's; the restart still helps
                done.append(f"removing the objects of {subtest} failed ({exc})")
            ended = [c for c, cmd in cluster.running.items() if not cmd.running()]
            if ended:
                last = list(self.state.binaries)[-1]
                state = f"{last}-restarted"
                self._state_begins(state)
                cluster.restart_ended(state)
                self._components.restarted(self._processes())
                self.state.binaries[state] = dict(self.state.binaries[last])
                api.server_restarted()
                self.harnesses.wait_for_slices(f"after restarting {', '.join(ended)}")
                done.append(f"{', '.join(ended)} started again ({state})")
        finally:
            kube.close()
            self._watch = abort_when(self._crashed)
            self._watch.__enter__()
        return "; ".join(done) or "nothing to do"

    def releases_now(self) -> dict[str, str]:
        return self.state.releases_now()

    def _driver_host(self, releases: dict[str, str]) -> DriverHost:
        cluster, _ = self._up()
        return DriverHost(cluster.kubeconfig, releases, cluster.note_process)

    def checks(self, entry: Entry) -> list[str]:
        """The claim, slice and driver nets' findings, then the components' (a panic logged, a
        process replaced behind the suite's back)."""
        found = self.findings.checks(entry)
        if self.cluster is not None:
            allowed = entry.restarts_allowed
            found += self._components.look(self._processes(), restarts_allowed=allowed)
        return found

    def _processes(self) -> dict[str, Running]:
        """Each component's process as the engine runs it now, for the component net."""
        assert self.cluster is not None
        return {c: Running(cmd.pid, cmd.log_file) for c, cmd in self.cluster.running.items()}

    def on_failure(self, entry: Entry, exc: BaseException) -> list[str]:
        return failure_report(
            entry,
            kube=self.api,
            harnesses=self.harnesses,
            cluster=self.cluster,
            dumps=self.artifacts / "dumps",
            namespace=NAMESPACE,
        )

    def describe(self) -> dict[str, Any]:
        """The state's view, and when each component was ready (``ready_at``: wall clock; the
        summary makes it relative to the suite's start)."""
        info = self.state.describe()
        ready = [
            {"state": t.state, "component": t.component, "seconds": round(t.seconds, 3)}
            | {"attempts": t.attempts, "ready_at": t.at}
            for cluster in self._clusters
            for t in cluster.ready_times
        ]
        if ready:
            info["components_ready"] = ready
        return info

    # --- services of the steps ------------------------------------------------------------------

    def resolve_versions(self, commands: tuple[str, ...] | None = None) -> VersionsUnderTest:
        """The releases of this run; of the current one only ``commands``, when given."""
        source = run_release_source(settings())
        versions = versions_under_test(commands or BUILT_COMMANDS, source)
        if versions.current.source_dir is None:
            raise E2EDRAError(
                f"no Kubernetes source tree for {versions.current.version}: "
                "set KUBERNETES_SOURCE_DIR (hack/local-up-cluster.sh comes from there)"
            )
        for release in (versions.previous, versions.current):
            for deviation in release.deviations:
                logger.info(f"Kubernetes {release.version} deviates from its release: {deviation}")
        self.state.versions = versions
        return versions

    def prepare_node(self) -> None:
        runtime = ensure_node_runtime(self.state.current().source_dir)
        pressure = runtime.disk_pressure()
        if pressure is not None:
            raise E2EDRAError(f"the node cannot run the subtests' pods: {pressure}")
        self.state.node_env = runtime.env()
        self.state.node_runtime = runtime.root
        self._node_logs = StateLogs(runtime.containerd_log)

    def bring_up(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        """A cluster in ``state``, ready: the one started early with these arguments (its node
        started now), else a new one."""
        started_early = self.early.take(BringUpArgs(log_dir, state, bin_dir, env, gates))
        node_env = self.state.node_env
        self.state.cluster_env = {k: env[k] for k in sorted(env) if k not in node_env}
        self.state.log_dir = log_dir
        self._state_begins(state)
        if started_early is not None:
            logger.info(f"bringing up state {state}: its control plane runs, starting the node")
            self.cluster = started_early
            self.cluster.start_node()
        else:
            logger.info(f"bringing up state {state} with {bin_dir}")
            self.cluster = self._new_cluster(log_dir)
            self.cluster.start(state, bin_dir, {**node_env, **env}, gates)
        if self._watch is None:  # every wait of the run ends at once when a component crashes
            self._watch = abort_when(self._crashed)
            self._watch.__enter__()
        self.api = Kube.from_kubeconfig(
            self.cluster.kubeconfig, user_agent=USER_AGENT, pool_size=self.pool_size
        )
        self.findings.watch_claims(self.api, self.harnesses.driver_names())
        self.nodes = self._schedulable_nodes()
        self.state.kubeconfig = self.cluster.kubeconfig

    def start_early(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        self.early.start(BringUpArgs(log_dir, state, bin_dir, env, gates), self.state.node_env)

    def modify(self, state: str, options: ModifyOptions, why: str) -> ModifyOptions:
        """Restart components as ``options`` say; returns the options that undo it. Every client
        learns the server anew, and every driver's slices are waited for (the kubelet wipes
        them when it restarts)."""
        cluster, api = self._up()
        self._state_begins(state)
        asked, self._kubelet_down = self._kubelet_down, []
        try:
            undo = cluster.modify(
                state,
                options,
                before_kubelet_starts=(lambda: _while_down(state, asked, api)) if asked else None,
            )
        finally:
            _not_done(asked, f"the step to {state} did not stop the kubelet")
        api.server_restarted()
        self.harnesses.wait_for_slices(why)
        return undo

    def restart_with_gates(self, state: str, gates: str) -> None:
        cluster, api = self._up()
        self._state_begins(state)
        asked, self._kubelet_down = self._kubelet_down, []
        _not_done(asked, f"a feature-gate restart ({state}) runs nothing while the kubelet is down")
        cluster.toggle_feature_gates(state, gates)
        api.server_restarted()

    def wait_for_slices(self, why: str) -> None:
        self.harnesses.wait_for_slices(why)

    def harness(self, subtest: str) -> Harness | None:
        return self.harnesses.get(subtest)

    def unserved(self, subtest: Subtest) -> str | None:
        """The first API version ``subtest`` requires that the server does not serve, said."""
        if self.api is None:
            return None
        version = retrying(self.api.server_version)()
        for group_version in subtest.requires:
            if not retrying(self.api.served)(group_version):
                return f"needs {group_version}, which {version} does not serve"
        return None

    def close(self, *, slice_removal: bool = True) -> None:
        """Objects torn down, drivers stopped, the nets' last look, cluster stopped: each tried,
        the first error raised (the others as its notes).

        Each driver stops as soon as its objects are gone, so the kubelet's wiping delay (30 s
        after a plugin unregisters) runs for all of them at once; then one wait checks that the
        kubelet removed the ResourceSlices of every driver (upstream: ``IsGone`` per driver),
        unless ``slice_removal`` is False.
        """
        attempts = Attempts("cleanup", logger.info, note="e2e-dra: cleanup also failed")
        live = self._api_reachable()
        if live:  # what the subtests left, as the server saw it last: passed or not
            attempts("dump the DRA objects", lambda: self._dump("final"))
        if live:  # the phases after the last step ran: their pods still as they were
            api = self.api
            assert api is not None
            attempts("the disruption net's second look", lambda: self.disruption.second_look(api))
            self.findings.hold(self.disruption.take())
        if self._node_logs is not None:  # before the teardown deletes the pods and their logs
            attempts("copy the node's logs", self._node_logs.end)
        stopped, slice_findings = self.harnesses.close(attempts, self.api, tear_down=live)
        self.findings.hold(slice_findings)
        if self._upcoming is not None:  # while the kubelet removes the drivers' slices
            self._start_early(self._upcoming)
        else:
            self.early.stop("the suite ends")
        if live:
            assert self.api is not None
            if not slice_removal:
                logger.info("ResourceSlice removal: checked in this suite's first cluster")
            self.findings.last_look(attempts, self.api, stopped if slice_removal else {})
        self.findings.stop_watch()
        waiting = self.findings.still_waiting()
        if waiting is not None:
            attempts.fail(waiting)
        if self._watch is not None:
            self._watch.__exit__(None, None, None)
            self._watch = None
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            attempts("stop the cluster", cluster.stop)
        if self.api is not None:
            self.api.close()
            self.api = None
        if self._scratch is not None and self.cluster is None and self._upcoming is None:
            shutil.rmtree(self._scratch, ignore_errors=True)  # nothing runs from it now
            self._scratch = None
        self.harnesses.forget()
        attempts.raise_first()

    # --- internals ------------------------------------------------------------------------------

    def _new_cluster(self, log_dir: Path) -> Cluster:
        source_dir = self.state.current().source_dir
        assert source_dir is not None
        cluster = Cluster(source_dir, log_dir, log=logger, host_lock=settings().host_lock)
        self._clusters.append(cluster)
        return cluster

    def _start_early(self, entry: Entry) -> None:
        """``entry``'s early start; what fails there is the step's to report when it runs."""
        try:
            entry.start_early(self)
        except Exception as exc:
            logger.warning(f"{entry.id}: starting early failed ({exc}); it starts when it runs")

    def _state_begins(self, state: str) -> None:
        """The node's logs of the state that ends are copied; ``state``'s count from now."""
        if self._node_logs is None:
            return
        self._node_logs.end()
        if self.state.log_dir is not None:
            self._node_logs.begin(state, self.state.log_dir)

    def _dump(self, label: str) -> None:
        if self.api is not None:  # next to the cluster's logs: a gate cycle has several
            dumps = (self.state.log_dir or self.artifacts) / "dumps"
            dump_cluster(self.api, dumps, label, NAMESPACE)

    def _up(self) -> tuple[Cluster, Kube]:
        if self.cluster is None or self.api is None:
            raise AssertionError("no cluster is up")
        return self.cluster, self.api

    def _schedulable_nodes(self) -> list[str]:
        assert self.api is not None
        kube = self.api

        def schedulable() -> list[str]:
            names = []
            for node in kube.list(path("v1", "nodes")):
                spec = node.get("spec") or {}
                taints = [t for t in spec.get("taints") or [] if t.get("effect") == "NoSchedule"]
                ready = any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (node.get("status") or {}).get("conditions") or []
                )
                if ready and not spec.get("unschedulable") and not taints:
                    names.append(node["metadata"]["name"])
            return sorted(names)

        logger.info("waiting for a schedulable node")
        return eventually(schedulable, what="a ready, schedulable node", timeout=NODES_TIMEOUT)[:1]

    def _crashed(self) -> str | None:
        return crash_reason(self.cluster)

    def _api_reachable(self) -> bool:
        """Whether the cleanup can still talk to the cluster. An interrupt (Ctrl-C, SIGTERM) has
        the engine stop every component first; then the objects went with it and the nets have
        nothing left to look at, which is said once instead of failing on a refused port."""
        if self.cluster is None or self.api is None:
            return False
        if not self.cluster.running:
            logger.info("cleanup: the cluster was already stopped; objects and nets not checked")
            return False
        return True


def _while_down(state: str, asked: list[WhileKubeletDown], api: Kube) -> None:
    """What the phases asked for while the kubelet is down, each with the cluster's client; a
    failure is kept for the phase that asked (it fails there), never the step's."""
    api.server_restarted()  # the API server may have just restarted too
    kube = api.fresh()
    try:
        for each in asked:
            logger.info(f"while the kubelet is down ({state}): {each.what}")
            try:
                each.action(kube)
            except Exception as exc:
                logger.info(f"while the kubelet is down ({state}): {each.what} failed: {exc}")
                each.error = exc
            else:
                each.done_in = state
    finally:
        kube.close()


def _not_done(asked: list[WhileKubeletDown], why: str) -> None:
    for each in asked:
        if each.done_in is None and each.error is None:
            each.not_done = why
