"""report.html as a browser shows it: headless Chromium renders a synthetic run's report to a
screenshot and to its DOM, and the test checks what a reader would look for.

Chromium comes from Debian (``apt-get install -y chromium``); CI installs it (``.ci/run``), so
there its absence fails the test, and elsewhere skips it with how to install it.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from recorded_runs import failing_run, passing_run
from synthetic_run import CURRENT, PREVIOUS, STABLE, synthetic_run, upgrade_downgrade

from e2e_dra.report import summaries_of, write_report

WIDTH, HEIGHT = 1300, 1800
FAILED_CELL = bytes((0xF9, 0xC9, 0xCF))  # td.failed in the page's CSS
FAILED_ROW = bytes((0xC0, 0x39, 0x2B))  # th.subtest.failed: a subtest that failed in a run
FAILED_RUN = bytes((0xF2, 0xA5, 0xAE))  # th.run.failed: a run's column header
PASSED_RUN = bytes((0xBF, 0xE6, 0xB3))  # th.run.passed
INSTALL = "apt-get install -y chromium"


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        why = f"no chromium on PATH for the report's browser test; install it: {INSTALL}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    return found


def _browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # as root, and in containers, Chromium has no sandbox to use
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )


class _Text(HTMLParser):
    """The DOM's visible text, its links, the number of failed matrix cells, and the text of
    each header cell (``th``) by its classes."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.hrefs: list[str] = []
        self.failed_cells = 0
        self.headers: list[tuple[frozenset[str], str]] = []
        self.ids: set[str] = set()
        self._skip = 0
        self._header: tuple[frozenset[str], list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = frozenset((attributes.get("class") or "").split())
        if tag in ("style", "script"):
            self._skip += 1
        if attributes.get("id"):
            self.ids.add(str(attributes["id"]))
        if tag == "a" and attributes.get("href"):
            self.hrefs.append(str(attributes["href"]))
        if tag == "td" and "failed" in classes:
            self.failed_cells += 1
        if tag == "th":
            self._header = (classes, [])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip -= 1
        if tag == "th" and self._header is not None:
            self.headers.append((self._header[0], " ".join(self._header[1])))
            self._header = None

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.text.append(data.strip())
            if self._header is not None:
                self._header[1].append(data.strip())


def _there(path: Path, *, folder: bool) -> bool:
    return path.is_dir() if folder else path.is_file()


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG, as Chromium writes."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    offset, idat, header = 8, b"", b""
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind, data = png[offset + 4 : offset + 8], png[offset + 8 : offset + 8 + length]
        header = data if kind == b"IHDR" else header
        idat += data if kind == b"IDAT" else b""
        offset += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    size = 4 if color == 6 else 3
    raw, stride, rows, previous = zlib.decompress(idat), width * size, [], bytes(width * size)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for x in range(stride):
            a = line[x - size] if x >= size else 0
            b = previous[x]
            c = previous[x - size] if x >= size else 0
            if kind == 1:
                line[x] = (line[x] + a) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + b) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        previous = bytes(line)
    return width, height, [bytes(r[i : i + 3]) for r in rows for i in range(0, stride, size)]


