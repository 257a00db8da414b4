"""Two runs of the main job as they were recorded, for the report's tests: one that failed and
one that passed, each an ``$ARTIFACTS`` folder with its summaries and the files those runs left.

The failing run is a real ``upgrade-downgrade`` of v1.37.2 -> v1.38.0-beta.0 (December 2026): a
real driver's phase failed after the re-upgrade (``driver-example-v0.4.0``'s new instance
crashed and its next pod stayed unschedulable) beside the two phases kubernetes#143376 broke as
declared; its summary is trimmed to four subtests (``tests/data/summaries/
upgrade-downgrade-failed.json``). The passing run is the four suites of
``tests/data/summaries`` (two known bugs seen, nothing failed). ``tests/data/runs/<name>.txt``
lists the files each real ``upgrade-downgrade`` folder held (component, node and driver logs,
dumps, narratives, pod logs) for those subtests: they are made here, empty, since the page links
them and never reads them, so that a link the page makes to a file the run did not leave shows.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
SUITES = ("upgrade-downgrade", "control-plane-first", "gate-cycle", "kubelet-last")
FAILED_ID = "driver-example-v0.4.0/after-cluster-re-upgrade"
FAILED_STEP = "the new instance crashes: a new pod starts on the one serving"
KNOWN_IDS = (
    "device-tolerations/after-cluster-creation",
    "device-tolerations/after-cluster-downgrade",
)
BUG = "kubernetes#143376"


def _suite(run: Path, suite: str, summary: str, files: str | None = None) -> None:
    folder = run / suite
    folder.mkdir(parents=True)
    doc = json.loads((DATA / "summaries" / f"{summary}.json").read_text())
    (folder / "summary.json").write_text(json.dumps(doc))
    if files is None:
        return
    for name in (DATA / "runs" / f"{files}.txt").read_text().split():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def failing_run(folder: Path) -> Path:
    """The failing run's ``$ARTIFACTS``: its ``upgrade-downgrade`` (a failure, two known bugs)."""
    _suite(folder, "upgrade-downgrade", "upgrade-downgrade-failed", "upgrade-downgrade-failed")
    return folder


def passing_run(folder: Path) -> Path:
    """The passing run's ``$ARTIFACTS``: four suites, two known bugs seen, nothing failed."""
    for suite in SUITES:
        _suite(folder, suite, suite, "upgrade-downgrade" if suite == "upgrade-downgrade" else None)
    return folder
