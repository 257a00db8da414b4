"""The production-readiness evidence: each subtest names the KEPs it exercises, summary.json keeps
them, and the report says per KEP what each run proved (the page's section, prr-evidence.md):
yes only for a phase that passed with something to prove in every subtest naming the KEP, and
plainly NO, with what happened, for one that failed, was skipped or never ran."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from synthetic_run import synthetic_run

from e2e_dra.cli import main
from e2e_dra.errors import EXIT_LOCAL
from e2e_dra.report import (
    EVIDENCE_FILE,
    KEPS,
    KEPS_BY_SUBTEST,
    SummaryError,
    kep_url,
    load_summary,
    summaries_of,
    write_report,
)
from e2e_dra.report._evidence import GATE_QUESTIONS, UPGRADE_QUESTIONS, Evidence
from e2e_dra.report._limits import MAX_EVIDENCE_TEXT
from e2e_dra.subtest import GATE_CYCLE_PHASES, PHASES, Subtest, discover

STATES = {
    "0-initial-1.37": "v1.37.2",
    "1-v1.38.0-beta.0": "v1.38.0-beta.0",
    "2-restored-1.37": "v1.37.2",
    "3-re-upgraded-v1.38.0-beta.0": "v1.38.0-beta.0",
}
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
PATH = "v1.37.2 -> v1.38.0-beta.0 -> v1.37.2 -> v1.38.0-beta.0"
CLUSTER_STEPS = dict(zip(PHASES, ("bring-up", "upgrade", "downgrade", "re-upgrade"), strict=True))
"""The cluster step before each phase."""


def _steps(*names: str, outcome: str = "passed") -> list[dict[str, Any]]:
    return [
        {"name": n, "start": 1.0 + i, "seconds": 0.5, "outcome": outcome}
        for i, n in enumerate(names)
    ]


def _phase(subtest: str, phase: str, outcome: str = "passed", **more: Any) -> dict[str, Any]:
    checks = _steps(f"{subtest} checked in {phase}") if outcome == "passed" else []
    return {"id": f"{subtest}/{phase}", "outcome": outcome, "seconds": 1.0, "start": 1.0,
            "phase": phase, "subtest": subtest, "steps": checks} | more  # fmt: skip


def _upgrade_run(
    folder: Path, keps: dict[str, list[int]], outcomes: dict[str, str] | None = None, **doc: Any
) -> Path:
    """An upgrade-downgrade summary in ``folder`` of the subtests ``keps`` names, each through
    the four phases, passed unless ``outcomes`` (``"subtest/phase": outcome``) says otherwise."""
    outcomes = outcomes or {}
    results: list[dict[str, Any]] = [
        {"id": "versions", "outcome": "passed", "seconds": 1.0, "start": 0.0, "step": "versions"}
    ]
    for phase in PHASES:
        step = CLUSTER_STEPS[phase]
        results.append({"id": step, "outcome": "passed", "seconds": 1.0, "start": 0.0,
                        "step": step})  # fmt: skip
        for subtest in keps:
            outcome = outcomes.get(f"{subtest}/{phase}", "passed")
            results.append(_phase(subtest, phase, outcome, message=f"{subtest} {outcome} here"))
    summary = {
        "schema_version": 3,
        "suite": "upgrade-downgrade",
        "started": "2026-12-01T18:10:12+0000",
        "finished": True,
        "current": {"version": "v1.38.0-beta.0"},
        "binaries": {state: dict.fromkeys(COMPONENTS, v) for state, v in STATES.items()},
        KEPS_BY_SUBTEST: keps,
        "plan": [result["id"] for result in results],
        "results": results,
    } | doc
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder / "summary.json"


def _report(*summaries: Path, out: Path) -> tuple[str, str]:
    """(the page, prr-evidence.md) of ``summaries`` written into ``out``."""
    written = write_report(list(summaries), out)
    assert written.evidence == out / EVIDENCE_FILE
    return written.html.read_text(), (out / EVIDENCE_FILE).read_text()


def _section(markdown: str, number: int) -> str:
    """The Markdown of one KEP, up to the next KEP's heading."""
    start = markdown.index(f"## KEP-{number}")
    end = markdown.find("\n## KEP-", start + 1)
    return markdown[start : end if end >= 0 else len(markdown)]


