"""Probe ResourceSlices for the gate-cycle subtests that check which gated fields the API server
keeps.

The API server's ResourceSlice strategy drops a feature's fields from what it is asked to store
while the feature gate is off, unless the object being replaced already used them (upstream:
``dropDisabledFields(newSlice, oldSlice)`` in pkg/registry/resource/resourceslice/strategy.go).
So with the gate off a new slice loses the fields, an update of a slice that has them keeps them,
and an update of a slice that lacks them cannot add them; what is stored is never rewritten.

The driver's own slices are a poor probe: the kubelet deletes node-local ones whenever it
restarts, and the driver decides when it writes. So the subtests write their own: cluster-wide
slices of a driver that nobody runs (``probe.<driver>``), which no device class selects, each
its own pool, removed by the tear-down.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from e2e_dra.builder import Builder, cluster_slice
from e2e_dra.subtest import Context
from e2e_dra.waits import eventually

SLICES_TIMEOUT = 60.0


def driver_slice(ctx: Context) -> dict:
    """The driver's one slice as stored; waits while the kubelet's wipe after a restart and the
    driver's re-creation are under way."""
    (stored,) = eventually(
        ctx.driver.slices,
        what=f"1 ResourceSlice of driver {ctx.driver.name}",
        timeout=SLICES_TIMEOUT,
        poll=0.5,
        until=lambda slices: len(slices) == 1,
    )
    return stored


def probe_driver(ctx: Context) -> str:
    return f"probe.{ctx.builder.driver_name}"


def create_probe(ctx: Context, pool: str, devices: Sequence[dict]) -> dict:
    """A new cluster-wide slice named and pooled ``pool`` with ``devices``; as stored."""
    driver = probe_driver(ctx)
    name = f"{driver}-{pool}"
    (stored,) = ctx.builder.create(cluster_slice(driver, name, devices, pool=pool, generation=1))
    ctx.builder.defer(lambda b: b.delete("resourceslices", name, missing_ok=True))
    return stored


def read_probe(b: Builder, name: str) -> dict:
    return b.get("resourceslices", name)


def update_probe(ctx: Context, name: str, devices: Sequence[dict]) -> dict:
    """Replace the slice's devices with ``devices`` (a new pool generation); as stored."""
    current = read_probe(ctx.builder, name)
    current["spec"]["devices"] = copy.deepcopy(list(devices))
    current["spec"]["pool"]["generation"] += 1
    ctx.log(f"Updating ResourceSlice {name}")
    return ctx.builder.update("resourceslices", name, current)


def with_attribute(devices: Sequence[dict], value: str) -> list[dict]:
    """``devices`` with attribute ``phase`` set to ``value``: an update that changes something
    besides the gated fields."""
    changed = copy.deepcopy(list(devices))
    for device in changed:
        device.setdefault("attributes", {})["phase"] = {"string": value}
    return changed


def present(stored: dict, fields: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    """Per device of a stored slice, which of ``fields`` it holds; a field is a path below the
    device (``("bindsToNode",)``, or ``("capacity", "*", "requestPolicy")`` for every capacity).
    The server writes an unset field as absent or null: both count as absent."""
    found: dict[str, list[str]] = {}
    for device in stored["spec"].get("devices") or []:
        found[device["name"]] = ["/".join(f) for f in fields if _has(device, list(f))]
    return found


def _has(value: object, field: list[str]) -> bool:
    if not field:
        return value is not None
    if not isinstance(value, dict):
        return False
    head, *rest = field
    if head == "*":
        return bool(value) and all(_has(v, rest) for v in value.values())
    return _has(value.get(head), rest)


def expect_fields(stored: dict, fields: Sequence[Sequence[str]], *, kept: bool, why: str) -> None:
    """Every device of ``stored`` holds all of ``fields`` (``kept``) or none of them."""
    name = stored["metadata"]["name"]
    want = ["/".join(f) for f in fields] if kept else []
    found = present(stored, fields)
    wrong = {device: have for device, have in found.items() if have != want}
    assert found and not wrong, (
        f"ResourceSlice {name} ({why}): devices hold {found}, want {want} on each"
    )


class Probes:
    """The three probe slices a gate cycle writes, and what each state must store of ``fields``:
    one created with the gate on, which keeps the fields through an update with the gate off; one
    created with the gate off, which loses them and cannot get them back by an update until the
    gate is on again; and one created with the gate on again."""

    def __init__(self, devices: Sequence[dict], fields: Sequence[Sequence[str]]) -> None:
        self.devices = devices
        self.fields = fields
        self._created_on = ""
        self._created_off = ""

    def gate_on(self, ctx: Context) -> None:
        stored = create_probe(ctx, "created-gate-on", self.devices)
        expect_fields(stored, self.fields, kept=True, why="created with the gate on")
        self._created_on = stored["metadata"]["name"]

    def gate_off_stored_keep(self, ctx: Context) -> None:
        changed = with_attribute(self.devices, "off")
        updated = update_probe(ctx, self._created_on, changed)
        expect_fields(updated, self.fields, kept=True, why="updated with the gate off")

    def gate_off_new_lose(self, ctx: Context) -> None:
        stored = create_probe(ctx, "created-gate-off", self.devices)
        expect_fields(stored, self.fields, kept=False, why="created with the gate off")
        self._created_off = stored["metadata"]["name"]
        again = update_probe(ctx, self._created_off, self.devices)
        expect_fields(again, self.fields, kept=False, why="updated with the gate off")

    def gate_on_again(self, ctx: Context) -> None:
        restored = update_probe(ctx, self._created_off, self.devices)
        expect_fields(restored, self.fields, kept=True, why="updated with the gate on again")
        fresh = create_probe(ctx, "created-gate-on-again", self.devices)
        expect_fields(fresh, self.fields, kept=True, why="created with the gate on again")


def stored_with_fields(
    ctx: Context, devices: Sequence[dict], fields: Sequence[Sequence[str]]
) -> tuple[dict, Probes]:
    """Gate on: the driver's slice and a probe created now both store ``fields``. Returns the
    driver's slice, to compare with later, and the probes for the rest of the cycle."""
    stored = driver_slice(ctx)
    expect_fields(stored, fields, kept=True, why="the driver's, gate on")
    probes = Probes(devices, fields)
    probes.gate_on(ctx)
    return stored, probes
