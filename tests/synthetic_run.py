"""A small run's artifacts, written as the suites write them: two suites, a failure with its
dump, gRPC calls and component logs, the node's logs of each state (containerd's, the pods') and
the final dump, a skip, component ready times. For the report's tests; ``upgrade_downgrade``
also writes a run of another pair, passing, to merge with the first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

UPGRADE_PHASES = ("after-cluster-creation", "after-cluster-upgrade", "after-cluster-downgrade")
FAILED_ID = "device-taints/after-cluster-upgrade"
STATES = ("0-initial-1.37", "1-v1.38.0-beta.0", "2-restored-1.37")
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
PREVIOUS, CURRENT = "v1.37.2", "v1.38.0-beta.0"
STABLE = ("v1.36.5", "v1.37.2")
"""The other pair ``upgrade_downgrade`` writes a run of (``previous``, ``current``)."""
POD_LOG = "default_tester-1_0000/tester/0.log"
"""Under ``pods-<state>/``: a container's log, as the suite copies the kubelet's."""


def states(previous: str, current: str) -> tuple[str, str, str]:
    """The states of an upgrade suite from ``previous`` to ``current`` and back."""
    minor = previous.removeprefix("v").rsplit(".", 1)[0]
    return (f"0-initial-{minor}", f"1-{current}", f"2-restored-{minor}")


def _result(
    entry_id: str, outcome: str, start: float, seconds: float, *, step: bool = False, **more: Any
) -> dict:
    """A result as Summary.record writes it; ``step``: a cluster step of one subtest."""
    result = {"id": entry_id, "outcome": outcome, "seconds": seconds, "start": start}
    subtest, _, name = entry_id.rpartition("/")
    result["step" if step or not subtest else "phase"] = name
    if subtest:
        result["subtest"] = subtest
    return result | more


def upgrade_downgrade(
    directory: Path,
    previous: str = PREVIOUS,
    current: str = CURRENT,
    *,
    failing: bool = True,
    setup: float = 1.0,
) -> dict:
    """The upgrade-downgrade suite's folder from ``previous`` to ``current``: with ``failing``,
    device-taints fails after the upgrade (and is skipped after the downgrade); else all pass.
    ``setup``: the seconds the releases took (``versions``) before the bring-up (a cold run
    fetches or builds them for many minutes)."""
    suite = directory / "upgrade-downgrade"
    (suite / "dumps").mkdir(parents=True)
    (suite / "drivers").mkdir()
    dump = suite / "dumps" / "dump-device-taints_after-cluster-upgrade.json"
    dump.write_text("{}\n")
    (suite / "dumps" / "dump-final.json").write_text("{}\n")
    calls = suite / "drivers" / "grpc-calls-defaultdevice-taints.k8s.io.json"
    calls.write_text("[]\n")
    named = states(previous, current)
    for state in named:
        for component in COMPONENTS:
            (suite / f"{component}-{state}.log").write_text("log\n")
        (suite / f"containerd-{state}.log").write_text("containerd\n")
        pod_log = suite / f"pods-{state}" / POD_LOG
        pod_log.parent.mkdir(parents=True)
        pod_log.write_text("tester\n")
    results = [
        _result("versions", "passed", 0.0, setup),
        *_upgrade_results(setup, named, dump.name, calls.name, failing),
    ]
    summary = {
        "schema_version": 1,
        "suite": "upgrade-downgrade",
        "seed": 7 if failing else 8,
        "started": "2026-12-01T18:10:12+0000" if failing else "2026-12-01T19:00:00+0000",
        "wall_seconds": setup + 98.0,
        "finished": True,
        "plan": [r["id"] for r in results],
        "current": {
            "version": current,
            "origin": "download",
            "chosen": "latest" if failing else "stable",
            "deviations": ["sigs.k8s.io/structured-merge-diff/v7 v7.0.1 (not served) => v7.0.0"],
            "go": "go1.27.3",
        },
        "previous": {"version": previous, "origin": "download", "deviations": [], "go": "go1.26.8"},
        "release_source": "download",
        "environment": {
            "machine": f"x86_64, {2 if failing else 8} CPUs, 24 GiB, Linux 6.1.0, cgroup v1",
            "python": "3.11.7",
            "e2e_dra": "0.1.0 (git 7405df1a2b3c)",
        },
        "feature_gates_dropped": {"DRAFancyGate": f"unknown to {previous}"},
        "runtime_config_dropped": {},
        "binaries": {
            state: {c: current if state == named[1] else previous for c in COMPONENTS}
            for state in named
        },
        "components_ready": [
            {
                "state": state,
                "component": c,
                "seconds": 3.0,
                "attempts": 3 if (c, n) == ("kubelet", 1) else 1,
                "started": setup - 1.0 + start + 4 * i,
                "ready": setup - 1.0 + start + 3 + 4 * i,
            }
            for n, (state, start) in enumerate(zip(named, (2.0, 30.0, 68.5), strict=True))
            for i, c in enumerate(COMPONENTS)
        ],
        "results": results,
    }
    (suite / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _upgrade_results(
    setup: float, named: tuple[str, ...], dump: str, calls: str, failing: bool
) -> list[dict]:
    """The results from the bring-up on, ``setup`` seconds after the suite started."""
    failed: dict[str, Any] = {"outcome": "passed"}
    skipped: dict[str, Any] = {"outcome": "passed"}
    if failing:
        failed = {
            "outcome": "failed",
            "message": "AssertionError: the taint went away",
            "failed_step": "the pod keeps running",
            "logs": [
                {"label": "DRA objects, pods and events", "path": f"dumps/{dump}"},
                {
                    "label": "driver defaultdevice-taints.k8s.io gRPC calls",
                    "path": f"drivers/{calls}",
                },
                {"label": "driver log", "path": "drivers/driver-gone.log"},  # never written
                *({"label": f"{c} log", "path": f"{c}-{named[1]}.log"} for c in COMPONENTS),
            ],
        }
        skipped = {
            "outcome": "skipped",
            "message": "device-taints: phase 'after-cluster-upgrade' failed",
        }
    shift = setup - 1.0  # the starts below are those of a run whose versions took 1 s
    results = [
        _result("bring-up", "passed", 1.0, 20.0),
        _result("core-dra/after-cluster-creation", "passed", 21.0, 3.0),
        _result("device-taints/after-cluster-creation", "passed", 24.0, 4.0),
        _result("upgrade", "passed", 28.0, 30.0),
        _result("core-dra/after-cluster-upgrade", "passed", 58.0, 2.5),
        _result(FAILED_ID, failed.pop("outcome"), 60.5, 6.0, **failed),
        _result("downgrade", "passed", 66.5, 25.0),
        _result("core-dra/after-cluster-downgrade", "passed", 91.5, 2.0),
        _result(
            "device-taints/after-cluster-downgrade", skipped.pop("outcome"), 93.5, 0.0, **skipped
        ),
        _result("cleanup", "passed", 93.5, 5.0),
    ]
    return [r | {"start": r["start"] + shift} for r in results]


def gate_cycle(directory: Path) -> dict:
    suite = directory / "gate-cycle"
    suite.mkdir(parents=True)
    results = [
        _result("versions", "passed", 0.0, 1.0),
        _result("one/bring-up", "passed", 1.0, 15.0, step=True),
        _result("one/gates-on", "passed", 16.0, 2.0),
        _result("one/gates-off", "passed", 18.0, 2.0),
        _result("two/gates-on", "skipped", 20.0, 0.0, message="two: needs example.com/v1"),
        _result("cleanup", "passed", 20.0, 1.0),
    ]
    summary = {
        "schema_version": 1,
        "suite": "gate-cycle",
        "seed": 7,
        "started": "2026-12-01T18:12:00+0000",
        "wall_seconds": 21.5,
        "finished": True,
        "current": {"version": "v1.38.0-beta.0", "deviations": []},
        "results": results,
    }
    (suite / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def synthetic_run(directory: Path) -> Path:
    """``directory`` as the ARTIFACTS of a run of two suites; returns it."""
    upgrade_downgrade(directory)
    gate_cycle(directory)
    return directory
