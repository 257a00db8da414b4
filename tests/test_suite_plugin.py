"""The suite machinery without a cluster: ordering, chain skipping, selection, seeds, junit.

Each test runs pytest (pytester) on the real suite modules against a tiny subtests package whose
phases only record that they ran. A :class:`~dry_backend.DryCluster` passed to that run answers
the plugin's backend hook, so the cluster steps are recorded no-ops; everything else (the plugin,
the plan, the run state machine, the summary) is the code the real job runs.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from dry_backend import EARLY_LOG, STEPS_LOG, DryBackend, DryCluster

import e2e_dra
from e2e_dra._suite import SUITES

pytest_plugins = ("pytester",)

SUITE_DIR = Path(e2e_dra.__file__).parent
UPGRADE_STEPS = [
    "versions",
    "node-runtime",
    "bring-up",
    "upgrade",
    "downgrade",
    "re-upgrade",
    "cleanup",
]
PHASES = [
    "after-cluster-creation",
    "after-cluster-upgrade",
    "after-cluster-downgrade",
    "after-cluster-re-upgrade",
]
STAGED_STEPS = [s for s in UPGRADE_STEPS if s != "re-upgrade"]  # control-plane-first's
THREE_PHASES = PHASES[:3]  # the phases of control-plane-first, and of a chain that ends early
TINY = ("alpha", "beta", "gamma")
PLUGIN = ("-p", "e2e_dra.pytest_plugin")  # what e2e_dra/conftest.py loads for the real suites

COMMON = """
import os
import time
from e2e_dra.subtest import Subtest


def _visit(name, ctx):
    with open(os.environ["TINY_RECORD"], "a") as record:
        record.write(f"{name}/{ctx.phase}\\n")
    ctx.log(f"{name} visits {ctx.phase}")
    meet = os.environ.get("TINY_MEET")  # every subtest named there must be in its phase at once
    if meet and name in meet.split(","):
        here = os.path.join(os.environ["TINY_MEET_DIR"], f"{ctx.phase}-{name}")
        open(here, "w").close()
        where = os.environ["TINY_MEET_DIR"]
        others = [os.path.join(where, f"{ctx.phase}-{n}") for n in meet.split(",")]
        deadline = time.monotonic() + 5
        while not all(os.path.exists(o) for o in others):
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} waited alone in {ctx.phase}")
            time.sleep(0.01)
    slept = dict(part.split("=") for part in os.environ.get("TINY_SLEEP", "").split(",") if part)
    if name in slept:  # TINY_SLEEP=alpha=0.6,beta=0.3: how long each one's phases take
        time.sleep(float(slept[name]))
    if os.environ.get("TINY_STEPS"):  # the check in named steps, one inside the other
        with ctx.step("look around"):
            time.sleep(0.05)
        with ctx.step("check"):
            with ctx.step("the part that breaks"):
                _check(name, ctx)
    else:
        _check(name, ctx)


def _check(name, ctx):
    if f"{name}/{ctx.phase}" in os.environ.get("TINY_FAIL", "").split(","):
        raise AssertionError(f"{name} broke in {ctx.phase} on purpose")


def chain(name, phases=4):
    # first -> second -> third -> fourth, as every subtest's chain; with phases=3 the third
    # returns None (a chain that ends after the downgrade, as a gate-cycle one does)

    def fourth(ctx):
        _visit(name, ctx)

    def third(ctx):
        _visit(name, ctx)
        return fourth if phases > 3 else None

    def second(ctx):
        _visit(name, ctx)
        return third

    def first(ctx):
        _visit(name, ctx)
        return second

    return first


def make(name, phases=4, **kwargs):
    return Subtest(name=name, initial=chain(name, phases), **kwargs)


def make_gate_cycle(name):
    return Subtest(name=name, initial=chain(name, 3), toggled_gates=("SomeGate",))
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A pytester dir with the upgrade suite module and three trivial subtests."""
    package = pytester.mkpydir("tinysubs")
    (package / "_common.py").write_text(COMMON)
    extras = {"alpha": ", keps=(4381, 5055)", "beta": ", keps=(4381,)"}
    extras["gamma"] = ', requires=("example.com/v1",)'
    for name in TINY:
        extra = extras[name]
        (package / f"{name}.py").write_text(
            f'from tinysubs._common import make\nSUBTEST = make("{name}"{extra})\n'
        )
    gate_cycle = pytester.mkpydir("tinysubs/gate_cycle")
    for name in ("one", "two"):
        (gate_cycle / f"{name}.py").write_text(
            f'from tinysubs._common import make_gate_cycle\nSUBTEST = make_gate_cycle("{name}")\n'
        )
    pytester.makeini(
        "[pytest]\ne2e_dra_subtests = tinysubs\ne2e_dra_gate_cycle_subtests = tinysubs.gate_cycle\n"
    )
    for module in (
        "test_upgrade_downgrade.py",
        "test_control_plane_first.py",
        "test_feature_gate_cycle.py",
    ):
        (pytester.path / module).write_text((SUITE_DIR / module).read_text())
    artifacts = tmp_path / "artifacts"
    monkeypatch.setenv("ARTIFACTS", str(artifacts))
    monkeypatch.setenv("TINY_RECORD", str(tmp_path / "record.txt"))
    monkeypatch.setenv("CI", "true")
    for knob in ("TINY_FAIL", "TINY_SLEEP", "TINY_STEPS", "E2E_DRA_CONSOLE"):
        monkeypatch.delenv(knob, raising=False)
    return Tiny(pytester, tmp_path)


class Tiny:
    def __init__(self, pytester: pytest.Pytester, tmp_path: Path) -> None:
        self.pytester = pytester
        self.tmp_path = tmp_path

    def run(
        self,
        *args: str,
        suite: str = "test_upgrade_downgrade.py",
        cluster: DryCluster | None = None,
        cache: bool = False,
    ) -> pytest.RunResult:
        """pytest on ``suite`` in this process, with ``cluster`` (default: a plain one) as its
        cluster; with ``cache``, pytest's cache (``--lf``, ``--ff``, ``--sw``) is on."""
        no_cache = () if cache else ("-p", "no:cacheprovider")
        return self.pytester.runpytest(
            suite, *PLUGIN, *no_cache, *args, plugins=[cluster or DryCluster()]
        )

    def forget_visits(self) -> None:
        (self.tmp_path / "record.txt").unlink(missing_ok=True)
        (self.tmp_path / "artifacts").exists() and shutil.rmtree(self.tmp_path / "artifacts")

    def visited(self) -> list[str]:
        record = self.tmp_path / "record.txt"
        return record.read_text().split() if record.exists() else []

    def summary(self, suite: str = "upgrade-downgrade") -> dict:
        return json.loads((self.tmp_path / "artifacts" / suite / "summary.json").read_text())

    def narrative(self, suite: str = "upgrade-downgrade", subtest: str | None = None) -> str:
        """The suite's console.log, or a subtest's own narrative."""
        folder = self.tmp_path / "artifacts" / suite
        path = folder / "console.log" if subtest is None else folder / "console" / f"{subtest}.log"
        return path.read_text()

    def narrated(self, suite: str = "upgrade-downgrade") -> pytest.LineMatcher:
        """The suite's console.log, to match lines in as in pytest's output."""
        return pytest.LineMatcher(self.narrative(suite).splitlines())

    def dry_steps(self, suite: str = "upgrade-downgrade") -> list[str]:
        log = self.tmp_path / "artifacts" / suite / STEPS_LOG
        return log.read_text().split() if log.exists() else []


def _kinds(ids: list[str]) -> list[str]:
    """Entry ids with subtest names blanked: the shape of a run, whatever the shuffle did."""
    return [i.split("/", 1)[1] if "/" in i else f"step:{i}" for i in ids]


