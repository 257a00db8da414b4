"""random-worlds' worlds, without a cluster: what a world is, how one is drawn from a seed, what
a claim of it may be given, how it changes between its two rounds, and each world one step
simpler (for shrinking a failing one).

What may be given follows the API's rules, not one scheduler's: a request gets devices its
selectors match (here: a ``model``, a device's name) and whose every taint it tolerates,
whether the device's slice has the taint or a DeviceTaintRule puts it there (KEP-5055); an
ordinary request gets only devices no other claim holds, an admin-access one (KEP-5018)
devices whoever holds them, and it holds none for the others; ``allocationMode: All``
(KEP-4381) gets every device of the pool its selector matches; devices that consume a shared
counter (KEP-4815) fit only while the devices held consume no more of it than the pool has.
:meth:`World.fits` says what would fit, for the judge's "no pod refused while a fit is free":
where the API leaves room (a request for all devices when one it matches is tainted and not
tolerated; an admin request for devices whose counters are taken; a request for two devices
that might get two shares of one), it says "no fit" or the fit every reading allows, so that
what it calls a fit is one in every reading.

A device may allow multiple allocations (KEP-5075): each request it is given to holds a share,
which consumes of its capacity what the request asks for, as its request policy rounds it
(:mod:`~e2e_dra.subtests._world_capacity`); the shares held never consume more than the capacity
has. A request that asks for an amount gets only devices with that capacity.

A world may change between its two rounds (:class:`Change`): a rule deleted or edited, the
pool republished with a device's taint or model changed, or a device added or removed.
:meth:`World.after` is the world the second round is judged by; a scheduler that kept the old
one in a cache allocates what it no longer may, or refuses what it now may.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from e2e_dra.subtests._world_capacity import Capacity

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
    capacity: Capacity | None = None  # set: it allows multiple allocations, shares of this


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
    device: str | None = None  # a selector on the device's name, if any
    amount: int | None = None  # the capacity it asks for (GiB): a share of a shared device

    def choices(self) -> list[tuple[str | None, int]]:
        """What the claim may be given, in the order it prefers: its subrequests, or itself."""
        return list(self.options) or [(self.model, self.count)]


UNTAINT, TAINT, REMODEL, ADD, REMOVE = "untaint", "taint", "model", "add", "remove"
UNRULE, REKEY, RETARGET = "unrule", "rekey", "retarget"
SLICE_CHANGES = (UNTAINT, TAINT, REMODEL, ADD, REMOVE)
RULE_CHANGES = (UNRULE, REKEY, RETARGET)


@dataclass(frozen=True)
class Change:
    """One change the world's live objects undergo between its two rounds, as a driver or an
    administrator makes it: the pool republished with device ``device`` untainted, tainted
    ``to``, of model ``to``, added (of model ``to``) or removed; or DeviceTaintRule number
    ``rule`` deleted, given key ``to``, or moved to device ``device``."""

    kind: str  # one of SLICE_CHANGES or RULE_CHANGES
    device: str | None = None
    rule: int | None = None
    to: str | None = None

    def on_devices(self, devices: Sequence[Device]) -> list[Device]:
        """``devices`` as the republished pool has them (a rule's change leaves them be)."""
        if self.kind == ADD:
            return [*devices, Device(str(self.device), str(self.to), 0, None)]
        changed = []
        for device in devices:
            if device.name != self.device or self.kind in RULE_CHANGES:
                changed.append(device)
            elif self.kind == UNTAINT:
                changed.append(replace(device, taint=None))
            elif self.kind == TAINT:
                changed.append(replace(device, taint=self.to))
            elif self.kind == REMODEL:
                changed.append(replace(device, model=str(self.to)))
        return changed  # REMOVE: without it

    def on_rule(self, rule: Rule) -> Rule | None:
        """The rule it acts on, after it (None: deleted)."""
        if self.kind == UNRULE:
            return None
        if self.kind == REKEY:
            return replace(rule, key=str(self.to))
        return replace(rule, device=self.device)  # RETARGET


@dataclass(frozen=True)
class World:
    name: str
    devices: tuple[Device, ...]
    claims: tuple[Claim, ...]
    rules: tuple[Rule, ...] = ()
    counters: int | None = None  # the pool's shared counter; None: the pool has none
    changes: tuple[Change, ...] = ()  # made between its two rounds; none: one round
    staggered: bool = False
    """Its pods are made one at a time, in claim order, each once the one before was bound or
    refused: the later claims are allocated while the earlier ones hold their devices (a request
    for all devices of a model then meets a matching device in use, which must refuse it). Made
    all at once, the scheduler's queue picks the order."""

    def taints(self, device: Device) -> set[str]:
        """The keys of the device's taints: its slice's and those of the rules that pick it."""
        keys = {rule.key for rule in self.rules if rule.selects(device)}
        return keys | ({device.taint} if device.taint else set())

    def accepts(self, claim: Claim, device: Device, model: str | None) -> bool:
        """Whether a request of ``claim`` for ``model`` may get ``device``: its selectors, the
        capacity it asks for (which a device without it does not have), its taints."""
        if model is not None and device.model != model:
            return False
        if claim.device is not None and device.name != claim.device:
            return False
        if claim.amount is not None and device.capacity is None:
            return False
        tolerated = claim.toleration[0] if claim.toleration else None
        return all(key == tolerated for key in self.taints(device))

    def share(self, claim: Claim, device: Device) -> int | None:
        """What a share of shared ``device`` for ``claim`` consumes of its capacity; None when
        its request may get none (its amount is refused by the request policy or too big)."""
        return None if device.capacity is None else device.capacity.consumed(claim.amount)

    def has_room(self, claim: Claim, device: Device, used: Mapping[str, int]) -> bool:
        """Whether ``claim`` may get ``device`` while shares consuming ``used`` (by device
        name) of the shared devices are held: always for a device that is not shared."""
        if device.capacity is None:
            return True
        share = self.share(claim, device)
        return share is not None and share <= device.capacity.value - used.get(device.name, 0)

    def units(self, devices: Iterable[Device]) -> int:
        """What ``devices`` consume of the shared counter (0 without one)."""
        return 0 if self.counters is None else sum(d.units for d in devices)

    def matching(self, model: str | None) -> list[Device]:
        """The devices a selector for ``model`` matches: what a request for all of them wants."""
        return [d for d in self.devices if model is None or d.model == model]

    def fits(
        self,
        claim: Claim,
        held: Sequence[Device],
        choice: int | None = None,
        used: Mapping[str, int] | None = None,
    ) -> list[Device] | None:
        """Devices that satisfy ``claim`` (its first choice that fits, or choice ``choice``)
        while the other claims hold ``held`` (what they hold without admin access) and shares
        consuming ``used`` of the shared devices, if any do.

        An admin request may get held devices too; the counters it needs are counted as
        taken all the same, which is what the allocator does while it allocates (the API
        leaves it open), so a fit here is a fit either way. So is the room left in a shared
        device: each share is checked against what the others hold, admin or not.
        """
        used = used or {}
        free = [d for d in self.devices if claim.admin or d.capacity is not None or d not in held]
        room = None if self.counters is None else self.counters - self.units(held)
        for index, (model, count) in enumerate(claim.choices()):
            if choice is not None and index != choice:
                continue
            usable = [
                d for d in free if self.accepts(claim, d, model) and self.has_room(claim, d, used)
            ]
            if claim.all:
                wanted = self.matching(model)
                if (
                    wanted
                    and all(d in usable for d in wanted)
                    and (room is None or self.units(wanted) <= room)
                ):
                    return wanted
                continue
            for devices in itertools.combinations(usable, count):
                if claim.same_numa and len({d.numa for d in devices}) > 1:
                    continue
                if room is None or self.units(devices) <= room:
                    return list(devices)
        return None

    def after(self) -> World:
        """The world its :attr:`changes` make: what its second round is judged by."""
        devices: list[Device] = list(self.devices)
        for change in self.changes:
            devices = change.on_devices(devices)
        rules = tuple(rule for rule in self.rules_after() if rule is not None)
        return replace(self, devices=tuple(devices), rules=rules, changes=())

    def rules_after(self) -> tuple[Rule | None, ...]:
        """Each of its rules after its :attr:`changes`, by index (None: deleted)."""
        rules: list[Rule | None] = list(self.rules)
        for change in self.changes:
            at = change.rule if change.kind in RULE_CHANGES else None
            if at is not None and at < len(rules) and (rule := rules[at]) is not None:
                rules[at] = change.on_rule(rule)
        return tuple(rules)


def holdings(
    world: World, results: Mapping[str, Sequence[Mapping[str, Any]]]
) -> tuple[dict[str, list[Device]], dict[str, int]]:
    """From each claim's allocation results (by claim name): the world's devices it holds (a
    shared device once per share), and which of its choices it was given (0 unless a
    ``firstAvailable`` request got devices of one subrequest ``o<i>``: of more than one is the
    oracle's to say)."""
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
    unless it asks for admin access (or the device is shared: see :func:`used_by_others`)."""
    admins = {c.name for c in world.claims if c.admin}
    return [d for name, held in taken.items() if name not in (claim.name, *admins) for d in held]


def used_by_others(
    world: World, taken: Mapping[str, Sequence[Device]], claim: Claim | None = None
) -> dict[str, int]:
    """What the shares the claims other than ``claim`` hold without admin access consume of
    each shared device, by device name (admin access consumes nothing)."""
    used: dict[str, int] = {}
    for other in world.claims:
        if other.admin or (claim is not None and other.name == claim.name):
            continue
        for device in taken.get(other.name, ()):
            if (share := world.share(other, device)) is not None:
                used[device.name] = used.get(device.name, 0) + share
    return used


def wrongs(world: World, results: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """What the allocations ``results`` (each claim's results, by claim name) break: a device
    the world does not have (any more), a device its request does not accept (selectors,
    capacity, taints of its slice and of rules), admin access on a result that its request did
    not ask for or missing where it did, a request for all devices without one it matches and
    tolerates, more of the shared counter held than there is, a share its request may not have
    or shares over a device's capacity, a ``firstAvailable`` request not given its first
    choice that fits what the others left (they only took more since)."""
    taken, chosen = holdings(world, results)
    found = []
    names = {d.name for d in world.devices}
    for claim in world.claims:
        model, _ = claim.choices()[chosen[claim.name]]
        for result in results.get(claim.name) or []:
            if result.get("device") not in names:
                found.append(
                    f"claim {claim.name} was allocated device {result.get('device')}, which "
                    f"the world's pool does not have: it has {sorted(names)}"
                )
        for device in taken[claim.name]:
            if not world.accepts(claim, device, model):
                found.append(
                    f"claim {claim.name} (model {model}, device {claim.device}, capacity asked "
                    f"{claim.amount}, toleration {claim.toleration}) was allocated {device}, with "
                    f"taints {sorted(world.taints(device))}, which its request does not accept"
                )
            elif device.capacity is not None and world.share(claim, device) is None:
                found.append(
                    f"claim {claim.name} asks for {claim.amount} GiB of capacity and was given a "
                    f"share of {device.name}, whose capacity {device.capacity} does not allow it"
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
        used = used_by_others(world, taken, claim)
        if taken[claim.name]:
            for i in range(chosen[claim.name]):
                if (fit := world.fits(claim, others, i, used)) is not None:
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
    for name, amount in sorted(used_by_others(world, taken).items()):
        (device,) = (d for d in world.devices if d.name == name)
        if device.capacity is not None and amount > device.capacity.value:
            found.append(
                f"the shares of {name} held without admin access consume {amount} GiB of its "
                f"capacity, which is {device.capacity.value}"
            )
    return found


def draw(rng: random.Random, name: str) -> World:
    """A world of :data:`DEVICES` devices and :data:`CLAIMS` claims; sometimes with a shared
    counter or else a device that allows multiple allocations (and claims that ask for a share
    of it), one or two DeviceTaintRules, requests for all devices or with admin access; one or
    two changes for its second round, and a claim or two whose fit each change flips."""
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
    shared = None
    if counters is None and rng.random() < 0.35:  # its counters would be a share's question
        shared = rng.randrange(DEVICES)
        devices = tuple(
            replace(d, capacity=_capacity(rng)) if i == shared else d for i, d in enumerate(devices)
        )
    rules: tuple[Rule, ...] = ()
    if rng.random() < 0.4:
        rules = tuple(_rule(rng) for _ in range(rng.choice((1, 2))))
    claims = []
    for i in range(CLAIMS):
        count = rng.choice((1, 1, 2))
        toleration = None
        if rng.random() < 0.6:
            toleration = (rng.choice(TAINT_KEYS), rng.choice(("Exists", "Equal")))
        model = rng.choice(MODELS) if rng.random() < 0.3 else None
        shape = rng.random()
        if shared is not None and rng.random() < 0.4:  # a share: of an amount, or the default
            amount = rng.choice((None, 1, 2, 3, 5, 9))
            target = f"dev-{shared}" if amount is None else None
            claims.append(Claim(f"c{i}", 1, toleration, None, False, device=target, amount=amount))
        elif shape < 0.25:  # the first of two choices that fits
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
    world = World(name, devices, tuple(claims), rules, counters, staggered=rng.random() < 0.5)
    world = replace(world, changes=draw_changes(rng, world))
    return replace(world, claims=(*world.claims, *probes(rng, world)))


def _rule(rng: random.Random) -> Rule:
    key = rng.choice(TAINT_KEYS)
    scope = rng.random()
    if scope < 0.5:
        return Rule(key, device=f"dev-{rng.randrange(DEVICES)}")
    return Rule(key, pool=scope < 0.75)


def _capacity(rng: random.Random) -> Capacity:
    """8 GiB, with no request policy, or valid values, or a range (maybe a step, a max); a
    default of at most half of it, so that its shares without an amount are more than one."""
    value = 8
    shape = rng.random()
    if shape < 0.2:
        return Capacity(value)
    if shape < 0.6:
        values = tuple(sorted(rng.sample((1, 2, 3, 4, 6), rng.choice((2, 3)))))
        return Capacity(value, rng.choice(values), values=values)
    minimum = rng.choice((1, 2))
    step = rng.choice((None, 2, 3))
    grid = list(range(minimum, value + 1, step or 1))  # what a share may consume
    maximum = rng.choice((None, *grid[1:]))
    default = rng.choice([v for v in grid if v <= value // 2 and (maximum or value) >= v])
    return Capacity(value, default, minimum=minimum, maximum=maximum, step=step)


def draw_changes(rng: random.Random, world: World) -> tuple[Change, ...]:
    """One or two changes of ``world`` for its second round: where it has rules, more often of
    them (deleted, given the other key, or moved to another device) than of its pool (a device
    untainted, tainted, of the other model, added or removed)."""
    names = [d.name for d in world.devices]
    changes: list[Change] = []
    for _ in range(rng.choice((1, 1, 2))):
        if world.rules and rng.random() < 0.6:
            index = rng.randrange(len(world.rules))
            rule = world.rules[index]
            kinds = [UNRULE, REKEY] + ([RETARGET] if rule.device is not None else [])
            kind = rng.choice(kinds)
            elsewhere = [n for n in names if n != rule.device]
            changes.append(
                Change(
                    kind,
                    rule=index,
                    to=_other(TAINT_KEYS, rule.key) if kind == REKEY else None,
                    device=rng.choice(elsewhere) if kind == RETARGET else None,
                )
            )
            continue
        tainted = [d for d in world.devices if d.taint]
        kinds = [TAINT, REMODEL, ADD] + [UNTAINT] * bool(tainted) + [REMOVE] * (len(names) > 1)
        kind = rng.choice(kinds)
        if kind == ADD:
            added = f"dev-{len(names) + len(changes)}"
            changes.append(Change(ADD, device=added, to=rng.choice(MODELS)))
            continue
        device = rng.choice(tainted if kind == UNTAINT else list(world.devices))
        to = None
        if kind == TAINT:
            to = _other(TAINT_KEYS, device.taint) if device.taint else rng.choice(TAINT_KEYS)
        elif kind == REMODEL:
            to = _other(MODELS, device.model)
        changes.append(Change(kind, device=device.name, to=to))
    return tuple(changes)


def _other(choices: Sequence[str], one: str | None) -> str:
    return next(c for c in choices if c != one)


def probes(rng: random.Random, world: World) -> tuple[Claim, ...]:
    """Up to two claims, ``p0`` and ``p1``, each for one device whose fit the world's changes
    flip: with a toleration and a model selector such that the device fits it before and not
    after, or after and not before. A scheduler that kept the world from before in a cache
    gives the second round's probe what it may no longer have, or refuses it what it now may."""
    later = world.after()
    flipping = []
    for name in sorted({d.name for d in (*world.devices, *later.devices)}):
        options = [
            Claim("p", 1, toleration, model, False, device=name)
            for toleration in (None, *((key, "Exists") for key in TAINT_KEYS))
            for model in (None, *MODELS)
        ]
        flips = [c for c in options if _takes(world, c) != _takes(later, c)]
        if flips:
            flipping.append(rng.choice(flips))
    chosen = rng.sample(flipping, min(2, len(flipping)))
    return tuple(replace(claim, name=f"p{i}") for i, claim in enumerate(chosen))


def _takes(world: World, claim: Claim) -> bool:
    """Whether the device ``claim`` names is there and accepts it (free or not)."""
    return any(
        d.name == claim.device and world.accepts(claim, d, claim.model) for d in world.devices
    )


def simpler(world: World) -> Iterator[World]:
    """Each world one step simpler than ``world``: a claim, a device (and the changes of it), a
    rule (and its changes) or a change fewer, no counter, a device that allows one allocation
    or has no request policy, or one claim with its toleration, selector on model or device,
    capacity asked, constraint, second device or choice, mode All or admin access taken
    away."""
    for i in range(len(world.claims)):
        if len(world.claims) > 1:
            yield replace(world, claims=world.claims[:i] + world.claims[i + 1 :])
    for i, gone in enumerate(world.devices):
        if len(world.devices) > 1:
            yield replace(
                world,
                devices=world.devices[:i] + world.devices[i + 1 :],
                changes=tuple(c for c in world.changes if c.device != gone.name),
            )
    for i in range(len(world.rules)):
        kept = [c for c in world.changes if c.rule != i]
        yield replace(
            world,
            rules=world.rules[:i] + world.rules[i + 1 :],
            changes=tuple(
                replace(c, rule=c.rule - 1) if c.rule is not None and c.rule > i else c
                for c in kept
            ),
        )
    for i in range(len(world.changes)):
        yield replace(world, changes=world.changes[:i] + world.changes[i + 1 :])
    if world.counters is not None:
        yield replace(world, counters=None)
    for i, device in enumerate(world.devices):
        if device.capacity is None:
            continue
        for plainer in (None, device.capacity.without_policy()):
            if plainer != device.capacity:
                made = replace(device, capacity=plainer)
                yield replace(world, devices=(*world.devices[:i], made, *world.devices[i + 1 :]))
    for i, claim in enumerate(world.claims):
        for simple in (
            replace(claim, toleration=None) if claim.toleration else None,
            replace(claim, model=None) if claim.model else None,
            replace(claim, device=None) if claim.device else None,
            replace(claim, amount=None) if claim.amount is not None else None,
            replace(claim, same_numa=False) if claim.same_numa else None,
            replace(claim, count=1, same_numa=False) if claim.count > 1 else None,
            replace(claim, options=(), count=1) if claim.options else None,
            replace(claim, all=False, count=1) if claim.all else None,
            replace(claim, admin=False) if claim.admin else None,
        ):
            if simple is not None:
                yield replace(world, claims=(*world.claims[:i], simple, *world.claims[i + 1 :]))
