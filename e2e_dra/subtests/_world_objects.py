"""random-worlds' worlds as API objects: the pool's ResourceSlices, the DeviceTaintRules, the
claims; what a phase's cluster offers them (:class:`Grounds`); the world as the API server
stored it (:func:`as_stored`); the updates that make a world's changes (:func:`republished`,
:func:`edited_rule`); and the sweep of what a world left.

A world's objects are this subtest's: the builder labels each one, cluster-scoped ones too, and
:func:`sweep` deletes by those labels whatever a world did not (a phase cut short).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from e2e_dra.builder import (
    DEFAULT_REQUEST,
    Builder,
    KubeError,
    Request,
    cluster_slice,
    request,
    retrying,
)
from e2e_dra.subtests._admin_access import ADMIN_LABEL
from e2e_dra.subtests._world_capacity import CAPACITY, quantity
from e2e_dra.subtests._worlds import RULE_CHANGES, Claim, Rule, World
from e2e_dra.waits import eventually

RULE_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
"""Where DeviceTaintRules may be served, newest first: v1 from 1.37; 1.36 has only the beta and
alpha versions the suites' runtime config turns on. Their fields are the same at each."""
COUNTER_SET = "shared"
COUNTER = "units"
TAINT_VALUE = "x"
SERVICE_ACCOUNT_TIMEOUT = 60.0
NAMESPACE_GONE_TIMEOUT = 120.0


@dataclass
class Grounds:
    """What one phase's cluster offers its worlds: the version it serves DeviceTaintRules at
    (None: none), and the namespace labelled for admin access, made for the phase's first
    world that has an admin request (``short``: the phase's initials, in its name)."""

    b: Builder
    short: str
    rule_version: str | None
    admin_namespace: str | None = None
    _said: bool = False

    @classmethod
    def of(cls, b: Builder, short: str) -> Grounds:
        served = retrying(b.kube.served)
        version = next((v for v in RULE_VERSIONS if served(v, "devicetaintrules")), None)
        return cls(b, short, version)

    def fitted(self, world: World) -> World:
        """``world`` without what this cluster does not have (said once): its rules and their
        changes, where no version of DeviceTaintRules is served."""
        if not world.rules or self.rule_version is not None:
            return world
        if not self._said:
            self._said = True
            self.b.log("the API server serves no DeviceTaintRules: the worlds go without them")
        changes = tuple(c for c in world.changes if c.kind not in RULE_CHANGES)
        return replace(world, rules=(), changes=changes)

    def namespace_for(self, world: World) -> str:
        """Where ``world``'s claims and pods go: the admin namespace when one of its requests
        asks for admin access (made now if it is not there yet), else the subtest's own."""
        if not any(claim.admin for claim in world.claims):
            return self.b.namespace
        if self.admin_namespace is None:
            name = f"{self.b.namespace}{self.b.name_suffix}-admin-{self.short}"
            labels = {ADMIN_LABEL: "true"}
            self.b.create(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels},
                }
            )
            self.admin_namespace = name
            # Pods are admitted only once the namespace's default service account exists.
            eventually(
                lambda: self.b.in_namespace(name).get("serviceaccounts", "default"),
                what=f"service account {name}/default",
                timeout=SERVICE_ACCOUNT_TIMEOUT,
                poll=0.5,
            )
        return self.admin_namespace

    def close(self) -> None:
        """Delete the admin namespace, if one was made (its worlds removed their objects)."""
        if self.admin_namespace is not None:
            self.b.delete("namespaces", self.admin_namespace, missing_ok=True)


def pool_name(b: Builder, world: World) -> str:
    """The world's pool, and the name of its slice of devices."""
    return f"{b.driver_name[:40]}-{world.name}"


def slice_objects(b: Builder, world: World) -> list[dict]:
    """The world's pool: a slice of devices, and with a shared counter, a slice of the counter
    set (the API allows a slice one or the other). The devices' taints are dated a minute
    back: they predate every allocation."""
    pool = pool_name(b, world)
    devices = cluster_slice(b.driver_name, pool, _devices(world, _stamp(minutes=1)))
    if world.counters is None:
        return [devices]
    counters = cluster_slice(b.driver_name, f"{pool}-counters", [], pool=pool)
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = [
        {"name": COUNTER_SET, "counters": {COUNTER: {"value": str(world.counters)}}}
    ]
    for slice_ in (devices, counters):
        slice_["spec"]["pool"]["resourceSliceCount"] = 2
    return [devices, counters]


