"""A run that dies must not poison the next one; a component that crashes stops the run cleanly.

Each test runs the real main job's first suite (``pytest -x e2e_dra/test_upgrade_downgrade.py
-k core-dra``: one small subtest through bring-up, upgrade and downgrade) in a subprocess on a
real cluster, and kills something at a chosen moment, recognised by the job's own progress lines:

- the whole job with SIGKILL (no handler runs, nothing is cleaned up) during bring-up, a phase,
  the upgrade and the downgrade; then the same command through ``./run.sh`` must find what
  the dead job left (its components, still running in their own process groups and holding the
  ports), stop it, say so, and pass;
- one component (kube-scheduler) with SIGKILL in the middle of a phase; the job must name it with
  the tail of its log, skip what cannot pass any more and stop the cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from e2e_dra.localupcluster._hostlock import start_time
from e2e_dra.settings import settings
from e2e_dra.supervise import ProcessId, terminate

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
SUBTEST = "core-dra"
SUITE = "upgrade-downgrade"
JOB_TIMEOUT = 600.0


def job_env(artifacts: Path) -> dict[str, str]:
    env = {**os.environ, "ARTIFACTS": str(artifacts), "CI": "true", "PYTHONUNBUFFERED": "1"}
    # The kill points are detail lines (a component started, a phase begun), off by default.
    env["E2E_DRA_CONSOLE"] = "detail"
    env.setdefault("E2E_DRA_KUBERNETES_VERSION", "v1.37.2")
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def job_args(artifacts: Path) -> list[str]:
    """One suite of the main job on one subtest; its own basetemp, so that it never rotates away
    ours."""
    return [
        "-x",
        f"e2e_dra/test_{SUITE.replace('-', '_')}.py",
        "-k",
        SUBTEST,
        "-p",
        "no:cacheprovider",
        f"--basetemp={artifacts}/tmp",
    ]


def artifacts_for(name: str) -> Path:
    """Under $ARTIFACTS (kept after the test, for a person to read), fresh for each test."""
    root = settings().artifacts / "kill-and-rerun" / name
    shutil.rmtree(root, ignore_errors=True)
    return root


def start_job(artifacts: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *job_args(artifacts)],
        cwd=REPO,
        env=job_env(artifacts),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(job: subprocess.Popen[str], pattern: str, seen: list[str]) -> re.Match[str]:
    """Lines of the job until one matches ``pattern`` (the job's own progress lines)."""
    assert job.stdout is not None
    deadline = time.monotonic() + JOB_TIMEOUT
    for line in job.stdout:
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found
        if time.monotonic() > deadline:
            break
    pytest.fail(f"the job never printed {pattern!r}:\n{''.join(seen[-40:])}")


def finish(job: subprocess.Popen[str], timeout: float) -> str:
    """The rest of the job's output once it ended; a job that does not end within ``timeout``
    fails the test with every thread's stack (pytest's faulthandler prints them on SIGABRT)."""
    try:
        return job.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        job.send_signal(signal.SIGABRT)
        rest = job.communicate(timeout=30)[0]
        pytest.fail(f"the job did not end within {timeout:.0f}s; its threads:\n{rest[-12000:]}")


def alive_in_ledger() -> list[dict[str, object]]:
    """Processes the host lock's ledger names that still run (same pid and start time)."""
    lock = settings().host_lock
    ledger = lock.with_name(lock.name + ".json")
    record = json.loads(ledger.read_text())
    return [
        p
        for p in record["processes"]
        if isinstance(p["pid"], int) and start_time(p["pid"]) == p["start"]
    ]


def started_by(lines: list[str]) -> dict[int, str | None]:
    """The components the job said it started (``started <name> with pid N``), with their start
    times now (None: gone). The host is shared, so the ledger may already be someone else's."""
    pids = [int(m[1]) for m in (re.search(r"started \S+ with pid (\d+)", x) for x in lines) if m]
    return {pid: start_time(pid) for pid in pids}


def gone(pid: int, started: str | None) -> bool:
    if started is None or start_time(pid) != started:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop_leftovers(started: dict[int, str | None]) -> None:
    """A failed test must not leave its job's components for the next person: stop those still
    running (only the ones the job said it started, by pid and start time)."""
    for pid, when in started.items():
        if not gone(pid, when) and when is not None:
            terminate(ProcessId(pid, int(when)))


def rerun(artifacts: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["./run.sh", "pytest", *job_args(artifacts)],
        cwd=REPO,
        env=job_env(artifacts),
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
        check=False,
    )


KILL_POINTS = {
    # mid bring-up: the control plane is up, the kubelet not yet
    "bring-up": r"started kube-scheduler-0-\S+ with pid",
    # a phase: the subtest's first phase has started on the running cluster
    "phase": rf"\] after-cluster-creation: {SUBTEST}",
    # mid upgrade: the new kube-apiserver is up, the rest are being replaced
    "upgrade": r"started kube-apiserver-1-\S+ with pid",
    # mid downgrade
    "downgrade": r"started kube-apiserver-2-\S+ with pid",
}


@pytest.mark.parametrize("moment", list(KILL_POINTS))
def test_a_killed_job_does_not_poison_the_next(
    moment: str, as_root: None, node_env: dict[str, str]
) -> None:
    job = start_job(artifacts_for(f"{moment}-killed"))
    seen: list[str] = []
    try:
        read_until(job, KILL_POINTS[moment], seen)
        time.sleep(0.5)
        job.send_signal(signal.SIGKILL)  # no handler, no finally: what a dead run leaves
        job.wait(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.stdout is not None
    seen += job.stdout.readlines()  # what it printed between the kill point and its death
    mine = {pid: t for pid, t in started_by(seen).items() if t is not None}
    started = time.monotonic()
    try:
        left = [p for p in alive_in_ledger() if p["start"] is not None]
        assert left, "the kill left nothing running: the test would prove nothing"
        after = rerun(artifacts_for(f"{moment}-next"))
    finally:
        stop_leftovers(mine)
    output = after.stdout + after.stderr
    assert after.returncode == 0, output[-6000:]
    assert "died and left" in output
    print(next(line for line in output.splitlines() if "died and left" in line))
    # named, unless it ended by itself meanwhile (a component the killed modify was stopping)
    assert any(f"(pid {process['pid']})" in output for process in left)
    for process in left:
        assert gone(int(process["pid"]), str(process["start"]))  # and stopped
    assert all(gone(pid, t) for pid, t in mine.items())
    print(
        f"{moment}: killed with {len(left)} processes left; rerun passed in "
        f"{time.monotonic() - started:.0f}s"
    )


def test_a_component_crash_in_a_phase_is_named_and_the_run_stops_cleanly(
    as_root: None, node_env: dict[str, str]
) -> None:
    artifacts = artifacts_for("crash")
    job = start_job(artifacts)
    seen: list[str] = []
    cluster: dict[int, str | None] = {}
    try:
        scheduler = read_until(job, r"started (kube-scheduler-0-\S+) with pid (\d+)", seen)
        read_until(job, rf"\] after-cluster-creation: {SUBTEST}", seen)
        cluster.update(started_by(seen))  # pids and start times of all the job started
        os.kill(int(scheduler[2]), signal.SIGKILL)
        rest = finish(job, timeout=JOB_TIMEOUT)
    finally:
        if job.poll() is None:
            job.kill()
        stop_leftovers(cluster or started_by(seen))
    output = "".join(seen) + rest
    assert job.returncode == 1, output[-6000:]
    assert len(cluster) >= 5, cluster
    crash = f"component crashed: {scheduler[1]} (pid {scheduler[2]}) ended (signal: killed)"
    assert crash in output, output[-6000:]
    at = output.index(crash)
    print(output[at : output.index("\n", at + len(crash) + 400)])
    assert "last lines:" in output
    # stopped cleanly: nothing the job started runs any more
    assert all(gone(pid, t) for pid, t in cluster.items()), output[-4000:]
    summary = json.loads((artifacts / SUITE / "summary.json").read_text())
    assert summary["finished"] is True
    outcomes = {r["id"]: r["outcome"] for r in summary["results"]}
    assert outcomes[f"{SUBTEST}/after-cluster-creation"] == "failed", outcomes
    assert any(crash in str(r.get("message", "")) for r in summary["results"]), summary["results"]
    assert "upgrade" not in outcomes  # -x: the run stopped there, and tore the cluster down


def test_sigterm_in_a_phase_ends_the_job_like_ctrl_c(
    as_root: None, node_env: dict[str, str]
) -> None:
    artifacts = artifacts_for("sigterm")
    job = start_job(artifacts)
    seen: list[str] = []
    cluster: dict[int, str | None] = {}
    try:
        read_until(job, rf"\] after-cluster-creation: {SUBTEST}", seen)
        cluster.update(started_by(seen))
        job.send_signal(signal.SIGTERM)
        rest = finish(job, timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
        stop_leftovers(cluster or started_by(seen))
    output = "".join(seen) + rest
    assert job.returncode == 2, output[-6000:]  # pytest's "interrupted"
    assert "SIGTERM received" in output
    assert len(cluster) >= 5, cluster
    assert all(gone(pid, t) for pid, t in cluster.items())  # the cluster was stopped
    summary = json.loads((artifacts / SUITE / "summary.json").read_text())
    assert summary["finished"] is True
    assert "interrupted" in {r["outcome"] for r in summary["results"]}, summary["results"]
