"""What ``summary.json`` promises its readers, shared by the writer (the suite) and the report.

The suite writes a summary; the report (maybe on another machine, maybe a later release of
e2e-dra) reads it. The names both sides must agree on live here, below both: the schema's
version, the file name of a failure's dump, which paths of a failure's notes are artifacts, and
the fact a phase with nothing to prove leaves, and the kinds of suite (:class:`SuiteKind`) with
the names of their phases, which the results' ids and ``phase`` fields carry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
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

UPGRADE_PHASES = (
    "after-cluster-creation",
    "after-cluster-upgrade",
    "after-cluster-downgrade",
    "after-cluster-re-upgrade",
)
"""An upgrade chain's phases. Upstream's three, and the re-upgrade leg of ``upgrade-downgrade``
(previous -> current -> previous -> current), which the production-readiness review asks about: a
chain whose after-downgrade phase returns None simply ends before it."""
GATE_CYCLE_PHASES = ("phase-0-gate-on", "phase-1-gate-off", "phase-2-gate-on-again")
"""The gate cycle's phases: one per state of the subtest's gates."""


@dataclass(frozen=True)
class SuiteKind:
    """A kind of suite: the phases its subtests' chains run, the cluster steps between them that
    change what runs under the subtests' objects, and which subtests it takes.

    ``name`` is the suite's name where the kind has one suite (the gate cycle); an upgrade's
    suites are its variants, each named apart. A summary names its suite, not its kind: a reader
    tells the kind with :meth:`of`."""

    name: str
    phases: tuple[str, ...]
    changes: tuple[str, ...]
    """The steps, in order, each between two of ``phases``."""
    cycles_gates: bool
    """Its subtests each bring up a cluster of their own and name the gates they toggle (the
    gate cycle); the others run together on one cluster and toggle none."""

    def takes(self, toggled_gates: tuple[str, ...]) -> bool:
        """Whether a subtest toggling ``toggled_gates`` belongs to a suite of this kind."""
        return self.cycles_gates == bool(toggled_gates)

    @staticmethod
    def of(suite: str, phases: list[str] | tuple[str, ...]) -> SuiteKind:
        """The kind of a suite named ``suite`` whose results ran ``phases``: the gate cycle by
        its name, or, whatever its name, by a phase of its own."""
        if suite == GATE_CYCLE_KIND.name or set(phases) & set(GATE_CYCLE_KIND.phases):
            return GATE_CYCLE_KIND
        return UPGRADE_KIND


UPGRADE_KIND = SuiteKind(
    "upgrade", UPGRADE_PHASES, ("upgrade", "downgrade", "re-upgrade"), cycles_gates=False
)
"""Upstream's TestUpgradeDowngrade and its staged variants: one cluster, changed under every
subtest's objects at once."""
GATE_CYCLE_KIND = SuiteKind(
    "gate-cycle", GATE_CYCLE_PHASES, ("gate-off", "gate-on-again"), cycles_gates=True
)
"""Upstream's TestFeatureGateCycle: a cluster per subtest, its gates on, off, on again."""
SUITE_KINDS = (UPGRADE_KIND, GATE_CYCLE_KIND)

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
