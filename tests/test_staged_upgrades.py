"""The staged-upgrade variants without a cluster: what moves when, and which binaries start.

Their real runs are the main job's ``control-plane-first`` and ``kubelet-last`` suites.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from environment import Environ

from e2e_dra._suite._upgrade import (
    CONTROL_PLANE,
    CONTROL_PLANE_FIRST,
    KUBELET_LAST,
    NODE,
    UPGRADE_DOWNGRADE,
    UPGRADE_SUITES,
    VARIANTS,
    KubeletLast,
    link_binaries,
)
from e2e_dra.errors import E2EDRAError
from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS
from e2e_dra.releases import Release, VersionsUnderTest
from e2e_dra.subtest import Subtest


def _release(tmp_path: Path, version: str) -> Release:
    bin_dir = tmp_path / version / "bin"
    bin_dir.mkdir(parents=True)
    for name in (*KUBE_CLUSTER_COMPONENTS, "kubectl"):
        (bin_dir / name).write_text(f"#!/bin/sh\necho Kubernetes {version}\n")
    return Release(version=version, bin_dir=bin_dir, source_dir=None, origin="build")


def test_every_variant_runs_the_same_chains_and_moves_only_its_components() -> None:
    plans = {suite: UPGRADE_SUITES[suite].plan(["a", "b"], 7) for suite in VARIANTS}
    ids = {suite: [entry.id for entry in plan] for suite, plan in plans.items()}
    assert ids[CONTROL_PLANE_FIRST] == ids[KUBELET_LAST]
    # upgrade-downgrade: the same, then the re-upgrade leg before the cleanup
    re_upgrade = ids[UPGRADE_DOWNGRADE][len(ids[KUBELET_LAST]) - 1 : -1]
    assert ids[UPGRADE_DOWNGRADE] == [*ids[KUBELET_LAST][:-1], *re_upgrade, "cleanup"]
    assert re_upgrade[0] == "re-upgrade"
    assert sorted(re_upgrade[1:]) == ["a/after-cluster-re-upgrade", "b/after-cluster-re-upgrade"]
    assert {entry.suite for entry in plans[KUBELET_LAST]} == {KUBELET_LAST}
    assert VARIANTS[CONTROL_PLANE_FIRST].moved == CONTROL_PLANE
    assert VARIANTS[KUBELET_LAST].moved == NODE
    assert set(CONTROL_PLANE) | set(NODE) == set(VARIANTS[UPGRADE_DOWNGRADE].moved)


def test_a_mixed_start_links_each_component_to_its_release(tmp_path: Path) -> None:
    old, new = _release(tmp_path, "v1.36.5"), _release(tmp_path, "v1.37.2")
    mixed = {c: old if c in NODE else new for c in KUBE_CLUSTER_COMPONENTS}

    bin_dir = link_binaries(tmp_path / "bin-initial", mixed)

    assert (bin_dir / "kubelet").resolve() == old.bin_dir / "kubelet"
    assert (bin_dir / "kube-proxy").resolve() == old.bin_dir / "kube-proxy"
    assert (bin_dir / "kube-apiserver").resolve() == new.bin_dir / "kube-apiserver"
    assert (bin_dir / "kubectl").resolve() == new.bin_dir / "kubectl"  # the newest
    # one release: its own directory, as upstream starts it
    assert (
        link_binaries(tmp_path / "unused", dict.fromkeys(KUBE_CLUSTER_COMPONENTS, old))
        == old.bin_dir
    )
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize("pin", ["v1.33.9", "1.33", "v1.38.0-beta.0", "v2.37.0"])
def test_a_kubelet_outside_the_skew_policy_is_refused_before_anything_is_fetched(
    tmp_path: Path, environ: Environ, pin: str
) -> None:
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("E2E_DRA_CACHE_DIR", str(tmp_path / "cache"))
    if pin == "1.33":  # a minor is resolved through the source: give it an exact one instead
        pin = "v1.33.0"
    current, previous = _release(tmp_path, "v1.37.2"), _release(tmp_path, "v1.36.5")
    versions = VersionsUnderTest(current, previous, "1.36", "build")
    with pytest.raises(E2EDRAError, match="not within 3 minors behind the control plane"):
        KubeletLast(kubelet=pin).kubelet_release(versions)


def test_the_kubelet_defaults_to_the_previous_release(tmp_path: Path) -> None:
    current, previous = _release(tmp_path, "v1.37.2"), _release(tmp_path, "v1.36.5")
    versions = VersionsUnderTest(current, previous, "1.36", "build")
    assert KubeletLast().kubelet_release(versions) is previous
    assert VARIANTS[KUBELET_LAST] == KubeletLast()


def _versions(tmp_path: Path) -> VersionsUnderTest:
    current, previous = _release(tmp_path, "v1.38.0-beta.0"), _release(tmp_path, "v1.37.2")
    return VersionsUnderTest(current, previous, "1.37", "build")


def test_each_variant_knows_which_releases_the_control_plane_and_the_kubelet_run(
    tmp_path: Path, environ: Environ
) -> None:
    environ.unset("E2E_DRA_KUBELET_VERSION")
    versions = _versions(tmp_path)
    runs = {}
    for suite, variant in VARIANTS.items():
        releases = variant.releases(versions)
        runs[suite] = (releases.runs("kube-apiserver"), releases.runs("kubelet"))

    both = ("v1.37.2", "v1.38.0-beta.0")
    assert runs[UPGRADE_DOWNGRADE] == (both, both)
    assert runs[CONTROL_PLANE_FIRST] == (both, ("v1.37.2",))
    assert runs[KUBELET_LAST] == (("v1.38.0-beta.0",), both)


def test_each_variant_names_its_states_by_what_moved_where(
    tmp_path: Path, environ: Environ
) -> None:
    environ.unset("E2E_DRA_KUBELET_VERSION")
    versions = _versions(tmp_path)
    names = {}
    for suite, variant in VARIANTS.items():
        releases = variant.releases(versions)
        names[suite] = (
            variant.initial_state(versions, releases),
            variant.upgraded_state(releases),
            variant.restored_state(versions, releases),
        )

    assert names[UPGRADE_DOWNGRADE] == ("0-initial-1.37", "1-v1.38.0-beta.0", "2-restored-1.37")
    assert names[CONTROL_PLANE_FIRST] == (
        "0-initial-1.37",
        "1-cp-v1.38.0-beta.0",
        "2-cp-restored-v1.37.2",
    )
    assert names[KUBELET_LAST] == (
        "0-initial-cp-v1.38.0-beta.0-kubelet-v1.37.2",
        "1-kubelet-v1.38.0-beta.0",
        "2-kubelet-restored-v1.37.2",
    )


def test_a_subtest_says_which_kubelets_it_needs_apart_from_the_control_plane() -> None:
    def initial(ctx: object) -> None:
        return None

    both = Subtest(name="both", initial=initial, releases=">=1.36")
    control_plane_only = Subtest(
        name="cp", initial=initial, releases=">=1.37", kubelet_releases=">=1.34"
    )
    control_plane, skewed = ("v1.38.0-beta.0",), ("v1.35.4", "v1.38.0-beta.0")

    assert both.unmet_release(control_plane, skewed) == (
        "needs a kubelet of Kubernetes >=1.36; the kubelet's v1.35.4 is not"
    )
    assert control_plane_only.unmet_release(control_plane, skewed) is None
    assert control_plane_only.unmet_release(("v1.36.5",), skewed) == (
        "needs Kubernetes >=1.37; v1.36.5 is not"
    )
    assert both.unmet_release(("v1.37.2",), ("v1.36.5", "v1.37.2")) is None


def test_each_suite_is_of_a_kind_whose_phases_and_changes_its_plan_runs() -> None:
    """A kind names its phases and the steps between them once (beside the summary's schema);
    every suite's plan runs a prefix of its kind's phases, the changes in order between them."""
    from e2e_dra._suite import SUITES
    from e2e_dra._suite._steps import ClusterStep, SubtestPhase
    from e2e_dra.report import SUITE_KINDS

    for name, suite in SUITES.items():
        assert suite.kind in SUITE_KINDS, name
        plan = suite.plan(["a"], 1)
        phases = [e.name for e in plan if isinstance(e, SubtestPhase)]
        assert phases == list(suite.phases) == list(suite.kind.phases[: len(phases)]), name
        steps = [e.name for e in plan if isinstance(e, ClusterStep)]
        changes = [step for step in steps if step in suite.kind.changes]
        assert changes == list(suite.kind.changes[: len(phases) - 1]), name


def test_a_summary_tells_its_kind_by_its_suite_or_its_phases() -> None:
    """A summary names its suite, not its kind; a renamed gate cycle still reads as one."""
    from e2e_dra.report import GATE_CYCLE_KIND, UPGRADE_KIND, SuiteKind

    assert SuiteKind.of("gate-cycle", []) is GATE_CYCLE_KIND
    assert SuiteKind.of("renamed", ["phase-0-gate-on"]) is GATE_CYCLE_KIND
    assert SuiteKind.of(KUBELET_LAST, UPGRADE_KIND.phases[:3]) is UPGRADE_KIND
    assert SuiteKind.of("kubelet-last-1.35", []) is UPGRADE_KIND
    assert GATE_CYCLE_KIND.takes(("SomeGate",)) and not UPGRADE_KIND.takes(("SomeGate",))


def test_a_new_variant_is_a_value_that_plans_as_a_suite_of_its_own() -> None:
    """A variant is a line (a value): its suite plans the same chains under its own name; one
    that names its kubelet (``KubeletLast(skew=2)``) keeps it whatever the setting says."""
    from e2e_dra._suite import SUITES, suite_of
    from e2e_dra._suite._drivers import WithRealDrivers
    from e2e_dra._suite._skew import cells_of
    from e2e_dra._suite._upgrade import Variant

    node_first = Variant("node-first", NODE, "node-")
    skew_two = KubeletLast(suite="kubelet-skew-2", skew=2)
    staged = [entry.id for entry in SUITES[KUBELET_LAST].plan(["a", "b"], 7)]
    for variant in (node_first, skew_two):
        plan = suite_of(variant).plan(["a", "b"], 7)
        assert [entry.id for entry in plan] == staged
        assert {entry.suite for entry in plan} == {variant.suite}
    assert skew_two.kubelet_spec("v1.38.0") == "1.36"
    [cell] = cells_of(suite_of(skew_two), "1.35")  # the setting moves the default one only
    assert cell.id is None and cell.suite == suite_of(skew_two)
    assert [type(suite_of(v)) is WithRealDrivers for v in VARIANTS.values()] == [
        True,
        False,
        False,
    ]
    assert {name: SUITES[name] for name in VARIANTS} == {
        name: suite_of(v) for name, v in VARIANTS.items()
    }
