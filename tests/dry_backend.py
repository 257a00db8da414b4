"""The suite's machinery without a cluster: a backend whose cluster steps are recorded no-ops.

The suite plugin asks the hook ``pytest_e2e_dra_backend`` for its backend; a :class:`DryCluster`
passed to an inner pytest run (pytester's ``plugins=``) answers it first, so the ordering,
skipping, selection and reporting rules are tested in seconds with the code the real job runs,
and the production package holds no switch to a pretend cluster. What the pretend cluster does
(what it serves, which step breaks, what its safety nets find) is said by arguments.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e_dra._suite import ClusterStep, Entry, SubtestPhase, Suite
from e2e_dra.subtest import Context
from e2e_dra.waits import abort_when

logger = logging.getLogger("e2e_dra.dry")

STEPS_LOG = "dry-steps.log"
"""Under the suite's artifacts: the cluster steps that ran, one id a line."""
EARLY_LOG = "dry-early.log"
"""Under the suite's artifacts: per cluster step that ran, its id and the id of the entry the run
said it starts early ("-": none)."""


class DryBackend:
    """Every cluster step only recorded (in the summary, like every entry, and in ``STEPS_LOG``);
    phases get a context without a cluster, driver or builder."""

    def __init__(
        self,
        suite: Suite[Any],
        subtests: Mapping[str, Any],
        artifacts: Path,
        *,
        served: Collection[str] | None = None,
        fail_step: str | None = None,
        findings: Mapping[str, Sequence[str]] | None = None,
        releases: Mapping[str, str] | None = None,
        upgraded: Mapping[str, str] | None = None,
        crash_in: str | None = None,
        versions: tuple[str, str] | None = None,
    ) -> None:
        self.suite = suite
        self.subtests = dict(subtests)
        self.artifacts = artifacts
        self.steps: list[str] = []
        self._served = None if served is None else set(served)
        self._fail_step = fail_step
        self._findings = dict(findings or {})
        self._releases = dict(releases or {})
        self._before_upgrade = self._releases
        self._upgraded = dict(upgraded or self._releases)
        self._crash_in = crash_in
        self._versions = versions
        self._crashed = False
        self._watch: contextlib.AbstractContextManager[None] | None = None

    def run_step(self, entry: ClusterStep[Any], early: Entry | None = None) -> None:
        self.steps.append(entry.id)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        with (self.artifacts / STEPS_LOG).open("a") as log:
            log.write(entry.id + "\n")
        with (self.artifacts / EARLY_LOG).open("a") as log:
            log.write(f"{entry.id} {early.id if early else '-'}\n")
        if entry.id == self._fail_step:
            raise AssertionError(f"dry run: cluster step {entry.id} fails as asked")
        if entry.name in ("upgrade", "downgrade", "re-upgrade"):  # an upgrade: the newer releases
            upgrade = entry.name != "downgrade"
            self._releases = self._upgraded if upgrade else self._before_upgrade
        if entry.name == "bring-up" and self._watch is None:  # as the real cluster's crash watch
            self._watch = abort_when(self._crash_reason)
            self._watch.__enter__()
        logger.info(f"dry run: cluster step {entry.id} does nothing")

    def unmet(self, subtest: str) -> str | None:
        if self._served is None:
            return None
        missing = [gv for gv in self.subtests[subtest].requires if gv not in self._served]
        return f"needs {', '.join(missing)}, which the cluster does not serve" if missing else None

    def drop(self, subtest: str) -> None:
        pass

    def _crash_reason(self) -> str | None:
        return "component crashed: kube-scheduler (pid 1) ended (exit 2)" if self._crashed else None

    @contextlib.contextmanager
    def context(self, phase: SubtestPhase) -> Iterator[Context]:
        if phase.id == self._crash_in:  # a component ends in this phase, and no wait sees it
            self._crashed = True
        yield Context(
            kube=None,  # type: ignore[arg-type]
            plugin=None,
            builder=None,  # type: ignore[arg-type]
            nodes=["127.0.0.1"],
            phase=phase.name,
            artifacts=self.artifacts / "subtests" / phase.subtest,
            log=logger.info,
        )

    def contain(self, subtest: str) -> str:
        restarted, self._crashed = self._crashed, False
        return f"the objects of {subtest} removed" + ("; kube-scheduler started again" * restarted)

    def releases_now(self) -> dict[str, str]:
        return dict(self._releases)

    def checks(self, entry: Entry) -> list[str]:
        return list(self._findings.get(entry.id, ()))

    def on_failure(self, entry: Entry, exc: BaseException) -> list[str]:
        return [f"e2e-dra: artifacts: {self.artifacts}"]

    def close(self) -> None:
        if self._watch is not None:
            self._watch.__exit__(None, None, None)
            self._watch = None

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"dry_run": True, "cluster_steps_run": list(self.steps)}
        if self._versions is not None and self.steps:  # known once the first step ran
            previous, current = self._versions
            described.update(previous={"version": previous}, current={"version": current})
        kubelet = getattr(getattr(self.suite, "variant", None), "kubelet", None)
        if kubelet is not None and self.steps:  # the release a kubelet-last suite starts it on
            described["kubelet"] = {"version": kubelet}
        return described


@dataclass(frozen=True, eq=False)
class DryCluster:
    """A pytest plugin: answers the suite plugin's backend hook with a :class:`DryBackend`.

    ``served``: the group/versions the pretend cluster serves (None: everything); ``fail_step``:
    the id of a cluster step that fails; ``findings``: what the safety nets find when the entry
    of that id ends; ``releases``: the release each pretend component runs (for known bugs),
    ``upgraded``: what it runs between the upgrade and the downgrade, and after the re-upgrade
    (default: the same);
    ``crash_in``: the id of a phase during which a pretend component ends; ``versions``: the
    (previous, current) releases its description names once its first step ran.
    """

    served: Collection[str] | None = None
    fail_step: str | None = None
    findings: Mapping[str, Sequence[str]] = field(default_factory=dict)
    releases: Mapping[str, str] = field(default_factory=dict)
    upgraded: Mapping[str, str] | None = None
    crash_in: str | None = None
    versions: tuple[str, str] | None = None

    def pytest_e2e_dra_backend(
        self, suite: Suite[Any], subtests: Mapping[str, Any], artifacts: Path
    ) -> DryBackend:
        return DryBackend(
            suite,
            subtests,
            artifacts,
            served=self.served,
            fail_step=self.fail_step,
            findings=self.findings,
            releases=self.releases,
            upgraded=self.upgraded,
            crash_in=self.crash_in,
            versions=self.versions,
        )
