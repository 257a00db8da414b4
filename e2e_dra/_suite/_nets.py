"""The safety nets around the subtests: checks that watch the whole run, not one phase.

Upstream's DRA test framework has two: every ResourceClaim of the test namespace (here: of every
namespace, as subtests make namespaces of their own) is watched for the whole test, and one that
is allocated without any finalizer fails it (whoever allocates a claim must protect it from
deletion that way; the API server does not enforce it); and after a driver is torn down, the
kubelet must remove its ResourceSlices within two minutes (``ExpectResourceSliceRemoval``). The
same watch feeds the allocation oracle (``_oracle``), which holds every allocation to the API's
rules, against the ResourceSlices and the DeviceTaintRules it lists (:func:`taint_rules`), and,
with a watch of the ResourceSlices and one of the DeviceTaintRules (:class:`VersionWatch`), the
quiescence net (``_quiescence``), which follows each object from version to version. A
check that only logs proves nothing, so each finding here ends up failing a reported test,
naming the object, what is wrong and the subtest it belongs to.

``_findings`` decides which test a finding fails; this module only finds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from e2e_dra._suite._oracle import AllocationOracle, Problem
from e2e_dra._suite._taint_rules import RULE_VERSIONS
from e2e_dra.builder import SUBTEST_LABEL
from e2e_dra.errors import E2EDRAError
from e2e_dra.hostkit import poll
from e2e_dra.kube import Kube, KubeError, path, retrying
from e2e_dra.settings import settings

log = logging.getLogger(__name__)

RESOURCE_V1 = "resource.k8s.io/v1"
WATCH_SECONDS = 60
RETRY_SECONDS = 1.0
LIST_GRACE = 20.0
"""How long :meth:`ClaimWatch.take` waits for a failing watch to list again: the suite restarts
the API server between phases, and a watch that recovers from that has lost nothing."""
LISTED = "LISTED"  # the event a list's item is handed on with, beside a watch's ADDED, ...
SLICE_REMOVAL_POLL = 1.0
UNSERVED_WAIT = 10.0
"""Seconds a watch of a kind the server does not serve now waits before it asks again (a feature
gate may enable it at the next restart)."""


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


class WatchHealth:
    """Whether the claim watch can see the claims, and what to say when it cannot.

    A watch that never manages to list is a safety net with a hole in it: nothing it would have
    caught is caught, and a log line at debug level tells nobody. So the watch reports each list
    here, and the suite asks :meth:`blind` when it takes the findings. A failure that the next
    list repairs (the API server restarts between phases) is no finding; a spell of failures is
    logged at warning level once it lasts ``warn_after`` seconds, and then every ``warn_every``
    seconds, not at every retry.
    """

    def __init__(
        self,
        *,
        warn_after: float = 30.0,
        warn_every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        kind: str = "ResourceClaim",
        unnoticed: str = "A claim allocated without a finalizer, or against the API's rules,",
    ) -> None:
        self._kind = kind  # what the watch lists, and what a blind one may have let pass
        self._unnoticed = unnoticed
        self._warn_after = warn_after
        self._warn_every = warn_every
        self._clock = clock
        self._lock = threading.Lock()
        self._seeing = threading.Event()  # set while the last list succeeded
        self._ever_listed = False
        self._failing_since: float | None = None  # clock time of this spell's first failure
        self._failing_since_wall = ""
        self._failures = 0  # in this spell
        self._last_error = ""
        self._warned_at: float | None = None
        self._said = False  # this spell was reported as a finding already

    def listed(self) -> None:
        """A list succeeded: whatever the watch missed, it has just looked at."""
        with self._lock:
            if self._warned_at is not None and self._failing_since is not None:
                seconds = self._clock() - self._failing_since
                log.info(f"{self._kind} watch works again after {seconds:.0f} s")
            self._ever_listed = True
            self._failing_since = None
            self._failures = 0
            self._warned_at = None
            self._said = False
            self._seeing.set()

    def failed(self, exc: BaseException) -> None:
        """A list or watch failed (the watch tries again a moment later)."""
        with self._lock:
            self._seeing.clear()
            now = self._clock()
            if self._failing_since is None:
                self._failing_since = now
                self._failing_since_wall = time.strftime("%H:%M:%S")
            self._failures += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
            spell = now - self._failing_since
            due = self._warned_at is None or now - self._warned_at >= self._warn_every
            if spell >= self._warn_after and due:
                self._warned_at = now
                log.warning(
                    f"{self._kind} watch failing for {spell:.0f} s "
                    f"({self._failures} attempts): {self._last_error}"
                )
            else:
                log.debug(f"{self._kind} watch: {self._last_error}")

    def blind(self, grace: float) -> str | None:
        """Why the watch does not see, if it has not listed within ``grace`` seconds; None while
        it sees, and once the spell it is in was said (the first answer fails a test; the later
        ones would only repeat it)."""
        with self._lock:
            if self._said:  # no wait either: one answer per spell
                return None
        if self._seeing.wait(grace):
            return None
        with self._lock:
            if self._said or self._seeing.is_set():
                return None
            self._said = True
            since, failed = self._failing_since_wall, f"{self._failures} attempt(s) failed"
            listed = f"listed {self._kind}s"
            if self._failing_since is None:  # its first request has not come back yet
                what = f"has never {listed}: no answer yet"
            elif self._ever_listed:
                what = f"has not {listed} since {since}: {failed}"
            else:
                what = f"has never {listed}: {failed} since {since}"
            if self._last_error:
                what += f", the last with {self._last_error}"
        return (
            f"safety net not working: the {self._kind} watch {what}. "
            f"{self._unnoticed} meanwhile may have gone unnoticed"
        )


class ClaimWatch:
    """Watches the ResourceClaims of every namespace from bring-up to tear-down (upstream's
    ResourceClaimListWatch) and keeps what :func:`claim_problems` and the allocation oracle
    (:attr:`oracle`, fed by this one stream in its order) find, once per claim and problem.

    Every namespace, not just the suite's: a subtest may make claims in namespaces of its own
    (admin access needs a labelled one), and those must be protected as well. The API server
    restarts under it: a watch that breaks is followed by a new list and watch. :meth:`sweep`
    lists and checks at once, so a test that ends can be sure its last changes were looked at;
    :meth:`take` also says when the watch itself does not work (:class:`WatchHealth`).
    """

    collection = path(RESOURCE_V1, "resourceclaims")  # the cluster-wide collection

    def __init__(
        self,
        kube: Kube,
        owner: Callable[[dict], str | None],
        *,
        grace: float = LIST_GRACE,
        health: WatchHealth | None = None,
        oracle: AllocationOracle | None = None,
        also: Callable[[dict], None] = lambda claim: None,
        versions: Callable[[str, dict], None] = lambda event, claim: None,
    ) -> None:
        self._owner = owner
        self._also = also  # another net that sees every claim version this one sees
        # another net that follows each claim from version to version: only the watch's own,
        # in the order the server wrote them (a sweep's list may come in between, older)
        self._versions = versions
        self._kube = kube
        self.oracle = oracle or AllocationOracle(
            lambda: kube.list(path(RESOURCE_V1, "resourceslices")),
            rules=lambda: taint_rules(kube),
        )
        self._grace = grace
        self.health = health or WatchHealth()
        self._lock = threading.Lock()
        self._found: list[Finding] = []
        self._reported: set[tuple[str, str]] = set()
        self._stopping = threading.Event()
        self._watch = VersionWatch(
            kube,
            "ResourceClaim",
            lambda kube: self.collection,
            self._seen,
            grace=grace,
            health=self.health,
            listed=self._listed,
        )

    def start(self) -> None:
        self._watch.start()

    def stop(self) -> None:
        """Stop watching (the thread ends with its watch; nothing it sees counts any more)."""
        self._stopping.set()
        self._watch.stop()

    def sweep(self) -> None:
        """List the claims now and check each (what the watch may not have delivered yet)."""
        for claim in retrying(self._kube.list, timeout=30)(self.collection):
            self.check(claim)

    def take(self) -> list[Finding]:
        """What was found since the last call, and a finding of nobody's when the watch has
        not managed to list (within a grace for a server that just restarted)."""
        blind = None if self._stopping.is_set() else self.health.blind(self._grace)
        with self._lock:
            found, self._found = self._found, []
        if blind is not None and not self._stopping.is_set():
            found.append(Finding(None, blind))
        return found

    def check(self, claim: dict) -> None:
        """Check one claim as the watch sees it; each problem of a claim is kept once.

        Whose claim it is (``owner``) decides which test fails; when that cannot be said, the
        finding is still kept, as nobody's, and says why its owner is unknown.
        """
        if self._stopping.is_set():
            return
        self._also(claim)
        metadata = claim.get("metadata") or {}
        for problem in claim_problems(claim):
            key = (metadata.get("uid", ""), problem)
            with self._lock:
                if key in self._reported:
                    continue
            owner, unknown = self._whose(claim)  # outside the lock: it is someone else's code
            finalizers = metadata.get("finalizers") or []
            message = (
                f"ResourceClaim {metadata.get('namespace')}/{metadata.get('name')} "
                f"{problem} (finalizers {finalizers}, resourceVersion "
                f"{metadata.get('resourceVersion')}, seen {time.strftime('%H:%M:%S')}{unknown})"
            )
            with self._lock:  # kept and marked as kept at once: never one without the other
                if key not in self._reported:
                    self._reported.add(key)
                    self._found.append(Finding(owner, message))

    def judged(self, problems: Iterable[Problem]) -> None:
        """Keep what the allocation oracle found, each broken rule of a claim once."""
        for problem in problems:
            metadata = problem.claim.get("metadata") or {}
            key = (metadata.get("uid", ""), f"{problem.rule}: {problem.message}")
            owner, unknown = self._whose(problem.claim)
            message = (
                f"allocation oracle, rule '{problem.rule}': ResourceClaim "
                f"{metadata.get('namespace')}/{metadata.get('name')} (allocation seen "
                f"{time.strftime('%H:%M:%S')}): {problem.message}{unknown}"
            )
            with self._lock:
                if key not in self._reported:
                    self._reported.add(key)
                    self._found.append(Finding(owner, message))

    def _whose(self, claim: dict) -> tuple[str | None, str]:
        """The claim's owner, and what to add to the finding when that could not be told."""
        try:
            return self._owner(claim), ""
        except Exception as exc:
            return None, f"; its owner lookup failed: {type(exc).__name__}: {exc}"

    def _seen(self, event: str, claim: dict) -> None:
        """One version from the watch (or its list): to the nets that follow versions, then
        checked, and to the oracle, in the server's order."""
        if self._stopping.is_set():
            return
        self._versions(event, claim)
        if event == "DELETED":
            self.oracle.gone(claim)
            return
        self.check(claim)
        if event != LISTED:  # a list's claims go to the oracle together (:meth:`_listed`)
            self.judged(self.oracle.seen(claim))

    def _listed(self, claims: list[dict]) -> None:
        if not self._stopping.is_set():
            self.judged(self.oracle.listed(claims))