# --- the subtests' KEPs ---------------------------------------------------------------------------


def test_every_subtest_names_the_keps_it_exercises_from_the_table() -> None:
    subtests = discover() + discover("e2e_dra.subtests.gate_cycle", gate_cycle=True)

    named = {number for s in subtests for number in s.keps}
    assert [s.name for s in subtests if not s.keps] == []
    assert named <= set(KEPS)
    assert named == set(KEPS)  # the table holds no KEP that no subtest exercises
    assert all(isinstance(title, str) and title for title in KEPS.values())
    by_name = {s.name: s.keps for s in discover()}
    assert by_name["core-dra"] == (4381,)
    assert by_name["workload-resourceclaims"] == (5729,)
    assert (
        4817 in by_name["binding-conditions"]
    )  # its device status is DRAResourceClaimDeviceStatus


@pytest.mark.parametrize(
    ("keps", "said"),
    [((1234,), "KEP 1234 is not in e2e_dra.report.KEPS"), ((True,), "KEP True is not"),
     (("4381",), "KEP '4381' is not"), ((4381, 4381), "a KEP is named twice")],
)  # fmt: skip
def test_a_subtest_naming_a_kep_outside_the_table_fails_when_it_is_made(
    keps: tuple[Any, ...], said: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        Subtest(name="x", initial=lambda ctx: None, keps=keps)


def test_the_reports_phases_are_the_suites() -> None:
    """The report may not import the subtests' layer: its copy of the phase names is kept in
    step here."""
    assert [phase for phase, _ in UPGRADE_QUESTIONS] == list(PHASES[1:])
    assert [phase for phase, _ in GATE_QUESTIONS] == list(GATE_CYCLE_PHASES[1:])


# --- summary.json ---------------------------------------------------------------------------------


def test_the_summary_keeps_each_subtests_keps_beside_the_backends_own_subtests_key(
    tmp_path: Path,
) -> None:
    from e2e_dra._suite._artifacts import Summary

    described = {"subtests": {"a": {"gates": "G=true"}}, KEPS_BY_SUBTEST: "the backend's"}
    keps = {"a": (4381, 5055), "b": ()}
    Summary(tmp_path, "s", 1, [], lambda: described, keps=keps).write()

    data = json.loads((tmp_path / "summary.json").read_text())
    assert data[KEPS_BY_SUBTEST] == {"a": [4381, 5055]}
    assert data["subtests"] == {"a": {"gates": "G=true"}}  # the gate cycle's, untouched
    assert load_summary(tmp_path / "summary.json").keps == {"a": (4381, 5055)}


def test_a_summary_from_before_keps_reads_with_none_and_the_evidence_says_so(
    tmp_path: Path,
) -> None:
    path = _upgrade_run(tmp_path / "s", {"core-dra": [4381]})
    doc = json.loads(path.read_text())
    del doc[KEPS_BY_SUBTEST]
    doc["schema_version"] = 2
    path.write_text(json.dumps(doc))

    assert load_summary(path).keps == {}
    html, markdown = _report(path, out=tmp_path)
    assert "No summary names the KEPs its subtests exercise" in markdown
    assert "No summary names the KEPs its subtests exercise" in html
    assert "## KEP-" not in markdown


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("[4381]", "keps_by_subtest is not an object of subtest names to KEP numbers"),
        ('{"x": 4381}', "keps_by_subtest['x'] is not a list of KEP numbers"),
        ('{"x": [0]}', "keps_by_subtest['x'][0] is 0, not a whole number from 1 to 99999"),
        ('{"x": [4381, 100000]}', "keps_by_subtest['x'][1] is 100000, not a whole number"),
        ('{"x": [true]}', "keps_by_subtest['x'][0] is True, not a whole number"),
        ('{"x": ["4381"]}', "keps_by_subtest['x'][0] is '4381', not a whole number"),
        ('{"x": [4381.0]}', "keps_by_subtest['x'][0] is 4381.0, not a whole number"),
        ('{"x": [1e400]}', "keps_by_subtest['x'][0] is infinite"),
        ('{"x": [' + "9" * 5000 + "]}", "keps_by_subtest['x'][0] is infinite"),
        ('{"x": [' + ", ".join(["4381"] * 33) + "]}", "keps_by_subtest['x'] names 33 KEPs, "
         "more than 32"),
        ('{"' + "n" * 5000 + '": [4381]}', "keps_by_subtest is 5000 characters long"),
    ],
)  # fmt: skip
def test_a_malformed_keps_by_subtest_is_one_line_naming_it(
    tmp_path: Path, value: str, said: str
) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"suite": "s", "results": [], "keps_by_subtest": ' + value + "}")

    with pytest.raises(SummaryError) as caught:
        load_summary(path)

    assert str(caught.value).startswith(f"{path}: {said}")
    assert "\n" not in str(caught.value) and "fix that file" in str(caught.value)


