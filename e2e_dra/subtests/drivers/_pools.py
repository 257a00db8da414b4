"""A driver's pools as the API shows them, and what they must show.

The devices of each pool's newest generation are what the scheduler allocates from; after a
restart they must be the ones the driver publishes, whatever its helper library did with the
slices that were there (updated them in place, or replaced them with a newer generation). The
comparison works on plain values (ResourceSlices and ResourceClaims as dicts), so that it and its
words are tested without a cluster; :func:`published` and :func:`same_devices` read a driver's
slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from e2e_dra.driver import ProcessDriver, pools_complete
from e2e_dra.kube import retrying
from e2e_dra.waits import WaitTimeout, eventually

Devices = dict[str, list[str]]
"""A driver's devices by pool, each pool's names sorted: what the chain carries from phase to
phase."""
Device = tuple[str, str]
"""One device: (pool, name)."""

DEVICES_SETTLE = 60.0
"""Seconds a driver's pools get to show what it publishes after a restart: its helper's
ResourceSlice controller writes them once the driver runs (a few seconds); two instances of a
rolling update that both republish a wiped pool take longer to agree (see :func:`same_devices`)."""


def _pool(item: Mapping[str, Any]) -> Mapping[str, Any]:
    return item.get("spec", {}).get("pool", {})


def newest_generations(slices: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each pool's newest generation: the only one the scheduler allocates from."""
    newest: dict[str, int] = {}
    for item in slices:
        pool = _pool(item)
        name = str(pool.get("name", ""))
        newest[name] = max(newest.get(name, 0), int(pool.get("generation", 0)))
    return newest


