"""The real drivers' chain as a package, and the change of a driver's devices while claims are
prepared, on plain values: ResourceSlices, claims and checkpoint entries as dicts, a stand-in for
the driver that publishes what a test says (no cluster, no driver program)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from e2e_dra import subtests
from e2e_dra.driver import CommandDriver, ExampleDriver, UpstreamTestDriver, parse_drivers
from e2e_dra.subtest import PHASES, Context
from e2e_dra.subtests import drivers
from e2e_dra.subtests.drivers import _chain, _device_change
from e2e_dra.subtests.drivers._held import Grown
from e2e_dra.subtests.drivers._kubelet import WIPE_DELAY
from e2e_dra.subtests.drivers._pools import (
    Expected,
    checkpointed,
    failure,
    free_devices,
    holders,
    how_updated,
    newest_devices,
    pools_in_words,
)

NODE = "node-1"
FOUR = {NODE: ["device-00", "device-01", "device-02", "device-03"]}
FIVE = {NODE: [*FOUR[NODE], "device-04"]}


def _slice(
    devices: Sequence[str],
    *,
    generation: int = 1,
    uid: str = "uid-1",
    name: str = "0-d-node-1-abcde",
    count: int = 1,
    pool: str = NODE,
) -> dict:
    return {
        "metadata": {"name": name, "uid": uid},
        "spec": {
            "driver": "d.e2e.k8s.io",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": [{"name": d} for d in devices],
        },
    }


# --- the package -------------------------------------------------------------------------------


def test_the_chain_is_one_subtest_per_driver_and_the_packages_only_export() -> None:
    made = drivers.driver_subtests(parse_drivers("upstream,example"))
    assert [s.name for s in made] == ["driver-upstream", "driver-example-v0.4.0"]
    assert {s.initial for s in made} == {_chain._first}
    assert drivers.__all__ == ["driver_subtests"]


def test_the_chain_is_on_top_of_the_package_and_no_module_reaches_up_to_it() -> None:
    """Each module is one concern the chain composes: none imports the chain (it would be two
    concerns tangled), and the package's ``__init__`` only re-exports it."""
    root = Path(drivers.__file__).parent
    importers = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("._chain"):
                importers.append(path.name)
    assert importers == ["__init__.py"]
    assert len(list(root.glob("_*.py"))) >= 8  # the chain, held, pods, pools, ...
    assert Path(subtests.__file__).parent / "drivers" == root


def test_each_side_changes_the_pool_once_and_never_during_the_outage() -> None:
    """Grown in the first phase, on the older release (one instance, no outage); shrunk in the
    last, after the re-upgrade, by the newer release's build of a driver that follows the
    kubelet: a helper library that loses an update shows on either side. Neither change falls
    in the outage's phase or while a rolling update is under way (it begins in the rolling
    phase and ends at the top of the next, before the shrink)."""
    grow, shrink = 0, _chain.DEVICES_SHRINK_PHASE
    assert (PHASES[grow], PHASES[shrink]) == ("after-cluster-creation", "after-cluster-re-upgrade")
    assert shrink == len(PHASES) - 1 == _chain.ROLLING_PHASE + 1
    assert _chain.DOWNTIME_PHASE not in {grow, shrink}
    assert grow != _chain.ROLLING_PHASE


# --- what a pool shows, and what it must ----------------------------------------------------------


def test_the_newest_generation_of_each_pool_is_what_counts() -> None:
    slices = [
        _slice(FOUR[NODE], generation=1, uid="old"),
        _slice(FIVE[NODE], generation=2, uid="new", name="0-d-node-1-fghij"),
        _slice(["x-1"], pool="other"),
    ]
    assert newest_devices(slices) == {NODE: FIVE[NODE], "other": ["x-1"]}
    said = pools_in_words(slices)
    assert "pool node-1 at generation 2 (slice 0-d-node-1-fghij, 1 of 1): device-00" in said
    assert "(5 devices), and 1 slice(s) of an older generation" in said
    assert pools_in_words([]) == "no ResourceSlice"


