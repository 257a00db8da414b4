"""The kubelet's side of the kubelet plugin API, checked where only a driver can see it.

A kubelet that prepares or unprepares at the wrong time breaks no API object: the pod may even
run. Only the driver sees the calls, so the test driver holds the kubelet to what KEP-4381 and
the kubelet's DRA manager promise a driver, for every claim of every subtest:

- **prepare only what is this node's and reserved:** a NodePrepareResources for a claim whose
  allocation selects another node by name, or that is reserved for nobody (the kubelet prepares
  a claim for a pod in its ``status.reservedFor``);
- **unprepare only what no running pod uses:** at a NodeUnprepareResources, no pod on this
  node that is not being deleted runs with the claim (its containers started before the call).
  The pods running at the call are looked at again :data:`SETTLE` seconds later, so that a pod
  whose containers the kubelet stopped just before has had time to say so: one that still
  runs, or whose deletion or end came after the call, ran with a claim the kubelet had given
  up (a subtest that deletes the pod a moment later must not hide it);
- **unprepare what is gone:** a claim the driver prepared that the API server no longer has
  (deleted, or replaced by one of another UID) is asked to be unprepared within
  :data:`LEAK_AFTER` seconds of the driver seeing it gone, while the driver serves. A claim
  goes after the pods that used it, and the kubelet unprepares it as those pods terminate, so
  at the end of a phase (the kubelet up) nothing is owed; what is owed is waited for there,
  and said in the phase whose subtest let the claim go, not at the cleanup, minutes later.

Each rule is judged from objects the driver reads with the admin client (the test's eyes, not
the driver's own identity) and said once, naming the claim, the pod and the rule.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from e2e_dra.driver._node_service import ClaimRef
from e2e_dra.kube import Kube, KubeError, NotFound, path

SETTLE = 5.0
"""Seconds after an unprepare before the pods that use its claim are looked at."""
LEAK_AFTER = 60.0
"""Seconds a prepared claim may be gone from the API server before the kubelet must have asked
to unprepare it: the pods' termination unprepares it before the claim can go, and a kubelet
restarted in a phase unprepares what went meanwhile on its housekeeping, every few seconds."""
POLL = 1.0
LOOK_TIMEOUT = 15.0
"""Seconds beyond :data:`SETTLE` a look at the pods may take before a phase's end stops waiting
for it (two reads of the node's pods, from an API server that may be slow to answer)."""
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


def ran_after(names: Iterable[str], now: Mapping[str, dict], asked_at: float) -> list[str]:
    """Those of ``names`` (pods that ran with a claim when the kubelet asked at ``asked_at`` to
    unprepare it) that ran on after the call, by what ``now`` (the node's pods, :data:`SETTLE`
    seconds later, by name) says: still running and not being deleted, deleted after the call,
    ended after it, or gone altogether (a pod that ran at the call cannot be gone seconds later
    unless it was deleted after it)."""
    return [name for name in names if name not in now or _ran_on(now[name], asked_at)]


def _ran_on(pod: dict, asked_at: float) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if deleted := meta.get("deletionTimestamp"):
        return _epoch(deleted) > asked_at + 1
    states = [c.get("state") or {} for c in status.get("containerStatuses") or []]
    if any("running" in state for state in states):
        return True
    ended = [state["terminated"].get("finishedAt") for state in states if "terminated" in state]
    return any(_epoch(at) > asked_at + 1 for at in ended if at)


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
        self,
        node: str,
        kube: Kube,
        serving: Callable[[], bool],
        clock: Callable[[], float],
        sleep: Callable[[float], None] = time.sleep,
        start: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.node = node
        self._kube = kube
        self._serving = serving
        self._clock = clock  # epoch seconds, as the API server's timestamps
        self._sleep = sleep
        self._start = start or _in_background
        self._lock = threading.Lock()
        self._looked = threading.Condition(self._lock)  # a look at the pods ended
        self._looking = 0  # looks after an unprepare not ended yet
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
        """Looks, from now on and away from the kubelet's call, at the pods that run with it."""
        at = self._clock()
        with self._lock:
            self._asked.add(claim.uid)
            self._looking += 1
        self._start(functools.partial(self._look_after_unprepare, claim, at))

    def _look_after_unprepare(self, claim: ClaimRef, at: float) -> None:
        """The node's pods that run with ``claim`` at the call, looked at again :data:`SETTLE`
        seconds later. What cannot be read now is left for :meth:`take` to look at."""
        try:
            running = still_running_with(claim, self._pods(claim), at)
            if running:
                self._sleep(SETTLE)
                now = {(p.get("metadata") or {}).get("name", ""): p for p in self._pods(claim)}
                found = [self._said_of(claim, name) for name in ran_after(running, now, at)]
                with self._lock:
                    self._note(found)
        except KubeError:  # the API server restarts, or is gone: the next take looks
            with self._lock:
                self._unprepares.append((claim, at))
        finally:
            with self._lock:
                self._looking -= 1
                self._looked.notify_all()

    def take(self, prepared: Iterable[ClaimRef]) -> list[str]:
        """What broke a rule since the last call (read from the API server now; what cannot be
        read now, while a component restarts or after the cluster stopped, is left for the next
        call, never raised: a driver's cleanup must not fail on it). The looks at the pods
        after the unprepares of the phase end first, so that what they see is said in it."""
        with self._lock:
            self._looked.wait_for(lambda: self._looking == 0, timeout=SETTLE + LOOK_TIMEOUT)
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
        if self._serving():
            found += self._leaked(self._gone(owed, now))
        with self._lock:
            self._note(found)
            taken, self._found = self._found, []
        return taken

    def _runs_on(self, claim: ClaimRef, asked_at: float) -> list[str]:
        pods = self._pods(claim)
        return [self._said_of(claim, name) for name in still_running_with(claim, pods, asked_at)]

    def _pods(self, claim: ClaimRef) -> list[dict]:
        url = path("v1", "pods", namespace=claim.namespace)
        return self._kube.list(url, fieldSelector=f"spec.nodeName={self.node}")

    def _said_of(self, claim: ClaimRef, pod: str) -> str:
        return (
            f"the kubelet asked to unprepare {_named(claim)} while pod {claim.namespace}/{pod} "
            f"still ran with it on node {self.node} (it ran on after the call)"
        )

    def _gone(self, owed: list[ClaimRef], now: float) -> list[ClaimRef]:
        """The claims of ``owed`` the API server no longer has, each with the time the driver
        first saw it gone; one that cannot be read now waits for the next look (its clock runs
        on)."""
        gone = []
        for claim in owed:
            with contextlib.suppress(KubeError):  # the API server restarts, or is gone
                if self._is_gone(claim):
                    self._gone_since.setdefault(claim.uid, now)
                    gone.append(claim)
                else:
                    self._gone_since.pop(claim.uid, None)
        return gone

    def _is_gone(self, claim: ClaimRef) -> bool:
        url = path(CLAIMS_API, "resourceclaims", claim.name, namespace=claim.namespace)
        try:
            return (self._kube.get(url).get("metadata") or {}).get("uid") != claim.uid
        except NotFound:
            return True

    def _leaked(self, gone: list[ClaimRef]) -> list[str]:
        """Those of ``gone`` the kubelet did not ask to unprepare within :data:`LEAK_AFTER`
        seconds of their going, waited for (the kubelet may be on its way), each said once."""
        if not gone:
            return []
        deadline = max(self._gone_since[claim.uid] for claim in gone) + LEAK_AFTER
        while self._clock() < deadline and not self._all_asked(gone):
            self._sleep(POLL)
        now = self._clock()
        with self._lock:
            late = [claim for claim in gone if claim.uid not in self._asked]
            self._asked.update(claim.uid for claim in late)  # said once
        return [
            f"{_named(claim)} is gone from the API server since at least "
            f"{now - self._gone_since[claim.uid]:.0f}s, but the kubelet of node {self.node} never "
            "asked to unprepare it: it stays prepared"
            for claim in late
        ]

    def _all_asked(self, claims: list[ClaimRef]) -> bool:
        with self._lock:
            return all(claim.uid in self._asked for claim in claims)

    def _note(self, found: Iterable[str]) -> None:
        for line in found:
            if line not in self._said:
                self._said.add(line)
                self._found.append(line)


def _in_background(look: Callable[[], None]) -> None:
    threading.Thread(target=look, name="kubelet-protocol look", daemon=True).start()
