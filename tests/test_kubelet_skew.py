"""The kubelet skew matrix without a cluster: ``E2E_DRA_KUBELET_VERSION`` as one kubelet-last
suite or several cells, each its own items, folder, summary and verdict, resolved against a
loopback release tree (release_server.py) and run on the dry backend (dry_backend.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dry_backend import DryCluster
from environment import Environ
from release_server import ReleaseServer

import e2e_dra
from e2e_dra._suite._skew import cells_of, kubelet_values, resolve_matrix
from e2e_dra._suite._upgrade import KUBELET_LAST, UPGRADE_SUITES, KubeletLast, UpgradeState
from e2e_dra.errors import InputError
from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS
from e2e_dra.releases import DownloadSource, Release, VersionsUnderTest
from e2e_dra.report import load_summary
from e2e_dra.report._runs import runs_of
from e2e_dra.subtest import Subtest

pytest_plugins = ("pytester",)

SUITE_MODULE = Path(e2e_dra.__file__).parent / "test_kubelet_last.py"
CURRENT = "v1.38.0-beta.0"
NEWEST = {"1.37": "v1.37.2", "1.36": "v1.36.5", "1.35": "v1.35.4", "1.34": "v1.34.9"}
"""What the loopback release tree names the newest release of each minor."""
STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")

SUBTESTS = """
from e2e_dra.subtest import Subtest


def third(ctx):
    return None


def second(ctx):
    return third


def first(ctx):
    return second


