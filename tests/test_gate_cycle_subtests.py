"""The feature-gate cycle subtests and what they share with the upgrade suite, without a cluster.

A gate-cycle subtest that declares a gate its emulated version has locked, or a module whose
SUBTEST is named differently, would only fail minutes into a real run; these checks catch it here.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
from kubernetes.client import models

from e2e_dra import subtests
from e2e_dra.builder import SubtestObjects
from e2e_dra.subtest import Context, Subtest, discover
from e2e_dra.subtests import _gated_fields
from e2e_dra.subtests._workload import claim_state
from e2e_dra.subtests.gate_cycle import binding_conditions, consumable_capacity

EXPECTED = {
    "binding-conditions",
    "compatibility-groups",
    "consumable-capacity",
    "extended-resource",
    "workload-resourceclaims",
}


def gate_cycle_subtests() -> dict[str, Subtest]:
    return {s.name: s for s in discover("e2e_dra.subtests.gate_cycle", gate_cycle=True)}


def test_every_gate_cycle_module_defines_its_subtest() -> None:
    modules = [m.name for m in pkgutil.iter_modules(subtests.gate_cycle.__path__)]
    named = {
        importlib.import_module(f"e2e_dra.subtests.gate_cycle.{m}").SUBTEST.name: m
        for m in modules
        if not m.startswith("_")
    }
    assert set(named) == EXPECTED
    assert all(module == name.replace("-", "_") for name, module in named.items())
    assert set(gate_cycle_subtests()) == EXPECTED


def test_extended_resource_matches_upstream_table() -> None:
    subtest = gate_cycle_subtests()["extended-resource"]
    assert subtest.toggled_gates == ("DRAExtendedResource",)
    assert subtest.feature_gates == ()
    assert subtest.emulated_version == "1.36"
    assert subtest.resources is not None
    (pool,) = subtest.resources(["127.0.0.1"])
    assert pool.name == pool.node_name == "127.0.0.1"
    assert [d["name"] for d in pool.slices[0]["devices"]] == [f"device-{i:02d}" for i in range(8)]


def _context(phase: str, said: list[str]) -> Context:
    """A phase context without a cluster: only what steps and facts use."""
    return Context(
        kube=None,  # type: ignore[arg-type]
        plugin=None,
        builder=None,  # type: ignore[arg-type]
        nodes=["127.0.0.1"],
        phase=phase,
        artifacts=None,  # type: ignore[arg-type]
        log=said.append,
    )


def test_step_names_the_failing_check_and_says_when_it_starts() -> None:
    said: list[str] = []
    ctx = _context("phase-1-gate-off", said)
    with ctx.step("passes"):
        pass
    with pytest.raises(AssertionError) as failure, ctx.step("survivor-claim-preserved"):
        raise AssertionError("claim lost its allocation")
    assert said == ["phase-1-gate-off: passes", "phase-1-gate-off: survivor-claim-preserved"]
    assert failure.value.__notes__ == [
        "e2e-dra: in step 'survivor-claim-preserved' of phase 'phase-1-gate-off'"
    ]
    # What the phase proved: the step that passed, not the one that failed.
    assert ctx.facts == {"proved/phase-1-gate-off": ["passes"]}


def test_a_phase_with_nothing_to_prove_says_why_and_keeps_it() -> None:
    said: list[str] = []
    ctx = _context("initial", said)
    ctx.nothing_to_prove("no fallback to take")
    assert said == ["initial: nothing to prove: no fallback to take"]
    assert ctx.facts == {"nothing_to_prove/initial": "no fallback to take"}


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


class _Kube:
    """Records what a probe helper sends, and answers as a server that drops nothing."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict]] = []

    def create(self, url: str, body: dict) -> dict:
        self.sent.append(("create", url, body))
        return body


def _probe_context(kube: _Kube) -> Context:
    objects = SubtestObjects("consumable-capacity", suite="feature-gate-cycle", image="x.test/b:1")
    b = objects.builder(kube)  # type: ignore[arg-type]
    return Context(kube, None, b, ["127.0.0.1"], "phase-0-gate-on", None, log=lambda _: None)  # type: ignore[arg-type]


