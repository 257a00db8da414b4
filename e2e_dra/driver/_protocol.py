"""The kubelet's side of the kubelet plugin API, checked where only a driver can see it.

A kubelet that prepares or unprepares at the wrong time breaks no API object: the pod may even
run. Only the driver sees the calls, so the test driver holds the kubelet to what KEP-4381 and
the kubelet's DRA manager promise a driver, for every claim of every subtest:

- **prepare only what is this node's and reserved:** a NodePrepareResources for a claim whose
  allocation selects another node by name, or that is reserved for nobody (the kubelet prepares
  a claim for a pod in its ``status.reservedFor``);
- **unprepare only what no running pod uses:** after a NodeUnprepareResources, no pod on this
  node that is not being deleted still runs with the claim (its containers started before the
  call). The pods are looked at :data:`SETTLE` seconds after the call, so that a pod whose
  containers the kubelet stopped just before has had time to say so;
- **unprepare what is gone:** a claim the driver prepared that the API server no longer has
  (deleted, or replaced by one of another UID) is asked to be unprepared within
  :data:`LEAK_AFTER` seconds of the driver seeing it gone, while the driver serves.

Each rule is judged from objects the driver reads with the admin client (the test's eyes, not
the driver's own identity) and said once, naming the claim, the pod and the rule.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from datetime import datetime

from e2e_dra.driver._node_service import ClaimRef
from e2e_dra.kube import Kube, KubeError, NotFound, path

SETTLE = 5.0
"""Seconds after an unprepare before the pods that use its claim are looked at."""
LEAK_AFTER = 180.0
"""Seconds a prepared claim may be gone from the API server before the kubelet must have asked
to unprepare it (a kubelet restarted by a cluster step unprepares on its way back up)."""
CLAIMS_API = "resource.k8s.io/v1"


def _named(claim: ClaimRef) -> str:
    return f"ResourceClaim {claim.namespace}/{claim.name} ({claim.uid})"


def prepare_problems(claim: ClaimRef, obj: dict, node: str) -> list[str]:
    """What is wrong with preparing ``obj`` (the claim as the API server has it) on ``node``."""
    status = obj.get("status") or {}
    found = []
    names = _selected_names(((status.get("allocation") or {}).get("nodeSelector")) or {})
    if names is not None and node not in names:
        found.append(
            f"the kubelet of node {node} asked to prepare {_named(claim)}, allocated to node(s) "
            f"{sorted(names)} only"
        )
    if not status.get("reservedFor"):
        found.append(
            f"the kubelet asked to prepare {_named(claim)}, which is reserved for no pod (a "
            "claim is prepared for a pod in its status.reservedFor)"
        )
    return found


def _selected_names(selector: dict) -> set[str] | None:
    """The node names a v1 NodeSelector allows when each of its terms pins ``metadata.name``
    with ``In``; None when some term selects otherwise (by labels: not judged here)."""
    names: set[str] = set()
    for term in selector.get("nodeSelectorTerms") or []:
        pinned = [
            field
            for field in term.get("matchFields") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In"
        ]
        if not pinned:
            return None
        names.update(pinned[0].get("values") or [])
    return names or None


def still_running_with(claim: ClaimRef, pods: Iterable[dict], asked_at: float) -> list[str]:
    """The pods of ``pods`` (this node's, in the claim's namespace) that run with ``claim``
    although the kubelet asked at ``asked_at`` (epoch seconds) to unprepare it: not being
    deleted, Running, with a container running since before the call."""
    found = []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") != "Running":
            continue
        if claim.name not in _claims_of(spec, status):
            continue
        started = [
            s["state"]["running"].get("startedAt", "")
            for s in status.get("containerStatuses") or []
            if "running" in (s.get("state") or {})
        ]
        if any(_epoch(at) < asked_at - 1 for at in started if at):
            found.append(str(meta.get("name")))
    return found


def _claims_of(spec: dict, status: dict) -> set[str]:
    """The names of the ResourceClaims a pod uses: named in its spec or made for it."""
    named = {c.get("resourceClaimName") for c in spec.get("resourceClaims") or []}
    made = {c.get("resourceClaimName") for c in status.get("resourceClaimStatuses") or []}
    return {name for name in named | made if name}


def _epoch(stamp: str) -> float:
    """Epoch seconds of an API timestamp (``2026-12-07T01:58:46Z``)."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class KubeletProtocol:
    """The rules of the module, over one driver's calls on one node."""

    def __init__(
        self, node: str, kube: Kube, serving: Callable[[], bool], clock: Callable[[], float]
    ) -> None:
        self.node = node
        self._kube = kube
        self._serving = serving
        self._clock = clock  # epoch seconds, as the API server's timestamps
        self._lock = threading.Lock()
        self._found: list[str] = []
        self._unprepares: list[tuple[ClaimRef, float]] = []  # asked, not yet looked at
        self._asked: set[str] = set()  # UIDs the kubelet asked to unprepare
        self._gone_since: dict[str, float] = {}  # UID -> when the driver first saw it gone
        self._said: set[str] = set()

    def prepare_asked(self, claim: ClaimRef, obj: dict) -> None:
        with self._lock:
            self._asked.discard(claim.uid)  # prepared again: a new unprepare is owed
            self._note(prepare_problems(claim, obj, self.node))

    def unprepare_asked(self, claim: ClaimRef) -> None:
        with self._lock:
            self._asked.add(claim.uid)
            self._unprepares.append((claim, self._clock()))

    def take(self, prepared: Iterable[ClaimRef]) -> list[str]:
        """What broke a rule since the last call (read from the API server now; what cannot be
        read now, while a component restarts or after the cluster stopped, is left for the next
        call, never raised: a driver's cleanup must not fail on it)."""
        now = self._clock()
        with self._lock:
            due = [(c, at) for c, at in self._unprepares if now - at >= SETTLE]
            self._unprepares = [(c, at) for c, at in self._unprepares if now - at < SETTLE]
            owed = [claim for claim in prepared if claim.uid not in self._asked]
        found: list[str] = []
        for claim, at in due:
            try:
                found += self._runs_on(claim, at)
            except KubeError:  # the API server restarts, or is gone: look again next time
                with self._lock:
                    self._unprepares.append((claim, at))
        for claim in owed if self._serving() else ():
            with contextlib.suppress(KubeError):  # as above; the clock of a gone claim runs on
                found += self._leaked(claim, now)
        with self._lock:
            self._note(found)
            taken, self._found = self._found, []
        return taken

    def _runs_on(self, claim: ClaimRef, asked_at: float) -> list[str]:
        url = path("v1", "pods", namespace=claim.namespace)
        pods = self._kube.list(url, fieldSelector=f"spec.nodeName={self.node}")
        return [
            f"the kubelet asked to unprepare {_named(claim)} while pod {claim.namespace}/{name} "
            f"still runs with it on node {self.node} ({SETTLE:.0f}s later)"
            for name in still_running_with(claim, pods, asked_at)
        ]

    def _leaked(self, claim: ClaimRef, now: float) -> list[str]:
        try:
            obj = self._kube.get(
                path(CLAIMS_API, "resourceclaims", claim.name, namespace=claim.namespace)
            )
            gone = (obj.get("metadata") or {}).get("uid") != claim.uid
        except NotFound:
            gone = True
        if not gone:
            self._gone_since.pop(claim.uid, None)
            return []
        since = self._gone_since.setdefault(claim.uid, now)
        if now - since < LEAK_AFTER:
            return []
        with self._lock:
            self._asked.add(claim.uid)  # said once
        return [
            f"{_named(claim)} is gone from the API server since at least {now - since:.0f}s, but "
            f"the kubelet of node {self.node} never asked to unprepare it: it stays prepared"
        ]

    def _note(self, found: Iterable[str]) -> None:
        for line in found:
            if line not in self._said:
                self._said.add(line)
                self._found.append(line)
