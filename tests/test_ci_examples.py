"""The CI examples in ``examples/ci``: the GitHub Actions workflow's matrix runs every suite the
project has under both version pairs, the Prow jobs run the same commands one job per cell, and
both merge steps, run as written, turn the cells' artifacts into one report. A Prow suite job's
pod is a node (privileged, the node's state on emptyDir volumes, the host's kernel modules and
cgroups, the machine's size, a timeout a cold run fits in); the Prow merge job installs e2e-dra
alone and links its report under its build's artifacts URL (``--link-base``).

Which suite a cell runs is not read from its name: its pytest command is collected by pytest
(``--collect-only``), and it must select one suite module of ``e2e_dra/test_*.py``, whole.

Hermetic: every process these tests start (pytest collecting, the merge scripts and the
``e2e-dra report`` they run) gets an environment made here (:func:`_hermetic_env`), with a
``HOME`` and caches of the test's own and none of this host's ``KUBE*``, ``E2E_DRA_*``, ``GO*``,
``CI`` or ``ARTIFACTS``: what the host has set cannot change what they see. Linting the workflow
with actionlint needs Go and the Go module proxy (the network) and is in
``tests/real/test_actionlint_real.py``.
"""

from __future__ import annotations

import fnmatch
import importlib
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from synthetic_run import synthetic_run

from e2e_dra._suite import SUITES
from e2e_dra._urls import report_link_base
from e2e_dra.provision._containerd import ContainerdLayout, render_config
from e2e_dra.provision._kubelet import KUBELET_ROOT
from e2e_dra.report import find_summaries
from e2e_dra.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "ci"
WORKFLOW = EXAMPLES / "github-actions.yml"
PROW = EXAMPLES / "prow-job.yaml"
Command = tuple[str, ...]


# --- reading the examples ------------------------------------------------------------------

_EXPRESSION = re.compile(r"\$\{\{\s*([A-Za-z_][\w-]*)\.([A-Za-z_][\w-]*)\s*\}\}")
_VARIABLE = re.compile(r'"?\$(?:\{(\w+)\}|(\w+))"?')


def _evaluate(text: Any, context: Mapping[str, Mapping[str, str]]) -> str:
    """``text`` with its ``${{ context.name }}`` expressions replaced (a context that is not
    given, or a name it lacks, is empty, as ``inputs`` is on a schedule)."""
    value = _EXPRESSION.sub(lambda m: str(context.get(m[1], {}).get(m[2], "")), str(text))
    assert "${{" not in value, f"an expression this test cannot evaluate: {text!r}"
    return value


