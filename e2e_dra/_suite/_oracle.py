"""The allocation oracle: every allocation the scheduler writes, held to the rules of the
``resource.k8s.io`` API, whichever subtest made the claim and whatever that subtest checks.

A subtest checks what it set out to test; a scheduler that breaks a rule elsewhere (a toleration
check weakened, a counter summed wrongly, a device given to two claims) passes it unless the rule
is checked for every claim. These rules come from the API's documentation and the KEPs, not
from any bug:

- **count** (KEP-4381): a request allocated in ``ExactCount`` mode (the default) gets exactly
  ``count`` devices (default 1); a ``firstAvailable`` request (KEP-4816) gets those of exactly
  one of its subrequests; a result names a request of the claim.
- **one claim per device** (KEP-4381): a device is allocated to one claim at a time, unless the
  result has admin access (KEP-5018: it does not count against availability) or the device
  allows multiple allocations (KEP-5075: such results carry a ``shareID``).
- **taints** (KEP-5055): a device tainted ``NoSchedule`` or ``NoExecute`` before the allocation is
  allocated only to a request that tolerates the taint (the Pod toleration rules: an empty
  effect matches every effect, ``Exists`` with no key every taint); a taint a DeviceTaintRule
  puts on the devices its selector picks counts the same (``_taint_rules``: which devices, and
  since when), and a finding names the rule. The rules are read at the newest version the
  server serves them at; a server that serves none has none to check (said once in the log).
- **counters** (KEP-4815): the devices allocated from a pool consume no more of a shared counter
  than its counter set has.
- **constraints** (KEP-4381): the devices of a ``matchAttribute`` constraint's requests all have
  the attribute, with one value; those of a ``distinctAttribute`` constraint all different ones.
- **capacity** (KEP-5075): the shares of a device that allows multiple allocations consume, summed
  over every claim holding one, no more of each capacity than the device has.
- **consumed capacity** (KEP-5075, ``_share_capacity``): each share records what its request and
  the device's ``requestPolicy`` say it consumes (the default when it asks for no amount).
- **claim limit**: an allocation holds at most :data:`RESULTS_LIMIT` results (the API's
  ``AllocationResultsMaxSize``).
- **config** (KEP-4381): each config of the claim's spec for a request that was allocated (all
  requests, or one of those it names, a subrequest chosen among them) is in the allocation once,
  as ``FromClaim``, for the same requests; every config of the allocation names only requests of
  the claim.

Not checked: CEL selectors (no evaluator here) and ``All`` mode's device count (which devices
match is the selectors' business; ``random-worlds`` checks it for the worlds it draws).

The state is that of one watch stream (events arrive in the order the API server wrote them):
:meth:`AllocationOracle.listed` starts it afresh from a list, :meth:`seen` follows each change,
:meth:`gone` each deletion. ResourceSlices and DeviceTaintRules are listed when a judgment needs
them, at most every :data:`SLICES_FRESH` seconds (sooner when a result names a device the last
list did not have: a pool published a moment before its claims). A list may be that old, and a
rule in it deleted since: a finding from a rule stands only if a list made after the allocation
was seen still has that rule, unchanged (it existed, as it is, from before the allocation until
after it). Only an allocation the scheduler wrote (its field manager owns
``status.allocation``) is judged, once; one another client wrote (a test of the status API) still
holds its devices.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from e2e_dra._suite._share_capacity import share_problems
from e2e_dra._suite._taint_rules import TaintRule
from e2e_dra._suite._taint_rules import timestamp as _timestamp
from e2e_dra._suite._taint_rules import tolerates as _tolerates

log = logging.getLogger(__name__)

Device = tuple[str, str, str]  # driver, pool, device
SCHEDULER = "kube-scheduler"  # the field manager of the allocations judged here
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
TAINT_MARGIN = 1.0
"""Seconds a taint must predate the allocation to count: ``timeAdded`` has whole seconds."""
RESULTS_LIMIT = 32
SLICES_FRESH = 2.0
"""Seconds a list of ResourceSlices serves the allocations seen meanwhile (a relist brings many)."""
SLICES_RECHECK = 0.5
"""Seconds after which a result naming a device the list lacks has them listed again."""


@dataclass(frozen=True)
class Problem:
    """A rule an allocation broke: the claim whose allocation broke it, and what was seen."""

    claim: dict
    rule: str
    message: str


@dataclass
class _Allocated:
    name: str  # namespace/name
    results: list[dict]


@dataclass
class _Published:
    """The newest generation of every pool, by device, each pool's counter sets, and the
    DeviceTaintRules (None: the server serves none)."""

    devices: dict[Device, dict] = field(default_factory=dict)
    counters: dict[tuple[str, str], dict[str, dict[str, Decimal]]] = field(default_factory=dict)
    rules: tuple[TaintRule, ...] | None = None

    @classmethod
    def of(
        cls, slices: Iterable[Mapping[str, Any]], rules: Iterable[Mapping[str, Any]] | None = None
    ) -> _Published:
        items = list(slices)
        newest: dict[tuple[str, str], int] = {}
        for item in items:
            spec = item.get("spec") or {}
            pool = (spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""))
            generation = int((spec.get("pool") or {}).get("generation", 0))
            newest[pool] = max(newest.get(pool, generation), generation)
        published = cls(rules=None if rules is None else tuple(map(TaintRule.of, rules)))
        for item in items:
            spec = item.get("spec") or {}
            driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
            if int((spec.get("pool") or {}).get("generation", 0)) != newest[(driver, pool)]:
                continue
            for device in spec.get("devices") or []:
                published.devices[(driver, pool, device.get("name", ""))] = device
            for counter_set in spec.get("sharedCounters") or []:
                published.counters.setdefault((driver, pool), {})[counter_set.get("name", "")] = {
                    name: _amount(counter) for name, counter in _counters(counter_set).items()
                }
        return published


class AllocationOracle:
    """The allocations of one watch stream, each new one judged by the rules (see module)."""

    def __init__(
        self,
        slices: Callable[[], list[dict]],
        *,
        rules: Callable[[], list[dict] | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``slices`` lists the ResourceSlices; ``rules`` the DeviceTaintRules, None when the
        server serves none (no ``rules``: none are checked)."""
        self._slices = slices
        self._rules = rules
        self._said_unserved = False
        self._clock = clock
        self._listed_at: float | None = None
        self._published = _Published()
        self._allocated: dict[str, _Allocated] = {}  # by claim UID
        self._judged: set[tuple[str, str]] = set()  # (claim UID, allocation) seen already

    def listed(self, claims: Iterable[dict]) -> list[Problem]:
        """Start afresh from a list of every claim (a watch that broke lists again)."""
        claims = list(claims)
        self._allocated = {}
        for claim in claims:  # what is allocated now, before any is judged against the others
            if (results := _results(claim)) is not None:
                self._allocated[_uid(claim)] = _Allocated(_name(claim), results)
        return [problem for claim in claims for problem in self._judge(claim)]

    def seen(self, claim: dict) -> list[Problem]:
        """A claim added or changed: its allocation recorded (or dropped), and judged if new."""
        results = _results(claim)
        if results is None:
            self._allocated.pop(_uid(claim), None)
            return []
        self._allocated[_uid(claim)] = _Allocated(_name(claim), results)
        return self._judge(claim)

    def gone(self, claim: dict) -> None:
        """A claim deleted: its devices are free."""
        self._allocated.pop(_uid(claim), None)

    def _judge(self, claim: dict) -> list[Problem]:
        results = _results(claim)
        key = (_uid(claim), repr(results))
        allocated_at = _allocated_at(claim)
        if results is None or key in self._judged or allocated_at is None:
            return []  # an allocation some client wrote (a test's) holds devices, unjudged
        # Either may raise (a restarting server): the allocation is judged later.
        published = self._published_now(results)
        ruled = self._rule_problems(claim, results, published, allocated_at)
        self._judged.add(key)
        found = [
            *_count_problems(claim, results),
            *self._shared_problems(claim, results, published),
            *_taint_problems(claim, results, published, allocated_at),
            *ruled,
            *_constraint_problems(claim, results, published),
            *self._counter_problems(claim, results, published),
            *self._capacity_problems(results, published),
            *share_problems(claim, results, published.devices, self._relisted_devices),
            *_limit_problems(results),
            *_config_problems(claim),
        ]
        return [Problem(claim, rule, message) for rule, message in found]

    def _published_now(self, results: list[dict]) -> _Published:
        now = self._clock()
        age = None if self._listed_at is None else now - self._listed_at
        unknown = any(_device(r) not in self._published.devices for r in results)
        if age is None or age > SLICES_FRESH or (unknown and age > SLICES_RECHECK):
            self._published = _Published.of(self._slices(), self._listed_rules())
            self._listed_at = now
        return self._published

    def _relisted_devices(self) -> dict[Device, dict]:
        return _Published.of(self._slices()).devices

    def _listed_rules(self) -> list[dict] | None:
        if self._rules is None:
            return None
        rules = self._rules()
        if rules is None and not self._said_unserved:
            self._said_unserved = True
            log.info(
                "allocation oracle: the API server serves no DeviceTaintRules, so taints from "
                "DeviceTaintRules are not checked"
            )
        return rules

    def _rule_problems(
        self, claim: dict, results: list[dict], published: _Published, allocated_at: float
    ) -> list[tuple[str, str]]:
        """The taints rule for the taints of DeviceTaintRules; a rule of the list in hand that
        would break it counts only if a list made now has it still, unchanged (see module)."""
        found = _rule_taint_problems(claim, results, published.rules or (), allocated_at)
        if not found:
            return []
        now = {rule.uid: rule for rule in map(TaintRule.of, self._listed_rules() or [])}
        return [
            (name, message)
            for rule, name, message in found
            if rule.uid in now and now[rule.uid].same_as(rule)
        ]

    def _shared_problems(
        self, claim: dict, results: list[dict], published: _Published
    ) -> list[tuple[str, str]]:
        mine = {_device(r) for r in results if _exclusive(r, published)}
        found = []
        for uid, other in self._allocated.items():
            if uid == _uid(claim):
                continue
            both = mine & {_device(r) for r in other.results if _exclusive(r, published)}
            for device in sorted(both):
                found.append(
                    (
                        "one claim per device",
                        f"device {'/'.join(device)} is allocated to ResourceClaim {other.name} "
                        f"too; neither result has admin access, and the device does not allow "
                        f"multiple allocations",
                    )
                )
        return found

    def _counter_problems(
        self, claim: dict, results: list[dict], published: _Published
    ) -> list[tuple[str, str]]:
        pools = {(r.get("driver", ""), r.get("pool", "")) for r in results}
        found = []
        for pool in sorted(pools & published.counters.keys()):
            used: dict[tuple[str, str], Decimal] = {}
            devices = {
                _device(r)
                for allocated in self._allocated.values()
                for r in allocated.results
                if (r.get("driver", ""), r.get("pool", "")) == pool and not r.get("adminAccess")
            }
            for device in devices:
                for consumed in (published.devices.get(device) or {}).get("consumesCounters") or []:
                    for name, counter in _counters(consumed).items():
                        at = (consumed.get("counterSet", ""), name)
                        used[at] = used.get(at, Decimal(0)) + _amount(counter)
            for (counter_set, name), amount in sorted(used.items()):
                has = published.counters[pool].get(counter_set, {}).get(name)
                if has is not None and amount > has:
                    found.append(
                        (
                            "counters",
                            f"pool {'/'.join(pool)}: the allocated devices consume {amount} of "
                            f"counter {counter_set}/{name}, which has {has}",
                        )
                    )
        return found

    def _capacity_problems(
        self, results: list[dict], published: _Published
    ) -> list[tuple[str, str]]:
        shared = {
            _device(r)
            for r in results
            if (published.devices.get(_device(r)) or {}).get("allowMultipleAllocations")
        }
        found = []
        for device in sorted(shared):
            used: dict[str, Decimal] = {}
            for allocated in self._allocated.values():
                for r in allocated.results:
                    if _device(r) == device and not r.get("adminAccess"):
                        for name, amount in (r.get("consumedCapacity") or {}).items():
                            used[name] = used.get(name, Decimal(0)) + _amount(amount)
            capacity = published.devices[device].get("capacity") or {}
            for name, amount in sorted(used.items()):
                has = capacity.get(name)
                if has is not None and amount > _amount(has):
                    found.append(
                        (
                            "capacity",
                            f"the shares of device {'/'.join(device)} consume {amount} of its "
                            f"capacity {name}, which is {_amount(has)}",
                        )
                    )
        return found