# --- the evidence -----------------------------------------------------------------------------


def test_a_run_where_every_phase_passed_answers_yes_with_its_releases_and_checks(
    tmp_path: Path,
) -> None:
    path = _upgrade_run(tmp_path / "run" / "upgrade-downgrade", {"core-dra": [4381],
                        "device-taints": [5055, 4381]})  # fmt: skip

    html, markdown = _report(path, out=tmp_path / "run")

    kep = _section(markdown, 4381)
    assert kep.startswith("## KEP-4381: DRA Structured Parameters\n")
    assert f"Tracking issue: <{kep_url(4381)}>" in kep
    assert "Subtests: core-dra, device-taints" in kep
    assert f"- Releases: {PATH} (states: 0-initial-1.37, 1-v1.38.0-beta.0, " in kep
    assert ("- Cluster steps: versions passed, bring-up passed, upgrade passed, downgrade passed, "
            "re-upgrade passed") in kep  # fmt: skip
    assert (
        "- Upgrade tested: **yes**: after-cluster-upgrade passed in core-dra, device-taints" in kep
    )
    assert "- Rollback (downgrade) tested: **yes**: after-cluster-downgrade passed in" in kep
    assert (
        "- Upgrade -> downgrade -> upgrade tested: **yes**: after-cluster-re-upgrade passed" in kep
    )
    assert ("| core-dra | after-cluster-re-upgrade | passed | core-dra checked in "
            "after-cluster-re-upgrade |") in kep  # fmt: skip
    assert "NO" not in kep
    assert _section(markdown, 5055).count("**yes**") == 3
    # the page: the same, and a link to the Markdown next to it
    assert f'<a href="{EVIDENCE_FILE}">{EVIDENCE_FILE}</a>' in html
    assert "<summary>KEP-4381: DRA Structured Parameters</summary>" in html  # folded
    assert f"<code>{kep_url(4381)}</code>" in html
    assert "releases: v1.37.2 -&gt; v1.38.0-beta.0 -&gt; v1.37.2 -&gt; v1.38.0-beta.0" in html
    assert "Upgrade -&gt; downgrade -&gt; upgrade tested: <b class=yes>yes</b>" in html


def test_a_failed_or_skipped_phase_is_said_plainly_and_never_counted_as_evidence(
    tmp_path: Path,
) -> None:
    outcomes = {
        "core-dra/after-cluster-downgrade": "failed",
        "core-dra/after-cluster-re-upgrade": "skipped",
        "claim-metadata/after-cluster-upgrade": "xfailed",
    }
    keps = {"core-dra": [4381], "claim-metadata": [4381], "prioritized-list": [4816]}
    facts = {"prioritized-list": {"nothing_to_prove/after-cluster-upgrade": "no fallback here"}}
    path = _upgrade_run(tmp_path / "s", keps, outcomes, facts=facts)

    html, markdown = _report(path, out=tmp_path)

    core = _section(markdown, 4381)
    assert ("- Upgrade tested: **NO**: after-cluster-upgrade failed on a known Kubernetes bug "
            "(xfailed) in claim-metadata; passed in core-dra") in core  # fmt: skip
    assert ("- Rollback (downgrade) tested: **NO**: after-cluster-downgrade failed in core-dra; "
            "passed in claim-metadata") in core  # fmt: skip
    assert ("- Upgrade -> downgrade -> upgrade tested: **NO**: after-cluster-re-upgrade "
            "skipped in core-dra; passed in claim-metadata") in core  # fmt: skip
    assert "| core-dra | after-cluster-downgrade | **failed**: core-dra failed here |  |" in core
    assert "| core-dra | after-cluster-re-upgrade | **skipped**: core-dra skipped here |  |" in core
    listed = _section(markdown, 4816)  # passed, but proved nothing: no evidence either
    assert ("- Upgrade tested: **NO**: after-cluster-upgrade passed with nothing to prove in "
            "prioritized-list") in listed  # fmt: skip
    assert ("| prioritized-list | after-cluster-upgrade | **passed with nothing to prove**: "
            "nothing to prove: no fallback here |") in listed  # fmt: skip
    assert "Rollback (downgrade) tested: **yes**" in listed
    assert "Rollback (downgrade) tested: <b class=no>NO</b>: after-cluster-downgrade failed in " \
        "core-dra" in html  # fmt: skip


