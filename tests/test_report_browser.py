"""report.html as a browser shows it: headless Chromium renders a synthetic run's report to a
screenshot and to its DOM, and the test checks what a reader would look for.

Chromium comes from Debian (``apt-get install -y chromium``); CI installs it (``.ci/run``), so
there its absence fails the test, and elsewhere skips it with how to install it.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from synthetic_run import synthetic_run

from e2e_dra.report import summaries_of, write_report

WIDTH, HEIGHT = 1300, 1800
FAILED_CELL = bytes((0xF9, 0xC9, 0xCF))  # td.failed in the page's CSS
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
    """The DOM's visible text, its links, and the text of every failed matrix cell."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.hrefs: list[str] = []
        self.failed_cells = 0
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag in ("style", "script"):
            self._skip += 1
        if tag == "a" and attributes.get("href"):
            self.hrefs.append(str(attributes["href"]))
        if tag == "td" and "failed" in (attributes.get("class") or "").split():
            self.failed_cells += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.text.append(data.strip())


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
    relative = [h for h in parsed.hrefs if "://" not in h]
    assert relative and relative == parsed.hrefs  # nothing points off the artifacts
    missing = [h for h in relative if not (page.parent / h).is_file()]
    assert missing == []
    width, height, pixels = _pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(set(pixels)) > 20  # drawn, not blank
    assert FAILED_CELL in set(pixels)  # the failed cell shows in its colour
