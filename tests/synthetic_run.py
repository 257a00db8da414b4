"""A small run's artifacts, written as the suites write them: two suites, a failure with its
dump, gRPC calls and component logs, a skip, component ready times. For the report's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

UPGRADE_PHASES = ("after-cluster-creation", "after-cluster-upgrade", "after-cluster-downgrade")
FAILED_ID = "device-taints/after-cluster-upgrade"
STATES = ("0-initial-1.37", "1-v1.38.0-beta.0", "2-restored-1.37")
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")


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


def upgrade_downgrade(directory: Path) -> dict:
    suite = directory / "upgrade-downgrade"
    (suite / "dumps").mkdir(parents=True)
    (suite / "drivers").mkdir()
    dump = suite / "dumps" / "dump-device-taints_after-cluster-upgrade.json"
    dump.write_text("{}\n")
    calls = suite / "drivers" / "grpc-calls-defaultdevice-taints.k8s.io.json"
    calls.write_text("[]\n")
    for state in STATES:
        for component in COMPONENTS:
            (suite / f"{component}-{state}.log").write_text("log\n")
    results = [
        _result("versions", "passed", 0.0, 1.0),
        _result("bring-up", "passed", 1.0, 20.0),
        _result("core-dra/after-cluster-creation", "passed", 21.0, 3.0),
        _result("device-taints/after-cluster-creation", "passed", 24.0, 4.0),
        _result("upgrade", "passed", 28.0, 30.0),
        _result("core-dra/after-cluster-upgrade", "passed", 58.0, 2.5),
        _result(
            FAILED_ID,
            "failed",
            60.5,
            6.0,
            message="AssertionError: the taint went away",
            logs=[
                {"label": "DRA objects, pods and events", "path": f"dumps/{dump.name}"},
                {
                    "label": "driver defaultdevice-taints.k8s.io gRPC calls",
                    "path": "drivers/" + calls.name,
                },
                {"label": "driver log", "path": "drivers/driver-gone.log"},  # never written
                *({"label": f"{c} log", "path": f"{c}-{STATES[1]}.log"} for c in COMPONENTS),
            ],
        ),
        _result("downgrade", "passed", 66.5, 25.0),
        _result("core-dra/after-cluster-downgrade", "passed", 91.5, 2.0),
        _result(
            "device-taints/after-cluster-downgrade",
            "skipped",
            93.5,
            0.0,
            message="device-taints: phase 'after-cluster-upgrade' failed",
        ),
        _result("cleanup", "passed", 93.5, 5.0),
    ]
    summary = {
        "schema_version": 1,
        "suite": "upgrade-downgrade",
        "seed": 7,
        "started": "2026-12-01T18:10:12+0000",
        "wall_seconds": 99.0,
        "finished": True,
        "plan": [r["id"] for r in results],
        "current": {
            "version": "v1.38.0-beta.0",
            "deviations": ["sigs.k8s.io/structured-merge-diff/v7 v7.0.1 (not served) => v7.0.0"],
        },
        "previous": {"version": "v1.37.2", "deviations": []},
        "feature_gates_dropped": {"DRAFancyGate": "unknown to v1.37.2"},
        "runtime_config_dropped": {},
        "binaries": {
            state: {c: "v1.38.0-beta.0" if state == STATES[1] else "v1.37.2" for c in COMPONENTS}
            for state in STATES
        },
        "components_ready": [
            {
                "state": STATES[0],
                "component": c,
                "seconds": 3.0,
                "attempts": 1,
                "started": 2 + 4 * i,
                "ready": 5 + 4 * i,
            }
            for i, c in enumerate(COMPONENTS)
        ],
        "results": results,
    }
    (suite / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


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
