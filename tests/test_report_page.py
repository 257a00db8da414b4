"""The page a team reads (issue 39): runs told apart by their pair in the matrix, each with its
verdict; a headline with the verdict, pairs, seeds, wall time and the first failure with its
files; the gate cycle in a table of its own; a failed cell linking the node's logs of its state
and the final dump; a timeline from the bring-up on, a row per component with its restarts; and
links under a base URL for a page Prow's Spyglass inlines."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from synthetic_run import (
    COMPONENTS,
    CURRENT,
    FAILED_ID,
    POD_LOG,
    PREVIOUS,
    STABLE,
    states,
    synthetic_run,
    upgrade_downgrade,
)

from e2e_dra.cli import main
from e2e_dra.errors import EXIT_BAD_INPUT, InputError
from e2e_dra.report import GATE_CYCLE_KIND, load_summary, summaries_of, write_report
from e2e_dra.report._headline import Headline
from e2e_dra.report._runs import FAILED, PASSED, runs_of
from e2e_dra.report._timeline import COLORS, LABEL_WIDTH, SETUP_GAP, SETUP_WIDTH, Timeline
from e2e_dra.settings import use

GATE_CYCLE, GATE_CYCLE_PHASES = GATE_CYCLE_KIND.name, GATE_CYCLE_KIND.phases
FAILING_RUN = f"upgrade-downgrade {PREVIOUS} → {CURRENT}"
PASSING_RUN = f"upgrade-downgrade {STABLE[0]} → {STABLE[1]}"
BASE = "https://gcsweb.example.org/gcs/bucket/logs/job/42/artifacts"


def _two_pairs(tmp_path: Path) -> list[Path]:
    """The summaries of one suite run on two pairs, on two machines: the default pair fails
    (after 17 minutes of fetching releases), the stable pair passes."""
    upgrade_downgrade(tmp_path / "default", setup=1020.0)
    upgrade_downgrade(tmp_path / "stable", *STABLE, failing=False)
    return summaries_of([tmp_path / "default", tmp_path / "stable"])


class _Matrices(HTMLParser):
    """The matrix tables of a page: per table, its rows, each a list of (tag, classes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[tuple[str, set[str], str]]]] = []
        self._in = False
        self._cell: tuple[str, set[str], list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "table":
            self._in = "matrix" in classes
            if self._in:
                self.tables.append([])
        elif self._in and tag == "tr":
            self.tables[-1].append([])
        elif self._in and tag in ("th", "td"):
            self._cell = (tag, classes, [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in = False
        elif self._in and tag in ("th", "td") and self._cell is not None:
            kind, classes, text = self._cell
            self.tables[-1][-1].append((kind, classes, " ".join(text)))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and data.strip():
            self._cell[2].append(data.strip())


def _matrices(html: str) -> list[list[list[tuple[str, set[str], str]]]]:
    parser = _Matrices()
    parser.feed(html)
    return parser.tables


def _rows(
    table: list[list[tuple[str, set[str], str]]],
) -> dict[str, list[tuple[str, set[str], str]]]:
    """A matrix's body rows by subtest: the row header first, then its cells."""
    return {row[0][2]: row for row in table[2:]}


def _hrefs(html: str) -> list[str]:
    """The page's links to files (its own anchors, ``#...``, and a known bug's upstream issue
    are not files)."""
    return [
        h
        for h in re.findall(r'href="([^"]+)"', html)
        if not h.startswith(("#", "https://github.com/kubernetes/kubernetes/issues/"))
    ]


# --- runs: a column group each, named by its pair, with its verdict ------------------------------


def test_merged_runs_of_one_suite_get_columns_of_their_own_named_by_pair_and_verdict(
    tmp_path: Path,
) -> None:
    html = write_report(_two_pairs(tmp_path), tmp_path / "out").html.read_text()

    [table] = _matrices(html)
    heads = [(classes, text) for _, classes, text in table[0] if "run" in classes]
    assert [text.split(" failed:")[0].split(" passed:")[0] for _, text in heads] == [
        FAILING_RUN,
        PASSING_RUN,
    ]
    assert "failed" in heads[0][0] and "passed" in heads[1][0]
    assert "failed: 9 passed, 1 failed, 1 skipped; 18m38s" in heads[0][1]
    assert "passed: 11 passed; 1m39s" in heads[1][1]
    assert [text for _, _, text in table[1]] == [
        "after-cluster-creation",
        "after-cluster-upgrade",
        "after-cluster-downgrade",
    ] * 2
    rows = _rows(table)
    taints = rows["device-taints"]
    assert taints[0][1] == {"subtest", "failed"}  # failed in one run: the row is red
    assert rows["core-dra"][0][1] == {"subtest"}
    outcomes = [classes - {"cell"} for _, classes, _ in taints[1:]]
    assert outcomes == [{"passed"}, {"failed"}, {"skipped"}, {"passed"}, {"passed"}, {"passed"}]
    assert not any("✗ ✓" in text or "\u2013 ✓" in text for row in rows.values() for *_, text in row)


def test_two_runs_of_one_pair_are_numbered_and_a_variant_names_its_kubelet(
    tmp_path: Path,
) -> None:
    upgrade_downgrade(tmp_path / "a")
    upgrade_downgrade(tmp_path / "b", failing=False)
    kubelet_last = _kubelet_last(tmp_path / "c")
    records = [load_summary(p) for p in [*summaries_of([tmp_path / "a", tmp_path / "b"]),
                                          kubelet_last]]  # fmt: skip

    runs = runs_of(records)

    assert [r.label for r in runs] == [
        f"{FAILING_RUN} #1",
        f"{FAILING_RUN} #2",
        f"kubelet-last {PREVIOUS} → {CURRENT}, kubelet v1.35.4",
    ]
    assert [r.verdict for r in runs] == [FAILED, PASSED, PASSED]
    assert runs[2].releases == runs[2].pair  # a kubelet of another release than the previous


def _kubelet_last(folder: Path, kubelet: str = "v1.35.4") -> Path:
    folder.mkdir(parents=True)
    doc = {
        "suite": "kubelet-last",
        "finished": True,
        "current": {"version": CURRENT},
        "previous": {"version": PREVIOUS},
        "kubelet": {"version": kubelet},
        "results": [
            {"id": "x/p", "outcome": "passed", "seconds": 1.0, "subtest": "x", "phase": "p"}
        ],
    }
    (folder / "summary.json").write_text(json.dumps(doc))
    return folder / "summary.json"


def test_a_cell_of_a_skip_and_a_pass_is_not_green(tmp_path: Path) -> None:
    """A hand-made summary may name one phase twice: the cell shows both, coloured as the one
    that did not pass."""
    folder = tmp_path / "s"
    folder.mkdir()
    twice = [
        {"id": "x/p", "outcome": "skipped", "seconds": 0.0, "subtest": "x", "phase": "p"},
        {"id": "x/p", "outcome": "passed", "seconds": 1.0, "subtest": "x", "phase": "p"},
    ]
    (folder / "summary.json").write_text(json.dumps({"suite": "s", "results": twice}))

    html = write_report([folder / "summary.json"], tmp_path).html.read_text()

    [table] = _matrices(html)
    assert _rows(table)["x"][1][1] == {"cell", "skipped"}


# --- the headline ---------------------------------------------------------------------------------


def test_the_headline_says_verdict_pairs_seeds_wall_time_and_the_first_failure(
    tmp_path: Path,
) -> None:
    summaries = _two_pairs(tmp_path)
    headline = Headline.of(runs_of([load_summary(p) for p in summaries]))

    assert headline.verdict == FAILED
    assert headline.pairs == (f"{PREVIOUS} → {CURRENT}", f"{STABLE[0]} → {STABLE[1]}")
    assert headline.seeds == ("7", "8")
    # from 18:10:12 to the end of the run that started at 19:00:00 and took 99 s
    assert headline.spanned and headline.wall_seconds == 2988 + 99.0
    assert headline.first is not None
    assert dict(headline.first.where) == {
        "run": FAILING_RUN,
        "subtest": "device-taints",
        "phase": "after-cluster-upgrade",
        "failing step": "the pod keeps running",
    }
    assert headline.first.message == "AssertionError: the taint went away"
    assert dict(headline.environment) == {
        "machine": "x86_64, 2 CPUs, 24 GiB, Linux 6.1.0, cgroup v1; "
        "x86_64, 8 CPUs, 24 GiB, Linux 6.1.0, cgroup v1",
        "e2e-dra": "0.1.0 (git 7405df1a2b3c)",
        "Python": "3.11.7",
        "release source": "download",
        "binaries of the version under test": "download",
        "Go of the version under test": "go1.27.3",
        "version chosen": "latest; stable",
        "binaries of the previous release": "download",
        "Go of the previous release": "go1.26.8",
    }


def test_the_headline_on_the_page_links_the_first_failures_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    html = write_report(_two_pairs(tmp_path), out).html.read_text()

    top = html[html.index('<div class="headline failed">') : html.index('<table class="counts">')]
    assert '<p class="verdict">FAILED: 1 failed</p>' in top
    assert f"{PREVIOUS} → {CURRENT}; {STABLE[0]} → {STABLE[1]}" in top
    assert "seeds <b>7, 8</b>" in top and "wall time <b>51m27s" in top
    assert "<b>failing step</b>: the pod keeps running" in top
    assert "AssertionError: the taint went away" in top
    state = states(PREVIOUS, CURRENT)[1]
    links = _hrefs(top)
    assert f"../default/upgrade-downgrade/dumps/dump-{FAILED_ID.replace('/', '_')}.json" in links
    assert f"../default/upgrade-downgrade/containerd-{state}.log" in links
    assert f"../default/upgrade-downgrade/pods-{state}/" in links
    assert "../default/upgrade-downgrade/dumps/dump-final.json" in links
    environment = html[html.index('<table class="environment">') :].split("</table>")[0]
    assert "<th>release source</th><td>download</td>" in environment
    assert "<th>Go of the version under test</th><td>go1.27.3</td>" in environment
    assert "<th>e2e-dra</th><td>0.1.0 (git 7405df1a2b3c)</td>" in environment


def test_a_passing_report_has_no_first_failure_and_the_earliest_failure_leads(
    tmp_path: Path,
) -> None:
    upgrade_downgrade(tmp_path / "a", failing=False)
    passing = runs_of([load_summary(p) for p in summaries_of([tmp_path / "a"])])
    assert Headline.of(passing).verdict == PASSED and Headline.of(passing).first is None

    late = _one_failure(tmp_path / "late", "2026-12-01T19:00:00+0000", at=1.0)
    early = _one_failure(tmp_path / "early", "2026-12-01T18:00:00+0000", at=500.0)
    runs = runs_of([load_summary(late), load_summary(early)])  # the later run given first

    first = Headline.of(runs).first
    assert first is not None and first.run.record.path == early


def _one_failure(folder: Path, started: str, at: float) -> Path:
    folder.mkdir(parents=True)
    result = {"id": "x/p", "outcome": "failed", "seconds": 1.0, "start": at, "subtest": "x",
              "phase": "p", "message": started}  # fmt: skip
    doc = {"suite": "s", "started": started, "finished": True, "results": [result]}
    (folder / "summary.json").write_text(json.dumps(doc))
    return folder / "summary.json"


# --- the timeline ---------------------------------------------------------------------------------


def test_the_timeline_starts_at_the_bring_up_with_the_setup_collapsed(tmp_path: Path) -> None:
    upgrade_downgrade(tmp_path, setup=1020.0)
    timeline = Timeline(load_summary(tmp_path / "upgrade-downgrade" / "summary.json"))

    rows = timeline.rows()
    steps = rows[0]
    assert steps.label == "cluster steps"
    setup = steps.bars[0]
    assert setup[2] == COLORS["setup"] and setup[4] == "setup 17m00s"
    assert "versions 17m00s passed" in setup[3]
    assert timeline.axis.x(0) == LABEL_WIDTH
    assert timeline.axis.x(1020.0, end=True) == LABEL_WIDTH + SETUP_WIDTH - SETUP_GAP
    bring_up = next(b for b in steps.bars if b[4] == "bring-up")
    assert timeline.axis.x(bring_up[0]) == LABEL_WIDTH + SETUP_WIDTH
    plot = timeline.axis.x(timeline.axis.total) - timeline.axis.x(bring_up[0])
    assert plot > 700  # the run itself, not a sliver after 17 minutes of setup
    svg = timeline.svg()
    assert "before bring-up" in svg and ">setup 17m00s</text>" in svg


def test_the_timeline_has_a_row_per_component_with_its_restarts(tmp_path: Path) -> None:
    upgrade_downgrade(tmp_path)
    timeline = Timeline(load_summary(tmp_path / "upgrade-downgrade" / "summary.json"))

    rows = {row.label: row for row in timeline.rows()}
    assert "components ready" not in rows
    assert [label for label in rows if label in COMPONENTS] == list(COMPONENTS)
    kubelet = rows["kubelet"]
    assert [bar[4] for bar in kubelet.bars] == list(states(PREVIOUS, CURRENT))
    restarts = [m for m in kubelet.marks if not m[2]]
    assert len(restarts) == 2  # into the upgraded state, into the restored one
    assert "kubelet restarted into 1-v1.38.0-beta.0" in restarts[0][1]
    [retried] = [m for m in kubelet.marks if m[2]]
    assert retried[2] == "↻2" and "3 attempts (2 restarts before ready)" in retried[1]
    assert kubelet.bars[1][2] == COLORS["retried"] and kubelet.bars[0][2] == COLORS["ready"]
    svg = timeline.svg()
    assert svg.count('class="restart"') == 2 * len(COMPONENTS)
    assert ">↻2</text>" in svg


def test_a_run_that_failed_before_its_bring_up_is_drawn_to_scale(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    doc = {"suite": "s", "wall_seconds": 30.0, "results": [
        {"id": "versions", "outcome": "failed", "seconds": 30.0, "start": 0.0, "step": "versions"}
    ]}  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(doc))

    timeline = Timeline(load_summary(folder / "summary.json"))

    assert not timeline.axis.collapsed
    [bar] = timeline.rows()[0].bars
    assert bar[4] == "versions" and bar[2] == COLORS["failed"]
    assert "before bring-up" not in timeline.svg()


# --- a failed cell's links: the node's logs of its state, the final dump --------------------------


def test_a_failed_cell_links_its_states_node_logs_and_the_final_dump(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path / "artifacts")
    html = write_report(summaries_of([run]), run).html.read_text()

    cell = re.search(r'<td class="cell failed".*?</td>', html, re.S)
    assert cell is not None
    links = _hrefs(cell.group())
    state, other = states(PREVIOUS, CURRENT)[1], states(PREVIOUS, CURRENT)[0]
    assert f"upgrade-downgrade/containerd-{state}.log" in links
    assert f"upgrade-downgrade/pods-{state}/" in links
    assert "upgrade-downgrade/dumps/dump-final.json" in links
    assert not any(other in link for link in links)  # another state's logs
    assert (run / "upgrade-downgrade" / f"pods-{state}" / POD_LOG).is_file()
    assert ">containerd log</a>" in cell.group() and ">pod logs</a>" in cell.group()


def test_a_node_log_that_was_not_written_is_not_linked(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path / "artifacts")
    state = states(PREVIOUS, CURRENT)[1]
    suite = run / "upgrade-downgrade"
    (suite / f"containerd-{state}.log").unlink()
    for path in sorted((suite / f"pods-{state}").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (suite / f"pods-{state}").rmdir()
    (suite / f"pods-{state}").write_text("a file where the folder was")

    links = _hrefs(write_report(summaries_of([run]), run).html.read_text())

    assert not any(f"containerd-{state}" in link or f"pods-{state}" in link for link in links)
    assert "upgrade-downgrade/dumps/dump-final.json" in links


# --- the gate cycle: a table of its own, its states in each subtest's folder ----------------------


def _gate_cycle_run(folder: Path) -> Path:
    """A gate cycle as the suite writes it: one subtest passed, one failed after its gate was
    switched off; each subtest's cluster logs in ``<suite>/<subtest>/``."""
    suite = folder / GATE_CYCLE
    results: list[dict[str, Any]] = [
        {"id": "versions", "outcome": "passed", "seconds": 1.0, "start": 0.0, "step": "versions"}
    ]
    clock = 1.0
    for subtest, failing in (("core-dra", False), ("consumable-capacity", True)):
        own = suite / subtest
        (own / "dumps").mkdir(parents=True)
        (own / "dumps" / "dump-final.json").write_text("{}")
        for phase in GATE_CYCLE_PHASES:
            (own / f"containerd-{phase}.log").write_text("c\n")
            (own / f"pods-{phase}").mkdir()
            (own / f"kubelet-{phase}.log").write_text("k\n")
        entries = ["bring-up", GATE_CYCLE_PHASES[0], "gate-off", GATE_CYCLE_PHASES[1],
                   "gate-on-again", GATE_CYCLE_PHASES[2], "cleanup"]  # fmt: skip
        for name in entries:
            kind = "phase" if name in GATE_CYCLE_PHASES else "step"
            outcome = "failed" if failing and name == GATE_CYCLE_PHASES[1] else "passed"
            results.append({"id": f"{subtest}/{name}", "outcome": outcome, "seconds": 2.0,
                            "start": clock, kind: name, "subtest": subtest})  # fmt: skip
            clock += 2.0
    doc = {"schema_version": 3, "suite": GATE_CYCLE, "finished": True,
           "current": {"version": CURRENT}, "results": results}  # fmt: skip
    (suite / "summary.json").write_text(json.dumps(doc))
    return suite / "summary.json"


def test_the_gate_cycle_has_its_own_table_and_its_cells_link_their_subtests_logs(
    tmp_path: Path,
) -> None:
    upgrade_downgrade(tmp_path / "run")
    _gate_cycle_run(tmp_path / "run")

    html = write_report(summaries_of([tmp_path / "run"]), tmp_path / "run").html.read_text()

    upgrades, cycle = _matrices(html)
    assert "core-dra" in _rows(upgrades) and "consumable-capacity" not in _rows(upgrades)
    assert set(_rows(cycle)) == {"core-dra", "consumable-capacity"}  # core-dra: another test
    assert [text for _, _, text in cycle[1]] == [
        "bring-up", GATE_CYCLE_PHASES[0], "gate-off", GATE_CYCLE_PHASES[1], "gate-on-again",
        GATE_CYCLE_PHASES[2], "cleanup",
    ]  # fmt: skip
    assert not any("none" in classes for row in _rows(cycle).values() for _, classes, _ in row)
    assert _rows(cycle)["consumable-capacity"][0][1] == {"subtest", "failed"}
    assert _rows(upgrades)["core-dra"][0][1] == {"subtest"}  # not the gate cycle's core-dra
    cell = re.search(r'<td class="cell failed"[^>]*title="gate-cycle[^"]*".*?</td>', html, re.S)
    assert cell is not None
    links = _hrefs(cell.group())
    phase = GATE_CYCLE_PHASES[1]
    assert f"gate-cycle/consumable-capacity/containerd-{phase}.log" in links
    assert f"gate-cycle/consumable-capacity/pods-{phase}/" in links
    assert "gate-cycle/consumable-capacity/dumps/dump-final.json" in links
    assert not any("core-dra" in link for link in links)


def test_the_report_knows_the_suites_name_for_the_gate_cycle() -> None:
    from e2e_dra._suite import GATE_CYCLE as SUITE_NAME
    from e2e_dra._suite import SUITES
    from e2e_dra.subtest import GATE_CYCLE_PHASES as PHASES

    assert SUITE_NAME == GATE_CYCLE and PHASES is GATE_CYCLE_PHASES  # named once
    assert SUITES[GATE_CYCLE].kind is GATE_CYCLE_KIND


# --- links under a base URL -----------------------------------------------------------------------


def test_with_a_link_base_every_link_is_the_base_and_the_artifacts_path(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path / "artifacts")
    weird = run / "javascript:alert(1)"
    weird.mkdir()
    (weird / "summary.json").write_text(json.dumps({"suite": "j", "results": []}))

    html = write_report(summaries_of([run]), run, link_base=BASE + "/").html.read_text()

    links = _hrefs(html)
    assert links and all(link.startswith(BASE + "/") for link in links)
    assert f"{BASE}/prr-evidence.md" in links
    assert f"{BASE}/javascript%3Aalert%281%29/summary.json" in links
    for link in links:
        relative = unquote(link.removeprefix(BASE + "/"))
        target = (run / relative).resolve()
        assert target.is_relative_to(run.resolve())
        assert target.is_dir() if link.endswith("/") else target.is_file()


def test_the_command_takes_the_link_base_from_the_flag_or_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = synthetic_run(tmp_path / "artifacts")
    before = use(None)
    try:
        monkeypatch.setenv("E2E_DRA_REPORT_LINK_BASE", "https://from.example/env")
        assert main(["report", str(run), "-o", str(tmp_path / "a")]) == 0
        use(None)
        args = ["report", str(run), "-o", str(tmp_path / "b"), "--link-base", BASE]
        assert main(args) == 0
    finally:
        use(before)
    capsys.readouterr()

    from_env = _hrefs((tmp_path / "a" / "report.html").read_text())
    from_flag = _hrefs((tmp_path / "b" / "report.html").read_text())
    assert all(h.startswith("https://from.example/artifacts/") or
               h == "https://from.example/env/prr-evidence.md" for h in from_env)  # fmt: skip
    assert all(h.startswith(BASE + "/") for h in from_flag)  # the flag wins


@pytest.mark.parametrize(
    ("base", "said"),
    [
        ("ftp://example.org/x", "is not an http(s) URL of a report's folder"),
        ("javascript:alert(1)", "is not an http(s) URL of a report's folder"),
        ("https://example.org/x?token=1", "has a ?query"),
        ("https://example.org/x#top", "has a #fragment"),
        ("https://exa mple.org/", "is not a usable URL: it holds ' '"),
        ("", "is not an http(s) URL"),
        ("https://example.org/" + "a" * 3000, "is 3020 characters long, more than 2048"),
    ],
)
def test_a_bad_link_base_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: str, said: str
) -> None:
    run = synthetic_run(tmp_path / "artifacts")

    code = main(["report", str(run), "-o", str(tmp_path / "out"), "--link-base", base])

    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    named = base.partition("?")[0][:60]  # a query's values are not repeated (they may be tokens)
    assert err.count("\n") == 1 and f"--link-base {named!r}"[:-1] in err and said in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_a_bad_link_base_setting_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = synthetic_run(tmp_path / "artifacts")
    monkeypatch.setenv("E2E_DRA_REPORT_LINK_BASE", "file:///etc")
    before = use(None)
    try:
        code = main(["report", str(run), "-o", str(tmp_path / "out")])
    finally:
        use(before)

    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1
    assert "E2E_DRA_REPORT_LINK_BASE='file:///etc' is not an http(s) URL" in err


def test_write_report_checks_the_link_base_it_is_given(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path / "artifacts")

    with pytest.raises(InputError, match="link base 'data:text/html,x' is not an http"):
        write_report(summaries_of([run]), tmp_path / "out", link_base="data:text/html,x")
    assert not (tmp_path / "out").exists()