class VersionWatch:
    """Watches one kind of DRA object of every namespace from bring-up to tear-down and hands
    every version it sees, in the order the server wrote them, to another net (``versions``:
    the watch event's type, or ``LISTED`` for a list's items, and the object).

    ``collection`` says where the objects are listed now (None: the server serves them at no
    version now, which is no failure: it is asked again a moment later, and after a restart,
    which may have brought another release). A watch that breaks is followed by a new list and
    watch; one that cannot list says so (:meth:`take`), as the claim watch does.
    """

    def __init__(
        self,
        kube: Kube,
        kind: str,
        collection: Callable[[Kube], str | None],
        versions: Callable[[str, dict], None],
        *,
        grace: float = LIST_GRACE,
        unserved_wait: float = UNSERVED_WAIT,
        health: WatchHealth | None = None,
        listed: Callable[[list[dict]], None] = lambda items: None,
    ) -> None:
        self._kube = kube
        self._kind = kind
        self._collection = collection
        self._versions = versions
        self._listed = listed  # each list's items, once each was handed to ``versions``
        self._grace = grace
        self._unserved_wait = unserved_wait
        self.health = health or WatchHealth(kind=kind, unnoticed=f"A {kind} written back and forth")
        self._stopping = threading.Event()

    def start(self) -> None:
        name = f"{self._kind.lower()}-watch"
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()

    def take(self) -> list[Finding]:
        """A finding of nobody's when the watch has not managed to list; else nothing."""
        if self._stopping.is_set():
            return []
        blind = self.health.blind(self._grace)
        return [] if blind is None or self._stopping.is_set() else [Finding(None, blind)]

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                collection = self._collection(self._kube)
                if collection is None:
                    self.health.listed()  # nothing there to see is no blindness
                    self._stopping.wait(self._unserved_wait)
                    continue
                answer = self._kube.request("GET", collection)
            except Exception as exc:  # the API server restarts: list again
                self._failed(exc)
                continue
            self.health.listed()
            try:
                for item in answer.get("items") or []:
                    item.setdefault("kind", self._kind)  # a list's items leave it out
                    item.setdefault("apiVersion", answer.get("apiVersion"))
                    if self._stopping.is_set():
                        return
                    self._versions(LISTED, item)
                if not self._stopping.is_set():
                    self._listed(answer.get("items") or [])
                self._follow(collection, answer["metadata"]["resourceVersion"])
            except Exception as exc:  # the watch broke: list and watch again
                self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        if not self._stopping.is_set():
            self.health.failed(exc)
            self._stopping.wait(RETRY_SECONDS)

    def _follow(self, collection: str, resource_version: str) -> None:
        events = self._kube.watch(
            collection, resource_version=resource_version, timeout_seconds=WATCH_SECONDS
        )
        try:
            for event in events:
                if self._stopping.is_set():
                    return
                if event.get("type") == "ERROR":  # e.g. 410 Gone: list again
                    return
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    self._versions(event["type"], event["object"])
        finally:
            events.close()


def slice_collection(kube: Kube) -> str:
    return path(RESOURCE_V1, "resourceslices")


def pod_collection(kube: Kube) -> str:
    return path("v1", "pods")


def taint_rule_collection(kube: Kube) -> str | None:
    """Where DeviceTaintRules are listed now: the newest version served (None: none is)."""
    version = next((v for v in RULE_VERSIONS if kube.served(v, "devicetaintrules")), None)
    return None if version is None else path(version, "devicetaintrules")


def taint_rules(kube: Kube) -> list[dict] | None:
    """Every DeviceTaintRule, read at the newest version the server serves them at (which may
    change as the server restarts as another release: its discovery is asked again then); None
    when it serves them at none."""
    for version in RULE_VERSIONS:
        if kube.served(version, "devicetaintrules"):
            return kube.list(path(version, "devicetaintrules"))
    return None


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