def _commands(script: str, env: Mapping[str, str]) -> list[Command]:
    """The ``./run.sh`` command lines of a shell script, with ``env``'s variables filled in."""

    def fill(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        return shlex.quote(env[name]) if name in env else match[0]

    commands = []
    for line in script.splitlines():
        line = line.strip()
        if line.startswith("./run.sh "):
            commands.append(tuple(shlex.split(_VARIABLE.sub(fill, line))))
    return commands


def _settings(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """What the versions under test are made of: the version pin and the kubelet's."""
    read = Settings.from_environ(env)
    return read.kubernetes_version, read.kubelet_version


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _cells(matrix: Mapping[str, Any]) -> list[dict[str, str]]:
    """A matrix's combinations, as GitHub Actions makes them (``include`` adds keys to the
    combinations whose original values it matches, else a combination of its own)."""
    keys = [k for k in matrix if k not in ("include", "exclude")]
    cells = [
        dict(zip(keys, values, strict=True))
        for values in itertools.product(*(matrix[k] for k in keys))
    ]
    for gone in matrix.get("exclude", []):
        cells = [c for c in cells if any(c.get(k) != v for k, v in gone.items())]
    originals = list(cells)
    for extra in matrix.get("include", []):
        matched = [c for c in originals if all(c[k] == v for k, v in extra.items() if k in keys)]
        for cell in matched:
            cell.update({k: v for k, v in extra.items() if k not in keys})
        if not matched:
            cells.append(dict(extra))
    return cells


class Workflow:
    def __init__(self, path: Path = WORKFLOW) -> None:
        self.data = _load(path)
        self.jobs: dict[str, dict[str, Any]] = self.data["jobs"]
        (self.suite_job_id,) = [j for j, job in self.jobs.items() if "strategy" in job]
        self.suite_job = self.jobs[self.suite_job_id]

    def cells(self) -> list[dict[str, str]]:
        return _cells(self.suite_job["strategy"]["matrix"])

    def env(
        self, job: Mapping[str, Any], step: Mapping[str, Any], cell: Mapping[str, str]
    ) -> dict[str, str]:
        """The environment of ``step`` in ``cell``: the workflow's, the job's, the step's."""
        env: dict[str, str] = {}
        for level in (self.data, job, step):
            for name, value in (level.get("env") or {}).items():
                env[name] = _evaluate(value, {"matrix": cell, "env": env})
        return env

    def cell_commands(self, cell: Mapping[str, str]) -> Iterator[tuple[Command, dict[str, str]]]:
        """Each ``./run.sh`` command of the cell, with the environment it runs in."""
        for step in self.suite_job["steps"]:
            env = self.env(self.suite_job, step, cell)
            for command in _commands(step.get("run", ""), env):
                yield command, env

    def steps_using(self, job: Mapping[str, Any], action: str) -> list[dict[str, Any]]:
        return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def _pytest(command: Command) -> Command:
    """The pytest arguments of a ``./run.sh pytest ...`` command."""
    assert command[:2] == ("./run.sh", "pytest"), command
    return command[2:]


_HOST_ONLY = ("KUBE", "E2E_DRA", "GO", "XDG_", "CI", "ARTIFACTS", "HOME", "PYTEST", "RUNNER_")


def _hermetic_env(root: Path, **extra: str) -> dict[str, str]:
    """An environment that holds nothing of this host's that e2e-dra, pytest or a merge script
    reads: ``HOME``, the XDG and e2e-dra caches under ``root``, and this Python's venv first on
    ``PATH`` (``e2e-dra`` is found there); ``extra`` on top."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in os.environ.items() if not k.startswith(_HOST_ONLY)}
    kept.pop("KUBECONFIG", None)
    return {
        **kept,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "E2E_DRA_CACHE_DIR": str(root / "e2e-dra-cache"),
        "KUBERNETES_SERVER_CACHE_DIR": str(root / "e2e-dra-cache" / "releases"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        **extra,
    }


def _collected(args: Command, artifacts: Path) -> Counter[str]:
    """How many items pytest collects with ``args``, by module."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=_hermetic_env(artifacts.parent / f"{artifacts.name}-env", ARTIFACTS=str(artifacts)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return Counter(line.split("::")[0] for line in done.stdout.splitlines() if "::" in line)


@pytest.fixture(scope="module")
def suite_items(tmp_path_factory: pytest.TempPathFactory) -> Counter[str]:
    """Every item of every suite module, by module: what `./run.sh pytest e2e_dra` collects."""
    return _collected(("e2e_dra",), tmp_path_factory.mktemp("artifacts"))


def _suite_modules() -> dict[str, str]:
    """``e2e_dra/test_x.py`` -> the suite it declares, for every suite module of e2e_dra."""
    modules = {}
    for path in sorted((ROOT / "e2e_dra").glob("test_*.py")):
        module = importlib.import_module(f"e2e_dra.{path.stem}")
        modules[path.relative_to(ROOT).as_posix()] = module.E2E_DRA_SUITE
    return modules


def test_the_suite_modules_are_every_suite() -> None:
    assert sorted(_suite_modules().values()) == sorted(SUITES)


# --- the GitHub Actions workflow -----------------------------------------------------------


def test_every_cell_provisions_then_runs_one_suite_whole(
    suite_items: Counter[str], tmp_path: Path
) -> None:
    workflow = Workflow()
    ran: dict[str | None, list[str]] = {}
    collections: dict[Command, Counter[str]] = {}
    for cell in workflow.cells():
        (provision, _), (command, env) = workflow.cell_commands(cell)
        assert provision == ("./run.sh", "e2e-dra", "provision"), cell

        args = _pytest(command)
        if args not in collections:
            collections[args] = _collected(args, tmp_path)
        selected = collections[args]

        (module,) = selected  # one suite module ...
        assert selected[module] == suite_items[module], cell  # ... all of it
        ran.setdefault(_settings(env)[0], []).append(module)
    modules = sorted(_suite_modules())
    pairs = {Settings().kubernetes_version, "stable"}  # the default pair, and the stable one
    assert {pair: sorted(mods) for pair, mods in ran.items()} == dict.fromkeys(pairs, modules)


def test_every_cell_uploads_its_own_artifacts_even_when_it_failed() -> None:
    workflow = Workflow()
    (upload,) = workflow.steps_using(workflow.suite_job, "actions/upload-artifact")
    names = []
    for cell in workflow.cells():
        env = workflow.env(workflow.suite_job, upload, cell)
        names.append(_evaluate(upload["with"]["name"], {"matrix": cell, "env": env}))
        assert upload["with"]["path"] == "${{ env.ARTIFACTS }}"
    assert upload["if"] == "always()"
    assert len(set(names)) == len(names) == len(workflow.cells())
    # ARTIFACTS is set before the suite runs, to a folder named after the cell
    setting = [s for s in workflow.suite_job["steps"] if "GITHUB_ENV" in s.get("run", "")]
    assert len(setting) == 1 and "ARTIFACTS=" in setting[0]["run"] and "$CELL" in setting[0]["run"]


def test_the_report_job_waits_for_every_cell_and_merges_their_artifacts() -> None:
    workflow = Workflow()
    (report_id,) = [j for j, job in workflow.jobs.items() if "e2e-dra report" in str(job["steps"])]
    report = workflow.jobs[report_id]
    (upload,) = workflow.steps_using(workflow.suite_job, "actions/upload-artifact")
    (download,) = workflow.steps_using(report, "actions/download-artifact")
    cell_names = [
        _evaluate(
            upload["with"]["name"],
            {"matrix": c, "env": workflow.env(workflow.suite_job, upload, c)},
        )
        for c in workflow.cells()
    ]
    needs = report["needs"] if isinstance(report["needs"], list) else [report["needs"]]
    assert workflow.suite_job_id in needs
    assert report["if"] == "always()"
    assert all(fnmatch.fnmatchcase(n, download["with"]["pattern"]) for n in cell_names)
    assert not download["with"].get("merge-multiple")  # one folder per cell


def _run(
    argv: list[str], workspace: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """A merge step's script, run as its CI engine runs it, in ``workspace``."""
    return subprocess.run(
        argv, cwd=workspace, env=dict(env), capture_output=True, text=True, timeout=120, check=False
    )


def _stub(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/bash\n{script}\n")
    path.chmod(0o755)


def _workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder with a ``./run.sh`` that runs its command with this venv's e2e-dra (the real one
    adds only the venv and the reset of the host's cluster directories), and the environment to
    run a step's script in."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    _stub(workspace, "run.sh", 'exec "$@"')
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    env = _hermetic_env(tmp_path / "env")
    return workspace, {**env, "PATH": os.pathsep.join([str(stubs), env["PATH"]])}


def _html_links_every_summary(
    html: str, page: Path, runs: list[Path], base: str | None = None
) -> None:
    """``html`` links the summary of every suite under ``runs``: relative to the page, or
    under ``base`` (the URL the page's folder is served at)."""
    for run in runs:
        for summary in find_summaries(run):
            relative = os.path.relpath(summary, page.parent)
            assert f'href="{relative if base is None else f"{base}/{relative}"}"' in html, summary


def test_the_workflow_merge_step_reports_every_cell_that_left_a_summary(tmp_path: Path) -> None:
    workflow = Workflow()
    (report,) = [job for job in workflow.jobs.values() if "e2e-dra report" in str(job["steps"])]
    (download,) = workflow.steps_using(report, "actions/download-artifact")
    (merge,) = [s for s in report["steps"] if "e2e-dra report" in s.get("run", "")]
    (upload,) = workflow.steps_using(report, "actions/upload-artifact")
    runner = {"temp": str(tmp_path / "runner-temp")}
    cells = Path(_evaluate(download["with"]["path"], {"runner": runner}))
    ran = [synthetic_run(cells / "e2e-dra-cell-a"), synthetic_run(cells / "e2e-dra-cell-b")]
    (cells / "e2e-dra-cell-never-started").mkdir()  # failed before its suite: no summary
    workspace, env = _workspace(tmp_path)

    # as GitHub runs a step: bash -e {0}
    done = _run(
        ["bash", "-e", "-c", merge["run"]], workspace, {**env, "RUNNER_TEMP": runner["temp"]}
    )

    assert done.returncode == 0, done.stdout + done.stderr
    page = Path(done.stdout.splitlines()[-1])
    assert page.parent == Path(_evaluate(upload["with"]["path"], {"runner": runner}))
    _html_links_every_summary(page.read_text(), page, ran)
    assert "e2e-dra-cell-never-started/ has no summary.json" in done.stdout


def test_the_workflow_merge_step_fails_when_no_cell_left_a_summary(tmp_path: Path) -> None:
    workflow = Workflow()
    (report,) = [job for job in workflow.jobs.values() if "e2e-dra report" in str(job["steps"])]
    (merge,) = [s for s in report["steps"] if "e2e-dra report" in s.get("run", "")]
    workspace, env = _workspace(tmp_path)
    (tmp_path / "runner-temp" / "cells" / "e2e-dra-cell-a").mkdir(parents=True)

    runner_temp = str(tmp_path / "runner-temp")
    done = _run(["bash", "-e", "-c", merge["run"]], workspace, {**env, "RUNNER_TEMP": runner_temp})

    assert done.returncode == 1
    assert "no cell left a summary.json" in done.stdout


# --- the Prow jobs -------------------------------------------------------------------------


def _prow_jobs() -> list[dict[str, Any]]:
    return _load(PROW)["periodics"]


def _container(job: Mapping[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["containers"]
    return container


def _script(container: Mapping[str, Any]) -> str:
    argv = [*container["command"], *container.get("args", [])]
    assert argv[:2] == ["bash", "-c"] and len(argv) == 3, argv
    return argv[2]


def _container_env(container: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def _is_suite_job(job: Mapping[str, Any]) -> bool:
    return "e2e-dra report" not in _script(_container(job))


def test_every_prow_job_is_decorated_and_leaves_artifacts_to_prow() -> None:
    for job in _prow_jobs():
        container = _container(job)
        assert job["decorate"] is True, job["name"]
        assert job["decoration_config"]["timeout"], job["name"]
        assert "ARTIFACTS" not in _container_env(container), job["name"]  # pod utilities set it
        if _is_suite_job(job):
            assert container["securityContext"]["privileged"] is True, job["name"]


def test_the_prow_suite_jobs_are_the_workflows_cells_one_job_each() -> None:
    workflow = Workflow()
    cells = Counter()
    for cell in workflow.cells():
        commands = list(workflow.cell_commands(cell))
        cells[tuple(c for c, _ in commands), _settings(commands[-1][1])] += 1
    jobs = Counter()
    for job in filter(_is_suite_job, _prow_jobs()):
        env = _container_env(_container(job))
        jobs[tuple(_commands(_script(_container(job)), env)), _settings(env)] += 1

    assert jobs == cells


def _report_job() -> dict[str, Any]:
    (report,) = [job for job in _prow_jobs() if not _is_suite_job(job)]
    return report


def _duration(text: str) -> timedelta:
    """A Go duration as Prow's decoration_config takes it: ``1h``, ``10m``, ``1h30m``."""
    parts = re.findall(r"(\d+)(h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    unit = {"h": "hours", "m": "minutes", "s": "seconds"}
    return sum((timedelta(**{unit[u]: int(n)}) for n, u in parts), timedelta())


def _quantity(value: str | int) -> float:
    """A Kubernetes resource quantity: ``2``, ``500m`` (cores), ``16Gi``, ``30G`` (bytes)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", str(value))
    assert match, value
    number, suffix = match.groups()
    scale = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20}
    scale |= {"Gi": 2**30, "Ti": 2**40}
    return float(number) * scale[suffix]


def _daily(cron: str) -> timedelta:
    """The time of day a daily cron line (``M H * * *``) starts its job."""
    minute, hour, *rest = cron.split()
    assert rest == ["*", "*", "*"], cron
    return timedelta(hours=int(hour), minutes=int(minute))


def _mounts(job: Mapping[str, Any]) -> dict[Path, tuple[dict[str, Any], dict[str, Any]]]:
    """The container's mounts by path: (its volume, the mount)."""
    volumes = {v["name"]: v for v in job["spec"].get("volumes", [])}
    return {
        Path(m["mountPath"]): (volumes[m["name"]], m)
        for m in _container(job).get("volumeMounts", [])
    }


def _volume_of(job: Mapping[str, Any], path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The volume and mount ``path`` is on: the deepest mount holding it."""
    mounts = _mounts(job)
    holding = [m for m in mounts if path == m or m in path.parents]
    assert holding, f"{job['name']}: {path} is on the container's own file system"
    return mounts[max(holding, key=lambda m: len(m.parts))]


COLD = timedelta(minutes=35)
"""One suite in a pod with empty caches: the releases' builds (about 27 min on 2 cores, README:
Requirements), the node runtime, the suite."""


def _node_state_dirs() -> list[Path]:
    """Where the node keeps state that containerd's overlayfs snapshots and the kubelet's pod
    volumes live on: containerd's root and state (its config, as provision writes it) and the
    kubelet's root (nodefs)."""
    layout = ContainerdLayout(Settings().node_dir / "containerd")
    config = render_config(layout, sandbox_image="pause", restrict_oom_score_adj=False)
    dirs = [Path(d) for d in re.findall(r"^(?:root|state) = '(.+)'$", config, re.MULTILINE)]
    assert len(dirs) == 2, config
    return [*dirs, KUBELET_ROOT]


def test_every_prow_job_runs_on_a_named_build_cluster() -> None:
    for job in _prow_jobs():
        assert isinstance(job.get("cluster"), str) and job["cluster"], job["name"]


def test_a_prow_suite_jobs_pod_is_a_node() -> None:
    """Privileged, the node's state on emptyDir volumes (overlayfs on the container's overlayfs
    root fails), the host's kernel modules and cgroups."""
    for job in filter(_is_suite_job, _prow_jobs()):
        assert _container(job)["securityContext"]["privileged"] is True, job["name"]
        for path in _node_state_dirs():
            volume, mount = _volume_of(job, path)
            assert "emptyDir" in volume and not mount.get("readOnly"), (job["name"], path)
        for host in ("/lib/modules", "/sys/fs/cgroup"):
            volume, mount = _mounts(job)[Path(host)]
            assert volume["hostPath"]["path"] == host, job["name"]
            assert mount.get("readOnly", False) is (host == "/lib/modules"), (job["name"], host)
        cache, _ = _volume_of(job, Path("/root/.cache/e2e-dra/releases"))
        assert "emptyDir" in cache or "hostPath" in cache, job["name"]  # not the container's


def test_a_prow_suite_jobs_pod_asks_for_the_machine_a_run_was_measured_on() -> None:
    """2 cores and 16 GiB (of the README's 2-core, 24 GiB VM), requests equal to limits (the
    last pod a node evicts), and disk for the caches (about 22 GB)."""
    for job in filter(_is_suite_job, _prow_jobs()):
        resources = _container(job)["resources"]
        requests, limits = resources["requests"], resources["limits"]
        for name in ("cpu", "memory"):
            assert _quantity(requests[name]) == _quantity(limits[name]), (job["name"], name)
        assert _quantity(requests["cpu"]) >= 2, job["name"]
        assert 16 * 2**30 <= _quantity(requests["memory"]) < 24 * 2**30, job["name"]
        assert _quantity(requests["ephemeral-storage"]) >= 22e9, job["name"]


def test_the_prow_timeouts_fit_a_cold_run_and_the_report_starts_after_them() -> None:
    ends = []
    for job in filter(_is_suite_job, _prow_jobs()):
        timeout = _duration(job["decoration_config"]["timeout"])
        grace = _duration(job["decoration_config"]["grace_period"])
        assert COLD * 1.25 <= timeout <= COLD * 2, job["name"]  # a hung run ends in time
        assert grace >= timedelta(minutes=5), job["name"]  # the cluster stopped, summary written
        ends.append(_daily(job["cron"]) + timeout + grace)
    report = _report_job()
    assert _daily(report["cron"]) >= max(ends)
    assert _duration(report["decoration_config"]["timeout"]) <= timedelta(minutes=30)


def _packages(script: str, tool: str) -> list[list[str]]:
    """The arguments after ``<tool> install`` of each line of ``script`` installing with it,
    options left out."""
    found = []
    for line in script.splitlines():
        words = shlex.split(line.split("#")[0]) if f"{tool} install" in line else []
        if words:
            after = words[words.index("install") + 1 :]
            found.append([w for w in after if not w.startswith("-")])
    return found


def test_the_prow_report_job_installs_e2e_dra_and_nothing_else() -> None:
    """No lint or test tools to read summaries: only the checkout (``.``, no extras), into a
    venv; not ./run.sh, which installs e2e-dra[test]; apt only Python's venv."""
    report = _report_job()
    script = _script(_container(report))
    assert "./run.sh" not in script
    assert _packages(script, "pip") == [["."]]
    assert all(set(p) <= {"python3", "python3-venv"} for p in _packages(script, "apt-get"))
    assert "privileged" not in str(_container(report).get("securityContext", {}))
    assert "volumes" not in report["spec"]


def test_the_prow_suite_jobs_link_their_report_into_their_own_build() -> None:
    """The suite's own report.html (pytest writes it, E2E_DRA_REPORT_LINK_BASE) links under the
    gcsweb URL of this job's build's artifacts."""
    for job in filter(_is_suite_job, _prow_jobs()):
        container = _container(job)
        env = _container_env(container)
        prow = {"JOB_NAME": job["name"], "BUILD_ID": "1234"}
        (line,) = [x for x in _script(container).splitlines() if "E2E_DRA_REPORT_LINK_BASE=" in x]
        done = subprocess.run(
            ["bash", "-c", f'set -u\n{line}\nprintf %s "$E2E_DRA_REPORT_LINK_BASE"'],
            env={"PATH": os.environ["PATH"], **env, **prow},
            capture_output=True,
            text=True,
            check=True,
        )
        base = f"{env['GCSWEB']}/{env['BUCKET']}/logs/{job['name']}/1234/artifacts"
        assert done.stdout == base and base.startswith("https://gcsweb.")
        assert report_link_base(done.stdout) == base  # what e2e-dra accepts


def _link_base_flag() -> bool:
    """Whether ``e2e-dra report`` has ``--link-base`` (added by the report's own change)."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "e2e-dra"), "report", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return "--link-base" in done.stdout


def _python_stub(stubs: Path, record: Path) -> None:
    """``python3`` whose ``-m venv DIR`` makes a venv of stubs: its ``pip`` records each call
    (working directory, then arguments) as a JSON line of ``record`` and installs nothing, its
    ``e2e-dra`` is this venv's; any other use runs this Python."""
    python = sys.executable
    e2e_dra = Path(python).parent / "e2e-dra"
    pip = (
        f"#!{python}\nimport json, os, sys\n"
        f"with open({str(record)!r}, 'a') as out:\n"
        "    out.write(json.dumps([os.getcwd(), *sys.argv[1:]]) + '\\n')\n"
    )
    stub = f"""#!{python}
import os, sys
from pathlib import Path
if sys.argv[1:3] == ["-m", "venv"]:
    bin = Path(sys.argv[-1]) / "bin"
    bin.mkdir(parents=True, exist_ok=True)
    (bin / "pip").write_text({pip!r})
    (bin / "e2e-dra").write_text('#!/bin/bash\\nexec {e2e_dra} "$@"\\n')
    for name in ("pip", "e2e-dra"):
        (bin / name).chmod(0o755)
    sys.exit(0)
os.execv({python!r}, [{python!r}, *sys.argv[1:]])
"""
    (stubs / "python3").write_text(stub)
    (stubs / "python3").chmod(0o755)


def test_the_prow_report_job_merges_every_suite_jobs_latest_build(tmp_path: Path) -> None:
    if not _link_base_flag():
        pytest.skip(
            "`e2e-dra report --help` has no --link-base yet, which the report job passes: "
            "this runs once the report's change that adds it is in"
        )
    suite_jobs = [job["name"] for job in filter(_is_suite_job, _prow_jobs())]
    report = _report_job()
    container = _container(report)
    env_of_job = _container_env(container)
    bucket = env_of_job["BUCKET"]
    gcs = tmp_path / "gcs"
    for number, name in enumerate(suite_jobs[1:], start=1000):  # the first one has never run
        logs = gcs / bucket / "logs" / name
        synthetic_run(logs / str(number) / "artifacts")
        (logs / "latest-build.txt").write_text(f"{number}\n")
    workspace, env = _workspace(tmp_path)
    stubs = Path(env["PATH"].split(os.pathsep)[0])
    installed = tmp_path / "installed.jsonl"
    _stub(stubs, "apt-get", f'echo "$*" >>{shlex.quote(str(tmp_path / "apt.txt"))}')
    _python_stub(stubs, installed)
    # gsutil as the script uses it: cat and cp -r, gs://BUCKET/... read from the folder gcs/
    _stub(
        stubs,
        "gsutil",
        f'gcs={shlex.quote(str(gcs))}\nargs=()\nfor a in "$@"; do case "$a" in -m|-q|-r) ;; '
        'gs://*) args+=("$gcs/${a#gs://}") ;; *) args+=("$a") ;; esac; done\n'
        'case "${args[0]}" in cat) exec cat "${args[1]}" ;; '
        "cp) shopt -s nullglob; src=(${args[1]}); [ ${#src[@]} -gt 0 ] && "
        'exec cp -r "${src[@]}" "${args[2]}" ;; esac\nexit 1',
    )
    artifacts = tmp_path / "artifacts"  # what Prow's pod utilities upload
    prow = {"ARTIFACTS": str(artifacts), "CI": "true", "JOB_NAME": report["name"], "BUILD_ID": "77"}

    done = _run(
        [*container["command"], *container["args"]], workspace, {**env, **env_of_job, **prow}
    )

    assert done.returncode == 0, done.stdout + done.stderr
    page = Path(done.stdout.splitlines()[-1])
    assert page.parent == artifacts
    cells = [artifacts / "cells" / name for name in suite_jobs[1:]]
    base = f"{env_of_job['GCSWEB']}/{bucket}/logs/{report['name']}/77/artifacts"
    _html_links_every_summary(page.read_text(), page, cells, base)
    assert f"{suite_jobs[0]}: no summary.json in its latest build" in done.stdout
    # e2e-dra alone was installed, from the checkout the job runs in
    calls = [json.loads(line) for line in installed.read_text().splitlines()]
    assert [[c for c in call if not c.startswith("-")] for call in calls] == [
        [str(workspace), "install", "."]
    ]
