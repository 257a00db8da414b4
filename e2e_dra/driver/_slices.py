"""ResourceSlice publishing: put the driver's pools into the API and keep them there.

The kubelet wipes every slice of its node when it restarts, subtests edit and delete slices, and
the API server itself restarts under us. A watch on the driver's slices notices all of that within
moments and a reconcile pass puts the desired state back; a slow periodic resync is only a safety
net for a missed event. Slices get deterministic names, so "which slice is which" needs no state.

Older API servers may lack ``resource.k8s.io/v1``: the newest served version is used, and the
v1 shapes are converted for v1beta1 (which nests device fields under ``basic``).

A failed pass is retried with a backoff. What the server refuses for a moment (it restarts) is
resolved by the next pass that succeeds; what still stands when the suite looks is reported
(:meth:`SlicePublisher.take_unresolved`), so a slice the API server refuses fails a test.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from e2e_dra import kube as kube_api
from e2e_dra.driver._unresolved import ErrorVoice, UnresolvedErrors
from e2e_dra.hostkit import poll
from e2e_dra.kube import Kube, KubeError

log = logging.getLogger(__name__)

API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
RESYNC_PERIOD = 30.0
RESYNC_GRACE = 30.0  # how long a standing error may take to resolve once the suite looks
POOL_FIELD = "spec.pool.name"  # the field selector of one pool, where the API server knows it


@dataclass
class Pool:
    """One pool of the driver: ``slices`` are partial ResourceSliceSpecs ({"devices": [...]})."""

    name: str
    slices: list[dict]
    node_name: str | None = None
    all_nodes: bool = False


def node_devices(node: str, count: int) -> list[Pool]:
    """Upstream's default: one pool named after the node with ``device-00`` .. ``device-NN``."""
    devices = [{"name": f"device-{index:02d}"} for index in range(count)]
    return [Pool(name=node, slices=[{"devices": devices}], node_name=node)]


class DroppedFieldsError(Exception):
    """The API server stored less than we sent (a feature gate is off)."""


class SliceRefused(Exception):
    """The API server refused a write of one slice: says which slice, and what the server said."""

    def __init__(self, name: str, error: KubeError) -> None:
        super().__init__(f"ResourceSlice {name}: {error}")
        self.slice = name
        self.error = error


@dataclass
class _PoolState:
    pool: Pool
    generation: int | None = None  # None: not decided yet (decided from what exists)


@dataclass
class _Stats:
    errors: list[str] = field(default_factory=list)  # every error reported, also those resolved
    # Dropped-field errors nobody expected; the suite takes them and fails a test with them.
    dropped: list[str] = field(default_factory=list)


