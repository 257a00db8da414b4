"""The test driver: one DRA kubelet plugin running inside the test process.

As upstream's "IsLocal" mode: the sockets are opened directly where the kubelet looks for them,
CDI specs are written directly where the runtime reads them, and API access impersonates the
plugin's service account on its node. Everything runs on background threads, so a test starts
it, works with the cluster, and stops it, like kopf's in-thread runner.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc

from e2e_dra.driver._calls import CallLog
from e2e_dra.driver._health import HealthServicer, HealthState
from e2e_dra.driver._identity import PluginIdentity
from e2e_dra.driver._node_service import ClaimGetter, ClaimRef, DRAServicer, NodeService
from e2e_dra.driver._pb import (
    dra_v1_pb2,
    dra_v1beta1_pb2,
    health_v1_pb2,
    health_v1alpha1_pb2,
    health_v1beta1_pb2,
    pluginregistration_v1_pb2,
)
from e2e_dra.driver._protocol import KubeletProtocol
from e2e_dra.driver._registration import RegistrationServicer
from e2e_dra.driver._rpc import handler, short_name
from e2e_dra.driver._server import serve_unix, stop_server
from e2e_dra.driver._slices import RESYNC_GRACE, Pool, SlicePublisher
from e2e_dra.errors import E2EDRAError
from e2e_dra.hostkit import Attempts, poll
from e2e_dra.kube import Kube, path

log = logging.getLogger(__name__)

REGISTRATION_METHOD = "/pluginregistration.Registration/NotifyRegistrationStatus"

# The versions served, newest first; registration advertises them by their short names.
_NODE_SERVICES = (dra_v1_pb2, dra_v1beta1_pb2)
_HEALTH_SERVICES = {
    "v1": health_v1_pb2,
    "v1beta1": health_v1beta1_pb2,
    "v1alpha1": health_v1alpha1_pb2,
}
HEALTH_VERSIONS = tuple(_HEALTH_SERVICES)
"""The ``DRAResourceHealth`` versions this driver can serve, newest first."""


class DriverError(E2EDRAError):
    """The driver could not start, register or publish."""


class Driver:
    """A DRA kubelet plugin named ``name`` on node ``node_name`` (see the package docs)."""

    def __init__(
        self,
        name: str,
        node_name: str,
        kube: Kube | None,  # None: no API side (gRPC only; claims come from get_claim)
        *,
        resources: list[Pool] | None = None,
        kubelet_root: Path = Path("/var/lib/kubelet"),
        cdi_dir: Path = Path("/var/run/cdi"),
        privileged_client: bool = False,
        reconcile_pool: str | None = None,
        namespace: str = "default",
        log_dir: Path | None = None,
        get_claim: ClaimGetter | None = None,
        health: Sequence[str] = HEALTH_VERSIONS,
        registry_dir: Path | None = None,
        plugin_dir: Path | None = None,
    ) -> None:
        if kube is None and get_claim is None:
            raise DriverError(f"driver {name}: needs an API client or a get_claim function")
        self.name = name
        self.node_name = node_name
        self.namespace = namespace
        self.privileged_client = privileged_client
        self.log_dir = log_dir
        self.registry_dir = registry_dir or kubelet_root / "plugins_registry"
        self.plugin_dir = plugin_dir or kubelet_root / "plugins" / name
        self.registration_socket = self.registry_dir / f"{name}-reg.sock"
        self.dra_socket = self.plugin_dir / "dra.sock"
        self.cdi_dir = cdi_dir
        self.calls = CallLog()
        self.health = HealthState()
        unknown = [v for v in health if v not in _HEALTH_SERVICES]
        if unknown:
            raise DriverError(f"driver {name}: no DRAResourceHealth {unknown}: {HEALTH_VERSIONS}")
        # Offered and served: all by default; fewer, as a driver built on an older library.
        self._health = tuple(_HEALTH_SERVICES[v] for v in health)
        self._admin = kube
        self._identity: PluginIdentity | None = None
        self._api = kube
        self._resources = resources
        self._reconcile_pool = reconcile_pool
        self._get_claim = get_claim
        # The kubelet's calls judged with the admin client: what the test sees, not the driver.
        self._protocol = (
            KubeletProtocol(node_name, kube, lambda: self.serving, time.time) if kube else None
        )
        self._node = NodeService(name, cdi_dir, self._fetch_claim, self._protocol)
        services = [short_name(pb, "DRAPlugin") for pb in _NODE_SERVICES]
        services += [short_name(pb, "DRAResourceHealth") for pb in self._health]
        self._registration = RegistrationServicer(name, str(self.dra_socket), services)
        self._publisher: SlicePublisher | None = None
        self._servers: list[tuple[grpc.Server, Path]] = []
        self._log_handler: logging.Handler | None = None
        self._lock = threading.Lock()
        self._stopped = False

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Serve both sockets and start publishing; returns when the sockets accept calls."""
        self._open_log()
        try:
            self._start_api_side()
            self._serve()
        except BaseException as exc:
            # What stopped the start is the error (a Ctrl-C, SIGTERM); a stop that fails because
            # of it (the API server went with the cluster) must not take its place.
            try:
                self.stop()
            except Exception as stop_error:
                exc.add_note(f"e2e-dra: stopping the half-started driver also failed: {stop_error}")
            raise

    def _serve(self) -> None:
        """Serve the DRA socket, then the registration socket (once the kubelet sees that one, it
        calls the other)."""
        interceptors = [self.calls.interceptor()]
        dra_services = [
            handler(pb, "DRAPlugin", DRAServicer(self._node, pb)) for pb in _NODE_SERVICES
        ]
        dra_services += [
            handler(pb, "DRAResourceHealth", HealthServicer(self.health, pb)) for pb in self._health
        ]
        registration = [handler(pluginregistration_v1_pb2, "Registration", self._registration)]
        for socket, services in (
            (self.dra_socket, dra_services),
            (self.registration_socket, registration),
        ):
            server = serve_unix(socket, services, interceptors, thread_name=self._threads)
            self._servers.append((server, socket))
        log.info("driver %s serving on %s", self.name, self.dra_socket)

    def _stop_serving(self, attempts: Attempts) -> None:
        """Both sockets gone, the registration socket first: the kubelet's plugin watcher
        unregisters the driver."""
        while self._servers:
            server, socket = self._servers.pop()
            attempts(f"stop {socket}", functools.partial(stop_server, server, socket))

    def stop(self) -> None:
        """Remove the sockets first (the kubelet unregisters), then what we own in the API.

        Every step is tried even when an earlier one fails (an API server that is away must not
        strand the RBAC objects or the log handler); the first error is raised at the end.
        """
        attempts = Attempts(f"driver {self.name}: stopping", log.warning)
        self._stopped = True
        attempts("end the calls that wait on a block", self._node.stop)
        attempts("close the health service", self.health.close)
        self._stop_serving(attempts)
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            registered = self.calls.succeeded(REGISTRATION_METHOD)
            # The kubelet removes node-local slices of a plugin that went away; everything else
            # (cluster-wide slices, or a driver the kubelet never knew) is ours to remove.
            attempts(
                "remove its ResourceSlices",
                lambda: publisher.stop(
                    delete=lambda item: (
                        not (registered and (item.get("spec") or {}).get("nodeName"))
                    )
                ),
            )
        identity, self._identity = self._identity, None
        if identity is not None:
            attempts("delete its RBAC identity", identity.delete)
        self._close_log()
        attempts.raise_first()

    @property
    def _threads(self) -> str:
        """Prefix of this driver's thread names, which its log file picks its lines by."""
        return f"driver-{self.name}"

    def __enter__(self) -> Driver:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _start_api_side(self) -> None:
        if self._admin is None:
            return
        api = self._admin
        if not self.privileged_client:
            self._identity = PluginIdentity(self._admin, self.name, self.namespace)
            self._identity.create()
            api = self._identity.client(self.node_name)
        self._api = api
        self._publisher = SlicePublisher(
            self.name,
            api,
            reconcile_pool=self._reconcile_pool,
            owner_node=self.node_name,
        )
        self._publisher.publish(self._resources or [])
        self._publisher.start()

    # --- API side -----------------------------------------------------------------------------

    def _fetch_claim(self, namespace: str, name: str) -> dict:
        if self._get_claim is not None:
            return self._get_claim(namespace, name)
        if self._api is None:  # the constructor refuses a driver with neither
            raise DriverError(f"driver {self.name}: no API client to read claim {namespace}/{name}")
        version = self._publisher.api_version if self._publisher else "resource.k8s.io/v1"
        return self._api.get(path(version, "resourceclaims", name, namespace=namespace))

    @property
    def client(self) -> Kube | None:
        """The client the driver talks to the API server with: the plugin's own identity (RBAC
        and admission confine it), or the admin client of a privileged driver."""
        return self._api

    def publish(self, resources: list[Pool]) -> None:
        self._resources = resources
        if self._publisher is None:
            raise DriverError(f"driver {self.name}: publish() needs a started driver with an API")
        self._publisher.publish(resources)

    @property
    def resource_api_version(self) -> str:
        """The resource.k8s.io version used with this API server (v1, else v1beta2, v1beta1)."""
        if self._publisher is None:
            raise DriverError(f"driver {self.name}: no API side (start it with an API client)")
        return self._publisher.api_version

    @property
    def pool_selector(self) -> bool | None:
        """For a driver that reconciles one pool: whether its last list since the API server
        (re)started was narrowed by the server's ``spec.pool.name`` field selector (True), or
        filtered here because the server rejects that field (False); None: not listed yet."""
        return self._publisher.pool_selector if self._publisher else None

    @property
    def slices_written_at(self) -> float:
        """When a write of the driver's ResourceSlices last returned (``time.time()``; 0.0:
        none yet): a scheduler's verdict from before it was made on other devices."""
        return self._publisher.written_at if self._publisher else 0.0

    def expected_slice_count(self) -> int:
        return self._publisher.expected_slice_count() if self._publisher else 0

    def slices(self) -> list[dict]:
        if self._publisher is None:
            return []
        return self._publisher.slices()

    def wait_for_slices(self, timeout: float = 300) -> None:
        want = self.expected_slice_count()
        counted = poll(  # the API server may be restarting: an error is "not yet"
            lambda: len(self.slices()),
            timeout=timeout,
            interval=0.5,
            until=lambda have: have == want,
            retry_on=(Exception,),
        )
        if not counted.done:
            have = -1 if counted.value is None else counted.value
            raise DriverError(
                f"driver {self.name}: {have} ResourceSlices after {timeout:.0f}s, want {want}"
            )

    def set_expect_dropped_fields(self, expect: bool) -> None:
        if self._publisher is not None:
            self._publisher.expect_dropped_fields = expect

    @property
    def publish_errors(self) -> list[str]:
        """Every error of publishing so far, also those the next try resolved (a log, no
        verdict: :meth:`take_publish_errors` says what still stands)."""
        return list(self._publisher.stats.errors) if self._publisher else []

    def take_publish_errors(self, grace: float = RESYNC_GRACE) -> list[str]:
        """Errors of publishing the slices that a later try did not resolve, each once: a slice
        the API server refuses, not a refusal while it restarted. A fresh try gets ``grace``
        seconds first. Empty once the driver is stopped."""
        return self._publisher.take_unresolved(grace) if self._publisher else []

    def take_dropped_fields(self) -> list[str]:
        """Dropped-field errors (the API server stored less than published) that nobody declared
        with :meth:`set_expect_dropped_fields`, since the last call."""
        return self._publisher.take_dropped() if self._publisher else []

    def take_protocol_findings(self) -> list[str]:
        """Calls of the kubelet that broke the kubelet plugin API's rules since the last call
        (:mod:`e2e_dra.driver._protocol`)."""
        if self._protocol is None:
            return []
        return self._protocol.take(self._node.prepared_claims())

    # --- kubelet side -------------------------------------------------------------------------

    def wait_registered(self, timeout: float = 60) -> None:
        """Until the kubelet reported a successful registration (upstream: 1 min)."""
        if not self._registration.wait_registered(timeout):
            status = self._registration.status
            why = f": kubelet said {status.error!r}" if status is not None else ""
            raise DriverError(
                f"driver {self.name}: the kubelet did not register it within {timeout:.0f}s{why}"
                f" (is a kubelet watching {self.registry_dir}?)"
            )

    @property
    def serving(self) -> bool:
        """Whether the driver serves its sockets: started, and not unregistered since."""
        return bool(self._servers)

    def unregister(self) -> None:
        """Stop serving the kubelet, as a plugin whose process stopped: the health streams end
        and both sockets go, so the kubelet unregisters the driver and forgets the health its
        stream reported (:meth:`wait_registered` waits for the next registration). Unlike a
        stopped process's, what lives in the test process stays: the health the driver reports,
        its record of prepared claims, its call log and its API side (the kubelet wipes the
        driver's ResourceSlices 30 s after it went unless it is back sooner; the publisher puts
        them back). Calls waiting on a block go on waiting until it is lifted. :meth:`register`
        serves again."""
        if not self._servers:
            raise DriverError(f"driver {self.name}: not serving, nothing to unregister")
        attempts = Attempts(f"driver {self.name}: unregistering", log.warning)
        attempts("end the health streams", self.health.end_streams)
        self._stop_serving(attempts)
        self._registration.forget()  # the kubelet's verdict was on the registration that ended
        attempts.raise_first()
        log.info("driver %s stopped serving the kubelet", self.name)

    def register(self) -> None:
        """Serve the kubelet again after :meth:`unregister`, as the plugin's process started
        anew: the sockets come back and the kubelet registers the driver again (wait for it with
        :meth:`wait_registered`) and opens a new health stream."""
        if self._stopped:
            raise DriverError(f"driver {self.name}: stopped; a stopped driver is not served again")
        if self._servers:
            raise DriverError(f"driver {self.name}: already serving")
        try:
            self._serve()
        except BaseException:
            self._stop_serving(Attempts(f"driver {self.name}: half served", log.warning))
            raise

    @contextlib.contextmanager
    def unregistered(self) -> Iterator[None]:
        """Unregistered while inside (:meth:`unregister`), served again on the way out, also
        when the body fails: a pod whose claim this driver prepared can only be torn down
        through it. Registration is not waited for (:meth:`wait_registered`)."""
        self.unregister()
        try:
            yield
        except BaseException as exc:
            try:
                self.register()
            except Exception as again:
                exc.add_note(f"e2e-dra: serving driver {self.name} again also failed: {again}")
            raise
        self.register()

    def prepared_claims(self) -> list[ClaimRef]:
        return self._node.prepared_claims()

    def cdi_spec_files(self, claim_uid: str) -> list[Path]:
        """The CDI spec files this driver's prepare wrote for the claim, as they are on disk."""
        return self._node.spec_files(claim_uid)

    def forget_prepared_claims(self) -> list[ClaimRef]:
        """What a restart of the driver's process loses: its record of prepared claims (it keeps
        none on disk). The sockets, the registration and the ResourceSlices stay as they are."""
        return self._node.forget()

    def set_failure(self, method: str, error: str | None) -> None:
        self.calls.set_failure(method, error)

    def block_prepare(self) -> contextlib.AbstractContextManager[None]:
        """While inside, NodePrepareResources calls wait (see NodeService.block_prepare)."""
        return self._node.block_prepare()

    def fail_prepare(self, claim_name: str) -> contextlib.AbstractContextManager[None]:
        """While inside, the claim's prepare fails, the others' do not (see
        NodeService.fail_prepare)."""
        return self._node.fail_prepare(claim_name)

    def block_unprepare(self) -> contextlib.AbstractContextManager[None]:
        """While inside, NodeUnprepareResources calls wait (see NodeService.block_unprepare)."""
        return self._node.block_unprepare()

    def set_health(self, pool: str, device: str, health: str, message: str = "") -> None:
        self.health.set(pool, device, health, message)

    def silence_health(self, pool: str, device: str, timeout: int) -> None:
        """Stop reporting the device's health, as a plugin that lost track of it: see
        ``HealthState.silence``; ``set_health`` reports it again."""
        self.health.silence(pool, device, timeout)

    # --- logs ---------------------------------------------------------------------------------

    def _open_log(self) -> None:
        if self.log_dir is None:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.log_dir / f"driver-{self.name}.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        # Every driver of the suite logs through the same module loggers: keep the lines of this
        # driver's threads, and those that name it.
        handler.addFilter(
            lambda record: (
                (record.threadName or "").startswith(self._threads)
                or self.name in record.getMessage()
            )
        )
        logging.getLogger("e2e_dra.driver").addHandler(handler)
        if logging.getLogger("e2e_dra.driver").getEffectiveLevel() > logging.INFO:
            logging.getLogger("e2e_dra.driver").setLevel(logging.INFO)
        self._log_handler = handler

    def _close_log(self) -> None:
        handler, self._log_handler = self._log_handler, None
        if handler is not None:
            logging.getLogger("e2e_dra.driver").removeHandler(handler)
            handler.close()
