"""The two Kubernetes releases the suite runs, built from the Go module proxy (or found cached).

A cold build takes minutes per version on two cores; a warm cache makes this test take seconds.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import missing

from e2e_dra.errors import E2EDRAError
from e2e_dra.releases import GoBuildSource, Release, VersionsUnderTest, versions_under_test
from e2e_dra.releases._gobuild import BUILT_COMMANDS
from e2e_dra.releases._gomodule import parse_requires
from e2e_dra.releases._goproxy import ModuleProxy
from e2e_dra.settings import settings, use

pytestmark = pytest.mark.real

HOW_TO_BUILD = (
    "building Kubernetes needs Go >= 1.25 on PATH and a reachable Go module proxy (GOPROXY); "
    "run `./run.sh e2e-dra build 1.37` to see what is missing"
)


@pytest.fixture(scope="module")
def versions() -> Iterator[VersionsUnderTest]:
    """Both releases from the build source (overrides the session fixture of any source)."""
    if not (shutil.which("go") or Path("/usr/local/go/bin/go").exists()):
        missing("no Go toolchain", HOW_TO_BUILD)
    try:
        GoBuildSource().proxy.listed  # noqa: B018 -- is the proxy there at all?
    except E2EDRAError as exc:
        missing(f"the Go module proxy does not answer ({exc})", HOW_TO_BUILD)
    before = use(dataclasses.replace(settings(), release_source="build"))
    try:
        yield versions_under_test()  # a failing build fails the test: that is a bug of ours
    finally:
        use(before)


def _releases(versions: VersionsUnderTest) -> list[Release]:
    return [versions.current, versions.previous]


def _output(*cmd: str | Path) -> str:
    return subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def test_binaries_report_exactly_their_release(versions: VersionsUnderTest):
    for release in _releases(versions):
        for component in ("kube-apiserver", "kubelet", "kube-scheduler"):
            assert _output(release.bin_dir / component, "--version") == (
                f"Kubernetes {release.version}"
            )
        if release.origin == "build":
            present = sorted(p.name for p in release.bin_dir.iterdir())
            assert present == sorted(BUILT_COMMANDS)
            client = _output(release.bin_dir / "kubectl", "version", "--client")
            assert f"Client Version: {release.version}" in client


def test_previous_is_the_newest_release_of_the_previous_minor(versions: VersionsUnderTest):
    assert versions.previous.version.startswith(f"v{versions.previous_minor}.")
    assert versions.source == "build"
    if versions.current.origin == "build":
        current_minor = versions.current.version.split(".")[1]
        assert int(versions.previous_minor.split(".")[1]) == int(current_minor) - 1


def test_source_trees_run_local_up_cluster_with_their_own_kubectl(versions: VersionsUnderTest):
    for release in _releases(versions):
        assert release.source_dir is not None
        assert (release.source_dir / "hack" / "local-up-cluster.sh").is_file()
        assert (release.source_dir / "hack" / "lib" / "init.sh").is_file()
        if release.origin == "build":
            kubectl = next((release.source_dir / "_output" / "local" / "bin").glob("*/*/kubectl"))
            assert kubectl.resolve() == (release.bin_dir / "kubectl").resolve()


def test_a_second_fetch_builds_nothing_and_asks_nobody(versions: VersionsUnderTest):
    # a proxy nobody listens on: any request or build would fail
    offline = GoBuildSource(proxy_url="http://127.0.0.1:9")
    for release in _releases(versions):
        if release.origin == "build":
            assert offline.fetch(release.version) == release


def test_a_module_the_proxy_refuses_is_a_stand_in_named_in_the_deviations(
    versions: VersionsUnderTest,
):
    """1.38's kubelet and kube-proxy import sigs.k8s.io/iptables-wrappers; where the proxy
    serves it the published module is built, where it refuses it the stand-in is, and says so."""
    for release in _releases(versions):
        if release.origin != "build":
            continue
        source = GoBuildSource()
        pinned = dict(parse_requires(source.proxy.go_mod(release.version)))
        module = "sigs.k8s.io/iptables-wrappers"
        named = [d for d in release.deviations if d.startswith(f"{module} ")]
        if module not in pinned:
            assert named == []
            continue
        served = ModuleProxy(module, source.proxy.base_url).serves(pinned[module])
        assert bool(named) != served, (release.version, release.deviations)
        kubelet = _output(release.bin_dir / "kubelet", "--version")
        assert kubelet == f"Kubernetes {release.version}"
