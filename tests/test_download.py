"""Release resolution and verified, resumable, cached downloads against a loopback release tree."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from environment import Environ
from release_server import (
    CLUSTER_BINARIES,
    Fault,
    Member,
    ReleaseServer,
    fake_binary,
    release_members,
    wait_until,
)

from e2e_dra.errors import InputError, NotFoundError, ReleaseError, VersionError
from e2e_dra.releases import Release
from e2e_dra.releases._download import DownloadSource, host_platform
from e2e_dra.releases._http import MAX_RETRY_AFTER, file_name, retry_after_seconds, url_under

TARBALL = "kubernetes-server-linux-amd64.tar.gz"


def source(server: ReleaseServer, cache: Path, **kwargs: str) -> DownloadSource:
    return DownloadSource(base_url=server.url, cache_dir=cache, os_="linux", arch="amd64", **kwargs)


def assert_nothing_cached(cache: Path) -> None:
    """No entry a later run could take for a hit, and no temp dir left behind."""
    if cache.exists():
        entries = [p.name for p in cache.iterdir() if p.name not in {".locks", ".partial"}]
        assert entries == []


# -- resolution ----------------------------------------------------------------------------------


def test_resolve_reads_the_stable_marker_and_strips_it(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.put("stable-1.35.txt", "v1.35.2\n")
    release_server.put("latest-1.35.txt", "v1.35.3-rc.0\n")
    assert source(release_server, tmp_path).resolve("1.35") == "v1.35.2"
    assert release_server.count("latest-1.35.txt") == 0


def test_resolve_falls_back_to_latest_only_on_404(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.put("latest-1.37.txt", "  v1.37.0-alpha.2\n")
    assert source(release_server, tmp_path).resolve("v1.37") == "v1.37.0-alpha.2"
    assert release_server.count("stable-1.37.txt") == 1


@pytest.mark.parametrize("status", [403, 401, 410])
def test_resolve_other_failures_are_errors_naming_url_and_status(
    release_server: ReleaseServer, tmp_path: Path, status: int
) -> None:
    release_server.put("latest-1.35.txt", "v1.35.9")
    release_server.fail("stable-1.35.txt", Fault(status=status))
    with pytest.raises(ReleaseError) as caught:
        source(release_server, tmp_path).resolve("1.35")
    assert f"{release_server.url}/stable-1.35.txt" in str(caught.value)
    assert f"HTTP {status}" in str(caught.value)
    assert release_server.count("latest-1.35.txt") == 0


def test_resolve_with_neither_marker_names_the_latest_url(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    with pytest.raises(NotFoundError, match=r"latest-1\.99\.txt exists \(HTTP 404\)"):
        source(release_server, tmp_path).resolve("1.99")


def test_resolve_retries_a_transient_failure(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.put("stable-1.35.txt", "v1.35.2")
    release_server.fail("stable-1.35.txt", Fault(status=503))
    assert source(release_server, tmp_path).resolve("1.35") == "v1.35.2"
    assert release_server.count("stable-1.35.txt") == 2


@pytest.mark.parametrize("body", ["<html>moved</html>", "v1.36.1", ""])
def test_resolve_refuses_a_marker_that_is_not_a_release_of_that_minor(
    release_server: ReleaseServer, tmp_path: Path, body: str
) -> None:
    release_server.put("stable-1.35.txt", body)
    with pytest.raises(ReleaseError, match=r"stable-1\.35\.txt"):
        source(release_server, tmp_path).resolve("1.35")


def test_resolve_rejects_a_malformed_minor(tmp_path: Path) -> None:
    with pytest.raises(VersionError, match=r"'1\.35\.x'"):
        DownloadSource(base_url="http://127.0.0.1:9", cache_dir=tmp_path).resolve("1.35.x")


def test_latest_stable_reads_stable_txt(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.put("stable.txt", "v1.36.4\n")
    assert source(release_server, tmp_path).latest_stable() == "v1.36.4"


def test_base_url_comes_from_the_environment(
    release_server: ReleaseServer, tmp_path: Path, environ: Environ
) -> None:
    release_server.put("stable.txt", "v1.36.4")
    environ.set("KUBERNETES_RELEASE_URL", release_server.url + "/")
    assert DownloadSource(cache_dir=tmp_path).latest_stable() == "v1.36.4"


# -- fetching ------------------------------------------------------------------------------------


def test_fetch_extracts_only_the_cluster_binaries_read_only(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    tarball = release_server.add_release("v1.35.2")
    release = source(release_server, tmp_path).fetch("1.35.2")

    assert release == Release("v1.35.2", tmp_path / "v1.35.2", None, "download")
    assert DownloadSource.name == "download"
    binaries = sorted(p.name for p in release.bin_dir.iterdir() if not p.name.startswith("."))
    assert binaries == sorted([*CLUSTER_BINARIES, "kubectl"])
    for name in binaries:
        path = release.bin_dir / name
        assert path.read_bytes() == fake_binary(name)
        assert stat.S_IMODE(path.stat().st_mode) == 0o555
    meta = json.loads(next(release.bin_dir.glob(".*.json")).read_text())
    assert meta["url"] == f"{release_server.url}/v1.35.2/{TARBALL}"
    assert meta["sha512"] == hashlib.sha512(tarball).hexdigest()
    assert meta["size"] == len(tarball)
    assert not (tmp_path / ".partial" / "v1.35.2").exists()  # the tarball is not kept


def test_fetch_without_kubectl_in_the_tarball(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.35.2", release_members(kubectl=False))
    release = source(release_server, tmp_path).fetch("v1.35.2")
    assert not (release.bin_dir / "kubectl").exists()
    assert (release.bin_dir / "kubelet").is_file()


@pytest.mark.parametrize("sidecar_format", ["bare", "with-name"])
def test_fetch_falls_back_to_a_sha256_sidecar(
    release_server: ReleaseServer, tmp_path: Path, sidecar_format: str
) -> None:
    release_server.add_release("v1.35.2", sidecars=["sha256"], sidecar_format=sidecar_format)
    release = source(release_server, tmp_path).fetch("v1.35.2")
    assert (release.bin_dir / "kube-apiserver").is_file()
    assert release_server.count(f"{TARBALL}.sha512") == 1


def test_fetch_accepts_digest_and_file_name_sidecars(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.35.2", sidecar_format="with-name")
    assert (source(release_server, tmp_path).fetch("v1.35.2").bin_dir / "kubelet").is_file()


def test_checksum_mismatch_is_an_error_and_caches_nothing(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.35.2")
    release_server.put(f"v1.35.2/{TARBALL}.sha512", hashlib.sha512(b"other").hexdigest())
    with pytest.raises(ReleaseError, match="sha512 mismatch"):
        source(release_server, tmp_path).fetch("v1.35.2")
    assert_nothing_cached(tmp_path)
    assert list((tmp_path / ".partial").rglob("*.part")) == []  # no poisoned resume either


@pytest.mark.parametrize("body", ["", "not-a-digest", "abc123  " + TARBALL])
def test_unreadable_sidecar_is_an_error(
    release_server: ReleaseServer, tmp_path: Path, body: str
) -> None:
    release_server.add_release("v1.35.2")
    release_server.put(f"v1.35.2/{TARBALL}.sha512", body)
    with pytest.raises(ReleaseError, match="holds no sha512 digest"):
        source(release_server, tmp_path).fetch("v1.35.2")
    assert release_server.count(TARBALL) == 0


def test_missing_sidecar_is_an_error_before_any_download(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.35.2", sidecars=[])
    with pytest.raises(ReleaseError, match="no checksum is published"):
        source(release_server, tmp_path).fetch("v1.35.2")
    assert release_server.count(TARBALL) == 1  # only to tell "not found" from "unverifiable"
    assert_nothing_cached(tmp_path)


def test_missing_tarball_names_the_url(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.put(f"v1.35.2/{TARBALL}.sha512", "0" * 128)
    with pytest.raises(ReleaseError, match=rf"v1\.35\.2/{TARBALL} failed: HTTP 404"):
        source(release_server, tmp_path).fetch("v1.35.2")
    assert_nothing_cached(tmp_path)


def test_a_dropped_transfer_resumes_with_a_range_request(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    tarball = release_server.add_release("v1.35.2", release_members(binary_size=300_000))
    release_server.fail(f"v1.35.2/{TARBALL}", Fault(drop_after=400_000))
    release = source(release_server, tmp_path).fetch("v1.35.2")

    assert (release.bin_dir / "kube-proxy").read_bytes() == fake_binary("kube-proxy", 300_000)
    ranges = [h.get("range") for h in release_server.headers_of(TARBALL)]
    assert ranges == [None, "bytes=400000-"]
    assert release_server.body_bytes_sent[f"/release/v1.35.2/{TARBALL}"] == len(tarball)


def test_a_server_that_ignores_range_is_downloaded_again_from_the_start(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    tarball = release_server.add_release("v1.35.2", release_members(binary_size=300_000))
    release_server.ignore_range = True
    release_server.fail(f"v1.35.2/{TARBALL}", Fault(drop_after=400_000, times=2))
    release = source(release_server, tmp_path).fetch("v1.35.2")

    assert (release.bin_dir / "kubelet").read_bytes() == fake_binary("kubelet", 300_000)
    assert [h.get("range") for h in release_server.headers_of(TARBALL)] == [
        None,
        "bytes=400000-",
        "bytes=400000-",
    ]
    assert release_server.body_bytes_sent[f"/release/v1.35.2/{TARBALL}"] == 400_000 * 2 + len(
        tarball
    )


def test_transient_errors_on_the_tarball_are_retried(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.35.2")
    release_server.fail(f"v1.35.2/{TARBALL}", Fault(status=502))
    release_server.fail(f"v1.35.2/{TARBALL}", Fault(drop_after=10))
    assert (source(release_server, tmp_path).fetch("v1.35.2").bin_dir / "kubelet").is_file()
    assert release_server.count(TARBALL) == 3


def _cli(*args: str, **popen: object) -> subprocess.Popen[str]:
    env = {**os.environ, "CI": "true"}
    return subprocess.Popen(
        [sys.executable, "-m", "e2e_dra.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **popen,  # type: ignore[arg-type]
    )


def test_an_interrupted_run_leaves_no_entry_and_the_next_run_resumes(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    tarball = release_server.add_release("v1.35.2", release_members(binary_size=300_000))
    path = f"/release/v1.35.2/{TARBALL}"
    release_server.fail(f"v1.35.2/{TARBALL}", Fault(stall_after=1_000_000))
    args = ("download", "v1.35.2", "--base-url", release_server.url, "--cache-dir", str(tmp_path))
    first = _cli(*args)
    wait_until(lambda: release_server.body_bytes_sent[path] >= 1_000_000)
    wait_until(lambda: any(p.stat().st_size for p in tmp_path.glob(".partial/*/*.part")))
    first.send_signal(signal.SIGINT)  # what Ctrl-C does
    _, stderr = first.communicate(timeout=30)

    assert first.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert_nothing_cached(tmp_path)
    release_server.release_stall.set()

    second = _cli(*args)
    stdout, stderr = second.communicate(timeout=60)
    assert second.returncode == 0, stderr
    assert stdout.splitlines()[-1] == str(tmp_path / "v1.35.2")
    resumed_from = int(release_server.headers_of(TARBALL)[-1]["range"][len("bytes=") : -1])
    assert resumed_from > 0
    assert release_server.body_bytes_sent[path] - 1_000_000 == len(tarball) - resumed_from


@pytest.mark.parametrize(
    "bad_member",
    [
        Member("../kube-apiserver", b"escape"),
        Member("kubernetes/../../kubelet", b"escape"),
        Member("/usr/local/bin/kube-proxy", b"escape"),
        Member("/etc/passwd", b"escape"),
        Member("kubernetes/server/bin/kube-scheduler", link="/etc/passwd"),
    ],
    ids=["dotdot", "nested-dotdot", "absolute-wanted", "absolute-other", "symlink"],
)
def test_members_that_would_escape_are_refused(
    release_server: ReleaseServer, tmp_path: Path, bad_member: Member
) -> None:
    members = [m for m in release_members() if Path(m.name).name != Path(bad_member.name).name]
    release_server.add_release("v1.35.2", [bad_member, *members])
    cache = tmp_path / "cache"
    with pytest.raises(ReleaseError, match="refusing it"):
        source(release_server, cache).fetch("v1.35.2")
    assert_nothing_cached(cache)
    assert not (tmp_path / "kube-apiserver").exists()


def test_a_tarball_without_a_cluster_component_is_refused(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    members = [m for m in release_members() if not m.name.endswith("/kube-scheduler")]
    release_server.add_release("v1.35.2", members)
    with pytest.raises(ReleaseError, match="lacks kube-scheduler"):
        source(release_server, tmp_path).fetch("v1.35.2")
    assert_nothing_cached(tmp_path)


def test_a_corrupt_tarball_with_a_matching_digest_is_refused(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    garbage = b"\x1f\x8b" + b"not really gzip" * 100
    release_server.put(f"v1.35.2/{TARBALL}", garbage)
    release_server.put(f"v1.35.2/{TARBALL}.sha512", hashlib.sha512(garbage).hexdigest())
    with pytest.raises(ReleaseError, match=r"not a readable \.tar\.gz"):
        source(release_server, tmp_path).fetch("v1.35.2")
    assert_nothing_cached(tmp_path)


@pytest.mark.parametrize("version", ["v1.35.2-3+0123abcdef0123-dirty", "v1.35.2-3-g0123abcdef0"])
def test_local_builds_cannot_be_downloaded(tmp_path: Path, version: str) -> None:
    # a CI build (v1.35.2-3+0123abcdef0123) can: a CI tree's markers name those
    with pytest.raises(InputError, match="is a local build"):
        DownloadSource(cache_dir=tmp_path).fetch(version)


def test_a_cache_hit_needs_no_server(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.add_release("v1.35.2")
    first = source(release_server, tmp_path).fetch("v1.35.2")
    served = len(release_server.requests)
    release_server.stop()

    again = source(release_server, tmp_path).fetch("v1.35.2")
    assert again == first
    assert len(release_server.requests) == served
    assert (again.bin_dir / "kube-apiserver").read_bytes() == fake_binary("kube-apiserver")


def test_another_platform_has_its_own_url_and_entry(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    native = "-".join(host_platform())
    foreign = "linux-s390x" if native != "linux-s390x" else "linux-amd64"
    release_server.add_release("v1.35.2", os_arch=foreign)
    os_, arch = foreign.split("-")
    release = DownloadSource(
        base_url=release_server.url, cache_dir=tmp_path, os_=os_, arch=arch
    ).fetch("v1.35.2")
    assert release.bin_dir == tmp_path / f"v1.35.2-{foreign}"
    assert release_server.count(f"kubernetes-server-{foreign}.tar.gz") == 1


def test_concurrent_downloads_into_one_cache_download_once(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.35.2", release_members(binary_size=200_000))
    args = ("download", "v1.35.2", "--base-url", release_server.url, "--cache-dir", str(tmp_path))
    runs = [_cli(*args) for _ in range(3)]
    outputs = [run.communicate(timeout=60) for run in runs]

    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, stderr
        assert stdout.splitlines()[-1] == str(tmp_path / "v1.35.2")
    assert release_server.count(TARBALL) == 1
    assert release_server.count(f"{TARBALL}.sha512") == 1
    assert (tmp_path / "v1.35.2" / "kube-controller-manager").read_bytes() == fake_binary(
        "kube-controller-manager", 200_000
    )


# -- issue 20: what a server asks for, and URLs under a base with a query ------------------------


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        ("3", 3.0),
        (" 0 ", 0.0),
        ("3600", MAX_RETRY_AFTER),
        ("9" * 5000, MAX_RETRY_AFTER),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past: at once
        ("Thu, 22 Oct 2015 07:28:00 GMT", MAX_RETRY_AFTER),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_seconds_or_a_date_and_capped(header: str | None, wait: float | None):
    now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert retry_after_seconds(header, now) == wait


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://dl.k8s.io/release", "https://dl.k8s.io/release/v1.36.5/k.tar.gz"),
        ("https://dl.k8s.io/release/", "https://dl.k8s.io/release/v1.36.5/k.tar.gz"),
        ("http://m/r?token=a%2Fb&x=1", "http://m/r/v1.36.5/k.tar.gz?token=a%2Fb&x=1"),
        ("http://m?x=1", "http://m/v1.36.5/k.tar.gz?x=1"),
    ],
)
def test_urls_under_a_base_keep_its_query(base: str, url: str):
    assert url_under(base, "v1.36.5", "k.tar.gz") == url
    assert file_name(url) == "k.tar.gz"
