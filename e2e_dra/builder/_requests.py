"""A claim's device requests, said where the claim is made: ``b.external_claim(requests=[...])``.

Many subtests need a claim whose requests differ from the default one (two requests, a count,
a selector, admin access, subrequests to choose from). Editing the dict that ``external_claim()``
returns reaches three levels deep and hides what the claim asks for; a :class:`Request` says it
in one line, and the factory turns it into the API's shape (v1 and v1beta2 alike) with the
subtest's default DeviceClass wherever no class is named.

Only what a subtest sets is sent: a request without ``allocation_mode`` has no
``allocationMode`` field (the server's default applies), so the objects are the same as the
hand-written ones they replace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_REQUEST = "my-request"
"""The name of the default claim's one request (upstream's)."""


@dataclass(frozen=True)
class Request:
    """One request of a claim, or one subrequest of a ``first_available`` list. Made with
    :func:`request`; a class of None means the subtest's default DeviceClass."""

    name: str = DEFAULT_REQUEST
    device_class: str | None = None
    selectors: tuple[str, ...] = ()
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    capacity: Mapping[str, str] | None = None
    first_available: tuple[Request, ...] = ()

    def spec(self, default_class: str) -> dict:
        """The request as the API has it (v1 and v1beta2): ``{"name", "exactly": {...}}``, or
        ``{"name", "firstAvailable": [...]}`` for a request with subrequests."""
        if not self.first_available:
            return {"name": self.name, "exactly": self._device(default_class)}
        if self != Request(self.name, first_available=self.first_available):
            raise ValueError(
                f"request {self.name!r}: with first_available, the subrequests say what to ask "
                "for, the request itself nothing else"
            )
        subrequests = []
        for sub in self.first_available:
            if sub.first_available or sub.admin_access is not None:
                raise ValueError(
                    f"subrequest {sub.name!r} of {self.name!r}: a subrequest has neither "
                    "subrequests nor admin access"
                )
            subrequests.append({"name": sub.name, **sub._device(default_class)})
        return {"name": self.name, "firstAvailable": subrequests}

    def _device(self, default_class: str) -> dict:
        """What an exact request and a subrequest share: class, selectors, mode, count,
        admin access, tolerations, capacity; only those that are set."""
        device: dict[str, Any] = {"deviceClassName": self.device_class or default_class}
        if self.selectors:
            device["selectors"] = [{"cel": {"expression": cel}} for cel in self.selectors]
        if self.allocation_mode is not None:
            device["allocationMode"] = self.allocation_mode
        if self.count is not None:
            device["count"] = self.count
        if self.admin_access is not None:
            device["adminAccess"] = self.admin_access
        if self.tolerations:
            device["tolerations"] = [dict(t) for t in self.tolerations]
        if self.capacity is not None:
            device["capacity"] = {"requests": dict(self.capacity)}
        return device


def request(
    name: str = DEFAULT_REQUEST,
    *,
    device_class: str | None = None,
    selectors: Iterable[str] = (),
    allocation_mode: str | None = None,
    count: int | None = None,
    admin_access: bool | None = None,
    tolerations: Iterable[Mapping[str, Any]] = (),
    capacity: Mapping[str, str] | None = None,
    first_available: Iterable[Request] = (),
) -> Request:
    """One request (or subrequest) of a claim: ``name``; ``device_class`` (None: the subtest's
    default class); ``selectors``, CEL expressions a device must match; ``allocation_mode``
    ("ExactCount" or "All") and ``count``, each sent only when given; ``admin_access``;
    ``tolerations`` of device taints; ``capacity``, the amounts to consume of a shared device
    (``{"memory": "2Gi"}``); ``first_available``, subrequests (themselves made by this
    function) of which the scheduler takes the first that fits."""
    return Request(
        name=name,
        device_class=device_class,
        selectors=tuple(selectors),
        allocation_mode=allocation_mode,
        count=count,
        admin_access=admin_access,
        tolerations=tuple(tolerations),
        capacity=capacity,
        first_available=tuple(first_available),
    )
