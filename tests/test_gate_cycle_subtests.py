"""The feature-gate cycle subtests and what they share with the upgrade suite, without a cluster.

A gate-cycle subtest that declares a gate its emulated version has locked, or a module whose
SUBTEST is named differently, would only fail minutes into a real run; these checks catch it here.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import subtests.gate_cycle
from e2e_dra.subtest import Context, GateCycleSubtest, discover
from subtests._workload import claim_state

EXPECTED = {"compatibility-groups", "extended-resource", "workload-resourceclaims"}


def gate_cycle_subtests() -> dict[str, GateCycleSubtest]:
    return {s.name: s for s in discover("subtests.gate_cycle", GateCycleSubtest)}


def test_every_gate_cycle_module_defines_its_subtest() -> None:
    modules = [m.name for m in pkgutil.iter_modules(subtests.gate_cycle.__path__)]
    named = {
        importlib.import_module(f"subtests.gate_cycle.{m}").SUBTEST.name: m
        for m in modules
        if not m.startswith("_")
    }
    assert set(named) == EXPECTED
    assert all(module == name.replace("-", "_") for name, module in named.items())
    assert set(gate_cycle_subtests()) == EXPECTED


def test_extended_resource_matches_upstream_table() -> None:
    subtest = gate_cycle_subtests()["extended-resource"]
    assert subtest.toggled_gates == ("DRAExtendedResource",)
    assert subtest.enabled_gates == ()
    assert subtest.emulated_version == "1.36"
    assert subtest.resources is not None
    (pool,) = subtest.resources(["127.0.0.1"])
    assert pool.name == pool.node_name == "127.0.0.1"
    assert [d["name"] for d in pool.slices[0]["devices"]] == [f"device-{i:02d}" for i in range(8)]


def test_step_names_the_failing_check_and_says_when_it_starts() -> None:
    said: list[str] = []
    ctx = Context(
        kube=None,  # type: ignore[arg-type]
        driver=None,  # type: ignore[arg-type]
        builder=None,  # type: ignore[arg-type]
        nodes=["127.0.0.1"],
        phase="phase-1-gate-off",
        artifacts=None,  # type: ignore[arg-type]
        log=said.append,
    )
    with ctx.step("passes"):
        pass
    with pytest.raises(AssertionError) as failure, ctx.step("survivor-claim-preserved"):
        raise AssertionError("claim lost its allocation")
    assert said == ["phase-1-gate-off: passes", "phase-1-gate-off: survivor-claim-preserved"]
    assert failure.value.__notes__ == [
        "e2e-dra: in step 'survivor-claim-preserved' of phase 'phase-1-gate-off'"
    ]


def test_claim_state_ignores_everything_but_identity_allocation_and_reservation() -> None:
    claim = {
        "metadata": {"uid": "u1", "resourceVersion": "7", "name": "c"},
        "status": {"allocation": {"devices": {}}, "reservedFor": [{"name": "g"}], "devices": []},
    }
    later = {**claim, "metadata": {**claim["metadata"], "resourceVersion": "9"}}
    assert claim_state(claim) == claim_state(later)
    assert claim_state(claim) == {
        "uid": "u1",
        "allocation": {"devices": {}},
        "reservedFor": [{"name": "g"}],
    }
    assert claim_state({"metadata": {"uid": "u1"}}) != claim_state(claim)