@pytest.mark.parametrize(
    ("shown", "wrong"),
    [
        (FIVE, ""),
        (FOUR, "0 device(s) beyond those (none) where 1 was expected"),
        (
            {NODE: ["device-00", "device-01", "device-02", "device-04", "device-05"]},
            "missing node-1/device-03; 2 device(s) beyond those (node-1/device-04, "
            "node-1/device-05) where 1 was expected",
        ),
        (
            {NODE: [*FIVE[NODE], "device-04"]},
            "listed more than once in one generation: node-1/device-04",
        ),
        ({NODE: FOUR[NODE], "other": ["gpu-9"]}, ""),  # the new device may be in another pool
    ],
)
def test_one_more_device_is_every_device_of_before_and_exactly_one_beyond(
    shown: dict[str, list[str]], wrong: str
) -> None:
    assert Expected(FOUR, more=1).wrong(shown) == wrong


def test_back_to_the_count_of_before_is_exactly_the_devices_of_before() -> None:
    assert Expected(FOUR).wrong(FOUR) == ""
    assert Expected(FOUR).wrong(FIVE) == (
        "1 device(s) beyond those (node-1/device-04) where 0 were expected"
    )


def test_an_incomplete_pool_is_not_yet_what_was_published() -> None:
    half = [_slice(FIVE[NODE], count=2)]
    assert Expected(FOUR, more=1).verdict(half).startswith("no complete pool")
    assert Expected(FOUR, more=1).verdict([_slice(FIVE[NODE])]) == ""


def test_a_pool_that_did_not_follow_says_what_was_told_and_what_it_shows() -> None:
    expected = Expected(FOUR, more=1, told="--num-devices=5")
    said = failure(expected, [_slice(FOUR[NODE])], "driver d (upstream), p, step 's'", 60)
    assert said == (
        "driver d (upstream), p, step 's': told to publish 5 devices (--num-devices=5): "
        "node-1/device-00, node-1/device-01, node-1/device-02, node-1/device-03, and 1 more; "
        "60s later its pools show pool node-1 at generation 1 (slice 0-d-node-1-abcde, 1 of 1): "
        "device-00, device-01, device-02, device-03 (4 devices): 0 device(s) beyond those "
        "(none) where 1 was expected"
    )


def test_how_the_helper_brought_the_slices_to_the_new_devices() -> None:
    left = [_slice(FOUR[NODE], uid="a", name="s-a")]
    in_place = [_slice(FIVE[NODE], uid="a", name="s-a")]
    replaced = [_slice(FIVE[NODE], generation=2, uid="b", name="s-b")]
    assert (
        how_updated(left, in_place) == "updated in place: s-a (generation 1) -> s-a (generation 1)"
    )
    assert how_updated(left, replaced) == "replaced: s-a (generation 1) -> s-b (generation 2)"
    assert how_updated([], replaced).startswith("created anew")


