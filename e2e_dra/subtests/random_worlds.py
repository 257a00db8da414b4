"""random-worlds: small DRA worlds drawn at random, allocated by the live scheduler in every
phase, and judged by what the API promises rather than by what one bug did.

A world is one pool of this subtest's driver (published as a cluster-wide ResourceSlice) with a
few devices, each with a ``model`` and a ``numa`` attribute, some tainted ``NoSchedule`` by key
``k1`` or ``k2``; and a few claims, each with one request for one or two devices, maybe a
toleration (by key, ``Exists`` or ``Equal``), maybe a selector on ``model``, maybe a
``matchAttribute`` constraint on ``numa``; or a ``firstAvailable`` request (two devices of one
model, else one of any), maybe with a ``matchAttribute`` constraint that names the request (so
it holds for the devices of whichever subrequest is chosen). Every claim gets a pod; all are
created at once. Then:

- every allocation is held to the API's rules by the allocation oracle (counts, one claim per
  device, taints, constraints), whatever this module checks;
- every allocated device matches its request's selector (which the oracle cannot evaluate) and
  carries no taint its request does not tolerate;
- a ``firstAvailable`` request got its first choice that fits: no earlier one fits the devices
  the other claims left (they only took more since it was allocated);
- no pod stays unschedulable while the devices the others left free fit its claim (each request
  is small enough to find a fit by counting), once the scheduler had time to look again.

The seed is ``E2E_DRA_WORLD_SEED`` (else drawn once per run, said and kept in the facts), so a
world can be drawn again; each phase draws worlds for ``E2E_DRA_WORLD_BUDGET`` seconds (at least
one). Each world is written to the artifacts as YAML (``world-<phase>-<n>.yaml``: its slice and
claims) before it is created, and a failure names that file.

A world that fails is shrunk: claims and devices are taken away, and claims made simpler (no
toleration, no selector, no constraint, one device), one at a time, keeping each change under
which a fresh copy of the world still fails, until none does or :data:`SHRINK_BUDGET` seconds
are spent. The smallest failing world is saved as ``world-<phase>-<n>-shrunk.yaml`` and quoted in
the failure: a reproducer to file, not a world of six devices to read.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from e2e_dra.builder import (
    DEFAULT_REQUEST,
    Builder,
    Request,
    cluster_slice,
    is_unschedulable,
    request,
)
from e2e_dra.settings import settings
from e2e_dra.subtest import Context, Subtest
from e2e_dra.subtest_kit import WAITS_FOR_A_POOL, allocated, every_phase, remove
from e2e_dra.waits import WaitTimeout, eventually

DEVICES = 6
CLAIMS = 3
TAINT_KEYS = ("k1", "k2")
MODELS = ("a", "b")
DECIDED_TIMEOUT = 60.0
"""Seconds every pod of a world gets to be bound or found unschedulable."""
SECOND_LOOK = 30.0
"""Seconds the scheduler gets to look again at a pod refused while a fit was free (it may have
looked before the world's slice reached it)."""
SHRINK_BUDGET = 120.0
"""Seconds a failing world may be shrunk for (each try is a fresh world on the cluster)."""
_RUN_SEED = random.SystemRandom().randrange(10**9)  # one per run when no seed is set


@dataclass(frozen=True)
class Device:
    name: str
    model: str
    numa: int
    taint: str | None  # the key of its NoSchedule taint


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

    def choices(self) -> list[tuple[str | None, int]]:
        """What the claim may be given, in the order it prefers: its subrequests, or itself."""
        return list(self.options) or [(self.model, self.count)]

    def accepts(self, device: Device, model: str | None) -> bool:
        """Whether a request for ``model`` may get ``device`` alone (selector and taint)."""
        if model is not None and device.model != model:
            return False
        return device.taint is None or (
            self.toleration is not None and self.toleration[0] == device.taint
        )

    def fits(self, free: list[Device], choice: int | None = None) -> list[Device] | None:
        """Devices of ``free`` that satisfy the claim (its first choice that fits, or choice
        ``choice``), if there are enough."""
        for index, (model, count) in enumerate(self.choices()):
            if choice is not None and index != choice:
                continue
            usable = [d for d in free if self.accepts(d, model)]
            groups = [[d for d in usable if d.numa == n] for n in (0, 1)]
            if not self.same_numa:
                groups = [usable]
            fit = next((group[:count] for group in groups if len(group) >= count), None)
            if fit is not None:
                return fit
        return None


@dataclass(frozen=True)
class World:
    name: str
    devices: tuple[Device, ...]
    claims: tuple[Claim, ...]


def draw(rng: random.Random, name: str) -> World:
    devices = tuple(
        Device(
            f"dev-{i}",
            rng.choice(MODELS),
            rng.choice((0, 1)),
            rng.choice(TAINT_KEYS) if rng.random() < 0.4 else None,
        )
        for i in range(DEVICES)
    )
    claims = []
    for i in range(CLAIMS):
        count = rng.choice((1, 1, 2))
        toleration = None
        if rng.random() < 0.6:
            toleration = (rng.choice(TAINT_KEYS), rng.choice(("Exists", "Equal")))
        model = rng.choice(MODELS) if rng.random() < 0.3 else None
        if rng.random() < 0.25:  # the first of two choices that fits
            options = ((rng.choice(MODELS), 2), (None, 1))
            same = rng.random() < 0.5  # its two devices on one numa node
            claims.append(Claim(f"c{i}", 0, toleration, None, same, options))
            continue
        claims.append(Claim(f"c{i}", count, toleration, model, count == 2 and rng.random() < 0.5))
    return World(name, devices, tuple(claims))


def _check(ctx: Context) -> None:
    seed = settings().world_seed
    seed = _RUN_SEED if seed is None else seed
    ctx.facts[f"world_seed/{ctx.phase}"] = seed
    ctx.log(f"{ctx.phase}: worlds from seed {seed} (E2E_DRA_WORLD_SEED={seed} draws them again)")
    ends = time.monotonic() + settings().world_budget
    index = 0
    while index == 0 or time.monotonic() < ends:
        short = "".join(word[0] for word in ctx.phase.split("-"))  # after-cluster-upgrade: acu
        world = draw(random.Random(f"{seed}/{ctx.phase}/{index}"), f"{short}-{index}")
        with ctx.step(f"world {index} of seed {seed}"):
            _run(ctx, world, ctx.artifacts / f"world-{ctx.phase}-{index}.yaml")
        index += 1
    ctx.facts[f"worlds/{ctx.phase}"] = index


def _run(ctx: Context, world: World, saved: Path) -> None:
    """The world, and when it fails, the smallest world found that fails as well."""
    try:
        _attempt(ctx.builder, world, saved)
    except AssertionError as failure:
        smallest, tries = _shrink(ctx.builder, world, saved)
        if smallest is None:
            raise
        shrunk = saved.with_name(f"{saved.stem}-shrunk.yaml")
        smallest[1].replace(shrunk)
        world_now = smallest[0]
        raise AssertionError(
            f"{failure}\nshrunk in {tries} tries to {len(world_now.devices)} device(s) and "
            f"{len(world_now.claims)} claim(s), which fail as well: {shrunk}\n"
            f"{shrunk.read_text()}"
        ) from failure


def _shrink(b: Builder, world: World, saved: Path) -> tuple[tuple[World, Path] | None, int]:
    """The smallest variant of ``world`` found to fail too, with its YAML; and the tries."""
    ends = time.monotonic() + SHRINK_BUDGET
    base = world.name
    smallest: tuple[World, Path] | None = None
    tries = 0
    changed = True
    while changed and time.monotonic() < ends:
        changed = False
        for candidate in _simpler(world):
            if time.monotonic() >= ends:
                break
            tries += 1
            renamed = replace(candidate, name=f"{base}s{tries}")  # a fresh slice and claims
            attempt = saved.with_name(f"{saved.stem}-try{tries}.yaml")
            try:
                _attempt(b, renamed, attempt)
            except AssertionError:
                if smallest is not None:  # a smaller one fails: the one before is not kept
                    smallest[1].unlink(missing_ok=True)
                world, smallest, changed = renamed, (renamed, attempt), True
                break
            attempt.unlink(missing_ok=True)
    return smallest, tries


def _simpler(world: World) -> Iterator[World]:
    """Each world one step simpler than ``world``: a claim or a device fewer, or one claim with
    its toleration, selector, constraint or second device or choice taken away."""
    for i in range(len(world.claims)):
        if len(world.claims) > 1:
            yield replace(world, claims=world.claims[:i] + world.claims[i + 1 :])
    for i in range(len(world.devices)):
        if len(world.devices) > 1:
            yield replace(world, devices=world.devices[:i] + world.devices[i + 1 :])
    for i, claim in enumerate(world.claims):
        for simpler in (
            replace(claim, toleration=None) if claim.toleration else None,
            replace(claim, model=None) if claim.model else None,
            replace(claim, same_numa=False) if claim.same_numa else None,
            replace(claim, count=1, same_numa=False) if claim.count > 1 else None,
            replace(claim, options=(), count=1) if claim.options else None,
        ):
            if simpler is not None:
                yield replace(world, claims=(*world.claims[:i], simpler, *world.claims[i + 1 :]))


def _attempt(b: Builder, world: World, saved: Path) -> None:
    """One world on the cluster, saved as YAML first; its objects removed after."""
    driver = b.driver_name
    attr = f'device.attributes["{driver}"]'
    slice_ = cluster_slice(driver, f"{b.driver_name[:40]}-{world.name}", _devices(world))
    claims = {c.name: _claim(b, world, c, attr) for c in world.claims}
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(
        yaml.safe_dump({"world": asdict(world), "slice": slice_, "claims": list(claims.values())})
    )
    b.create(slice_)
    try:
        pods = {name: b.pod_external(claim["metadata"]["name"]) for name, claim in claims.items()}
        b.create(*claims.values(), *pods.values())
        try:
            _judge(b, world, claims, pods, saved)
        finally:
            remove(b, list(pods.values()), list(claims.values()))
    finally:
        b.delete("resourceslices", slice_["metadata"]["name"], missing_ok=True)


def _devices(world: World) -> list[dict]:
    added = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    devices = []
    for d in world.devices:
        device: dict = {
            "name": d.name,
            "attributes": {
                "world": {"string": world.name},
                "model": {"string": d.model},
                "numa": {"int": d.numa},
            },
        }
        if d.taint is not None:
            device["taints"] = [
                {"key": d.taint, "value": "x", "effect": "NoSchedule", "timeAdded": added}
            ]
        devices.append(device)
    return devices


def _claim(b: Builder, world: World, claim: Claim, attr: str) -> dict:
    tolerations = []
    if claim.toleration is not None:
        key, operator = claim.toleration
        toleration = {"key": key, "operator": operator, "effect": "NoSchedule"}
        if operator == "Equal":
            toleration["value"] = "x"
        tolerations.append(toleration)

    def asking(name: str, model: str | None, count: int) -> Request:
        selectors = [f'{attr}.world == "{world.name}"']
        if model is not None:
            selectors.append(f'{attr}.model == "{model}"')
        return request(name, selectors=selectors, count=count, tolerations=tolerations)

    if claim.options:
        options = [asking(f"o{i}", m, c) for i, (m, c) in enumerate(claim.options)]
        wanted = request(first_available=options)
    else:
        wanted = asking(DEFAULT_REQUEST, claim.model, claim.count)
    made = b.external_claim(requests=[wanted])
    made["spec"]["devices"].pop("config", None)
    if claim.same_numa:
        constraint: dict[str, Any] = {"matchAttribute": f"{b.driver_name}/numa"}
        if claim.options:  # named: the request's devices are those of its subrequest
            constraint["requests"] = [DEFAULT_REQUEST]
        made["spec"]["devices"]["constraints"] = [constraint]
    return made


def _judge(
    b: Builder, world: World, claims: dict[str, dict], pods: dict[str, dict], saved: Path
) -> None:
    """Every pod bound or refused; each allocation within its request's selector; no refusal
    while a fit is free (after a second look)."""
    eventually(
        lambda: [name for name, pod in pods.items() if not _decided(b, pod)],
        what=f"every pod of world {world.name} to be bound or found unschedulable ({saved})",
        timeout=DECIDED_TIMEOUT,
        until=lambda undecided: not undecided,
    )
    by_name = {d.name: d for d in world.devices}

    def held(claim: Claim) -> tuple[list[dict], list[Device]]:
        """The claim's allocation results now, and the world's devices among them."""
        results = allocated(b, claims[claim.name]["metadata"]["name"])
        return results, [by_name[r["device"]] for r in results if r["device"] in by_name]

    taken: dict[str, list[Device]] = {}
    chosen: dict[str, int] = {}
    for claim in world.claims:
        results, taken[claim.name] = held(claim)
        subs = {r["request"].partition("/")[2] for r in results}
        if claim.options and len(subs) == 1:  # the oracle says it when they are more
            chosen[claim.name] = int(subs.pop().removeprefix("o"))
        else:
            chosen[claim.name] = 0
        model, _ = claim.choices()[chosen[claim.name]]
        for device in taken[claim.name]:  # the oracle judges counts and constraints too
            assert claim.accepts(device, model), (
                f"world {world.name} ({saved}): claim {claim.name} (model {model}, toleration "
                f"{claim.toleration}) was allocated {device}, which its request does not accept"
            )
    for claim in world.claims:
        others = [d for name, held in taken.items() if name != claim.name for d in held]
        free = [d for d in world.devices if d not in others]
        if taken[claim.name]:  # firstAvailable: no earlier choice fit when it was allocated
            earlier = [i for i in range(chosen[claim.name]) if claim.fits(free, i) is not None]
            assert not earlier, (
                f"world {world.name} ({saved}): claim {claim.name} was given its choice "
                f"{claim.choices()[chosen[claim.name]]}, though its earlier choice "
                f"{claim.choices()[earlier[0]]} fits devices {claim.fits(free, earlier[0])}"
            )
            continue
        free = [d for d in free if d not in taken[claim.name]]
        fit = claim.fits(free)
        if fit is None:
            continue
        pod = str(pods[claim.name]["metadata"]["name"])
        try:
            eventually(
                lambda: b.read_pod(pod).get("spec", {}).get("nodeName"),  # noqa: B023 (waited here)
                what=f"pod {pod} to be scheduled once more",
                timeout=SECOND_LOOK,
            )
        except WaitTimeout:
            raise AssertionError(
                f"world {world.name} ({saved}): pod {pod} is unschedulable, though devices "
                f"{[d.name for d in fit]} are free and fit its claim {claim}"
            ) from None
        _, taken[claim.name] = held(claim)  # it took devices the later claims had free


def _decided(b: Builder, pod: dict) -> bool:
    now = b.read_pod(pod["metadata"]["name"])
    if now.get("spec", {}).get("nodeName"):
        return True
    said = " ".join(
        str(c.get("message", "")) for c in now.get("status", {}).get("conditions") or []
    )
    return is_unschedulable(now) and WAITS_FOR_A_POOL not in said


SUBTEST = Subtest(
    name="random-worlds",
    keps=(4381, 5055),
    initial=every_phase(_check),
    releases=">=1.36",
)
