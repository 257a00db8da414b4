"""``summary.json``'s published JSON Schema (``e2e_dra/report/summary.schema.json``): it ships in
the package, it documents every field the writer emits, the writer's output and real summaries
validate, broken documents are refused, and it agrees with the report's hand-written checker
(``e2e_dra/report/_load.py``) on a table of good and bad documents, so neither can change what
it accepts without the other, or without this table saying why they differ.

``tests/data/summaries/`` holds real summaries of the main job (the suites' own runs on this
project's test machine, December 2026), trimmed to a few results, facts and ready times each:
upgrade-downgrade (xfailed and skipped phases with their logs and failed steps), kubelet-last
(the kubelet's own release), control-plane-first (a local checkout with deviations) and
gate-cycle (each subtest's own cluster); and upgrade-downgrade-failed, a main job's run of that
suite with a real failure (a real driver's phase) beside its known bugs.
"""

from __future__ import annotations

import ast
import copy
import fnmatch
import json
import logging
import re
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from synthetic_run import synthetic_run

from e2e_dra._suite import GATE_CYCLE, SUITES, UPGRADE_DOWNGRADE
from e2e_dra._suite._artifacts import MAX_STEPS, Summary
from e2e_dra._suite._cluster import RealCluster
from e2e_dra._suite._narrative import Narrative
from e2e_dra._suite._together import as_phase_thread
from e2e_dra._suite._upgrade import ClusterSettings, Releases
from e2e_dra.localupcluster import Cluster, ReadyTime
from e2e_dra.releases import Release, VersionsUnderTest
from e2e_dra.report import (
    KEPS_BY_SUBTEST,
    NOTHING_TO_PROVE,
    PROVED,
    SCHEMA_FILE,
    SCHEMA_VERSION,
    STEP_FAILED,
    STEP_INTERRUPTED,
    STEP_OUTCOMES,
    STEP_PASSED,
    SummaryError,
    _limits,
    load_summary,
    summary_schema,
)
from e2e_dra.report._load import OUTCOMES
from e2e_dra.subtest import StepTime

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "e2e_dra" / "report" / SCHEMA_FILE
REAL = sorted((Path(__file__).parent / "data" / "summaries").glob("*.json"))
SCHEMA = summary_schema()
VALIDATOR = Draft202012Validator(SCHEMA)


def schema_errors(doc: Any) -> list[str]:
    """What the schema says is wrong with ``doc``: one ``path: message`` per error."""
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in VALIDATOR.iter_errors(doc)
    ]


def checker_error(doc: Any, directory: Path) -> str | None:
    """What the report's reader says is wrong with ``doc`` written as a summary, or None."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "summary.json"
    path.write_text(json.dumps(doc))
    try:
        load_summary(path)
    except SummaryError as exc:
        return str(exc)
    return None


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` (into ``$defs``) merged in, its own keywords winning."""
    ref = node.get("$ref")
    if ref is None:
        return node
    target = SCHEMA
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**_resolve(target), **{k: v for k, v in node.items() if k != "$ref"}}


