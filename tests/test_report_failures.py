"""What failed, in five minutes: the page's headline and lists put real failures first and known
Kubernetes bugs apart, count each per run and in all, and JUnit marks a known bug as one.

The known bugs come from a real summary of the main job (``tests/data/summaries``): its
``upgrade-downgrade`` run passed with kubernetes#143376 seen twice, as declared.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from synthetic_run import FAILED_ID, upgrade_downgrade

from e2e_dra.report import junit_case, junit_xml, load_summary, summaries_of, write_report
from e2e_dra.report._knownbugs import KUBERNETES_ISSUES, known_bug
from e2e_dra.report._load import Result
from e2e_dra.report._sizes import Size, folder_size

DATA = Path(__file__).parent / "data" / "summaries"
BUG = "kubernetes#143376"
BUG_URL = "https://github.com/kubernetes/kubernetes/issues/143376"
KNOWN_IDS = (
    "device-tolerations/after-cluster-creation",
    "device-tolerations/after-cluster-downgrade",
)


def _real_run(folder: Path, started: str | None = None) -> Path:
    """The main job's upgrade-downgrade summary (passed, two known bugs seen) in ``folder``."""
    suite = folder / "upgrade-downgrade"
    suite.mkdir(parents=True)
    doc = json.loads((DATA / "upgrade-downgrade.json").read_text())
    if started is not None:
        doc["started"] = started
    (suite / "summary.json").write_text(json.dumps(doc))
    return folder


def _section(html: str, anchor: str) -> str:
    """The page from the heading ``anchor`` to the next ``<h2``."""
    start = html.index(f'<h2 id="{anchor}">')
    end = html.find("<h2", start + 1)
    return html[start : end if end >= 0 else len(html)]


def test_a_passed_run_with_known_bugs_lists_them_apart_never_under_failures(
    tmp_path: Path,
) -> None:
    run = _real_run(tmp_path / "run")

    html = write_report(summaries_of([run]), run).html.read_text()

    assert '<p class="verdict">PASSED <span class="known">(2 known Kubernetes bug(s) seen' in html
    failures = _section(html, "failures")
    assert failures.startswith('<h2 id="failures">Failures (0)</h2>')
    assert not any(i in failures for i in KNOWN_IDS) and "xfailed" not in failures
    assert '<div class="first">' not in html  # no first failure: nothing failed
    known = _section(html, "known-bugs")
    assert known.startswith('<h2 id="known-bugs">Known Kubernetes bugs seen (2)</h2>')
    assert f'<a class="upstream" href="{BUG_URL}">{BUG}</a>' in known
    assert "(kube-controller-manager v1.37.2): device-taint eviction ignores a toleration" in known
    assert "seen 2 time(s)" in known and all(i in known for i in KNOWN_IDS)
    assert html.index('id="failures"') < html.index('id="known-bugs"')


def test_a_merged_report_puts_the_real_failure_first_and_counts_each_run_and_all(
    tmp_path: Path,
) -> None:
    """The passing run with known bugs started an hour before the failing one: the failure
    still comes first, in the headline and in the failures list, which holds only it."""
    _real_run(tmp_path / "passing", started="2026-12-01T17:00:00+0000")
    upgrade_downgrade(tmp_path / "failing")  # started 18:10:12
    summaries = summaries_of([tmp_path / "passing", tmp_path / "failing"])

    html = write_report(summaries, tmp_path / "out").html.read_text()

    assert '<p class="verdict">FAILED' in html
    assert html.index(FAILED_ID) < min(html.index(i) for i in KNOWN_IDS)
    failures = _section(html, "failures")
    assert failures.startswith('<h2 id="failures">Failures (1)</h2>')
    assert failures.count("<li>") == 1 and FAILED_ID in failures
    assert "<b>failed</b>, failing step: the pod keeps running (ran" in failures
    assert "ran 6.0s, ended 1m06s into the run" in failures  # started 60.5 s in, ran 6 s
    assert "after 6.0s" not in html
    first = html[html.index('<div class="first">') :].split("</div>")[0]
    assert "(ran 6.0s, ended 1m06s into its run)" in first and FAILED_ID.split("/")[0] in first
    assert _section(html, "known-bugs").count("<code>") == 2
    counts = html[html.index('<table class="counts">') :].split("</table>")[0]
    head = re.findall(r"<th>([^<]*)</th>", counts.split("</tr>")[0])
    assert head[:7] == ["run", "verdict", "passed", "failed", "known bugs seen", "skipped", "time"]
    rows = [re.findall(r"<td[^>]*>(\d+)</td>", row) for row in counts.split("</tr>")[1:-1]]
    assert rows == [["22", "0", "2", "0"], ["9", "1", "0", "1"], ["31", "1", "2", "1"]]
    assert "<th>all 2 runs</th>" in counts


