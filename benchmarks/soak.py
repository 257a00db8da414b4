"""Is the main job reliable? Run it N times in a row, each with another subtest order, and look.

One run that passes says little about flakes; ten that pass, with the spread of each step's time,
say how often the job fails and where its time goes (and which step's time wanders). Each run is
``./run.sh pytest -x e2e_dra`` (extra pytest arguments after ``--``) with ``--e2e-dra-seed`` set
to the run's seed and its own ``$ARTIFACTS/soak-<n>``; its ``summary.json`` gives every entry's
outcome and seconds. Per run it prints the result, the wall time and each step's time; at the end
the failure rate (with the first failure of each failed run) and, per step, the median, min and
max over the runs that reached it.

``--within MINUTES`` bounds the whole soak: no run is started that, at the median time of the
runs so far, would end after it (the first run always starts), so a soak fits the window it was
given (a CI job, a work session) and says how many of the runs asked for it made.

After each run it records what the run left on the host: processes of the cluster and node
runtime, mounts, bytes under e2e-dra's caches and the node's directories, entries in the temp dir
and bytes in the clusters' scratch dir next to the host lock, TCP ports listening. A leak shows
as a column that grows from run to run (printed as a table at the end).

A soak longer than a work session continues where the last one stopped: ``--resume`` reads the
``soak.json`` of ``--artifacts`` and goes on numbering; every run records when it started and
ended, so the table says which runs were consecutive (no gap longer than ``--gap`` minutes).

Needs what the main job needs (root, releases, node runtime). Usage:
``python benchmarks/soak.py [-n 10] [--seed 1] [--within 120] [--resume] [-- -k core-dra]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from e2e_dra.localupcluster import scratch_dir
from e2e_dra.settings import Settings

REPO = Path(__file__).resolve().parents[1]
PROCESSES = (
    "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
    "etcd", "containerd", "containerd-shim-runc-v2",
)  # fmt: skip
MOUNT_ROOTS = ("/var/lib/kubelet", "/run/containerd", "/var/run/cdi", "/run/netns")
NODE_DIRS = ("/var/lib/kubelet", "/var/run/cdi", "/var/lib/containerd", "/var/run/kubernetes")


def leftovers() -> dict[str, int]:
    """What is on the host between runs: a count or a size per kind (see the module)."""
    found: dict[str, int] = {}
    found["processes"] = sum(1 for name in program_names() if name in PROCESSES)
    mounts = Path("/proc/mounts").read_text().splitlines()
    found["mounts"] = sum(
        1 for line in mounts if len(parts := line.split()) > 1 and parts[1].startswith(MOUNT_ROOTS)
    )
    found["cache_mb"] = _megabytes(Path.home() / ".cache" / "e2e-dra")
    found["node_dirs_mb"] = sum(_megabytes(Path(d)) for d in NODE_DIRS)
    # What clusters leave in the temp dir (etcd's data, the script's mktemp dirs), as entries
    # there and as megabytes under the host lock's scratch dir, where the engine keeps them.
    found["temp_entries"] = sum(1 for _ in Path(tempfile.gettempdir()).iterdir())
    found["scratch_mb"] = _megabytes(scratch_dir(Settings.from_environ(os.environ).host_lock))
    listening = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        listening += sum(1 for row in rows if row.split()[3] == "0A")  # TCP_LISTEN
    found["listening_ports"] = listening
    return found


def program_names() -> list[str]:
    """The name of the program each live process runs.

    psutil's, not ``/proc/<pid>/comm`` as read: the kernel cuts that at 15 characters, so a
    leaked ``kube-controller-manager`` or ``containerd-shim-runc-v2`` would not match; psutil
    completes it from the command line. A zombie is left out: it runs nothing, holds no port or
    file, and is its parent's to reap (the kubelet's, started through ``sudo``, is reaped late by
    a container's PID 1).
    """
    return [
        proc.info["name"]
        for proc in psutil.process_iter(["name", "status"])
        if proc.info["status"] != psutil.STATUS_ZOMBIE
    ]


def _megabytes(root: Path) -> int:
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                continue
    return total // 2**20


def summaries(artifacts: Path) -> list[dict[str, Any]]:
    """Every suite's summary.json of one run (one per suite the selection reached)."""
    found = []
    for path in sorted(artifacts.glob("*/summary.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            found.append({"suite": path.parent.name, "results": [], "error": str(exc)})
    return found


def run_job(argv: list[str], artifacts: Path) -> int:
    """``argv`` (a main job) run with ``$ARTIFACTS`` at ``artifacts``, its output in
    ``pytest.log``; its exit status.

    Nothing outlives the benchmark: a SIGTERM to it is passed on to the job, which ends as it
    does on its own SIGTERM (its cluster stopped), and is waited for; then the benchmark ends
    too. Ctrl-C reaches the job from the terminal itself: the benchmark waits for it as well.
    """
    with open(artifacts / "pytest.log", "w") as log:
        job = subprocess.Popen(
            argv, cwd=REPO, env={**os.environ, "ARTIFACTS": str(artifacts)}, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    terminated: list[int] = []

    def forward(signum: int, frame: object) -> None:
        terminated.append(signum)
        job.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        returncode = job.wait()
    except KeyboardInterrupt:
        job.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if terminated:
        raise SystemExit(f"stopped by SIGTERM; the job ended with status {returncode}")
    return returncode


def run_once(index: int, seed: int, root: Path, extra: list[str]) -> dict[str, Any]:
    artifacts = root / f"soak-{index}"
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = ["./run.sh", "pytest", "-x", "e2e_dra", f"--e2e-dra-seed={seed}", *extra]
    started = time.monotonic()
    returncode = run_job(argv, artifacts)
    wall = time.monotonic() - started
    steps: dict[str, float] = {}
    failures: list[str] = []
    for summary in summaries(artifacts):
        for result in summary.get("results", []):
            steps[f"{summary['suite']}/{result['id']}"] = float(result["seconds"])
            if result["outcome"] in {"failed", "interrupted"}:
                failures.append(f"{result['id']}: {result.get('message', result['outcome'])}")
    return {
        "run": index,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - wall)),
        "ended": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "leftovers": leftovers(),
        "seed": seed,
        "returncode": returncode,
        "passed": returncode == 0,
        "wall_seconds": round(wall, 1),
        "steps": steps,
        "failures": failures,
        "log": str(artifacts / "pytest.log"),
    }


def report_run(run: dict[str, Any]) -> None:
    result = "passed" if run["passed"] else f"FAILED (exit {run['returncode']})"
    print(f"run {run['run']} seed {run['seed']}: {result} in {run['wall_seconds']:.0f}s")
    for step, seconds in run["steps"].items():
        print(f"  {seconds:8.1f}s  {step}")
    for failure in run["failures"][:3]:
        print(f"  failure: {failure[:300]}")
    if not run["passed"] and not run["failures"]:
        print(f"  no failed entry recorded; see {run['log']}")
    sys.stdout.flush()


def report_leftovers(runs: list[dict[str, Any]], gap_minutes: float) -> None:
    """One row per run: what it left behind, and whether it followed the run before at once."""
    kinds = list(runs[0].get("leftovers", {}))
    print(f"\n{'run':>4} {'started':20} {'after':>6} " + " ".join(f"{k:>15}" for k in kinds))
    previous_end: float | None = None
    for run in runs:
        start = time.mktime(time.strptime(run["started"], "%Y-%m-%dT%H:%M:%S"))
        gap = "" if previous_end is None else f"{(start - previous_end) / 60:5.0f}m"
        if previous_end is not None and start - previous_end > gap_minutes * 60:
            gap += " (not consecutive)"
        values = run.get("leftovers", {})
        print(f"{run['run']:>4} {run['started']:20} {gap:>6} "
              + " ".join(f"{values.get(k, '-'):>15}" for k in kinds))  # fmt: skip
        previous_end = time.mktime(time.strptime(run["ended"], "%Y-%m-%dT%H:%M:%S"))


def report_all(runs: list[dict[str, Any]], asked: int) -> None:
    failed = [r for r in runs if not r["passed"]]
    of = f" of {asked} asked for" if len(runs) < asked else ""
    print(f"\n{len(runs)} runs{of}, {len(failed)} failed ({100 * len(failed) / len(runs):.0f}%)")
    for run in failed:
        cause = run["failures"][0] if run["failures"] else f"see {run['log']}"
        print(f"  run {run['run']} (seed {run['seed']}): {cause[:300]}")
    walls = [r["wall_seconds"] for r in runs]
    print(f"\n{'step':60} {'median':>8} {'min':>8} {'max':>8} {'runs':>5}")
    print(f"{'whole job (wall)':60} {statistics.median(walls):8.1f} {min(walls):8.1f} "
          f"{max(walls):8.1f} {len(walls):5d}")  # fmt: skip
    names: list[str] = []
    for run in runs:
        names += [name for name in run["steps"] if name not in names]
    for name in names:
        times = [r["steps"][name] for r in runs if name in r["steps"]]
        print(f"{name[:60]:60} {statistics.median(times):8.1f} {min(times):8.1f} "
              f"{max(times):8.1f} {len(times):5d}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=10, help="how many runs (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; then +1 each")
    parser.add_argument("--artifacts", type=Path,
                        default=Path(os.environ.get("ARTIFACTS") or "/tmp/artifacts"),
                        help="root of the runs' artifacts (default: $ARTIFACTS)")  # fmt: skip
    parser.add_argument("--within", type=float, metavar="MINUTES",
                        help="start no run that would end after this many minutes "
                        "(at the median run time so far)")  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true", help="go on from the soak.json of --artifacts"
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=5.0,
        metavar="MINUTES",
        help="runs further apart than this are not consecutive (default 5)",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.within is not None and args.within <= 0):
        parser.error("--runs and --within must be positive")
    started = time.monotonic()
    log = args.artifacts / "soak.json"
    runs: list[dict[str, Any]] = json.loads(log.read_text()) if args.resume and log.exists() else []
    first = len(runs) + 1
    for index in range(first, first + args.runs):
        if runs and args.within is not None:
            typical = statistics.median(r["wall_seconds"] for r in runs)
            left = args.within * 60 - (time.monotonic() - started)
            if typical > left:
                print(f"stopping after {len(runs)} runs: another takes about {typical:.0f}s, "
                      f"{max(left, 0):.0f}s of --within {args.within:g} min are left")  # fmt: skip
                break
        run = run_once(index, args.seed + index - 1, args.artifacts, args.pytest_args)
        report_run(run)
        runs.append(run)
        log.write_text(json.dumps(runs, indent=1) + "\n")  # a session may end any time
    report_all(runs, len(runs))
    report_leftovers(runs, args.gap)
    print(f"\nall figures: {log}")
    return 0 if all(r["passed"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