# --- the rules that need only the claim and the slices ---------------------------------------


def _base(result: Mapping[str, Any]) -> str:
    """The claim's request a result is for (``req`` of ``req/sub``)."""
    return str(result.get("request", "")).partition("/")[0]


def _limit_problems(results: list[dict]) -> list[tuple[str, str]]:
    if len(results) <= RESULTS_LIMIT:
        return []
    return [("claim limit", f"{len(results)} results, over the limit of {RESULTS_LIMIT}")]


def _config_problems(claim: dict) -> list[tuple[str, str]]:
    requests = {r.get("name", "") for r in _spec_devices(claim).get("requests") or []}
    given = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    configs = list(given.get("config") or [])
    found = []
    for config in configs:
        unknown = [r for r in config.get("requests") or [] if r.partition("/")[0] not in requests]
        if unknown:
            found.append(("config", f"a {config.get('source')} config names requests {unknown}"))
    given_requests = {
        name for r in _results(claim) or [] for name in (r.get("request", ""), _base(r))
    }
    for wanted in _spec_devices(claim).get("config") or []:
        named = wanted.get("requests") or []
        if named and not given_requests & set(named):
            continue  # only for subrequests not chosen: the allocation leaves it out
        copies = [
            c
            for c in configs
            if c.get("source") == "FromClaim"
            and sorted(c.get("requests") or []) == sorted(wanted.get("requests") or [])
            and c.get("opaque") == wanted.get("opaque")
        ]
        if len(copies) != 1:
            found.append(
                (
                    "config",
                    f"the claim's config for requests {wanted.get('requests') or 'all'} is in "
                    f"the allocation {len(copies)} times as FromClaim, not once",
                )
            )
    return found


