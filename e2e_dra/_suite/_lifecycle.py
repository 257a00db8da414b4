"""The claim lifecycle net: what the API promises about a ResourceClaim once its pods let it go,
held for every claim of every namespace, whatever its subtest checks.

The rules are those of the ``resource.k8s.io`` API's documentation (``ResourceClaimStatus``) and
of KEP-3063, which the resource claim controller and the garbage collector implement:

- **reservations end:** ``status.reservedFor`` names no pod that is gone, was replaced by another
  of its name (another UID), or will not run any more (a terminal phase, or deleted before it
  was scheduled): such an entry is removed;
- **deallocation:** a claim whose last reservation went is deallocated ("DRA always performs
  delayed allocations... it also deallocates a claim as soon as the last consumer stops using
  it"), unless it is being deleted (then the next rule holds). A claim never seen reserved is
  left alone: a claim allocated but not reserved yet is not unused;
- **generated claims go with their pod:** a claim made for a pod (its controller owner is that
  pod) is deleted once that pod is gone, replaced or will not run any more and no pod uses the
  claim;
- **deletion completes:** a claim being deleted that no pod uses loses the finalizer of whoever
  allocated it (``resource.kubernetes.io/delete-protection``); finalizers of others are theirs.

A breach is judged where the cluster has had time to act on it: each one is looked at again
until it mends or :data:`GRACE` seconds have passed since it was first seen, waited for at the
end of the phase that sees it, and only then, and only when there is one (a correct cluster
mends within a second or two, so a phase waits for nothing). Each is said once, naming the
claim, the pod and the rule, and fails the next phase of the claim's subtest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from e2e_dra._suite._nets import RESOURCE_V1, Finding
from e2e_dra.kube import Kube, path, retrying

GRACE = 60.0
"""Seconds a breach may last before it is a finding: the controller manager's and the garbage
collector's reaction to a pod's end, through informers, with room for a slow 2-core machine."""
POLL = 1.0
RESPITE = 5.0
"""Seconds after a judgement during which another one is not made: the phases of a batch end
within seconds of one another, each asking, and a breach needs :data:`GRACE` seconds to count
anyway (one seen meanwhile is judged at the next phase's end)."""
PROTECTION = "resource.kubernetes.io/delete-protection"


@dataclass(frozen=True)
class Breach:
    """One claim breaking one rule now: ``key`` tells it from the others (claim uid, rule, pod)."""

    key: tuple[str, str, str]
    claim: dict
    message: str


def breaches(claims: Iterable[dict], pods: Iterable[dict], reserved_once: set[str]) -> list[Breach]:
    """Which ``claims`` break a rule, given the ``pods`` there are and the uids of the claims that
    were ever seen reserved for a pod (``reserved_once``)."""
    by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
    found = []
    for claim in claims:
        meta, status = claim["metadata"], claim.get("status") or {}
        uid, namespace = meta["uid"], meta["namespace"]
        named = f"ResourceClaim {namespace}/{meta['name']}"
        reserved = [r for r in status.get("reservedFor") or [] if _is_pod(r)]
        others = [r for r in status.get("reservedFor") or [] if not _is_pod(r)]
        for ref in reserved:
            why = _not_running(by_name.get((namespace, ref["name"])), ref.get("uid", ""))
            if why:
                found.append(
                    Breach(
                        (uid, "reservation", ref.get("uid", "")),
                        claim,
                        f"{named} is still reserved for pod {ref['name']}, which {why}",
                    )
                )
        unused = not reserved and not others
        deleting = bool(meta.get("deletionTimestamp"))
        if unused and status.get("allocation") and uid in reserved_once and not deleting:
            found.append(
                Breach(
                    (uid, "deallocation", ""),
                    claim,
                    f"{named} is still allocated, although no pod uses it any more (it was "
                    "reserved for one before)",
                )
            )
        owner = _owning_pod(claim)
        if owner is not None and unused and not deleting:
            why = _not_running(by_name.get((namespace, owner["name"])), owner.get("uid", ""))
            if why:
                found.append(
                    Breach(
                        (uid, "generated", owner.get("uid", "")),
                        claim,
                        f"{named} was made for pod {owner['name']}, which {why}, and is still "
                        "there",
                    )
                )
        if deleting and unused and PROTECTION in (meta.get("finalizers") or []):
            found.append(
                Breach(
                    (uid, "deletion", ""),
                    claim,
                    f"{named} is being deleted (since {meta['deletionTimestamp']}), no pod uses "
                    f"it, and it still has the finalizer {PROTECTION}",
                )
            )
    return found


class ClaimLifecycle:
    """Judges :func:`breaches` over the live cluster, each after :data:`GRACE` seconds."""

    def __init__(
        self,
        owner: Callable[[dict], str | None],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._owner = owner
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()  # one judgement at a time: phases end together
        self._reserved_once: set[str] = set()
        self._first_seen: dict[tuple[str, str, str], float] = {}
        self._said: set[tuple[str, str, str]] = set()
        self._judged_at: float | None = None  # when the last judgement ended

    def seen(self, claim: dict) -> None:
        """A version of a claim, as a watch delivers it: was it reserved for a pod?"""
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if any(_is_pod(r) for r in reserved):
            self._reserved_once.add(claim["metadata"]["uid"])

    def judge(self, look: Callable[[], tuple[list[dict], list[dict]]]) -> list[Finding]:
        """The breaches that lasted :data:`GRACE` seconds: each looked at again (every
        :data:`POLL` seconds) until it mends or its time is up; each said once. ``look`` gives
        the claims and the pods there are now (:func:`live`)."""
        with self._lock:
            if self._judged_at is not None and self._clock() - self._judged_at < RESPITE:
                return []
            found: list[Finding] = []
            while True:
                claims, pods = look()
                for claim in claims:
                    self.seen(claim)
                now = breaches(claims, pods, self._reserved_once)
                current = {b.key for b in now}
                for key in list(self._first_seen):
                    if key not in current:
                        del self._first_seen[key]  # mended
                waiting = False
                for breach in now:
                    if breach.key in self._said:
                        continue
                    since = self._first_seen.setdefault(breach.key, self._clock())
                    if self._clock() - since >= GRACE:
                        self._said.add(breach.key)
                        found.append(
                            Finding(
                                self._owner(breach.claim),
                                f"claim lifecycle: {breach.message} ({GRACE:.0f}s after it was "
                                "first seen)",
                            )
                        )
                    else:
                        waiting = True
                if not waiting:
                    self._judged_at = self._clock()
                    return found
                self._sleep(POLL)


def live(kube: Kube) -> Callable[[], tuple[list[dict], list[dict]]]:
    """The claims and pods of every namespace, as ``kube`` lists them, for :meth:`judge`."""

    def look() -> tuple[list[dict], list[dict]]:
        claims = retrying(kube.list)(path(RESOURCE_V1, "resourceclaims"))
        return claims, retrying(kube.list)(path("v1", "pods"))

    return look


def _is_pod(reference: Mapping[str, str]) -> bool:
    return reference.get("resource") == "pods" and not reference.get("apiGroup")


def _owning_pod(claim: dict) -> Mapping[str, str] | None:
    for owner in claim["metadata"].get("ownerReferences") or []:
        if (
            owner.get("kind") == "Pod"
            and owner.get("apiVersion") == "v1"
            and owner.get("controller")
        ):
            return owner
    return None


def _not_running(pod: dict | None, uid: str) -> str | None:
    """Why ``pod`` (as listed, None: not there), expected with ``uid``, will not run any more;
    None while it may (the resource claim controller's ``isPodDone``, from the pod's API)."""
    if pod is None:
        return "is gone"
    if uid and pod["metadata"].get("uid") != uid:
        return f"was replaced (uid {uid} is now {pod['metadata'].get('uid')})"
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return f"has finished ({phase})"
    if pod["metadata"].get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
        return "was deleted before it was scheduled"
    return None
