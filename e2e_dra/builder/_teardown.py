"""The sweep after a subtest: its deferred cleanups, then its pods, pod groups and claims, then
the DeviceClasses it created.

It sweeps what carries the subtest's labels rather than a list of what the subtest made: a phase
that failed halfway leaves objects nobody recorded, but every object the builder creates carries
:data:`~e2e_dra.builder.SUBTEST_LABEL` and :data:`~e2e_dra.builder.SUITE_LABEL`. The server does
the selecting (a ``labelSelector`` on each list), so one subtest's sweep neither deletes nor
waits for another's objects, whether the others still run or are torn down after it.

Two kinds of claims the server makes for a subtest's pods: those the resourceclaim controller
makes from a claim template carry the template's ``spec.metadata.labels``, which the builder
sets to the subtest's labels (:func:`~e2e_dra.builder.labeled`), so the selector finds them.
Those the scheduler makes for a pod's extended resources carry no labels at all, only an owner
reference to the pod: the sweep lists the unlabelled claims (``!e2e-dra/subtest``) and keeps
those owned by one of the subtest's pods or pod groups (:func:`made_for`), read before they
are deleted.

It waits until the subtest's drivers have nothing prepared, so they can be stopped without
stranding claims. It tries every step and raises the first error at the end: one stuck object
must not keep the rest, or the next subtest's objects, around.

What the sweep needs to remember (classes created, clean-ups deferred) is the subtest's, kept in a
:class:`Leftovers` that outlives phases and cluster restarts; a :class:`Sweeper` is one phase's,
and reaches the server through that phase's client.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from e2e_dra.builder._api import ObjectClient
from e2e_dra.builder._objects import SCHEDULING_V1BETA1, SUBTEST_LABEL, labeled
from e2e_dra.hostkit import Attempts
from e2e_dra.kube import Kube, retrying
from e2e_dra.waits import eventually

TEARDOWN_TIMEOUT = 60.0

UNLABELLED = f"!{SUBTEST_LABEL}"
"""The ``labelSelector`` of objects no subtest labelled: those the server made by itself."""


@dataclass(frozen=True)
class Written:
    """An object as a subtest sent it to the server, and the phase that created it: what the
    re-upgrade leg asks the newer release to read, update and accept again."""

    phase: str
    obj: dict
    compact: bool = False  # sent as compact JSON (see ObjectClient.create)


@dataclass
class Leftovers:
    """What a subtest created, remembered across phases: the DeviceClasses its tear-down must
    remove beyond its namespace (cluster-wide, deleted by name, newest first), the clean-ups it
    deferred, and every object as it was sent (``written``)."""

    classes: list[str] = field(default_factory=list)
    deferred: list[Callable[[Any], None]] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)

    def track(self, obj: dict, phase: str, *, compact: bool = False) -> None:
        """Remember ``obj`` (as sent), just created in ``phase``."""
        self.written.append(Written(phase, obj, compact))
        if obj["kind"] == "DeviceClass":
            self.classes.append(obj["metadata"]["name"])


def made_for(claim: dict, owners: Collection[str]) -> bool:
    """Whether ``claim`` is owned by one of the objects whose UIDs are ``owners``: a claim the
    server made for a subtest's pod (its extended resources) names the pod only there."""
    references = claim["metadata"].get("ownerReferences") or []
    return any(reference.get("uid") in owners for reference in references)