class SlicePublisher:
    """Keeps the slices of one driver (optionally: of one pool only) as published."""

    def __init__(
        self,
        driver: str,
        kube: Kube,
        *,
        reconcile_pool: str | None = None,
        owner_node: str | None = None,
    ):
        self.driver = driver
        self.reconcile_pool = reconcile_pool
        self.owner_node = owner_node
        self.expect_dropped_fields = False
        self.stats = _Stats()
        self._unresolved = UnresolvedErrors()
        self._voice = ErrorVoice()  # how loud a failed pass is said (a restart's: not on screen)
        self._kube = kube
        self._lock = threading.RLock()
        self._pools: dict[str, _PoolState] = {}
        self._retired: set[str] = set()  # pools published before and no longer wanted
        self._written: dict[str, str] = {}  # slice name -> resourceVersion we stored, if dropped
        self._api_version: str | None = None
        self._owner_refs: list[dict] | None = None
        self._kick = threading.Event()
        self._stopping = threading.Event()
        # None: not tried yet; True: this API server narrows our list to the pool by
        # spec.pool.name; False: it rejects that field selector, so the list is filtered here.
        self._pool_selector: bool | None = None
        self._known_restarts = kube.restarts
        self._thread: threading.Thread | None = None
        # When a write of one of our slices last returned (time.time()); 0.0: none yet. What
        # the scheduler decided before it, it decided without the devices as they are now.
        self.written_at = 0.0

    # --- public -------------------------------------------------------------------------------

    def publish(self, pools: list[Pool]) -> None:
        with self._lock:
            wanted = {pool.name: pool for pool in pools if self._reconciles(pool.name)}
            for name in set(self._pools) - set(wanted):
                del self._pools[name]
                self._retired.add(name)
            for name, pool in wanted.items():
                current = self._pools.get(name)
                if current is None or current.pool != pool:
                    self._pools[name] = _PoolState(copy.deepcopy(pool))
                self._retired.discard(name)
            # Publishing again means "write it as given": slices the server stored with fields
            # dropped (a gate was off) are rewritten now that it may keep them.
            self._written.clear()
        self._kick.set()

    def take_dropped(self) -> list[str]:
        """Unexpected dropped-field errors since the last call."""
        with self._lock:
            taken, self.stats.dropped = self.stats.dropped, []
        return taken

    def take_unresolved(self, grace: float = RESYNC_GRACE) -> list[str]:
        """Errors of passes that no later pass resolved, each once: what the API server still
        refuses (a slice it finds invalid), not what it refused for a moment while it restarted.

        An error may be seconds old when the suite looks (the server came back just now): the
        loop is asked for a pass at once and given ``grace`` seconds to succeed before whatever
        still stands is returned. A publisher that no longer runs gets no such chance.
        """
        thread = self._thread
        if self._unresolved.pending() and thread is not None and thread.is_alive():
            self._kick.set()
            poll(lambda: not self._unresolved.pending(), timeout=grace, interval=0.2)
        return self._unresolved.take()

    def expected_slice_count(self) -> int:
        with self._lock:
            return sum(len(state.pool.slices) for state in self._pools.values())

    def _notice_restart(self) -> None:
        """A restarted server may be another release: learn its API again, and write again the
        slices it stored with fields dropped (it may keep them now)."""
        with self._lock:
            if self._known_restarts == self._kube.restarts:
                return
            self._known_restarts = self._kube.restarts
            self._api_version = None
            self._pool_selector = None  # the new server may know the field
            self._written.clear()

    @property
    def pool_selector(self) -> bool | None:
        """How the last list of our pool's slices was narrowed since the server (re)started:
        by the server (True), here after the server rejected ``spec.pool.name`` (False), or not
        listed yet (None)."""
        return self._pool_selector

    @property
    def api_version(self) -> str:
        self._notice_restart()
        with self._lock:
            if self._api_version is None:
                self._api_version = next(
                    (v for v in API_VERSIONS if self._kube.served(v)), API_VERSIONS[0]
                )
            return self._api_version

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"driver-{self.driver}-slices", daemon=True
        )
        self._thread.start()

    def stop(self, *, delete: Callable[[dict], bool] = lambda _: True) -> None:
        """Stop publishing; then delete the slices for which ``delete(slice)`` says so."""
        self._stopping.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for item in self.slices():
            if self._owned(item) and delete(item):
                self._kube.delete(
                    kube_api.path(self.api_version, "resourceslices", item["metadata"]["name"]),
                    missing_ok=True,  # the kubelet may have wiped it meanwhile
                )

    def slices(self) -> list[dict]:
        """The driver's slices in the API now (all pools, also those of other publishers)."""
        return self._kube.list(
            kube_api.path(self.api_version, "resourceslices"),
            fieldSelector=f"spec.driver={self.driver}",
        )

    # --- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.2
        while not self._stopping.is_set():
            try:
                resource_version, changed = self._reconcile()
                self._unresolved.succeeded()  # every slice is stored as wanted now
                self._voice.succeeded()
                backoff = 0.2
                if not changed:  # after writes, verify them with another pass at once
                    self._watch(resource_version)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                now = time.monotonic()
                if _unreachable(exc):  # the API server restarts: try again, for a while
                    log.debug("ResourceSlices of %s: %s", self.driver, exc)
                    said = f"driver {self.driver}: publishing ResourceSlices failed: {_said(exc)}"
                    self._unresolved.away(said, now)
                    self._voice.away(now)
                else:  # stands until a pass succeeds; recorded before the history says it
                    self._unresolved.failed(
                        exc.slice if isinstance(exc, SliceRefused) else "",
                        f"driver {self.driver}: publishing ResourceSlices failed: {_said(exc)}",
                    )
                    self._report(exc, _status(exc), now)
                self._kick.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _watch(self, resource_version: str) -> None:
        """Return as soon as something may need repair, on publish(), or after a resync period.

        The watch runs in its own thread so that publish() and stop() need not wait for the next
        event; the server ends it after a resync period at the latest, so a watcher that is no
        longer listened to does not live long.
        """
        events = self._kube.watch(
            kube_api.path(self.api_version, "resourceslices"),
            resource_version=resource_version,
            timeout_seconds=int(RESYNC_PERIOD),
            fieldSelector=self._selector(),
        )
        abandoned = threading.Event()
        watcher = threading.Thread(
            target=self._consume,
            args=(events, abandoned),
            name=f"driver-{self.driver}-watch",
            daemon=True,
        )
        watcher.start()
        self._kick.wait(RESYNC_PERIOD)
        abandoned.set()

    def _consume(self, events: Generator[dict, None, None], abandoned: threading.Event) -> None:
        try:
            for event in events:
                if abandoned.is_set() or event.get("type") == "ERROR":
                    break
                if event.get("type") == "BOOKMARK":
                    continue
                if self._owned(event.get("object") or {}) and not self._is_ours_now(event):
                    break
        except Exception as exc:
            if not abandoned.is_set():
                log.debug("slice watch of %s ended: %s", self.driver, exc)
                if not isinstance(exc, KubeError) or _unreachable(exc):  # cut off: a restart
                    self._voice.away(time.monotonic())
        finally:
            if not abandoned.is_set():
                self._kick.set()
            events.close()

    def _is_ours_now(self, event: dict) -> bool:
        """Whether a watch event shows exactly what we want (our own write): nothing to do."""
        if event.get("type") == "DELETED":
            return False
        item = event["object"]
        name = item["metadata"]["name"]
        with self._lock:
            desired = self._desired().get(name)
            written = self._written.get(name)
        if desired is None:
            return False
        if written is not None and written == item["metadata"].get("resourceVersion"):
            return True
        return _contains(item.get("spec") or {}, self._spec_for_api(desired["spec"]))

    # --- reconcile ----------------------------------------------------------------------------

    def _reconcile(self) -> tuple[str, bool]:
        """One pass: list, fix what differs; the list's resourceVersion, and whether we wrote."""
        self._notice_restart()
        with self._lock:
            self._kick.clear()
            collection = self._list_own()
            existing = {
                item["metadata"]["name"]: item
                for item in collection.get("items") or []
                if self._owned(item)
            }
            self._decide_generations(existing.values())
            desired = self._desired()
            changed = False
            for name, body in desired.items():
                changed |= self._ensure(name, body, existing.get(name))
            for name in existing:
                if name not in desired:
                    with _writing(name):
                        self._kube.delete(
                            kube_api.path(self.api_version, "resourceslices", name),
                            missing_ok=True,
                        )
                    self._written.pop(name, None)
                    changed = True
            self._retired.clear()
            return collection["metadata"]["resourceVersion"], changed

    def _ensure(self, name: str, body: dict, current: dict | None) -> bool:
        """Create or update one slice; True when something was written."""
        want = self._spec_for_api(body["spec"])
        if current is not None:
            if _contains(current.get("spec") or {}, want):
                return False
            if self._written.get(name) == current["metadata"].get("resourceVersion"):
                return False  # the server drops fields we sent; rewriting cannot help
        manifest: dict = {
            "apiVersion": self.api_version,
            "kind": "ResourceSlice",
            "metadata": {"name": name, **({"ownerReferences": o} if (o := self._owner()) else {})},
            "spec": want,
        }
        with _writing(name):
            if current is None:
                stored = self._kube.create(
                    kube_api.path(self.api_version, "resourceslices"), manifest
                )
            else:
                manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                stored = self._kube.update(
                    kube_api.path(self.api_version, "resourceslices", name), manifest
                )
        self.written_at = time.time()
        if _contains(stored.get("spec") or {}, want):
            self._written.pop(name, None)
        else:
            self._written[name] = stored["metadata"]["resourceVersion"]
            missing = ", ".join(_missing(stored.get("spec") or {}, want)) or "?"
            error = DroppedFieldsError(
                f"ResourceSlice {name}: the API server ({self.api_version}) dropped fields of "
                f"the driver's spec: {missing}"
            )
            if not self.expect_dropped_fields:
                self._report(error)
                with self._lock:
                    self.stats.dropped.append(f"driver {self.driver}: {error}")
        return True

    def _selector(self) -> str:
        """Like upstream's controller: narrow to the one pool we reconcile by ``spec.pool.name``
        where the server knows that field, else list the driver's slices and filter here."""
        if self.reconcile_pool and self._pool_selector is not False:
            return f"spec.driver={self.driver},{POOL_FIELD}={self.reconcile_pool}"
        return f"spec.driver={self.driver}"

    def _list_own(self) -> dict:
        url = kube_api.path(self.api_version, "resourceslices")
        selector = self._selector()
        try:
            answer = self._kube.request("GET", url, query={"fieldSelector": selector})
        except KubeError as exc:
            if exc.status != 400 or not self.reconcile_pool or self._pool_selector is False:
                raise
            log.info(
                "ResourceSlices of %s: the API server rejects the spec.pool.name field selector "
                "(%s); filtering pool %s locally",
                self.driver,
                exc.message,
                self.reconcile_pool,
            )
            self._pool_selector = False
            return self._kube.request("GET", url, query={"fieldSelector": self._selector()})
        if self.reconcile_pool:  # what this list did, for whoever asks (pool_selector)
            self._pool_selector = POOL_FIELD in selector
        return answer

    def _decide_generations(self, existing) -> None:
        for pool_name, state in self._pools.items():
            if state.generation is None:
                seen = [
                    item["spec"]["pool"].get("generation", 0)
                    for item in existing
                    if item["spec"]["pool"]["name"] == pool_name
                ]
                state.generation = max(seen, default=0) + 1

    def _desired(self) -> dict[str, dict]:
        wanted: dict[str, dict] = {}
        for pool_name, state in self._pools.items():
            pool = state.pool
            for index, partial in enumerate(pool.slices):
                spec = copy.deepcopy(partial)
                spec["driver"] = self.driver
                spec["pool"] = {
                    "name": pool_name,
                    "generation": state.generation or 1,
                    "resourceSliceCount": len(pool.slices),
                }
                if pool.node_name:
                    spec["nodeName"] = pool.node_name
                elif pool.all_nodes:
                    spec["allNodes"] = True
                wanted[self._slice_name(pool_name, index)] = {"spec": spec}
        return wanted

    def _slice_name(self, pool: str, index: int) -> str:
        name = re.sub(r"[^a-z0-9.-]+", "-", f"{self.driver}-{pool}-{index}".lower()).strip("-.")
        if len(name) > 200:
            digest = hashlib.sha256(name.encode()).hexdigest()[:12]
            name = f"{name[:180].rstrip('-.')}-{digest}"
        return name

    def _reconciles(self, pool: str) -> bool:
        return self.reconcile_pool is None or pool == self.reconcile_pool

    def _owned(self, item: dict) -> bool:
        """Slices this publisher manages: of our driver, in a pool we publish or retired."""
        spec = item.get("spec") or {}
        if spec.get("driver") != self.driver:
            return False
        pool = (spec.get("pool") or {}).get("name")
        with self._lock:
            return pool in self._pools or pool in self._retired

    def _owner(self) -> list[dict]:
        """Node-local slices belong to the Node (garbage-collected with it), as upstream."""
        if self.owner_node is None:
            return []
        if self._owner_refs is None:
            try:
                node = self._kube.get(kube_api.path("v1", "nodes", self.owner_node))
                self._owner_refs = [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": self.owner_node,
                        "uid": node["metadata"]["uid"],
                    }
                ]
            except KubeError as exc:
                log.debug("no owner for slices of %s: %s", self.driver, exc)
                return []
        return self._owner_refs

    def _spec_for_api(self, spec: dict) -> dict:
        if self.api_version != "resource.k8s.io/v1beta1":
            return spec
        converted = dict(spec)
        if "devices" in spec:
            converted["devices"] = [
                {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
                for d in spec["devices"]
            ]
        return converted

    def _report(self, exc: Exception, status: int | None = None, now: float | None = None) -> None:
        """Say ``exc`` (kept in the history); a failed pass's (``now``: when) as loud as its
        :class:`ErrorVoice` decides, anything else as a warning."""
        message = f"ResourceSlices of {self.driver}: {exc}"
        self.stats.errors.append(message)
        level, line = (
            (logging.WARNING, message) if now is None else self._voice.said(message, status, now)
        )
        log.log(level, "%s", line)


def _contains(actual: object, wanted: object) -> bool:
    """Whether ``actual`` holds everything of ``wanted`` (the server may add defaults)."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            key in actual and _contains(actual[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(wanted)
            and all(_contains(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return actual == wanted


def _missing(actual: object, wanted: object, where: str = "spec") -> list[str]:
    """The paths of ``wanted`` that ``actual`` lacks or holds differently (first few only)."""
    if isinstance(wanted, dict) and isinstance(actual, dict):
        found = []
        for key, value in wanted.items():
            if key not in actual:
                found.append(f"{where}.{key}")
            else:
                found += _missing(actual[key], value, f"{where}.{key}")
        return found[:5]
    if isinstance(wanted, list) and isinstance(actual, list) and len(wanted) == len(actual):
        found = []
        for index, (a, w) in enumerate(zip(actual, wanted, strict=True)):
            found += _missing(a, w, f"{where}[{index}]")
        return found[:5]
    return [] if actual == wanted else [where]


@contextlib.contextmanager
def _writing(name: str) -> Iterator[None]:
    """A write of slice ``name``: an error the server answered with names the slice."""
    try:
        yield
    except KubeError as exc:
        if _unreachable(exc):
            raise
        raise SliceRefused(name, exc) from exc


def _said(exc: Exception) -> str:
    """An error as the report says it: ours and the API server's speak for themselves."""
    if isinstance(exc, (KubeError, SliceRefused)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _status(exc: Exception) -> int | None:
    """The status the API server answered ``exc`` with; None when it is none of its answers."""
    error = exc.error if isinstance(exc, SliceRefused) else exc
    return error.status if isinstance(error, KubeError) else None


def _unreachable(exc: Exception) -> bool:
    """No answer or a 5xx: the server is away for a moment. A 403 is reported (RBAC problem)."""
    return isinstance(exc, KubeError) and (exc.status == 0 or exc.status >= 500)
