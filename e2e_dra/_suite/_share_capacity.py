"""What one share of a device consumes (KEP-5075), as the allocation oracle checks it: a result
that is a share of a device (it has a ``shareID`` or a ``consumedCapacity``) records in
``consumedCapacity`` what its request and the device's ``requestPolicy`` say it consumes of
each capacity of the device.

The API's rules (``CapacityRequirements``, ``CapacityRequestPolicy``, ``DeviceCapacity`` and
``DeviceRequestAllocationResult.consumedCapacity`` in ``k8s.io/api/resource/v1``):

- a capacity the request asks for no amount of: the policy's ``default``; no policy (or none
  set): the whole ``value``;
- an amount, without a policy (or with neither ``validValues`` nor ``validRange``): as asked;
- with ``validValues``: the smallest valid value not smaller than the amount; none: the policy
  is violated, and the device cannot be allocated to the request;
- with ``validRange``: below ``min``, ``min``; with a ``step``, rounded up to ``min + n * step``;
  above ``max`` after that: violated;
- more than the capacity's ``value``: the device cannot be allocated to the request; nor can it
  be when the request asks for a capacity the device does not have;
- ``consumedCapacity`` has an entry for each capacity of the device ("even if the consumed
  amount is zero"); a name in either without the driver's domain is the same as with it.

A result without ``shareID`` and ``consumedCapacity`` holds the whole device (a scheduler whose
DRAConsumableCapacity gate is off, or an API server that dropped them): not a share, not judged.
A ``validRange`` with a fractional bound, or a fractional amount asked of one, is rounded in
milli-units or whole units depending on the DRAFractionalCapacityRange gate: not judged.

A share is judged against the slices listed for the allocation; a finding stands only if a list
made after it (``relisted``) finds it too, so that a device's policy changed meanwhile is no
finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubernetes.utils import parse_quantity

RULE = "consumed capacity"
Devices = Mapping[tuple[str, str, str], Mapping[str, Any]]
"""Published devices by (driver, pool, device)."""


class NotJudged(Exception):
    """The rule does not say what the share consumes (see module: fractional ranges)."""


def consumed(asked: Decimal | None, capacity: Mapping[str, Any]) -> Decimal | None:
    """What a share consumes of ``capacity`` (a ``DeviceCapacity``) for a request of ``asked``
    (None: it asks for none); None: the request may not have a share of the device."""
    value = _quantity(capacity.get("value"))
    policy = capacity.get("requestPolicy") or {}
    if asked is None:
        default = policy.get("default")
        return value if default is None else _quantity(default)
    amount: Decimal | None = asked
    valid_range = policy.get("validRange") or {}
    valid_values = [_quantity(v) for v in policy.get("validValues") or []]
    if valid_range.get("min") is not None:
        amount = _in_range(asked, valid_range)
    elif valid_values:
        amount = next((v for v in sorted(valid_values) if v >= asked), None)
    if amount is None or amount > value:
        return None
    return amount


def _in_range(asked: Decimal, valid_range: Mapping[str, Any]) -> Decimal | None:
    bounds = {
        key: _quantity(valid_range[key])
        for key in ("min", "max", "step")
        if valid_range.get(key) is not None
    }
    if any(v != v.to_integral_value() for v in (asked, *bounds.values())):
        raise NotJudged
    low = bounds["min"]
    amount = max(asked, low)
    if "step" in bounds:
        steps = ((amount - low) / bounds["step"]).to_integral_value(rounding=ROUND_CEILING)
        amount = low + steps * bounds["step"]
    if "max" in bounds and amount > bounds["max"]:
        return None
    return amount


def share_problems(
    claim: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    devices: Devices,
    relisted: Callable[[], Devices],
) -> list[tuple[str, str]]:
    """The rule for each share among ``results`` of the claim, on the ``devices`` published
    when it was allocated; each finding confirmed by the devices ``relisted`` (see module)."""
    found = _problems(claim, results, devices)
    if not found:
        return []
    again = set(_problems(claim, results, relisted()))
    return [problem for problem in found if problem in again]


def _problems(
    claim: Mapping[str, Any], results: Sequence[Mapping[str, Any]], devices: Devices
) -> list[tuple[str, str]]:
    found = []
    for result in results:
        if not (result.get("shareID") or result.get("consumedCapacity")):
            continue
        driver = str(result.get("driver", ""))
        where = (driver, str(result.get("pool", "")), str(result.get("device", "")))
        device = devices.get(where)
        if device is None or not device.get("allowMultipleAllocations"):
            continue
        shown = f"result {result.get('request')} -> {'/'.join(where)}"
        found += [(RULE, f"{shown}: {said}") for said in _share(claim, result, device, driver)]
    return found


def _share(
    claim: Mapping[str, Any], result: Mapping[str, Any], device: Mapping[str, Any], driver: str
) -> list[str]:
    """What is wrong with one share of ``device``."""
    capacities = {_named(n, driver): c for n, c in (device.get("capacity") or {}).items()}
    asked = {_named(n, driver): _quantity(q) for n, q in _asked(claim, result).items()}
    recorded = {
        _named(n, driver): _quantity(q) for n, q in (result.get("consumedCapacity") or {}).items()
    }
    missing = sorted(set(asked) - set(capacities))
    if missing:
        return [f"its request asks for capacity {missing}, which the device does not have"]
    said = [
        f"consumedCapacity names {name}, which is no capacity of the device"
        for name in sorted(set(recorded) - set(capacities))
    ]
    for name, capacity in sorted(capacities.items()):
        try:
            wanted = consumed(asked.get(name), capacity)
        except NotJudged:
            continue
        terms = (
            f"capacity {name} is {capacity.get('value')} with requestPolicy "
            f"{capacity.get('requestPolicy')}, and its request asks for "
            f"{asked.get(name, 'no amount')}"
        )
        if wanted is None:
            said.append(f"{terms}: the device may not be allocated to it")
        elif recorded.get(name) != wanted:
            said.append(
                f"consumedCapacity {name} is {recorded.get(name, 'missing')}: {terms}, "
                f"which makes {wanted}"
            )
    return said


def _asked(claim: Mapping[str, Any], result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``capacity.requests`` of the request (or subrequest) ``result`` is for."""
    main, _, sub = str(result.get("request", "")).partition("/")
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    for spec in requests:
        if spec.get("name") != main:
            continue
        if sub:
            chosen = [o for o in spec.get("firstAvailable") or [] if o.get("name") == sub]
            wanted = chosen[0] if chosen else {}
        else:
            wanted = spec.get("exactly") or spec
        return (wanted.get("capacity") or {}).get("requests") or {}
    return {}


def _named(name: str, driver: str) -> str:
    """A capacity's name with its domain: the driver's where it has none."""
    return name if "/" in name else f"{driver}/{name}"


def _quantity(value: Any) -> Decimal:
    return Decimal(parse_quantity(str(value)))
