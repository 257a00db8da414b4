"""NodePrepareResources / NodeUnprepareResources: what the kubelet asks before and after a pod.

The logic is the test driver's contract with the subtests: opaque config parameters become env
vars (``user_<k>`` from the claim, ``admin_<k>`` from the class), plus
``claim_<claim>_<request>=true``, delivered through a CDI spec. It is written once, against claim
dicts, and served through both the v1 and the v1beta1 gRPC service (identical messages).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from e2e_dra.driver import _cdi

log = logging.getLogger(__name__)

ClaimGetter = Callable[[str, str], dict]
"""``get_claim(namespace, name)`` -> the ResourceClaim as the API serves it (resource.k8s.io/v1)."""


class CallWatch(Protocol):
    """Told of each call the kubelet makes, before it is served (the kubelet's side of the
    protocol is judged there: :mod:`e2e_dra.driver._protocol`)."""

    def prepare_asked(self, claim: ClaimRef, obj: dict) -> None: ...

    def unprepare_asked(self, claim: ClaimRef) -> None: ...


_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class PreparedDevice:
    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]
    # The allocation result's shareID: which share of a device that allows multiple allocations.
    share_id: str | None = None


@dataclass
class ClaimResult:
    devices: list[PreparedDevice] = field(default_factory=list)
    error: str = ""


@dataclass
class _Prepared:
    ref: ClaimRef
    devices: list[PreparedDevice]
    spec_files: list[Path]


class ClaimError(Exception):
    """This claim cannot be prepared; the other claims of the call go on."""


def base_request(request: str) -> str:
    """``"req/sub"`` -> ``"req"``: a sub-request is prepared as its parent request."""
    return request.split("/", 1)[0]


def claim_env_name(claim: str, request: str) -> str:
    return _NOT_ALNUM.sub("_", f"claim_{claim}_{request}")


class NodeService:
    """Prepared-claim state of one driver on one node; serialised, idempotent per claim UID."""

    def __init__(
        self,
        driver_name: str,
        cdi_dir: Path,
        get_claim: ClaimGetter,
        protocol: CallWatch | None = None,
    ):
        self.driver_name = driver_name
        self.cdi_dir = cdi_dir
        self.get_claim = get_claim
        self.protocol = protocol
        self._serial = threading.Lock()  # one prepare/unprepare call at a time, as upstream
        self._prepare_block = threading.Lock()  # held by block_prepare()
        self._unprepare_block = threading.Lock()  # held by block_unprepare()
        self._state = threading.Lock()
        self._prepared: dict[str, _Prepared] = {}
        self._failing: set[str] = set()  # claim names that fail_prepare() answers with an error
        self._stopped = threading.Event()

    def stop(self) -> None:
        """Calls waiting on a block (or on the call before them) end now, with an error: a
        subtest stopped halfway never lifts its block, and a gRPC handler thread waiting
        forever keeps the whole process from exiting (its pool's threads are joined at exit)."""
        self._stopped.set()

    @contextlib.contextmanager
    def _holding(self, lock: threading.Lock, what: str) -> Iterator[None]:
        """``lock``, unless the driver stops while the call waits for it."""
        while not lock.acquire(timeout=0.2):
            if self._stopped.is_set():
                raise RuntimeError(f"driver {self.driver_name} stopped while {what} waited")
        try:
            yield
        finally:
            lock.release()

    def prepared_claims(self) -> list[ClaimRef]:
        with self._state:
            return [entry.ref for entry in self._prepared.values()]

    def spec_files(self, uid: str) -> list[Path]:
        """The CDI spec files on disk for claim ``uid`` (prepared or not: found by name)."""
        return sorted(self.cdi_dir.glob(f"{self.driver_name}-{uid}-*.json"))

    def forget(self) -> list[ClaimRef]:
        """Drop the record of every prepared claim, as a driver process without a checkpoint
        of its own does when it restarts (in a reboot): the next NodePrepareResources of those
        claims prepares them afresh, spec files included. The claims forgotten."""
        with self._state:
            forgotten = [entry.ref for entry in self._prepared.values()]
            self._prepared.clear()
            return forgotten

    @contextlib.contextmanager
    def block_prepare(self) -> Iterator[None]:
        """While inside, NodePrepareResources calls wait (the kubelet sees a slow driver)."""
        with self._prepare_block:
            yield

    @contextlib.contextmanager
    def block_unprepare(self) -> Iterator[None]:
        """While inside, NodeUnprepareResources calls wait before they remove anything (the
        claim stays prepared, its CDI spec on disk), as upstream's BlockNodeUnprepareResources.
        A waiting call holds the driver's one-call-at-a-time lock, as a waiting prepare does:
        other calls queue behind it."""
        with self._unprepare_block:
            yield

    @contextlib.contextmanager
    def fail_prepare(self, claim_name: str) -> Iterator[None]:
        """While inside, NodePrepareResources answers claim ``claim_name`` with an error and
        prepares the other claims of the same call as usual: a driver that failed part of a
        call, which the kubelet must retry without keeping what the call did prepare twice."""
        with self._state:
            self._failing.add(claim_name)
        try:
            yield
        finally:
            with self._state:
                self._failing.discard(claim_name)

    # --- prepare ------------------------------------------------------------------------------

    def prepare(self, refs: list[ClaimRef]) -> dict[str, ClaimResult]:
        # Fetch before serialising, as upstream: API latency should not hold up other calls.
        claims = {ref.uid: self._fetch(ref) for ref in refs}
        results: dict[str, ClaimResult] = {}
        with self._holding(self._serial, "NodePrepareResources"):
            for ref in refs:
                claim = claims[ref.uid]
                if isinstance(claim, ClaimResult):
                    results[ref.uid] = claim
                    continue
                if self.protocol is not None:
                    self.protocol.prepare_asked(ref, claim)
                if self._fails(ref):
                    results[ref.uid] = ClaimResult(
                        error=f"claim {ref.namespace}/{ref.name}: failure injected by the test"
                    )
                    continue
                try:
                    results[ref.uid] = ClaimResult(devices=self._prepare_one(ref, claim))
                except ClaimError as exc:
                    results[ref.uid] = ClaimResult(error=str(exc))
        return results

    def _fails(self, ref: ClaimRef) -> bool:
        with self._state:
            return ref.name in self._failing

    def _fetch(self, ref: ClaimRef) -> dict | ClaimResult:
        label = f"{ref.namespace}/{ref.name}"
        try:
            claim = self.get_claim(ref.namespace, ref.name)
        except Exception as exc:
            return ClaimResult(error=f"retrieve claim {label}: {exc}")
        if not isinstance(claim, dict):
            return ClaimResult(error=f"retrieve claim {label}: not an object")
        if not (claim.get("status") or {}).get("allocation"):
            return ClaimResult(error=f"claim {label} not allocated")
        if (claim.get("metadata") or {}).get("uid") != ref.uid:
            return ClaimResult(error=f"claim {label} got replaced")
        return claim

    def _prepare_one(self, ref: ClaimRef, claim: dict) -> list[PreparedDevice]:
        with self._holding(self._prepare_block, "NodePrepareResources"), self._state:
            known = self._prepared.get(ref.uid)
            if known is not None:
                return known.devices
            try:
                devices, files = self._devices_of(ref, claim)
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                raise ClaimError(f"claim {ref.namespace}/{ref.name}: malformed: {exc!r}") from exc
            self._prepared[ref.uid] = _Prepared(ref, devices, files)
            return devices

    def _devices_of(self, ref: ClaimRef, claim: dict) -> tuple[list[PreparedDevice], list[Path]]:
        allocation = claim["status"]["allocation"].get("devices") or {}
        configs = allocation.get("config") or []
        devices: list[PreparedDevice] = []
        files: list[Path] = []
        for result in allocation.get("results") or []:
            if result.get("driver") != self.driver_name:
                continue
            request = base_request(result["request"])
            env = self._env_for(result["request"], configs)
            env[claim_env_name(ref.name, request)] = "true"
            spec = _cdi.build_spec(self.driver_name, ref.uid, request, env)
            if spec is None:
                continue
            path = _cdi.spec_path(self.cdi_dir, self.driver_name, ref.uid, request)
            try:
                _cdi.write_spec(path, spec)
            except OSError as exc:
                raise ClaimError(f"failed to write CDI file {path}: {exc}") from exc
            files.append(path)
            devices.append(
                PreparedDevice(
                    request_names=(request,),
                    pool_name=result["pool"],
                    device_name=result["device"],
                    cdi_device_ids=(_cdi.device_id(self.driver_name, ref.uid, request),),
                    share_id=result.get("shareID"),
                )
            )
        return devices, files

    def _env_for(self, request: str, configs: list[dict]) -> dict[str, str]:
        """Env from the opaque configs of this driver that apply to ``request``; later ones win."""
        env: dict[str, str] = {}
        for index, config in enumerate(configs):
            opaque = config.get("opaque")
            if not opaque or opaque.get("driver") != self.driver_name:
                continue
            applies_to = config.get("requests") or []
            if applies_to and request not in applies_to and base_request(request) not in applies_to:
                continue
            prefix = "admin" if config.get("source") == "FromClass" else "user"
            parameters = opaque.get("parameters")
            if parameters in (None, {}):
                continue
            if not isinstance(parameters, dict) or not all(
                isinstance(value, str) for value in parameters.values()
            ):
                raise ClaimError(
                    f"parameters in config #{index}: decoding {prefix} parameters: "
                    f"want a JSON object of strings, got {parameters!r}"
                )
            env.update({f"{prefix}_{key}": value for key, value in parameters.items()})
        return env

    # --- unprepare ----------------------------------------------------------------------------

    def unprepare(self, refs: list[ClaimRef]) -> dict[str, ClaimResult]:
        if self.protocol is not None:
            for ref in refs:
                self.protocol.unprepare_asked(ref)
        results: dict[str, ClaimResult] = {}
        with self._holding(self._serial, "NodeUnprepareResources"):
            for ref in refs:
                results[ref.uid] = self._unprepare_one(ref)
        return results

    def _unprepare_one(self, ref: ClaimRef) -> ClaimResult:
        with self._holding(self._unprepare_block, "NodeUnprepareResources"), self._state:
            entry = self._prepared.get(ref.uid)
            if entry is None:  # never prepared, or already unprepared
                return ClaimResult()
            for path in entry.spec_files:
                try:
                    _cdi.remove_spec(path)
                except OSError as exc:
                    return ClaimResult(error=f"error removing CDI file {path}: {exc}")
            del self._prepared[ref.uid]
            return ClaimResult()


class DRAServicer:
    """The gRPC face of a NodeService for one API version (``pb`` = that version's _pb2 module)."""

    def __init__(self, service: NodeService, pb: ModuleType):
        self._service = service
        self._pb = pb

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        results = self._service.prepare(_refs(request))
        response = self._pb.NodePrepareResourcesResponse()
        # v1beta1 has no share_id: the kubelet learns the share only through v1.
        shares = "share_id" in self._pb.Device.DESCRIPTOR.fields_by_name
        for uid, result in results.items():
            entry = response.claims[uid]
            entry.error = result.error
            for device in result.devices:
                added = entry.devices.add(
                    request_names=device.request_names,
                    pool_name=device.pool_name,
                    device_name=device.device_name,
                    cdi_device_ids=device.cdi_device_ids,
                )
                if shares and device.share_id is not None:
                    added.share_id = device.share_id
        return response

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        results = self._service.unprepare(_refs(request))
        response = self._pb.NodeUnprepareResourcesResponse()
        for uid, result in results.items():
            response.claims[uid].error = result.error
        return response


def _refs(request: Any) -> list[ClaimRef]:
    return [ClaimRef(claim.namespace, claim.name, claim.uid) for claim in request.claims]