@pytest.mark.parametrize("module", [binding_conditions, consumable_capacity])
def test_probe_slices_are_valid_cluster_wide_slices_of_a_driver_nobody_runs(module) -> None:
    kube = _Kube()
    ctx = _probe_context(kube)
    stored = _gated_fields.create_probe(ctx, "created-gate-off", module.DEVICES)
    ((verb, url, body),) = kube.sent
    assert (verb, url) == ("create", "/apis/resource.k8s.io/v1/resourceslices")
    models.V1ResourceSlice.model_validate(body)
    driver = "probe.defaultconsumable-capacity.k8s.io"
    assert body["metadata"]["name"] == f"{driver}-created-gate-off"
    assert body["spec"]["driver"] == driver != ctx.builder.driver_name  # no class selects it
    assert body["spec"]["allNodes"] is True  # the kubelet deletes no cluster-wide slice
    _gated_fields.expect_fields(stored, module.FIELDS, kept=True, why="as sent")
    assert len(ctx.builder.deferred) == 1  # removed by the tear-down


def test_expect_fields_tells_kept_from_dropped_per_device() -> None:
    fields = consumable_capacity.FIELDS
    device = consumable_capacity.DEVICES[0]
    sent = {"metadata": {"name": "s"}, "spec": {"devices": [device]}}
    assert _gated_fields.present(sent, fields) == {
        "shared-device": ["allowMultipleAllocations", "capacity/*/requestPolicy"]
    }
    dropped = {
        "metadata": {"name": "s"},
        "spec": {
            "devices": [
                {
                    "name": "shared-device",
                    "allowMultipleAllocations": None,
                    "capacity": {"memory": {"value": "10Gi"}},
                }
            ]
        },
    }
    _gated_fields.expect_fields(dropped, fields, kept=False, why="gate off")
    with pytest.raises(AssertionError, match=r"want \[\]"):
        _gated_fields.expect_fields(sent, fields, kept=False, why="gate off")
    with pytest.raises(AssertionError, match="allowMultipleAllocations"):
        _gated_fields.expect_fields(dropped, fields, kept=True, why="gate on")
    half = {"metadata": {"name": "s"}, "spec": {"devices": [{**device, "capacity": {}}]}}
    with pytest.raises(AssertionError):  # one field of two is neither kept nor dropped
        _gated_fields.expect_fields(half, fields, kept=True, why="gate on")
    with pytest.raises(AssertionError):  # a slice without devices proves nothing
        _gated_fields.expect_fields(
            {"metadata": {"name": "s"}, "spec": {}}, fields, kept=False, why=""
        )


def test_binding_conditions_and_consumable_capacity_toggle_their_gate() -> None:
    by_name = gate_cycle_subtests()
    bc = by_name["binding-conditions"]
    assert bc.toggled_gates == ("DRADeviceBindingConditions",)
    assert bc.emulated_version == "1.37"  # the gate is locked from 1.38
    assert bc.privileged_client  # a cluster-wide pool
    (pool,) = bc.resources(["127.0.0.1"])
    assert pool.all_nodes
    assert all(
        _gated_fields.present({"spec": {"devices": [d]}}, binding_conditions.FIELDS)[d["name"]]
        == ["bindingConditions", "bindingFailureConditions", "bindsToNode"]
        for d in pool.slices[0]["devices"]
    )
    cc = by_name["consumable-capacity"]
    assert cc.toggled_gates == ("DRAConsumableCapacity",)
    assert cc.emulated_version is None and not cc.privileged_client
    (pool,) = cc.resources(["127.0.0.1"])
    assert pool.node_name == "127.0.0.1"  # node-local: the kubelet's restart deletes it
    assert consumable_capacity.DEFAULT_SHARE == "2Gi"


