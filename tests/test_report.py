"""The report read back from artifacts: summaries checked, links only to what exists, the trace
Perfetto opens, JUnit as Kubernetes CI reads it, and ``e2e-dra report``'s one-line errors."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from synthetic_run import FAILED_ID, STATES, synthetic_run

from e2e_dra.cli import main
from e2e_dra.errors import EXIT_BAD_INPUT
from e2e_dra.report import (
    EVIDENCE_FILE,
    MAX_SUMMARY_BYTES,
    SCHEMA_VERSION,
    JUnitCase,
    SummaryError,
    artifact_logs,
    find_summaries,
    junit_case,
    junit_xml,
    load_summary,
    summaries_of,
    trace_events,
    write_report,
)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return synthetic_run(tmp_path / "artifacts")


def _hrefs(html: str) -> list[str]:
    """The page's links to files (its own anchors, ``#...``, and a known bug's upstream issue
    are not files)."""
    return [
        h
        for h in re.findall(r'href="([^"]+)"', html)
        if not h.startswith(("#", "https://github.com/kubernetes/kubernetes/issues/"))
    ]


def _there(folder: Path, href: str) -> bool:
    """Whether ``href``, relative to ``folder``, is a file, or (ending in ``/``) a folder."""
    target = (folder / href).resolve()
    return target.is_dir() if href.endswith("/") else target.is_file()


def test_the_page_links_a_failure_to_its_dump_grpc_calls_and_state_logs_that_exist(
    run: Path,
) -> None:
    written = write_report(summaries_of([run]), run)

    html = written.html.read_text()
    hrefs = _hrefs(html)
    assert "upgrade-downgrade/dumps/dump-device-taints_after-cluster-upgrade.json" in hrefs
    assert "upgrade-downgrade/drivers/grpc-calls-defaultdevice-taints.k8s.io.json" in hrefs
    assert f"upgrade-downgrade/kube-apiserver-{STATES[1]}.log" in hrefs
    assert f"upgrade-downgrade/kube-apiserver-{STATES[0]}.log" not in hrefs  # another state
    assert not any("driver-gone" in h for h in hrefs)  # named, never written: no dead link
    assert all(_there(run, h) for h in hrefs)
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )


def test_links_are_relative_to_the_page_wherever_it_is_written(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere" / "report"
    written = write_report(summaries_of([run]), out)

    hrefs = _hrefs(written.html.read_text())
    into_the_artifacts = [h for h in hrefs if h != EVIDENCE_FILE]  # the page's own Markdown
    assert EVIDENCE_FILE in hrefs and (out / EVIDENCE_FILE).is_file()
    assert into_the_artifacts and all(h.startswith("../../artifacts/") for h in into_the_artifacts)
    assert all(_there(out, h) for h in hrefs)


def test_the_page_shows_matrix_versions_and_timelines(run: Path) -> None:
    html = write_report(summaries_of([run]), run).html.read_text()

    for text in ("core-dra", "device-taints", "one", "two", "after-cluster-upgrade", "gates-on"):
        assert f">{text}<" in html
    assert 'class="cell failed"' in html and 'class="cell skipped"' in html
    assert "v1.38.0-beta.0" in html and "DRAFancyGate: unknown to v1.37.2" in html
    assert "structured-merge-diff" in html
    assert html.count("<svg") == 2
    assert "kube-apiserver (0-initial-1.37): ready 3.0s after its start" in html


def test_trace_is_complete_events_in_microseconds_one_process_per_suite(run: Path) -> None:
    written = write_report(summaries_of([run]), run)
    trace = json.loads(written.trace.read_text())

    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    failed = next(e for e in complete if e["name"] == FAILED_ID)
    assert failed["ts"] == 60_500_000 and failed["dur"] == 6_000_000
    assert {e["pid"] for e in complete} == {1, 2}
    gate_cycle_versions = next(e for e in complete if e["pid"] == 2 and e["name"] == "versions")
    assert gate_cycle_versions["ts"] == 108_000_000  # started 1 min 48 s after the first suite
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["name"] == "thread_name"
    }
    assert {"cluster", "kube-apiserver", "kubelet", "core-dra", "device-taints"} <= set(
        names.values()
    )
    assert names[(failed["pid"], failed["tid"])] == "device-taints"


def test_a_summary_from_before_schema_1_gets_its_starts_from_the_order(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    old = {"suite": "s", "results": [
        {"id": "a", "outcome": "passed", "seconds": 2.0, "step": "a"},
        {"id": "x/p", "outcome": "failed", "seconds": 3.0, "phase": "p", "subtest": "x"},
        {"id": "b", "outcome": "passed", "seconds": 1.0, "step": "b"},
    ]}  # fmt: skip
    path.write_text(json.dumps(old))

    assert [r.start for r in load_summary(path).results] == [0.0, 2.0, 5.0]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{", "not JSON (Expecting property name"),
        ("[]", "the top level is not a JSON object"),
        ('{"suite": "s"}', "results is missing or not a list"),
        ('{"suite": 1, "results": []}', "suite is missing or not a non-empty string"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "won"}]}', "results[0].outcome is"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "passed", "seconds": "1"}]}',
         "results[0].seconds is not a non-negative number"),
        ('{"suite": "s", "results": [], "started": "yesterday"}', "started is not a time like"),
        ('{"suite": "s", "results": [], "binaries": {"0": 1}}', "binaries is not an object"),
        ('{"suite": "s", "results": [], "schema_version": "1"}', "schema_version is not"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "passed", "steps": {}}]}',
         "results[0].steps is not a list"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "passed", "steps": [{"name": "x", '
         '"start": 1, "seconds": 1, "outcome": "won"}]}]}', "results[0].steps[0].outcome is"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "passed", "steps": [{"name": "x", '
         '"start": -1, "seconds": 1, "outcome": "passed"}]}]}',
         "results[0].steps[0].start is -1, not a non-negative number"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "passed", "steps": [{"name": "x", '
         '"start": 1, "outcome": "passed"}]}]}', "results[0].steps[0].seconds is not"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "passed", "steps": [{"start": 1, '
         '"seconds": 1, "outcome": "passed"}]}]}', "results[0].steps[0].name is missing"),
        ('{"suite": "s", "results": [{"id": "a", "outcome": "failed", "failed_step": 3}]}',
         "results[0].failed_step is not a string"),
    ],
)  # fmt: skip
def test_a_malformed_summary_is_named_with_what_is_wrong(
    tmp_path: Path, content: str, said: str
) -> None:
    path = tmp_path / "summary.json"
    path.write_text(content)

    with pytest.raises(SummaryError) as caught:
        load_summary(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_oversized_summary_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    with path.open("wb") as file:
        file.truncate(MAX_SUMMARY_BYTES + 10)  # sparse: costs no disk

    with pytest.raises(SummaryError, match="larger than 32 MiB"):
        load_summary(path)


def test_a_folder_without_summaries_is_named(tmp_path: Path) -> None:
    with pytest.raises(SummaryError, match=r"no summary\.json in it"):
        find_summaries(tmp_path)
    with pytest.raises(SummaryError, match="no such directory"):
        find_summaries(tmp_path / "gone")


def test_a_runs_own_report_leaves_out_a_broken_summary_and_says_so(run: Path) -> None:
    (run / "gate-cycle" / "summary.json").write_text("{")

    written = write_report(summaries_of([run]), run, lenient=True)

    assert written.suites == 1 and len(written.left_out) == 1
    assert "gate-cycle/summary.json: not JSON" in written.html.read_text()


def test_an_old_summarys_failure_links_its_dump_driver_and_state_logs_by_convention(
    run: Path,
) -> None:
    path = run / "upgrade-downgrade" / "summary.json"
    summary = json.loads(path.read_text())
    del summary["schema_version"]
    for result in summary["results"]:
        result.pop("logs", None)
        result.pop("start")
    path.write_text(json.dumps(summary))

    hrefs = _hrefs(write_report([path], run).html.read_text())

    assert "upgrade-downgrade/dumps/dump-device-taints_after-cluster-upgrade.json" in hrefs
    assert "upgrade-downgrade/drivers/grpc-calls-defaultdevice-taints.k8s.io.json" in hrefs
    assert f"upgrade-downgrade/kubelet-{STATES[1]}.log" in hrefs  # the state after the upgrade
    assert f"upgrade-downgrade/kubelet-{STATES[0]}.log" not in hrefs


def test_failure_notes_become_logs_under_the_suite_only(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "dumps").mkdir(parents=True)
    (suite / "dumps" / "dump-a.json").write_text("{}")
    (suite / "kubelet-0-initial.log").write_text("")
    outside = tmp_path / "outside.log"
    outside.write_text("")
    notes = [
        f"e2e-dra: DRA objects, pods and events: {suite}/dumps/dump-a.json",
        f"e2e-dra: kubelet log: {suite}/kubelet-0-initial.log",
        f"e2e-dra: all cluster logs: {suite}",  # a directory
        f"e2e-dra: elsewhere: {outside}",
        f"e2e-dra: driver log: {suite}/drivers/not-written.log",
    ]

    assert artifact_logs(notes, suite) == [
        {"label": "DRA objects, pods and events", "path": "dumps/dump-a.json"},
        {"label": "kubelet log", "path": "kubelet-0-initial.log"},
    ]


def test_junit_names_cases_for_testgrid_and_makes_paths_relative(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    cases = [
        JUnitCase("upgrade-downgrade bring-up", "passed", 1.0),
        JUnitCase(
            "upgrade-downgrade core-dra after-cluster-upgrade",
            "failed",
            2.0,
            "AssertionError: no\x00pe",
            f"trace\ne2e-dra: dump: {artifacts}/upgrade-downgrade/dumps/dump-x.json",
        ),
        JUnitCase("upgrade-downgrade core-dra after-cluster-downgrade", "skipped", 0.0, "why"),
    ]

    root = ET.fromstring(junit_xml("upgrade-downgrade", cases, artifacts).encode())

    assert root.get("tests") == "3" and root.get("failures") == "1" and root.get("skipped") == "1"
    assert {c.get("classname") for c in root.iter("testcase")} == {"e2e-dra.upgrade-downgrade"}
    failure = root.find("testcase/failure")
    assert failure is not None and failure.get("message") == "AssertionError: nope"
    assert "dump: upgrade-downgrade/dumps/dump-x.json" in (failure.text or "")


def test_a_phases_steps_are_read_back_drawn_nested_and_named_where_it_failed(
    tmp_path: Path,
) -> None:
    """What a schema 2 summary adds: each phase's steps, and the step a failure ended, in the
    trace (slices inside the phase's, cut to it), on the page (the failed cell) and in JUnit."""
    suite = tmp_path / "s"
    suite.mkdir()
    steps = [
        {"name": "create", "start": 10.0, "seconds": 1.5, "outcome": "passed"},
        {"name": "wait " * 30, "start": 11.5, "seconds": 9.0, "outcome": "failed"},  # too long
    ]
    doc = {"schema_version": 2, "suite": "s", "results": [
        {"id": "x/p", "outcome": "failed", "seconds": 3.0, "start": 10.0, "phase": "p",
         "subtest": "x", "message": "in step 'wait': AssertionError: no", "steps": steps,
         "failed_step": "wait " * 30},
        {"id": "y/p", "outcome": "passed", "seconds": 1.0, "start": 10.0, "phase": "p",
         "subtest": "y"},
    ]}  # fmt: skip
    (suite / "summary.json").write_text(json.dumps(doc))

    record = load_summary(suite / "summary.json")
    assert [(s.name, s.outcome) for s in record.results[0].steps] == [
        ("create", "passed"),
        ("wait " * 30, "failed"),
    ]
    assert record.results[1].steps == () and record.results[1].failed_step is None

    events = trace_events([record])["traceEvents"]
    phase = next(e for e in events if e.get("name") == "x/p")
    nested = [e for e in events if e.get("args", {}).get("phase") == "x/p"]
    assert [e["dur"] for e in nested] == [1_500_000, 1_500_000]  # the second cut to the phase
    assert all(phase["ts"] <= e["ts"] and e["ts"] + e["dur"] <= phase["ts"] + phase["dur"]
               for e in nested)  # fmt: skip
    assert phase["args"]["failed_step"] == "wait " * 30

    html = write_report([suite / "summary.json"], tmp_path).html.read_text()
    assert "in step \u201cwait wait" in html and "\u2026\u201d</span>" in html  # cut, marked

    case = junit_case("s", record.results[0])
    assert (case.name, case.outcome, case.seconds) == ("s x p", "failed", 3.0)
    assert case.message.startswith("in step ")


def test_trace_of_nothing_is_an_empty_trace() -> None:
    assert trace_events([]) == {"traceEvents": [], "displayTimeUnit": "ms"}


def test_the_summary_times_each_entry_and_each_component_from_the_suites_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from e2e_dra._suite import SubtestPhase
    from e2e_dra._suite._artifacts import Summary

    clock = [1000.0]
    monkeypatch.setattr("e2e_dra._suite._artifacts.time.time", lambda: clock[0])
    ready = [{"state": "0-initial", "component": "kubelet", "seconds": 2.0, "ready_at": 1005.0}]
    summary = Summary(tmp_path, "s", 1, ["a/p"], lambda: {"components_ready": ready})
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "dump-a_p.json").write_text("{}")
    clock[0] = 1012.0

    summary.record(
        SubtestPhase("s", "a", 0, "p"),
        "failed",
        4.0,
        "boom",
        [f"e2e-dra: dump: {tmp_path}/dumps/dump-a_p.json"],
    )

    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 3
    assert data["results"][0]["start"] == 8.0
    assert data["results"][0]["logs"] == [{"label": "dump", "path": "dumps/dump-a_p.json"}]
    assert data["components_ready"] == [
        {"state": "0-initial", "component": "kubelet", "seconds": 2.0, "ready": 5.0, "started": 3.0}
    ]
    record = load_summary(tmp_path / "summary.json")  # what the report reads back
    assert record.ready[0].started == 3.0 and record.results[0].logs == (
        ("dump", "dumps/dump-a_p.json"),
    )


