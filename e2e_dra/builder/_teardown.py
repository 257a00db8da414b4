"""The sweep after a subtest: its deferred cleanups, then every test pod, pod group and claim in
its namespace, then the DeviceClasses it created.

Like upstream, it sweeps the whole namespace rather than a list of what the subtest made: a
phase that failed halfway leaves objects nobody recorded. A sweep while other subtests still run
(``own_only``: a chain a known bug ended) keeps to the objects that carry the subtest's labels.
It spares the driver proxy's pods and waits until the driver has nothing prepared, so the driver
can be stopped without stranding claims. It tries every step and raises the first error at the
end: one stuck object must not keep the rest, or the next subtest's objects, around.

What the sweep needs to remember (classes created, clean-ups deferred) is the subtest's, kept in a
:class:`Leftovers` that outlives phases and cluster restarts; a :class:`Sweeper` is one phase's,
and reaches the server through that phase's client.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e_dra.builder._api import ObjectClient
from e2e_dra.builder._objects import SCHEDULING_V1BETA1
from e2e_dra.hostkit import Attempts
from e2e_dra.kube import retrying
from e2e_dra.waits import eventually

DRIVER_POD_LABEL = ("app.kubernetes.io/part-of", "dra-test-driver")
TEARDOWN_TIMEOUT = 60.0


@dataclass
class Leftovers:
    """What a subtest's tear-down must remove beyond its namespace: the DeviceClasses it created
    (cluster-wide, deleted by name, newest first) and the clean-ups it deferred."""

    classes: list[str] = field(default_factory=list)
    deferred: list[Callable[[Any], None]] = field(default_factory=list)

    def track(self, obj: dict) -> None:
        """Remember ``obj``, just created, if the namespace sweep would miss it."""
        if obj["kind"] == "DeviceClass":
            self.classes.append(obj["metadata"]["name"])


class Sweeper:
    """Removes what one subtest left in its namespace, and the classes it created."""

    def __init__(
        self,
        client: ObjectClient,
        driver_name: str,
        leftovers: Leftovers,
        *,
        labels: Mapping[str, str],
        log: Callable[[str], None],
    ) -> None:
        self.labels = dict(labels)  # what marks the subtest's own objects
        self._only: Mapping[str, str] = {}  # during a sweep: the labels it keeps to
        self.client = client
        self.namespace = client.namespace
        self.driver_name = driver_name
        self.leftovers = leftovers
        self.log = log

    @property
    def deferred(self) -> tuple[Callable[[Any], None], ...]:
        """The cleanups :meth:`sweep` will run, in the order they were deferred."""
        return tuple(self.leftovers.deferred)

    def sweep(
        self,
        prepared_claims: Callable[[], list] | None = None,
        *,
        deferred_arg: Any = None,
        own_only: bool = False,
    ) -> None:
        """Deferred cleanups (newest first, each called with ``deferred_arg``), test pods, pod
        groups, claims, until the driver (``prepared_claims``) has unprepared them all, then the
        tracked classes. Tries every step; raises the first error at the end. ``own_only``: only
        the pods, pod groups and claims labelled as the subtest's."""
        self._only = self.labels if own_only else {}
        try:
            self._sweep(prepared_claims, deferred_arg)
        finally:
            self._only = {}

    def _sweep(self, prepared_claims: Callable[[], list] | None, deferred_arg: Any) -> None:
        attempts = Attempts("tear-down", self.log)

        def attempt(step: str, fn: Callable[[], object]) -> None:
            attempts(step, retrying(fn))

        deferred, classes = self.leftovers.deferred, self.leftovers.classes
        while deferred:
            cleanup = deferred.pop()
            attempt("deferred cleanup", functools.partial(cleanup, deferred_arg))
        attempt("delete test pods", self._delete_test_pods)
        if retrying(self.client.kube.served)(SCHEDULING_V1BETA1):
            attempt("delete pod groups", self._delete_pod_groups)
        attempt("delete claims", lambda: self._delete_all("resourceclaims"))
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
                lambda: self._list("resourceclaims"),
                what=f"all ResourceClaims in {self.namespace} to be deleted",
                timeout=TEARDOWN_TIMEOUT,
                until=lambda items: not items,
            ),
        )
        for name in reversed(classes):
            attempt(
                f"delete DeviceClass {name}",
                functools.partial(
                    self.client.kube.delete, self.client.url("deviceclasses", name), missing_ok=True
                ),
            )
        classes.clear()
        attempts.raise_first()

    def _test_pods(self) -> list[dict]:
        key, value = DRIVER_POD_LABEL
        pods = self._list("pods")
        return [p for p in pods if p["metadata"].get("labels", {}).get(key) != value]

    def _delete_test_pods(self) -> None:
        for pod in self._test_pods():
            if not pod["metadata"].get("deletionTimestamp"):
                self.client.delete("pods", pod["metadata"]["name"], missing_ok=True)
        eventually(
            self._test_pods,
            what=f"test pods in {self.namespace} to be deleted",
            timeout=TEARDOWN_TIMEOUT,
            until=lambda pods: not pods,
        )

    def _delete_pod_groups(self) -> None:
        self._delete_all("podgroups")
        eventually(
            lambda: self._list("podgroups"),
            what=f"pod groups in {self.namespace} to be deleted",
            timeout=TEARDOWN_TIMEOUT,
            until=lambda items: not items,
        )

    def _delete_all(self, resource: str) -> None:
        for item in self._list(resource):
            if not item["metadata"].get("deletionTimestamp"):
                name = item["metadata"]["name"]
                self.log(f"Deleting {resource} {name}")
                self.client.kube.delete(self.client.url(resource, name), missing_ok=True)

    def _list(self, resource: str) -> list[dict]:
        return self.client.list(resource, labels=self._only)
