"""The ``e2e-dra`` commands other tools call: their stdout, their errors, their start-up cost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from environment import Environ
from release_server import CLUSTER_BINARIES, ReleaseServer

from e2e_dra.cli import main


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CI": "true", **(env or {})},
        check=False,
    )


def test_help_lists_the_commands_without_importing_heavy_modules() -> None:
    probe = (
        "import sys\n"
        "from e2e_dra.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "heavy = sorted(m for m in ('kubernetes', 'httpx', 'grpc') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    for command in ("previous-minor", "resolve", "download", "versions"):
        assert command in proc.stdout
    assert "HEAVY []" in proc.stdout


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("v1.36.3", "1.35"),
        ("v1.37.0-alpha.0.812+0123abcd", "1.35"),
        ("v1.37.0-alpha.0.812+0123abcd-dirty", "1.35"),
        ("v1.37.0-rc.0", "1.36"),
    ],
)
def test_previous_minor_prints_major_minor(
    version: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["previous-minor", version]) == 0
    assert capsys.readouterr().out == f"{expected}\n"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["previous-minor", "v1.x.3"], "'v1.x.3'"),
        (["previous-minor", "v1.0.0"], "'v1.0.0'"),
        (["resolve", "one.two", "--base-url", "http://127.0.0.1:9"], "'one.two'"),
        (["download", "v1.35.2-3+0123abcdef0123", "--base-url", "http://127.0.0.1:9"], "'v1.35"),
        (["download", "newest", "--base-url", "http://127.0.0.1:9"], "'newest'"),
        (["resolve", "v1.38.0-beta.0.1+0123abcd", "--base-url", "http://127.0.0.1:9"], "'v1.38"),
    ],
)
def test_bad_input_is_one_line_naming_it(args: list[str], named: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 3  # a malformed value
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("e2e-dra: error: ")
    assert named in lines[0]


@pytest.mark.parametrize("args", [[], ["previous-minor"], ["no-such-command"], ["download", "-x"]])
def test_usage_mistakes_are_one_line(args: list[str]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "error:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_resolve_prints_the_version(
    release_server: ReleaseServer, capsys: pytest.CaptureFixture[str]
) -> None:
    release_server.put("latest-1.37.txt", "v1.37.0-beta.0\n")
    assert main(["resolve", "1.37", "--base-url", release_server.url]) == 0
    assert capsys.readouterr().out == "v1.37.0-beta.0\n"


def test_resolve_failure_names_url_and_status(release_server: ReleaseServer) -> None:
    proc = run_cli("resolve", "1.12", "--base-url", release_server.url)
    assert proc.returncode == 4  # not found
    assert proc.stderr.splitlines()[-1] == (
        f"e2e-dra: error: no Kubernetes 1.12 release: neither {release_server.url}/stable-1.12.txt "
        f"nor {release_server.url}/latest-1.12.txt exists (HTTP 404); check the version or the "
        "release URL (KUBERNETES_RELEASE_URL or --base-url)"
    )


def test_download_of_a_minor_resolves_and_prints_the_directory_last(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.put("stable-1.35.txt", "v1.35.2")
    release_server.add_release("v1.35.2")
    args = ("download", "1.35", "--base-url", release_server.url, "--cache-dir", str(tmp_path))
    args += ("--os", "linux", "--arch", "amd64")
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    bin_dir = Path(proc.stdout.splitlines()[-1])
    assert bin_dir == tmp_path / "v1.35.2"
    assert all((bin_dir / name).is_file() for name in CLUSTER_BINARIES)
    assert "downloading kubernetes-server-linux-amd64.tar.gz" in proc.stderr


def test_download_uses_the_cache_dir_from_the_environment(
    release_server: ReleaseServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release_server.add_release("v1.35.2")
    env = {
        "KUBERNETES_SERVER_CACHE_DIR": str(tmp_path),
        "KUBERNETES_RELEASE_URL": release_server.url,
    }
    proc = run_cli("download", "v1.35.2", "--os", "linux", "--arch", "amd64", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(tmp_path / "v1.35.2")


def test_versions_from_a_bin_dir(
    release_server: ReleaseServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release_server.put("stable-1.35.txt", "v1.35.2\n")
    apiserver = tmp_path / "bin" / "kube-apiserver"
    apiserver.parent.mkdir()
    apiserver.write_text("#!/bin/sh\necho Kubernetes v1.37.0-alpha.0.812+0123abcdef0123\n")
    apiserver.chmod(0o755)
    args = ["versions", "--bin-dir", str(apiserver.parent), "--base-url", release_server.url]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("version under test: v1.37.0-alpha.0.812+0123abcdef0123 ")
    assert lines[1] == "previous minor:     1.35"
    assert lines[2] == "previous release:   v1.35.2  (download)"


def test_versions_upgrade_from_the_previous_release_the_user_names(
    release_server: ReleaseServer,
    environ: Environ,
    capsys: pytest.CaptureFixture[str],
) -> None:
    environ.unset("KUBERNETES_SOURCE_DIR", "KUBERNETES_SERVER_BIN_DIR", "KUBE_GIT_VERSION_FILE")
    environ.set("E2E_DRA_KUBERNETES_VERSION", "v1.37.2")
    release_server.put("stable-1.36.txt", "v1.36.5")
    release_server.put("stable-1.37.txt", "v1.37.2")
    release_server.put("stable-1.35.txt", "v1.35.8")

    def versions() -> list[str]:
        assert main(["versions", "--base-url", release_server.url]) == 0
        return capsys.readouterr().out.splitlines()[1:]

    assert versions() == ["previous minor:     1.36", "previous release:   v1.36.5  (download)"]
    environ.set("E2E_DRA_PREVIOUS_VERSION", "v1.36.2")  # the patch release a user runs
    assert versions() == ["previous minor:     1.36", "previous release:   v1.36.2  (download)"]
    environ.set("E2E_DRA_PREVIOUS_VERSION", "v1.37.0")  # a patch-level upgrade
    assert versions() == ["previous minor:     1.37", "previous release:   v1.37.0  (download)"]
    environ.set("E2E_DRA_PREVIOUS_VERSION", "1.36")
    assert versions()[1] == "previous release:   v1.36.5  (download)"

    refused = {
        "1.35": "v1.35.8",  # two minors: the control plane moves one at a time
        "v1.37.2": "v1.37.2",  # not older
        "1.37": "v1.37.2",
        "v1.38.0-beta.0": "v1.38.0-beta.0",  # newer
    }
    for spec, version in refused.items():
        environ.set("E2E_DRA_PREVIOUS_VERSION", spec)
        assert main(["versions", "--base-url", release_server.url]) == 3, spec
        (line,) = capsys.readouterr().err.splitlines()
        assert line == (
            f"e2e-dra: error: E2E_DRA_PREVIOUS_VERSION={spec} ({version}) cannot be upgraded to "
            "v1.37.2 in one step: the version skew policy moves the control plane one minor at "
            "a time, to a newer release; name an older release of 1.36 or of 1.37"
        )
    environ.set("E2E_DRA_PREVIOUS_VERSION", "yesterday")
    assert main(["versions", "--base-url", release_server.url]) == 3
    assert "E2E_DRA_PREVIOUS_VERSION 'yesterday' is not a Kubernetes release" in (
        capsys.readouterr().err
    )


def test_versions_defaults_to_the_latest_release_and_honours_the_pin(
    release_server: ReleaseServer,
    environ: Environ,
    capsys: pytest.CaptureFixture[str],
) -> None:
    environ.unset(
        "KUBERNETES_SOURCE_DIR",
        "KUBERNETES_SERVER_BIN_DIR",
        "KUBE_GIT_VERSION_FILE",
        "E2E_DRA_KUBERNETES_VERSION",
    )
    release_server.put("latest.txt", "v1.37.0-rc.1")
    release_server.put("stable.txt", "v1.36.4")
    release_server.put("stable-1.36.txt", "v1.36.4")
    release_server.put("stable-1.35.txt", "v1.35.2")
    assert main(["versions", "--base-url", release_server.url]) == 0
    out = capsys.readouterr().out
    assert "version under test: v1.37.0-rc.1  (latest, download)" in out
    assert "previous release:   v1.36.4  (download)" in out

    environ.set("E2E_DRA_KUBERNETES_VERSION", "stable")
    assert main(["versions", "--base-url", release_server.url]) == 0
    out = capsys.readouterr().out
    assert "version under test: v1.36.4  (stable, download)" in out
    assert "previous release:   v1.35.2  (download)" in out

    release_server.put("stable-1.34.txt", "v1.34.9")
    environ.set("E2E_DRA_KUBERNETES_VERSION", "v1.35.1")
    assert main(["versions", "--base-url", release_server.url]) == 0
    assert "version under test: v1.35.1  (v1.35.1, download)" in capsys.readouterr().out

    environ.set("E2E_DRA_KUBERNETES_VERSION", "garbage")
    assert main(["versions", "--base-url", release_server.url]) == 3  # bad input
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "e2e-dra: error: E2E_DRA_KUBERNETES_VERSION 'garbage' is not a Kubernetes release "
        "(v1.38.0-beta.0), MAJOR.MINOR (its newest release), 'stable' (the newest stable "
        "release) or 'latest' (the newest, pre-releases included)"
    ]
