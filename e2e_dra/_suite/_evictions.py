"""The eviction net: every pod the device-taint eviction controller deletes is due for it, and
says why, whichever subtest made the pod and whichever release runs the controller.

KEP-5055 gives the controller one job: a pod whose allocated device carries a ``NoExecute``
taint that the allocation's tolerations do not tolerate is deleted, at once, or once the
toleration's ``tolerationSeconds`` are over, counted from the taint's ``timeAdded``; a taint that
goes away, or a toleration that comes, before that cancels the deletion. KEP-3329 (pod disruption
conditions, GA in 1.31) adds that a controller that deletes a pod first says so on the pod: a
``DisruptionTarget`` condition, for this one with reason ``DeletionByDeviceTaintManager``. Its
deletion is announced by an event (reason ``DeviceTaintManagerEviction``, "Marking for
deletion").

So the net follows every version of every pod, claim, ResourceSlice and DeviceTaintRule (fed by
the watches that already follow them), and at the end of every entry it reads the controller's
events. For every pod the controller marked for deletion, two rules:

- **condition:** the pod, once deleted, carried the ``DisruptionTarget`` condition in some
  version the watch saw;
- **due:** around the moment it was marked (:data:`BEFORE` seconds before to :data:`AFTER`
  after, for the controller's view lags the API server's and times are whole seconds), some
  device of its claims' allocations carried a ``NoExecute`` taint, in its slice or from a
  DeviceTaintRule that selects it, which the allocation's tolerations for that device do not
  tolerate, or tolerate only for ``tolerationSeconds`` that were over.

A pod, claim or device the net never saw (before its watches started) is not judged: no
evidence is no finding. A rule broken is a finding of the subtest that owns the pod's claim.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e_dra._suite._nets import Finding
from e2e_dra._suite._taint_rules import TaintRule, timestamp, tolerates
from e2e_dra.builder import claim_names
from e2e_dra.kube import Kube, KubeError, retrying

logger = logging.getLogger(__name__)

REASON = "DeviceTaintManagerEviction"  # the controller's event
MARKED = "Marking for deletion"  # its message when it deletes (not "Cancelling deletion")
CONDITION = ("DisruptionTarget", "DeletionByDeviceTaintManager")  # type, reason (KEP-3329)
BEFORE = 3.0
"""Seconds before the marking in which a taint still counts: the controller acts on what its
informers showed a moment ago."""
AFTER = 5.0
"""Seconds after it: the marking's time is whole seconds, and the watches here see a change a
moment after the controller did (on a busy host, seconds)."""
KEEP = 900.0  # seconds a superseded version is kept: long past any marking it could explain
EVENTS = "/api/v1/events"

Device = tuple[str, str, str]  # driver, pool, device


@dataclass
class History:
    """The versions of one object as the watches saw them, oldest first: (seen at, object or
    None once deleted)."""

    versions: list[tuple[float, dict | None]] = field(default_factory=list)

    def add(self, at: float, obj: dict | None) -> None:
        self.versions.append((at, obj))
        while len(self.versions) > 1 and self.versions[1][0] < at - KEEP:
            del self.versions[0]  # the next one was already current long ago

    def during(self, start: float, end: float) -> list[dict]:
        """The versions current at some moment of [start, end]."""
        found = []
        for index, (at, obj) in enumerate(self.versions):
            until = self.versions[index + 1][0] if index + 1 < len(self.versions) else None
            if at <= end and (until is None or until >= start) and obj is not None:
                found.append(obj)
        return found


class EvictionNet:
    """Holds the device-taint eviction controller to KEP-5055 and KEP-3329 (module docs).

    ``owner`` says which subtest a claim belongs to; ``clock`` is when a version is seen."""

    def __init__(
        self, owner: Callable[[dict], str | None], clock: Callable[[], float] = time.time
    ) -> None:
        self._owner = owner
        self._clock = clock
        self._lock = threading.Lock()
        self._pods: dict[str, History] = {}  # by uid
        self._claims: dict[tuple[str, str], History] = {}  # by namespace, name
        self._slices: dict[str, History] = {}  # by name
        self._rules: dict[str, History] = {}  # by name
        self._timed: set[str] = set()  # pod uids judged by rule 'due'
        self._judged: set[str] = set()  # pod uids judged by both rules

    def seen(self, event: str, obj: dict) -> None:
        """One version of a pod, claim, slice or rule, as a watch delivers it."""
        meta = obj.get("metadata") or {}
        kind = obj.get("kind")
        tables: dict[str, dict[Any, History]] = {
            "Pod": self._pods,
            "ResourceClaim": self._claims,
            "ResourceSlice": self._slices,
            "DeviceTaintRule": self._rules,
        }
        table = tables.get(str(kind))
        if table is None:
            return
        key: Any = meta.get("uid") if kind == "Pod" else meta.get("name")
        if kind == "ResourceClaim":
            key = (meta.get("namespace", ""), meta.get("name"))
        with self._lock:
            history = table.setdefault(key, History())
            history.add(self._clock(), obj)
            if event == "DELETED":  # its last version, as it went
                history.add(self._clock(), None)

    def look(self, kube: Kube) -> list[Finding]:
        """The rules, for every pod the controller has marked for deletion since the last
        look (its events): 'due' at once, 'condition' once the watch has seen the pod deleted."""
        try:
            events = retrying(kube.list)(EVENTS, fieldSelector=f"reason={REASON}")
        except KubeError as exc:
            logger.info(f"eviction net: events not listed ({exc}); looked at again later")
            return []
        return self.judge(events)

    def judge(self, events: list[dict]) -> list[Finding]:
        """The rules, for the pods the controller's ``events`` say it marked for deletion."""
        found = []
        for event in events:
            uid = str((event.get("involvedObject") or {}).get("uid", ""))
            if not str(event.get("message", "")).startswith(MARKED) or uid in self._judged:
                continue
            with self._lock:
                history = self._pods.get(uid, History()).versions
                versions = [obj for _, obj in history if obj]
            if not versions:
                continue  # never seen: nothing to judge it by
            pod = versions[-1]
            claims = self._claims_of(pod, timestamp(_event_time(event)))
            owner = next((o for o in (self._owner(c) for c in claims) if o), None)
            if uid not in self._timed:
                self._timed.add(uid)
                marked = _marked_at(versions) or timestamp(_event_time(event))
                if marked is not None and claims and not self._due(claims, marked):
                    found.append(Finding(owner, _not_due(pod, claims, marked)))
            if history[-1][1] is None or pod["metadata"].get("deletionTimestamp"):
                self._judged.add(uid)
                if _marked_at(versions) is None:
                    found.append(Finding(owner, _unmarked(pod)))
        return found

    def _claims_of(self, pod: dict, at: float | None) -> list[dict]:
        """The pod's claims as allocated when it was marked (their last allocated version)."""
        namespace = pod["metadata"].get("namespace", "")
        names: set[str | None] = set(claim_names(pod).values())
        # The claim the scheduler made for the pod's extended resources (KEP-5004).
        extended = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        names.add(extended.get("resourceClaimName"))
        end = (at if at is not None else self._clock()) + AFTER
        claims = []
        with self._lock:
            for name in sorted(n for n in names if n):
                history = self._claims.get((namespace, name))
                allocated = [
                    obj for obj in (history.during(0, end) if history else []) if _results(obj)
                ]
                if allocated:
                    claims.append(allocated[-1])
        return claims

    def _due(self, claims: list[dict], marked: float) -> bool:
        """Whether a device of ``claims`` had an untolerated NoExecute taint, or one whose
        toleration was over, at some moment around ``marked``."""
        start, end = marked - BEFORE, marked + AFTER
        with self._lock:
            slices = [s for h in self._slices.values() for s in h.during(start, end)]
            rules = [TaintRule.of(r) for h in self._rules.values() for r in h.during(start, end)]
        for claim in claims:
            for device, tolerations in _results(claim):
                taints: list[Mapping[str, Any]] = [
                    t for s in slices for t in _slice_taints(s, device)
                ]
                taints += [r.taint for r in rules if r.selects(*device)]
                if any(_evicts(t, tolerations, end) for t in taints):
                    return True
        return False