def test_a_run_that_did_not_finish_says_its_later_phases_did_not_run(tmp_path: Path) -> None:
    path = _upgrade_run(tmp_path / "s", {"core-dra": [4381]}, finished=False)
    doc = json.loads(path.read_text())
    doc["results"] = [r for r in doc["results"] if r.get("phase") != "after-cluster-re-upgrade"
                      and r["id"] != "re-upgrade"]  # fmt: skip
    path.write_text(json.dumps(doc))

    _, markdown = _report(path, out=tmp_path)

    assert "NOT finished (still running or cancelled)" in markdown
    assert ("- Upgrade -> downgrade -> upgrade tested: **NO**: after-cluster-re-upgrade did not "
            "run in core-dra (the run did not finish)") in markdown  # fmt: skip
    assert "Upgrade tested: **yes**" in markdown


def test_a_gate_cycle_run_answers_whether_the_gate_switched_off_and_on_again(
    tmp_path: Path,
) -> None:
    results = [_phase("binding-conditions", p) for p in GATE_CYCLE_PHASES[:2]]
    results.append(_phase("binding-conditions", GATE_CYCLE_PHASES[2], "failed"))
    doc = {"suite": "gate-cycle", "results": results, "current": {"version": "v1.38.0-beta.0"},
           KEPS_BY_SUBTEST: {"binding-conditions": [5007]}}  # fmt: skip
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "summary.json").write_text(json.dumps(doc))

    _, markdown = _report(tmp_path / "g" / "summary.json", out=tmp_path)

    kep = _section(markdown, 5007)
    assert "- Releases: v1.38.0-beta.0 throughout (no upgrade or downgrade)" in kep
    assert ("- Feature gate switched off after use tested: **yes**: phase-1-gate-off passed in "
            "binding-conditions") in kep  # fmt: skip
    assert ("- Feature gate switched on again tested: **NO**: phase-2-gate-on-again failed in "
            "binding-conditions") in kep  # fmt: skip
    assert "Upgrade tested" not in kep


def test_runs_of_several_suites_and_a_kep_the_table_lacks_are_each_shown(tmp_path: Path) -> None:
    """A merged report: each run of a KEP's subtests is its own block; a KEP a newer e2e-dra
    named is shown by number and link; mixed releases of a state name the odd component."""
    first = _upgrade_run(tmp_path / "a", {"core-dra": [4381]})
    mixed = dict.fromkeys(COMPONENTS, "v1.38.0-beta.0") | {"kubelet": "v1.35.3"}
    second = _upgrade_run(tmp_path / "b", {"core-dra": [4381], "new": [9876]},
                          suite="kubelet-last", binaries={"0-initial": mixed})  # fmt: skip

    _, markdown = _report(first, second, out=tmp_path)

    kep = _section(markdown, 4381)
    assert kep.count("### upgrade-downgrade") == 1 and kep.count("### kubelet-last") == 1
    assert "Run: b/summary.json: started 2026-12-01T18:10:12+00:00, finished" in kep
    assert "- Releases: v1.38.0-beta.0 (kubelet v1.35.3) (states: 0-initial)" in kep
    unknown = _section(markdown, 9876)
    assert unknown.startswith("## KEP-9876 (not in this e2e-dra's table of KEPs)")
    assert f"<{kep_url(9876)}>" in unknown


