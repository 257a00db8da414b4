"""The Builder: what a subtest calls, under upstream's names, over single-purpose parts.

Upstream's subtests are written against one builder type (``b.external_claim()``,
``b.create(...)``, ``b.test_pod(pod)``, ``b.defer(fn)``), so the port keeps that face.

Two lifetimes, two classes. :class:`SubtestObjects` is the subtest's, from its first phase to its
tear-down: the name counters, the labels, what the tear-down must remember. It holds no client.
A :class:`Builder` is one phase's: made by :meth:`SubtestObjects.builder` with the client of the
cluster as it is in that phase, and dropped with it; a cluster restart means a new builder, never
a re-pointed one. A Builder *is* an :class:`ObjectFactory` over the subtest's counters (its
object methods are the builder's own) and owns the parts that reach the cluster: the
:class:`ObjectClient` (create, and objects by name), :class:`Pods` (waits, the env check, exec)
and the :class:`Sweeper` (the tear-down).
"""

from __future__ import annotations

import builtins
import copy
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from e2e_dra.builder._api import ObjectClient
from e2e_dra.builder._objects import DEFAULT_ENV, SUBTEST_LABEL, SUITE_LABEL, ObjectFactory
from e2e_dra.builder._pods import POD_DELETE_TIMEOUT, POD_START_TIMEOUT, Pods
from e2e_dra.builder._teardown import Leftovers, Sweeper
from e2e_dra.kube import Kube

# The package's name, not this module's: progress records keep the name they always had.
logger = logging.getLogger("e2e_dra.builder")

Cleanup = Callable[["Builder"], None]


class SubtestObjects:
    """One subtest's objects across its phases and the cluster's restarts: name counters,
    labels, the classes it created and the clean-ups it deferred. No client."""

    def __init__(
        self,
        subtest: str,
        *,
        suite: str,
        namespace: str = "default",
        image: str | None = None,
        log: Callable[[str], None] = logger.info,
    ) -> None:
        self.subtest = subtest
        self.suite = suite
        self.namespace = namespace
        self.image = image
        self.log = log
        self.labels = {SUBTEST_LABEL: subtest, SUITE_LABEL: suite}
        self.counters: Counter[str] = Counter()
        self.leftovers = Leftovers()

    def builder(self, kube: Kube) -> Builder:
        """A builder for one phase, talking through ``kube``."""
        return Builder(self, kube)

    def in_namespace(self, namespace: str) -> SubtestObjects:
        """The same subtest's objects in another namespace: the same labels, names that count
        on, and the same tear-down memory."""
        other = SubtestObjects(
            self.subtest, suite=self.suite, namespace=namespace, image=self.image, log=self.log
        )
        other.counters = self.counters
        other.leftovers = self.leftovers
        return other

    def defer(self, cleanup: Cleanup) -> None:
        """Run ``cleanup(builder)`` at the tear-down (see :meth:`Builder.defer`)."""
        self.leftovers.deferred.append(cleanup)


