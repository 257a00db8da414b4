"""What a run leaves behind under ARTIFACTS: a summary, and on failure a dump of the cluster;
what an earlier run left is set aside, not erased.

Both are written whole or not at all (temp file + rename), and the summary is rewritten after
every entry, so a run that is interrupted still leaves a summary that says how far it got. Its
shape is promised to readers (``e2e-dra report``) by :mod:`e2e_dra.report`: ``schema_version``,
each result's ``start``, a failure's ``logs``, the components' ready times, the KEPs each
subtest exercises.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import platform
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import e2e_dra
from e2e_dra._platform import describe_machine
from e2e_dra._suite._steps import Entry
from e2e_dra.hostkit import atomic_write_text
from e2e_dra.kube import Kube, KubeError, path
from e2e_dra.releases import Release
from e2e_dra.report import (
    KEPS_BY_SUBTEST,
    SCHEMA_VERSION,
    STEP_PASSED,
    artifact_logs,
    dump_file_name,
    safe_name,
)
from e2e_dra.subtest import StepTime

MAX_STEPS = 200
"""Named steps of one phase kept in its result: a step in a loop must not grow the summary
without bound; beyond this only the steps that did not pass are kept, the rest counted."""


GIT_TIMEOUT = 5.0


@functools.cache
def run_environment() -> dict[str, str]:
    """Where a run ran, for its summary's ``environment``: the machine (cores, memory, kernel,
    cgroup version), Python, and e2e-dra's version (with the commit, from a git checkout)."""
    return {
        "machine": describe_machine(),
        "python": platform.python_version(),
        "e2e_dra": _e2e_dra_version(),
    }


