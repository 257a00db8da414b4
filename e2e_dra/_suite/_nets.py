"""The safety nets around the subtests: checks that watch the whole run, not one phase.

Upstream's DRA test framework has two: every ResourceClaim of the test namespace is watched for
the whole test, and one that is allocated without any finalizer fails it (whoever allocates a
claim must protect it from deletion that way; the API server does not enforce it); and after a
driver is torn down, the kubelet must remove its ResourceSlices within two minutes
(``ExpectResourceSliceRemoval``). A check that only logs proves nothing, so each finding here
ends up failing a reported test, naming the object, what is wrong and the subtest it belongs to.

``_findings`` decides which test a finding fails; this module only finds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from e2e_dra.builder import SUBTEST_LABEL
from e2e_dra.errors import E2EDRAError
from e2e_dra.hostkit import poll
from e2e_dra.kube import Kube, KubeError, path, retrying
from e2e_dra.settings import settings

log = logging.getLogger(__name__)

RESOURCE_V1 = "resource.k8s.io/v1"
WATCH_SECONDS = 60
SLICE_REMOVAL_POLL = 1.0


@dataclass(frozen=True)
class Finding:
    """Something a net caught: ``owner`` is the subtest it belongs to (None: nobody's)."""

    owner: str | None
    message: str


def claim_problems(claim: dict) -> list[str]:
    """What is wrong with ``claim`` by upstream's ``validateClaim`` (test/e2e/dra/utils).

    The API server does not enforce it, but whoever allocates a claim must also put a finalizer
    on it (the scheduler: ``resource.kubernetes.io/delete-protection``), or the claim can be
    deleted while a pod uses its devices.
    """
    problems = []
    status = claim.get("status") or {}
    if status.get("allocation") and not (claim.get("metadata") or {}).get("finalizers"):
        problems.append("allocated without any finalizer")
    return problems


def claim_owner(claim: dict, drivers: Mapping[str, str]) -> str | None:
    """The subtest a claim belongs to: by the label the builder puts on everything a subtest
    creates (``e2e-dra/subtest``, carried by claims made from its templates too), else by the
    driver that allocated it (a claim the scheduler made for an extended resource has no label).

    ``drivers`` maps each subtest to its driver name. A label naming no subtest of ``drivers``
    counts for nothing: the claim is attributed by its driver, or to nobody.
    """
    labelled = ((claim.get("metadata") or {}).get("labels") or {}).get(SUBTEST_LABEL)
    if labelled in drivers:
        return labelled
    allocation = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    by_driver = {driver: name for name, driver in drivers.items()}
    for result in allocation.get("results") or []:
        if result.get("driver") in by_driver:
            return by_driver[result["driver"]]
    return None


class ClaimWatch:
    """Watches the ResourceClaims of one namespace from bring-up to tear-down (upstream's
    ResourceClaimListWatch) and keeps what :func:`claim_problems` finds, once per claim.

    The API server restarts under it: a watch that breaks is followed by a new list and
    watch. :meth:`sweep` lists and checks at once, so a test that ends can be sure its last
    changes were looked at.
    """

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        owner: Callable[[dict], str | None],
    ) -> None:
        self.namespace = namespace
        self._owner = owner
        self._kube = kube
        self._lock = threading.Lock()
        self._found: list[Finding] = []
        self._reported: set[tuple[str, str]] = set()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.events = 0

    @property
    def _collection(self) -> str:
        return path(RESOURCE_V1, "resourceclaims", namespace=self.namespace)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="claim-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the thread ends with its watch; nothing it sees counts any more)."""
        self._stopping.set()

    def sweep(self) -> None:
        """List the claims now and check each (what the watch may not have delivered yet)."""
        with self._lock:
            kube = self._kube
        for claim in retrying(kube.list, timeout=30)(self._collection):
            self._check(claim)

    def take(self) -> list[Finding]:
        """What was found since the last call."""
        with self._lock:
            found, self._found = self._found, []
        return found

    def _check(self, claim: dict) -> None:
        if self._stopping.is_set():
            return
        metadata = claim.get("metadata") or {}
        for problem in claim_problems(claim):
            key = (metadata.get("uid", ""), problem)
            with self._lock:
                if key in self._reported:
                    continue
                self._reported.add(key)
                owner = self._owner(claim)
                finalizers = metadata.get("finalizers") or []
                self._found.append(
                    Finding(
                        owner,
                        f"ResourceClaim {self.namespace}/{metadata.get('name')} "
                        f"{problem} (finalizers {finalizers}, resourceVersion "
                        f"{metadata.get('resourceVersion')}, seen {time.strftime('%H:%M:%S')})",
                    )
                )

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                kube = self._kube
            try:
                answer = kube.request("GET", self._collection)
                for claim in answer.get("items") or []:
                    self._check(claim)
                events = kube.watch(
                    self._collection,
                    resource_version=answer["metadata"]["resourceVersion"],
                    timeout_seconds=WATCH_SECONDS,
                )
                try:
                    for event in events:
                        if self._stopping.is_set():
                            return
                        self.events += 1
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._check(event["object"])
                        elif event.get("type") == "ERROR":  # e.g. 410 Gone: list again
                            break
                finally:
                    events.close()
            except Exception as exc:  # the API server restarts: list and watch again
                log.debug("ResourceClaim watch: %s", exc)
                self._stopping.wait(1.0)


def slice_removal_timeout() -> float:
    """Upstream's two minutes, unless ``E2E_DRA_SLICE_REMOVAL_TIMEOUT`` says otherwise."""
    return settings().slice_removal_timeout


def wait_slices_removed(
    kube: Kube,
    drivers: Iterable[str],
    *,
    timeout: float | None = None,
) -> dict[str, list[str]]:
    """Wait, for all ``drivers`` at once, until no ResourceSlice of theirs is left (the kubelet
    wipes a plugin's slices about 30 s after it unregistered); the slices left per driver.

    An API server that does not answer counts as "not yet"; at the end, the last answer counts.
    """
    wanted = set(drivers)
    if not wanted:
        return {}
    timeout = slice_removal_timeout() if timeout is None else timeout
    log.info(f"waiting for the kubelet to remove the ResourceSlices of {len(wanted)} driver(s)")

    def left() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for item in kube.list(path(RESOURCE_V1, "resourceslices")):
            driver = (item.get("spec") or {}).get("driver")
            if driver in wanted:
                found.setdefault(driver, []).append(item["metadata"]["name"])
        return found

    result = poll(
        left,
        timeout=timeout,
        interval=SLICE_REMOVAL_POLL,
        until=lambda found: not found,
        retry_on=(KubeError,),
    )
    if result.done:
        return {}
    if result.error is not None and not result.value:
        raise E2EDRAError(f"could not list ResourceSlices for {timeout:g}s: {result.error}")
    return {driver: sorted(names) for driver, names in sorted((result.value or {}).items())}
