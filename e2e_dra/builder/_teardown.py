"""The sweep after a subtest: its deferred cleanups, then every test pod, pod group and claim in
its namespace, then the DeviceClasses it created.

Like upstream, it sweeps the whole namespace rather than a list of what the subtest made: a
phase that failed halfway leaves objects nobody recorded. It spares the driver proxy's pods and
waits until the driver has nothing prepared, so the driver can be stopped without stranding
claims. It tries every step and raises the first error at the end: one stuck object must not
keep the rest, or the next subtest's objects, around.
"""

from __future__ import annotations

from collections.abc import Callable

from e2e_dra.builder._api import ObjectClient
from e2e_dra.builder._objects import RESOURCE_V1, SCHEDULING_V1BETA1
from e2e_dra.kube import Kube, path, retrying
from e2e_dra.waits import eventually
from hostkit import Attempts

DRIVER_POD_LABEL = ("app.kubernetes.io/part-of", "dra-test-driver")
TEARDOWN_TIMEOUT = 60.0


class Sweeper:
    """Removes what one subtest left in its namespace, and the classes it created."""

    def __init__(
        self,
        client: ObjectClient,
        namespace: str,
        driver_name: str,
        *,
        log: Callable[[str], None],
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.driver_name = driver_name
        self.log = log
        self._classes: list[str] = []
        self._deferred: list[Callable[[Kube], None]] = []

    def track(self, obj: dict) -> None:
        """Remember ``obj``, just created, if the namespace sweep would miss it: a DeviceClass
        (cluster-wide) is deleted by name, newest first, at the end of :meth:`sweep`."""
        if obj["kind"] == "DeviceClass":
            self._classes.append(obj["metadata"]["name"])

    def defer(self, cleanup: Callable[[Kube], None]) -> None:
        """Run ``cleanup(kube)`` at :meth:`sweep`, before pods and claims are removed.

        For objects that the generic tear-down cannot remove by itself (a claim held by a
        test finalizer, a cluster-wide slice). ``cleanup`` gets the client current at that time.
        """
        self._deferred.append(cleanup)

    @property
    def deferred(self) -> tuple[Callable[[Kube], None], ...]:
        """The cleanups :meth:`sweep` will run, in the order they were deferred."""
        return tuple(self._deferred)

    def sweep(self, prepared_claims: Callable[[], list] | None = None) -> None:
        """Deferred cleanups (newest first), test pods, pod groups, claims, until the driver
        (``prepared_claims``) has unprepared them all, then the tracked classes. Tries every
        step; raises the first error at the end."""
        attempts = Attempts("tear-down", self.log)

        def attempt(step: str, fn: Callable[[], object]) -> None:
            attempts(step, retrying(fn))

        while self._deferred:
            cleanup = self._deferred.pop()
            attempt("deferred cleanup", lambda cleanup=cleanup: cleanup(self.client.kube))
        attempt("delete test pods", self._delete_test_pods)
        if retrying(self.client.kube.served)(SCHEDULING_V1BETA1):
            attempt("delete pod groups", self._delete_pod_groups)
        claims = path(RESOURCE_V1, "resourceclaims", namespace=self.namespace)
        attempt("delete claims", lambda: self._delete_all(claims))
        if prepared_claims is not None:
            attempt(
                "wait for unprepare",
                lambda: eventually(
                    prepared_claims,
                    what=f"driver {self.driver_name} to unprepare all claims",
                    timeout=TEARDOWN_TIMEOUT,
                    until=lambda prepared: not prepared,
                ),
            )
        attempt(
            "wait for claims",
            lambda: eventually(
                lambda: self.client.kube.list(claims),
                what=f"all ResourceClaims in {self.namespace} to be deleted",
                timeout=TEARDOWN_TIMEOUT,
                until=lambda items: not items,
            ),
        )
        for name in reversed(self._classes):
            attempt(
                f"delete DeviceClass {name}",
                lambda name=name: self.client.kube.delete(
                    path(RESOURCE_V1, "deviceclasses", name), missing_ok=True
                ),
            )
        self._classes.clear()
        attempts.raise_first()

    def _test_pods(self) -> list[dict]:
        key, value = DRIVER_POD_LABEL
        pods = self.client.kube.list(path("v1", "pods", namespace=self.namespace))
        return [p for p in pods if p["metadata"].get("labels", {}).get(key) != value]

    def _delete_test_pods(self) -> None:
        for pod in self._test_pods():
            if not pod["metadata"].get("deletionTimestamp"):
                self.client.delete(pod, missing_ok=True)
        eventually(
            self._test_pods,
            what=f"test pods in {self.namespace} to be deleted",
            timeout=TEARDOWN_TIMEOUT,
            until=lambda pods: not pods,
        )

    def _delete_pod_groups(self) -> None:
        pod_groups = path(SCHEDULING_V1BETA1, "podgroups", namespace=self.namespace)
        self._delete_all(pod_groups)
        eventually(
            lambda: self.client.kube.list(pod_groups),
            what=f"pod groups in {self.namespace} to be deleted",
            timeout=TEARDOWN_TIMEOUT,
            until=lambda items: not items,
        )

    def _delete_all(self, collection: str) -> None:
        for item in self.client.kube.list(collection):
            if not item["metadata"].get("deletionTimestamp"):
                self.log(f"Deleting {collection.rsplit('/', 1)[-1]} {item['metadata']['name']}")
                self.client.kube.delete(f"{collection}/{item['metadata']['name']}", missing_ok=True)