def _count_problems(claim: dict, results: list[dict]) -> list[tuple[str, str]]:
    requests = {r.get("name", ""): r for r in _spec_devices(claim).get("requests") or []}
    by_request: dict[str, list[str]] = {}
    found = []
    for result in results:
        request = result.get("request", "")
        main, _, sub = request.partition("/")
        if main not in requests:
            found.append(("count", f"result {_shown(result)} names no request of the claim"))
            continue
        by_request.setdefault(main, []).append(sub)
    for name, request in requests.items():
        subs = by_request.get(name, [])
        if request.get("firstAvailable"):
            chosen = set(subs)
            options = {s.get("name", ""): s for s in request["firstAvailable"]}
            if len(chosen) != 1 or (sub := chosen.pop()) not in options:
                found.append(
                    (
                        "count",
                        f"request {name} (firstAvailable) got devices of subrequests "
                        f"{sorted(set(subs))}, not of exactly one of {sorted(options)}",
                    )
                )
                continue
            wanted = options[sub]
        else:
            wanted = request.get("exactly") or request
        if (wanted.get("allocationMode") or "ExactCount") != "ExactCount":
            continue
        count = int(wanted.get("count") or 1)
        if len(subs) != count:
            found.append(
                ("count", f"request {name} asks for {count} device(s) and got {len(subs)}")
            )
    return found