def undocumented(doc: Any, node: dict[str, Any], where: str = "") -> Iterator[str]:
    """The keys of ``doc`` that ``node`` (a schema) names in no ``properties`` or
    ``patternProperties`` and lets through only as unknown (an open object). A schema that
    names no keys at all is a map (``additionalProperties``) or a value of any shape."""
    node = _resolve(node)
    if isinstance(doc, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(doc):
            yield from undocumented(item, node["items"], f"{where}[{index}]")
    if not isinstance(doc, dict):
        return
    if not node.get("properties") and not node.get("patternProperties"):
        if isinstance(node.get("additionalProperties"), dict):  # a map: names to one kind
            for key, value in doc.items():
                at = f"{where}.{key}" if where else key
                yield from undocumented(value, node["additionalProperties"], at)
        return  # any object: the subtest's own facts, say
    for key, value in doc.items():
        at = f"{where}.{key}" if where else key
        if key in node.get("properties", {}):
            yield from undocumented(value, node["properties"][key], at)
            continue
        patterns = [s for p, s in node.get("patternProperties", {}).items() if re.search(p, key)]
        if patterns:
            yield from undocumented(value, patterns[0], at)
        elif isinstance(node.get("additionalProperties"), dict):
            yield from undocumented(value, node["additionalProperties"], at)
        else:
            yield at


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object within ``node``."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


# --- the schema itself ------------------------------------------------------------------------


def test_the_schema_is_a_draft_2020_12_schema_that_describes_every_field() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert f"schema_version {SCHEMA_VERSION}" in SCHEMA["description"]  # bumped with the writer
    missing = [
        name
        for node in _schemas(SCHEMA)
        for key in ("properties", "patternProperties")
        for name, field in node.get(key, {}).items()
        if not isinstance(field, dict) or not field.get("description")
    ]
    assert missing == []


def test_the_schema_says_what_the_writer_and_the_reader_say() -> None:
    """Outcomes, key names and bounds: the schema's copies of the Python constants."""
    defs = SCHEMA["$defs"]
    props = SCHEMA["properties"]
    assert defs["result"]["properties"]["outcome"]["enum"] == list(OUTCOMES)
    assert defs["step"]["properties"]["outcome"]["enum"] == list(STEP_OUTCOMES)
    assert (STEP_PASSED, STEP_FAILED, STEP_INTERRUPTED) == STEP_OUTCOMES
    assert defs["name"]["maxLength"] == _limits.MAX_NAME
    assert defs["seconds"]["maximum"] == _limits.MAX_SECONDS
    started = defs["ready"]["properties"]["started"]
    assert (started["minimum"], started["maximum"]) == (-_limits.MAX_SECONDS, _limits.MAX_SECONDS)
    assert defs["ready"]["properties"]["attempts"]["maximum"] == _limits.MAX_ATTEMPTS
    assert props["schema_version"]["maximum"] == _limits.MAX_SCHEMA
    keps = props[KEPS_BY_SUBTEST]["additionalProperties"]
    assert (keps["maxItems"], keps["items"]["maximum"]) == (
        _limits.MAX_KEPS,
        _limits.MAX_KEP_NUMBER,
    )
    facts = props["facts"]["additionalProperties"]["patternProperties"]
    assert sorted(facts) == sorted([f"^{PROVED}/", f"^{NOTHING_TO_PROVE}/"])


def test_the_schema_ships_in_the_package() -> None:
    """The file the package reads is the one in the source tree, and the package data of a
    wheel (pyproject's ``[tool.setuptools.package-data]``) takes it along."""
    assert summary_schema() == json.loads(SCHEMA_PATH.read_text())
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    patterns = [*package_data.get("*", []), *package_data.get("e2e_dra.report", [])]
    assert any(fnmatch.fnmatchcase(SCHEMA_FILE, p) for p in patterns), patterns
    assert (SCHEMA_PATH.parent / "__init__.py").is_file()  # a package, found by packages.find


# --- what the writer writes -------------------------------------------------------------------


def _release(tmp_path: Path, version: str, **more: Any) -> Release:
    return Release(version, tmp_path / version / "bin", tmp_path / version / "src", "build", **more)


def _backend(tmp_path: Path, suite: str) -> RealCluster[Any]:
    """The suite's real backend, its state as the steps leave it after a run (versions, node
    runtime, cluster environment, binaries per state, facts, settings) and its clusters' ready
    times, without a cluster: describe() reads only those."""
    backend: RealCluster[Any] = RealCluster(SUITES[suite], {}, tmp_path / "artifacts")
    state = backend.state
    current = _release(tmp_path, "v1.38.0-beta.0", deviations=("a module => v0.1.0",))
    previous = _release(tmp_path, "v1.37.2")
    state.versions = VersionsUnderTest(current, previous, "1.37", "build", choice="latest")
    state.node_runtime = tmp_path / "node"
    state.cluster_env = {"FEATURE_GATES": "DRAFancy=true"}
    state.log_dir = tmp_path / "artifacts" / suite
    state.kubeconfig = tmp_path / "admin.kubeconfig"
    components = ("kube-apiserver", "kubelet")
    state.record_binaries("0-initial-1.37", dict.fromkeys(components, previous))
    state.record_binaries("1-v1.38.0-beta.0", dict.fromkeys(components, current))
    state.facts = {
        "a": {
            f"{PROVED}/p": ["a claim allocated"],
            f"{NOTHING_TO_PROVE}/q": "nothing was prepared",
            "survivor": "pod-1",
            "counts/p": {"prepared": 2},
        }
    }
    if suite == GATE_CYCLE:
        state.per_subtest = {"a": {"env": {"RUNTIME_CONFIG": "resource.k8s.io/v1"}, "gates": "G=1"}}
    else:
        older_kubelet = _release(tmp_path, "v1.36.5")
        state.releases = Releases(
            {"kube-apiserver": previous, "kubelet": older_kubelet}, current, ("kube-apiserver",)
        )
        state.settings = ClusterSettings(
            "DRAFancy=true", "resource.k8s.io/v1", {"DRAGone": "unknown to v1.37.2"}, {}
        )
    cluster = Cluster(tmp_path / "src", tmp_path / "logs", host_lock=tmp_path / "host.lock")
    now = time.time()
    cluster.ready_times += [
        ReadyTime("etcd", "0-initial-1.37", 0.5, 1, now + 1),
        ReadyTime("kube-apiserver", "0-initial-1.37", 2.5, 3, now + 4),
    ]
    backend.steps.clusters.append(cluster)
    return backend


def _steps(count: int, begun: float, *, last: str = STEP_PASSED) -> list[StepTime]:
    steps = [StepTime(f"step {i}", begun + i / 100, 0.01, STEP_PASSED) for i in range(count)]
    steps[-1] = StepTime(steps[-1].name, steps[-1].start, 0.01, last)
    return steps


def _written_run(tmp_path: Path, suite: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run of ``suite``'s plan through the writer (Summary) as the suite run records it: every
    outcome, a phase's steps (beyond MAX_STEPS in one), failures naming their dump and a log.
    Returns the summary after its first entry, and once finished."""
    backend = _backend(tmp_path, suite)
    directory = tmp_path / "artifacts" / suite
    (directory / "dumps").mkdir(parents=True)
    plan = list(SUITES[suite].plan(["a", "b"], 7))
    narrative = Narrative(directory)  # what the suite said: a line of its own, one of a's
    with narrative.attached(), as_phase_thread("a"):
        logging.getLogger("e2e_dra.x").warning("a warning, as every level is kept")
    summary = Summary(
        directory,
        suite,
        7,
        [e.id for e in plan],
        backend.describe,
        keps={"a": (4381,), "b": ()},
        console=narrative.files,
    )
    phase_outcomes = ["failed", "passed", "xfailed", "interrupted", "passed", "skipped"]
    phases = 0
    first: dict[str, Any] = {}
    for index, entry in enumerate(plan):
        outcome = "failed" if index == 2 else "passed"  # a cluster step
        begun = time.time()
        steps: list[StepTime] = []
        notes: list[str] = []
        if entry.kind == "phase":
            outcome = phase_outcomes[phases % len(phase_outcomes)]
            phases += 1
            many = MAX_STEPS + 5 if phases == 2 else 3
            last = STEP_FAILED if outcome == "failed" else STEP_PASSED
            steps = _steps(many, begun, last=STEP_INTERRUPTED if outcome == "interrupted" else last)
        if outcome in ("failed", "xfailed"):
            dump = directory / "dumps" / f"dump-{index}.json"
            dump.write_text("{}\n")
            log = directory / f"kubelet-{index}.log"
            log.write_text("log\n")
            notes = [f"e2e-dra: dump: {dump}", f"kubelet log: {log}"]
        summary.record(
            entry,
            outcome,
            0.25,
            "" if outcome == "passed" else f"AssertionError: {entry.id} {outcome}",
            notes,
            begun,
            steps=steps,
            failed_step=steps[-1].name if steps and outcome == "failed" else None,
        )
        if not first:
            first = json.loads(summary.path.read_text())
    summary.finish(backend.describe())
    return first, json.loads(summary.path.read_text())


@pytest.mark.parametrize("suite", [UPGRADE_DOWNGRADE, GATE_CYCLE])
def test_what_the_writer_writes_validates_and_is_documented(tmp_path: Path, suite: str) -> None:
    first, done = _written_run(tmp_path, suite)

    assert first["finished"] is False and len(first["results"]) == 1
    assert done["finished"] is True and done["schema_version"] == SCHEMA_VERSION
    # the writer's paths this run took: without them the validation below proves little
    results = done["results"]
    assert {r["outcome"] for r in results} == set(OUTCOMES)
    assert any("steps_left_out" in r for r in results)
    assert any("failed_step" in r for r in results)
    assert any(len(r.get("logs", [])) == 2 for r in results)
    assert {r["step"] for r in results if "step" in r} and {
        r["phase"] for r in results if "phase" in r
    }
    assert [c["attempts"] for c in done["components_ready"]] == [1, 3]
    assert done[KEPS_BY_SUBTEST] == {"a": [4381]}
    assert done["console"] == {"log": "console.log", "subtests": {"a": "console/a.log"}}
    assert "subtests" in done if suite == GATE_CYCLE else done["kubelet"]["version"] == "v1.36.5"
    for doc in (first, done):
        assert schema_errors(doc) == []
        assert list(undocumented(doc, SCHEMA)) == []
        assert checker_error(doc, tmp_path / "checked") is None


def test_the_synthetic_runs_of_the_report_tests_validate(tmp_path: Path) -> None:
    """The older shape (schema_version 1: no steps, no KEPs) the report's tests are made of."""
    folder = synthetic_run(tmp_path)
    summaries = sorted(folder.rglob("summary.json"))
    assert len(summaries) >= 2  # an upgrade suite's and the gate cycle's, at least
    for path in summaries:
        doc = json.loads(path.read_text())
        assert schema_errors(doc) == [], path
        assert list(undocumented(doc, SCHEMA)) == [], path


@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_real_summaries_validate_and_every_field_they_hold_is_documented(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert schema_errors(doc) == []
    assert list(undocumented(doc, SCHEMA)) == []
    assert load_summary(path).suite == doc["suite"]


def test_the_real_summaries_are_all_the_suites() -> None:
    assert sorted({json.loads(p.read_text())["suite"] for p in REAL}) == sorted(SUITES)


def test_an_undocumented_field_is_found() -> None:
    """The check above can fail: a key the schema does not name, at any depth, is reported."""
    doc = json.loads(REAL[0].read_text())
    doc["results"][0]["retries"] = 2
    doc["components_ready"][0]["pid"] = 42
    assert sorted(undocumented(doc, SCHEMA)) == ["components_ready[0].pid", "results[0].retries"]


# --- agreement with the report's checker ------------------------------------------------------


def _base() -> dict[str, Any]:
    """A small summary of every part the checker reads, as the writer writes them."""
    return {
        "schema_version": SCHEMA_VERSION,
        "suite": "upgrade-downgrade",
        "seed": 7,
        "started": "2026-12-01T18:10:12+0000",
        "wall_seconds": 99.0,
        "finished": True,
        "plan": ["bring-up", "core-dra/after-cluster-creation"],
        "current": {"version": "v1.38.0-beta.0", "deviations": ["a module => v0.1.0"]}
        | {"go": "go1.27.3"},
        "previous": {"version": "v1.37.2", "deviations": []},
        "environment": {"machine": "x86_64, 2 CPUs", "python": "3.11.7", "e2e_dra": "0.1.0"},
        "binaries": {"0-initial-1.37": {"kubelet": "v1.37.2"}},
        "facts": {"core-dra": {"proved/p": ["x"], "nothing_to_prove/q": "why", "n": 2}},
        "feature_gates_dropped": {"DRAGone": "unknown to v1.37.2"},
        "runtime_config_dropped": {},
        "components_ready": [
            {"state": "0-initial-1.37", "component": "etcd", "seconds": 1.5, "attempts": 1}
            | {"started": 2.0, "ready": 3.5}
        ],
        KEPS_BY_SUBTEST: {"core-dra": [4381]},
        "console": {"log": "console.log", "subtests": {"core-dra": "console/core-dra.log"}},
        "seconds_per_phase": {"after-cluster-creation": 3.0},
        "seconds_per_subtest": {"core-dra": 3.0},
        "results": [
            {"id": "bring-up", "outcome": "passed", "seconds": 20.0, "start": 1.0}
            | {"step": "bring-up"},
            {
                "id": "core-dra/after-cluster-creation",
                "outcome": "failed",
                "seconds": 3.0,
                "start": 21.0,
                "phase": "after-cluster-creation",
                "subtest": "core-dra",
                "message": "AssertionError: gone",
                "failed_step": "allocate",
                "steps": [{"name": "allocate", "start": 21.5, "seconds": 1.0, "outcome": "failed"}],
                "steps_left_out": 3,
                "logs": [{"label": "dump", "path": "dumps/dump-core-dra.json"}],
            },
        ],
    }


DELETE = object()
PHASE = ["results", 1]
STEP = [*PHASE, "steps", 0]
READY = ["components_ready", 0]

Case = tuple[str, list[Any], Any]

GOOD: list[Case] = [
    ("as written", [], None),
    ("no schema_version (before 1)", ["schema_version"], DELETE),
    ("no start (before schema_version 1)", [*PHASE, "start"], DELETE),
    ("a field the schema does not know (a later version's)", ["coverage"], {"a": 1}),
    ("a later version's field in a result", [*PHASE, "retries"], 2),
    ("no results yet", ["results"], []),
    ("no optional fields of a result", [*PHASE, "steps"], DELETE),
    ("a message longer than the report keeps", [*PHASE, "message"], "x" * 10_000),
    ("a component started before the suite", [*READY, "started"], -3.0),
    ("a name of the longest length", [*PHASE, "id"], "x" * _limits.MAX_NAME),
    ("a subtest naming the most KEPs", [KEPS_BY_SUBTEST, "core-dra"], list(range(1, 33))),
]
"""Both accept these: ``(why, where, value)``; ``where`` is set to ``value`` (or deleted)."""

BOTH_REFUSE: list[Case] = [
    ("the top level is not an object", [], ["suite"]),
    ("no suite", ["suite"], DELETE),
    ("an empty suite", ["suite"], ""),
    ("a suite that is not text", ["suite"], 7),
    ("no results", ["results"], DELETE),
    ("results not a list", ["results"], {"id": "x"}),
    ("schema_version as text", ["schema_version"], "3"),
    ("a negative schema_version", ["schema_version"], -1),
    ("a schema_version beyond any", ["schema_version"], _limits.MAX_SCHEMA + 1),
    ("schema_version true", ["schema_version"], True),
    ("started not a time", ["started"], "yesterday"),
    ("started a number", ["started"], 1764612612),
    ("started before 1970", ["started"], "1969-12-31T23:00:00+0000"),
    ("wall_seconds as text", ["wall_seconds"], "99"),
    ("negative wall_seconds", ["wall_seconds"], -1),
    ("a result without id", [*PHASE, "id"], DELETE),
    ("a result without outcome", [*PHASE, "outcome"], DELETE),
    ("an unknown outcome", [*PHASE, "outcome"], "flaky"),
    ("an outcome that is not text", [*PHASE, "outcome"], 1),
    ("a result that is not an object", PHASE, "passed"),
    ("seconds as text", [*PHASE, "seconds"], "3"),
    ("negative seconds", [*PHASE, "seconds"], -0.5),
    ("seconds beyond a week", [*PHASE, "seconds"], _limits.MAX_SECONDS + 1),
    ("seconds true", [*PHASE, "seconds"], True),
    ("a start as text", [*PHASE, "start"], "21"),
    ("a phase without its subtest", [*PHASE, "subtest"], DELETE),
    ("a subtest that is not text", [*PHASE, "subtest"], 5),
    ("a phase that is not text", [*PHASE, "phase"], 1),
    ("a step that is not text", ["results", 0, "step"], ["bring-up"]),
    ("an id too long", [*PHASE, "id"], "x" * (_limits.MAX_NAME + 1)),
    ("a message that is not text", [*PHASE, "message"], ["a"]),
    ("a failed_step that is not text", [*PHASE, "failed_step"], 3),
    ("logs not a list", [*PHASE, "logs"], {"path": "x"}),
    ("a log without its path", [*PHASE, "logs", 0, "path"], DELETE),
    ("a log that is not an object", [*PHASE, "logs", 0], "dumps/x.json"),
    ("a log's label that is not text", [*PHASE, "logs", 0, "label"], 1),
    ("steps not a list", [*PHASE, "steps"], "allocate"),
    ("a step without its name", [*STEP, "name"], DELETE),
    ("a step without its start", [*STEP, "start"], DELETE),
    ("a step's outcome of a result's", [*STEP, "outcome"], "xfailed"),
    ("a step's outcome skipped", [*STEP, "outcome"], "skipped"),
    ("binaries not an object", ["binaries"], ["v1.37.2"]),
    ("binaries null", ["binaries"], None),
    ("a state's binaries not an object", ["binaries", "0-initial-1.37"], "v1.37.2"),
    ("a component's version not text", ["binaries", "0-initial-1.37", "kubelet"], 137),
    ("components_ready not a list", ["components_ready"], {}),
    ("a ready time without its state", [*READY, "state"], DELETE),
    ("a ready time without its component", [*READY, "component"], DELETE),
    ("no attempts", [*READY, "attempts"], 0),
    ("too many attempts", [*READY, "attempts"], _limits.MAX_ATTEMPTS + 1),
    ("attempts as text", [*READY, "attempts"], "1"),
    ("negative ready seconds", [*READY, "seconds"], -1),
    ("a start too long before the suite", [*READY, "started"], -_limits.MAX_SECONDS - 1),
    ("keps_by_subtest not an object", [KEPS_BY_SUBTEST], ["core-dra"]),
    ("KEPs not a list", [KEPS_BY_SUBTEST, "core-dra"], "4381"),
    ("a KEP number as text", [KEPS_BY_SUBTEST, "core-dra"], ["4381"]),
    ("KEP number 0", [KEPS_BY_SUBTEST, "core-dra"], [0]),
    ("a KEP number beyond any", [KEPS_BY_SUBTEST, "core-dra"], [_limits.MAX_KEP_NUMBER + 1]),
    ("too many KEPs", [KEPS_BY_SUBTEST, "core-dra"], list(range(1, 34))),
    ("a version that is an object", ["current", "version"], {"v": 1}),
    ("a previous version that is a list", ["previous", "version"], ["v1.37.2"]),
    ("a deviation that is a list", ["previous", "deviations"], [["a"]]),
    ("a dropped gate's reason that is a list", ["feature_gates_dropped", "DRAGone"], ["x"]),
    ("a dropped API's reason that is an object", ["runtime_config_dropped", "a/v1"], {"x": 1}),
    ("why nothing was proved, as a list", ["facts", "core-dra", "nothing_to_prove/q"], ["x"]),
]
"""Both refuse these; the checker's one line names the field."""

SCHEMA_ONLY: list[Case] = [
    # the report does not read these fields: the schema says what the writer writes
    ("a seed as text", ["seed"], "7"),
    ("drivers that are not an object", ["drivers"], ["upstream"]),
    ("finished as text", ["finished"], "yes"),
    ("a plan that is not a list", ["plan"], "bring-up"),
    ("a release that is not an object", ["current"], "v1.38.0"),
    ("an origin that is not text", ["current", "origin"], 5),
    ("a choice that is not text", ["current", "chosen"], ["latest"]),
    ("a Go version that is not text", ["current", "go"], 1.27),
    ("an environment that is not an object", ["environment"], "x86_64"),
    ("a machine that is not text", ["environment", "machine"], {"cpus": 2}),
    ("a Python version that is a number", ["environment", "python"], 3.11),
    ("an e2e-dra version that is a list", ["environment", "e2e_dra"], ["0.1.0"]),
    ("a release source that is not text", ["release_source"], 1),
    ("a node runtime that is not text", ["node_runtime"], {"dir": "/var/lib/e2e-dra"}),
    ("a kubelet version that is not text", ["kubelet"], {"version": 1.35}),
    ("what was proved, as text", ["facts", "core-dra", "proved/p"], "x"),
    ("a narrative that is not an object", ["console"], "console.log"),
    ("a suite's narrative that is not text", ["console", "log"], ["console.log"]),
    ("a subtest's narrative that is not text", ["console", "subtests", "core-dra"], 1),
    ("no steps left out", [*PHASE, "steps_left_out"], 0),
    ("a total as text", ["seconds_per_phase", "after-cluster-creation"], "3"),
    ("a ready time as text", [*READY, "ready"], "3.5"),
    # the reader takes null for absent, and any scalar where it shows text
    ("a step name of null", [*PHASE, "failed_step"], None),
    ("keps_by_subtest null", [KEPS_BY_SUBTEST], None),
    ("a dropped gate's reason as a number", ["feature_gates_dropped", "DRAGone"], 5),
    # the reader's strptime takes every %z; the writer writes +HHMM
    ("started in UTC with Z", ["started"], "2026-12-01T18:10:12Z"),
]
"""The schema refuses these, the checker reads them: fields the report does not read, and the
reader's leniency (null for absent, any scalar shown as text, every UTC offset)."""

CHECKER_ONLY: list[Case] = [
    # JSON Schema's integer is a number without a fraction: 3.0 is one
    ("schema_version 3.0", ["schema_version"], 3.0),
    ("attempts 1.0", [*READY, "attempts"], 1.0),
    ("a KEP number 4381.0", [KEPS_BY_SUBTEST, "core-dra"], [4381.0]),
    # sums of two fields: a result, a step or a start ending beyond a week
    ("a result ending beyond a week", [*PHASE, "start"], _limits.MAX_SECONDS - 1),
    ("a step ending beyond a week", [*STEP, "start"], _limits.MAX_SECONDS - 0.5),
    ("a component ready beyond a week", [*READY, "started"], _limits.MAX_SECONDS - 1),
]
"""The checker refuses these, and JSON Schema cannot say it."""


def _changed(where: list[Any], value: Any) -> Any:
    """The base summary with ``where`` set to ``value`` (deleted when DELETE)."""
    if not where:
        return _base() if value is None else value
    doc = copy.deepcopy(_base())
    parent = doc
    for part in where[:-1]:
        parent = parent[part]
    if value is DELETE:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    return doc


def _ids(cases: list[Case]) -> list[str]:
    return [why for why, _, _ in cases]


@pytest.mark.parametrize(("why", "where", "value"), GOOD, ids=_ids(GOOD))
def test_both_accept(tmp_path: Path, why: str, where: list[Any], value: Any) -> None:
    doc = _changed(where, value)
    assert schema_errors(doc) == []
    assert checker_error(doc, tmp_path) is None


def _checker_name(where: list[Any]) -> str:
    """How the checker's message names the field at ``where``: ``results[1].steps[0].name``;
    the first key of a map (binaries, facts, ...) and all below it are named by the map."""
    name = ""
    for part in where:
        if isinstance(part, int):
            name += f"[{part}]"
        elif name in ("binaries", "facts", KEPS_BY_SUBTEST) or name.endswith("_dropped"):
            return name
        elif name in ("current", "previous"):
            return f"{name}.{part}"
        else:
            name = f"{name}.{part}" if name else part
    return name


@pytest.mark.parametrize(("why", "where", "value"), BOTH_REFUSE, ids=_ids(BOTH_REFUSE))
def test_both_refuse_and_say_where(tmp_path: Path, why: str, where: list[Any], value: Any) -> None:
    doc = _changed(where, value)
    errors = list(VALIDATOR.iter_errors(doc))
    said = checker_error(doc, tmp_path)

    # the schema's error is at the change (a missing key: at the object that lacks it)
    at = where[:-1] if value is DELETE else where
    assert any(list(e.absolute_path)[: len(at)] == at for e in errors), schema_errors(doc)
    assert said is not None
    name = _checker_name(where or ["the top level"])
    lacking = value is DELETE and f"{_checker_name(where[:-1])} has" in said  # "has a phase but"
    assert name in said or lacking, said


@pytest.mark.parametrize(("why", "where", "value"), SCHEMA_ONLY, ids=_ids(SCHEMA_ONLY))
def test_only_the_schema_refuses(tmp_path: Path, why: str, where: list[Any], value: Any) -> None:
    """When the checker starts refusing one of these, move it to BOTH_REFUSE."""
    doc = _changed(where, value)
    assert schema_errors(doc) != []
    assert checker_error(doc, tmp_path) is None


@pytest.mark.parametrize(("why", "where", "value"), CHECKER_ONLY, ids=_ids(CHECKER_ONLY))
def test_only_the_checker_refuses(tmp_path: Path, why: str, where: list[Any], value: Any) -> None:
    doc = _changed(where, value)
    assert schema_errors(doc) == []
    assert checker_error(doc, tmp_path) is not None


def _fields(where: list[Any]) -> Iterator[str]:
    """The field names along ``where`` (not the keys of a map: a state, a subtest, a gate)."""
    node = SCHEMA
    for part in where:
        node = _resolve(node)
        if isinstance(part, int):
            node = node.get("items", {})
        elif part in node.get("properties", {}):
            yield part
            node = node["properties"][part]
        else:
            patterns = node.get("patternProperties", {})
            matched = [schema for p, schema in patterns.items() if re.search(p, part)]
            extra = node.get("additionalProperties")
            node = matched[0] if matched else extra if isinstance(extra, dict) else {}


def _names_in_the_checker() -> set[str]:
    """Every string of _load.py's code (not its docstrings) that names a field of the schema:
    what the checker may read."""
    tree = ast.parse((ROOT / "e2e_dra" / "report" / "_load.py").read_text())
    docstrings = {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    strings = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }
    fields = {name for node in _schemas(SCHEMA) for name in node.get("properties", {})}
    return (strings | {KEPS_BY_SUBTEST}) & fields


def test_every_field_the_checker_names_is_in_the_agreement_table() -> None:
    """A field the checker starts reading must get a row in the tables above (both refuse,
    only one does): the table must not fall behind the checker."""
    covered = {
        name
        for cases in (BOTH_REFUSE, SCHEMA_ONLY, CHECKER_ONLY)
        for _, where, _ in cases
        for name in _fields(where)
    }
    read = _names_in_the_checker()
    assert {"suite", "results", "outcome", "attempts", KEPS_BY_SUBTEST} <= read  # it finds them
    assert sorted(read - covered) == []