def _name(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"


def _unmarked(pod: dict) -> str:
    return (
        f"eviction net, rule 'condition': pod {_name(pod)} was deleted by the device taint "
        f"eviction controller ({REASON}: {MARKED!r}) without a {CONDITION[0]} condition (reason "
        f"{CONDITION[1]}) in any version seen: KEP-3329 has a controller that deletes a pod say "
        "so on it first"
    )


def _not_due(pod: dict, claims: list[dict], marked: float) -> str:
    held = "; ".join(
        f"{'/'.join(device)} tolerating {tolerations}"
        for claim in claims
        for device, tolerations in _results(claim)
    )
    return (
        f"eviction net, rule 'due': pod {_name(pod)} was marked for deletion by the device taint "
        f"eviction controller at {_clock(marked)}, but from {_clock(marked - BEFORE)} to "
        f"{_clock(marked + AFTER)} none of its devices ({held}) carried a NoExecute taint its "
        "allocation does not tolerate, or tolerates for tolerationSeconds that were over "
        "(KEP-5055: a taint gone or tolerated cancels the eviction)"
    )


def _results(claim: dict) -> list[tuple[Device, list[dict]]]:
    """The devices of a claim's allocation, each with the tolerations it was allocated with."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [
        ((r.get("driver", ""), r.get("pool", ""), r.get("device", "")), r.get("tolerations") or [])
        for r in (allocation.get("devices") or {}).get("results") or []
    ]


def _slice_taints(slice_: dict, device: Device) -> list[dict]:
    spec = slice_.get("spec") or {}
    if (spec.get("driver"), (spec.get("pool") or {}).get("name")) != device[:2]:
        return []
    return [
        taint
        for each in spec.get("devices") or []
        if each.get("name") == device[2]
        for taint in each.get("taints") or []
    ]


def _evicts(taint: Mapping[str, Any], tolerations: list[dict], by: float) -> bool:
    """Whether ``taint`` may evict a pod allocated with ``tolerations`` by time ``by``: it says
    NoExecute, and no toleration matches it, or the shortest ``tolerationSeconds`` of those that
    match (as for node taints: a bounded toleration wins over one without bound) is over. Where
    the time cannot be told, it may."""
    if taint.get("effect") != "NoExecute":
        return False
    matching = [t for t in tolerations if tolerates(t, taint)]
    bounds = [
        int(t["tolerationSeconds"]) for t in matching if t.get("tolerationSeconds") is not None
    ]
    if not matching:
        return True
    if not bounds:
        return False  # tolerated for good
    added = timestamp(taint.get("timeAdded"))
    return added is None or added + max(min(bounds), 0) <= by


def _marked_at(versions: list[dict]) -> float | None:
    """When the controller put its DisruptionTarget condition on the pod; None: never seen."""
    for pod in versions:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if (condition.get("type"), condition.get("reason")) == CONDITION and condition.get(
                "status"
            ) == "True":
                return timestamp(condition.get("lastTransitionTime"))
    return None


def _event_time(event: dict) -> Any:
    return event.get("eventTime") or event.get("firstTimestamp") or event.get("lastTimestamp")


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(at))
