"""Every subtest's own driver and builder (upstream: a driver instance per subtest key).

A subtest's harness is set up before its first phase, so a subtest that is skipped costs no
driver. It lives through the cluster's restarts (its driver's client learns a restarted server by
itself; each phase gets a builder over that phase's own client), and after each restart its
driver's ResourceSlices (which the kubelet wipes when it restarts) are waited for again. A driver
whose slices do not come back fails its own subtest's next phase, not the step that restarted the
cluster nor the other subtests. At the cleanup each subtest's objects are torn down before its
driver stops, so no claim is left prepared by a driver that is gone.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from e2e_dra._suite._artifacts import write_json
from e2e_dra._suite._nets import Finding
from e2e_dra.builder import SubtestObjects, driver_name, wait_torn_down
from e2e_dra.driver import (
    HEALTH_VERSIONS,
    RESYNC_GRACE,
    ClaimRef,
    Driver,
    NodeDriver,
    ProcessDriver,
    Site,
)
from e2e_dra.hostkit import Attempts
from e2e_dra.kube import Kube
from e2e_dra.supervise import ProcessId

SLICES_TIMEOUT = 300.0
REGISTRATION_TIMEOUT = 60.0

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DriverHost:
    """What a real driver needs of the cluster it joins: credentials, the releases running (its
    build may follow the kubelet's) and the host lock's ledger, which must know its process."""

    kubeconfig: Path
    releases: Mapping[str, str]
    note_process: Callable[[str, ProcessId], None]


@dataclasses.dataclass
class Harness:
    """One subtest's own driver and objects (what its builders created, over all phases)."""

    driver: NodeDriver
    objects: SubtestObjects
    publishes: bool  # the driver publishes ResourceSlices we have to wait for after restarts
    others: dict[str, Driver] = dataclasses.field(default_factory=dict)  # by suffix; publish

    @property
    def plugin(self) -> Driver | None:
        """The subtest's own e2e-dra plugin, unless it runs a real driver."""
        return self.driver if isinstance(self.driver, Driver) else None

    @property
    def plugins(self) -> list[Driver]:
        """Its e2e-dra plugins: its own unless it runs a real driver, then its others."""
        return [d for d in self.drivers if isinstance(d, Driver)]

    @property
    def real_driver(self) -> ProcessDriver | None:
        return self.driver if isinstance(self.driver, ProcessDriver) else None

    @property
    def drivers(self) -> list[NodeDriver]:
        """The subtest's own driver, then its others."""
        return [self.driver, *self.others.values()]

    @property
    def publishing(self) -> list[NodeDriver]:
        """The drivers whose slices are waited for after restarts."""
        return self.drivers if self.publishes else list(self.others.values())

    def prepared_claims(self) -> list[ClaimRef]:
        """What any of the subtest's drivers holds prepared."""
        return [claim for driver in self.drivers for claim in driver.prepared_claims()]


class Harnesses:
    """The harnesses of the subtests that have run a phase on the current cluster, by subtest."""

    def __init__(
        self, subtests: Mapping[str, Any], log_dir: Path, namespace: str, suite: str
    ) -> None:
        self.subtests = subtests
        self.log_dir = log_dir  # drivers' logs and gRPC call records
        self.namespace = namespace
        self.suite = suite
        self._harnesses: dict[str, Harness] = {}
        self._pending: dict[str, BaseException] = {}  # fails the subtest's next phase
        self._dropped: set[str] = set()  # chains that ended: not waited for any more

    def driver_name(self, subtest: str) -> str:
        return driver_name(self.namespace, subtest)

    def driver_names(self) -> dict[str, str]:
        """Every subtest's driver name (also of those not set up yet), by subtest."""
        return {name: self.driver_name(name) for name in self.subtests}

    def running(self) -> set[str]:
        """The subtests whose chains go on: set up, and not dropped."""
        return set(self._harnesses) - self._dropped

    def get(self, subtest: str) -> Harness | None:
        """``subtest``'s harness if it is set up, without setting it up."""
        return self._harnesses.get(subtest)

    def ready(
        self, subtest: str, kube: Kube, nodes: list[str], host: DriverHost | None = None
    ) -> Harness:
        """``subtest``'s harness for its next phase: set up on first use; a failure recorded for
        the subtest since its last phase (slices that did not come back) is raised here.
        ``host``: what a real driver needs of the cluster (a subtest that runs one needs it)."""
        if subtest not in self._harnesses:
            self._set_up(subtest, kube, nodes, host)
        pending = self._pending.pop(subtest, None)
        if pending is not None:
            raise pending
        return self._harnesses[subtest]

    def drop(self, subtest: str) -> None:
        """``subtest``'s chain ended: its driver's slices are not waited for any more."""
        self._dropped.add(subtest)

    def wait_for_slices(self, why: str) -> None:
        """The kubelet wipes ResourceSlices when it restarts; each driver puts its own back.

        A driver whose slices do not come back fails its subtest's next phase, not the others;
        slices that are back clear what an earlier wait recorded (a component that crashed in it
        was started again since). The drivers publish at the same time, so they share one
        deadline: a release that refuses every driver's slices costs one timeout, not one each.
        """
        deadline = time.monotonic() + SLICES_TIMEOUT
        for name, harness in sorted(self._harnesses.items()):
            if name in self._dropped or not harness.publishing:
                continue
            try:
                for driver in harness.publishing:
                    logger.info(f"waiting for ResourceSlices of {driver.name} ({why})")
                    try:
                        driver.wait_for_slices(max(deadline - time.monotonic(), 1.0))
                    except Exception as exc:
                        raise AssertionError(
                            f"{name}: ResourceSlices of {driver.name} did not come back {why}: "
                            f"{exc}"
                        ) from exc
                self._pending.pop(name, None)
            except AssertionError as exc:
                self._pending[name] = exc

    def take_slice_findings(self) -> list[Finding]:
        """What went wrong with each driver's slices since the last call: fields the API server
        dropped, and writes it refused that a fresh try did not fix."""
        grace = _Grace(RESYNC_GRACE)
        return [
            Finding(name, text)
            for name, harness in sorted(self._harnesses.items())
            for driver in harness.drivers
            for text in _slice_findings(driver, grace.left())
        ]

    def save_calls(self, subtest: str) -> Path | None:
        """The gRPC calls ``subtest``'s driver answered, as JSON (None: they cannot be seen)."""
        return _save_calls(self._harnesses[subtest].driver, self.log_dir)

    def driver_log(self, subtest: str) -> Path:
        harness = self._harnesses.get(subtest)
        name = harness.driver.name if harness is not None else self.driver_name(subtest)
        return self.log_dir / f"driver-{name}.log"

    def close(
        self, attempts: Attempts, kube: Kube | None, *, tear_down: bool
    ) -> tuple[dict[str, str], list[Finding]]:
        """Every subtest's objects torn down through ``kube`` (when ``tear_down``: the cluster
        still answers), then its drivers stopped and their gRPC calls saved. Returns the stopped
        drivers (driver -> subtest) and what went wrong with their slices that nobody took yet
        (taken before each driver stops: a stopped driver has nothing left to say).

        The sweeps wait out one deadline together (a release that never unprepares costs one
        timeout, not one per subtest), and the drivers stop together after it, so the kubelet's
        wiping delay (30 s after a plugin unregisters) runs for all of them at once.
        """
        stopped: dict[str, str] = {}
        findings: list[Finding] = []
        # A server that is gone (an interrupt stopped it) gives no fresh try a chance.
        grace = _Grace(RESYNC_GRACE if tear_down else 0.0)
        closing = [
            (name, self._harnesses.pop(name)) for name in sorted(self._harnesses, reverse=True)
        ]
        sweeps = []
        if tear_down and kube is not None:
            for _, harness in closing:
                sweeper = harness.objects.builder(kube)
                sweeps.append((sweeper, sweeper.begin_tear_down(attempts, harness.prepared_claims)))
            attempts("wait for the tear-down", lambda: wait_torn_down([p for _, p in sweeps]))
            for sweeper, _ in sweeps:
                sweeper.end_tear_down(attempts)
        for name, harness in closing:
            for driver in harness.drivers:
                findings += [Finding(name, t) for t in _slice_findings(driver, grace.left())]
                attempts(f"stop driver {driver.name}", driver.stop)
                stopped[driver.name] = name
                attempts("save gRPC calls", functools.partial(_save_calls, driver, self.log_dir))
        return stopped, findings

    def tear_down(self, subtest: str, kube: Kube) -> bool:
        """``subtest``'s objects removed now (a known bug broke its phase, and what the bug acts
        on must not break the phases after it), its default DeviceClass made again; its driver
        serves on until the cleanup. False when it has none."""
        harness = self._harnesses.get(subtest)
        if harness is None:
            return False
        builder = harness.objects.builder(kube)
        builder.tear_down(harness.prepared_claims)
        # As before its first phase (the tear-down took its DeviceClass too): a chain of
        # independent phases goes on after its known bug.
        builder.set_up()
        return True

    def forget(self) -> None:
        """The cluster is gone: nothing recorded for its subtests counts any more."""
        self._pending.clear()
        self._dropped.clear()

    def _set_up(self, name: str, kube: Kube, nodes: list[str], host: DriverHost | None) -> None:
        assert nodes
        subtest = self.subtests[name]
        resources = subtest.resources(nodes) if subtest.resources else None
        driver: NodeDriver
        if subtest.node_driver is not None:
            driver = self._real_driver(name, subtest, kube, nodes, host)
        else:
            driver = self._driver(self.driver_name(name), subtest, kube, nodes, resources)
        others = {
            other.suffix: self._driver(
                self.driver_name(f"{name}-{other.suffix}"),
                subtest,
                kube,
                nodes,
                other.resources(nodes),
            )
            for other in subtest.other_drivers
        }
        objects = SubtestObjects(name, suite=self.suite, namespace=self.namespace, log=logger.info)
        publishes = resources is not None or subtest.node_driver is not None
        harness = Harness(driver, objects, publishes=publishes, others=others)
        self._harnesses[name] = harness
        for started in harness.drivers:
            logger.info(f"starting driver {started.name} on node {nodes[0]}")
            if isinstance(started, ProcessDriver):
                assert host is not None
                started.start(host.releases.get("kubelet", ""))
            else:
                started.start()
            started.wait_registered(REGISTRATION_TIMEOUT)
        for publishing in harness.publishing:
            publishing.wait_for_slices(SLICES_TIMEOUT)
        objects.builder(kube).set_up()

    def _real_driver(
        self, name: str, subtest: Any, kube: Kube, nodes: list[str], host: DriverHost | None
    ) -> ProcessDriver:
        if host is None:
            raise AssertionError(f"{name} runs a real driver, and nobody said where it runs")
        site = Site(nodes[0], host.kubeconfig, self.log_dir)
        return ProcessDriver(subtest.node_driver, site, kube, before_run=host.note_process)

    def _driver(
        self, name: str, subtest: Any, kube: Kube, nodes: list[str], resources: list | None
    ) -> Driver:
        return Driver(
            name,
            nodes[0],
            kube,
            resources=resources,
            privileged_client=subtest.privileged_client,
            reconcile_pool=subtest.reconcile_pool,
            namespace=self.namespace,
            log_dir=self.log_dir,
            health=subtest.driver_health or HEALTH_VERSIONS,
        )


class _Grace:
    """One grace period that every driver's standing errors share: the publishers retry at the
    same time, so a release that refuses every driver's slices costs one grace, not one each."""

    def __init__(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self._deadline - time.monotonic())


def _slice_findings(driver: NodeDriver, grace: float) -> list[str]:
    """Fields the API server dropped that nobody expected, publish errors that still stand
    after ``grace`` seconds of a fresh try, and the kubelet's calls that broke the plugin API's
    rules."""
    return (
        driver.take_dropped_fields()
        + driver.take_publish_errors(grace)
        + driver.take_protocol_findings()
    )


def _save_calls(driver: NodeDriver, directory: Path) -> Path | None:
    if driver.calls is None:
        return None
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
    return write_json(directory / f"grpc-calls-{driver.name}.json", records)


def _message(message: Any) -> Any:
    """A gRPC request or response as JSON-able data (protobuf messages become dicts)."""
    if message is None:
        return None
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import Message

    return MessageToDict(message) if isinstance(message, Message) else str(message)
