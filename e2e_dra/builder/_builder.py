"""The Builder: what a subtest calls, under upstream's names, made of single-purpose parts.

Upstream's subtests are written against one builder type (``b.external_claim()``,
``b.create(...)``, ``b.test_pod(pod)``, ``b.defer(fn)``), so the port keeps that face.

Two lifetimes, two classes. :class:`SubtestObjects` is the subtest's, from its first phase to its
tear-down: the name counters, the labels, what the tear-down must remember. It holds no client.
A :class:`Builder` is one phase's: made by :meth:`SubtestObjects.builder` with the client of the
cluster as it is in that phase, and dropped with it; a cluster restart means a new builder, never
a re-pointed one. A Builder *is* each of its parts, each a base class: an
:class:`ObjectFactory` over the subtest's counters, and, over the phase's client, an
:class:`ObjectClient` (create, and objects by name) extended by :class:`Pods` (waits, the env
check, exec) and by the :class:`Sweeper` (the tear-down). A method is written once, in its part,
and a subtest calls it on the builder: no method here passes a call on to another object.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from e2e_dra.builder._objects import SUBTEST_LABEL, SUITE_LABEL, ObjectFactory
from e2e_dra.builder._pods import Pods
from e2e_dra.builder._teardown import Leftovers, Sweeper
from e2e_dra.kube import Kube

# The package's name, not this module's: progress records keep the name they always had.
logger = logging.getLogger("e2e_dra.builder")


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

    def builder(self, kube: Kube, phase: str = "") -> Builder:
        """A builder for one phase (``phase``, its name), talking through ``kube``."""
        return Builder(self, kube, phase)

    def in_namespace(self, namespace: str) -> SubtestObjects:
        """The same subtest's objects in another namespace: the same labels, names that count
        on, and the same tear-down memory."""
        other = SubtestObjects(
            self.subtest, suite=self.suite, namespace=namespace, image=self.image, log=self.log
        )
        other.counters = self.counters
        other.leftovers = self.leftovers
        return other


class Builder(ObjectFactory, Pods, Sweeper):
    """Creates one subtest's objects under upstream's names, addresses them by name, checks the
    pods that use them, and tears them down, in one phase.

    Each part is a base class over the same few attributes (``kube``, ``namespace``, ``labels``,
    ``log``), so the builder has their methods as its own: :class:`ObjectFactory` the objects
    (``external_claim``, ``pod_inline``, ...), :class:`ObjectClient` objects by name (``get``,
    ``list``, ``patch``, ``delete``, ``wait_gone``, ``api_version``, ...), :class:`Pods` the pod
    checks (``wait_running``, ``test_pod``, ``exec``, ...) and :class:`Sweeper` ``create`` (which
    remembers classes), ``defer`` and ``tear_down``."""

    def __init__(self, objects: SubtestObjects, kube: Kube, phase: str = "") -> None:
        ObjectFactory.__init__(
            self,
            objects.subtest,
            namespace=objects.namespace,
            image=objects.image,
            labels=objects.labels,
            counters=objects.counters,
        )
        Sweeper.__init__(
            self,
            kube,
            objects.namespace,
            labels=objects.labels,
            leftovers=objects.leftovers,
            log=objects.log,
            phase=phase,
        )
        self.objects = objects

    def in_namespace(self, namespace: str) -> Builder:
        """This phase's builder for the subtest's objects in ``namespace`` (pod checks and
        objects by name there)."""
        return self.objects.in_namespace(namespace).builder(self.kube, self.phase)

    def set_up(self) -> dict:
        """Create the default DeviceClass (upstream's NewBuilderNow does the same)."""
        return self.create(self.device_class())[0]
