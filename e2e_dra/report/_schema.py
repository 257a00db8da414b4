"""What ``summary.json`` promises its readers, shared by the writer (the suite) and the report.

The suite writes a summary; the report (maybe on another machine, maybe a later release of
e2e-dra) reads it. The names both sides must agree on live here, below both: the schema's
version, the file name of a failure's dump, which paths of a failure's notes are artifacts, and
the fact a phase with nothing to prove leaves.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 3
"""1: results carry ``start`` (seconds since the suite started) and a failure's ``logs``; the
summary carries ``components_ready``. 2: a phase's result carries its ``steps`` (each ``name``,
``start`` as the results', ``seconds``, ``outcome``: one of :data:`STEP_OUTCOMES`), and a failed
one ``failed_step``, the innermost step its failure ended. 3: the summary carries
:data:`KEPS_BY_SUBTEST`. A summary without ``schema_version`` is from before 1; every field added
since is optional to readers."""

STEP_PASSED = "passed"
STEP_FAILED = "failed"
STEP_INTERRUPTED = "interrupted"
STEP_OUTCOMES = (STEP_PASSED, STEP_FAILED, STEP_INTERRUPTED)
"""How a phase's named step (``ctx.step``) ended: by itself, by an exception, or cut short by
Ctrl-C or SIGTERM."""

SUMMARY_FILE = "summary.json"
SCHEMA_FILE = "summary.schema.json"
"""The JSON Schema (draft 2020-12) of :data:`SUMMARY_FILE`, shipped beside this module: for
readers that are not e2e-dra (a dashboard, a script). e2e-dra's own reader does not use it: its
hand-written checker bounds hostile input and names what is wrong in one line, and the tests
hold the two in agreement."""
KEPS_BY_SUBTEST = "keps_by_subtest"
"""The summary's key holding, per subtest of the run, the numbers of the KEPs it exercises
(``{"core-dra": [4381]}``): what the report's production-readiness evidence is sorted by. Not
``subtests``: the gate cycle's own description already writes that key (each subtest's cluster)."""
DUMPS_DIR = "dumps"
DRIVERS_DIR = "drivers"
PROVED = "proved"
"""A subtest's facts key prefix, ``proved/<phase>``: the named steps of that phase that passed."""
NOTHING_TO_PROVE = "nothing_to_prove"
"""A subtest's facts key prefix, ``nothing_to_prove/<phase>``: why that phase, though green,
did not exercise what the subtest exists for."""

_PATH = re.compile(r"(?<![\w.])(/[^\s'\"<>]+)")


def summary_schema() -> dict[str, Any]:
    """The JSON Schema of ``summary.json`` (:data:`SCHEMA_FILE`), as shipped in the package."""
    text = resources.files("e2e_dra.report").joinpath(SCHEMA_FILE).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def safe_name(text: str) -> str:
    """``text`` as one file name component."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unnamed"


def dump_file_name(entry_id: str) -> str:
    """The file under ``dumps/`` holding the cluster as it was when ``entry_id`` failed."""
    return f"dump-{safe_name(entry_id)}.json"


def artifact_logs(notes: list[str], directory: Path) -> list[dict[str, str]]:
    """The files under ``directory`` that a failure's notes name, as ``{"label", "path"}`` with
    the path relative to ``directory`` (so the artifacts can move); the label is what the note
    says before the path ("kube-apiserver log"). Directories and files elsewhere are left out:
    only what a report can link to and what exists."""
    found: dict[str, dict[str, str]] = {}
    base = directory.resolve()
    for note in notes:
        for match in _PATH.finditer(note):
            path = Path(match.group(1).rstrip(".,;:)"))
            try:
                relative = path.resolve().relative_to(base)
            except (ValueError, OSError):
                continue
            if not path.is_file() or str(relative) in found:
                continue
            label = note[: match.start()].strip().removeprefix("e2e-dra:").strip().rstrip(":")
            found[str(relative)] = {"label": label or path.name, "path": str(relative)}
    return list(found.values())
