"""The report of one or more runs, read back from their artifacts: ``report.html`` (matrix,
failures with their logs, production-readiness evidence per KEP, versions, timelines),
``prr-evidence.md`` (that evidence, to paste into a KEP), ``trace.json`` (Perfetto),
``metadata.json`` (Prow's job metadata) and JUnit XML.

It reads ``summary.json`` files and nothing of a cluster, so it runs anywhere the artifacts are:
at the end of each suite, at the end of the run, and as ``e2e-dra report`` over the artifact
folders of several machines. What the summary promises its readers is in ``_schema``, and as a
JSON Schema in ``summary.schema.json`` (:func:`summary_schema`) for readers that are not e2e-dra.
"""

from e2e_dra.report._evidence import EVIDENCE_FILE, Evidence
from e2e_dra.report._junit import (
    JUnitCase,
    JUnitSuite,
    case_name,
    expected_failure_case,
    junit_case,
    junit_file_name,
    junit_xml,
    junit_xml_all,
)
from e2e_dra.report._keps import KEPS, kep_url
from e2e_dra.report._load import (
    MAX_SUMMARY_BYTES,
    Result,
    StepResult,
    SuiteRecord,
    SummaryError,
    find_summaries,
    load_summary,
)
from e2e_dra.report._metadata import METADATA_FILE
from e2e_dra.report._schema import (
    GATE_CYCLE_KIND,
    GATE_CYCLE_PHASES,
    KEPS_BY_SUBTEST,
    NOTHING_TO_PROVE,
    PROVED,
    SCHEMA_FILE,
    SCHEMA_VERSION,
    STEP_FAILED,
    STEP_INTERRUPTED,
    STEP_OUTCOMES,
    STEP_PASSED,
    SUITE_KINDS,
    SUMMARY_FILE,
    UPGRADE_KIND,
    UPGRADE_PHASES,
    SuiteKind,
    artifact_logs,
    dump_file_name,
    safe_name,
    summary_schema,
)
from e2e_dra.report._trace import trace_events
from e2e_dra.report._write import REPORT_FILE, TRACE_FILE, Written, summaries_of, write_report

__all__ = [
    "EVIDENCE_FILE",
    "GATE_CYCLE_KIND",
    "GATE_CYCLE_PHASES",
    "KEPS",
    "KEPS_BY_SUBTEST",
    "MAX_SUMMARY_BYTES",
    "METADATA_FILE",
    "NOTHING_TO_PROVE",
    "PROVED",
    "REPORT_FILE",
    "SCHEMA_FILE",
    "SCHEMA_VERSION",
    "STEP_FAILED",
    "STEP_INTERRUPTED",
    "STEP_OUTCOMES",
    "STEP_PASSED",
    "SUITE_KINDS",
    "SUMMARY_FILE",
    "TRACE_FILE",
    "UPGRADE_KIND",
    "UPGRADE_PHASES",
    "Evidence",
    "JUnitCase",
    "JUnitSuite",
    "Result",
    "StepResult",
    "SuiteKind",
    "SuiteRecord",
    "SummaryError",
    "Written",
    "artifact_logs",
    "case_name",
    "dump_file_name",
    "expected_failure_case",
    "find_summaries",
    "junit_case",
    "junit_file_name",
    "junit_xml",
    "junit_xml_all",
    "kep_url",
    "load_summary",
    "safe_name",
    "summaries_of",
    "summary_schema",
    "trace_events",
    "write_report",
]
