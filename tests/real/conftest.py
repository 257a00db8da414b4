"""What every real-lane test needs before it touches real Kubernetes, in one place.

Each missing part (root, a release, the node runtime) goes through :func:`missing`: in CI it fails
the test with the command that installs the part, elsewhere it skips with that same message. The
release and node-runtime look-ups are session fixtures, so a run asks for them once.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from e2e_dra._console import in_ci
from e2e_dra._suite._upgrade import FEATURE_GATES, RUNTIME_CONFIG
from e2e_dra.errors import E2EDRAError
from e2e_dra.kube import Kube
from e2e_dra.releases import Release, VersionsUnderTest
from e2e_dra.settings import settings

if TYPE_CHECKING:
    from e2e_dra.localupcluster import Cluster

HOW_TO_INSTALL = "run `./run.sh e2e-dra provision` as root (see README: Requirements)"
DRA_RUNTIME_CONFIG = ",".join(RUNTIME_CONFIG)
DRA_FEATURE_GATES = ",".join(f"{gate}=true" for gate in FEATURE_GATES)
"""Upstream's base settings for a DRA cluster, as hack/local-up-cluster.sh takes them."""


def missing(reason: str, how: str = HOW_TO_INSTALL) -> NoReturn:
    """In CI a missing real part fails the run; elsewhere the test is skipped. Both say ``how``."""
    message = f"{reason}: {how}"
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def as_root() -> None:
    if os.geteuid() != 0:
        missing("the kubelet and the node runtime need root")


@pytest.fixture(scope="session")
def release() -> Release:
    """The release under test, with the source tree hack/local-up-cluster.sh comes from."""
    from e2e_dra.releases import current_release

    try:
        found = current_release()
    except E2EDRAError as exc:
        missing(f"no Kubernetes release to run ({exc})")
    if found.source_dir is None:
        missing(f"no Kubernetes source tree for {found.version}")
    return found


@pytest.fixture(scope="session")
def versions() -> VersionsUnderTest:
    """Current and previous release (both cached after the first run)."""
    from e2e_dra.releases import versions_under_test

    try:
        return versions_under_test()
    except E2EDRAError as exc:
        missing(f"no Kubernetes releases to run ({exc})")


@pytest.fixture(scope="session")
def node_env(as_root: None, release: Release) -> dict[str, str]:
    """What hack/local-up-cluster.sh needs to use the provisioned node runtime (checked only)."""
    from e2e_dra.provision import ensure_node_runtime

    try:
        return ensure_node_runtime(release.source_dir, check_only=True).env()
    except E2EDRAError as exc:
        missing(f"the node runtime is not ready ({exc})")


@dataclass
class LiveCluster:
    cluster: Cluster
    kube: Kube  # admin
    release: Release


def restart_component(live: LiveCluster, component: str, state: str) -> None:
    """Stop ``component`` and start it again (the same binary, state ``state``), as an upgrade
    would: its pid must change."""
    from e2e_dra.localupcluster import ModifyOptions

    before = live.cluster.running[component].pid
    binary = live.release.bin_dir / component
    live.cluster.modify(state, ModifyOptions(file_by_component={component: binary}))
    assert live.cluster.running[component].pid != before


@contextlib.contextmanager
def running_cluster(
    release: Release,
    node_env: Mapping[str, str],
    log_dir: Path,
    *,
    state: str = "0-start",
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[LiveCluster]:
    """A cluster of ``release`` (``extra_env``: RUNTIME_CONFIG, FEATURE_GATES, ...), always
    stopped on the way out; it holds the host lock while it runs."""
    from e2e_dra.localupcluster import Cluster

    assert release.source_dir is not None
    cluster = Cluster(release.source_dir, log_dir, host_lock=settings().host_lock)
    try:
        cluster.start(state, release.bin_dir, {**node_env, **(extra_env or {})})
        kube = Kube.from_kubeconfig(cluster.kubeconfig)
        try:
            yield LiveCluster(cluster, kube, release)
        finally:
            kube.close()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def start_cluster(
    release: Release, node_env: dict[str, str]
) -> Callable[..., contextlib.AbstractContextManager[LiveCluster]]:
    """``with start_cluster(log_dir, state=..., extra_env=...) as live:`` on the current release."""
    return functools.partial(running_cluster, release, node_env)
