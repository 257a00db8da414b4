"""A contributor's own checkout under test, the way upstream's CI runs test/e2e_dra.

The checkout is a real git repository: the release's source with its tag and one commit on top,
so ``hack/print-workspace-status.sh`` (``git describe``) names a build between releases, such as
``v1.38.0-beta.0.1+0123456789abcd``; its binaries sit where ``make`` puts them. The version, the
previous minor and the release it resolves to must follow from that alone, and the main job must
run on it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_dra._platform import host_platform
from e2e_dra.releases import VersionsUnderTest
from e2e_dra.versions import parse_version, previous_minor

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
PYTEST = (sys.executable, "-m", "pytest")
# What hack/print-workspace-status.sh and hack/local-up-cluster.sh need of a tree; the Go sources
# are left out, as the binaries are given.
_LEFT_OUT = ("api", "cmd", "docs", "pkg", "plugin", "staging", "test", "vendor", "_output")


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "e2e-dra",
        "GIT_AUTHOR_EMAIL": "e2e-dra@example.invalid",
        "GIT_COMMITTER_NAME": "e2e-dra",
        "GIT_COMMITTER_EMAIL": "e2e-dra@example.invalid",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=300,
    ).stdout.strip()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory, versions: VersionsUnderTest) -> Path:
    release = versions.current
    assert release.source_dir is not None
    tag = parse_version(release.version).tag
    repo = tmp_path_factory.mktemp("checkout") / "kubernetes"
    shutil.copytree(
        release.source_dir, repo, symlinks=True, ignore=shutil.ignore_patterns(*_LEFT_OUT)
    )
    (repo / ".kube-version-defs").unlink(missing_ok=True)  # the version must come from git
    _git(repo, "init", "-q", "-b", "master")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"Kubernetes {tag}")
    _git(repo, "tag", "-a", tag, "-m", tag)
    with open(repo / "README.md", "a") as readme:
        readme.write("\nA contributor's change.\n")
    _git(repo, "commit", "-q", "-am", "A contributor's change")
    goos, goarch = host_platform()
    build = repo / "_output" / "local" / "bin" / goos / goarch
    build.parent.mkdir(parents=True)
    build.symlink_to(release.bin_dir)  # where `make` puts the binaries
    return repo


def test_the_checkout_names_the_version_and_the_release_to_upgrade_from(
    checkout: Path, versions: VersionsUnderTest
) -> None:
    tag = parse_version(versions.current.version).tag
    commit = _git(checkout, "rev-parse", "--short=14", "HEAD")
    env = {**os.environ, "KUBERNETES_SOURCE_DIR": str(checkout)}
    env.pop("E2E_DRA_KUBERNETES_VERSION", None)
    env.pop("KUBERNETES_SERVER_BIN_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", "versions"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected = f"{tag}.1+{commit}" if parse_version(tag).pre else f"{tag}-1+{commit}"
    assert lines[0] == f"version under test: {expected}  (local: {checkout})"
    assert lines[1] == f"previous minor:     {previous_minor(expected)}"
    assert re.fullmatch(rf"previous release:   {versions.previous.version}  \(\w+\)", lines[2])


def test_the_main_job_runs_on_the_checkout(
    checkout: Path, versions: VersionsUnderTest, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "KUBERNETES_SOURCE_DIR": str(checkout),
        "KUBERNETES_SERVER_BIN_DIR": str(
            checkout / "_output" / "local" / "bin" / "/".join(host_platform())
        ),
        "ARTIFACTS": str(tmp_path / "artifacts"),
    }
    env.pop("E2E_DRA_KUBERNETES_VERSION", None)
    done = subprocess.run(
        [*PYTEST, "-x", "-q", "-p", "no:cacheprovider", "e2e_dra", "-k", "core-dra and not gate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    summaries = list((tmp_path / "artifacts").glob("*/summary.json"))
    assert summaries, f"no summary.json under {tmp_path / 'artifacts'}"
    summary = json.loads(summaries[0].read_text())
    assert summary["current"]["origin"] == "local"
    assert summary["current"]["version"].startswith(parse_version(versions.current.version).tag)
    assert summary["current"]["version"] != versions.current.version  # the checkout's, not the tag
    assert summary["previous"]["version"] == versions.previous.version
