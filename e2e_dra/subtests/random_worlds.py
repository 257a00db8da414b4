"""random-worlds: small DRA worlds drawn at random, allocated by the live scheduler in every
phase, changed under it, and judged by what the API promises rather than by what one bug did.

A world (``_worlds``) is one pool of this subtest's driver (published as cluster-wide
ResourceSlices) with a few devices, each with a ``model``, a ``numa`` and a ``name`` attribute,
some tainted ``NoSchedule`` by key ``k1`` or ``k2``; sometimes a shared counter the devices
consume one or two units of (KEP-4815: the counter set in a slice of its own, the devices in
another), or else one device that allows multiple allocations (KEP-5075), with 8Gi of
capacity ``memory`` and maybe a ``requestPolicy`` (a ``default``, and ``validValues`` or a
``validRange`` with a ``min`` and maybe a ``max`` and a ``step``); sometimes one or two
DeviceTaintRules that taint, ``NoSchedule`` by ``k1`` or ``k2``, the devices of this driver, of
the world's pool, or one device of it (KEP-5055); and a few claims, each with one request for
one or two devices, maybe a toleration (by key, ``Exists`` or ``Equal``), maybe a selector on
``model``, maybe a ``matchAttribute`` constraint on ``numa``; or a request for all devices of a
model or of the pool (``allocationMode: All``); or a ``firstAvailable`` request (two devices of
one model, else one of any), maybe with a ``matchAttribute`` constraint that names the request
(so it holds for the devices of whichever subrequest is chosen); or a request for a share of the
shared device, of an amount (``capacity.requests``, which only that device has) or of its
default (a selector on its name). A request that is not a ``firstAvailable`` one may ask for
admin access (KEP-5018): the world's claims and pods are then made in a namespace labelled for
it, made for the phase's first such world.

A world has two rounds. In each, every claim gets a pod, all created at once, or, in half the
worlds (``staggered``), one at a time in claim order, each once the one before was bound or
refused, so that later claims meet the devices earlier ones hold (a world with rules a few
seconds after its rules, so that the scheduler has them), judged, then deleted. Between
them the world changes, as clusters change under a running scheduler (``Change``): one or two of
a rule deleted, given the other key or moved to another device (updated, not made anew), or the
pool republished by an update of its slices at the next generation, with a device untainted,
tainted, of the other model, added or removed. The second round, of fresh claims and pods, is
judged by the world after the change, :data:`CHANGE_SETTLE` seconds after it. Among the claims
are up to two probes (``p0``, ``p1``), each with a selector on the name of a device whose fit
the change flips: one that may now get a device it could not (a taint or rule gone), or may no
longer get one it could (a new taint, another model, a device removed). A scheduler that keeps
a stale copy of a slice or a rule fails the second round. Then:

- every allocation is held to the API's rules by the allocation oracle (counts, one claim per
  device, taints of slices and of rules, counters, constraints, the capacity a share consumes),
  whatever this module checks;
- every allocated device is one the world's pool has (now), matches its request's selectors
  (which the oracle cannot evaluate), has the capacity its request asks for, and carries no
  taint, its slice's or a rule's, that its request does not tolerate; a result has admin access
  if and only if its request asked for it;
- a request for all devices got every device of the pool that its selector matches and that it
  tolerates (the allocator refuses such a request outright when a matching device is tainted
  and not tolerated; the API does not say, so only what holds either way is checked);
- the devices held without admin access consume no more of the shared counter than the pool
  has;
- a share is given only to a request whose amount the device's request policy allows (rounded
  up to a valid value, or to ``min`` plus a whole number of steps, not past ``max`` nor the
  capacity); the shares held without admin access consume, as the policy rounds their amounts
  (the ``default`` for none; without a policy, the amount asked or the whole capacity), no more
  than the capacity;
- a ``firstAvailable`` request got its first choice that fits: no earlier one fits the devices
  the other claims left (they only took more since it was allocated);
- no pod stays unschedulable while the devices the others left free fit its claim, once the
  scheduler had time to look again. An admin request may use devices others hold, and what it
  holds is free for the others. A fit is one in every reading of the API: all devices of a model
  fit only if every one is free and tolerated; an admin request fits only where the counters
  its devices consume, and the room its share needs, are free as well.

What a phase's cluster does not have, a world goes without, said in the log: DeviceTaintRules
(and their changes) where the server serves them at no version (``resource.k8s.io/v1``,
``v1beta2``, ``v1alpha3``), and whatever the API server drops from the objects as it stores them
(a feature gate that is off: shared counters, taints, tolerations, admin access, multiple
allocations with their request policy, capacity requests), judged as stored, in each round.

The seed is ``E2E_DRA_WORLD_SEED`` (else drawn once per run, said and kept in the facts), so a
world can be drawn again; each phase draws worlds for ``E2E_DRA_WORLD_BUDGET`` seconds (at least
one). Each world is written to the artifacts as YAML (``world-<phase>-<n>.yaml``: the world with
its changes, its slices, rules and claims, then the updates of its changes and the second
round's claims) before it is created, and a failure names that file and the round.

A world that fails is shrunk: claims, devices, rules and changes are taken away, so is the
counter, the shared device allows one allocation or loses its request policy, and claims are
made simpler (no toleration, no selector, no capacity request, no constraint, one device, no
mode All, no admin access), one at a time, keeping each change under which a fresh copy of the
world still fails, until none does or :data:`SHRINK_BUDGET` seconds are spent. The smallest
failing world is saved as ``world-<phase>-<n>-shrunk.yaml`` and quoted in the failure: a
reproducer to file, not a world of six devices to read.

Everything a world makes is deleted when it ends; a deferred sweep at the tear-down deletes
whatever carries the subtest's labels and is left (rules, slices, the admin namespace).
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import yaml

from e2e_dra.builder import Builder, is_unschedulable
from e2e_dra.settings import settings
from e2e_dra.subtest import Context, Subtest
from e2e_dra.subtest_kit import WAITS_FOR_A_POOL, allocated, every_phase, remove
from e2e_dra.subtests._world_objects import (
    Grounds,
    as_stored,
    claim_object,
    edited_rule,
    pool_name,
    republished,
    rule_objects,
    slice_objects,
    sweep,
)
from e2e_dra.subtests._worlds import (
    World,
    draw,
    held_by_others,
    holdings,
    simpler,
    used_by_others,
    wrongs,
)
from e2e_dra.waits import WaitTimeout, eventually

DECIDED_TIMEOUT = 60.0
"""Seconds every pod of a world gets to be bound or found unschedulable."""
STAGGER_TIMEOUT = 10.0
"""Seconds a staggered world's pod gets to be bound or refused before the next one is made."""
SECOND_LOOK = 30.0
"""Seconds the scheduler gets to look again at a pod refused while a fit was free (it may have
looked before the world's slice reached it)."""
SHRINK_BUDGET = 120.0
"""Seconds a failing world may be shrunk for (each try is a fresh world on the cluster)."""
RULE_SETTLE = 2.0
"""Seconds between a world's DeviceTaintRules and its claims: the scheduler watches rules and
slices apart, and must have the rules before it allocates from the slices (the allocation
oracle, too, counts a rule only from the second after it was made)."""
CHANGE_SETTLE = 3.0
"""Seconds between a world's changes and its second round: the scheduler must have seen the
updated slices and the edited and deleted rules before it allocates again. The allocation oracle
lists slices at most 2 s apart (``SLICES_FRESH``) and counts an edited rule from a second after
its last write, so it too judges the second round by the world after; a rule deleted meanwhile
it sees gone when it confirms a finding."""
_RUN_SEED = random.SystemRandom().randrange(10**9)  # one per run when no seed is set


