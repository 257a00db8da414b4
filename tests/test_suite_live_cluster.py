"""A brought-up cluster is one LiveCluster, and a cleanup is an ordered list of named attempts.

No cluster runs here: the engine's cluster is one that was never started, and the client points
at a port nobody listens on. That is all the cleanup of a cluster an interrupt already stopped
touches (the nets do not look at a cluster that does not answer), so its order, and how a
failing attempt is named while the rest still run, are seen as the real cleanup has them.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from unreachable import unreachable_kube

from e2e_dra._suite import SUITES, UPGRADE_DOWNGRADE, ClusterStep, SubtestPhase
from e2e_dra._suite._cluster_steps import ClusterSteps
from e2e_dra._suite._findings import Findings
from e2e_dra._suite._live_cluster import LiveCluster
from e2e_dra._suite._nets import Finding
from e2e_dra._suite._nodelogs import StateLogs
from e2e_dra.hostkit import Attempt, Teardown
from e2e_dra.kube import Kube
from e2e_dra.localupcluster import Cluster
from e2e_dra.waits import check_abort


def _nowhere(tmp_path: Path) -> Kube:
    """A client of an API server at a local port that nobody listens on."""
    return unreachable_kube(tmp_path)


def _live(tmp_path: Path, findings: Findings) -> LiveCluster:
    cluster = Cluster(tmp_path / "src", tmp_path / "logs", host_lock=tmp_path / "host.lock")
    logs = StateLogs(tmp_path / "containerd.log", pod_logs=tmp_path / "pods")
    return LiveCluster(cluster, _nowhere(tmp_path), logs, findings)


def _annotations_with_none(cls: type) -> list[str]:
    """Every parameter of ``cls.__init__`` and every ``self.x: T`` it sets whose type admits
    None, and every attribute it sets to None."""
    tree = ast.parse(inspect.getsource(cls))
    init = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "__init__"
    )
    found = [
        arg.arg
        for arg in init.args.args + init.args.kwonlyargs
        if arg.annotation is not None and "None" in ast.unparse(arg.annotation)
    ]
    for node in ast.walk(init):
        if isinstance(node, ast.AnnAssign) and "None" in ast.unparse(node.annotation):
            found.append(ast.unparse(node.target))
        elif isinstance(node, ast.Assign) and ast.unparse(node.value) == "None":
            found += [ast.unparse(target) for target in node.targets]
    return found


class _Slot:
    def __init__(self, api: Kube | None) -> None:
        self.api = api
        self.cluster: Cluster | None = None
        self.nodes = None


def test_a_live_cluster_has_no_optional_members(tmp_path: Path) -> None:
    """Everything in it exists as long as the cluster is up: nothing means "not up yet"."""
    assert _annotations_with_none(_Slot) == ["api", "self.cluster", "self.nodes"]  # it can fail
    assert _annotations_with_none(LiveCluster) == []
    live = _live(tmp_path, Findings(list))
    try:
        assert {name for name, value in vars(live).items() if value is None} == set()
        assert live.nodes == [] and live.kubelet_down == []
        assert not live.reachable()  # never started: the cleanup looks at nothing
    finally:
        Teardown("test", print, timeout=60.0).run(live.stop())
    check_abort()  # its crash watch ended with it


def test_a_live_cluster_ends_with_its_claim_watch_crash_watch_cluster_and_client(
    tmp_path: Path,
) -> None:
    live = _live(tmp_path, Findings(list))
    assert [attempt.name for attempt in live.stop()] == [
        "stop the claim watch",
        "end the crash watch",
        "stop the cluster",
        "close the cluster's client",
    ]
    assert all(not attempt.look for attempt in live.stop())  # each runs whatever the time
    teardown = Teardown("test", print, timeout=60.0)
    teardown.run(live.stop())
    teardown.raise_first()


@dataclass(frozen=True)
class NextBringUp(ClusterStep[Any]):
    """A bring-up that records its early start."""

    name: ClassVar[str] = "bring-up"
    started: list[str] = field(default_factory=list, compare=False)

    def run(self, cluster: Any) -> None:
        raise AssertionError("not run here")

    def start_early(self, cluster: Any) -> None:
        self.started.append(self.id)


def _phase(subtest: str) -> SubtestPhase:
    return SubtestPhase(UPGRADE_DOWNGRADE, subtest, 0, "after-cluster-creation")


def _recorded(attempts: Iterator[Attempt], names: list[str]) -> Iterator[Attempt]:
    for attempt in attempts:
        names.append(attempt.name)
        yield attempt


@pytest.fixture
def steps(tmp_path: Path) -> Iterator[ClusterSteps[Any]]:
    """A suite's step side with a live cluster that an interrupt already stopped, whose node
    logs cannot be copied, and a finding that waits for a subtest that never ran again."""
    steps: ClusterSteps[Any] = ClusterSteps(SUITES[UPGRADE_DOWNGRADE], {}, tmp_path / "artifacts")
    steps.live = _live(tmp_path, steps.nets.findings)
    (tmp_path / "not-a-directory").write_text("in the way")
    steps.live.node_logs.begin("0-initial", tmp_path / "not-a-directory")
    steps.nets.findings.route(_phase("a"), [Finding("b", "claim x allocated")])
    yield steps
    if steps.live is not None:  # a test that failed before the cleanup: end it anyway
        Teardown("test", print, timeout=60.0).run(steps.live.stop())


def test_a_cleanup_runs_its_attempts_in_order_and_a_failure_stops_none_of_the_rest(
    steps: ClusterSteps[Any],
) -> None:
    live = steps.live
    scratch = steps.scratch
    names: list[str] = []
    teardown = Teardown("cleanup", print, timeout=60.0, note="e2e-dra: cleanup also failed")

    teardown.run(_recorded(steps.cleanup_attempts(teardown, slice_removal=True, early=None), names))

    assert names == [
        "copy the node's logs",
        "close the subtests' harnesses",
        "stop what started early",
        "what the safety nets still hold",
        "stop the claim watch",
        "end the crash watch",
        "stop the cluster",
        "close the cluster's client",
        "remove the scratch directory",
        "forget the cluster's harnesses",
    ]
    assert [(name, type(exc).__name__) for name, exc in teardown.failed] == [
        ("copy the node's logs", "FileExistsError"),
        ("what the safety nets still hold", "AssertionError"),
    ]
    assert steps.live is None and live is not None and not scratch.exists()
    check_abort()  # the crash watch ended
    with pytest.raises(FileExistsError) as raised:
        teardown.raise_first()
    assert raised.value.__notes__ == [
        "e2e-dra: cleanup also failed: AssertionError: safety net:\n"
        "claim x allocated [subtest 'b'; seen during phase 'after-cluster-creation']"
    ]


def test_the_next_cluster_starts_once_the_drivers_stopped_and_its_scratch_is_kept(
    steps: ClusterSteps[Any],
) -> None:
    started: list[str] = []
    early = NextBringUp("next", started=started)
    scratch = steps.scratch
    names: list[str] = []
    teardown = Teardown("cleanup", print, timeout=60.0)

    teardown.run(
        _recorded(steps.cleanup_attempts(teardown, slice_removal=True, early=early), names)
    )

    at = names.index("start next/bring-up early")
    assert names[at - 1] == "close the subtests' harnesses"  # the kubelet wipes the slices now
    assert names[at + 1] == "what the safety nets still hold"
    assert "stop what started early" not in names and "remove the scratch directory" not in names
    assert started == ["next/bring-up"] and scratch.is_dir()


def test_a_cleanup_through_close_raises_its_first_failure_and_ends_the_cluster(
    steps: ClusterSteps[Any],
) -> None:
    with pytest.raises(FileExistsError) as raised:
        steps.close()
    assert "cleanup also failed: AssertionError: safety net:" in raised.value.__notes__[0]
    assert steps.live is None
    steps.close()  # nothing left: a second cleanup passes
