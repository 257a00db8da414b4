"""random-worlds' worlds, without a cluster: what a world is, how one is drawn from a seed, what
a claim of it may be given, and each world one step simpler (for shrinking a failing one).

What may be given follows the API's rules, not one scheduler's: a request gets devices its
selector matches (here: a ``model``) and whose every taint it tolerates, whether the device's
slice has the taint or a DeviceTaintRule puts it there (KEP-5055); an ordinary request gets
only devices no other claim holds, an admin-access one (KEP-5018) devices whoever holds them,
and it holds none for the others; ``allocationMode: All`` (KEP-4381) gets every device of the
pool its selector matches; devices that consume a shared counter (KEP-4815) fit only while the
devices held consume no more of it than the pool has. :meth:`World.fits` says what would fit,
for the judge's "no pod refused while a fit is free": where the API leaves room (a request for
all devices when one it matches is tainted and not tolerated; an admin request for devices
whose counters are taken), it says "no fit", so that what it calls a fit is one in every
reading.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

DEVICES = 6
CLAIMS = 3
TAINT_KEYS = ("k1", "k2")
MODELS = ("a", "b")


@dataclass(frozen=True)
class Device:
    name: str
    model: str
    numa: int
    taint: str | None  # the key of its NoSchedule taint
    units: int = 1  # what it consumes of the pool's shared counter, when the pool has one


@dataclass(frozen=True)
class Rule:
    """A DeviceTaintRule: a NoSchedule taint ``key`` on the devices its selector picks. It
    names this subtest's driver and, if ``pool``, the world's pool, and, if ``device``, that
    device of it. The three pick the same devices of a world (its one pool), but the scheduler
    must read each."""

    key: str
    pool: bool = True
    device: str | None = None

    def selects(self, device: Device) -> bool:
        return self.device is None or self.device == device.name


@dataclass(frozen=True)
class Claim:
    name: str
    count: int
    toleration: tuple[str, str] | None  # key, operator
    model: str | None  # its selector, if any
    same_numa: bool
    # Instead of count and model: subrequests (model, count) of which the first that fits
    # is to be taken (firstAvailable).
    options: tuple[tuple[str | None, int], ...] = ()
    all: bool = False  # allocationMode All: every device of the pool that ``model`` matches
    admin: bool = False  # adminAccess: devices whoever holds them, holding none

    def choices(self) -> list[tuple[str | None, int]]:
        """What the claim may be given, in the order it prefers: its subrequests, or itself."""
        return list(self.options) or [(self.model, self.count)]


@dataclass(frozen=True)
class World:
    name: str
    devices: tuple[Device, ...]
    claims: tuple[Claim, ...]
    rules: tuple[Rule, ...] = ()
    counters: int | None = None  # the pool's shared counter; None: the pool has none

    def taints(self, device: Device) -> set[str]:
        """The keys of the device's taints: its slice's and those of the rules that pick it."""
        keys = {rule.key for rule in self.rules if rule.selects(device)}
        return keys | ({device.taint} if device.taint else set())

    def accepts(self, claim: Claim, device: Device, model: str | None) -> bool:
        """Whether a request of ``claim`` for ``model`` may get ``device`` (selector, taints)."""
        if model is not None and device.model != model:
            return False
        tolerated = claim.toleration[0] if claim.toleration else None
        return all(key == tolerated for key in self.taints(device))

    def units(self, devices: Iterable[Device]) -> int:
        """What ``devices`` consume of the shared counter (0 without one)."""
        return 0 if self.counters is None else sum(d.units for d in devices)

    def matching(self, model: str | None) -> list[Device]:
        """The devices a selector for ``model`` matches: what a request for all of them wants."""
        return [d for d in self.devices if model is None or d.model == model]

    def fits(
        self, claim: Claim, held: Sequence[Device], choice: int | None = None
    ) -> list[Device] | None:
        """Devices that satisfy ``claim`` (its first choice that fits, or choice ``choice``)
        while the other claims hold ``held`` (what they hold without admin access), if any do.

        An admin request may get held devices too; the counters it needs are counted as
        taken all the same, which is what the allocator does while it allocates (the API
        leaves it open), so a fit here is a fit either way.
        """
        free = [d for d in self.devices if claim.admin or d not in held]
        room = None if self.counters is None else self.counters - self.units(held)
        for index, (model, count) in enumerate(claim.choices()):
            if choice is not None and index != choice:
                continue
            if claim.all:
                wanted = self.matching(model)
                if (
                    wanted
                    and all(d in free and self.accepts(claim, d, model) for d in wanted)
                    and (room is None or self.units(wanted) <= room)
                ):
                    return wanted
                continue
            usable = [d for d in free if self.accepts(claim, d, model)]
            for devices in itertools.combinations(usable, count):
                if claim.same_numa and len({d.numa for d in devices}) > 1:
                    continue
                if room is None or self.units(devices) <= room:
                    return list(devices)
        return None


def holdings(
    world: World, results: Mapping[str, Sequence[Mapping[str, Any]]]
) -> tuple[dict[str, list[Device]], dict[str, int]]:
    """From each claim's allocation results (by claim name): the world's devices it holds, and
    which of its choices it was given (0 unless a ``firstAvailable`` request got devices of
    one subrequest ``o<i>``: of more than one is the oracle's to say)."""
    by_name = {d.name: d for d in world.devices}
    taken: dict[str, list[Device]] = {}
    chosen: dict[str, int] = {}
    for claim in world.claims:
        given = results.get(claim.name) or []
        taken[claim.name] = [by_name[r["device"]] for r in given if r.get("device") in by_name]
        subs = {str(r.get("request", "")).partition("/")[2] for r in given}
        one = subs.pop() if claim.options and len(subs) == 1 else ""
        chosen[claim.name] = int(one.removeprefix("o")) if one.startswith("o") else 0
    return taken, chosen


def held_by_others(
    world: World, taken: Mapping[str, Sequence[Device]], claim: Claim
) -> list[Device]:
    """What the claims other than ``claim`` hold without admin access: what it may not get,
    unless it asks for admin access."""
    admins = {c.name for c in world.claims if c.admin}
    return [d for name, held in taken.items() if name not in (claim.name, *admins) for d in held]


def wrongs(world: World, results: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """What the allocations ``results`` (each claim's results, by claim name) break: a device
    its request does not accept (selector, taints of its slice and of rules), admin access on
    a result that its request did not ask for or missing where it did, a request for all
    devices without one it matches and tolerates, more of the shared counter held than there
    is, a ``firstAvailable`` request not given its first choice that fits what the others
    left (they only took more since)."""
    taken, chosen = holdings(world, results)
    found = []
    for claim in world.claims:
        model, _ = claim.choices()[chosen[claim.name]]
        for device in taken[claim.name]:
            if not world.accepts(claim, device, model):
                found.append(
                    f"claim {claim.name} (model {model}, toleration {claim.toleration}) was "
                    f"allocated {device}, with taints {sorted(world.taints(device))}, which its "
                    "request does not accept"
                )
        for result in results.get(claim.name) or []:
            if bool(result.get("adminAccess")) != claim.admin:
                found.append(
                    f"claim {claim.name} (admin access: {claim.admin}) got result {dict(result)}, "
                    "whose adminAccess says otherwise"
                )
        if claim.all and taken[claim.name]:
            left = [
                d.name
                for d in world.matching(model)
                if world.accepts(claim, d, model) and d not in taken[claim.name]
            ]
            if left:
                found.append(
                    f"claim {claim.name} asks for all devices of model {model}, and was allocated "
                    f"{[d.name for d in taken[claim.name]]} without {left}, which it tolerates"
                )
        others = held_by_others(world, taken, claim)
        if taken[claim.name]:
            for i in range(chosen[claim.name]):
                if (fit := world.fits(claim, others, i)) is not None:
                    found.append(
                        f"claim {claim.name} was given its choice "
                        f"{claim.choices()[chosen[claim.name]]}, though its earlier choice "
                        f"{claim.choices()[i]} fits devices {[d.name for d in fit]}"
                    )
                    break
    if world.counters is not None:
        admins = {c.name for c in world.claims if c.admin}
        held = {d for name, devices in taken.items() if name not in admins for d in devices}
        if world.units(held) > world.counters:
            found.append(
                f"the devices held without admin access, {sorted(d.name for d in held)}, consume "
                f"{world.units(held)} units of the shared counter, which has {world.counters}"
            )
    return found


def draw(rng: random.Random, name: str) -> World:
    """A world of :data:`DEVICES` devices and :data:`CLAIMS` claims; sometimes with a shared
    counter, one or two DeviceTaintRules, requests for all devices or with admin access."""
    counters = rng.choice((3, 4)) if rng.random() < 0.3 else None
    devices = tuple(
        Device(
            f"dev-{i}",
            rng.choice(MODELS),
            rng.choice((0, 1)),
            rng.choice(TAINT_KEYS) if rng.random() < 0.4 else None,
            rng.choice((1, 2)),
        )
        for i in range(DEVICES)
    )
    rules: tuple[Rule, ...] = ()
    if rng.random() < 0.3:
        rules = tuple(_rule(rng) for _ in range(rng.choice((1, 2))))
    claims = []
    for i in range(CLAIMS):
        count = rng.choice((1, 1, 2))
        toleration = None
        if rng.random() < 0.6:
            toleration = (rng.choice(TAINT_KEYS), rng.choice(("Exists", "Equal")))
        model = rng.choice(MODELS) if rng.random() < 0.3 else None
        shape = rng.random()
        if shape < 0.25:  # the first of two choices that fits
            options = ((rng.choice(MODELS), 2), (None, 1))
            same = rng.random() < 0.5  # its two devices on one numa node
            claims.append(Claim(f"c{i}", 0, toleration, None, same, options))
        elif shape < 0.37:  # all devices of a model, or of the pool
            model = rng.choice((*MODELS, None))
            claims.append(Claim(f"c{i}", 1, toleration, model, False, all=True))
        else:
            same = count == 2 and rng.random() < 0.5
            claims.append(Claim(f"c{i}", count, toleration, model, same))
        if not claims[-1].options and rng.random() < 0.15:  # subrequests have no admin access
            claims[-1] = replace(claims[-1], admin=True)
    return World(name, devices, tuple(claims), rules, counters)


def _rule(rng: random.Random) -> Rule:
    key = rng.choice(TAINT_KEYS)
    scope = rng.random()
    if scope < 0.5:
        return Rule(key, device=f"dev-{rng.randrange(DEVICES)}")
    return Rule(key, pool=scope < 0.75)


def simpler(world: World) -> Iterator[World]:
    """Each world one step simpler than ``world``: a claim, a device or a rule fewer, no
    counter, or one claim with its toleration, selector, constraint, second device or choice,
    mode All or admin access taken away."""
    for i in range(len(world.claims)):
        if len(world.claims) > 1:
            yield replace(world, claims=world.claims[:i] + world.claims[i + 1 :])
    for i in range(len(world.devices)):
        if len(world.devices) > 1:
            yield replace(world, devices=world.devices[:i] + world.devices[i + 1 :])
    for i in range(len(world.rules)):
        yield replace(world, rules=world.rules[:i] + world.rules[i + 1 :])
    if world.counters is not None:
        yield replace(world, counters=None)
    for i, claim in enumerate(world.claims):
        for simple in (
            replace(claim, toleration=None) if claim.toleration else None,
            replace(claim, model=None) if claim.model else None,
            replace(claim, same_numa=False) if claim.same_numa else None,
            replace(claim, count=1, same_numa=False) if claim.count > 1 else None,
            replace(claim, options=(), count=1) if claim.options else None,
            replace(claim, all=False, count=1) if claim.all else None,
            replace(claim, admin=False) if claim.admin else None,
        ):
            if simple is not None:
                yield replace(world, claims=(*world.claims[:i], simple, *world.claims[i + 1 :]))