def test_a_real_runs_summary_gets_every_clusters_ready_times(tmp_path: Path) -> None:
    """RealCluster keeps the clusters it brought up (the gate cycle brings up one per subtest):
    their ready times all reach the summary, with the wall clock the summary makes relative."""
    from types import SimpleNamespace

    from e2e_dra._suite import SUITES
    from e2e_dra._suite._cluster import RealCluster
    from e2e_dra.localupcluster import ReadyTime

    run = RealCluster(SUITES["gate-cycle"], {}, tmp_path)
    for state in ("one", "two"):  # what bring_up appends; no cluster is started here
        cluster = SimpleNamespace(ready_times=[ReadyTime("etcd", state, 1.5, 2, 123.0)])
        run.steps.clusters.append(cluster)  # type: ignore[arg-type]

    assert run.describe()["components_ready"] == [
        {"state": s, "component": "etcd", "seconds": 1.5, "attempts": 2, "ready_at": 123.0}
        for s in ("one", "two")
    ]


# --- e2e-dra report ---------------------------------------------------------------------------


def test_report_command_merges_runs_and_prints_the_page_last(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = synthetic_run(tmp_path / "machine-2")
    out = tmp_path / "merged"

    assert main(["report", str(run / "upgrade-downgrade"), str(other), "-o", str(out)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == str(out / "report.html")
    html = (out / "report.html").read_text()
    assert html.count("<svg") == 3  # one upgrade-downgrade, and both suites of machine-2
    assert all(_there(out, h) for h in _hrefs(html))


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: d / "missing", "missing: no such directory"),
        (lambda d: (d / "f").touch() or d / "f", "f: not a directory"),
        (lambda d: d, "no summary.json in it"),
    ],
)
def test_report_command_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, said: str
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()

    assert main(["report", str(make(folder)), "-o", str(tmp_path / "out")]) == EXIT_BAD_INPUT

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_report_command_names_a_malformed_summary(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "gate-cycle" / "summary.json").write_text('{"suite": "gate-cycle", "results": 1}')

    assert main(["report", str(run), "-o", str(tmp_path / "out")]) == EXIT_BAD_INPUT

    err = capsys.readouterr().err
    assert f"{run}/gate-cycle/summary.json: results is missing or not a list" in err