def _taint_problems(
    claim: dict, results: list[dict], published: _Published, allocated_at: float
) -> list[tuple[str, str]]:
    found = []
    for result in results:
        device = published.devices.get(_device(result))
        if device is None:
            continue
        tolerations = _tolerations(claim, result.get("request", ""))
        for taint in device.get("taints") or []:
            if taint.get("effect") not in BLOCKING_EFFECTS:
                continue
            added = _timestamp(taint.get("timeAdded"))
            if added is None or added > allocated_at - TAINT_MARGIN:
                continue  # tainted after the allocation: eviction's business, not the allocator's
            if not any(_tolerates(t, taint) for t in tolerations):
                found.append(
                    (
                        "taints",
                        f"result {_shown(result)}: the device has taint "
                        f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')} "
                        f"(added {taint.get('timeAdded')}), which request "
                        f"{result.get('request')}'s tolerations {tolerations} do not tolerate",
                    )
                )
    return found


def _rule_taint_problems(
    claim: dict, results: list[dict], rules: Iterable[TaintRule], allocated_at: float
) -> list[tuple[TaintRule, str, str]]:
    """Each result whose device a rule tainted before the allocation, with a taint the request
    does not tolerate: the rule, and the finding."""
    found = []
    for result in results:
        tolerations = _tolerations(claim, result.get("request", ""))
        for rule in rules:
            taint = rule.taint
            if taint.get("effect") not in BLOCKING_EFFECTS or not rule.selects(*_device(result)):
                continue
            if rule.since is None or rule.since > allocated_at - TAINT_MARGIN:
                continue  # tainted after the allocation, as far as can be told
            if not any(_tolerates(t, taint) for t in tolerations):
                found.append(
                    (
                        rule,
                        "taints",
                        f"result {_shown(result)}: DeviceTaintRule {rule.name} taints the device "
                        f"with {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')} "
                        f"(added {taint.get('timeAdded')}), which request "
                        f"{result.get('request')}'s tolerations {tolerations} do not tolerate",
                    )
                )
    return found


