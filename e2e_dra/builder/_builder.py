"""The Builder: what a subtest calls, under upstream's names, over four single-purpose parts.

Upstream's subtests are written against one builder type (``b.external_claim()``,
``b.create(...)``, ``b.test_pod(pod)``, ``b.defer(fn)``), so the port keeps that face. Behind it,
each concern has its own class, and the Builder owns one of each and forwards to it: the
:class:`ObjectFactory` (names and object dicts, no client), the :class:`ObjectClient` (the
connection: create, get, delete, served versions), :class:`Pods` (waits, the env check, exec) and
the :class:`Sweeper` (the tear-down). The parts depend one way only: the pod checks and the sweep
go through the object client; the factory knows none of them.

A Builder outlives the cluster restarts: after each restart the suite hands it a fresh client
with :meth:`Builder.use_client`; it keeps only names and counters, never a connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from e2e_dra.builder._api import ObjectClient
from e2e_dra.builder._objects import DEFAULT_ENV, ObjectFactory
from e2e_dra.builder._pods import POD_DELETE_TIMEOUT, POD_START_TIMEOUT, Pods
from e2e_dra.builder._teardown import Sweeper
from e2e_dra.kube import Kube

# The package's name, not this module's: progress records keep the name they always had.
logger = logging.getLogger("e2e_dra.builder")


class Builder:
    """Creates one subtest's objects under upstream's names and checks the pods that use them."""

    def __init__(
        self,
        kube: Kube,
        name_suffix: str,
        *,
        namespace: str = "default",
        image: str | None = None,
        log: Callable[[str], None] = logger.info,
    ) -> None:
        self.log = log
        self.objects = ObjectFactory(name_suffix, namespace=namespace, image=image)
        self.client = ObjectClient(kube, log=log)
        self.pods = Pods(self.client, namespace, log=log)
        self.sweeper = Sweeper(self.client, namespace, self.objects.driver_name, log=log)

    # --- identity -----------------------------------------------------------------------------

    @property
    def kube(self) -> Kube:
        """The client current now (replaced by :meth:`use_client` after a restart)."""
        return self.client.kube

    @property
    def name_suffix(self) -> str:
        return self.objects.name_suffix

    @property
    def namespace(self) -> str:
        return self.objects.namespace

    @property
    def image(self) -> str:
        return self.objects.image

    @property
    def driver_name(self) -> str:
        return self.objects.driver_name

    def class_name(self) -> str:
        return self.objects.class_name()

    def extended_resource_name(self, suffix: str) -> str:
        return self.objects.extended_resource_name(suffix)

    def use_client(self, kube: Kube) -> None:
        """Talk through ``kube`` from now on (a fresh client after a cluster restart)."""
        self.client.use_client(kube)

    # --- objects: ObjectFactory's methods of the same names -----------------------------------

    def device_class(
        self, name: str | None = None, *, extended_resource_name: str | None = None
    ) -> dict:
        return self.objects.device_class(name, extended_resource_name=extended_resource_name)

    def class_with_extended_resource(self, resource: str) -> dict:
        return self.objects.class_with_extended_resource(resource)

    def claim_spec(self) -> dict:
        return self.objects.claim_spec()

    def claim_spec_v1beta1(self) -> dict:
        return self.objects.claim_spec_v1beta1()

    def external_claim(self) -> dict:
        return self.objects.external_claim()

    def pod(self) -> dict:
        return self.objects.pod()

    def pod_external(self, claim_name: str) -> dict:
        return self.objects.pod_external(claim_name)

    def pod_inline(self) -> tuple[dict, dict]:
        return self.objects.pod_inline()

    def workload(self) -> dict:
        return self.objects.workload()

    def workload_inline(self) -> tuple[dict, dict]:
        return self.objects.workload_inline()

    def pod_group(self, workload: dict, template: dict) -> dict:
        return self.objects.pod_group(workload, template)

    def grouped_pod_with_claims(self, pod_group: dict) -> dict:
        return self.objects.grouped_pod_with_claims(pod_group)

    def device_taint_rule(
        self,
        name: str,
        *,
        pool: str,
        device: str,
        taint: dict,
        api_version: str = "resource.k8s.io/v1alpha3",
    ) -> dict:
        return self.objects.device_taint_rule(
            name, pool=pool, device=device, taint=taint, api_version=api_version
        )

    # --- API: ObjectClient's methods of the same names ----------------------------------------

    def set_up(self) -> dict:
        """Create the default DeviceClass (upstream's NewBuilderNow does the same)."""
        return self.create(self.objects.device_class())[0]

    def create(self, *objs: dict) -> list[dict]:
        """Create each object at its own apiVersion; the server's answers, in order. The
        tear-down deletes the DeviceClasses among them."""
        created = []
        for obj in objs:
            created += self.client.create(obj)
            self.sweeper.track(obj)
        return created

    def get(self, obj: dict) -> dict:
        return self.client.get(obj)

    def delete(self, obj: dict, *, missing_ok: bool = False) -> None:
        self.client.delete(obj, missing_ok=missing_ok)

    def wait_gone(self, url_path: str, what: str, timeout: float) -> None:
        self.client.wait_gone(url_path, what, timeout)

    def api_version(self, group_version: str, resource: str | None = None) -> str:
        return self.client.api_version(group_version, resource)

    def api_version_by_release(
        self, by_release: Mapping[str, str], resource: str | None = None
    ) -> str:
        return self.client.api_version_by_release(by_release, resource)

    # --- pod checks: Pods (read_pod is Pods.read, test_pod Pods.test, ...) --------------------

    def read_pod(self, name: str) -> dict:
        return self.pods.read(name)

    def wait_running(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        return self.pods.wait_running(name, timeout)

    def wait_unschedulable(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        return self.pods.wait_unschedulable(name, timeout)

    def wait_pod_gone(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        self.pods.wait_gone(name, timeout)

    def delete_pod_and_wait(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        self.pods.delete_and_wait(name, timeout)

    def test_pod(
        self, pod: dict, env: Sequence[str] = DEFAULT_ENV, timeout: float = POD_START_TIMEOUT
    ) -> None:
        self.pods.test(pod, env, timeout)

    def check_container_env(self, pod_name: str, container: str, env: Iterable[str]) -> None:
        self.pods.check_env(pod_name, container, env)

    def exec(self, pod_name: str, container: str, command: list[str]) -> tuple[str, str]:
        return self.pods.exec(pod_name, container, command)

    # --- tear-down: Sweeper (tear_down is Sweeper.sweep) --------------------------------------

    def defer(self, cleanup: Callable[[Kube], None]) -> None:
        self.sweeper.defer(cleanup)

    def tear_down(self, prepared_claims: Callable[[], list] | None = None) -> None:
        self.sweeper.sweep(prepared_claims)