def test_a_run_of_many_cluster_steps_names_fifty_and_says_there_were_more(tmp_path: Path) -> None:
    path = _upgrade_run(tmp_path / "s", {"core-dra": [4381]})
    doc = json.loads(path.read_text())
    doc["results"][1:1] = [
        {"id": f"restart-{i}", "outcome": "passed", "step": "restart"} for i in range(60)
    ]
    path.write_text(json.dumps(doc))

    _, markdown = _report(path, out=tmp_path)

    steps = next(line for line in markdown.splitlines() if line.startswith("- Cluster steps: "))
    assert steps.startswith("- Cluster steps: versions passed, restart-0 passed, ")
    assert steps.endswith(", restart-48 passed, and more not shown")


def test_names_from_a_summary_cannot_make_markdown_or_html(tmp_path: Path) -> None:
    hostile = "x](javascript:alert(1)) <script>alert(1)</script> | *b* `c` &amp; #"
    path = _upgrade_run(tmp_path / "s", {hostile: [4381]})
    doc = json.loads(path.read_text())
    for result in doc["results"]:
        if result.get("steps"):
            result["steps"] = _steps(f"[click]({hostile})\nsecond line")
    path.write_text(json.dumps(doc))

    html, markdown = _report(path, out=tmp_path)

    assert "<script" not in html
    unescaped = [r"(?<!\\)<script", r"(?<!\\)\]\(", r"(?<!\\)\[click", r"(?<!\\)\*b"]
    assert [u for u in unescaped if re.search(u, markdown)] == []
    assert r"\[click\](x\](javascript:alert(1)) \<script>alert(1)\</script> \| \*b\* \`c\` " \
        r"\&amp; \#" in markdown  # fmt: skip
    assert "second line" in markdown and "\nsecond line" not in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| x")]
    assert len(rows) == 4 and all(len(re.findall(r"(?<!\\)\|", row)) == 5 for row in rows)


def test_a_lone_surrogate_is_written_as_its_escape(tmp_path: Path) -> None:
    path = tmp_path / "s" / "summary.json"
    path.parent.mkdir()
    path.write_text(
        '{"suite": "s", "keps_by_subtest": {"x\\udcff": [4381]}, "results": '
        '[{"id": "a", "outcome": "passed", "subtest": "x\\udcff", "phase": "p"}]}'
    )

    _, markdown = _report(path, out=tmp_path)

    assert "Subtests: x\\xff" in markdown  # a backslash before a letter shows as itself


def test_the_evidence_is_bounded_and_says_what_it_left_out(tmp_path: Path) -> None:
    """Thirty subtests each naming 32 KEPs, each phase with 40 long checks: the summary is small,
    its evidence (every phase once per KEP) would be over 20 Mi characters."""
    keps = list(range(1000, 1032))
    path = _upgrade_run(tmp_path / "s", {f"t{i}": keps for i in range(30)})
    doc = json.loads(path.read_text())
    for result in doc["results"]:
        if result.get("phase"):
            result["steps"] = _steps(*(f"{i:03} " + "c" * 150 for i in range(45)))
    path.write_text(json.dumps(doc))

    evidence = Evidence.of([load_summary(path)], tmp_path)
    _, markdown = _report(path, out=tmp_path)

    assert evidence.cut and evidence.left_out and evidence.left_out[-1] == 1031
    assert len(markdown) < 2 * MAX_EVIDENCE_TEXT
    assert f"**Left out**: the evidence of KEP-{evidence.left_out[0]}" in markdown
    shown = evidence.keps[0]
    assert shown.complete and len(shown.runs[0].phases) == 30 * 4
    assert shown.runs[0].phases[0].more == 5  # 40 of 45 checks named
    assert "; and 5 more |" in markdown


def test_evidence_that_cannot_be_written_leaves_the_old_report_whole(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    (out / EVIDENCE_FILE).mkdir(parents=True)  # in the way of the Markdown
    (out / "report.html").write_text("the report of yesterday\n")

    assert main(["report", str(run), "-o", str(out)]) == EXIT_LOCAL

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out / EVIDENCE_FILE}" in err and "Traceback" not in err
    assert (out / "report.html").read_text() == "the report of yesterday\n"


