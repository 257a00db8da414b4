"""Where the main job's time goes, with the subtests of a phase at the same time and one by one.

Runs ``./run.sh pytest -x e2e_dra`` (extra pytest arguments after ``--``, e.g. ``-k
upgrade_downgrade`` for one suite) once per mode, with the same ``--e2e-dra-seed``: ``together``
(the default: the subtests of a phase run at the same time) and ``serial``
(``--e2e-dra-serial``), each with its own ``$ARTIFACTS/<mode>``. From every suite's
``summary.json`` it prints, per suite, the wall time and the time of each phase position (from
the end of the cluster step before it to the start of the one after it: what a reader waits,
whatever ran inside), then the ratio of the two modes. Figures, not assertions: nothing fails
when a target is missed.

Needs what the main job needs (root, releases, node runtime). Usage:
``python benchmarks/main_job.py [--mode both|together|serial] [--seed 1] [-- -k upgrade_downgrade]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from soak import run_job, summaries  # the same job runner and reading of summary.json

REPO = Path(__file__).resolve().parents[1]
MODES = {"together": [], "serial": ["--e2e-dra-serial"]}


def run(mode: str, seed: int, root: Path, extra: list[str]) -> dict[str, Any]:
    """One main job in ``mode``; its wall time, exit status and every suite's summary."""
    artifacts = root / mode
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = ["./run.sh", "pytest", "-x", "e2e_dra", f"--e2e-dra-seed={seed}", *MODES[mode], *extra]
    print(f"{mode}: {' '.join(argv)} (log: {artifacts / 'pytest.log'})", flush=True)
    started = time.monotonic()
    status = run_job(argv, artifacts)
    suites = {summary["suite"]: summary for summary in summaries(artifacts)}
    return {"wall": time.monotonic() - started, "status": status, "suites": suites}


def phase_times(summary: dict[str, Any]) -> dict[str, float]:
    """Per phase position (``after-cluster-upgrade``; the gate cycle's summed over subtests),
    the time between the cluster steps around it."""
    results = summary.get("results", [])
    times: dict[str, float] = {}
    block: list[dict[str, Any]] = []
    previous_end: float | None = None
    for result in [*results, None]:
        if result is not None and "phase" in result:
            block.append(result)
            continue
        if block:
            phase = block[0]["phase"]
            if result is not None and previous_end is not None and "start" in result:
                span = float(result["start"]) - previous_end
            else:  # no start times recorded: the phases' own times, one after another
                span = sum(float(r["seconds"]) for r in block)
            times[phase] = times.get(phase, 0.0) + span
            block = []
        if result is not None and "start" in result:
            previous_end = float(result["start"]) + float(result["seconds"])
    return times


def table(label: str, job: dict[str, Any]) -> None:
    print(f"\n{label}: {job['wall']:.0f} s wall, exit status {job['status']}")
    for name, summary in job["suites"].items():
        failed = [r["id"] for r in summary["results"] if r["outcome"] == "failed"]
        print(
            f"  {name:22} {summary['wall_seconds']:7.1f} s"
            + (f"  FAILED {failed}" if failed else "")
        )
        for phase, seconds in phase_times(summary).items():
            print(f"    {phase:28} {seconds:7.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["both", *MODES], default="both")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(os.environ.get("ARTIFACTS", "/tmp/artifacts")) / "bench-main-job",
    )
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    modes = list(MODES) if args.mode == "both" else [args.mode]
    jobs = {mode: run(mode, args.seed, args.root, extra) for mode in modes}
    for mode, job in jobs.items():
        table(mode, job)
    if len(jobs) == 2:
        together, serial = jobs["together"], jobs["serial"]
        print(f"\ntogether / serial: whole job {together['wall'] / serial['wall']:.2f}")
        for name in together["suites"]:
            if name in serial["suites"]:
                ratio = (
                    together["suites"][name]["wall_seconds"]
                    / serial["suites"][name]["wall_seconds"]
                )
                print(f"  {name:22} {ratio:.2f}")
    return max(job["status"] for job in jobs.values())


if __name__ == "__main__":
    sys.exit(main())