def _claim(name: str, *devices: tuple[str, str], driver: str = "d.e2e.k8s.io") -> dict:
    results = [{"driver": driver, "pool": p, "device": d, "request": "r"} for p, d in devices]
    return {
        "metadata": {"name": name},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def test_free_devices_and_who_holds_one_are_read_from_the_claims_allocations() -> None:
    claims = [
        _claim("kept", (NODE, "device-00")),
        _claim("other-driver", (NODE, "device-01"), driver="x.k8s.io"),
        {"metadata": {"name": "pending"}, "status": {}},
        _claim("grown", (NODE, "device-03"), (NODE, "device-04")),
    ]
    free = free_devices(FIVE, claims, "d.e2e.k8s.io")
    assert free == {(NODE, "device-01"), (NODE, "device-02")}
    assert holders(claims, "d.e2e.k8s.io", (NODE, "device-04")) == ["grown"]
    assert holders(claims, "d.e2e.k8s.io", (NODE, "device-01")) == []


def test_the_devices_a_driver_prepared_are_its_entry_in_the_kubelets_checkpoint() -> None:
    entry = {
        "ClaimUID": "u",
        "DriverState": {
            "d.e2e.k8s.io": {"Devices": [{"PoolName": NODE, "DeviceName": "device-04"}]},
            "x.k8s.io": {"Devices": [{"PoolName": NODE, "DeviceName": "device-00"}]},
        },
    }
    assert checkpointed(entry, "d.e2e.k8s.io") == {(NODE, "device-04")}
    assert checkpointed(None, "d.e2e.k8s.io") == set()


def test_the_grown_pool_is_carried_with_its_added_device() -> None:
    grown = Grown(FOUR, 4, (NODE, "device-04"))
    assert grown.with_added == FIVE
    assert Grown(FOUR, 4, ("other", "gpu-0")).with_added == {**FOUR, "other": ["gpu-0"]}


# --- the restart, with a stand-in driver ----------------------------------------------------------


class _Driver:
    """Stands in for a ProcessDriver: restarted, it publishes ``after`` (or keeps ``before``, as
    a helper whose slice update is lost does)."""

    name = "upstream.e2e.k8s.io"
    node_name = NODE
    surging = False

    def __init__(
        self,
        before: list[dict],
        after: list[dict],
        option: str | None,
        held: str | None = None,
        helper: str | None = "v0.38.0-beta.0",
    ) -> None:
        self.kind = SimpleNamespace(
            label="upstream", device_count_option=option, device_change_held_back=held
        )
        self.num_devices = 4
        self.helper = helper
        self.calls: list[Any] = []
        self._now, self._after = before, after

    def stop(self) -> None:
        self.calls.append("stop")

    def start(self, kubelet: str = "", *, num_devices: int | None = None) -> None:
        self.calls.append(("start", num_devices))
        self._now = self._after

    def wait_registered(self, timeout: float = 60) -> None:
        self.calls.append("registered")

    def slices(self) -> list[dict]:
        return self._now

    def describe(self) -> dict[str, Any]:
        return {"k8s.io/dynamic-resource-allocation": self.helper}


def _context(tmp_path: Path, said: list[str]) -> Context:
    return Context(
        kube=None,  # type: ignore[arg-type]
        plugin=None,
        builder=None,  # type: ignore[arg-type]
        nodes=[NODE],
        phase="after-cluster-creation",
        artifacts=tmp_path,
        log=said.append,
    )


STEP = "the driver restarts with 5 devices, within the wipe delay: its pool shows them"


def test_a_restart_with_one_more_device_is_seen_in_the_pool_and_how_is_kept(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    ctx = _context(tmp_path, said)
    driver = _Driver([_slice(FOUR[NODE])], [_slice(FIVE[NODE])], "--num-devices")
    expected = Expected(FOUR, more=1, told="--num-devices=5")

    shown = _device_change._restarted_with(ctx, driver, 5, expected, STEP)  # type: ignore[arg-type]

    assert shown == FIVE
    assert driver.calls == ["stop", ("start", 5), "registered"]
    (kept,) = ctx.facts["driver_devices/after-cluster-creation"]
    assert kept["num_devices"] == 5 and kept["slices"].startswith("updated in place: ")
    assert "nothing_to_prove/after-cluster-creation" not in ctx.facts


def test_a_helper_whose_slice_update_is_lost_fails_naming_all_but_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The break-it on plain values: the new instance runs, but its pool keeps the devices of
    before (the helper's update of the existing slice never lands)."""
    monkeypatch.setattr(_device_change, "DEVICES_SETTLE", 0.2)
    ctx = _context(tmp_path, [])
    driver = _Driver([_slice(FOUR[NODE])], [_slice(FOUR[NODE])], "--num-devices")
    expected = Expected(FOUR, more=1, told="--num-devices=5")

    with pytest.raises(AssertionError) as raised:
        _device_change._restarted_with(ctx, driver, 5, expected, STEP)  # type: ignore[arg-type]

    said = str(raised.value)
    assert said.startswith(
        "driver upstream.e2e.k8s.io (upstream, k8s.io/dynamic-resource-allocation "
        f"v0.38.0-beta.0), after-cluster-creation, step {STEP!r}: told to publish 5 devices "
        "(--num-devices=5)"
    )
    assert "its pools show pool node-1 at generation 1" in said and "(4 devices)" in said
    assert said.endswith("0 device(s) beyond those (none) where 1 was expected")
    assert "timed out" not in said


def test_a_restart_that_left_no_slice_to_update_says_it_proved_the_content_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _context(tmp_path, [])
    driver = _Driver([], [_slice(FIVE[NODE])], "--num-devices")
    _device_change._restarted_with(  # type: ignore[arg-type]
        ctx, driver, 5, Expected(FOUR, more=1), STEP
    )
    why = ctx.facts["nothing_to_prove/after-cluster-creation"]
    assert why.startswith("the update of slices a driver published before its restart: created")
    monkeypatch.setattr(_device_change, "WIPE_DELAY", 0.0)  # as if slower than the wipe delay
    slow = _context(tmp_path, [])
    driver = _Driver([_slice(FOUR[NODE])], [_slice(FIVE[NODE])], "--num-devices")
    _device_change._restarted_with(  # type: ignore[arg-type]
        slow, driver, 5, Expected(FOUR, more=1), STEP
    )
    assert "updated in place" in slow.facts["nothing_to_prove/after-cluster-creation"]


def test_a_driver_that_cannot_be_told_its_count_skips_only_the_change_saying_why(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path, [])
    driver = _Driver([_slice(FOUR[NODE])], [_slice(FIVE[NODE])], None)
    kept = SimpleNamespace(name="p")
    assert _device_change.grow(ctx, None, driver, FOUR, kept) is None  # type: ignore[arg-type]
    assert driver.calls == []  # not restarted
    why = ctx.facts["nothing_to_prove/after-cluster-creation"]
    assert "does not pass {num_devices}" in why and driver.name in why


def test_a_driver_whose_change_is_held_back_is_not_restarted_and_says_why(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path, [])
    driver = _Driver([_slice(FOUR[NODE])], [_slice(FIVE[NODE])], "--num-devices", "not yet")
    kept = SimpleNamespace(name="p")
    assert _device_change.grow(ctx, None, driver, FOUR, kept) is None  # type: ignore[arg-type]
    assert driver.calls == []
    why = ctx.facts["nothing_to_prove/after-cluster-creation"]
    assert why.endswith(f"{driver.name}: not yet")


def test_no_driver_holds_its_device_change_back_any_more() -> None:
    """The example driver's was held back while its lost slices were not understood (issue 49);
    now the phase waits for its helper instead (:func:`_device_change.until_resynced`)."""
    for kind in (UpstreamTestDriver(), CommandDriver("my-driver {num_devices}"), ExampleDriver()):
        assert kind.device_change_held_back is None


# --- the helper that loses a slice it updated, kept clear of (issue 49) --------------------------


@pytest.mark.parametrize(
    ("helper", "waits"),
    [
        ("v0.36.2", True),  # the example driver v0.4.0's: kubernetes/kubernetes#140063
        ("v0.36.5", True),
        ("v0.34.0", True),
        ("v0.37.0", False),  # the fix's first release
        ("v0.37.2", False),
        ("v0.38.0-beta.0", False),
        (None, True),  # a command: driver: not known, so taken to lose them
        ("v0.0.0-20260101000000-abcdef123456", True),  # a commit, not a release
        ("not a version", True),
    ],
)
def test_a_restarted_helper_is_due_to_resync_only_if_it_may_lose_an_updated_slice(
    helper: str | None, waits: bool
) -> None:
    driver = _Driver([], [], "--num-devices", helper=helper)
    due = _device_change.resync_due(driver, 100.0)  # type: ignore[arg-type]
    if waits:
        assert due == 100.0 + _device_change.HELPER_SYNC_DELAY + _device_change.RESYNC_MARGIN
    else:
        assert due is None


def test_the_helpers_first_sync_after_a_restart_is_the_default_sync_delay_away() -> None:
    """The resourceslice controller's DefaultSyncDelay, and the wipe delay it is not to be
    mixed up with (both 30 s today)."""
    assert _device_change.HELPER_SYNC_DELAY == 30.0
    assert _device_change.HELPER_SYNC_DELAY + _device_change.RESYNC_MARGIN > WIPE_DELAY
    assert "kubernetes/kubernetes#140063" in _device_change.STALE_UPDATE_BUG
    assert f"v{_device_change.STALE_UPDATE_FIXED}" in _device_change.STALE_UPDATE_BUG


def test_nothing_is_waited_for_when_no_helper_is_due(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [])
    driver = _Driver([], [], "--num-devices")  # no slice at all: nothing would be looked at
    _device_change.until_resynced(ctx, driver, None)  # type: ignore[arg-type]
    assert ctx.steps == [] and ctx.facts == {}


def test_the_phase_waits_out_the_rest_of_the_helpers_sync_delay_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(_device_change.time, "sleep", slept.append)
    monkeypatch.setattr(_device_change.time, "monotonic", lambda: 1000.0)
    said: list[str] = []
    ctx = _context(tmp_path, said)
    driver = _Driver([_slice(FIVE[NODE])], [], "--num-devices", helper="v0.36.2")

    _device_change.until_resynced(ctx, driver, 1012.5)  # type: ignore[arg-type]

    assert slept == [12.5]
    (step,) = ctx.steps
    assert step.name == (
        "the restarted driver's helper (k8s.io/dynamic-resource-allocation v0.36.2) synced its "
        "pool again before the next cluster step"
    )
    kept = ctx.facts["driver_resync/after-cluster-creation"]
    assert kept["helper"] == "v0.36.2" and kept["waited_seconds"] == 12.5
    assert "kubernetes/kubernetes#140063" in kept["why"]
    assert any("waited 12s more" in line and "#140063" in line for line in said)


def test_a_phase_that_ran_long_enough_does_not_wait_but_still_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(_device_change.time, "sleep", slept.append)
    ctx = _context(tmp_path, [])
    driver = _Driver([_slice(FIVE[NODE])], [], "--num-devices", helper="v0.36.2")
    _device_change.until_resynced(ctx, driver, 0.0)  # type: ignore[arg-type]
    assert slept == []
    assert ctx.facts["driver_resync/after-cluster-creation"]["waited_seconds"] == 0.0


def test_slices_gone_by_the_end_of_the_wait_fail_the_phase_naming_the_driver(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path, [])
    driver = _Driver([], [], "--num-devices", helper="v0.36.2")
    with pytest.raises(AssertionError) as raised:
        _device_change.until_resynced(ctx, driver, 0.0)  # type: ignore[arg-type]
    assert str(raised.value).startswith("driver upstream.e2e.k8s.io: no complete pool")


@pytest.mark.parametrize(("helper", "due"), [("v0.36.2", 535.0), ("v0.38.0-beta.0", None)])
def test_a_grown_driver_carries_when_its_helper_is_due_to_have_resynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper: str, due: float | None
) -> None:
    """grow() on a stand-in: the restart is real (``_restarted_with``), the pods around it are
    not; the chain waits for ``Grown.resync_due`` before its first phase ends."""
    monkeypatch.setattr(_device_change.time, "monotonic", lambda: 500.0)
    added = (NODE, "device-04")
    for name, value in {
        "running": lambda b, name: name,
        "still_untouched": lambda *a: None,
        "_claims_the_new_device": lambda *a: SimpleNamespace(claim="c"),
        "allocated": lambda claim, driver: {added},
        "delete_and_unprepared": lambda *a: None,
        "_released": lambda *a: None,
    }.items():
        monkeypatch.setattr(_device_change, name, value)
    ctx = _context(tmp_path, [])
    driver = _Driver([_slice(FOUR[NODE])], [_slice(FIVE[NODE])], "--num-devices", helper=helper)
    b = SimpleNamespace(get=lambda resource, name: {})
    kept = SimpleNamespace(name="p", claim="k", env={})

    grown = _device_change.grow(ctx, b, driver, FOUR, kept)  # type: ignore[arg-type]

    assert grown == Grown(FOUR, 4, added, resync_due=due)


def test_the_chain_waits_for_the_helper_at_the_end_of_both_phases_that_restart_it() -> None:
    """The wait is the last thing the first phase and the shrinking phase do (the next cluster
    step follows), not right after the restart (the steps between count towards it)."""
    source = Path(_chain.__file__).read_text()
    tree = ast.parse(source)
    waits = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "until_resynced"
    ]
    assert len(waits) == 2
    first = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_first")
    calls = [
        getattr(n.value.func, "id", "")
        for n in first.body
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
    ]
    assert calls[-1] == "until_resynced"


def test_the_added_device_still_held_is_not_taken_away_and_its_holder_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_device_change, "RELEASE_TIMEOUT", 0.2)
    claims = [_claim("kept", (NODE, "device-00")), _claim("late", (NODE, "device-04"))]
    b = SimpleNamespace(list=lambda resource, mine=False: claims)
    driver = _Driver([], [], "--num-devices")
    driver.name = "d.e2e.k8s.io"
    added = {(NODE, "device-04")}
    with pytest.raises(AssertionError) as raised:
        _device_change._released(b, driver, added)  # type: ignore[arg-type]
    assert str(raised.value).startswith(
        "driver d.e2e.k8s.io: node-1/device-04 still allocated to ResourceClaim(s) late 0s after"
    )
    claims.pop()
    _device_change._released(b, driver, added)  # type: ignore[arg-type]
    _device_change._released(b, driver, {(NODE, "device-01")})  # type: ignore[arg-type]
