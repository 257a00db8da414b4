"""One brought-up cluster: what exists only while it is up, in one object.

A :class:`LiveCluster` is made by a bring-up once its cluster answers, and ended by its
:meth:`~LiveCluster.stop`: the engine's cluster, its admin client (every other client is made
from it), its schedulable node, the crash watch (while it is up, every wait of the run ends at
once when one of its components ends), the node's logs of its states, the claim watch, and what
the phases asked to be done while its kubelet is down. Nothing in it is optional: code that needs
a cluster takes a LiveCluster, and whether there is one is asked in one place
(``ClusterSteps.up``). A gate cycle brings up one per subtest; nothing of one reaches the next.

A bring-up that fails before its cluster answers leaves a :class:`Starting` instead: the engine's
cluster (its logs say why) and the node's logs, which the cleanup copies before it stops it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from e2e_dra._suite._findings import Findings
from e2e_dra._suite._liveness import Running
from e2e_dra._suite._nodelogs import StateLogs
from e2e_dra._suite._report import crash_reason
from e2e_dra.hostkit import Attempt
from e2e_dra.kube import Kube, path
from e2e_dra.localupcluster import Cluster, ModifyOptions
from e2e_dra.subtest import WhileKubeletDown
from e2e_dra.waits import abort_when, eventually

USER_AGENT = "e2e-dra -- dra"
NODES_TIMEOUT = 300.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Starting:
    """A bring-up's cluster until it answers: the engine's cluster and the node's logs of its
    first state."""

    cluster: Cluster
    node_logs: StateLogs


class LiveCluster:
    """A cluster that is up, and everything that lives as long as it does."""

    def __init__(
        self, cluster: Cluster, api: Kube, node_logs: StateLogs, findings: Findings
    ) -> None:
        """``cluster``, running, its crash watch on, its admin client ``api``; ``findings``
        gets its claim watch (:meth:`watch_claims`)."""
        self.cluster = cluster
        self.api = api
        self.node_logs = node_logs
        self.nodes: list[str] = []  # its schedulable node, once found (find_nodes)
        self.kubelet_down: list[WhileKubeletDown] = []  # asked by phases, for the next step
        self._findings = findings
        self._crash_watch = abort_when(self._crashed)
        self._crash_watch.__enter__()

    @classmethod
    def of(cls, starting: Starting, findings: Findings, *, pool_size: int) -> LiveCluster:
        """``starting``'s cluster, which answers now, with its admin client (keeping
        ``pool_size`` connections: see ``ClusterSteps.pool_size``)."""
        cluster = starting.cluster
        api = Kube.from_kubeconfig(cluster.kubeconfig, user_agent=USER_AGENT, pool_size=pool_size)
        return cls(cluster, api, starting.node_logs, findings)

    # --- while it is up -------------------------------------------------------------------------

    def watch_claims(self, drivers: Mapping[str, str]) -> None:
        """The claim watch, over every namespace, of the claims of ``drivers``' subtests."""
        self._findings.watch_claims(self.api, drivers)

    def find_nodes(self) -> list[str]:
        """Until a node is ready and schedulable; it is the one the subtests use."""
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
        found = eventually(schedulable, what="a ready, schedulable node", timeout=NODES_TIMEOUT)
        self.nodes = found[:1]
        return self.nodes

    def processes(self) -> dict[str, Running]:
        """Each component's process as the engine runs it now, for the component net."""
        return processes(self.cluster)

    def ended(self) -> list[str]:
        """The components whose process ended."""
        return [c for c, cmd in self.cluster.running.items() if not cmd.running()]

    def reachable(self) -> bool:
        """Whether the cleanup can still talk to the cluster. An interrupt (Ctrl-C, SIGTERM) has
        the engine stop every component first; then the objects went with it and the nets have
        nothing left to look at, which is said once instead of failing on a refused port."""
        if not self.cluster.running:
            logger.info("cleanup: the cluster was already stopped; objects and nets not checked")
            return False
        return True

    def state_begins(self, state: str, log_dir: Path | None) -> None:
        """The node's logs of the state that ends are copied; ``state``'s count from now."""
        self.node_logs.end()
        if log_dir is not None:
            self.node_logs.begin(state, log_dir)

    @contextlib.contextmanager
    def crash_watch_paused(self) -> Iterator[None]:
        """The crash watch set aside meanwhile (a component that crashed must not end the waits
        of what handles it), on again after."""
        self._crash_watch.__exit__(None, None, None)
        try:
            yield
        finally:
            self._crash_watch = abort_when(self._crashed)
            self._crash_watch.__enter__()

    # --- restarts -------------------------------------------------------------------------------

    def modify(self, state: str, options: ModifyOptions, log_dir: Path | None) -> ModifyOptions:
        """Components restarted as ``options`` say, what the phases asked for done while the
        kubelet is down; the options that undo it. The admin client learns the server anew."""
        self.state_begins(state, log_dir)
        asked, self.kubelet_down = self.kubelet_down, []
        api = self.api
        try:
            undo = self.cluster.modify(
                state,
                options,
                before_kubelet_starts=(lambda: _while_down(state, asked, api)) if asked else None,
            )
        finally:
            _not_done(asked, f"the step to {state} did not stop the kubelet")
        api.server_restarted()
        return undo

    def restart_with_gates(self, state: str, gates: str, log_dir: Path | None) -> None:
        """Every component restarted with ``--feature-gates=gates``; what the phases asked for
        while the kubelet is down is not done (said on each ask)."""
        self.state_begins(state, log_dir)
        asked, self.kubelet_down = self.kubelet_down, []
        _not_done(asked, f"a feature-gate restart ({state}) runs nothing while the kubelet is down")
        self.cluster.toggle_feature_gates(state, gates)
        self.api.server_restarted()

    def restart_ended(self, state: str, log_dir: Path | None) -> None:
        """The components that ended started again, in ``state`` of their own."""
        self.state_begins(state, log_dir)
        self.cluster.restart_ended(state)

    # --- the end --------------------------------------------------------------------------------

    def stop(self) -> list[Attempt]:
        """What ends it, in order, each tried whatever the one before did: the claim watch, the
        crash watch, the cluster, the admin client."""
        return [
            Attempt("stop the claim watch", self._findings.stop_watch),
            Attempt("end the crash watch", lambda: self._crash_watch.__exit__(None, None, None)),
            Attempt("stop the cluster", self.cluster.stop),
            Attempt("close the cluster's client", self.api.close),
        ]

    def _crashed(self) -> str | None:
        return crash_reason(self.cluster)


def processes(cluster: Cluster) -> dict[str, Running]:
    """Each component's process as the engine runs it now, for the component net."""
    return {c: Running(cmd.pid, cmd.log_file) for c, cmd in cluster.running.items()}


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