def _check(ctx: Context) -> None:
    seed = settings().world_seed
    seed = _RUN_SEED if seed is None else seed
    ctx.facts[f"world_seed/{ctx.phase}"] = seed
    ctx.log(f"{ctx.phase}: worlds from seed {seed} (E2E_DRA_WORLD_SEED={seed} draws them again)")
    short = "".join(word[0] for word in ctx.phase.split("-"))  # after-cluster-upgrade: acu
    ctx.builder.defer(sweep)
    grounds = Grounds.of(ctx.builder, short)
    ends = time.monotonic() + settings().world_budget
    index = 0
    try:
        while index == 0 or time.monotonic() < ends:
            world = draw(random.Random(f"{seed}/{ctx.phase}/{index}"), f"{short}-{index}")
            with ctx.step(f"world {index} of seed {seed}"):
                _run(grounds, world, ctx.artifacts / f"world-{ctx.phase}-{index}.yaml")
            index += 1
    finally:
        grounds.close()
    ctx.facts[f"worlds/{ctx.phase}"] = index


def _run(grounds: Grounds, world: World, saved: Path) -> None:
    """The world, and when it fails, the smallest world found that fails as well."""
    world = grounds.fitted(world)  # the shrinker takes away only what the cluster has
    try:
        _attempt(grounds, world, saved)
    except AssertionError as failure:
        smallest, tries = _shrink(grounds, world, saved)
        if smallest is None:
            raise
        shrunk = saved.with_name(f"{saved.stem}-shrunk.yaml")
        smallest[1].replace(shrunk)
        world_now = smallest[0]
        raise AssertionError(
            f"{failure}\nshrunk in {tries} tries to {len(world_now.devices)} device(s), "
            f"{len(world_now.claims)} claim(s), {len(world_now.rules)} rule(s) and "
            f"{len(world_now.changes)} change(s), which fail as well: {shrunk}\n"
            f"{shrunk.read_text()}"
        ) from failure