def test_a_runs_own_report_writes_the_evidence_and_an_earlier_summary_too(run: Path) -> None:
    """The synthetic run's summaries are of schema 1: the evidence is written, and says it has
    no KEPs to show."""
    written = write_report(summaries_of([run]), run)

    assert written.evidence is not None and written.evidence.is_file()
    assert "no evidence to show" in written.evidence.read_text()


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return synthetic_run(tmp_path / "artifacts")


def test_a_suite_without_the_re_upgrade_leg_is_not_asked_about_it(tmp_path: Path) -> None:
    """A staged variant has three phases: its evidence answers the two questions it can, and
    does not answer the third with a "NO"."""
    path = _upgrade_run(tmp_path / "s", {"core-dra": [4381]}, suite="control-plane-first")
    doc = json.loads(path.read_text())
    doc["results"] = [r for r in doc["results"] if r.get("phase") != "after-cluster-re-upgrade"
                      and r["id"] != "re-upgrade"]  # fmt: skip
    doc["plan"] = [r["id"] for r in doc["results"]]
    path.write_text(json.dumps(doc))

    _, markdown = _report(path, out=tmp_path)

    assert "Upgrade tested: **yes**" in markdown
    assert "Rollback (downgrade) tested: **yes**" in markdown
    assert "Upgrade -> downgrade -> upgrade" not in markdown


def test_a_subtest_with_nothing_to_prove_refutes_nothing_the_others_proved(
    tmp_path: Path,
) -> None:
    """It is said; the answer is still yes when another subtest naming the KEP proved it."""
    facts = {"core-dra": {"nothing_to_prove/after-cluster-upgrade": "the kubelet stayed"}}
    keps = {"core-dra": [4381], "claim-metadata": [4381]}
    path = _upgrade_run(tmp_path / "s", keps, facts=facts)

    _, markdown = _report(path, out=tmp_path)

    upgrade = next(line for line in markdown.splitlines() if "Upgrade tested" in line)
    assert upgrade == (
        "- Upgrade tested: **yes**: after-cluster-upgrade passed with nothing to prove in "
        "core-dra; passed in claim-metadata"
    )


def _prr_table(html: str) -> list[list[tuple[str, str]]]:
    """The page's KEP x run table: per row, (class, text) of each cell (headers included)."""
    table = html[html.index('<table class="prr">') :].split("</table>")[0]
    return [
        [(css or "", re.sub("<[^>]+>", "", text)) for css, text in
         re.findall(r'<t[hd](?: colspan=\d+)?(?: class="([^"]*)")?[^>]*>(.*?)</t[hd]>', row)]
        for row in table.split("</tr>")[:-1]
    ]  # fmt: skip


def test_the_page_answers_each_kep_per_run_in_one_table_and_folds_the_details(
    tmp_path: Path,
) -> None:
    """Two runs, two KEPs: a row per KEP, three yes/no cells per run (upgrade, rollback,
    upgrade again), each linking to its run's evidence inside the KEP's folded details."""
    keps = {"core-dra": [4381], "claim-metadata": [4381, 5055]}
    good = _upgrade_run(tmp_path / "a" / "s", keps)
    bad = _upgrade_run(tmp_path / "b" / "s", keps, {"core-dra/after-cluster-downgrade": "failed"})

    html, _ = _report(good, bad, out=tmp_path)

    rows = _prr_table(html)
    assert [text for _, text in rows[1]] == ["upgrade", "rollback", "upgrade again"] * 2
    by_kep = {row[0][1].split(" ")[0]: row[1:] for row in rows[2:]}
    assert list(by_kep) == ["KEP-4381", "KEP-5055"]
    assert by_kep["KEP-4381"] == [("cell passed", "yes")] * 3 + [
        ("cell passed", "yes"), ("cell failed", "NO"), ("cell passed", "yes")]  # fmt: skip
    assert [text for _, text in by_kep["KEP-5055"]] == ["yes"] * 6  # core-dra does not name it
    assert '<a href="#kep-4381-run-2">NO</a>' in html
    assert '<details id="kep-4381" class="kep">' in html and "<details open" not in html
    details = html[html.index('<details id="kep-4381"') :].split("</details>")[0]
    assert '<h4 id="kep-4381-run-2">' in details and "after-cluster-downgrade failed in " in details
    evidence = html[html.index('<h2 id="prr">') :]
    assert evidence.index('<table class="prr">') < evidence.index("<details")  # answers first