def test_steps_and_phases_run_in_upgrade_order(suite: Tiny) -> None:
    result = suite.run("--e2e-dra-seed=7")

    result.assert_outcomes(passed=19)
    ids = [r["id"] for r in suite.summary()["results"]]
    assert _kinds(ids) == (
        ["step:versions", "step:node-runtime", "step:bring-up"]
        + [PHASES[0]] * 3
        + ["step:upgrade"]
        + [PHASES[1]] * 3
        + ["step:downgrade"]
        + [PHASES[2]] * 3
        + ["step:re-upgrade"]
        + [PHASES[3]] * 3
        + ["step:cleanup"]
    )
    assert suite.dry_steps() == UPGRADE_STEPS
    # the subtests of a phase run at the same time: in any order within it
    visited = suite.visited()
    for phase in PHASES:
        at = [i for i, v in enumerate(visited) if v.endswith(phase)]
        assert len(at) == 3 and at == list(range(at[0], at[0] + 3))


def test_serial_runs_the_subtests_of_a_phase_in_plan_order(suite: Tiny) -> None:
    result = suite.run("--e2e-dra-seed=7", "--e2e-dra-serial")

    result.assert_outcomes(passed=19)
    ids = [r["id"] for r in suite.summary()["results"]]
    assert suite.visited() == [i for i in ids if "/" in i]