def _e2e_dra_version() -> str:
    """``0.1.0``, or ``0.1.0 (git 7405df1a2b3c-dirty)`` when the package is a git checkout's."""
    package = Path(e2e_dra.__file__).resolve().parent
    try:
        described = subprocess.run(
            ["git", "-C", str(package), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return e2e_dra.__version__
    commit = described.stdout.strip()[:64] if described.returncode == 0 else ""
    return f"{e2e_dra.__version__} (git {commit})" if commit else e2e_dra.__version__


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """A file's SHA-256, once per version of it in a run (the key: its size and time): four
    suites start from the same release binaries."""
    del size, mtime_ns
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def binaries_used(releases: Mapping[str, Release]) -> dict[str, dict[str, Any]]:
    """What each component was started from, as data for ARTIFACTS (never the binaries, nor
    links to them): its release, the binary's path, size and SHA-256 (about a second for a
    cluster's 500 MB, once per run); what cannot be read is said in place of the digest."""
    used: dict[str, dict[str, Any]] = {}
    for component, release in releases.items():
        binary = release.bin_dir / component
        entry: dict[str, Any] = {"release": release.version, "path": str(binary)}
        try:
            info = binary.stat()
            entry["size"] = info.st_size
            entry["sha256"] = _sha256(str(binary.resolve()), info.st_size, info.st_mtime_ns)
        except OSError as exc:
            entry["error"] = f"cannot read it: {exc.strerror or exc}"
        used[component] = entry
    return used


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return path


__all__ = [
    "Summary",
    "binaries_used",
    "dump_cluster",
    "resource_versions",
    "safe_name",
    "write_json",
]


EARLIER = "earlier"
"""Under ``$ARTIFACTS``: the suites' folders of earlier runs, ``<suite>/<when it ended>``."""


def set_aside(folder: Path, keep: int) -> Path | None:
    """Move a suite's folder of an earlier run out of the way, to ``earlier/<suite>/<when its
    summary was last written>`` next to it, and keep only the newest ``keep`` of those: a rerun
    must not erase the evidence of the run before it, nor fill the disk. Returns where it went
    (None: there was none, or ``keep`` is 0 and it was removed)."""
    if not folder.exists():
        return None
    if keep <= 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    summary = folder / "summary.json"
    ended = (summary if summary.is_file() else folder).stat().st_mtime
    shelf = folder.parent / EARLIER / folder.name
    shelf.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(ended))
    target = shelf / stamp
    for n in itertools.count(2):
        if not target.exists():
            break
        target = shelf / f"{stamp}-{n}"
    folder.rename(target)
    for old in sorted(shelf.iterdir(), reverse=True)[keep:]:  # their names sort by time
        shutil.rmtree(old, ignore_errors=True)
    return target


class Summary:
    """``<dir>/summary.json``: versions, seed, and outcome and wall time of every entry; per
    subtest of the run, the KEPs it exercises (``keps``: ``Subtest.keps`` by subtest name), which
    the report's production-readiness evidence is sorted by; ``console``: where the suite's
    narrative is (its console lines, whole), relative to the suite's folder, for the report to
    link."""

    def __init__(
        self,
        directory: Path,
        suite: str,
        seed: int,
        plan: list[str],
        describe: Callable[[], dict[str, Any]],
        *,
        keps: Mapping[str, Sequence[int]] | None = None,
        console: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.path = directory / "summary.json"
        self.suite = suite
        self.seed = seed
        self.plan = plan
        self._describe = describe
        self._keps = {name: list(numbers) for name, numbers in (keps or {}).items() if numbers}
        self._console = console
        self._started = time.time()
        self._results: list[dict[str, Any]] = []
        self._finished = False

    def record(
        self,
        entry: Entry,
        outcome: str,
        seconds: float,
        message: str = "",
        notes: list[str] | None = None,
        started: float | None = None,
        *,
        steps: Sequence[StepTime] = (),
        failed_step: str | None = None,
    ) -> None:
        """``entry`` ended ``seconds`` after it started (``started``, a time.time(); by default
        ``seconds`` ago: a phase that ran with others started earlier than its test reports it);
        ``notes`` are its failure's lines, whose files under this suite's directory become the
        result's ``logs``; ``steps`` are a phase's named steps, ``failed_step`` the one its
        failure ended."""
        begun = time.time() - seconds if started is None else started
        start = max(0.0, begun - self._started)
        result: dict[str, Any] = {"id": entry.id, "outcome": outcome, "seconds": round(seconds, 3)}
        result["start"] = round(start, 3)
        result[entry.kind] = entry.name
        if entry.subtest:
            result["subtest"] = entry.subtest
        if message:
            result["message"] = message
        if failed_step is not None:
            result["failed_step"] = failed_step
        if steps:
            result.update(self._steps(steps))
        logs = artifact_logs(notes or [], self.path.parent)
        if logs:
            result["logs"] = logs
        self._results.append(result)
        self.write()

    @property
    def results(self) -> list[dict[str, Any]]:
        """Every entry recorded so far, as the summary has it (a copy)."""
        return [dict(result) for result in self._results]

    def _steps(self, steps: Sequence[StepTime]) -> dict[str, Any]:
        """A phase's steps in the order they started, timed as the results are (seconds since
        the suite started), at most :data:`MAX_STEPS` of them (``steps_left_out``: how many
        passed steps were left out)."""
        ordered = sorted(steps, key=lambda s: s.start)
        if len(ordered) > MAX_STEPS:
            kept = ordered[:MAX_STEPS] + [
                s for s in ordered[MAX_STEPS:] if s.outcome != STEP_PASSED
            ]
        else:
            kept = ordered
        out: dict[str, Any] = {
            "steps": [
                {
                    "name": s.name,
                    "start": round(max(0.0, s.start - self._started), 3),
                    "seconds": round(max(0.0, s.seconds), 3),
                    "outcome": s.outcome,
                }
                for s in kept
            ]
        }
        if len(kept) < len(ordered):
            out["steps_left_out"] = len(ordered) - len(kept)
        return out

    def finish(self, description: dict[str, Any]) -> None:
        self._finished = True
        self.write(description)

    def write(self, description: dict[str, Any] | None = None) -> Path:
        return write_json(self.path, self.data(description))

    def data(self, description: dict[str, Any] | None = None) -> dict[str, Any]:
        per_phase: dict[str, float] = {}
        per_subtest: dict[str, float] = {}
        for result in self._results:
            if "phase" in result:
                per_phase[result["phase"]] = per_phase.get(result["phase"], 0) + result["seconds"]
            if "subtest" in result:
                name = result["subtest"]
                per_subtest[name] = per_subtest.get(name, 0) + result["seconds"]
        described = dict(description if description is not None else self._describe())
        if "components_ready" in described:
            described["components_ready"] = self._relative(described["components_ready"])
        console = dict(self._console()) if self._console is not None else {}
        return {
            "schema_version": SCHEMA_VERSION,
            "suite": self.suite,
            "seed": self.seed,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self._started)),
            "wall_seconds": round(time.time() - self._started, 3),
            "finished": self._finished,
            "plan": self.plan,
            **described,
            # after the description: a backend's key of the same name cannot replace it
            "environment": run_environment(),
            KEPS_BY_SUBTEST: self._keps,
            **({"console": console} if console else {}),
            "seconds_per_phase": {k: round(v, 3) for k, v in per_phase.items()},
            "seconds_per_subtest": {k: round(v, 3) for k, v in per_subtest.items()},
            "results": self._results,
        }

    def _relative(self, ready: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Ready times with the wall-clock ``ready_at`` turned into ``started`` and ``ready``,
        seconds since the suite started, as the results' ``start``."""
        out = []
        for entry in ready:
            entry = dict(entry)
            at = entry.pop("ready_at", None)
            if isinstance(at, int | float) and at > 0:
                entry["ready"] = round(at - self._started, 3)
                entry["started"] = round(entry["ready"] - float(entry.get("seconds", 0)), 3)
            out.append(entry)
        return out


def resource_versions(kube: Kube) -> list[str]:
    """The resource.k8s.io versions this server serves, newest first."""
    candidates = ("v1", "v1beta2", "v1beta1", "v1alpha3")
    return [v for v in candidates if kube.served(f"resource.k8s.io/{v}")]


def dump_cluster(kube: Kube, directory: Path, label: str, namespace: str = "default") -> Path:
    """DRA objects, pods, events and nodes as the server sees them now, in one JSON file."""
    unreachable: str | None
    try:
        versions = resource_versions(kube)
    except KubeError as exc:  # the API server is away: dump what does not need discovery
        versions = []
        unreachable = str(exc)
    else:
        unreachable = None
    queries: dict[str, tuple[str, str, str | None]] = {
        "nodes": ("v1", "nodes", None),
        "pods": ("v1", "pods", namespace),
        "events": ("v1", "events", namespace),
    }
    if versions:
        api = f"resource.k8s.io/{versions[0]}"
        for plural in ("deviceclasses", "resourceslices"):
            queries[plural] = (api, plural, None)
        for plural in ("resourceclaims", "resourceclaimtemplates"):
            queries[plural] = (api, plural, namespace)
    dump: dict[str, Any] = {"label": label, "namespace": namespace}
    if unreachable:
        dump["discovery_error"] = unreachable
    for key, (api_version, plural, ns) in queries.items():
        try:
            dump[key] = kube.list(path(api_version, plural, namespace=ns))
        except KubeError as exc:
            dump[key] = {"error": str(exc)}
    # DeviceTaintRules are not served at every version that serves the other DRA kinds.
    for version in ("v1", "v1beta2", "v1alpha3"):
        if version not in versions:
            continue
        try:
            dump["devicetaintrules"] = kube.list(
                path(f"resource.k8s.io/{version}", "devicetaintrules")
            )
            break
        except KubeError as exc:
            dump["devicetaintrules"] = {"error": str(exc)}
    return write_json(directory / dump_file_name(label), dump)
