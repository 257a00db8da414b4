"""A real cluster's life through a suite: versions, node runtime, bring-up, fresh clients after each
restart, and a cleanup that always runs, in an order that leaves nothing behind.

The pieces each do one thing: ``_harnesses`` the subtests' drivers and builders, ``_findings``
which test a safety net's finding fails, ``_report`` what a failure's notes name. This class
composes them with the cluster. The suites themselves (``_upgrade``: upgrade/downgrade,
``_gate_cycle``) only say which cluster steps exist and what each one changes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2e_dra._suite._findings import Findings
from e2e_dra._suite._harnesses import Harnesses
from e2e_dra._suite._plan import Entry
from e2e_dra._suite._report import crash_reason, failure_report
from e2e_dra.errors import E2EDRAError
from e2e_dra.kube import Kube, path, retrying
from e2e_dra.provision import ensure_node_runtime
from e2e_dra.releases import VersionsUnderTest, versions_under_test
from e2e_dra.settings import settings
from e2e_dra.subtest import Context
from e2e_dra.waits import abort_when, eventually
from hostkit import Attempts
from localupcluster import Cluster

NAMESPACE = "default"
USER_AGENT = "e2e-dra -- dra"
NODES_TIMEOUT = 300.0

logger = logging.getLogger(__name__)


class ClusterBackend:
    """Shared machinery; subclasses implement ``run_step`` for their cluster steps."""

    def __init__(
        self,
        suite: str,
        subtests: Mapping[str, Any],
        artifacts: Path,
    ) -> None:
        self.suite = suite
        self.subtests = dict(subtests)
        self.artifacts = artifacts
        self.versions: VersionsUnderTest | None = None
        self.node_env: dict[str, str] = {}
        self.cluster: Cluster | None = None
        self.kube: Kube | None = None
        self.nodes: list[str] = []
        self.info: dict[str, Any] = {}
        self.harnesses = Harnesses(self.subtests, artifacts / "drivers", NAMESPACE)
        self.findings = Findings(NAMESPACE, self.harnesses.take_dropped_fields)
        self._watch: contextlib.AbstractContextManager[None] | None = None  # for crashes

    # --- steps every suite has ----------------------------------------------------------------

    def resolve_versions(self, commands: tuple[str, ...] | None = None) -> VersionsUnderTest:
        """The releases of this run; of the current one only ``commands``, when given."""
        versions = versions_under_test(commands) if commands else versions_under_test()
        if versions.current.source_dir is None:
            raise E2EDRAError(
                f"no Kubernetes source tree for {versions.current.version}: "
                "set KUBERNETES_SOURCE_DIR (hack/local-up-cluster.sh comes from there)"
            )
        self.versions = versions
        for release in (versions.previous, versions.current):
            for deviation in release.deviations:
                logger.info(f"Kubernetes {release.version} deviates from its release: {deviation}")
        self.info.update(
            current={
                "version": versions.current.version,
                "origin": versions.current.origin,
                "bin_dir": str(versions.current.bin_dir),
                "source_dir": str(versions.current.source_dir),
                "deviations": list(versions.current.deviations),
                "chosen": versions.choice,
            },
            previous={
                "version": versions.previous.version,
                "origin": versions.previous.origin,
                "bin_dir": str(versions.previous.bin_dir),
                "deviations": list(versions.previous.deviations),
            },
            previous_minor=versions.previous_minor,
            release_source=versions.source,
        )
        return versions

    def prepare_node(self) -> None:
        assert self.versions is not None
        runtime = ensure_node_runtime(self.versions.current.source_dir)
        self.node_env = runtime.env()
        self.info["node_runtime"] = str(runtime.root)

    def bring_up(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        assert self.versions is not None and self.versions.current.source_dir is not None
        self.cluster = Cluster(
            self.versions.current.source_dir, log_dir, log=logger, host_lock=settings().host_lock
        )
        self.info["cluster_env"] = {k: env[k] for k in sorted(env) if k not in self.node_env}
        self.info["log_dir"] = str(log_dir)
        logger.info(f"bringing up state {state} with {bin_dir}")
        self.cluster.start(state, bin_dir, {**self.node_env, **env}, gates)
        if self._watch is None:  # every wait of the run ends at once when a component crashes
            self._watch = abort_when(self._crashed)
            self._watch.__enter__()
        self.kube = Kube.from_kubeconfig(self.cluster.kubeconfig, user_agent=USER_AGENT)
        self.findings.watch_claims(self.kube, self.harnesses.driver_names())
        self.nodes = self._schedulable_nodes()
        self.info["kubeconfig"] = str(self.cluster.kubeconfig)

    def refresh_clients(self) -> None:
        """After a restart: new connections everywhere (old ones point at a dead server)."""
        assert self.kube is not None
        old, self.kube = self.kube, self.kube.fresh()
        old.close()
        self.findings.use_client(self.kube)
        self.harnesses.use_client(self.kube)

    # --- what the run asks of a backend -------------------------------------------------------

    def unmet(self, name: str) -> str | None:
        subtest = self.subtests[name]
        if self.versions is not None and (
            why := subtest.unmet_release(self.control_plane_versions(), self.kubelet_versions())
        ):
            return why
        dropped = dict(self.info.get("feature_gates_dropped") or {})
        for gate in getattr(subtest, "feature_gates", ()):
            gate_name = gate.partition("=")[0]
            if gate_name in dropped:
                return f"needs feature gate {gate_name}, {dropped[gate_name]}"
        if self.kube is not None:
            version = retrying(self.kube.server_version)()
            for group_version in subtest.requires:
                if not retrying(self.kube.served)(group_version):
                    return f"needs {group_version}, which {version} does not serve"
        return None

    def tested_versions(self) -> tuple[str, ...]:
        """The releases a subtest runs on (both, for an upgrade and downgrade)."""
        assert self.versions is not None
        return (self.versions.previous.version, self.versions.current.version)

    def control_plane_versions(self) -> tuple[str, ...]:
        """The releases the control plane runs in this suite."""
        return self.tested_versions()

    def kubelet_versions(self) -> tuple[str, ...]:
        """The releases the kubelet runs in this suite."""
        return self.tested_versions()

    def drop(self, subtest: str) -> None:
        self.harnesses.drop(subtest)

    def context(self, entry: Entry) -> Context:
        name = str(entry.subtest)
        assert self.kube is not None
        harness = self.harnesses.ready(name, self.kube, self.nodes)
        return Context(
            kube=self.kube,
            driver=harness.driver,
            builder=harness.builder,
            nodes=list(self.nodes),
            phase=str(entry.phase),
            artifacts=self.artifacts / "subtests" / name,
            namespace=NAMESPACE,
            log=logger.info,
            facts=self.info.setdefault("facts", {}).setdefault(name, {}),
        )

    def checks(self, entry: Entry) -> list[str]:
        return self.findings.checks(entry)

    def on_failure(self, entry: Entry, exc: BaseException) -> list[str]:
        return failure_report(
            entry,
            kube=self.kube,
            harnesses=self.harnesses,
            cluster=self.cluster,
            dumps=self.artifacts / "dumps",
            namespace=NAMESPACE,
        )

    def close(self) -> None:
        """Builders' tear-down, drivers stop, the nets' last look, cluster stop: each tried, the
        first error raised (the others as its notes).

        Each driver stops as soon as its objects are gone, so the kubelet's wiping delay (30 s
        after a plugin unregisters) runs for all of them at once; then one wait checks that the
        kubelet removed the ResourceSlices of every driver (upstream: ``IsGone`` per driver).
        """
        attempts = Attempts("cleanup", logger.info, note="e2e-dra: cleanup also failed")
        live = self._api_reachable()
        stopped, dropped_fields = self.harnesses.close(attempts, tear_down=live)
        self.findings.hold(dropped_fields)
        if live:
            assert self.kube is not None
            self.findings.last_look(attempts, self.kube, stopped)
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
        if self.kube is not None:
            self.kube.close()
            self.kube = None
        self.harnesses.forget()
        attempts.raise_first()

    def describe(self) -> dict[str, Any]:
        return dict(self.info)

    # --- internals ----------------------------------------------------------------------------

    def _schedulable_nodes(self) -> list[str]:
        assert self.kube is not None
        kube = self.kube

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
        if self.cluster is None or self.kube is None:
            return False
        if not self.cluster.running:
            logger.info("cleanup: the cluster was already stopped; objects and nets not checked")
            return False
        return True