def _newest(slices: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    newest = newest_generations(slices)
    return [
        item
        for item in slices
        if int(_pool(item).get("generation", 0)) == newest[str(_pool(item).get("name", ""))]
    ]


def newest_devices(slices: Sequence[Mapping[str, Any]]) -> Devices:
    """The devices of each pool's newest generation, by pool."""
    devices: Devices = {}
    for item in _newest(slices):
        names = [d["name"] for d in item.get("spec", {}).get("devices") or []]
        devices.setdefault(str(_pool(item).get("name", "")), []).extend(names)
    return {pool: sorted(names) for pool, names in sorted(devices.items())}


def device_set(devices: Devices) -> set[Device]:
    return {(pool, name) for pool, names in devices.items() for name in names}


def listed(devices: Iterable[Device]) -> str:
    """``pool/name, ...`` in order, or ``none``."""
    return ", ".join(f"{pool}/{name}" for pool, name in sorted(devices)) or "none"


def pools_in_words(slices: Sequence[Mapping[str, Any]]) -> str:
    """What the API shows of each pool: its newest generation, the slices of it (``n`` of the
    ``resourceSliceCount`` it announces) and their devices; older generations, if any remain."""
    if not slices:
        return "no ResourceSlice"
    newest = newest_generations(slices)
    said = []
    for pool, generation in sorted(newest.items()):
        current = [s for s in _newest(slices) if _pool(s).get("name", "") == pool]
        names = ", ".join(str(s.get("metadata", {}).get("name", "?")) for s in current)
        count = int(_pool(current[0]).get("resourceSliceCount", 1))
        devices = newest_devices(current).get(pool, [])
        older = len([s for s in slices if _pool(s).get("name", "") == pool]) - len(current)
        said.append(
            f"pool {pool} at generation {generation} (slice {names}, {len(current)} of "
            f"{count}): {', '.join(devices) or 'no device'} ({len(devices)} devices)"
            + (f", and {older} slice(s) of an older generation" if older else "")
        )
    return "; ".join(said)


@dataclass(frozen=True)
class Expected:
    """What a driver's pools must show at their newest generation: every device of ``kept``, and
    ``more`` devices beyond them, named as the driver chooses (a driver told to publish one more
    device than before: ``more=1``; back to what it had: ``more=0``)."""

    kept: Devices
    more: int = 0
    told: str = field(default="", compare=False)  # how the driver was told, for the words

    def beyond(self, shown: Devices) -> set[Device]:
        """What ``shown`` has that ``kept`` has not."""
        return device_set(shown) - device_set(self.kept)

    def wrong(self, shown: Devices) -> str:
        """What ``shown`` lacks or has too many of, in words; empty when it is as expected."""
        missing = device_set(self.kept) - device_set(shown)
        beyond = self.beyond(shown)
        twice = {(pool, n) for pool, names in shown.items() for n in names if names.count(n) > 1}
        said = [f"listed more than once in one generation: {listed(twice)}"] if twice else []
        if missing:
            said.append(f"missing {listed(missing)}")
        if len(beyond) != self.more:
            said.append(
                f"{len(beyond)} device(s) beyond those ({listed(beyond)}) where "
                f"{self.more} {'was' if self.more == 1 else 'were'} expected"
            )
        return "; ".join(said)

    def verdict(self, slices: Sequence[Mapping[str, Any]]) -> str:
        """Why ``slices`` are not yet what is expected (an incomplete pool, other devices);
        empty when they are."""
        if not pools_complete(slices):
            return "no complete pool (the newest generation lacks slices it announces)"
        return self.wrong(newest_devices(slices))

    def __str__(self) -> str:
        count = len(device_set(self.kept)) + self.more
        kept = listed(device_set(self.kept))
        beyond = f", and {self.more} more" if self.more else ", and no other"
        return f"{count} devices{f' ({self.told})' if self.told else ''}: {kept}{beyond}"


def allocated(claim: Mapping[str, Any], driver: str) -> set[Device]:
    """The devices of ``driver`` that ``claim`` was allocated."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return {(r["pool"], r["device"]) for r in results if r.get("driver") == driver}


def free_devices(devices: Devices, claims: Sequence[Mapping[str, Any]], driver: str) -> set[Device]:
    """The devices of ``devices`` no claim of ``claims`` is allocated."""
    taken = {device for claim in claims for device in allocated(claim, driver)}
    return device_set(devices) - taken


def holders(claims: Sequence[Mapping[str, Any]], driver: str, device: Device) -> list[str]:
    """The names of the claims allocated ``device``."""
    return sorted(c["metadata"]["name"] for c in claims if device in allocated(c, driver))


def published(driver: ProcessDriver) -> Devices:
    """The driver's devices on its node by pool, from the newest generation of each pool."""
    slices = retrying(driver.slices)()
    assert pools_complete(slices), (
        f"driver {driver.name}: no complete pool: {pools_in_words(slices)}"
    )
    return newest_devices(slices)


def same_devices(driver: ProcessDriver, before: Devices) -> None:
    """After a restart, the slices are back (the harness waited) with the devices they had: a
    driver or kubelet that republishes less, more or other devices fails here. Two instances of
    a driver (a rolling update) that republish a pool the kubelet wiped may each write a slice
    of it (each device twice in one generation: a pool the scheduler calls invalid) until one
    sees the other's: they get :data:`DEVICES_SETTLE` seconds to agree."""
    try:
        eventually(lambda: published(driver), what="", timeout=DEVICES_SETTLE, until=before.__eq__)
    except WaitTimeout:
        now = published(driver)
        raise AssertionError(
            f"driver {driver.name}: its devices changed across the step (by pool, before -> now, "
            f"{DEVICES_SETTLE:.0f}s later): {before} -> {now} ({Expected(before).wrong(now)})"
        ) from None


def failure(
    expected: Expected, slices: Sequence[Mapping[str, Any]], who: str, waited: float
) -> str:
    """A pool that did not come to show ``expected`` in ``waited`` seconds, said with what the
    driver (``who``: its name, build and step) was told to publish and what the pool shows."""
    return (
        f"{who}: told to publish {expected}; {waited:.0f}s later its pools show "
        f"{pools_in_words(slices)}: {expected.verdict(slices) or 'as expected only now'}"
    )


def how_updated(left: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]) -> str:
    """How the new instance's helper brought the slices its predecessor ``left`` to what they
    are ``now``: updated in place (the same objects, by uid), or replaced by others (a newer
    generation); or created anew when none was left."""
    if not left:
        return "created anew (no slice was left when the new instance started)"

    def named(slices: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        return {
            str(s.get("metadata", {}).get("uid") or s.get("metadata", {}).get("name")): (
                f"{s.get('metadata', {}).get('name', '?')} "
                f"(generation {int(_pool(s).get('generation', 0))})"
            )
            for s in slices
        }

    before, after = named(left), named(_newest(now))
    kept = sorted(set(before) & set(after))
    if kept:
        return "updated in place: " + ", ".join(f"{before[k]} -> {after[k]}" for k in kept)
    return f"replaced: {', '.join(before.values())} -> {', '.join(after.values())}"


def checkpointed(entry: Mapping[str, Any] | None, driver: str) -> set[Device]:
    """The devices the kubelet's checkpoint ``entry`` of a claim holds from ``driver``: what the
    driver's NodePrepareResources answered it prepared."""
    state = ((entry or {}).get("DriverState") or {}).get(driver) or {}
    return {(d.get("PoolName", ""), d.get("DeviceName", "")) for d in state.get("Devices") or []}
