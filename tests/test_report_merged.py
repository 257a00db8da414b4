"""A merged report of a real failing run and a real passing run (``recorded_runs``), read as a
reader of a red page reads it: the real failure first with the counts, ``Failures (n)`` holding
only it, the known Kubernetes bugs apart, and every link of the page leading somewhere: a file
the runs left (relative to the page, or under ``--link-base``), or an anchor of the page itself.
"""

from __future__ import annotations

import os
import posixpath
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from recorded_runs import BUG, FAILED_ID, FAILED_STEP, KNOWN_IDS, failing_run, passing_run

from e2e_dra.report import summaries_of, write_report
from e2e_dra.report._knownbugs import KUBERNETES_ISSUES

LINK_BASE = "https://ci.example/logs/e2e-dra/1234/artifacts/report"


class _Page(HTMLParser):
    """Every link (``href``, ``src``) of a page, every ``id``, and the text under each id."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.links.append(value)
            if name == "id" and value:
                self.ids.add(value)


def _merged(tmp_path: Path, out: Path, link_base: str | None = None) -> Path:
    runs = [failing_run(tmp_path / "runs" / "failing"), passing_run(tmp_path / "runs" / "passing")]
    return write_report(summaries_of(runs), out, link_base=link_base).html


def _section(html: str, anchor: str) -> str:
    """The page from the heading ``anchor`` to the next ``<h2``."""
    start = html.index(f'<h2 id="{anchor}">')
    end = html.find("<h2", start + 1)
    return html[start : end if end >= 0 else len(html)]


def test_a_merged_report_names_the_real_failure_first_and_its_known_bugs_apart(
    tmp_path: Path,
) -> None:
    """The passing run started a day before the failing one; the failure still comes first: in
    the verdict's count, the headline's first failure and the failures list, which holds it
    alone; the four phases kubernetes#143376 broke as declared are listed under the bug."""
    html = _merged(tmp_path, tmp_path / "out").read_text()

    assert '<p class="verdict">FAILED: 1 failed <span class="known">(4 known Kubernetes bug(s)' in (
        html
    )
    first = html[html.index('<div class="first">') :].split("</div>")[0]
    assert "<b>run</b>: upgrade-downgrade v1.37.2 → v1.38.0-beta.0 #2" in first
    assert "<b>subtest</b>: driver-example-v0.4.0" in first
    assert f"<b>failing step</b>: {FAILED_STEP}" in first
    assert html.index(FAILED_ID) < min(html.index(i) for i in KNOWN_IDS)
    assert html.index('<div class="first">') < html.index('<table class="counts">')

    counts = html[html.index('<table class="counts">') :].split("</table>")[0]
    rows = [
        (re.sub(r"<[^>]+>", "", row.split("</td>")[0]), re.findall(r"<td[^>]*>(\d+)</td>", row))
        for row in counts.split("</tr>")[1:-2]
    ]
    assert rows == [
        ("gate-cycle v1.38.0-beta.0", ["8", "0", "0", "0"]),
        ("kubelet-last v1.37.2 → v1.38.0-beta.0, kubelet v1.37.2", ["5", "0", "0", "0"]),
        ("control-plane-first v1.37.2 → v1.38.0-beta.0-dirty", ["10", "0", "0", "0"]),
        ("upgrade-downgrade v1.37.2 → v1.38.0-beta.0 #1", ["22", "0", "2", "0"]),
        ("upgrade-downgrade v1.37.2 → v1.38.0-beta.0 #2", ["20", "1", "2", "0"]),
    ]
    total = counts.split("</tr>")[-2]
    assert "<th>all 5 runs</th>" in total
    assert re.findall(r"<td[^>]*>(\d+)</td>", total) == ["65", "1", "4", "0"]

    failures = _section(html, "failures")
    assert failures.startswith('<h2 id="failures">Failures (1)</h2>')
    assert failures.count("<li>") == 1 and FAILED_ID in failures
    assert not any(i in failures for i in KNOWN_IDS) and "xfailed" not in failures
    known = _section(html, "known-bugs")
    assert known.startswith('<h2 id="known-bugs">Known Kubernetes bugs seen (4)</h2>')
    assert f'<a class="upstream" href="{KUBERNETES_ISSUES}143376">{BUG}</a>' in known
    assert "seen 4 time(s)" in known and FAILED_ID not in known
    assert [known.count(f"<code>{i}</code>") for i in KNOWN_IDS] == [2, 2]  # each run's
    assert html.index('id="failures"') < html.index('id="known-bugs"') < html.index('id="matrix"')


@pytest.mark.parametrize("where", ["beside-the-runs", "outside-the-runs", "link-base"])
def test_every_link_of_a_merged_report_leads_somewhere(tmp_path: Path, where: str) -> None:
    """Each ``href`` and ``src``: an anchor of the page (a run's named as its section is), a
    file or folder the runs left (relative to the page's folder, or the link base's URL for it,
    ``../`` resolved), or a known bug's upstream issue; written beside the runs, in a folder
    far from them, and for a page served at ``--link-base``."""
    out = {
        "beside-the-runs": tmp_path / "runs" / "report",
        "outside-the-runs": tmp_path / "elsewhere" / "a" / "b",
        "link-base": tmp_path / "elsewhere" / "a" / "b",
    }[where]
    base = LINK_BASE if where == "link-base" else None
    page = _merged(tmp_path, out, base)
    html = page.read_text()
    parsed = _Page()
    parsed.feed(html)

    anchors, files, upstream, broken = 0, 0, 0, []
    for link in parsed.links:
        if link.startswith("#"):
            anchors += 1
            if unquote(link[1:]) not in parsed.ids:
                broken.append(link)
            continue
        parts = urlsplit(link)
        if link.startswith(KUBERNETES_ISSUES):
            upstream += 1
            continue
        if base is not None:
            assert link.startswith("https://ci.example/"), link  # never a relative one
            relative = posixpath.relpath(unquote(parts.path), urlsplit(base).path)
        else:
            assert not parts.scheme and not parts.netloc, link
            relative = unquote(parts.path)
        files += 1
        if not Path(os.path.normpath(out / relative)).exists():
            broken.append(link)

    assert broken == []
    assert anchors >= 50 and files >= 130 and upstream >= 1, (anchors, files, upstream)
    for anchor, label in re.findall(r'<a href="#(run-\d+)">([^<]+)</a>', html):
        heading = html[html.index(f'id="{anchor}"') :].split("</h")[0]
        assert unescape(label) in unescape(heading), (anchor, label)