def _shrink(grounds: Grounds, world: World, saved: Path) -> tuple[tuple[World, Path] | None, int]:
    """The smallest variant of ``world`` found to fail too, with its YAML; and the tries."""
    ends = time.monotonic() + SHRINK_BUDGET
    base = world.name
    smallest: tuple[World, Path] | None = None
    tries = 0
    changed = True
    while changed and time.monotonic() < ends:
        changed = False
        for candidate in simpler(world):
            if time.monotonic() >= ends:
                break
            tries += 1
            renamed = replace(candidate, name=f"{base}s{tries}")  # fresh slices, rules, claims
            attempt = saved.with_name(f"{saved.stem}-try{tries}.yaml")
            try:
                _attempt(grounds, renamed, attempt)
            except AssertionError:
                if smallest is not None:  # a smaller one fails: the one before is not kept
                    smallest[1].unlink(missing_ok=True)
                world, smallest, changed = renamed, (renamed, attempt), True
                break
            attempt.unlink(missing_ok=True)
    return smallest, tries


def _attempt(grounds: Grounds, world: World, saved: Path) -> None:
    """One world on the cluster, saved as YAML first: its first round, then, if it has
    changes, the changes made to its live objects and its second round; its objects removed
    after."""
    b = grounds.b
    world = grounds.fitted(world)
    slices = slice_objects(b, world)
    rules = rule_objects(b, world, grounds.rule_version)
    record: dict[str, Any] = {
        "world": asdict(world),
        "pool": pool_name(b, world),
        "namespace": grounds.namespace_for(world),
        "slices": slices,
        "rules": rules,
    }
    try:
        stored_rules = b.create(*rules)
        stored_slices = b.create(*slices)
        if rules:
            time.sleep(RULE_SETTLE)
        _round(grounds, world, stored_slices, record, saved, "")
        if world.changes:
            stored_slices = _change(grounds, world, stored_slices, stored_rules, record, saved)
            _round(grounds, world.after(), stored_slices, record, saved, " after its changes")
    finally:
        for slice_ in slices:
            b.delete("resourceslices", slice_["metadata"]["name"], missing_ok=True)
        for rule in rules:
            b.delete(
                "devicetaintrules",
                rule["metadata"]["name"],
                version=rule["apiVersion"],
                missing_ok=True,
            )


def _round(
    grounds: Grounds,
    world: World,
    stored_slices: list[dict],
    record: dict[str, Any],
    saved: Path,
    when: str,
) -> None:
    """The world's claims, each with a pod, made fresh and judged (``when``: which round, in
    the failure); their pods and claims removed after, so that the devices are free again."""
    b = grounds.b
    namespace = grounds.namespace_for(world)
    claims = {c.name: claim_object(b, world, c, namespace) for c in world.claims}
    pods = {}
    for name, claim in claims.items():
        pods[name] = b.pod_external(claim["metadata"]["name"])
        pods[name]["metadata"]["namespace"] = namespace
    record["claims" if not when else "claims after its changes"] = list(claims.values())
    _save(saved, record)
    there = b.in_namespace(namespace)
    stored_claims = b.create(*claims.values())
    if world.staggered:
        for pod in pods.values():
            b.create(pod)
            _placed(there, pod)
    else:
        b.create(*pods.values())
    try:
        judged = as_stored(world, stored_slices, dict(zip(claims, stored_claims, strict=True)))
        if judged != world:
            b.log(f"world {world.name}{when}: judged as the API server stored it: {judged}")
        _judge(there, judged, claims, pods, f"world {world.name}{when} ({saved})")
    finally:
        remove(there, list(pods.values()), list(claims.values()))