class Sweeper(ObjectClient):
    """Removes what one subtest left in its namespace, and the classes it created; remembers
    those classes, and the clean-ups a subtest defers, as it goes."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        *,
        labels: Mapping[str, str],
        leftovers: Leftovers,
        log: Callable[[str], None],
        phase: str = "",
    ) -> None:
        super().__init__(kube, namespace, labels=labels, log=log)
        self.leftovers = leftovers
        self.phase = phase  # the phase this client is for: what it creates is remembered by it

    def create(self, *objs: dict, compact: bool = False) -> list[dict]:
        """Create each object (see :meth:`ObjectClient.create`); the tear-down deletes the
        DeviceClasses among them, which are cluster-wide and found by name."""
        created = []
        for obj in objs:
            created += super().create(obj, compact=compact)
            self.leftovers.track(labeled(obj, self.labels), self.phase, compact=compact)
        return created

    def defer(self, cleanup: Callable[[Self], None]) -> None:
        """Run ``cleanup(b)`` at :meth:`tear_down`, before pods and claims are removed; ``b`` is
        the builder of the phase that tears down (the client current then).

        For objects that the sweep cannot remove by itself (a claim held by a test finalizer, a
        cluster-wide slice, a namespace of the subtest's own)."""
        self.leftovers.deferred.append(cleanup)

    @property
    def deferred(self) -> tuple[Callable[[Any], None], ...]:
        """The cleanups :meth:`tear_down` will run, in the order they were deferred."""
        return tuple(self.leftovers.deferred)

    def tear_down(self, prepared_claims: Callable[[], list] | None = None) -> None:
        """Remove what the subtest left: deferred cleanups (newest first), its pods, pod groups
        and claims (those of its pods too), until its drivers (``prepared_claims``) have
        unprepared them all, then the classes it created. Tries every step; raises the first
        error at the end."""
        attempts = Attempts("tear-down", self.log)
        pending = self.begin_tear_down(attempts, prepared_claims)
        attempts("wait for the tear-down", lambda: wait_torn_down([pending]))
        self.end_tear_down(attempts)
        attempts.raise_first()

    def begin_tear_down(
        self, attempts: Attempts, prepared_claims: Callable[[], list] | None = None
    ) -> Pending:
        """Everything of :meth:`tear_down` that does not wait: the deferred cleanups run, the
        deletions sent. The returned :class:`Pending` says what is still there, so that the
        sweeps of many subtests wait out one deadline together rather than one each."""
        owners: set[str] = set()  # UIDs of the subtest's pods and pod groups
        resources = ["pods"]
        if retrying(self.kube.served)(SCHEDULING_V1BETA1):
            resources.append("podgroups")
        deferred = self.leftovers.deferred
        while deferred:
            cleanup = deferred.pop()
            attempts("deferred cleanup", retrying(functools.partial(cleanup, self)))
        for resource in resources:
            attempts(
                f"delete {resource}", retrying(lambda r=resource: self._delete_owners(r, owners))
            )
        attempts(
            "delete claims", retrying(lambda: self._delete("resourceclaims", self._claims(owners)))
        )
        return Pending(self, tuple(resources), owners, prepared_claims)

    def end_tear_down(self, attempts: Attempts) -> None:
        """The DeviceClasses the subtest created, deleted once its claims are gone."""
        classes = self.leftovers.classes
        for name in reversed(classes):
            attempts(
                f"delete DeviceClass {name}",
                retrying(
                    functools.partial(
                        self.kube.delete, self.url("deviceclasses", name), missing_ok=True
                    )
                ),
            )
        classes.clear()

    @property
    def subtest_name(self) -> str:
        return self.labels.get(SUBTEST_LABEL, "the subtest")

    def _delete_owners(self, resource: str, owners: set[str]) -> None:
        """Delete the subtest's ``resource`` (pods, pod groups); their UIDs go into ``owners``
        first, for the claims made for them."""
        items = self.list(resource, mine=True)
        owners.update(item["metadata"]["uid"] for item in items if item["metadata"].get("uid"))
        self._delete(resource, items)

    def _claims(self, owners: Collection[str]) -> list[dict]:
        """The subtest's claims: those with its labels, and those without labels that the
        server made for one of ``owners``."""
        claims = self.list("resourceclaims", mine=True)
        if owners:
            unlabelled = self.list("resourceclaims", labelSelector=UNLABELLED)
            claims += [claim for claim in unlabelled if made_for(claim, owners)]
        return claims

    def _delete(self, resource: str, items: list[dict]) -> None:
        """Delete each of ``items`` (of ``resource``) not being deleted already; gone is fine."""
        for item in items:
            if not item["metadata"].get("deletionTimestamp"):
                self.delete(resource, item["metadata"]["name"], missing_ok=True)


@dataclass(frozen=True)
class Pending:
    """A sweep under way: what of one subtest must still go before its drivers may stop."""

    sweeper: Sweeper
    resources: tuple[str, ...]  # pods, and pod groups where the server serves them
    owners: set[str]
    prepared_claims: Callable[[], list] | None

    def left(self) -> str:
        """What is still there ("pods a, b; claims c; prepared by its drivers: d"), "" when
        nothing is."""
        sweeper = self.sweeper
        parts = [
            f"{resource} {', '.join(names)}"
            for resource in (*self.resources, "resourceclaims")
            if (names := _names(self._listed(resource)))
        ]
        if self.prepared_claims is not None and (prepared := self.prepared_claims()):
            parts.append(f"prepared by its drivers: {', '.join(map(str, prepared))}")
        return f"{sweeper.subtest_name}: {'; '.join(parts)}" if parts else ""

    def _listed(self, resource: str) -> list[dict]:
        if resource == "resourceclaims":
            return retrying(self.sweeper._claims)(self.owners)
        return retrying(lambda: self.sweeper.list(resource, mine=True))()


def wait_torn_down(pending: Collection[Pending], timeout: float = TEARDOWN_TIMEOUT) -> None:
    """Until none of the sweeps ``pending`` has anything left, within one ``timeout`` for all of
    them: a release that never lets a pod or claim go (an unprepare that never comes) costs one
    timeout per run, not one per subtest; the error names what each subtest left."""
    eventually(
        lambda: [text for p in pending if (text := p.left())],
        what="the torn-down subtests' pods and claims to be gone, and unprepared",
        timeout=timeout,
        until=lambda left: not left,
    )


def _names(items: list[dict]) -> list[str]:
    return [item["metadata"]["name"] for item in items]