class Builder(ObjectFactory):
    """Creates one subtest's objects under upstream's names, addresses them by name, and checks
    the pods that use them, in one phase."""

    def __init__(self, objects: SubtestObjects, kube: Kube) -> None:
        super().__init__(
            objects.subtest,
            namespace=objects.namespace,
            image=objects.image,
            labels=objects.labels,
            counters=objects.counters,
        )
        self.objects = objects
        self.log = objects.log
        self.kube = kube
        self.client = ObjectClient(kube, objects.namespace, log=objects.log)
        self.pods = Pods(self.client, log=objects.log)
        self.sweeper = Sweeper(
            self.client,
            self.driver_name,
            objects.leftovers,
            labels=objects.labels,
            log=objects.log,
        )

    def in_namespace(self, namespace: str) -> Builder:
        """This phase's builder for the subtest's objects in ``namespace`` (pod checks and
        objects by name there)."""
        return self.objects.in_namespace(namespace).builder(self.kube)

    def set_up(self) -> dict:
        """Create the default DeviceClass (upstream's NewBuilderNow does the same)."""
        return self.create(self.device_class())[0]

    # --- new objects ----------------------------------------------------------------------------

    def create(self, *objs: dict, compact: bool = False) -> list[dict]:
        """Create each object at its own apiVersion, with the subtest's labels; the server's
        answers, in order. The tear-down deletes the DeviceClasses among them. ``compact``: sent
        as compact JSON, as Go clients send it (see :func:`~e2e_dra.builder.compact_json`)."""
        created = []
        for obj in objs:
            created.append(self.client.create(self.labeled(obj), compact=compact))
            self.objects.leftovers.track(obj)
        return created

    def labeled(self, obj: dict) -> dict:
        """``obj`` with the subtest's labels (its own win), also on a claim template's claims."""
        obj = copy.deepcopy(obj)
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**self.labels, **(metadata.get("labels") or {})}
        if obj.get("kind") == "ResourceClaimTemplate":
            spec_metadata = obj.setdefault("spec", {}).setdefault("metadata", {})
            spec_metadata["labels"] = {**self.labels, **(spec_metadata.get("labels") or {})}
        return obj

    # --- objects by name ------------------------------------------------------------------------
    # ``resource`` is the plural of the REST path ("resourceclaims", "pods", ...), at its usual
    # version (resource.k8s.io/v1, v1, scheduling.k8s.io/v1beta1) unless ``version`` names one.

    def get(self, resource: str, name: str, *, version: str | None = None) -> dict:
        """``resource`` ``name`` as the server has it now."""
        return self.client.get(resource, name, version=version)

    def list(
        self, resource: str, *, version: str | None = None, mine: bool = False, **query: Any
    ) -> list[dict]:
        """Every ``resource`` in the namespace (cluster-wide ones: in the cluster); ``mine``:
        only those labelled as this subtest's; ``query``: e.g. ``fieldSelector=...``."""
        labels = {SUBTEST_LABEL: self.name_suffix} if mine else {}
        return self.client.list(resource, version=version, labels=labels, **query)

    def patch(
        self,
        resource: str,
        name: str,
        body: Any,
        *,
        version: str | None = None,
        kind: str = "merge",
        subresource: str | None = None,
        **query: Any,
    ) -> dict:
        """Patch ``resource`` ``name`` (``kind``: merge, json, strategic or apply)."""
        return self.client.patch(
            resource, name, body, version=version, kind=kind, subresource=subresource, **query
        )

    def update(
        self,
        resource: str,
        name: str,
        body: dict,
        *,
        version: str | None = None,
        subresource: str | None = None,
    ) -> dict:
        """Replace ``resource`` ``name`` (or its ``subresource``, e.g. "status") by ``body``."""
        return self.client.update(resource, name, body, version=version, subresource=subresource)

    def delete(
        self, resource: str, name: str, *, version: str | None = None, missing_ok: bool = False
    ) -> None:
        """Delete ``resource`` ``name``; that it is gone already fails (NotFound) unless
        ``missing_ok``: a subtest that deletes what it made proves that way it survived."""
        self.client.delete(resource, name, version=version, missing_ok=missing_ok)

    def wait_gone(
        self, resource: str, name: str, *, timeout: float, version: str | None = None
    ) -> None:
        """Until reading ``resource`` ``name`` answers NotFound."""
        self.client.wait_gone(resource, name, timeout=timeout, version=version)

    def url(
        self,
        resource: str,
        name: str | None = None,
        *,
        version: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The REST path, for the unusual request the methods above do not make."""
        return self.client.url(resource, name, version=version, subresource=subresource)

    # --- API versions ---------------------------------------------------------------------------

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

    def exec(self, pod_name: str, container: str, command: builtins.list[str]) -> tuple[str, str]:
        """Run ``command`` in a container; (stdout, stderr)."""
        return self.pods.exec(pod_name, container, command)

    # --- tear-down: Sweeper ---------------------------------------------------------------------

    def defer(self, cleanup: Cleanup) -> None:
        """Run ``cleanup(b)`` at :meth:`tear_down`, before pods and claims are removed; ``b`` is
        the builder of the phase that tears down (the client current then).

        For objects that the generic tear-down cannot remove by itself (a claim held by a test
        finalizer, a cluster-wide slice)."""
        self.objects.defer(cleanup)

    def tear_down(
        self,
        prepared_claims: Callable[[], builtins.list[Any]] | None = None,
        *,
        own_only: bool = False,
    ) -> None:
        """Remove what the subtest left, waiting until the driver has nothing prepared;
        ``own_only``: only the pods and claims labelled as this subtest's (others still run)."""
        self.sweeper.sweep(prepared_claims, deferred_arg=self, own_only=own_only)