# A kube-apiserver that checks gates as 1.38 does for consumable capacity, and knows
# DRAFractionalCapacityRange only when told to (as 1.37+): prints its version when accepted.
_APISERVER = """#!/bin/sh
gates="$1"; knows="%(knows)s"; fail='E1201 run.go:72] "command failed" err='
case "$gates" in *DRAFractionalCapacityRange*) [ -n "$knows" ] || {
  echo "$fail\"unrecognized feature gate: DRAFractionalCapacityRange\"" >&2; exit 1; } ;; esac
case "$gates" in *DRAConsumableCapacity=false*)
  case "$gates" in *DRAFractionalCapacityRange=false*) ;; *) [ -n "$knows" ] && {
    echo "$fail\"DRAFractionalCapacityRange is enabled, but depends on features that" \
      "are disabled: [DRAConsumableCapacity]\"" >&2; exit 1; } ;; esac ;; esac
echo "Kubernetes %(version)s"
"""


def _gate_cycle_backend(tmp_path: Path, version: str, *, knows_dependent: bool):
    from e2e_dra._suite import GATE_CYCLE, SUITES
    from e2e_dra._suite._cluster import RealCluster
    from e2e_dra.releases import Release, VersionsUnderTest

    bin_dir = tmp_path / version / "bin"
    bin_dir.mkdir(parents=True)
    apiserver = bin_dir / "kube-apiserver"
    apiserver.write_text(
        _APISERVER % {"knows": "yes" if knows_dependent else "", "version": version}
    )
    apiserver.chmod(0o755)
    release = Release(version=version, bin_dir=bin_dir, source_dir=None, origin="build")
    backend = RealCluster(SUITES[GATE_CYCLE], gate_cycle_subtests(), tmp_path / "artifacts")
    backend.state.versions = VersionsUnderTest(release, release, "1.37", "build")
    return backend


def _gates(backend, name: str, on: bool) -> str:
    from e2e_dra._suite._gate_cycle import gate_flag

    return gate_flag(backend.state, backend.subtests[name], on=on)


def test_a_gate_that_depends_on_the_toggled_one_goes_off_and_on_with_it(tmp_path: Path) -> None:
    with_dependent = _gate_cycle_backend(tmp_path / "new", "v1.38.0-beta.0", knows_dependent=True)
    without = _gate_cycle_backend(tmp_path / "old", "v1.36.5", knows_dependent=False)

    assert with_dependent.unmet("consumable-capacity") is None
    assert _gates(with_dependent, "consumable-capacity", False) == (
        "DRAConsumableCapacity=false,DRAFractionalCapacityRange=false"
    )
    assert _gates(with_dependent, "consumable-capacity", True) == (
        "DRAConsumableCapacity=true,DRAFractionalCapacityRange=true"
    )
    # a release without the dependent gate toggles the gate alone
    assert _gates(without, "consumable-capacity", False) == "DRAConsumableCapacity=false"
    assert without.unmet("consumable-capacity") is None


def test_a_gate_cycle_subtest_outside_its_releases_is_skipped_with_the_reason(
    tmp_path: Path,
) -> None:
    backend = _gate_cycle_backend(tmp_path, "v1.36.5", knows_dependent=False)

    assert backend.unmet("workload-resourceclaims") == "needs Kubernetes >=1.37; v1.36.5 is not"


@pytest.mark.parametrize(
    ("package", "gate_cycle", "toggled", "error"),
    [
        ("mixed_up_one", False, '("SomeGate",)', "is not in a gate cycle and must not name"),
        ("mixed_up_two", True, "()", "must name toggled_gates"),
    ],
)
def test_a_subtest_in_the_wrong_suite_is_refused_when_discovered(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    package: str,
    gate_cycle: bool,
    toggled: str,
    error: str,
) -> None:
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "one.py").write_text(
        "from e2e_dra.subtest import Subtest\n"
        f"SUBTEST = Subtest(name='one', initial=print, toggled_gates={toggled})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeError, match=error):
        discover(package, gate_cycle=gate_cycle)


def test_a_phase_with_two_reasons_to_prove_nothing_keeps_both() -> None:
    said: list[str] = []
    ctx = _context("after-cluster-downgrade", said)
    ctx.nothing_to_prove("no hand-over")
    ctx.nothing_to_prove("no reboot")
    assert ctx.facts == {"nothing_to_prove/after-cluster-downgrade": "no hand-over; no reboot"}
    assert said == [
        "after-cluster-downgrade: nothing to prove: no hand-over",
        "after-cluster-downgrade: nothing to prove: no reboot",
    ]