def _constraint_problems(
    claim: dict, results: list[dict], published: _Published
) -> list[tuple[str, str]]:
    found = []
    for constraint in _spec_devices(claim).get("constraints") or []:
        names = constraint.get("requests") or []
        covered = [
            r
            for r in results
            if not names
            or any(r.get("request") == n or r.get("request", "").startswith(n + "/") for n in names)
        ]
        for kind in ("matchAttribute", "distinctAttribute"):
            attribute = constraint.get(kind)
            if not attribute:
                continue
            values = {}
            for result in covered:
                device = published.devices.get(_device(result))
                if device is not None:
                    values[_shown(result)] = _attribute(device, result.get("driver", ""), attribute)
            seen = list(values.values())
            broken = (
                (None in seen or len(set(seen)) > 1)
                if kind == "matchAttribute"
                else len(set(seen)) < len(seen)
            )
            if broken:
                found.append(
                    ("constraints", f"{kind} {attribute} over requests {names or 'all'}: {values}")
                )
    return found


# --- reading the objects -----------------------------------------------------------------------


def _uid(claim: dict) -> str:
    return str((claim.get("metadata") or {}).get("uid", ""))


def _name(claim: dict) -> str:
    metadata = claim.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _results(claim: dict) -> list[dict] | None:
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return None
    return list((allocation.get("devices") or {}).get("results") or [])


def _spec_devices(claim: dict) -> dict:
    return (claim.get("spec") or {}).get("devices") or {}


def _device(result: Mapping[str, Any]) -> Device:
    return (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))


def _shown(result: Mapping[str, Any]) -> str:
    return f"{result.get('request')} -> {'/'.join(_device(result))}"


def _exclusive(result: Mapping[str, Any], published: _Published) -> bool:
    """Whether the result holds its device alone (see the module's rules)."""
    if result.get("adminAccess") or result.get("shareID"):
        return False
    device = published.devices.get(_device(result)) or {}
    return not device.get("allowMultipleAllocations")


def _tolerations(claim: dict, request: str) -> list[dict]:
    main, _, sub = request.partition("/")
    for spec in _spec_devices(claim).get("requests") or []:
        if spec.get("name") != main:
            continue
        if sub:
            for option in spec.get("firstAvailable") or []:
                if option.get("name") == sub:
                    return list(option.get("tolerations") or [])
            return []
        return list((spec.get("exactly") or spec).get("tolerations") or [])
    return []


def _attribute(device: Mapping[str, Any], driver: str, qualified: str) -> Any:
    """The attribute's value (its one typed field), by its qualified name or, in the driver's
    own domain, its short one; None when the device does not have it."""
    attributes = device.get("attributes") or {}
    domain, _, short = qualified.rpartition("/")
    found = attributes.get(qualified)
    if found is None and domain == driver:
        found = attributes.get(short)
    if not isinstance(found, Mapping):
        return None
    return next(iter(found.items()), None)


def _counters(holder: Mapping[str, Any]) -> dict[str, Any]:
    return dict(holder.get("counters") or {})


def _amount(counter: Any) -> Decimal:
    value = counter.get("value") if isinstance(counter, Mapping) else counter
    return Decimal(parse_quantity(str(value)))


def _allocated_at(claim: dict) -> float | None:
    """When the scheduler wrote the allocation: the time of its status write that owns the
    allocation (``managedFields``); None when the scheduler does not own it (another client,
    such as a test of the status API, wrote it)."""
    times = [
        stamp
        for entry in (claim.get("metadata") or {}).get("managedFields") or []
        if entry.get("manager") == SCHEDULER
        and entry.get("subresource") == "status"
        and "f:allocation" in str(entry.get("fieldsV1", ""))
        and (stamp := _timestamp(entry.get("time"))) is not None
    ]
    if not times:
        return None
    allocation = (claim.get("status") or {}).get("allocation") or {}
    stamped = _timestamp(allocation.get("allocationTimestamp"))  # the allocator's own, 1.34+
    return stamped if stamped is not None else min(times)
