"""``e2e-dra report`` given hostile input: numbers out of range, summaries that are small one by
one and huge together, names that are schemes or not UTF-8, empty paths. Each is one line on
stderr with the exit status of its kind, and the report already there stays as it was."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from synthetic_run import synthetic_run

from e2e_dra.cli import main
from e2e_dra.errors import EXIT_BAD_INPUT, EXIT_LOCAL
from e2e_dra.report import SummaryError, load_summary, summaries_of, write_report

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
OLD_PAGE = "<p>the report of yesterday</p>\n"


def _summary(folder: Path, **doc: Any) -> Path:
    """``folder/summary.json`` holding ``doc`` over a minimal valid summary."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "summary.json"
    path.write_text(json.dumps({"suite": "s", "results": []} | doc))
    return path


def _phase(subtest: str, phase: str, **more: Any) -> dict[str, Any]:
    return {"id": f"{subtest}/{phase}", "outcome": "passed", "seconds": 1.0, "subtest": subtest,
            "phase": phase} | more  # fmt: skip


def _hrefs(html: str) -> list[str]:
    """The page's links to files (its own anchors, ``#...``, and a known bug's upstream issue
    are not files)."""
    return [
        h
        for h in re.findall(r'href="([^"]+)"', html)
        if not h.startswith(("#", "https://github.com/kubernetes/kubernetes/issues/"))
    ]


def _one_error_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("e2e-dra: error: "), err
    assert "Traceback" not in err
    return err


