"""DeviceTaintRules as the allocation oracle reads them (KEP-5055): which devices a rule taints,
and since when.

A DeviceTaintRule adds its one taint to every device its selector picks, "as if the taint was
specified directly in the ResourceSlice by the DRA driver" (the API's words). The selector's
``driver``, ``pool`` and ``device`` are each optional; a device is picked when every one given
names its driver, its pool and its name. The empty selector picks every device; a rule without a
selector picks none. The selector's ``deviceClassName`` and ``selectors`` are tombstoned since
1.35 (no release the suites run has them), so nothing here needs a CEL evaluator.

A rule's taint counts against an allocation only once it predates it, as a slice's taint does:
from its ``timeAdded`` (which the API server sets when the rule is created, if the client did
not). Unlike a slice's taint, which comes with its device, a rule is an object of its own: a
client may set ``timeAdded`` in the past, and a new selector leaves ``timeAdded`` alone. So a
rule counts from the latest of ``timeAdded``, its creation and each write of its spec (its
``managedFields``; the status subresource's writes aside): only from then on did the rule, as it
is now, exist for the scheduler to see.

The API server serves DeviceTaintRules at ``resource.k8s.io/v1`` from 1.37, and at ``v1beta2``
and ``v1alpha3`` where the runtime config turns them on (1.36 has only those): the same fields at
each, so the newest one served is read (:data:`RULE_VERSIONS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

RULE_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
"""Where DeviceTaintRules may be served, newest first."""
SELECTOR_FIELDS = ("driver", "pool", "device")


@dataclass(frozen=True)
class TaintRule:
    """One DeviceTaintRule: its name, identity (``uid``, ``generation``: a rule replaced or
    changed since is another one), selector (None: it has none), taint, and since when it taints
    as it does now (None: no time can be told)."""

    name: str
    uid: str
    generation: int
    selector: Mapping[str, str] | None
    taint: Mapping[str, Any]
    since: float | None

    @classmethod
    def of(cls, rule: Mapping[str, Any]) -> TaintRule:
        metadata = rule.get("metadata") or {}
        spec = rule.get("spec") or {}
        given = spec.get("deviceSelector")
        selector = None
        if isinstance(given, Mapping):
            selector = {k: str(given[k]) for k in SELECTOR_FIELDS if given.get(k) is not None}
        taint = dict(spec.get("taint") or {})
        times = [
            timestamp(taint.get("timeAdded")),
            timestamp(metadata.get("creationTimestamp")),
            *(
                timestamp(entry.get("time"))
                for entry in metadata.get("managedFields") or []
                if entry.get("subresource") != "status"
            ),
        ]
        known = [t for t in times if t is not None]
        return cls(
            name=str(metadata.get("name", "")),
            uid=str(metadata.get("uid", "")),
            generation=int(metadata.get("generation") or 0),
            selector=selector,
            taint=taint,
            since=max(known) if known else None,
        )

    def selects(self, driver: str, pool: str, device: str) -> bool:
        """Whether the rule taints ``device`` of ``driver``'s ``pool``."""
        if self.selector is None:
            return False  # no selector: no device
        named = {"driver": driver, "pool": pool, "device": device}
        return all(named[key] == value for key, value in self.selector.items())

    def same_as(self, other: TaintRule) -> bool:
        """The same object, unchanged: same UID and generation (a spec change bumps it)."""
        return (self.uid, self.generation) == (other.uid, other.generation)


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """The Pod toleration rules, which device tolerations follow (KEP-5055): an empty effect
    matches every effect, ``Exists`` with no key every taint, ``Equal`` (the default) wants the
    key and the value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def timestamp(text: Any) -> float | None:
    """An API timestamp (RFC 3339, whole seconds) as seconds since the epoch; None if none."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