def test_every_size_is_the_runs_folder_without_what_a_symlink_leads_to(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    (folder / "logs").mkdir(parents=True)
    (folder / "a.log").write_bytes(b"x" * 1000)
    (folder / "logs" / "b.log").write_bytes(b"y" * 2048)
    big = tmp_path / "cache.bin"
    big.write_bytes(b"z" * 100_000)
    (folder / "cache").symlink_to(tmp_path)  # a folder outside: never walked
    (folder / "binary").symlink_to(big)  # a file outside: its link only

    size = folder_size(folder)

    link = len(str(tmp_path).encode()) + len(str(big).encode())  # each symlink's own size
    assert size == Size(1000 + 2048 + link, 4)
    assert folder_size(folder, limit=2).partial and "at least" in folder_size(folder, 2).said
    assert Size(1536, 1).said == "1.5 KiB in 1 file"


def test_the_counts_table_says_each_runs_artifacts_size(tmp_path: Path) -> None:
    upgrade_downgrade(tmp_path / "a")
    suite = tmp_path / "a" / "upgrade-downgrade"
    expected = sum(p.stat().st_size for p in suite.rglob("*") if p.is_file())
    files = sum(1 for p in suite.rglob("*") if p.is_file())

    html = write_report(summaries_of([tmp_path / "a"]), tmp_path / "out").html.read_text()

    assert Size(expected, files).said in html
    assert f"<p>artifacts: {Size(expected, files).said}</p>" in html


def test_a_known_bug_is_named_from_its_message_and_linked_by_its_number_only(
    tmp_path: Path,
) -> None:
    record = load_summary(_real_run(tmp_path) / "upgrade-downgrade" / "summary.json")
    xfailed = [r for r in record.results if r.outcome == "xfailed"]

    bug = known_bug(xfailed[0])

    assert bug is not None and bug.name == BUG and bug.url == BUG_URL
    assert bug.where == "kube-controller-manager v1.37.2"
    assert bug.what.startswith("device-taint eviction ignores a toleration with an empty effect")
    assert all(known_bug(r) is None for r in record.results if r.outcome != "xfailed")
    message = 'known Kubernetes bug kubernetes#12" onclick="x (a): b (https://evil.example/1)'
    hostile = known_bug(Result(id="x/p", outcome="xfailed", seconds=1, start=0, message=message))
    assert hostile is not None and hostile.url == f"{KUBERNETES_ISSUES}12"  # from the number
    bare = known_bug(Result(id="x/p", outcome="xfailed", seconds=1, start=0, message="boom"))
    assert bare is not None and bare.url is None and bare.number is None


def test_the_report_knows_where_the_suite_says_known_bugs_live() -> None:
    from e2e_dra.subtest import KUBERNETES_ISSUES as SUITES

    assert SUITES == KUBERNETES_ISSUES


def test_junit_marks_a_known_bug_so_testgrid_shows_it_as_one(tmp_path: Path) -> None:
    record = load_summary(_real_run(tmp_path) / "upgrade-downgrade" / "summary.json")
    cases = [junit_case("upgrade-downgrade", r) for r in record.results]

    root = ET.fromstring(junit_xml("upgrade-downgrade", cases, tmp_path).encode())

    assert root.get("failures") == "0" and root.get("skipped") == "2"
    known = [c for c in root.iter("testcase") if c.find("skipped") is not None]
    assert len(known) == 2
    for case in known:
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert properties == {"known-bug": BUG, "known-bug-url": BUG_URL}
        skipped = case.find("skipped")
        assert skipped is not None
        said = f"known Kubernetes bug {BUG} ({BUG_URL}), seen as declared (not a failure): "
        assert (skipped.get("message") or "").startswith(said)
        assert (skipped.text or "").startswith(said)  # testgrid shows a skip by its text
    passed = [c for c in root.iter("testcase") if c.find("skipped") is None]
    assert passed and all(c.find("properties") is None for c in passed)


def test_a_plain_skip_is_not_marked_as_a_known_bug(tmp_path: Path) -> None:
    upgrade_downgrade(tmp_path)
    record = load_summary(tmp_path / "upgrade-downgrade" / "summary.json")
    skipped = [r for r in record.results if r.outcome == "skipped"]

    case = junit_case("upgrade-downgrade", skipped[0])

    assert case.outcome == "skipped" and case.properties == ()
    assert not case.message.startswith("known Kubernetes bug")