# --- numbers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('"results": [{"id": "a", "outcome": "passed", "seconds": 1e400}]',
         "results[0].seconds is infinite"),
        ('"results": [{"id": "a", "outcome": "passed", "seconds": NaN}]',
         "results[0].seconds is NaN"),
        ('"results": [{"id": "a", "outcome": "passed", "seconds": Infinity}]',
         "results[0].seconds is infinite"),
        ('"results": [], "wall_seconds": 1e300', "wall_seconds is 1e+300, not a number of seconds"),
        ('"results": [{"id": "a", "outcome": "passed", "start": ' + "9" * 5000 + "}]",
         "results[0].start is infinite"),
        ('"results": [{"id": "a", "outcome": "passed", "seconds": 400000}, '
         '{"id": "b", "outcome": "passed", "seconds": 400000}]', "results[1] ends 800000s"),
        ('"results": [], "started": "0001-01-01T00:00:00+0000"', "started is '0001-01-01"),
        ('"results": [], "components_ready": [{"state": "a", "component": "b", "started": -1e300}]',
         "components_ready[0].started is -1e+300"),
        ('"results": [], "components_ready": [{"state": "a", "component": "b", "attempts": 1e99}]',
         "components_ready[0].attempts is 1e+99, not a whole number"),
        ('"results": [], "schema_version": 10000000000', "schema_version is 10000000000, more"),
        ('"results": [], "keps_by_subtest": {"x": [1e400]}', "keps_by_subtest['x'][0] is infinite"),
        ('"results": [], "keps_by_subtest": {"x": [-4381]}',
         "keps_by_subtest['x'][0] is -4381, not a whole number from 1 to 99999"),
    ],
)  # fmt: skip
def test_a_number_out_of_its_fields_range_is_refused_naming_the_field(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"suite": "s", ' + text + "}")

    with pytest.raises(SummaryError) as caught:
        load_summary(path)

    assert str(caught.value).startswith(f"{path}: {said}")
    assert "fix that file" in str(caught.value)


def test_a_nan_duration_fails_in_one_line_and_leaves_the_old_report_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run" / "s" / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"suite": "s", "results": [{"id": "x/p", "outcome": "failed", "seconds": NaN, '
        '"subtest": "x", "phase": "p"}]}'
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text(OLD_PAGE)

    assert main(["report", str(tmp_path / "run"), "-o", str(out)]) == EXIT_BAD_INPUT

    err = _one_error_line(capsys.readouterr().err)
    assert f"{path}: results[0].seconds is NaN" in err
    assert (out / "report.html").read_text() == OLD_PAGE


# --- sizes and counts, all summaries together --------------------------------------------------


def test_summaries_small_one_by_one_are_refused_together_by_their_json_values(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    for name in ("a", "b", "c"):  # 800 000 values each ({} and ,): fine alone, too many together
        _summary(run / name, padding=[{}] * 400_000)
    for name in ("a", "b"):
        load_summary(run / name / "summary.json")

    with pytest.raises(SummaryError) as caught:
        write_report(summaries_of([run]), tmp_path / "out")

    assert str(caught.value).startswith(f"{run / 'c' / 'summary.json'}: about ")
    assert "JSON values, with the summaries before it more than 2000000" in str(caught.value)
    assert "give fewer folders" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_matrix_of_two_summaries_is_bounded_across_them(tmp_path: Path) -> None:
    """400 subtests in one phase, and one subtest in 700 phases: each alone a thin matrix,
    together 401 x 701 cells."""
    wide = _summary(tmp_path / "a", results=[_phase(f"t{i}", "p") for i in range(400)])
    long = _summary(tmp_path / "b", suite="u", results=[_phase("t", f"p{i}") for i in range(700)])
    write_report([wide], tmp_path / "alone")

    with pytest.raises(SummaryError) as caught:
        write_report([wide, long], tmp_path / "out")

    assert str(caught.value).startswith(f"{long}: results[].subtest and .phase make a matrix")
    assert "401 subtests x 701 phases" in str(caught.value)


def test_a_second_run_of_a_suite_adds_columns_of_its_own_to_the_bound(tmp_path: Path) -> None:
    """The page keys its columns by run: two runs of one suite through the same 331 phases are
    662 columns, and the bound counts them so (401 x 662 cells, where one run is 401 x 331)."""
    results = [_phase(f"t{i}", "p0") for i in range(400)]
    results += [_phase("t", f"p{i}") for i in range(331)]
    first = _summary(tmp_path / "default", results=results)
    second = _summary(tmp_path / "stable", results=results)
    write_report([first], tmp_path / "alone")

    with pytest.raises(SummaryError) as caught:
        write_report([first, second], tmp_path / "out")

    assert str(caught.value).startswith(f"{second}: results[].subtest and .phase make a matrix")
    assert "401 subtests x 662 phases" in str(caught.value)


def test_a_runs_own_report_leaves_out_the_summary_over_the_budget_and_says_so(
    tmp_path: Path,
) -> None:
    wide = _summary(tmp_path / "a", results=[_phase(f"t{i}", "p") for i in range(400)])
    long = _summary(tmp_path / "b", suite="u", results=[_phase("t", f"p{i}") for i in range(700)])

    written = write_report([wide, long], tmp_path / "out", lenient=True)

    assert written.suites == 1 and "make a matrix of 401 subtests" in written.left_out[0]


def test_a_long_message_is_cut_and_said_so(tmp_path: Path) -> None:
    path = _summary(tmp_path, results=[_phase("x", "p", outcome="failed", message="m" * 100_000)])

    message = load_summary(path).results[0].message

    assert message.startswith("m" * 8192) and message.endswith("[91808 characters cut; "
                                                               "the logs hold them]")  # fmt: skip


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"suite": "s", "results": [], "suite": "t"}')

    with pytest.raises(SummaryError, match="the key 'suite' is given twice in one object"):
        load_summary(path)


# --- names and links ------------------------------------------------------------------------------


def test_no_link_has_a_scheme_or_leads_out_of_the_artifacts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    suite = run / "javascript:alert(1)"
    (suite / "dumps").mkdir(parents=True)
    (suite / "javascript:alert(2)").write_text("")
    (tmp_path / "outside.log").write_text("secret\n")
    (suite / "dumps" / "dump-x_p.json").symlink_to(tmp_path / "outside.log")
    logs = [
        {"label": "scheme", "path": "javascript:alert(2)"},
        {"label": "up", "path": "../../outside.log"},
        {"label": "absolute", "path": str(tmp_path / "outside.log")},
        {"label": "symlink out", "path": "dumps/dump-x_p.json"},
    ]
    _summary(suite, results=[_phase("x", "p", outcome="failed", logs=logs)])

    html = write_report(summaries_of([run]), run).html.read_text()

    hrefs = _hrefs(html)
    assert sorted(set(hrefs)) == [
        "javascript%3Aalert%281%29/javascript%3Aalert%282%29",
        "javascript%3Aalert%281%29/summary.json",
        "prr-evidence.md",  # written next to the page
    ]
    assert not any(SCHEME.match(h) for h in hrefs)
    assert ">javascript:alert(1)/summary.json: started" in html  # the name, shown as it is


def test_a_summary_leading_out_of_the_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = _summary(tmp_path / "elsewhere")
    (tmp_path / "run" / "s").mkdir(parents=True)
    (tmp_path / "run" / "s" / "summary.json").symlink_to(elsewhere)

    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "out")]) == EXIT_BAD_INPUT

    err = _one_error_line(capsys.readouterr().err)
    assert f"{tmp_path}/run/s/summary.json: leads out of {tmp_path}/run" in err
    assert "give the folder it is in as a DIR of its own" in err