def test_the_page_lists_every_phase_that_had_nothing_to_prove(tmp_path: Path) -> None:
    summary = tmp_path / "s" / "summary.json"
    summary.parent.mkdir()
    facts = {
        "pool-name-field-selector-fallback": {
            "pool_selector/initial": "server",
            "nothing_to_prove/initial": "the API server accepts the field: <no fallback>",
        },
        "core-dra": {"nothing_to_prove/after-cluster-upgrade": "nothing"},
        "odd": ["not", "a", "dict"],  # another shape: not this list's business
    }
    result = {"id": "x/initial", "outcome": "passed", "seconds": 1.0, "phase": "initial",
              "subtest": "x"}  # fmt: skip
    doc = {"suite": "s", "results": [result], "facts": facts}
    summary.write_text(json.dumps(doc))

    html = Path(write_report([summary], tmp_path).html).read_text()

    assert (
        "<li>core-dra after-cluster-upgrade: nothing to prove: nothing</li>" in html
        and "<li>pool-name-field-selector-fallback initial: nothing to prove: the API server "
        "accepts the field: &lt;no fallback&gt;</li>"
        in html
    )
    assert "pool_selector" not in html


def test_a_page_without_such_phases_says_every_phase_had_something_to_prove(run: Path) -> None:
    html = Path(write_report(summaries_of([run]), run).html).read_text()

    assert "every phase had something to prove" in html
