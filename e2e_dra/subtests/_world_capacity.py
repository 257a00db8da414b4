"""A shared device's consumable capacity in random-worlds (KEP-5075): its value, its
``requestPolicy``, and what one share of it consumes, as the API documents it.

A device with ``allowMultipleAllocations: true`` is allocated to many requests at once, each
result a share of it; each share consumes some of every capacity the device has, and the
shares held never consume more of one than its ``value``. What a share consumes
(``CapacityRequirements.requests`` and ``CapacityRequestPolicy`` in
``k8s.io/api/resource/v1``):

- a request that asks for no amount consumes the policy's ``default``; without a policy, the
  whole capacity;
- an amount, without a policy, is consumed as asked;
- with ``validValues``, it is rounded up to the smallest valid value that is not smaller; one
  above every valid value violates the policy;
- with ``validRange``, one below ``min`` becomes ``min``; with a ``step`` it is rounded up to
  ``min + n * step``; one that ends up above ``max`` violates the policy;
- a request the policy refuses, or that would consume more than the capacity's value, cannot be
  given a share of this device.

Amounts here are whole GiB, so the integer and the fractional arithmetic the API allows agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CAPACITY = "memory"
"""The one capacity of a world's shared device, and what its claims ask for."""
UNIT = "Gi"


def quantity(amount: int) -> str:
    """``amount`` GiB, as the API writes a quantity."""
    return f"{amount}{UNIT}"


@dataclass(frozen=True)
class Capacity:
    """The :data:`CAPACITY` of a device that allows multiple allocations: its ``value`` and,
    if ``default`` is set, a request policy with ``values`` (``validValues``) or a range
    (``minimum``, and maybe ``maximum`` and ``step``); neither: a policy of a default alone.
    Without ``default`` the device has no request policy."""

    value: int
    default: int | None = None
    values: tuple[int, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    step: int | None = None

    def consumed(self, asked: int | None) -> int | None:
        """What one share consumes for a request of ``asked`` (None: no amount asked); None
        when the request may not get a share of the device (see module)."""
        if asked is None:
            return self.value if self.default is None else self.default
        amount: int | None = asked
        if self.values:
            amount = next((v for v in self.values if v >= asked), None)
        elif self.minimum is not None:
            amount = max(asked, self.minimum)
            if self.step is not None:
                steps = -(-(amount - self.minimum) // self.step)  # rounded up
                amount = self.minimum + steps * self.step
            if self.maximum is not None and amount > self.maximum:
                amount = None
        if amount is None or amount > self.value:
            return None
        return amount

    def as_api(self) -> dict[str, Any]:
        """The ``DeviceCapacity`` of the device's slice."""
        capacity: dict[str, Any] = {"value": quantity(self.value)}
        if self.default is None:
            return capacity
        policy: dict[str, Any] = {"default": quantity(self.default)}
        if self.values:
            policy["validValues"] = [quantity(v) for v in self.values]
        elif self.minimum is not None:
            bounds = {"min": self.minimum, "max": self.maximum, "step": self.step}
            policy["validRange"] = {k: quantity(v) for k, v in bounds.items() if v is not None}
        capacity["requestPolicy"] = policy
        return capacity

    def without_policy(self) -> Capacity:
        """The same value, no request policy: one step simpler, for the shrinker."""
        return Capacity(self.value)