def _stamp(minutes: int = 0) -> str:
    """An API timestamp (whole seconds) ``minutes`` ago."""
    return (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _devices(world: World, added: str) -> list[dict]:
    """The devices, their taints added at ``added``; each has its name as an attribute too, for
    a selector that picks it (CEL sees no device name)."""
    devices = []
    for d in world.devices:
        device: dict[str, Any] = {
            "name": d.name,
            "attributes": {
                "world": {"string": world.name},
                "name": {"string": d.name},
                "model": {"string": d.model},
                "numa": {"int": d.numa},
            },
        }
        if d.capacity is not None:
            device["allowMultipleAllocations"] = True
            device["capacity"] = {CAPACITY: d.capacity.as_api()}
        if d.taint is not None:
            device["taints"] = [
                {"key": d.taint, "value": TAINT_VALUE, "effect": "NoSchedule", "timeAdded": added}
            ]
        if world.counters is not None:
            consumed = {COUNTER: {"value": str(d.units)}}
            device["consumesCounters"] = [{"counterSet": COUNTER_SET, "counters": consumed}]
        devices.append(device)
    return devices


def republished(stored: Sequence[dict], world: World) -> list[dict]:
    """The updates of the pool's ``stored`` slices (as the API server answered) that make
    ``world.after()``: every slice at the next generation (the API's rule for a pool that
    changes), the devices of the world after, each taint it had before kept as it was (its
    ``timeAdded`` too), a new one added now."""
    later = world.after()
    now = _stamp()
    updates = []
    for slice_ in stored:
        update = copy.deepcopy(slice_)
        update["spec"]["pool"]["generation"] = int(slice_["spec"]["pool"]["generation"]) + 1
        if not slice_["spec"].get("sharedCounters"):  # the slice of devices
            before = {d["name"]: d for d in slice_["spec"].get("devices") or []}
            devices = _devices(later, now)
            for device in devices:
                kept = before.get(device["name"], {}).get("taints")
                if device.get("taints") and kept and kept[0]["key"] == device["taints"][0]["key"]:
                    device["taints"] = kept
            update["spec"]["devices"] = devices
        updates.append(update)
    return updates


def edited_rule(b: Builder, stored: dict, world: World, rule: Rule) -> dict:
    """The update of DeviceTaintRule ``stored`` (as the API server read it) into ``rule``: its
    selector and taint key as ``rule`` says; the rest, ``timeAdded`` too, as it was (an edit
    that keeps the effect keeps the time, as the server would)."""
    update = copy.deepcopy(stored)
    pool = pool_name(b, world)
    made = b.device_taint_rule(
        stored["metadata"]["name"],
        pool=pool if rule.pool or rule.device else None,
        device=rule.device,
        taint={"key": rule.key, "value": TAINT_VALUE, "effect": "NoSchedule"},
    )
    update["spec"]["deviceSelector"] = made["spec"]["deviceSelector"]
    update["spec"]["taint"].update(made["spec"]["taint"])
    return update


def rule_objects(b: Builder, world: World, version: str | None) -> list[dict]:
    """The world's DeviceTaintRules at ``version``. No ``timeAdded``: the API server sets it
    when it creates the rule, which is when the rule starts to count."""
    if not world.rules or version is None:
        return []
    pool = pool_name(b, world)
    return [
        b.device_taint_rule(
            f"{pool}-r{i}",
            pool=pool if rule.pool or rule.device else None,
            device=rule.device,
            taint={"key": rule.key, "value": TAINT_VALUE, "effect": "NoSchedule"},
            api_version=version,
        )
        for i, rule in enumerate(world.rules)
    ]


def claim_object(b: Builder, world: World, claim: Claim, namespace: str) -> dict:
    """The claim in ``namespace``: one request (``my-request``) with subrequests ``o0``, ``o1``
    for a ``firstAvailable`` one."""
    attr = f'device.attributes["{b.driver_name}"]'
    tolerations = []
    if claim.toleration is not None:
        key, operator = claim.toleration
        toleration = {"key": key, "operator": operator, "effect": "NoSchedule"}
        if operator == "Equal":
            toleration["value"] = TAINT_VALUE
        tolerations.append(toleration)

    def asking(name: str, model: str | None, count: int, admin: bool | None = None) -> Request:
        selectors = [f'{attr}.world == "{world.name}"']
        if model is not None:
            selectors.append(f'{attr}.model == "{model}"')
        if claim.device is not None:
            selectors.append(f'{attr}.name == "{claim.device}"')
        mode = {"allocation_mode": "All"} if claim.all else {"count": count}
        capacity = None if claim.amount is None else {CAPACITY: quantity(claim.amount)}
        return request(
            name,
            selectors=selectors,
            tolerations=tolerations,
            admin_access=admin,
            capacity=capacity,
            **mode,
        )

    if claim.options:
        options = [asking(f"o{i}", m, c) for i, (m, c) in enumerate(claim.options)]
        wanted = request(first_available=options)
    else:
        wanted = asking(DEFAULT_REQUEST, claim.model, claim.count, claim.admin or None)
    made = b.external_claim(requests=[wanted])
    made["metadata"]["namespace"] = namespace
    made["spec"]["devices"].pop("config", None)
    if claim.same_numa:
        constraint: dict[str, Any] = {"matchAttribute": f"{b.driver_name}/numa"}
        if claim.options:  # named: the request's devices are those of its subrequest
            constraint["requests"] = [DEFAULT_REQUEST]
        made["spec"]["devices"]["constraints"] = [constraint]
    return made


def as_stored(world: World, slices: Sequence[dict], claims: Mapping[str, dict]) -> World:
    """``world`` as the API server stored its ``slices`` and ``claims`` (by claim name): what
    it dropped, as it drops a feature's fields while the feature's gate is off (shared
    counters, taints, tolerations, admin access, multiple allocations and capacity requests),
    is not in the world the scheduler sees."""
    stored = {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}
    counters = world.counters
    if counters is not None and not (
        any(s["spec"].get("sharedCounters") for s in slices)
        and all(stored[d.name].get("consumesCounters") for d in world.devices)
    ):
        counters = None
    devices = tuple(
        replace(d, taint=None) if d.taint and not stored[d.name].get("taints") else d
        for d in world.devices
    )
    devices = tuple(
        replace(d, capacity=None)
        if d.capacity and not stored[d.name].get("allowMultipleAllocations")
        else d
        for d in devices
    )
    kept = []
    for claim in world.claims:
        (spec,) = claims[claim.name]["spec"]["devices"]["requests"]
        asked = spec.get("exactly") or (spec.get("firstAvailable") or [{}])[0]
        if claim.toleration and not asked.get("tolerations"):
            claim = replace(claim, toleration=None)
        if claim.admin and not asked.get("adminAccess"):
            claim = replace(claim, admin=False)
        if claim.amount is not None and not asked.get("capacity"):
            claim = replace(claim, amount=None)
        kept.append(claim)
    return replace(world, devices=devices, claims=tuple(kept), counters=counters)


def sweep(b: Builder) -> None:
    """Delete what the subtest's worlds left (a phase cut short): its DeviceTaintRules, its
    ResourceSlices and its admin namespaces, by the subtest's labels; wait for the namespaces
    to go."""
    served = retrying(b.kube.served)
    for version in RULE_VERSIONS:
        if served(version, "devicetaintrules"):
            for rule in retrying(b.list)("devicetaintrules", version=version, mine=True):
                b.delete(
                    "devicetaintrules", rule["metadata"]["name"], version=version, missing_ok=True
                )
            break
    for slice_ in retrying(b.list)("resourceslices", mine=True):
        b.delete("resourceslices", slice_["metadata"]["name"], missing_ok=True)
    namespaces = retrying(b.list)("namespaces", mine=True)
    for namespace in namespaces:
        if not namespace["metadata"].get("deletionTimestamp"):
            try:
                b.delete("namespaces", namespace["metadata"]["name"], missing_ok=True)
            except KubeError as exc:  # being deleted already
                if exc.status != 409:
                    raise
    for namespace in namespaces:
        b.wait_gone("namespaces", namespace["metadata"]["name"], timeout=NAMESPACE_GONE_TIMEOUT)