SUBTEST = Subtest(name="{name}", initial=first)
"""


@pytest.fixture
def tree(release_server: ReleaseServer, environ: Environ) -> ReleaseServer:
    """The loopback release tree, as this process's settings and those of an inner run
    (``environ`` and the real environment: pytester runs in this process) see it."""
    for minor, version in NEWEST.items():
        release_server.put(f"stable-{minor}.txt", f"{version}\n")
    environ.set("KUBERNETES_RELEASE_URL", release_server.url)
    environ.set("E2E_DRA_RELEASE_SOURCE", "download")
    return release_server


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tree: ReleaseServer, tmp_path):
    """pytest on the real kubelet-last module over two trivial subtests, on the dry backend;
    ``run(kubelets, *args)`` sets ``E2E_DRA_KUBELET_VERSION`` (None: unset)."""
    package = pytester.mkpydir("tinyskew")
    for name in ("alpha", "beta"):
        (package / f"{name}.py").write_text(SUBTESTS.format(name=name))
    pytester.makeini("[pytest]\ne2e_dra_subtests = tinyskew\n")
    (pytester.path / SUITE_MODULE.name).write_text(SUITE_MODULE.read_text())
    monkeypatch.setenv("ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("CI", "true")  # plain progress lines
    monkeypatch.setenv("KUBERNETES_RELEASE_URL", tree.url)
    monkeypatch.setenv("E2E_DRA_RELEASE_SOURCE", "download")
    monkeypatch.setenv("E2E_DRA_KUBERNETES_VERSION", CURRENT)

    def run(kubelets: str | None, *args: str) -> pytest.RunResult:
        if kubelets is None:
            monkeypatch.delenv("E2E_DRA_KUBELET_VERSION", raising=False)
        else:
            monkeypatch.setenv("E2E_DRA_KUBELET_VERSION", kubelets)
        cluster = DryCluster(versions=("v1.37.2", CURRENT))
        return pytester.runpytest("-p", "e2e_dra.pytest_plugin", "-p", "no:cacheprovider",
                                  "--e2e-dra-seed=7", *args, plugins=[cluster])  # fmt: skip

    return run


def _ids(result: pytest.RunResult) -> list[str]:
    return [line.split("::", 1)[1] for line in result.outlines if "::test_" in line]


def _summary(tmp_path: Path, folder: str) -> dict:
    return json.loads((tmp_path / "artifacts" / folder / "summary.json").read_text())


# --- the value ------------------------------------------------------------------------------------


def test_a_variable_names_one_kubelet_a_list_or_every_minor_the_policy_allows() -> None:
    assert kubelet_values(None) == (KubeletLast(),)
    assert kubelet_values("1.35") == (KubeletLast(kubelet="1.35"),)
    assert kubelet_values("v1.35") == (KubeletLast(kubelet="v1.35"),)  # one: as it always was
    assert kubelet_values("stable") == (KubeletLast(kubelet="stable"),)
    assert kubelet_values(" 1.35, v1.36 ,1.37.2") == (
        KubeletLast(kubelet="1.35"),
        KubeletLast(kubelet="1.36"),
        KubeletLast(kubelet="v1.37.2"),
    )
    assert kubelet_values("skew") == tuple(KubeletLast(skew=n) for n in (1, 2, 3))


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("1.35,,1.36", "has an empty entry"),
        ("1.35,", "has an empty entry"),
        ("1.35,foo", "'foo' is not a release"),
        ("garbage", "'garbage' is not a release"),
        ("1.35,v1.38.0-alpha.0.812+0123abcd", "'v1.38.0-alpha.0.812+0123abcd' is not a release"),
        ("1.35,stable", "'stable' is not a release"),
        ("1.35,v1.35", "names 1.35 twice"),
        ("skew,1.36", "skew already names every kubelet"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_variable_and_the_entry(value: str, said: str) -> None:
    with pytest.raises(InputError) as raised:
        kubelet_values(value)
    assert str(raised.value).startswith(f"E2E_DRA_KUBELET_VERSION={value!r}")
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_skew_resolves_each_minor_to_its_newest_release_and_names_the_cell_by_it(
    tree: ReleaseServer,
) -> None:
    cells = resolve_matrix(kubelet_values("skew"), CURRENT, DownloadSource())

    assert [name for name, _ in cells] == ["1.37", "1.36", "1.35"]
    assert [value.kubelet for _, value in cells] == ["v1.37.2", "v1.36.5", "v1.35.4"]
    assert [value.suite for _, value in cells] == [f"{KUBELET_LAST}-{m}" for m in NEWEST][:3]
    assert all(value.skew is None for _, value in cells)  # pinned: the cell runs what it named


def test_a_list_keeps_its_order_and_its_names(tree: ReleaseServer) -> None:
    cells = resolve_matrix(kubelet_values("1.36,v1.35.2"), CURRENT, DownloadSource())

    assert [(name, value.kubelet) for name, value in cells] == [
        ("1.36", "v1.36.5"),
        ("v1.35.2", "v1.35.2"),
    ]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("1.36,v1.36.5", "E2E_DRA_KUBELET_VERSION: 1.36 and v1.36.5 both name v1.36.5"),
        (
            "1.36,1.34",
            "E2E_DRA_KUBELET_VERSION=1.34 (v1.34.9) is not within 3 minors behind the control "
            f"plane ({CURRENT})",
        ),
        ("1.36,1.12", "E2E_DRA_KUBELET_VERSION: 1.12 cannot be resolved: no Kubernetes 1.12"),
        ("1.36,v2.36.0", "E2E_DRA_KUBELET_VERSION=v2.36.0 (v2.36.0) is not within 3 minors"),
    ],
)
def test_a_matrix_the_policy_or_the_releases_refuse_is_one_line(
    tree: ReleaseServer, value: str, said: str
) -> None:
    with pytest.raises(InputError, match=re.escape(said)):
        resolve_matrix(kubelet_values(value), CURRENT, DownloadSource())


def _release(tmp_path: Path, version: str) -> Release:
    bin_dir = tmp_path / version
    bin_dir.mkdir(parents=True)
    return Release(version=version, bin_dir=bin_dir, source_dir=None, origin="build")


def test_the_plan_takes_the_kubelet_from_the_value_not_from_the_setting(
    tree: ReleaseServer, environ: Environ, tmp_path: Path
) -> None:
    tree.add_release("v1.35.4")
    environ.set("E2E_DRA_KUBELET_VERSION", "1.36")  # read at the edge only, never down here
    current, previous = _release(tmp_path, CURRENT), _release(tmp_path, "v1.37.2")
    versions = VersionsUnderTest(current, previous, "1.37", "download")

    default = UPGRADE_SUITES[KUBELET_LAST].variant.releases(versions)
    three_behind = KubeletLast(skew=3).releases(versions)

    assert default.initial["kubelet"] is previous
    assert three_behind.initial["kubelet"].version == "v1.35.4"
    assert three_behind.initial["kube-proxy"].version == "v1.35.4"
    assert {three_behind.initial[c].version for c in KUBE_CLUSTER_COMPONENTS} == {
        "v1.35.4",
        CURRENT,
    }


class _Checks:
    """What a suite asks of the cluster to tell whether a subtest can run: its state, and
    every API version served."""

    def __init__(self, state: UpgradeState) -> None:
        self.state = state

    def unserved(self, subtest: Subtest) -> str | None:
        return None


def test_a_cell_skips_what_its_kubelet_lacks_naming_the_kubelets_release(
    tree: ReleaseServer, tmp_path: Path
) -> None:
    tree.add_release("v1.35.4")
    [(_, cell)] = resolve_matrix([KubeletLast(skew=3)], CURRENT, DownloadSource())
    current, previous = _release(tmp_path, CURRENT), _release(tmp_path, "v1.37.2")
    releases = cell.releases(VersionsUnderTest(current, previous, "1.37", "download"))
    suite = UPGRADE_SUITES[KUBELET_LAST].__class__(cell)
    state = UpgradeState(releases=releases)

    def initial(ctx: object) -> None:
        return None

    newer = Subtest(name="newer", initial=initial, releases=">=1.36")
    any_kubelet = Subtest(name="any", initial=initial, releases=">=1.36", kubelet_releases=">=1.34")

    assert suite.unmet(_Checks(state), newer) == (
        "needs a kubelet of Kubernetes >=1.36; the kubelet's v1.35.4 is not"
    )
    assert suite.unmet(_Checks(state), any_kubelet) is None


def test_other_suites_and_a_single_kubelet_are_one_suite_of_their_own_name(
    tree: ReleaseServer,
) -> None:
    for name in UPGRADE_SUITES:
        [cell] = cells_of(UPGRADE_SUITES[name], "1.35" if name == KUBELET_LAST else "skew")
        assert cell.id is None and cell.suite.name == name
    [one] = cells_of(UPGRADE_SUITES[KUBELET_LAST], "1.35")
    assert one.suite.variant.kubelet == "1.35"  # type: ignore[attr-defined]
    [default] = cells_of(UPGRADE_SUITES[KUBELET_LAST], None)
    assert default.suite == UPGRADE_SUITES[KUBELET_LAST]  # the previous release


# --- a run ----------------------------------------------------------------------------------------


def test_unset_or_one_kubelet_keeps_todays_items_and_folder(run, tmp_path: Path) -> None:
    unset = run(None, "--collect-only", "-q")
    one = run("1.35", "--collect-only", "-q")

    assert _ids(unset) == _ids(one)
    assert _ids(one)[:3] == [
        "test_cluster_step[versions]",
        "test_cluster_step[node-runtime]",
        "test_cluster_step[bring-up]",
    ]
    assert not any("kubelet-" in i for i in _ids(one))

    assert run("1.35").ret == 0
    assert _summary(tmp_path, "kubelet-last")["kubelet"] == {"version": "1.35"}
    assert [p.name for p in (tmp_path / "artifacts").iterdir() if p.is_dir()] == ["kubelet-last"]


def test_a_matrix_runs_each_kubelet_as_its_own_suite_one_after_the_other(
    run, tmp_path: Path
) -> None:
    result = run("1.36,1.35", "-rA")

    assert result.ret == 0
    result.assert_outcomes(passed=2 * (6 + 2 * 3))  # per cell: 6 cluster steps, 2 x 3 phases
    ran = [line.split("::", 1)[1] for line in result.outlines if line.startswith("PASSED ")]
    cells = [re.sub(r"^test_\w+\[(kubelet-[v\d.]+)-.*", r"\1", i) for i in ran]
    assert cells == ["kubelet-1.36"] * 12 + ["kubelet-1.35"] * 12  # one cell after the other
    assert ran[0] == "test_cluster_step[kubelet-1.36-versions]"
    assert "test_phase[kubelet-1.35-alpha/after-cluster-upgrade]" in ran
    for cell, kubelet in (("1.36", "v1.36.5"), ("1.35", "v1.35.4")):
        summary = _summary(tmp_path, f"kubelet-last-{cell}")
        assert summary["suite"] == f"kubelet-last-{cell}"
        assert summary["kubelet"] == {"version": kubelet}
        assert summary["finished"] is True
        assert len(summary["results"]) == 12
    live = [STAMP.sub("", line.lstrip(".")) for line in result.outlines]  # "." may lead
    verdicts = [line for line in live if ": PASSED: " in line and line.startswith("[")]
    assert [line.split(":")[0] for line in verdicts] == [
        "[1/2] kubelet-last-1.36",
        "[2/2] kubelet-last-1.35",
    ]
    summaries = sorted((tmp_path / "artifacts").glob("kubelet-last-*/summary.json"))
    labels = [run.label for run in runs_of([load_summary(p) for p in summaries])]
    assert sorted(labels) == [
        f"kubelet-last-1.35 v1.37.2 → {CURRENT}, kubelet v1.35.4",
        f"kubelet-last-1.36 v1.37.2 → {CURRENT}, kubelet v1.36.5",
    ]
    assert (tmp_path / "artifacts" / "report.html").is_file()
    junit = sorted(p.name for p in (tmp_path / "artifacts").glob("junit_*.xml"))
    assert junit == ["junit_e2e-dra_kubelet-last-1.35.xml", "junit_e2e-dra_kubelet-last-1.36.xml"]


def test_k_selects_one_cell_of_a_matrix(run, tmp_path: Path) -> None:
    result = run("skew", "-k", "kubelet_last and 1.36")

    assert result.ret == 0
    result.assert_outcomes(passed=12)
    folders = sorted(p.name for p in (tmp_path / "artifacts").iterdir() if p.is_dir())
    assert folders == ["kubelet-last-1.36"]


def test_a_matrix_the_policy_refuses_stops_before_anything_runs(run, tmp_path: Path) -> None:
    result = run("1.36,1.34")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines == [
        "ERROR: E2E_DRA_KUBELET_VERSION=1.34 (v1.34.9) is not within 3 minors behind the control "
        f"plane ({CURRENT}), as the version skew policy requires",
        "",
    ]
    assert "Traceback" not in result.stdout.str()
    assert not (tmp_path / "artifacts").exists()