def test_the_subtests_of_a_phase_run_at_the_same_time(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each phase of alpha and beta waits until the other is in the same phase: only running
    together lets both pass (serial, the first to come waits alone and fails)."""
    monkeypatch.setenv("TINY_MEET", "alpha,beta")
    monkeypatch.setenv("TINY_MEET_DIR", str(tmp_path))

    suite.run().assert_outcomes(passed=19)

    suite.forget_visits()
    for meeting in tmp_path.glob("after-*"):
        meeting.unlink()
    serial = suite.run("--e2e-dra-serial")
    assert serial.parseoutcomes()["failed"] >= 1
    serial.stdout.fnmatch_lines(["*waited alone in after-cluster-creation*"])


def test_a_subtest_that_fails_in_a_batch_fails_its_own_test_with_its_own_lines(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade")

    result = suite.run("--e2e-dra-seed=7")

    result.assert_outcomes(passed=16, failed=1, skipped=2)
    (failed,) = [r for r in suite.summary()["results"] if r["outcome"] == "failed"]
    assert failed["id"] == "beta/after-cluster-upgrade"
    report = result.stdout.str()
    section = report[report.index("test_phase[beta/after-cluster-upgrade] _") :]
    assert "beta broke in after-cluster-upgrade on purpose" in section
    assert "beta visits after-cluster-upgrade" in section  # its own captured lines


def test_live_lines_of_a_phase_thread_name_their_subtest(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2E_DRA_CONSOLE", "detail")
    result = suite.run("--e2e-dra-seed=7")

    result.stdout.fnmatch_lines(["[[]??:??:??[]] alpha: alpha visits after-cluster-creation"])
    for phase in PHASES:
        assert sorted(v.split("/")[0] for v in suite.visited() if v.endswith(phase)) == list(TINY)


def test_failed_phase_skips_only_the_rest_of_its_chain(suite: Tiny, monkeypatch) -> None:
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade")

    result = suite.run("--e2e-dra-seed=3", "-rs")

    result.assert_outcomes(passed=16, failed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*beta broke in after-cluster-upgrade on purpose*",
            "*e2e-dra: upgrade-downgrade: phase 'after-cluster-upgrade' of subtest 'beta' failed*",
            "*SKIPPED*beta: phase 'after-cluster-upgrade' failed*",
        ]
    )
    assert [v for v in suite.visited() if v.startswith("beta/")] == [
        "beta/after-cluster-creation",
        "beta/after-cluster-upgrade",
    ]
    assert {f"{name}/{phase}" for name in ("alpha", "gamma") for phase in PHASES[2:]} <= set(
        suite.visited()
    )
    outcomes = {r["id"]: r["outcome"] for r in suite.summary()["results"]}
    assert outcomes["beta/after-cluster-upgrade"] == "failed"
    assert outcomes["beta/after-cluster-downgrade"] == "skipped"
    assert outcomes["beta/after-cluster-re-upgrade"] == "skipped"
    assert outcomes["re-upgrade"] == "passed"
    assert outcomes["cleanup"] == "passed"


def test_k_selects_one_subtest_through_all_phases_with_its_cluster_steps(suite: Tiny) -> None:
    result = suite.run("-k", "alpha", "-v")

    result.assert_outcomes(passed=11)
    assert suite.visited() == [f"alpha/{phase}" for phase in PHASES]
    assert suite.dry_steps() == UPGRADE_STEPS
    result.stdout.fnmatch_lines(["*collected 19 items / 8 deselected / 11 selected"])
    result.stdout.fnmatch_lines(
        [  # progress shows live, between pytest's lines for the step, as [HH:MM:SS] lines;
            # -v shows every line, not only the headlines
            "*test_cluster_step?upgrade? ",
            "[[]??:??:??[]] [[]1/1[]] upgrade-downgrade: cluster step upgrade (4/11 done)",
            "[[]??:??:??[]] dry run: cluster step upgrade does nothing",
            "*test_cluster_step?upgrade? PASSED*",
        ]
    )


def _failing_first_run(suite: Tiny, monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    """A run in which beta's phase after the upgrade fails; the next run starts afresh."""
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade")
    first = suite.run(*args, cache=True)
    # --sw stops the session at the failure (pytest says "interrupted")
    assert first.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    assert first.parseoutcomes()["failed"] == 1
    monkeypatch.setenv("TINY_FAIL", "")
    suite.forget_visits()


def test_lf_reruns_the_failed_phase_with_its_earlier_phases_and_cluster_steps(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_first_run(suite, monkeypatch)

    result = suite.run("--lf", cache=True)

    result.assert_outcomes(passed=9)  # seven cluster steps, beta's first two phases
    assert suite.visited() == ["beta/after-cluster-creation", "beta/after-cluster-upgrade"]
    assert suite.dry_steps() == UPGRADE_STEPS
    result.stdout.fnmatch_lines(["*collected 19 items / 10 deselected / 9 selected*"])


def test_ff_keeps_the_plan_order(suite: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    _failing_first_run(suite, monkeypatch)

    result = suite.run("--ff", "--e2e-dra-seed=7", cache=True)

    result.assert_outcomes(passed=19)
    assert suite.dry_steps() == UPGRADE_STEPS
    ids = suite.summary()["plan"]
    assert [r["id"] for r in suite.summary()["results"]] == ids
    assert ids[:3] == ["versions", "node-runtime", "bring-up"]


def test_sw_resumes_at_the_failed_phase_with_what_it_needs(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_first_run(suite, monkeypatch, "--sw", "--e2e-dra-seed=7")

    result = suite.run("--sw", "--e2e-dra-seed=7", cache=True)

    # --sw drops what ran before the failed phase; every chain still to finish needs its earlier
    # phases and the cluster steps again, so all of them run, in plan order, and nothing counts
    # as deselected
    result.assert_outcomes(passed=19)
    visited = suite.visited()
    assert visited.index("beta/after-cluster-creation") < visited.index(
        "beta/after-cluster-upgrade"
    )
    assert suite.dry_steps() == UPGRADE_STEPS
    assert "deselected" not in result.stdout.lines[-1]


def test_k_on_a_later_phase_brings_back_the_earlier_ones(suite: Tiny) -> None:
    result = suite.run("-k", "beta and after-cluster-downgrade")

    result.assert_outcomes(passed=10)  # seven cluster steps, beta's first three phases
    assert suite.visited() == [f"beta/{phase}" for phase in THREE_PHASES]


def test_k_on_the_re_upgrade_phase_brings_back_its_chain_and_every_cluster_step(
    suite: Tiny,
) -> None:
    result = suite.run("-k", "beta and after-cluster-re-upgrade", "-v", "--e2e-dra-seed=7")

    result.assert_outcomes(passed=11)  # seven cluster steps, beta's four phases
    result.stdout.fnmatch_lines(["*collected 19 items / 8 deselected / 11 selected"])
    in_plan_order = [
        "versions",
        "node-runtime",
        "bring-up",
        "beta/after-cluster-creation",
        "upgrade",
        "beta/after-cluster-upgrade",
        "downgrade",
        "beta/after-cluster-downgrade",
        "re-upgrade",
        "beta/after-cluster-re-upgrade",
        "cleanup",
    ]
    ran = re.findall(r"::test_(?:cluster_step|phase)\[([^\]]+)\] PASSED", result.stdout.str())
    assert ran == in_plan_order  # as pytest ran them
    assert [r["id"] for r in suite.summary()["results"]] == in_plan_order
    assert suite.visited() == [f"beta/{phase}" for phase in PHASES]
    assert suite.dry_steps() == UPGRADE_STEPS


def test_k_that_matches_no_phase_runs_no_cluster_step(suite: Tiny) -> None:
    result = suite.run("-k", "bring-up")

    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert suite.dry_steps() == []


def test_x_stops_at_the_first_failure_and_still_cleans_up(suite: Tiny, monkeypatch) -> None:
    monkeypatch.setenv("TINY_FAIL", "alpha/after-cluster-creation")

    result = suite.run("-x", "--e2e-dra-seed=11")

    result.assert_outcomes(failed=1, passed=result.parseoutcomes().get("passed", 0))
    assert "upgrade" not in suite.dry_steps()
    summary = suite.summary()
    assert summary["finished"] is True
    assert summary["results"][-1] == {
        **summary["results"][-1],
        "id": "alpha/after-cluster-creation",
        "outcome": "failed",
    }


def test_a_failed_cluster_step_skips_everything_after_it_but_the_cleanup(suite: Tiny) -> None:
    result = suite.run("-rs", cluster=DryCluster(fail_step="upgrade"))

    result.assert_outcomes(passed=7, failed=1, skipped=11)
    result.stdout.fnmatch_lines(["*SKIPPED*cluster step 'upgrade' failed*"])
    assert suite.dry_steps()[-1] == "cleanup"
    assert all(v.endswith(PHASES[0]) for v in suite.visited())


def test_subtest_the_cluster_cannot_serve_is_skipped_with_the_reason(suite: Tiny) -> None:
    result = suite.run("-rs", cluster=DryCluster(served={"v1"}))

    result.assert_outcomes(passed=15, skipped=4)
    result.stdout.fnmatch_lines(["*SKIPPED*gamma: needs example.com/v1*"])
    assert not [v for v in suite.visited() if v.startswith("gamma/")]


def test_a_chain_that_ends_after_the_downgrade_skips_only_its_re_upgrade_phase(
    suite: Tiny,
) -> None:
    """A subtest of three phases (its third returns None) among four-phase ones: in
    upgrade-downgrade its re-upgrade phase is skipped, saying why, and all else passes; in
    control-plane-first, which has no re-upgrade, nothing is skipped."""
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(
        'from tinysubs._common import make\nSUBTEST = make("delta", phases=3)\n'
    )
    reason = "delta: its chain ends after the downgrade (its third phase returned None)"

    result = suite.run("--e2e-dra-seed=3", "-rs")

    result.assert_outcomes(passed=22, skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED*{reason}*"])
    results = {r["id"]: r for r in suite.summary()["results"]}
    (skipped,) = [r for r in results.values() if r["outcome"] == "skipped"]
    assert skipped["id"] == "delta/after-cluster-re-upgrade"
    assert reason in skipped["message"]
    assert [results[f"delta/{phase}"]["outcome"] for phase in THREE_PHASES] == ["passed"] * 3
    assert all(
        results[f"{name}/{phase}"]["outcome"] == "passed" for name in TINY for phase in PHASES
    )
    assert "delta/after-cluster-re-upgrade" not in suite.visited()
    assert suite.dry_steps() == UPGRADE_STEPS

    suite.forget_visits()
    staged = suite.run("--e2e-dra-seed=3", "-rs", suite="test_control_plane_first.py")

    staged.assert_outcomes(passed=len(STAGED_STEPS) + 4 * len(THREE_PHASES))
    phases = [f"{name}/{phase}" for name in (*TINY, "delta") for phase in THREE_PHASES]
    results = {r["id"]: r["outcome"] for r in suite.summary("control-plane-first")["results"]}
    assert results == dict.fromkeys([*STAGED_STEPS, *phases], "passed")
    assert sorted(suite.visited()) == sorted(phases)
    assert suite.dry_steps("control-plane-first") == STAGED_STEPS


def test_a_new_variant_is_a_line_and_a_small_module(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant value under its name in SUITES (what its line of VARIANTS makes) and a module
    declaring that name are a suite: its items, its folder, its summary."""
    from e2e_dra._suite import suite_of
    from e2e_dra._suite._upgrade import NODE, Variant

    monkeypatch.setitem(SUITES, "node-first", suite_of(Variant("node-first", NODE, "node-")))
    (suite.pytester.path / "test_node_first.py").write_text(
        "from e2e_dra._suite._items import pytestmark, test_cluster_step, test_phase\n"
        'E2E_DRA_SUITE = "node-first"\n'
        '__all__ = ["pytestmark", "test_cluster_step", "test_phase"]\n'
    )

    result = suite.run("--e2e-dra-seed=3", suite="test_node_first.py")

    result.assert_outcomes(passed=len(STAGED_STEPS) + len(TINY) * len(THREE_PHASES))
    phases = [f"{name}/{phase}" for name in TINY for phase in THREE_PHASES]
    results = {r["id"]: r["outcome"] for r in suite.summary("node-first")["results"]}
    assert results == dict.fromkeys([*STAGED_STEPS, *phases], "passed")
    assert suite.dry_steps("node-first") == STAGED_STEPS


def _phase_order(summary: dict) -> list[str]:
    return [r["id"] for r in summary["results"] if "phase" in r]


def test_seed_is_printed_and_reproduces_the_order(suite: Tiny) -> None:
    first = suite.run()
    seed = re.search(r"--e2e-dra-seed=(\d+)", first.stdout.str())
    assert seed, first.stdout.str()
    first.stdout.fnmatch_lines([f"*subtest order seed {seed.group(1)}*"] * 2)
    order = _phase_order(suite.summary())
    assert suite.summary()["seed"] == int(seed.group(1))

    suite.run(f"--e2e-dra-seed={seed.group(1)}")
    assert _phase_order(suite.summary()) == order

    orders = set()
    for other in range(1, 9):
        suite.run(f"--e2e-dra-seed={other}")
        orders.add(tuple(_phase_order(suite.summary())))
    assert len(orders) > 1, "different seeds never changed the order"


def test_junit_has_one_case_per_phase_and_subtest_plus_the_cluster_steps(suite: Tiny) -> None:
    """--junitxml gets the suite's own document, named as testgrid shows the cases, with or
    without CI."""
    junit = suite.tmp_path / "junit.xml"

    suite.run(f"--junitxml={junit}", "--e2e-dra-seed=5")

    root = ET.parse(junit).getroot()
    names = sorted(case.get("name") for case in root.iter("testcase"))
    expected = [f"upgrade-downgrade {step}" for step in UPGRADE_STEPS] + [
        f"upgrade-downgrade {name} {phase}" for name in TINY for phase in PHASES
    ]
    assert names == sorted(expected)
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["e2e_dra_seed"] == "5"


def _junit_cases(path: Path) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in ET.parse(path).getroot().iter("testcase")}


def test_ci_writes_junit_per_suite_named_as_testgrid_shows_them(suite: Tiny, monkeypatch) -> None:
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade")
    suite.run("--e2e-dra-seed=3")
    suite.run("--e2e-dra-seed=3", suite="test_feature_gate_cycle.py")
    artifacts = suite.tmp_path / "artifacts"

    cases = _junit_cases(artifacts / "junit_e2e-dra_upgrade-downgrade.xml")
    assert set(cases) == {f"upgrade-downgrade {step}" for step in UPGRADE_STEPS} | {
        f"upgrade-downgrade {name} {phase}" for name in TINY for phase in PHASES
    }
    assert {case.get("classname") for case in cases.values()} == {"e2e-dra.upgrade-downgrade"}
    failure = cases["upgrade-downgrade beta after-cluster-upgrade"].find("failure")
    assert failure is not None
    assert "beta broke in after-cluster-upgrade on purpose" in failure.get("message", "")
    assert "e2e-dra: artifacts: upgrade-downgrade\n" in (failure.text or "")  # relative
    assert str(artifacts) not in (failure.text or "")
    skipped = cases["upgrade-downgrade beta after-cluster-downgrade"].find("skipped")
    assert skipped is not None and "after-cluster-upgrade' failed" in skipped.get("message", "")
    gate_cycle = _junit_cases(artifacts / "junit_e2e-dra_gate-cycle.xml")
    assert {"gate-cycle versions", "gate-cycle one bring-up", "gate-cycle two gate-off"} <= set(
        gate_cycle
    )


@pytest.mark.parametrize("where", ["ci", "junitxml"])
def test_junit_times_each_phase_of_a_batch_by_its_own_seconds_from_the_summary(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The three phases of a plan position run at the same time; pytest would give the first
    test the whole batch's time and the others about none. The cases' times are each phase's
    own, as summary.json has them, in CI's files and in --junitxml's alike."""
    slept = {"alpha": 0.6, "beta": 0.3, "gamma": 0.1}
    monkeypatch.setenv("TINY_SLEEP", ",".join(f"{name}={s}" for name, s in slept.items()))
    artifacts = suite.tmp_path / "artifacts"
    if where == "ci":
        suite.run("--e2e-dra-seed=7").assert_outcomes(passed=19)
        junit = artifacts / "junit_e2e-dra_upgrade-downgrade.xml"
    else:
        monkeypatch.delenv("CI")
        junit = suite.tmp_path / "mine.xml"
        suite.run("--e2e-dra-seed=7", f"--junitxml={junit}").assert_outcomes(passed=19)

    results = {r["id"]: r for r in suite.summary()["results"]}
    cases = _junit_cases(junit)
    for phase in PHASES:
        batch = [results[f"{name}/{phase}"] for name in slept]
        assert max(r["start"] for r in batch) < min(r["start"] + r["seconds"] for r in batch)
        for name, seconds in slept.items():
            timed = float(cases[f"upgrade-downgrade {name} {phase}"].get("time", ""))
            assert timed == pytest.approx(results[f"{name}/{phase}"]["seconds"], abs=0.1)
            assert seconds - 0.01 <= timed < seconds + 0.25, (name, phase, timed)


def test_steps_are_timed_in_the_summary_and_the_failing_one_is_named_everywhere(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_STEPS", "1")
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade")
    artifacts = suite.tmp_path / "artifacts"

    suite.run("--e2e-dra-seed=3").assert_outcomes(passed=16, failed=1, skipped=2)

    results = {r["id"]: r for r in suite.summary()["results"]}
    passed = results["alpha/after-cluster-creation"]
    assert [(s["name"], s["outcome"]) for s in passed["steps"]] == [
        ("look around", "passed"),
        ("check", "passed"),
        ("the part that breaks", "passed"),
    ]
    look = passed["steps"][0]
    assert look["seconds"] >= 0.04
    for step in passed["steps"]:  # inside the phase, on the results' clock
        assert passed["start"] - 0.01 <= step["start"]
        assert step["start"] + step["seconds"] <= passed["start"] + passed["seconds"] + 0.01
    assert "failed_step" not in passed

    failed = results["beta/after-cluster-upgrade"]
    assert [(s["name"], s["outcome"]) for s in failed["steps"]] == [
        ("look around", "passed"),
        ("check", "failed"),
        ("the part that breaks", "failed"),
    ]
    assert failed["failed_step"] == "the part that breaks"
    assert failed["message"].startswith(
        "in step 'the part that breaks': AssertionError: beta broke in after-cluster-upgrade"
    )

    failure = _junit_cases(artifacts / "junit_e2e-dra_upgrade-downgrade.xml")[
        "upgrade-downgrade beta after-cluster-upgrade"
    ].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("in step 'the part that breaks': ")
    assert "e2e-dra: in step 'the part that breaks' of phase 'after-cluster-upgrade'" in (
        failure.text or ""
    )

    html = (artifacts / "report.html").read_text()
    assert html.count("in step \u201cthe part that breaks\u201d") == 1  # the failed cell only
    trace = json.loads((artifacts / "trace.json").read_text())["traceEvents"]
    phase = next(e for e in trace if e.get("name") == "beta/after-cluster-upgrade")
    steps = [e for e in trace if e.get("args", {}).get("phase") == "beta/after-cluster-upgrade"]
    assert [e["name"] for e in steps] == ["look around", "check", "the part that breaks"]
    for step in steps:  # nested: on the phase's thread, inside its slice
        assert step["tid"] == phase["tid"]
        assert phase["ts"] <= step["ts"] and step["ts"] + step["dur"] <= phase["ts"] + phase["dur"]


def test_the_summary_names_each_subtests_keps_and_the_run_leaves_their_evidence(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-downgrade")
    suite.run("--e2e-dra-seed=7")

    assert suite.summary()["keps_by_subtest"] == {"alpha": [4381, 5055], "beta": [4381]}
    evidence = (suite.tmp_path / "artifacts" / "prr-evidence.md").read_text()
    structured = evidence[evidence.index("## KEP-4381") : evidence.index("## KEP-5055")]
    assert "Subtests: alpha, beta" in structured
    assert "- Upgrade tested: **yes**: after-cluster-upgrade passed in alpha, beta" in structured
    assert (
        "- Rollback (downgrade) tested: **NO**: after-cluster-downgrade failed in beta; "
        "passed in alpha"
    ) in structured
    assert (
        "- Upgrade -> downgrade -> upgrade tested: **NO**: after-cluster-re-upgrade skipped "
        "in beta; passed in alpha"
    ) in structured
    taints = evidence[evidence.index("## KEP-5055") :]
    assert taints.count("**yes**") == 3 and "beta" not in taints
    html = (suite.tmp_path / "artifacts" / "report.html").read_text()
    assert '<a href="prr-evidence.md">' in html


def test_junit_is_the_users_when_they_ask_for_it(suite: Tiny, tmp_path: Path) -> None:
    suite.run(f"--junitxml={tmp_path / 'mine.xml'}")

    assert (tmp_path / "mine.xml").is_file()
    assert not list((tmp_path / "artifacts").glob("junit_*.xml"))


def test_each_suite_leaves_a_report_trace_and_timed_summary(suite: Tiny) -> None:
    result = suite.run("--e2e-dra-seed=4")
    artifacts = suite.tmp_path / "artifacts"

    summary = suite.summary()
    assert summary["schema_version"] == 3
    starts = [r["start"] for r in summary["results"]]
    assert starts == sorted(starts) and starts[0] >= 0
    html = (artifacts / "report.html").read_text()
    assert all(f">{name}<" in html for name in TINY)
    trace = json.loads((artifacts / "trace.json").read_text())
    assert len([e for e in trace["traceEvents"] if e["ph"] == "X"]) == 19
    result.stdout.fnmatch_lines([f"e2e-dra: report: {artifacts / 'report.html'}"])


def test_a_report_that_cannot_be_written_is_said_and_fails_no_test(suite: Tiny) -> None:
    (suite.tmp_path / "artifacts" / "report.html").mkdir(parents=True)  # in the way

    result = suite.run("--e2e-dra-seed=4")

    result.assert_outcomes(passed=19)
    result.stdout.fnmatch_lines(["*e2e-dra: cannot write the run's report under *"])


def test_gate_cycle_gives_each_subtest_its_own_cluster(suite: Tiny) -> None:
    result = suite.run("--e2e-dra-seed=2", suite="test_feature_gate_cycle.py")

    result.assert_outcomes(passed=2 + 2 * 7)
    ids = [r["id"] for r in suite.summary("gate-cycle")["results"]]
    first, second = ids[2].split("/")[0], ids[9].split("/")[0]
    assert {first, second} == {"one", "two"}
    per_subtest = [
        "bring-up",
        "phase-0-gate-on",
        "gate-off",
        "phase-1-gate-off",
        "gate-on-again",
        "phase-2-gate-on-again",
        "cleanup",
    ]
    assert ids == ["versions", "node-runtime"] + [
        f"{name}/{step}" for name in (first, second) for step in per_subtest
    ]


def test_a_cleanup_is_told_the_bring_up_after_it_only_when_that_runs(suite: Tiny) -> None:
    """What lets the next cluster's control plane start while the last kubelet still works: the
    plan's StartNextEarly line after a cleanup, and no other step starts anything early."""

    def early() -> dict[str, str]:
        log = suite.tmp_path / "artifacts" / "gate-cycle" / EARLY_LOG
        return dict(line.split() for line in log.read_text().splitlines())

    suite.run("--e2e-dra-seed=2", suite="test_feature_gate_cycle.py")
    ids = [r["id"] for r in suite.summary("gate-cycle")["results"]]
    first, second = ids[2].split("/")[0], ids[9].split("/")[0]
    assert early()[f"{first}/cleanup"] == f"{second}/bring-up"
    assert early()[f"{second}/cleanup"] == "-"
    assert {step: said for step, said in early().items() if said != "-"} == {
        f"{first}/cleanup": f"{second}/bring-up"
    }

    suite.forget_visits()
    suite.run("--e2e-dra-seed=2", "-k", first, suite="test_feature_gate_cycle.py")
    assert early()[f"{first}/cleanup"] == "-"  # the next subtest was not selected


def test_a_safety_net_finding_fails_a_passing_phase_and_notes_a_failing_one(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    findings = {
        "alpha/after-cluster-creation": ["claim x allocated without any finalizer"],
        "beta/after-cluster-upgrade": ["driver y dropped fields"],
    }
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade")
    result = suite.run("--e2e-dra-seed=3", cluster=DryCluster(findings=findings))
    result.assert_outcomes(passed=12, failed=2, skipped=5)
    output = result.stdout.str()
    assert re.search(
        r"FAILED test_upgrade_downgrade.py::test_phase\[alpha/after-cluster-creation\] - "
        r"e2e_dra._suite._run.SafetyNetFailure: safety net: claim x allocated without any "
        r"finalizer",
        output,
    ), output
    assert "e2e-dra: safety net: driver y dropped fields" in output  # a note of beta's failure
    results = {r["id"]: r for r in suite.summary()["results"]}
    assert results["alpha/after-cluster-upgrade"]["outcome"] == "skipped"
    assert (
        "phase 'after-cluster-creation' failed" in results["alpha/after-cluster-upgrade"]["message"]
    )
    assert results["beta/after-cluster-upgrade"]["message"].startswith("AssertionError: beta broke")


@pytest.mark.parametrize(
    "suite_name",
    ["upgrade-downgrade", "control-plane-first", "kubelet-last", "gate-cycle"],
)
def test_the_backend_is_the_real_cluster_unless_a_plugin_of_the_run_gives_one(
    pytester: pytest.Pytester, tmp_path: Path, suite_name: str
) -> None:
    def ask(config: pytest.Config) -> object:
        return config.hook.pytest_e2e_dra_backend(
            config=config, suite=SUITES[suite_name], subtests={}, artifacts=tmp_path
        )

    plain = ask(pytester.parseconfigure(*PLUGIN))
    assert type(plain).__name__ == "RealCluster"
    assert plain.suite is SUITES[suite_name]

    dry = DryCluster()
    given = pytester.parseconfigure(*PLUGIN)
    given.pluginmanager.register(dry)
    assert isinstance(ask(given), DryBackend)


PLAIN = """
import logging

def test_plain():
    logging.getLogger("e2e_dra.releases").info("a progress line outside a suite")
    logging.getLogger("httpx").info("HTTP Request: GET https://dl.k8s.io")
"""


def log_in_every_test(suite: Tiny) -> None:
    """Each test of the tiny suite logs a progress line of ours, and an INFO line and a warning
    of another library's."""
    (suite.pytester.path / "conftest.py").write_text(
        "import logging\n\n"
        "def pytest_runtest_call(item):\n"
        "    logging.getLogger('e2e_dra.x').info('ours, during a test')\n"
        "    logging.getLogger('httpx').info('HTTP Request: not ours')\n"
        "    logging.getLogger('httpx').warning('a warning of theirs')\n"
    )


def test_a_suite_shows_only_progress_records_live(suite: Tiny, monkeypatch) -> None:
    """By default our headlines and anyone's warnings; with -v our other lines too; never
    another library's INFO lines. The narrative keeps what -v shows, whatever was shown."""
    monkeypatch.setenv("TINY_FAIL", "")
    log_in_every_test(suite)
    output = suite.run().stdout.str()
    assert "ours, during a test" not in output
    assert "a warning of theirs" in output
    assert "not ours" not in output
    assert "ours, during a test" in suite.narrative()
    assert "not ours" not in suite.narrative()

    verbose = suite.run("-v").stdout.str()
    assert "ours, during a test" in verbose
    assert "a warning of theirs" in verbose
    assert "not ours" not in verbose


def test_a_failed_phase_reports_progress_and_warnings_not_other_libraries_info(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_FAIL", "alpha/after-cluster-creation")
    log_in_every_test(suite)
    output = suite.run().stdout.str()
    report = output[output.index("Captured log call") :]
    assert "ours, during a test" in report
    assert "a warning of theirs" in report
    assert "HTTP Request" not in report


def test_a_run_without_a_suite_looks_as_without_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN)
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "live log" not in output and "a progress line outside a suite" not in output
    assert "test_plain.py::test_plain" not in output  # no -v forced by live logging


def test_a_users_live_logging_is_left_as_they_chose(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN)
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider", "--log-cli-level=INFO")
    result.stdout.fnmatch_lines(["INFO *a progress line outside a suite*"])
    assert "HTTP Request" in result.stdout.str()


def test_a_failed_test_outside_a_suite_reports_its_progress(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN + "    raise AssertionError('broke')\n")
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Captured log call*", "INFO *a progress line outside a suite"])


def test_a_subtest_declared_alone_runs_by_itself(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (suite.pytester.path / "tinysubs" / "gamma.py").write_text(
        'from tinysubs._common import make\nSUBTEST = make("gamma", alone=True)\n'
    )
    monkeypatch.setenv("TINY_MEET", "alpha,gamma")
    monkeypatch.setenv("TINY_MEET_DIR", str(tmp_path))

    result = suite.run("--e2e-dra-seed=7")

    result.stdout.fnmatch_lines(["*gamma waited alone in after-cluster-creation*"])


CLOSING_CONFTEST = """
import sys
import time
from pathlib import Path

sys.path.insert(0, {tests!r})
from dry_backend import DryBackend

from e2e_dra.hostkit import on_interrupt


class Closing(DryBackend):
    \"\"\"A cleanup that takes long, with the engine's kind of stop registered meanwhile.\"\"\"

    def close(self):
        on_interrupt(lambda why: Path({stopped!r}).write_text(why))
        Path({closing!r}).touch()
        time.sleep(60)


def pytest_e2e_dra_backend(suite, subtests, artifacts):
    return Closing(suite, subtests, artifacts)
"""


def test_a_sigterm_in_the_cleanup_after_a_failure_under_x_still_stops_the_cluster(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under -x a failed phase ends the session early, and the suite's cleanup then runs as the
    module fixture's teardown. A SIGTERM there (the job cancelled while it cleans up) must start
    the registered stops, which stop the cluster's processes, and end the job: not kill it on the
    spot and leave the cluster running (seen once, in a soak)."""
    closing, stopped = tmp_path / "closing", tmp_path / "stopped"
    suite.pytester.makeconftest(
        CLOSING_CONFTEST.format(
            tests=str(Path(__file__).parent), stopped=str(stopped), closing=str(closing)
        )
    )
    monkeypatch.setenv("TINY_FAIL", "alpha/after-cluster-creation")
    argv = [sys.executable, "-m", "pytest", "test_upgrade_downgrade.py", *PLUGIN, "-x"]
    with subprocess.Popen(
        [*argv, "-p", "no:cacheprovider", "--e2e-dra-seed=7"],
        cwd=suite.pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as job:
        deadline = time.monotonic() + 60
        while not closing.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert closing.exists(), f"the cleanup never started: {job.communicate(timeout=60)[0]}"
        job.send_signal(signal.SIGTERM)
        output, _ = job.communicate(timeout=30)

    assert stopped.exists(), f"the stops did not run: the job died of the signal:\n{output}"
    assert stopped.read_text() == "SIGTERM"
    assert job.returncode != 0


KNOWN_BUG = """
from e2e_dra.subtest import KnownBug
from tinysubs._common import make

SUBTEST = make(
    "delta",
    known_bugs=(
        KnownBug(
            issue=139651,
            component="kube-scheduler",
            releases=">=1.36.0,<1.36.3",
            phase="after-cluster-downgrade",
            what="breaks the phase after the downgrade",
            sign="broke in after-cluster-downgrade",
        ),
    ),
)
"""


def _with_known_bug(suite: Tiny) -> None:
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(KNOWN_BUG)


def test_a_phase_a_known_bug_breaks_is_an_expected_failure_naming_the_bug(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_known_bug(suite)
    monkeypatch.setenv("TINY_FAIL", "delta/after-cluster-downgrade")
    buggy = DryCluster(releases={"kube-scheduler": "v1.36.2"})

    result = suite.run("--e2e-dra-seed=3", "-rx", cluster=buggy)

    result.assert_outcomes(passed=21, xfailed=1, skipped=1)  # delta's chain ends there
    result.stdout.fnmatch_lines(
        [
            "XFAIL*delta/after-cluster-downgrade*known Kubernetes bug kubernetes#139651 "
            "(kube-scheduler v1.36.2): breaks the phase after the downgrade*"
            "seen as: delta broke in after-cluster-downgrade on purpose*"
        ]
    )
    results = {r["id"]: r for r in suite.summary()["results"]}
    assert results["delta/after-cluster-downgrade"]["outcome"] == "xfailed"
    assert "kubernetes/issues/139651" in results["delta/after-cluster-downgrade"]["message"]
    assert results["delta/after-cluster-re-upgrade"]["outcome"] == "skipped"
    assert all(results[f"{name}/after-cluster-re-upgrade"]["outcome"] == "passed" for name in TINY)


UNREADABLE_SUMMARIES = """
import os
from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # as a suite that ended before its summary was written: nothing of it can be read
    for summary in Path(os.environ["ARTIFACTS"]).glob("*/summary.json"):
        summary.write_text("{")
"""


@pytest.mark.parametrize("where", ["ci", "junitxml"])
@pytest.mark.parametrize("summary", ["read", "unreadable"])
def test_junit_marks_every_known_bug_as_one_with_or_without_the_summary(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch, where: str, summary: str
) -> None:
    """A known bug's case carries the properties ``known-bug`` and ``known-bug-url`` and says the
    bug in its message and text, whether the case comes from summary.json or, when that cannot
    be read (the suite ended before writing it), from pytest's xfail alone."""
    _with_known_bug(suite)
    monkeypatch.setenv("TINY_FAIL", "delta/after-cluster-downgrade")
    if summary == "unreadable":
        (suite.pytester.path / "conftest.py").write_text(UNREADABLE_SUMMARIES)
    artifacts = suite.tmp_path / "artifacts"
    junit = suite.tmp_path / "mine.xml"
    args = [f"--junitxml={junit}"] if where == "junitxml" else []
    buggy = DryCluster(releases={"kube-scheduler": "v1.36.2"})

    result = suite.run("--e2e-dra-seed=3", *args, cluster=buggy)

    result.assert_outcomes(passed=21, xfailed=1, skipped=1)
    path = junit if where == "junitxml" else artifacts / "junit_e2e-dra_upgrade-downgrade.xml"
    cases = _junit_cases(path)
    case = cases.pop("upgrade-downgrade delta after-cluster-downgrade")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    url = "https://github.com/kubernetes/kubernetes/issues/139651"
    assert properties == {"known-bug": "kubernetes#139651", "known-bug-url": url}
    skipped = case.find("skipped")
    assert skipped is not None
    said = f"known Kubernetes bug kubernetes#139651 ({url}), seen as declared (not a failure): "
    assert skipped.get("message", "").startswith(said)
    assert (skipped.text or "").startswith(said)
    assert "breaks the phase after the downgrade" in skipped.get("message", "")
    assert [name for name, c in cases.items() if c.find("properties") is not None] == []


def test_a_safety_net_finding_beside_a_known_bug_fails_the_phase_instead_of_hiding_in_it(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_known_bug(suite)
    monkeypatch.setenv("TINY_FAIL", "delta/after-cluster-downgrade")
    findings = {"delta/after-cluster-downgrade": ["claim z allocated without any finalizer"]}
    buggy = DryCluster(releases={"kube-scheduler": "v1.36.2"}, findings=findings)

    result = suite.run("--e2e-dra-seed=3", cluster=buggy)

    result.assert_outcomes(passed=21, failed=1, skipped=1)
    results = {r["id"]: r for r in suite.summary()["results"]}
    failed = results["delta/after-cluster-downgrade"]
    assert failed["outcome"] == "failed"
    assert failed["message"].startswith(
        "safety net: claim z allocated without any finalizer (beside known Kubernetes bug "
        "kubernetes#139651"
    )


def test_a_safety_net_saying_the_known_bug_in_its_sign_leaves_the_phase_an_expected_failure(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The allocation oracle words a scheduler bug its own way: a sign that names those words
    too keeps the one defect one expected failure, while any other finding still fails it."""
    net_said = "rule 'constraints': claim z: distinctAttribute numa repeats"
    either = 'sign="broke in after-cluster-downgrade|rule .constraints.*distinctAttribute",'
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(
        KNOWN_BUG.replace('sign="broke in after-cluster-downgrade",', either)
    )
    monkeypatch.setenv("TINY_FAIL", "delta/after-cluster-downgrade")
    findings = {"delta/after-cluster-downgrade": [net_said]}
    buggy = DryCluster(releases={"kube-scheduler": "v1.36.2"}, findings=findings)

    result = suite.run("--e2e-dra-seed=3", cluster=buggy)

    result.assert_outcomes(passed=21, xfailed=1, skipped=1)
    results = {r["id"]: r for r in suite.summary()["results"]}
    assert results["delta/after-cluster-downgrade"]["outcome"] == "xfailed"


def test_a_known_bugs_sign_in_a_failure_of_another_step_is_a_failure_of_its_own(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_a_step = KNOWN_BUG.replace(
        'sign="broke in after-cluster-downgrade",',
        'sign="broke in after-cluster-downgrade", during="a step the failure is not in",',
    )
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(in_a_step)
    monkeypatch.setenv("TINY_FAIL", "delta/after-cluster-downgrade")

    result = suite.run(
        "--e2e-dra-seed=3", cluster=DryCluster(releases={"kube-scheduler": "v1.36.2"})
    )

    result.assert_outcomes(passed=21, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*in a step named with 'a step the failure is not in'*"])


def test_a_phase_a_known_bug_should_break_fails_the_run_when_it_passes(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_known_bug(suite)
    buggy = DryCluster(releases={"kube-scheduler": "v1.36.0"})

    result = suite.run("--e2e-dra-seed=3", cluster=buggy)

    result.assert_outcomes(passed=21, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "FAILED*delta/after-cluster-downgrade*KnownBugNotSeen: known Kubernetes bug "
            "kubernetes#139651 (kube-scheduler v1.36.0)*should have broken phase "
            "'after-cluster-downgrade'*"
        ]
    )


def test_a_known_bug_is_expected_only_on_the_releases_that_have_it(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_known_bug(suite)
    fixed = DryCluster(releases={"kube-scheduler": "v1.36.3"})
    assert suite.run("--e2e-dra-seed=3", cluster=fixed).ret == 0

    suite.forget_visits()
    monkeypatch.setenv("TINY_FAIL", "delta/after-cluster-downgrade")
    result = suite.run("--e2e-dra-seed=3", cluster=fixed)
    result.assert_outcomes(passed=21, failed=1, skipped=1)  # on a fixed release: a failure


def test_a_known_bug_names_a_phase_a_suite_has() -> None:
    from e2e_dra.subtest import KnownBug

    with pytest.raises(ValueError, match="'after-the-party' is not a phase of a suite"):
        KnownBug(1, "kubelet", "<1.36", "never", "x", phase="after-the-party")
    assert KnownBug(1, "kubelet", "<1.36", "never", "x", step="re-upgrade").step == "re-upgrade"
    with pytest.raises(ValueError, match="step 'cleanup' is not one of"):
        KnownBug(1, "kubelet", "<1.36", "never", "x", step="cleanup")
    with pytest.raises(Exception, match=r"1\.36\.x"):
        KnownBug(1, "kubelet", "<1.36.x", "never", "x")
    with pytest.raises(Exception, match="unterminated"):
        KnownBug(1, "kubelet", "<1.36", "never", "(x")


def test_a_component_that_ends_while_nothing_waits_fails_the_phases_it_ended_in(
    suite: Tiny,
) -> None:
    crashing = DryCluster(crash_in="beta/after-cluster-upgrade")

    result = suite.run("--e2e-dra-seed=3", "-rs", cluster=crashing)

    # The three phases of after-cluster-upgrade ran together while it ended: each fails, naming
    # the component; everything after them is skipped but the cleanup.
    result.assert_outcomes(passed=8, failed=3, skipped=8)
    outcomes = {r["id"]: r for r in suite.summary()["results"]}
    for name in TINY:
        upgraded = outcomes[f"{name}/after-cluster-upgrade"]
        assert upgraded["outcome"] == "failed"
        assert "ComponentCrashed: component crashed: kube-scheduler" in upgraded["message"]
        for later in PHASES[2:]:
            assert outcomes[f"{name}/{later}"]["outcome"] == "skipped"
    assert outcomes["downgrade"]["outcome"] == "skipped"
    assert outcomes["re-upgrade"]["outcome"] == "skipped"
    assert outcomes["cleanup"]["outcome"] == "passed"


CRASH_BUG = """
from e2e_dra.subtest import KnownBug
from tinysubs._common import make

SUBTEST = make(
    "delta",
    known_bugs=(
        KnownBug(141323, "kube-scheduler", "==1.37.0", "crashes the scheduler", "kube-scheduler"),
    ),
)
"""


def test_a_known_bug_that_crashes_a_component_costs_only_its_own_phase(suite: Tiny) -> None:
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(CRASH_BUG)
    crashing = DryCluster(
        releases={"kube-scheduler": "v1.37.0"}, crash_in="delta/after-cluster-creation"
    )

    result = suite.run("--e2e-dra-seed=3", "-rxs", cluster=crashing)

    # The crash is delta's expected failure; the scheduler is started again and every other
    # subtest goes on through the upgrade, the downgrade and the re-upgrade.
    result.assert_outcomes(passed=19, xfailed=1, skipped=3)
    suite.narrated().fnmatch_lines(
        ["*known bug contained: the objects of delta removed; kube-scheduler started again*"]
    )
    outcomes = {r["id"]: r["outcome"] for r in suite.summary()["results"]}
    assert outcomes["delta/after-cluster-creation"] == "xfailed"
    assert [outcomes[f"delta/{phase}"] for phase in PHASES[1:]] == ["skipped"] * 3  # it ended
    assert all(outcomes[f"{name}/{phase}"] == "passed" for name in TINY for phase in PHASES)


INDEPENDENT_BUG = """
from e2e_dra.subtest import KnownBug, Subtest
from e2e_dra.subtest_kit import every_phase


def check(ctx):
    if not ctx.phase.endswith("upgrade"):  # the release before the upgrade has the bug
        raise AssertionError("the allocator gave numa 1, 2, 1")


SUBTEST = Subtest(
    name="delta",
    initial=every_phase(check),
    known_bugs=(KnownBug(140438, "kube-scheduler", "<1.37", "repeats values", r"numa 1, 2, 1"),),
)
"""


def test_a_known_bug_in_independent_phases_does_not_end_the_chain(suite: Tiny) -> None:
    """Phases made by every_phase share nothing: after the known bug broke the first, the chain
    goes on, passes on the upgraded release (strictly: there the bug is not expected), is
    expected to fail again after the downgrade, and passes again after the re-upgrade."""
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(INDEPENDENT_BUG)
    cluster = DryCluster(
        releases={"kube-scheduler": "v1.36.5"}, upgraded={"kube-scheduler": "v1.37.2"}
    )

    result = suite.run("--e2e-dra-seed=3", "-rx", cluster=cluster)

    result.assert_outcomes(passed=21, xfailed=2)
    outcomes = {r["id"]: r["outcome"] for r in suite.summary()["results"]}
    assert [outcomes[f"delta/{phase}"] for phase in PHASES] == [
        "xfailed",
        "passed",
        "xfailed",
        "passed",
    ]


def test_another_failure_on_a_known_bugs_releases_is_a_failure_not_the_bug(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(
        KNOWN_BUG.replace(
            'what="breaks the phase after the downgrade",', 'what="x", sign="makeslice",'
        ).replace('sign="broke in after-cluster-downgrade",', "")
    )
    monkeypatch.setenv("TINY_FAIL", "delta/after-cluster-downgrade")

    result = suite.run(
        "--e2e-dra-seed=3", cluster=DryCluster(releases={"kube-scheduler": "v1.36.2"})
    )

    result.assert_outcomes(passed=21, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*known Kubernetes bug kubernetes#139651 (kube-scheduler v1.36.2): x*was expected to "
            "break this, but this failure does not show its sign ('makeslice'): it is a "
            "failure of its own*"
        ]
    )


CONFINED_BUG = """
import os
import time

from e2e_dra.subtest import KnownBug, Subtest
from e2e_dra.subtest_kit import every_phase


def check(ctx):
    where = os.environ["TINY_MEET_DIR"]
    open(os.path.join(where, f"{ctx.phase}-delta"), "w").close()
    deadline = time.monotonic() + 5
    while not os.path.exists(os.path.join(where, f"{ctx.phase}-alpha")):
        if time.monotonic() > deadline:
            raise AssertionError(f"delta waited alone in {ctx.phase}")
        time.sleep(0.01)
    if not ctx.phase.endswith("upgrade"):  # the release before the upgrade has the bug
        raise AssertionError("its own pod was evicted")


SUBTEST = Subtest(
    name="delta",
    initial=every_phase(check),
    known_bugs=(
        KnownBug(
            143376, "kube-controller-manager", "<1.37", "evicts", "own pod was", confined=True
        ),
    ),
)
"""


def test_a_phase_a_confined_known_bug_breaks_runs_with_the_others_and_contains_nothing(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bug acts on the subtest's own pod only: its phases still meet alpha's (they run at
    the same time), are expected failures on the buggy release, and nothing is torn down or
    started again after them."""
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(CONFINED_BUG)
    monkeypatch.setenv("TINY_MEET", "alpha,delta")
    monkeypatch.setenv("TINY_MEET_DIR", str(tmp_path))
    cluster = DryCluster(
        releases={"kube-controller-manager": "v1.36.5"},
        upgraded={"kube-controller-manager": "v1.37.2"},
    )

    result = suite.run("--e2e-dra-seed=3", "-rx", cluster=cluster)

    result.assert_outcomes(passed=21, xfailed=2)
    outcomes = {r["id"]: r["outcome"] for r in suite.summary()["results"]}
    assert [outcomes[f"delta/{phase}"] for phase in PHASES] == [
        "xfailed",
        "passed",
        "xfailed",
        "passed",
    ]
    narrated = suite.narrated()
    narrated.fnmatch_lines(["*known bug confined to delta's own objects: nothing contained*"])
    seen = [line for line in live_lines(result.stdout.str()) if "known bug seen" in line]
    assert [line.split(": ")[1] for line in seen] == [
        "known bug seen in delta/after-cluster-creation",
        "known bug seen in delta/after-cluster-downgrade",
    ]
    assert all("kubernetes#143376" in line for line in seen)
    narrated.no_fnmatch_line("*known bug contained: the objects of delta removed*")


STEP_BUG = """
from e2e_dra.subtest import KnownBug
from tinysubs._common import make

SUBTEST = make(
    "delta",
    known_bugs=(
        KnownBug(139651, "kube-scheduler", "<1.36.3", "panics", "fails as asked", step="downgrade"),
    ),
)
"""


def test_a_known_bug_that_breaks_a_cluster_step_ends_only_its_subtests_chain(suite: Tiny) -> None:
    (suite.pytester.path / "tinysubs" / "delta.py").write_text(STEP_BUG)
    buggy = DryCluster(releases={"kube-scheduler": "v1.36.2"}, fail_step="downgrade")

    result = suite.run("--e2e-dra-seed=3", "-rxs", cluster=buggy)

    # The downgrade is delta's expected failure: delta's objects are removed and its phases
    # after it skipped; every other subtest goes on after the downgrade.
    result.assert_outcomes(passed=20, xfailed=1, skipped=2)
    outcomes = {r["id"]: r for r in suite.summary()["results"]}
    assert outcomes["downgrade"]["outcome"] == "xfailed"
    assert (
        "seen as: dry run: cluster step downgrade fails as asked"
        in (outcomes["downgrade"]["message"])
    )
    for later in PHASES[2:]:
        assert outcomes[f"delta/{later}"]["outcome"] == "skipped"
        assert "broke downgrade" in outcomes[f"delta/{later}"]["message"]
        assert all(outcomes[f"{name}/{later}"]["outcome"] == "passed" for name in TINY)
    assert outcomes["re-upgrade"]["outcome"] == "passed"

    suite.forget_visits()  # a release without the bug: the downgrade must pass, and does here
    fixed = DryCluster(releases={"kube-scheduler": "v1.36.3"})
    assert suite.run("--e2e-dra-seed=3", cluster=fixed).ret == 0
    buggy_but_passing = DryCluster(releases={"kube-scheduler": "v1.36.2"})
    result = suite.run("--e2e-dra-seed=3", cluster=buggy_but_passing)
    result.stdout.fnmatch_lines(["*KnownBugNotSeen*should have broken cluster step 'downgrade'*"])


# --- the console and the narrative ---------------------------------------------------------------

STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")
PAIR = ("v1.37.2", "v1.38.0-beta.0")


HEADLINE = re.compile(r"\[\d\d:\d\d:\d\d\] \[\d+/\d+\] ")
"""A suite's headline, wherever it is on a line of pytest's output."""


def live_lines(output: str) -> list[str]:
    """The progress lines of a pytest output, without their time stamps: only lines that start
    with one (a live line never follows pytest's outcome letters on their line)."""
    return [STAMP.sub("", line) for line in output.splitlines() if STAMP.match(line)]


@pytest.mark.parametrize("verbosity", [(), ("-v",)], ids=["default", "verbose"])
def test_every_headline_starts_a_line_of_its_own_among_pytests_progress(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch, verbosity: tuple[str, ...]
) -> None:
    """pytest writes each test's letter (``.``, ``F``, ``x``, ``s``) or word where it left off;
    the headlines of two suites (steps, batches, a failure, a known bug, the verdicts) come
    between them, each whole and at the first column, never after a letter
    (``....[2/2] control-plane-first``)."""
    _with_known_bug(suite)
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade,delta/after-cluster-downgrade")
    buggy = DryCluster(releases={"kube-scheduler": "v1.36.2"}, versions=PAIR)

    result = suite.run("test_control_plane_first.py", "--e2e-dra-seed=7", *verbosity, cluster=buggy)

    lines = result.stdout.str().splitlines()
    said = [line for line in lines if HEADLINE.search(line)]
    assert [line for line in said if not HEADLINE.match(line)] == []
    assert any(": FAILED beta/after-cluster-upgrade" in line for line in said)
    assert any(": known bug seen in delta/after-cluster-downgrade" in line for line in said)
    verdicts = [line for line in said if ": FAILED: " in line]
    assert [line[len("[HH:MM:SS] ") :].split()[0] for line in verdicts] == ["[1/2]", "[2/2]"]
    assert len(said) > 25


def test_the_console_shows_headlines_and_the_narrative_keeps_every_line(
    suite: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINY_FAIL", "beta/after-cluster-upgrade")

    result = suite.run("--e2e-dra-seed=7", cluster=DryCluster(versions=PAIR))

    result.assert_outcomes(passed=16, failed=1, skipped=2)
    folder = suite.tmp_path / "artifacts" / "upgrade-downgrade"
    # How long each part took depends on the machine: a loaded one says 1s where another says 0s.
    shown = [re.sub(r" in \d+s\b", " in 0s", line) for line in live_lines(result.stdout.str())]
    head = "[1/1] upgrade-downgrade"
    expected = [
        f"{head}: cluster step versions (0/19 done)",
        f"{head} v1.37.2 -> v1.38.0-beta.0: 3 subtests, 19 tests",
        f"{head}: cluster step node-runtime (1/19 done)",
        f"{head}: cluster step bring-up (2/19 done)",
        f"{head}: after-cluster-creation: 3 subtests together in 0s: 3 passed (6/19 done)",
        f"{head}: cluster step upgrade (6/19 done)",
        f"{head}: FAILED beta/after-cluster-upgrade: AssertionError: beta broke in "
        "after-cluster-upgrade on purpose",
        f"{head}: after-cluster-upgrade: 3 subtests together in 0s: 2 passed, 1 failed "
        "(10/19 done)",
        f"{head}: cluster step downgrade (10/19 done)",
        f"{head}: after-cluster-downgrade: 2 subtests together in 0s: 2 passed (14/19 done)",
        f"{head}: cluster step re-upgrade (14/19 done)",
        f"{head}: after-cluster-re-upgrade: 2 subtests together in 0s: 2 passed (17/19 done)",
        f"{head}: cluster step cleanup (18/19 done)",
        f"{head}: FAILED: 16 passed, 1 failed, 2 skipped in 0s; summary {folder}/summary.json; "
        f"console log {folder}/console.log; report {folder.parent}/report.html",
    ]
    assert shown == expected
    # every line, headlines included, in the suite's narrative, each subtest's also in its own
    narrative = suite.narrative().splitlines()
    assert [STAMP.sub("", line) for line in narrative if head in line] == expected
    assert any(line.endswith("] alpha: alpha visits after-cluster-creation") for line in narrative)
    assert any(line.endswith("dry run: cluster step upgrade does nothing") for line in narrative)
    beta = suite.narrative(subtest="beta")
    assert "beta visits after-cluster-upgrade" in beta and "alpha visits" not in beta
    assert "beta visits after-cluster-downgrade" not in beta  # its chain ended
    # where the report finds them: the summary, and the failed phase's logs
    summary = suite.summary()
    assert summary["console"] == {
        "log": "console.log",
        "subtests": {name: f"console/{name}.log" for name in TINY},
    }
    (failed,) = [r for r in summary["results"] if r["outcome"] == "failed"]
    assert {"label": "beta's console lines", "path": "console/beta.log"} in failed["logs"]


def test_a_verdict_counts_what_x_left_unrun(suite: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_FAIL", "gamma/after-cluster-creation")

    result = suite.run("--e2e-dra-seed=7", "-x")

    shown = live_lines(result.stdout.str())
    assert shown[-1].startswith("[1/1] upgrade-downgrade: FAILED: 3 passed, 1 failed, 15 not run")


def test_each_suite_of_a_run_says_its_place_in_it(suite: Tiny) -> None:
    result = suite.run("test_control_plane_first.py", "--e2e-dra-seed=7")

    banners = [line for line in live_lines(result.stdout.str()) if "subtests, " in line]
    assert banners == [
        "[1/2] upgrade-downgrade: 3 subtests, 19 tests",
        "[2/2] control-plane-first: 3 subtests, 15 tests",
    ]
    verdicts = [line for line in live_lines(result.stdout.str()) if ": PASSED: " in line]
    assert [line.split(":")[0] for line in verdicts] == [
        "[1/2] upgrade-downgrade",
        "[2/2] control-plane-first",
    ]
    for name in ("upgrade-downgrade", "control-plane-first"):  # each its own narrative
        own = suite.narrative(name)
        assert f"] {name}" in own
        other = "upgrade-downgrade" if name == "control-plane-first" else "control-plane-first"
        assert f"] {other}" not in own
