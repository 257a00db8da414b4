"""The real cluster behind one suite, as the suite run asks for it.

The steps (``_upgrade``, ``_gate_cycle``, ``_steps``) say what happens, over the narrow
:class:`~e2e_dra._suite._steps.ClusterOps`, which :class:`~e2e_dra._suite._cluster_steps.
ClusterSteps` implements: versions, the node, bring-ups, restarts, the cleanup. A cluster that is
up is a :class:`~e2e_dra._suite._live_cluster.LiveCluster`. :class:`RealCluster` is the run's
:class:`~e2e_dra._suite._run.Backend`: it hands the run's cluster steps to its ``ClusterSteps``
and answers what the run asks between them: whether a subtest can run, each phase's context
(``_contexts``), containing a known bug, the safety nets' findings, what a failure's notes name
(``_report``) and the summary's description.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Generic

from e2e_dra._suite._cluster_steps import ClusterSteps
from e2e_dra._suite._contexts import phase_context
from e2e_dra._suite._findings import Findings
from e2e_dra._suite._harnesses import DriverHost
from e2e_dra._suite._live_cluster import processes
from e2e_dra._suite._report import failure_report
from e2e_dra._suite._steps import ClusterStep, Entry, S, SubtestPhase, Suite
from e2e_dra._suite._suite_nets import NAMESPACE
from e2e_dra.kube import retrying
from e2e_dra.subtest import Context, Subtest


class RealCluster(Generic[S]):
    """The real cluster behind one suite: runs its steps, gives its phases their context."""

    def __init__(self, suite: Suite[S], subtests: Mapping[str, Subtest], artifacts: Path) -> None:
        self.suite = suite
        self.steps: ClusterSteps[S] = ClusterSteps(suite, subtests, artifacts)

    @property
    def subtests(self) -> dict[str, Subtest]:
        return self.steps.subtests

    @property
    def state(self) -> S:
        return self.steps.state

    @property
    def findings(self) -> Findings:
        return self.steps.nets.findings

    def run_step(self, step: ClusterStep[S], early: Entry | None = None) -> None:
        self.steps.run_step(step, early)

    def close(self) -> None:
        self.steps.close()

    def unmet(self, subtest: str) -> str | None:
        """Why ``subtest`` cannot run in this suite on these releases, or None."""
        return self.suite.unmet(self, self.subtests[subtest])

    def unserved(self, subtest: Subtest) -> str | None:
        """The first API version ``subtest`` requires that the server does not serve, said."""
        if self.steps.live is None:
            return None
        api = self.steps.live.api
        version = retrying(api.server_version)()
        for group_version in subtest.requires:
            if not retrying(api.served)(group_version):
                return f"needs {group_version}, which {version} does not serve"
        return None

    def drop(self, subtest: str) -> None:
        self.steps.harnesses.drop(subtest)

    @contextlib.contextmanager
    def context(self, phase: SubtestPhase) -> Iterator[Context]:
        """``phase``'s context, with a client of its own (closed when the phase ends): the
        subtest's driver is set up before its first phase."""
        live = self.steps.up()
        releases = self.releases_now()
        host = DriverHost(live.cluster.kubeconfig, releases, live.cluster.note_process)
        harness = self.steps.harnesses.ready(phase.subtest, live.api, live.nodes, host)
        with phase_context(
            phase,
            live,
            harness,
            artifacts=self.steps.artifacts / "subtests" / phase.subtest,
            namespace=NAMESPACE,
            facts=self.state.facts.setdefault(phase.subtest, {}),
            releases=releases,
        ) as context:
            yield context
        live.kubelet_down += context.kubelet_down  # a phase that passed: its asks stand

    def contain(self, subtest: str) -> str:
        """After a known bug broke a phase of ``subtest``: its objects torn down (the crash
        watch set aside meanwhile: a crashed component must not end the tear-down's waits), the
        components that ended started again in a state of their own (``<state>-restarted``: the
        crash's log is kept), every driver's slices waited for; what was done, said."""
        live, harnesses = self.steps.up(), self.steps.harnesses
        done = []
        with live.crash_watch_paused():
            kube = live.api.fresh()
            try:
                try:
                    if harnesses.tear_down(subtest, kube):
                        done.append(f"the objects of {subtest} removed")
                except Exception as exc:  # what is left is the cleanup's; the restart still helps
                    done.append(f"removing the objects of {subtest} failed ({exc})")
                ended = live.ended()
                if ended:
                    last = list(self.state.binaries)[-1]
                    state = f"{last}-restarted"
                    live.restart_ended(state, self.state.log_dir)
                    self.steps.nets.components.restarted(live.processes())
                    self.state.binaries[state] = dict(self.state.binaries[last])
                    live.api.server_restarted()
                    harnesses.wait_for_slices(f"after restarting {', '.join(ended)}")
                    done.append(f"{', '.join(ended)} started again ({state})")
            finally:
                kube.close()
        return "; ".join(done) or "nothing to do"

    def releases_now(self) -> dict[str, str]:
        return self.state.releases_now()

    def checks(self, entry: Entry) -> list[str]:
        """The claim, slice and driver nets' findings, then the components' (a panic logged, a
        process replaced behind the suite's back)."""
        found = self.findings.checks(entry)
        engine = self.steps.engine
        if engine is not None:
            allowed = entry.restarts_allowed
            found += self.steps.nets.components.look(processes(engine), restarts_allowed=allowed)
        return found

    def on_failure(self, entry: Entry, exc: BaseException) -> list[str]:
        live = self.steps.live
        return failure_report(
            entry,
            kube=live.api if live is not None else None,
            harnesses=self.steps.harnesses,
            cluster=self.steps.engine,
            dumps=self.steps.artifacts / "dumps",
            namespace=NAMESPACE,
        )

    def describe(self) -> dict[str, Any]:
        """The state's view, and when each component was ready (``ready_at``: wall clock; the
        summary makes it relative to the suite's start)."""
        info = self.state.describe()
        ready = [
            {"state": t.state, "component": t.component, "seconds": round(t.seconds, 3)}
            | {"attempts": t.attempts, "ready_at": t.at}
            for cluster in self.steps.clusters
            for t in cluster.ready_times
        ]
        if ready:
            info["components_ready"] = ready
        return info
