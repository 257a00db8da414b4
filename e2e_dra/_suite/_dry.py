"""The dry seam: the suite's machinery without a cluster, for testing the machinery itself.

With ``E2E_DRA_SUITE_DRY=1`` every cluster step is a no-op that is only recorded (in the summary,
like every entry, and in ``dry-steps.log``), and phases get a context without a cluster, driver
or builder. It exists so the ordering, skipping, selection and reporting rules can be tested in
seconds; the real suite never takes this path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2e_dra._suite._plan import Entry
from e2e_dra.subtest import Context

logger = logging.getLogger(__name__)

DRY_ENV = "E2E_DRA_SUITE_DRY"
SERVED_ENV = "E2E_DRA_SUITE_DRY_SERVED"
"""Comma-separated group/versions the pretend cluster serves (unset: it serves everything)."""
FAIL_STEP_ENV = "E2E_DRA_SUITE_DRY_FAIL_STEP"
"""A cluster step id that fails, to see what a broken cluster does to the rest of the run."""
FINDINGS_ENV = "E2E_DRA_SUITE_DRY_FINDINGS"
"""``<entry id>=<text>;...``: what the pretend safety nets find when that entry ends."""


def dry_run() -> bool:
    return os.environ.get(DRY_ENV, "").lower() in {"1", "true", "yes"}


class DryBackend:
    def __init__(
        self,
        suite: str,
        subtests: Mapping[str, Any],
        artifacts: Path,
    ) -> None:
        self.suite = suite
        self.subtests = dict(subtests)
        self.artifacts = artifacts
        self.steps: list[str] = []
        served = os.environ.get(SERVED_ENV)
        self._served = None if served is None else {s.strip() for s in served.split(",")}

    def run_step(self, entry: Entry) -> None:
        self.steps.append(entry.id)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        with (self.artifacts / "dry-steps.log").open("a") as log:
            log.write(entry.id + "\n")
        if entry.id == os.environ.get(FAIL_STEP_ENV):
            raise AssertionError(f"dry run: cluster step {entry.id} fails as asked")
        logger.info(f"dry run: cluster step {entry.id} does nothing")

    def unmet(self, subtest: str) -> str | None:
        if self._served is None:
            return None
        missing = [gv for gv in self.subtests[subtest].requires if gv not in self._served]
        return f"needs {', '.join(missing)}, which the cluster does not serve" if missing else None

    def drop(self, subtest: str) -> None:
        pass

    def context(self, entry: Entry) -> Context:
        return Context(
            kube=None,  # type: ignore[arg-type]
            driver=None,  # type: ignore[arg-type]
            builder=None,  # type: ignore[arg-type]
            nodes=["127.0.0.1"],
            phase=str(entry.phase),
            artifacts=self.artifacts / "subtests" / str(entry.subtest),
            log=logger.info,
        )

    def checks(self, entry: Entry) -> list[str]:
        found = []
        for item in os.environ.get(FINDINGS_ENV, "").split(";"):
            entry_id, _, text = item.partition("=")
            if entry_id == entry.id:
                found.append(text)
        return found

    def on_failure(self, entry: Entry, exc: BaseException) -> list[str]:
        return [f"e2e-dra: artifacts: {self.artifacts}"]

    def close(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"dry_run": True, "cluster_steps_run": list(self.steps)}