def test_the_report_renders_with_its_matrix_failure_versions_and_live_links(
    chromium: str, tmp_path: Path
) -> None:
    run = synthetic_run(tmp_path / "artifacts")
    page = write_report(summaries_of([run]), run).html
    shot = tmp_path / "report.png"

    _browser(
        chromium, tmp_path / "profile", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
        page.as_uri(),
    )  # fmt: skip
    dom = _browser(chromium, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout.decode()

    parsed = _Text()
    parsed.feed(dom)
    text = " ".join(parsed.text)
    for name in ("core-dra", "device-taints", "one", "two"):
        assert re.search(rf"\b{re.escape(name)}\b", text), name
    assert parsed.failed_cells == 1
    assert "✗" in text and "dump" in text and "kube-apiserver log" in text
    assert "1-v1.38.0-beta.0" in text and "v1.37.2" in text
    assert "dropped feature gates: DRAFancyGate: unknown to v1.37.2" in text
    files = [h for h in parsed.hrefs if not h.startswith("#")]
    relative = [h for h in files if "://" not in h]
    assert relative and relative == files  # nothing points off the artifacts
    missing = [h for h in relative if not _there(page.parent / h, folder=h.endswith("/"))]
    assert missing == []
    anchors = {h[1:] for h in parsed.hrefs if h.startswith("#")}
    assert anchors and anchors <= parsed.ids  # every link of the page's own leads somewhere
    width, height, pixels = _pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(set(pixels)) > 20  # drawn, not blank
    assert FAILED_CELL in set(pixels)  # the failed cell shows in its colour


def _rows_with(pixels: list[bytes], width: int, colors: tuple[bytes, ...]) -> list[int]:
    """The pixel rows (y) holding every one of ``colors``."""
    return [
        y
        for y in range(len(pixels) // width)
        if all(c in set(pixels[y * width : (y + 1) * width]) for c in colors)
    ]


def test_a_merged_report_tells_its_runs_apart_and_shows_the_failed_row_red(
    chromium: str, tmp_path: Path
) -> None:
    """Two runs of one suite on two pairs, from two machines' folders: the default pair fails,
    the stable pair passes. Each has its own column group headed by its pair and verdict; the
    failed subtest's row is red; the headline says FAILED and where."""
    upgrade_downgrade(tmp_path / "default", setup=1020.0)
    upgrade_downgrade(tmp_path / "stable", *STABLE, failing=False)
    summaries = summaries_of([tmp_path / "default", tmp_path / "stable"])
    page = write_report(summaries, tmp_path / "merged").html
    shot = tmp_path / "merged.png"  # kept with the test's files, to look at

    _browser(
        chromium, tmp_path / "profile", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
        page.as_uri(),
    )  # fmt: skip
    dom = _browser(chromium, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout.decode()

    parsed = _Text()
    parsed.feed(dom)
    runs = [(classes, text) for classes, text in parsed.headers if "run" in classes]
    failing, passing = f"{PREVIOUS} → {CURRENT}", f"{STABLE[0]} → {STABLE[1]}"
    assert [("failed" in c, "passed" in c) for c, _ in runs] == [(True, False), (False, True)]
    assert runs[0][1].startswith(f"upgrade-downgrade {failing} failed: 9 passed, 1 failed")
    assert runs[1][1].startswith(f"upgrade-downgrade {passing} passed: 11 passed")
    red = [text for classes, text in parsed.headers if {"subtest", "failed"} <= classes]
    assert red == ["device-taints"]
    assert parsed.failed_cells == 1
    text = " ".join(parsed.text)
    assert "FAILED" in text and f"{failing}; {passing}" in text
    assert "failing step : the pod keeps running" in text
    assert "setup 17m00s" in text  # the releases' 17 minutes: one collapsed bar
    width, _, pixels = _pixels(shot.read_bytes())
    assert _rows_with(pixels, width, (FAILED_RUN, PASSED_RUN))  # the two headers, side by side
    assert _rows_with(pixels, width, (FAILED_ROW, FAILED_CELL))  # the red row holds the failure
    assert not _rows_with(pixels, width, (FAILED_ROW, PASSED_RUN))


NAVIGATE = """<script>
const landed = [];
for (const link of document.querySelectorAll(LINKS)) {
  window.scrollTo(0, 0);
  link.click();
  const href = link.getAttribute("href");
  const target = document.getElementById(href.slice(1));
  const folded = target && target.closest("details");
  landed.push({href: href, hash: location.hash, found: !!target,
    top: target ? target.getBoundingClientRect().top : null, scrolled: window.scrollY,
    bottom: window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 1,
    open: folded ? folded.open : null});
}
document.body.setAttribute("data-landed", JSON.stringify(landed));
</script>"""
"""Put into a copy of the page (the page itself has no script): clicks each link ``LINKS``
selects, as a reader would, and records where the browser took the page."""


def _click_through(chromium: str, page: Path, profile: Path, selector: str) -> list[dict]:
    """Where clicking each link of ``page`` that ``selector`` selects lands, in a window of
    1300x900: the hash, the target's top in the window, whether the page scrolled to its end,
    and whether a folded ``<details>`` around the target opened."""
    probe = page.with_name("navigate.html")
    script = NAVIGATE.replace("LINKS", json.dumps(selector))
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    dom = _browser(
        chromium, profile, "--window-size=1300,900", "--dump-dom", probe.as_uri()
    ).stdout.decode()
    found = re.search(r'data-landed="([^"]*)"', dom)
    assert found, dom[-2000:]
    return list(json.loads(html.unescape(found.group(1))))


def test_clicking_an_entry_of_the_contents_lands_on_its_section(
    chromium: str, tmp_path: Path
) -> None:
    """A merged report of a failing and a passing run: each entry of the table of contents
    (sections, each run, each run's timeline) scrolls its target to the top of the window, or
    as near as the page's end lets it; a PRR answer opens its folded details."""
    upgrade_downgrade(tmp_path / "default")
    upgrade_downgrade(tmp_path / "stable", *STABLE, failing=False)
    for folder in ("default", "stable"):
        summary = tmp_path / folder / "upgrade-downgrade" / "summary.json"
        doc = json.loads(summary.read_text())
        doc["keps_by_subtest"] = {"core-dra": [4381], "device-taints": [5055]}
        summary.write_text(json.dumps(doc))
    page = write_report(summaries_of([tmp_path / "default", tmp_path / "stable"]), tmp_path).html

    landed = _click_through(chromium, page, tmp_path / "profile", "nav.toc a")

    hrefs = [entry["href"] for entry in landed]
    assert hrefs[:3] == ["#failures", "#known-bugs", "#matrix"]
    assert {"#run-1", "#run-2", "#timeline-1", "#timeline-2", "#prr"} <= set(hrefs)
    _all_landed(landed)
    answers = _click_through(chromium, page, tmp_path / "profile2", "table.prr td a")
    assert len(answers) == 2 * 2 * 2  # two KEPs, two runs, two questions (no re-upgrade leg)
    assert all(a["found"] and a["open"] is True for a in answers), answers


def _all_landed(landed: list[dict]) -> None:
    """Each click went to its target, which the window shows at its top (or as near as the
    page's end lets it), below the first screen."""
    for entry in landed:
        assert entry["found"] and entry["hash"] == entry["href"], entry
        at_top = 0 <= entry["top"] <= 12  # the heading at the window's top (scroll-margin)
        assert at_top or (entry["bottom"] and 0 <= entry["top"] < 900), entry
        assert entry["scrolled"] > 0, entry  # every section is below the first screen's top


def test_the_contents_of_a_merged_real_report_land_on_each_section_and_run(
    chromium: str, tmp_path: Path
) -> None:
    """The merged report of the main job's recorded failing and passing runs (five suite runs):
    every entry of the contents, and every run a failure or a known bug names, scrolls its
    section to the top of the window; the failure's names its own run, the failing one."""
    runs = [failing_run(tmp_path / "runs" / "failing"), passing_run(tmp_path / "runs" / "passing")]
    page = write_report(summaries_of(runs), tmp_path / "out").html

    landed = _click_through(chromium, page, tmp_path / "profile", "nav.toc a")

    hrefs = [entry["href"] for entry in landed]
    assert hrefs[:2] == ["#failures", "#known-bugs"]
    assert {f"#run-{n}" for n in range(1, 6)} | {f"#timeline-{n}" for n in range(1, 6)} <= set(
        hrefs
    )
    _all_landed(landed)
    named = _click_through(
        chromium, page, tmp_path / "profile2", "ol.failures li > a, ul.known-bugs li li > a"
    )
    assert [entry["href"] for entry in named] == ["#run-5", "#run-4", "#run-4", "#run-5", "#run-5"]
    _all_landed(named)
