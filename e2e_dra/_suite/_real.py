"""What every real suite does with a cluster: per-subtest drivers and builders, fresh clients
after each restart, waiting for ResourceSlices, the safety nets (``_nets``), failure dumps, and a
teardown that always runs.

The suites themselves (upgrade/downgrade, gate cycle) only say which cluster steps exist and what
each one changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e_dra._suite._artifacts import dump_cluster, write_json
from e2e_dra._suite._attempts import Attempts
from e2e_dra._suite._nets import (
    ClaimWatch,
    Finding,
    claim_owner,
    slice_removal_timeout,
    wait_slices_removed,
)
from e2e_dra._suite._plan import CLEANUP, Entry
from e2e_dra.errors import E2EDRAError
from e2e_dra.settings import settings
from e2e_dra.subtest import Context, unsupported_release
from e2e_dra.waits import abort_when

if TYPE_CHECKING:
    from e2e_dra.builder import Builder
    from e2e_dra.driver import Driver
    from e2e_dra.kube import Kube
    from e2e_dra.releases import VersionsUnderTest
    from localupcluster.cluster import Cluster

NAMESPACE = "default"
USER_AGENT = "e2e-dra -- dra"
NODES_TIMEOUT = 300.0
SLICES_TIMEOUT = 300.0
REGISTRATION_TIMEOUT = 60.0

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Harness:
    """One subtest's own driver and builder (upstream: a driver instance per subtest key)."""

    driver: Driver
    builder: Builder
    publishes: bool  # the driver publishes ResourceSlices we have to wait for after restarts


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
        self.harnesses: dict[str, Harness] = {}
        self.pending: dict[str, BaseException] = {}
        self.dropped: set[str] = set()
        self.info: dict[str, Any] = {}
        self.claim_watch: ClaimWatch | None = None
        self._watch_kube: Kube | None = None
        # Net findings that belong to a subtest other than the test that saw them: they fail
        # that subtest's next phase (or the cleanup, when it has none left).
        self.net_pending: dict[str, list[str]] = {}
        self._watch: contextlib.AbstractContextManager[None] | None = None

    # --- steps every suite has ----------------------------------------------------------------

    def resolve_versions(self, commands: tuple[str, ...] | None = None) -> VersionsUnderTest:
        """The releases of this run; of the current one only ``commands``, when given."""
        from e2e_dra.releases import versions_under_test

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
        from e2e_dra.provision import ensure_node_runtime

        assert self.versions is not None
        runtime = ensure_node_runtime(self.versions.current.source_dir)
        self.node_env = runtime.env()
        self.info["node_runtime"] = str(runtime.root)

    def bring_up(
        self, log_dir: Path, state: str, bin_dir: Path, env: dict[str, str], gates: str = ""
    ) -> None:
        from e2e_dra.kube import Kube
        from localupcluster.cluster import Cluster

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
        self._start_claim_watch()
        self.nodes = self._schedulable_nodes()
        self.info["kubeconfig"] = str(self.cluster.kubeconfig)

    def refresh_clients(self) -> None:
        """After a restart: new connections everywhere (old ones point at a dead server)."""
        assert self.kube is not None
        old, self.kube = self.kube, self.kube.fresh()
        old.close()
        if self.claim_watch is not None:
            old_watch, self._watch_kube = self._watch_kube, self.kube.fresh()
            self.claim_watch.use_client(self._watch_kube)
            if old_watch is not None:
                old_watch.close()
        for harness in self.harnesses.values():
            harness.driver.use_client(self.kube)
            harness.builder.use_client(self.kube)

    def wait_for_slices(self, why: str) -> None:
        """The kubelet wipes ResourceSlices when it restarts; each driver puts its own back.

        A driver whose slices do not come back fails its subtest's next phase, not the others.
        """
        for name, harness in sorted(self.harnesses.items()):
            if not harness.publishes or name in self.dropped:
                continue
            logger.info(f"waiting for ResourceSlices of {harness.driver.name} ({why})")
            try:
                harness.driver.wait_for_slices(SLICES_TIMEOUT)
            except Exception as exc:
                self.pending[name] = AssertionError(
                    f"{name}: ResourceSlices of {harness.driver.name} did not come back {why}: "
                    f"{exc}"
                )

    # --- what the run asks of a backend -------------------------------------------------------

    def unmet(self, name: str) -> str | None:
        from e2e_dra.kube import retrying

        subtest = self.subtests[name]
        if self.versions is not None:
            excluded = unsupported_release(subtest.releases, *self.tested_versions())
            if excluded is not None:
                return f"needs Kubernetes {subtest.releases}; {excluded} is not"
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

    def drop(self, subtest: str) -> None:
        self.dropped.add(subtest)

    def context(self, entry: Entry) -> Context:
        name = str(entry.subtest)
        if name not in self.harnesses:
            self._set_up(name)
        pending = self.pending.pop(name, None)
        if pending is not None:
            raise pending
        harness = self.harnesses[name]
        assert self.kube is not None
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
        """What the safety nets found that fails ``entry``, which just ended.

        A finding of the subtest whose phase this is fails that phase; a finding seen during a
        cluster step or another subtest's phase waits for its own subtest's next phase. The
        cleanup (and so the end of the run) reports what is still waiting.
        """
        findings: list[Finding] = []
        if self.claim_watch is not None and self.kube is not None:
            try:
                self.claim_watch.sweep()
            except Exception as exc:
                findings.append(
                    Finding(None, f"could not list ResourceClaims to check them: {exc}")
                )
            findings += self.claim_watch.take()
        for name, harness in sorted(self.harnesses.items()):
            findings += [Finding(name, text) for text in harness.driver.take_dropped_fields()]
        own = None if entry.is_step else entry.subtest
        where = f"cluster step {entry.id!r}" if entry.is_step else f"phase {entry.phase!r}"
        now: list[str] = []
        for finding in findings:
            owner = f"subtest {finding.owner!r}" if finding.owner else "no known subtest"
            text = f"{finding.message} [{owner}; seen during {where}]"
            if finding.owner is None or finding.owner == own:
                now.append(text)
            else:
                self.net_pending.setdefault(finding.owner, []).append(text)
        if own is not None:
            now += self.net_pending.pop(own, [])
        if entry.is_step and entry.step == CLEANUP:
            for name in sorted(self.net_pending):
                now += self.net_pending.pop(name)
        return now

    def on_failure(self, entry: Entry, exc: BaseException) -> list[str]:
        lines = []
        if self.kube is not None:
            kube = self.kube.fresh()
            try:
                dump = dump_cluster(kube, self.artifacts / "dumps", entry.id, NAMESPACE)
                lines.append(f"e2e-dra: DRA objects, pods and events: {dump}")
            except Exception as exc:  # never let the report hide the failure it reports
                lines.append(f"e2e-dra: no dump of the cluster: {exc}")
            finally:
                kube.close()
        if entry.subtest in self.harnesses:
            harness = self.harnesses[str(entry.subtest)]
            calls = self._save_calls(harness.driver)
            lines.append(f"e2e-dra: driver {harness.driver.name} gRPC calls: {calls}")
            log = self._driver_dir / f"driver-{harness.driver.name}.log"
            lines.append(f"e2e-dra: driver log: {log}")
        lines += self._component_logs()
        return lines

    def close(self) -> None:
        """Builders' tear-down, drivers stop, the nets' last look, cluster stop: each tried, the
        first error raised (the others as its notes).

        Each driver stops as soon as its objects are gone, so the kubelet's wiping delay (30 s
        after a plugin unregisters) runs for all of them at once; then one wait checks that the
        kubelet removed the ResourceSlices of every driver (upstream: ``IsGone`` per driver).
        """
        attempts = Attempts("cleanup", logger.info)
        stopped: dict[str, str] = {}  # driver -> subtest
        live = self._api_reachable()
        for name in sorted(self.harnesses, reverse=True):
            harness = self.harnesses.pop(name)
            if live:
                attempts(
                    f"tear down objects of {name}",
                    lambda h=harness: h.builder.tear_down(h.driver.prepared_claims),
                )
            attempts(f"stop driver {harness.driver.name}", harness.driver.stop)
            stopped[harness.driver.name] = name
            attempts("save gRPC calls", lambda h=harness: self._save_calls(h.driver))
            for text in harness.driver.take_dropped_fields():
                self.net_pending.setdefault(name, []).append(
                    f"{text} [subtest {name!r}; seen during the cleanup]"
                )
        if live:
            attempts("ResourceSlice removal", lambda: self._slices_removed(stopped))
            if self.claim_watch is not None:
                attempts("check ResourceClaims", self.claim_watch.sweep)
                for finding in self.claim_watch.take():
                    owner = f"subtest {finding.owner!r}" if finding.owner else "no known subtest"
                    self.net_pending.setdefault(finding.owner or "", []).append(
                        f"{finding.message} [{owner}; seen during the cleanup]"
                    )
        if self.claim_watch is not None:
            self.claim_watch.stop()
            self.claim_watch = None
        if self._watch_kube is not None:
            self._watch_kube.close()
            self._watch_kube = None
        if self.net_pending:
            lines = [text for _, texts in sorted(self.net_pending.items()) for text in texts]
            self.net_pending.clear()
            attempts.fail(AssertionError("safety net:\n" + "\n".join(lines)))
        if self._watch is not None:
            self._watch.__exit__(None, None, None)
            self._watch = None
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            attempts("stop the cluster", cluster.stop)
        if self.kube is not None:
            self.kube.close()
            self.kube = None
        self.pending.clear()
        self.dropped.clear()
        attempts.raise_first()

    def describe(self) -> dict[str, Any]:
        return dict(self.info)

    # --- internals ----------------------------------------------------------------------------

    def _start_claim_watch(self) -> None:
        assert self.kube is not None
        drivers = {name: f"{NAMESPACE}{name}.k8s.io" for name in self.subtests}
        self._watch_kube = self.kube.fresh()
        self.claim_watch = ClaimWatch(
            self._watch_kube, NAMESPACE, lambda claim: claim_owner(claim, drivers)
        )
        self.claim_watch.start()

    def _slices_removed(self, stopped: Mapping[str, str]) -> None:
        """Upstream's ExpectResourceSliceRemoval, for every stopped driver at once."""
        assert self.kube is not None
        left = wait_slices_removed(self.kube, stopped)
        if left:
            raise AssertionError(
                "safety net: ResourceSlices left after their driver stopped (the kubelet "
                f"removes a plugin's slices within {slice_removal_timeout():g} s after it "
                "unregisters): "
                + "; ".join(
                    f"driver {driver} of subtest {stopped[driver]!r}: {', '.join(names)}"
                    for driver, names in left.items()
                )
            )

    @property
    def _driver_dir(self) -> Path:
        return self.artifacts / "drivers"

    def _set_up(self, name: str) -> None:
        from e2e_dra.builder import Builder
        from e2e_dra.driver import Driver

        assert self.kube is not None and self.nodes
        subtest = self.subtests[name]
        resources = subtest.resources(self.nodes) if subtest.resources else None
        driver = Driver(
            f"{NAMESPACE}{name}.k8s.io",
            self.nodes[0],
            self.kube,
            resources=resources,
            privileged_client=subtest.privileged_client,
            reconcile_pool=subtest.reconcile_pool,
            namespace=NAMESPACE,
            log_dir=self._driver_dir,
        )
        builder = Builder(self.kube, name, namespace=NAMESPACE, log=logger.info)
        self.harnesses[name] = Harness(driver, builder, publishes=resources is not None)
        logger.info(f"starting driver {driver.name} on node {self.nodes[0]}")
        driver.start()
        driver.wait_registered(REGISTRATION_TIMEOUT)
        if resources is not None:
            driver.wait_for_slices(SLICES_TIMEOUT)
        builder.set_up()

    def _schedulable_nodes(self) -> list[str]:
        from e2e_dra.kube import path
        from e2e_dra.waits import eventually

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

    def _save_calls(self, driver: Driver) -> Path:
        records = [
            {
                "method": call.method,
                "request": _message(call.request),
                "response": _message(call.response),
                "error": call.error,
                "done": call.done,
            }
            for call in driver.calls.records
        ]
        return write_json(self._driver_dir / f"grpc-calls-{driver.name}.json", records)

    def _crashed(self) -> str | None:
        """Which component ended during the run, named with the tail of its log; None if none."""
        exited = self.cluster.exited() if self.cluster is not None else []
        return "component crashed: " + "\n".join(exited) if exited else None

    def _component_logs(self) -> list[str]:
        if self.cluster is None:
            return []
        from localupcluster import KUBE_CLUSTER_COMPONENTS

        lines = [f"e2e-dra: {line}" for line in self.cluster.exited()]
        for component in KUBE_CLUSTER_COMPONENTS:
            log = self.cluster.log_path(component)
            if log is not None:
                lines.append(f"e2e-dra: {component} log: {log}")
        lines.append(f"e2e-dra: all cluster logs: {self.cluster.log_dir}")
        return lines

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


def turn(gates: tuple[str, ...], value: str) -> str:
    """``("A", "B"), "true"`` -> ``"A=true,B=true"`` (upstream's turnFg)."""
    return ",".join(f"{gate.partition('=')[0]}={value}" for gate in gates)


def _message(message: Any) -> Any:
    """A gRPC request or response as JSON-able data (protobuf messages become dicts)."""
    if message is None:
        return None
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import Message

    return MessageToDict(message) if isinstance(message, Message) else str(message)