def test_a_folder_name_that_is_not_utf8_is_shown_escaped_and_linked_percent_encoded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _summary(Path(os.fsdecode(bytes(run) + b"/caf\xe9")))

    assert main(["report", str(run)]) == 0

    html = (run / "report.html").read_text(encoding="utf-8")
    assert "caf\\xe9/summary.json: started" in html
    assert _hrefs(html) == ["caf%E9/summary.json", "prr-evidence.md"]


def test_lone_surrogates_in_a_summary_are_shown_as_escapes(tmp_path: Path) -> None:
    path = tmp_path / "s" / "summary.json"
    path.parent.mkdir()
    path.write_text(
        '{"suite": "s\\udcff", "results": [{"id": "x/p", "outcome": "failed", "seconds": 1, '
        '"subtest": "x\\ud800", "phase": "p", "message": "boom \\udfff"}]}'
    )

    html = write_report([path], tmp_path).html.read_text(encoding="utf-8")

    assert '<h2 id="run-1">s\\xff</h2>' in html and ">x\\ud800</th>" in html
    assert "boom \\udfff" in html


def test_names_from_an_old_summary_are_matched_as_text_not_as_glob_patterns(
    tmp_path: Path,
) -> None:
    drivers = tmp_path / "s" / "drivers"
    drivers.mkdir(parents=True)
    (drivers / "grpc-calls-x**.k8s.io.json").write_text("[]")
    (drivers / "grpc-calls-other.k8s.io.json").write_text("[]")
    path = _summary(tmp_path / "s", results=[_phase("x**", "p", outcome="failed")])

    hrefs = _hrefs(write_report([path], tmp_path).html.read_text())

    assert "s/drivers/grpc-calls-x%2A%2A.k8s.io.json" in hrefs
    assert not any("other" in h for h in hrefs)


# --- output ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [([""], "DIR '' is empty"), (["{run}", "-o", ""], "-o/--output '' is empty")],
)
def test_an_empty_path_is_refused_not_read_as_the_current_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    said: str,
) -> None:
    run = synthetic_run(tmp_path / "run")
    monkeypatch.chdir(run)  # where '' would read from, or write to

    assert main(["report", *(a.format(run=run) for a in args)]) == EXIT_BAD_INPUT

    err = _one_error_line(capsys.readouterr().err)
    assert said in err and "give a path" in err
    assert not (run / "report.html").exists()


def test_a_failure_to_write_leaves_the_old_report_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = synthetic_run(tmp_path / "run")
    out = tmp_path / "out"
    (out / "trace.json").mkdir(parents=True)  # in the way of the trace
    (out / "report.html").write_text(OLD_PAGE)

    assert main(["report", str(run), "-o", str(out)]) == EXIT_LOCAL

    _one_error_line(capsys.readouterr().err)
    assert (out / "report.html").read_text() == OLD_PAGE
    assert not [p.name for p in out.iterdir() if p.name not in ("report.html", "trace.json")]
