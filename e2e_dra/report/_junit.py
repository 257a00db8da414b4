"""JUnit XML as Kubernetes CI reads it: ``junit_*.xml`` under ``$ARTIFACTS``, one file per suite,
whose cases spyglass and testgrid show by name.

Names are ``<suite> <subtest> <phase>`` (cluster steps ``<suite> <step>``), the classname is
``e2e-dra.<suite>`` (testgrid groups by it), and failure text names logs relative to
``$ARTIFACTS``, where the job's artifact viewer finds them.

A case's time, outcome and message come from the suite's ``summary.json`` (:func:`junit_case`):
the phases of one plan position run at the same time, so the time pytest gives a test (the
first one runs the whole batch, the others replay how theirs ended) is not the phase's own.

A phase a known Kubernetes bug broke as declared (``xfailed``) does not fail the run, so it is a
``<skipped>`` case; but testgrid shows a skip by its text, not its ``message`` attribute, and a
bare skip reads as "not run". Such a case says so in both (``known Kubernetes bug
kubernetes#<n> (<issue URL>): ...``) and carries the properties ``known-bug`` and
``known-bug-url`` (:data:`KNOWN_BUG_PROPERTY`), which testgrid can show as the cell's own.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from e2e_dra.report._knownbugs import KnownBug, known_bug, named_bug
from e2e_dra.report._load import Result

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
    classname: str = ""  # "": ``e2e-dra.<suite>``; a test outside the suites: as pytest names it
    properties: tuple[tuple[str, str], ...] = ()  # the testcase's own (a known bug's name, URL)


@dataclass(frozen=True)
class JUnitSuite:
    """One ``<testsuite>``: an e2e-dra suite's cases (``title`` None: ``e2e-dra <suite>``), or
    the other tests of a pytest run (``title="pytest"``). ``seconds``: its wall time (its cases
    ran partly at the same time, so their sum overstates it); None: the sum."""

    suite: str
    cases: Sequence[JUnitCase]
    seconds: float | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    title: str | None = None


JUNIT_OUTCOME = {
    "passed": "passed",
    "failed": "failed",
    "xfailed": "skipped",  # a known Kubernetes bug broke it, as declared: not a failure
    "skipped": "skipped",
    "interrupted": "error",
}
"""A summary's outcome as a JUnit case's."""
KNOWN_BUG_PROPERTY = "known-bug"
"""The property naming the known Kubernetes bug of an expected failure (``kubernetes#<n>``);
``known-bug-url``: its upstream issue."""


def junit_file_name(suite: str) -> str:
    return f"junit_e2e-dra_{suite}.xml"


def case_name(suite: str, entry_id: str) -> str:
    """The case of a plan entry as testgrid shows it: ``<suite> <subtest> <phase>``."""
    return f"{suite} {entry_id.replace('/', ' ')}"


def junit_case(suite: str, result: Result, text: str = "") -> JUnitCase:
    """The case of one result of ``suite``'s summary, timed as the summary times it (a phase's
    own seconds, also when it ran at the same time as others); ``text``: the failure's long
    form (traceback and notes), which the summary does not keep."""
    outcome = JUNIT_OUTCOME.get(result.outcome, "error")
    message = result.message
    if result.failed_step and result.failed_step not in message:  # a summary not of this suite
        message = f"in step {result.failed_step!r}: {message}"
    name = case_name(suite, result.id)
    bug = known_bug(result)
    if bug is None:
        return JUnitCase(name, outcome, result.seconds, message, text)
    return expected_failure_case(name, result.seconds, message, text, bug=bug)


def expected_failure_case(
    name: str,
    seconds: float,
    message: str,
    text: str = "",
    classname: str = "",
    *,
    bug: KnownBug | None = None,
) -> JUnitCase:
    """The case of a phase a known Kubernetes bug broke as declared, whoever reports it: the
    suite's summary (``xfailed``) or, when there is none to read, pytest alone (an xfail whose
    reason is the same message). The one place that marks such a case, so that each carries the
    properties and says the bug in its message and text. ``bug``: the one ``message`` names when
    not given (a known bug, not named, when it names none)."""
    bug = bug or named_bug(message) or KnownBug(None)
    properties = [(KNOWN_BUG_PROPERTY, bug.name)]
    said = f"known Kubernetes bug {bug.name}"
    if bug.url is not None:
        properties.append((f"{KNOWN_BUG_PROPERTY}-url", bug.url))
        said += f" ({bug.url})"
    if not message.startswith(said):
        message = f"{said}, seen as declared (not a failure): {message}"
    text = f"{message}\n\n{text}" if text else message  # testgrid shows a skip by its text
    return JUnitCase(
        name, "skipped", seconds, message, text, classname, properties=tuple(properties)
    )


def junit_xml(
    suite: str,
    cases: Sequence[JUnitCase],
    artifacts: Path,
    *,
    seconds: float | None = None,
    properties: Mapping[str, str] | None = None,
) -> str:
    """The document for ``suite``'s ``cases``; ``artifacts`` is cut from every path named."""
    one = JUnitSuite(suite, cases, seconds, properties or {})
    return _document(_testsuite(one, str(artifacts).rstrip("/") + "/"))


def junit_xml_all(suites: Sequence[JUnitSuite], artifacts: Path) -> str:
    """One document of several ``<testsuite>`` (a pytest run's ``--junitxml``): every suite of
    the run, and its other tests."""
    prefix = str(artifacts).rstrip("/") + "/"
    root = ET.Element("testsuites", name="e2e-dra")
    for one in suites:
        root.append(_testsuite(one, prefix))
    return _document(root)


def _document(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _testsuite(one: JUnitSuite, prefix: str) -> ET.Element:
    cases = one.cases
    counts = {kind: sum(1 for c in cases if c.outcome == kind) for kind in ("failed", "error")}
    total = sum(c.seconds for c in cases) if one.seconds is None else one.seconds
    root = ET.Element(
        "testsuite",
        name=one.title or f"e2e-dra {one.suite}",
        tests=str(len(cases)),
        failures=str(counts["failed"]),
        errors=str(counts["error"]),
        skipped=str(sum(1 for c in cases if c.outcome == "skipped")),
        time=f"{total:.3f}",
    )
    if one.properties:
        properties = ET.SubElement(root, "properties")
        for name, value in one.properties.items():
            ET.SubElement(properties, "property", name=name, value=_clean(value, prefix))
    for case in cases:
        element = ET.SubElement(
            root,
            "testcase",
            classname=case.classname or f"e2e-dra.{one.suite}",
            name=_clean(case.name, prefix),
            time=f"{case.seconds:.3f}",
        )
        if case.properties:
            properties = ET.SubElement(element, "properties")
            for name, value in case.properties:
                ET.SubElement(properties, "property", name=name, value=_clean(value, prefix))
        if case.outcome in ("failed", "error", "skipped"):
            tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[case.outcome]
            child = ET.SubElement(element, tag, message=_clean(case.message, prefix)[:1000])
            if case.text:
                child.text = _clean(case.text, prefix)[:MAX_TEXT]
    return root


def _clean(text: str, prefix: str) -> str:
    """Paths under ``$ARTIFACTS`` made relative to it; characters XML cannot hold dropped."""
    text = text.replace(prefix, "")
    return "".join(ch for ch in text if ch in "\t\n\r" or _xml_char(ord(ch)))


def _xml_char(code: int) -> bool:
    return 0x20 <= code < 0xD800 or 0xE000 <= code <= 0xFFFD or code >= 0x10000
