"""The Builder: what a subtest calls, under upstream's names, over four single-purpose parts.

Upstream's subtests are written against one builder type (``b.external_claim()``,
``b.create(...)``, ``b.test_pod(pod)``, ``b.defer(fn)``), so the port keeps that face. Behind it,
each concern has its own class. A Builder *is* the subtest's :class:`ObjectFactory` (names and
object dicts, no client: its methods are the builder's own), and it owns the three parts that
reach the cluster, forwarding to them: the :class:`ObjectClient` (the connection: create, get,
delete, served versions), :class:`Pods` (waits, the env check, exec) and the :class:`Sweeper`
(the tear-down). The parts depend one way only: the pod checks and the sweep go through the
object client; the factory knows none of them.

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


class Builder(ObjectFactory):
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
        super().__init__(name_suffix, namespace=namespace, image=image)
        self.log = log
        self.client = ObjectClient(kube, log=log)
        self.pods = Pods(self.client, namespace, log=log)
        self.sweeper = Sweeper(self.client, namespace, self.driver_name, log=log)

    @property
    def kube(self) -> Kube:
        """The client current now (replaced by :meth:`use_client` after a restart)."""
        return self.client.kube

    def use_client(self, kube: Kube) -> None:
        """Talk through ``kube`` from now on (a fresh client after a cluster restart)."""
        self.client.use_client(kube)

    # --- API: ObjectClient ----------------------------------------------------------------------

    def set_up(self) -> dict:
        """Create the default DeviceClass (upstream's NewBuilderNow does the same)."""
        return self.create(self.device_class())[0]

    def create(self, *objs: dict) -> list[dict]:
        """Create each object at its own apiVersion; the server's answers, in order. The
        tear-down deletes the DeviceClasses among them."""
        created = []
        for obj in objs:
            created += self.client.create(obj)
            self.sweeper.track(obj)
        return created

    def get(self, obj: dict) -> dict:
        """``obj`` as the server has it now."""
        return self.client.get(obj)

    def delete(self, obj: dict, *, missing_ok: bool = False) -> None:
        """Delete ``obj``; that it is gone already fails (NotFound) unless ``missing_ok``."""
        self.client.delete(obj, missing_ok=missing_ok)

    def wait_gone(self, url_path: str, what: str, timeout: float) -> None:
        """Until GET ``url_path`` answers NotFound."""
        self.client.wait_gone(url_path, what, timeout)

    def api_version(self, group_version: str, resource: str | None = None) -> str:
        """``group_version``, checked to be served now (no fallback: see ``served_version``)."""
        return self.client.api_version(group_version, resource)

    def api_version_by_release(
        self, by_release: Mapping[str, str], resource: str | None = None
    ) -> str:
        """The group/version named for the API server's release, checked to be served."""
        return self.client.api_version_by_release(by_release, resource)

    # --- pod checks: Pods -----------------------------------------------------------------------

    def read_pod(self, name: str) -> dict:
        return self.pods.read(name)

    def wait_running(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        """Until the pod runs; fails early if it ended instead."""
        return self.pods.wait_running(name, timeout)

    def wait_unschedulable(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        """Until the scheduler reports the pod Unschedulable; a pod that runs fails at once."""
        return self.pods.wait_unschedulable(name, timeout)

    def wait_pod_gone(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        self.pods.wait_gone(name, timeout)

    def delete_pod_and_wait(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        """Delete a pod the subtest expects to exist (NotFound fails), then wait until gone."""
        self.pods.delete_and_wait(name, timeout)

    def test_pod(
        self, pod: dict, env: Sequence[str] = DEFAULT_ENV, timeout: float = POD_START_TIMEOUT
    ) -> None:
        """The pod runs and every container's environment holds each ``k=v`` line of ``env``."""
        self.pods.test(pod, env, timeout)

    def check_container_env(self, pod_name: str, container: str, env: Iterable[str]) -> None:
        """``env`` in the container prints each ``k=v`` line (as a substring, like upstream)."""
        self.pods.check_env(pod_name, container, env)

    def exec(self, pod_name: str, container: str, command: list[str]) -> tuple[str, str]:
        """Run ``command`` in a container; (stdout, stderr)."""
        return self.pods.exec(pod_name, container, command)

    # --- tear-down: Sweeper ---------------------------------------------------------------------

    def defer(self, cleanup: Callable[[Kube], None]) -> None:
        """Run ``cleanup(kube)`` at :meth:`tear_down`, before pods and claims are removed."""
        self.sweeper.defer(cleanup)

    def tear_down(self, prepared_claims: Callable[[], list] | None = None) -> None:
        """Remove what the subtest left, waiting until the driver has nothing prepared."""
        self.sweeper.sweep(prepared_claims)