def _change(
    grounds: Grounds,
    world: World,
    stored_slices: list[dict],
    stored_rules: list[dict],
    record: dict[str, Any],
    saved: Path,
) -> list[dict]:
    """Make the world's changes to its live objects by updates, as a driver republishing its
    pool and an administrator editing or deleting rules do (each read anew: a controller may
    have written a rule's status), and give the scheduler :data:`CHANGE_SETTLE` seconds to
    see them; the pool's slices as stored after."""
    b = grounds.b
    current = [b.get("resourceslices", s["metadata"]["name"]) for s in stored_slices]
    updates = republished(current, world) if world.after().devices != world.devices else []
    edits, deletions = [], []
    for rule, before, after in zip(stored_rules, world.rules, world.rules_after(), strict=True):
        name, version = rule["metadata"]["name"], rule["apiVersion"]
        if after is None:
            deletions.append((name, version))
        elif after != before:
            now = b.get("devicetaintrules", name, version=version)
            edits.append(edited_rule(b, now, world, after))
    record["changed"] = {
        "slices": updates,
        "rules": edits,
        "deleted rules": [name for name, _ in deletions],
    }
    _save(saved, record)
    b.log(f"world {world.name}: its changes: {list(world.changes)}")
    for name, version in deletions:
        b.delete("devicetaintrules", name, version=version)
    for edit in edits:
        name = edit["metadata"]["name"]
        b.log(f"Updating DeviceTaintRule {name}")
        b.update("devicetaintrules", name, edit, version=edit["apiVersion"])
    stored = []
    for update in updates:
        b.log(f"Updating ResourceSlice {update['metadata']['name']}")
        stored.append(b.update("resourceslices", update["metadata"]["name"], update))
    time.sleep(CHANGE_SETTLE)
    return stored or current


def _save(saved: Path, record: dict[str, Any]) -> None:
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(yaml.safe_dump(record))


def _judge(
    b: Builder, world: World, claims: dict[str, dict], pods: dict[str, dict], said: str
) -> None:
    """Every pod bound or refused; the allocations break none of the world's rules
    (:func:`~e2e_dra.subtests._worlds.wrongs`); no refusal while a fit is free (after a second
    look). ``b`` works in the claims' namespace; ``said`` names the world in a failure."""
    eventually(
        lambda: [name for name, pod in pods.items() if not _decided(b, pod)],
        what=f"every pod of {said} to be bound or found unschedulable",
        timeout=DECIDED_TIMEOUT,
        until=lambda undecided: not undecided,
    )

    def results() -> dict[str, list[dict]]:
        return {c.name: allocated(b, claims[c.name]["metadata"]["name"]) for c in world.claims}

    now = results()
    problems = wrongs(world, now)
    assert not problems, f"{said}: " + "; ".join(problems)
    taken, _ = holdings(world, now)
    looked = False
    for claim in world.claims:
        if taken[claim.name]:
            continue
        others = held_by_others(world, taken, claim)
        fit = world.fits(claim, others, used=used_by_others(world, taken, claim))
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
                f"{said}: pod {pod} is unschedulable, though devices {[d.name for d in fit]} "
                f"are free and fit its claim {claim}"
            ) from None
        looked = True
        now = results()
        taken, _ = holdings(world, now)  # it took devices the later claims had free
    if looked:  # what the second looks gave is held to the same rules
        problems = wrongs(world, now)
        assert not problems, f"{said}: " + "; ".join(problems)


def _placed(b: Builder, pod: dict) -> None:
    """Until ``pod`` is bound or refused, at most :data:`STAGGER_TIMEOUT` seconds: the next pod
    of a staggered world comes after (one undecided by then is judged with the others)."""
    try:
        eventually(
            lambda: _decided(b, pod),
            what=f"pod {pod['metadata']['name']} to be bound or found unschedulable",
            timeout=STAGGER_TIMEOUT,
            until=bool,
        )
    except WaitTimeout:
        b.log(
            f"pod {pod['metadata']['name']}: undecided after {STAGGER_TIMEOUT:.0f}s, the next made"
        )


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
    keps=(4381, 4815, 4816, 5018, 5055, 5075),
    initial=every_phase(_check),
    releases=">=1.36",
)
