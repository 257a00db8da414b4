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

Needs what the main job needs (root, releases, node runtime). Usage:
``python benchmarks/soak.py [-n 10] [--seed 1] [--within 120] [-- -k core-dra]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def summaries(artifacts: Path) -> list[dict[str, Any]]:
    """Every suite's summary.json of one run (one per suite the selection reached)."""
    found = []
    for path in sorted(artifacts.glob("*/summary.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            found.append({"suite": path.parent.name, "results": [], "error": str(exc)})
    return found


def run_once(index: int, seed: int, root: Path, extra: list[str]) -> dict[str, Any]:
    artifacts = root / f"soak-{index}"
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = ["./run.sh", "pytest", "-x", "e2e_dra", f"--e2e-dra-seed={seed}", *extra]
    started = time.monotonic()
    with open(artifacts / "pytest.log", "w") as log:
        proc = subprocess.run(
            argv, cwd=REPO, env={**os.environ, "ARTIFACTS": str(artifacts)}, stdout=log,
            stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
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
        "seed": seed,
        "returncode": proc.returncode,
        "passed": proc.returncode == 0,
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
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.within is not None and args.within <= 0):
        parser.error("--runs and --within must be positive")
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    for index in range(1, args.runs + 1):
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
    report_all(runs, args.runs)
    (args.artifacts / "soak.json").write_text(json.dumps(runs, indent=1) + "\n")
    print(f"\nall figures: {args.artifacts / 'soak.json'}")
    return 0 if all(r["passed"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
