"""JUnit XML as Kubernetes CI reads it: ``junit_*.xml`` under ``$ARTIFACTS``, one file per suite,
whose cases spyglass and testgrid show by name.

Names are ``<suite> <subtest> <phase>`` (cluster steps ``<suite> <step>``), the classname is
``e2e-dra.<suite>`` (testgrid groups by it), and failure text names logs relative to
``$ARTIFACTS``, where the job's artifact viewer finds them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

MAX_TEXT = 64 * 1024
"""A failure's text beyond this is cut: the logs it names hold the rest."""


@dataclass(frozen=True)
class JUnitCase:
    """One test case: a cluster step or a subtest's phase, as it ended."""

    name: str
    outcome: str  # passed, failed, error, skipped
    seconds: float
    message: str = ""
    text: str = ""


def junit_file_name(suite: str) -> str:
    return f"junit_e2e-dra_{suite}.xml"


def junit_xml(suite: str, cases: list[JUnitCase], artifacts: Path) -> str:
    """The document for ``suite``'s ``cases``; ``artifacts`` is cut from every path named."""
    prefix = str(artifacts).rstrip("/") + "/"
    counts = {kind: sum(1 for c in cases if c.outcome == kind) for kind in ("failed", "error")}
    root = ET.Element(
        "testsuite",
        name=f"e2e-dra {suite}",
        tests=str(len(cases)),
        failures=str(counts["failed"]),
        errors=str(counts["error"]),
        skipped=str(sum(1 for c in cases if c.outcome == "skipped")),
        time=f"{sum(c.seconds for c in cases):.3f}",
    )
    for case in cases:
        element = ET.SubElement(
            root,
            "testcase",
            classname=f"e2e-dra.{suite}",
            name=case.name,
            time=f"{case.seconds:.3f}",
        )
        if case.outcome in ("failed", "error", "skipped"):
            tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[case.outcome]
            child = ET.SubElement(element, tag, message=_clean(case.message, prefix)[:1000])
            if case.text:
                child.text = _clean(case.text, prefix)[:MAX_TEXT]
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _clean(text: str, prefix: str) -> str:
    """Paths under ``$ARTIFACTS`` made relative to it; characters XML cannot hold dropped."""
    text = text.replace(prefix, "")
    return "".join(ch for ch in text if ch in "\t\n\r" or _xml_char(ord(ch)))


def _xml_char(code: int) -> bool:
    return 0x20 <= code < 0xD800 or 0xE000 <= code <= 0xFFFD or code >= 0x10000
