"""Every failure a user can cause or meet ends as one line and a status of its kind, never a
traceback, and leaves a cache that the next run can trust (issue 15's reproductions, one each).

Each runs the real ``e2e-dra`` command in a subprocess, against the loopback release server (the
one stand-in: dl.k8s.io cannot be reached here) and a fresh cache dir, with stderr not a terminal.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from module_proxy import ProxyTree
from release_server import (
    CLUSTER_BINARIES,
    Fault,
    Member,
    ReleaseServer,
    release_members,
    wait_until,
)

TARBALL = "kubernetes-server-linux-amd64.tar.gz"
_LIMITED_LAUNCHER = (
    "import os, resource, sys; limit = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "os.execv(sys.executable, [sys.executable, '-m', 'e2e_dra.cli', *sys.argv[2:]])"
)


def e2e_dra(
    *args: str,
    cache: Path | None = None,
    env: dict[str, str] | None = None,
    stdout: int | None = subprocess.PIPE,
    file_size_limit: int | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``e2e-dra ARGS`` as a user runs it, with the file size limit of ``ulimit -f`` if given.

    The limit is set by a tiny launcher that execs the command, not by ``preexec_fn``: between
    fork and exec a child of this (threaded, gRPC-loaded) test process can abort in gRPC's fork
    handlers, and did, 1 run in about 20."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "E2E_DRA"))}
    base["E2E_DRA_RELEASE_SOURCE"] = "download"
    if cache is not None:
        base["KUBERNETES_SERVER_CACHE_DIR"] = str(cache)
        base["E2E_DRA_CACHE_DIR"] = str(cache.parent / "root")
    launcher = [sys.executable, "-m", "e2e_dra.cli"]
    if file_size_limit is not None:
        launcher = [sys.executable, "-c", _LIMITED_LAUNCHER, str(file_size_limit)]
    return subprocess.run(
        [*launcher, *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
        check=False,
        cwd=cwd,
    )


def one_line(proc: subprocess.CompletedProcess[str], status: int, *named: str) -> str:
    """The last stderr line is the error, it is the only error line, and no traceback is shown."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == status, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("e2e-dra: error:")]
    assert len(errors) == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == errors[0]
    for text in named:
        assert text in errors[0], errors[0]
    return errors[0]


def no_entries(cache: Path) -> list[str]:
    """Entries or temp dirs a later run could trip over."""
    if not cache.is_dir():
        return []
    return sorted(p.name for p in cache.iterdir() if p.name not in {".locks", ".partial"})


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://[::1", "ftp://x", "not a url", "http://"])
def test_a_bad_release_url_is_bad_input_and_not_retried(url: str, tmp_path: Path) -> None:
    started = time.monotonic()
    proc = e2e_dra("resolve", "1.36", "--base-url", url, cache=tmp_path / "c")
    one_line(proc, 3, repr(url), "--base-url")
    assert time.monotonic() - started < 5  # no retries with backoff


def test_a_bad_release_url_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    proc = e2e_dra("resolve", "1.36", env={"KUBERNETES_RELEASE_URL": "ftp://x"})
    one_line(proc, 3, "KUBERNETES_RELEASE_URL='ftp://x' is not an http(s) URL")


@pytest.mark.parametrize(
    "args",
    [
        ["download", "v1.36.5", "--os", "a/b", "--base-url", "http://127.0.0.1:9"],
        ["download", "v1.36.5", "--arch", "../x", "--base-url", "http://127.0.0.1:9"],
        ["previous-minor", "v" + "1" * 4301 + ".2.3"],
        ["previous-minor", "v\u0661.\u0663\u0667.\u0660"],
        ["resolve", "\u0661.\u0663\u0666", "--base-url", "http://127.0.0.1:9"],
        ["download", "v1.36.5", "--deadline", "soon", "--base-url", "http://127.0.0.1:9"],
        ["download", "v1.36.5", "--min-speed", "fast", "--base-url", "http://127.0.0.1:9"],
    ],
)
def test_malformed_values_are_bad_input(args: list[str], tmp_path: Path) -> None:
    proc = e2e_dra(*args, cache=tmp_path / "c")
    line = one_line(proc, 3)
    assert len(line) < 300
    assert no_entries(tmp_path / "c") == []


def test_a_cache_path_with_an_unknown_user_is_bad_input(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5")
    proc = e2e_dra(
        "download",
        "v1.36.5",
        "--base-url",
        release_server.url,
        env={"E2E_DRA_CACHE_DIR": "~nosuchuser/x", "KUBERNETES_SERVER_CACHE_DIR": ""},
    )
    one_line(proc, 3, "E2E_DRA_CACHE_DIR", "~nosuchuser/x")


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (b"KUBE_GIT_VERSION='v1.37.0\n", "No closing quotation"),
        (b"\xff\xfe\x00binary\x00\xc3\x28", "not a text file"),
    ],
)
def test_a_broken_version_file_is_bad_input(
    content: bytes, named: str, release_server: ReleaseServer, tmp_path: Path
) -> None:
    version_file = tmp_path / "version"
    version_file.write_bytes(content)
    proc = e2e_dra(
        "versions",
        "--base-url",
        release_server.url,
        env={"KUBE_GIT_VERSION_FILE": str(version_file)},
    )
    one_line(proc, 3, str(version_file), named)


# -- the mirror ----------------------------------------------------------------------------------


def test_a_redirect_loop_fails_once_with_a_line(release_server: ReleaseServer) -> None:
    release_server.fail("stable-1.36.txt", Fault(redirect_to_self=True, times=1000))
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url)
    one_line(proc, 5, "stable-1.36.txt", "redirects in a loop")
    assert release_server.count("stable-1.36.txt") <= 21  # one try: httpx's 20 redirects


def test_a_long_redirect_chain_is_not_called_a_loop(release_server: ReleaseServer) -> None:
    release_server.fail("stable-1.36.txt", Fault(redirect_onward=True, times=25))
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url)
    line = one_line(proc, 5, "stable-1.36.txt", "redirects more than 20 times (the last to ")
    assert "loop" not in line and "?hop=" in line


def test_plain_bodies_labelled_gzip_are_read_as_they_are(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    release_server.add_release("v1.36.5")
    release_server.mislabel("stable-1.36.txt")
    release_server.mislabel(f"v1.36.5/{TARBALL}.sha512")
    proc = e2e_dra("download", "1.36", "--base-url", release_server.url, cache=tmp_path / "c")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(tmp_path / "c" / "v1.36.5")


def test_a_release_that_does_not_exist_is_not_found(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    proc = e2e_dra("download", "v1.99.0", "--base-url", release_server.url, cache=tmp_path / "c")
    line = one_line(proc, 4, "v1.99.0 not found", f"{release_server.url}/v1.99.0/{TARBALL}")
    assert "checksum" not in line
    assert no_entries(tmp_path / "c") == []


def test_a_trickling_mirror_meets_the_deadline_and_shows_progress(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5", release_members(binary_size=60_000))
    release_server.fail(f"v1.36.5/{TARBALL}", Fault(trickle=20_000, times=10))
    started = time.monotonic()
    proc = e2e_dra(
        "download",
        "v1.36.5",
        "--base-url",
        release_server.url,
        "--deadline",
        "4",
        "--min-speed",
        "0",
        cache=tmp_path / "c",
        env={"E2E_DRA_PROGRESS_EVERY": "1"},
    )
    elapsed = time.monotonic() - started
    one_line(proc, 5, "within the 4s deadline", "E2E_DRA_DOWNLOAD_DEADLINE")
    assert elapsed < 12
    progress = [
        line for line in proc.stderr.splitlines() if f"{TARBALL}: " in line and "MB/s" in line
    ]
    assert len(progress) >= 2, proc.stderr  # plain periodic lines, stderr being a pipe
    assert no_entries(tmp_path / "c") == []
    part = tmp_path / "c" / ".partial" / "v1.36.5" / f"{TARBALL}.part"
    assert part.stat().st_size > 0  # kept for the next run to continue


def test_a_mirror_below_the_minimum_speed_is_given_up(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    from e2e_dra.errors import ReleaseError
    from e2e_dra.releases._download import DownloadSource
    from e2e_dra.releases._http import Budget

    release_server.add_release("v1.36.5", release_members(binary_size=60_000))
    release_server.fail(f"v1.36.5/{TARBALL}", Fault(trickle=5_000, times=10))
    budget = Budget(deadline=60, min_speed=20_000, window=1.5)
    source = DownloadSource(
        base_url=release_server.url, cache_dir=tmp_path, os_="linux", arch="amd64", budget=budget
    )
    started = time.monotonic()
    with pytest.raises(ReleaseError, match=r"too slow: .* below the minimum of 20\.0 kB/s"):
        source.fetch("v1.36.5")
    assert time.monotonic() - started < 10
    assert release_server.count(TARBALL) == 1  # not retried


def test_long_progress_lines_are_not_wrapped(release_server: ReleaseServer) -> None:
    deep = "/".join(["a-long-path-segment"] * 6)
    release_server.put(f"{deep}/latest-1.36.txt", "v1.36.0-rc.1")
    url = f"{release_server.url}/{deep}"
    proc = e2e_dra("resolve", "1.36", "--base-url", url)
    assert proc.returncode == 0, proc.stderr
    assert any(f"{url}/stable-1.36.txt" in line for line in proc.stderr.splitlines())


# -- this machine --------------------------------------------------------------------------------


def test_a_cache_dir_that_is_a_file(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.add_release("v1.36.5")
    cache = tmp_path / "file"
    cache.write_text("not a dir")
    proc = e2e_dra("download", "v1.36.5", "--base-url", release_server.url, cache=cache)
    one_line(proc, 6, str(cache), "KUBERNETES_SERVER_CACHE_DIR")
    assert release_server.count(TARBALL) == 0


def test_an_immutable_cache_dir(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.add_release("v1.36.5")
    cache = tmp_path / "ro"
    cache.mkdir()
    if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        proc = e2e_dra("download", "v1.36.5", "--base-url", release_server.url, cache=cache)
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=True)
    one_line(proc, 6, str(cache / ".locks"), "Operation not permitted")


def test_a_full_disk_while_downloading(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.add_release("v1.36.5", release_members(binary_size=400_000))
    cache = tmp_path / "c"
    proc = e2e_dra(
        "download",
        "v1.36.5",
        "--base-url",
        release_server.url,
        cache=cache,
        file_size_limit=200_000,
    )
    one_line(proc, 6, "File too large")
    assert no_entries(cache) == []


def test_an_unpack_that_failed_does_not_download_again(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    # kube-apiserver compresses to almost nothing: the tarball fits under the file size limit,
    # the unpacked binary does not
    members = release_members()
    members[0] = Member("kubernetes/server/bin/kube-apiserver", b"\0" * 3_000_000)
    release_server.add_release("v1.36.5", members)
    cache = tmp_path / "c"
    args = ("download", "v1.36.5", "--base-url", release_server.url)
    failed = e2e_dra(*args, cache=cache, file_size_limit=1_000_000)
    one_line(failed, 6, "File too large")
    assert release_server.count(TARBALL) == 1
    again = e2e_dra(*args, cache=cache)
    assert again.returncode == 0, again.stderr
    assert "verified by an earlier run" in again.stderr
    assert release_server.count(TARBALL) == 1  # not downloaded again
    assert sorted(p.name for p in Path(again.stdout.split()[-1]).iterdir() if p.name[0] != ".") == (
        sorted([*CLUSTER_BINARIES, "kubectl"])
    )
    assert not (cache / ".partial" / "v1.36.5").exists()  # unpacked: the tarball is gone


def test_stdout_that_cannot_be_written(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        proc = e2e_dra("previous-minor", "v1.36.3", stdout=full.fileno())
    one_line(proc, 6, "cannot write the result to stdout", "No space left")


def test_sigterm_leaves_no_temp_dir(release_server: ReleaseServer, tmp_path: Path) -> None:
    release_server.add_release("v1.36.5", release_members(binary_size=300_000))
    release_server.fail(f"v1.36.5/{TARBALL}", Fault(stall_after=100_000))
    cache = tmp_path / "c"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "E2E_DRA"))}
    env["KUBERNETES_SERVER_CACHE_DIR"] = str(cache)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "e2e_dra.cli",
            "download",
            "v1.36.5",
            "--base-url",
            release_server.url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_until(lambda: release_server.body_bytes_sent[f"/release/v1.36.5/{TARBALL}"] > 0)
        assert any(p.name.startswith(".tmp-") for p in cache.iterdir())
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1].startswith("e2e-dra: error: terminated (SIGTERM)")
    assert no_entries(cache) == []


# -- our bugs ------------------------------------------------------------------------------------


def test_a_bug_is_one_line_and_a_traceback_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exception nobody expected: one line naming a file that holds the traceback."""
    from e2e_dra import cli
    from e2e_dra.commands import releases as releases_cli

    def crash(_args: object) -> int:
        return {}["no such key"]  # a KeyError: the kind of bug a handler could have

    monkeypatch.setattr(releases_cli, "_previous_minor", crash)
    assert cli.main(["previous-minor", "v1.36.3"]) == 70
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert "internal error KeyError" in err
    path = Path(err.split("traceback is in ")[1].split(",")[0])
    try:
        assert "Traceback (most recent call last)" in path.read_text()
        assert "no such key" in path.read_text()
    finally:
        path.unlink()


def test_the_help_documents_the_exit_statuses() -> None:
    proc = e2e_dra("--help")
    assert proc.returncode == 0
    for status in ("2 ", "3 ", "4 ", "5 ", "6 ", "70 ", "130 ", "143 "):
        assert f"\n  {status}" in proc.stdout or f"  {status}" in proc.stdout
    assert "exit status:" in proc.stdout


def _downloaded(release_server: ReleaseServer, cache: Path) -> tuple[tuple[str, ...], Path]:
    """v1.36.5 downloaded once into ``cache``: the command's arguments and the entry's bin dir
    (made writable, so that a test can damage it)."""
    release_server.add_release("v1.36.5")
    args = ("download", "v1.36.5", "--base-url", release_server.url)
    first = e2e_dra(*args, cache=cache)
    assert first.returncode == 0, first.stderr
    bin_dir = Path(first.stdout.split()[-1])
    os.chmod(bin_dir, 0o755)
    return args, bin_dir


def test_a_cache_entry_damaged_by_hand_is_downloaded_again(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    cache = tmp_path / "c"
    args, bin_dir = _downloaded(release_server, cache)
    (bin_dir / "kube-apiserver").unlink()
    os.truncate(bin_dir / "kubelet", 10)
    again = e2e_dra(*args, cache=cache)
    assert again.returncode == 0, again.stderr
    assert "is damaged (kube-apiserver is missing)" in again.stderr
    assert release_server.count(TARBALL) == 2
    assert (bin_dir / "kube-apiserver").is_file()
    assert (bin_dir / "kubelet").stat().st_size == 4096
    verified = e2e_dra(*args, "--verify", cache=cache)
    assert verified.returncode == 0, verified.stderr
    assert release_server.count(TARBALL) == 2


# -- issue 20: the cache never serves damage -------------------------------------------------------


@pytest.mark.parametrize("marker", ["garbage{", "{}"])
def test_a_damaged_entry_with_an_unreadable_record_is_not_served_even_after_verify(
    release_server: ReleaseServer, tmp_path: Path, marker: str
) -> None:
    cache = tmp_path / "c"
    args, entry = _downloaded(release_server, cache)
    (entry / "kubelet").unlink()
    (entry / ".e2e-dra-complete.json").write_text(marker)

    verified = e2e_dra(*args, "--verify", cache=cache)

    assert verified.returncode == 0, verified.stderr
    assert "no readable record of its files" in verified.stderr
    assert release_server.count(TARBALL) == 2  # fetched again, not re-recorded
    assert (entry / "kubelet").stat().st_size == 4096


def test_damage_found_by_verify_is_not_served_by_the_next_run(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    cache = tmp_path / "c"
    args, bin_dir = _downloaded(release_server, cache)
    kubelet = bin_dir / "kubelet"
    before = kubelet.stat()
    os.chmod(kubelet, 0o755)
    with open(kubelet, "r+b") as out:  # one byte, same size, same mtime
        out.write(b"X")
    os.utime(kubelet, ns=(before.st_atime_ns, before.st_mtime_ns))
    release_server.stop()  # the mirror is gone

    verified = e2e_dra(*args, "--verify", cache=cache)
    one_line(verified, 5)
    assert "kubelet does not hold what was written (sha256 differs)" in verified.stderr

    plain = e2e_dra(*args, cache=cache)
    one_line(plain, 5)  # it tries the mirror again instead of serving the damaged kubelet
    assert not kubelet.exists()


# -- issue 20: every read of outside input is bounded ----------------------------------------------


def _bin_dir_whose_apiserver_runs(tmp_path: Path, script: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    apiserver = bin_dir / "kube-apiserver"
    apiserver.write_text(f"#!/bin/sh\n{script}\n")
    apiserver.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "large"])
def test_a_version_file_that_is_no_file_or_too_large_is_refused_at_once(
    release_server: ReleaseServer, tmp_path: Path, kind: str
) -> None:
    version_file = Path("/dev/zero")
    if kind == "fifo":
        version_file = tmp_path / "fifo"
        os.mkfifo(version_file)  # nobody writes: a read would hang
    elif kind == "large":
        version_file = tmp_path / "large"
        version_file.write_bytes(b"KUBE_GIT_VERSION='v1.37.2'\n" + b"#" * 100_000)
    proc = e2e_dra(
        "versions",
        "--base-url",
        release_server.url,
        env={"KUBE_GIT_VERSION_FILE": str(version_file)},
        timeout=20,
    )
    named = "larger than 65536 bytes" if kind == "large" else "is not a regular file"
    one_line(proc, 3, str(version_file), named)


@pytest.mark.parametrize(
    ("script", "named"),
    [
        ("head -c 50000000 /dev/zero | tr '\\0' x", "printed more than 65536 bytes"),
        ("printf 'Kubernetes \\377\\376'; exit 0", "--version: not a Kubernetes version"),
        ("printf '\\377\\376 broken' >&2; exit 3", "failed (exit 3)"),
        ("printf '\\377 not kubernetes'", "not 'Kubernetes vX.Y.Z'"),
    ],
)
def test_a_version_answer_that_is_huge_or_not_utf8_is_one_line(
    release_server: ReleaseServer, tmp_path: Path, script: str, named: str
) -> None:
    bin_dir = _bin_dir_whose_apiserver_runs(tmp_path, script)
    proc = e2e_dra(
        "versions",
        "--base-url",
        release_server.url,
        env={"KUBERNETES_SERVER_BIN_DIR": str(bin_dir)},
        timeout=30,
    )
    assert proc.returncode in {3, 4}, proc.stderr
    one_line(proc, proc.returncode, named)


def test_a_version_answer_that_leaves_a_child_behind_is_read_at_once(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5")
    marker = tmp_path / "child-started"
    bin_dir = _bin_dir_whose_apiserver_runs(
        tmp_path,
        f"(touch {marker}; exec sleep 317) & while [ ! -e {marker} ]; do sleep 0.01; done\n"
        "echo 'Kubernetes v1.37.2'",
    )
    started = time.monotonic()
    proc = e2e_dra(
        "versions",
        "--base-url",
        release_server.url,
        env={"KUBERNETES_SERVER_BIN_DIR": str(bin_dir)},
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert "version under test: v1.37.2" in proc.stdout
    assert time.monotonic() - started < 15  # not the 60 s of a pipe held open
    assert marker.exists()
    leftovers = subprocess.run(
        ["pgrep", "-f", "^sleep 317$"], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout == "", "the --version's child outlived the question"


# -- issue 20: a module proxy's answers are bounded and judged, its failures name GOPROXY ----------


def _build_source_env(proxy: str) -> dict[str, str]:
    """The build path (Go module proxy) instead of the download path."""
    return {"E2E_DRA_RELEASE_SOURCE": "build", "GOPROXY": proxy}


@pytest.mark.parametrize(
    "answer",
    [b"<!DOCTYPE html><html><body>Sign in</body></html>", b"[1, 2]", b'{"Version": 1}'],
)
def test_a_module_proxy_answering_no_json_info_is_a_mirror_failure(
    proxy_tree: ProxyTree, tmp_path: Path, answer: bytes
) -> None:
    info = "/k8s.io/kubernetes/@v/v1.36.5.info"
    proxy_tree.answers[info] = (200, answer, {"Content-Type": "text/html"})
    proc = e2e_dra("build", "v1.36.5", "--proxy", proxy_tree.url, cache=tmp_path / "c")
    line = one_line(proc, 5, proxy_tree.url + info, "GOPROXY")
    assert "KUBERNETES_RELEASE_URL" not in line


def test_a_compressed_answer_is_bounded_after_decompression(
    release_server: ReleaseServer,
) -> None:
    # 200 kB on the wire, 200 MB once decompressed: no marker is that large
    release_server.put("stable-1.36.txt", gzip.compress(b"\0" * 200_000_000, compresslevel=1))
    release_server.mislabel("stable-1.36.txt")  # labelled gzip, and gzip it is
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url)
    one_line(proc, 5, f"{release_server.url}/stable-1.36.txt", "more than 1048576 bytes")


def test_the_reachability_probe_does_not_read_a_huge_body(release_server: ReleaseServer) -> None:
    huge = 64 << 20
    release_server.put("stable.txt", b"v" * huge)
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    proc = e2e_dra(
        "resolve",
        "1.36",
        env={"E2E_DRA_RELEASE_SOURCE": "", "KUBERNETES_RELEASE_URL": release_server.url},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "v1.36.5"
    assert release_server.body_bytes_sent["/release/stable.txt"] < huge // 2


def test_a_release_the_module_proxy_lacks_is_not_found(
    proxy_tree: ProxyTree, tmp_path: Path
) -> None:
    built = e2e_dra("build", "v1.99.0", "--proxy", proxy_tree.url, cache=tmp_path / "c")
    one_line(built, 4, "v1.99.0 is not on the Go module proxy", "GOPROXY")
    resolved = e2e_dra("resolve", "1.99", env=_build_source_env(proxy_tree.url))
    one_line(resolved, 4, "no release of Kubernetes 1.99 on the Go module proxy")


@pytest.mark.parametrize("setting", ["off", "direct", "off,https://never.example"])
def test_a_goproxy_without_a_proxy_url_is_bad_input(setting: str) -> None:
    proc = e2e_dra("resolve", "1.36", env=_build_source_env(setting))
    one_line(proc, 3, f"GOPROXY={setting!r}")


@pytest.mark.parametrize("setting", ["gofoo", "garbage", "go1.x"])
def test_a_bad_gotoolchain_is_bad_input_naming_it(setting: str, proxy_tree: ProxyTree) -> None:
    for env in (
        {"E2E_DRA_RELEASE_SOURCE": "build", "GOPROXY": "", "GOTOOLCHAIN": setting},
        {**_build_source_env(proxy_tree.url), "GOTOOLCHAIN": setting},
    ):
        proc = e2e_dra("resolve", "1.36", env=env)
        one_line(proc, 3, f"GOTOOLCHAIN={setting!r}")


def test_a_module_proxy_failure_names_goproxy_not_the_release_url(
    release_server: ReleaseServer,
) -> None:
    release_server.fail("k8s.io/kubernetes/@v/list", Fault(redirect_to_self=True, times=1000))
    proc = e2e_dra("resolve", "1.36", env=_build_source_env(release_server.url))
    line = one_line(proc, 5, "redirects in a loop", "GOPROXY")
    assert "release URL" not in line and "KUBERNETES_RELEASE_URL" not in line


# -- issue 20: versions are what the marker says, or refused --------------------------------------


@pytest.mark.parametrize(
    ("marker", "spec", "build"),
    [
        ("latest.txt", "latest", "v1.38.0-alpha.0.812+0123abcd"),
        ("stable.txt", "stable", "v1.36.5-3+abcdef0"),
        ("stable-1.38.txt", "1.38", "v1.38.0-beta.0.12+0123abcd"),
    ],
)
def test_a_marker_naming_a_ci_build_is_resolved_to_that_build(
    release_server: ReleaseServer, tmp_path: Path, marker: str, spec: str, build: str
) -> None:
    release_server.put(marker, build + "\n")
    release_server.add_release(build)
    resolved = e2e_dra("resolve", spec, "--base-url", release_server.url)
    assert resolved.returncode == 0, resolved.stderr
    assert resolved.stdout.strip() == build
    downloaded = e2e_dra("download", spec, "--base-url", release_server.url, cache=tmp_path / "c")
    assert downloaded.returncode == 0, downloaded.stderr
    assert downloaded.stdout.splitlines()[-1] == str(tmp_path / "c" / build)


def test_a_marker_naming_a_dirty_build_is_refused(release_server: ReleaseServer) -> None:
    release_server.put("latest.txt", "v1.38.0-alpha.0.812+0123abcd-dirty\n")
    proc = e2e_dra("resolve", "latest", "--base-url", release_server.url)
    one_line(proc, 5, f"{release_server.url}/latest.txt", "v1.38.0-alpha.0.812+0123abcd-dirty")


@pytest.mark.parametrize(
    "version", ["v01.37.2", "v1.037.2", "v1.37.02", "v1.37.0-rc.01", "v1.37.0-rc.1.012+abcdef0"]
)
def test_a_version_with_leading_zeros_is_bad_input(version: str) -> None:
    proc = e2e_dra("previous-minor", version)
    one_line(proc, 3, repr(version), "leading zero")


def test_a_minor_with_leading_zeros_is_bad_input() -> None:
    proc = e2e_dra("resolve", "1.036", "--base-url", "http://127.0.0.1:9")
    one_line(proc, 3, "'1.036'")


# -- issue 20: the kind and the setting named are the ones that apply ------------------------------


@pytest.mark.parametrize("flag", ["--bin-dir", "--source-dir"])
def test_a_missing_directory_flag_is_bad_input_naming_the_flag(
    release_server: ReleaseServer, tmp_path: Path, flag: str
) -> None:
    missing = tmp_path / "nowhere"
    proc = e2e_dra("versions", flag, str(missing), "--base-url", release_server.url)
    line = one_line(proc, 3, f"{flag} {missing}", "is not a directory")
    assert "KUBERNETES_" not in line


def test_a_bin_dir_flag_without_kube_apiserver_names_the_flag(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    proc = e2e_dra("versions", "--bin-dir", str(tmp_path), "--base-url", release_server.url)
    line = one_line(proc, 3, f"--bin-dir {tmp_path}", "no kube-apiserver", "make WHAT=")
    assert "KUBERNETES_SERVER_BIN_DIR" not in line


@pytest.mark.parametrize("variable", ["KUBERNETES_SERVER_BIN_DIR", "KUBERNETES_SOURCE_DIR"])
def test_a_missing_directory_variable_is_bad_input_with_a_next_step(
    release_server: ReleaseServer, tmp_path: Path, variable: str
) -> None:
    missing = tmp_path / "nowhere"
    proc = e2e_dra("versions", "--base-url", release_server.url, env={variable: str(missing)})
    one_line(proc, 3, f"{variable}={missing}", "is not a directory", "unset it")


# -- issue 20: mirrors -----------------------------------------------------------------------------


def test_a_base_url_with_a_query_keeps_it_on_every_request(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    release_server.add_release("v1.36.5")
    base = release_server.url + "?token=s3cret"
    proc = e2e_dra("download", "1.36", "--base-url", base, cache=tmp_path / "c")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(tmp_path / "c" / "v1.36.5")
    assert release_server.targets
    assert all(target.endswith("?token=s3cret") for target in release_server.targets)
    assert f"/release/v1.36.5/{TARBALL}.sha512?token=s3cret" in release_server.targets


def test_a_base_url_with_a_fragment_is_bad_input(release_server: ReleaseServer) -> None:
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url + "#top")
    one_line(proc, 3, "--base-url", "#top")
    assert release_server.targets == []


def test_retry_after_is_honoured(release_server: ReleaseServer) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    busy = Fault(status=429, headers={"Retry-After": "2"})
    release_server.fail("stable-1.36.txt", busy)
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url)
    assert proc.returncode == 0, proc.stderr
    (first, asked), (second, again) = release_server.request_times
    assert first == second
    assert again - asked >= 1.9


def test_a_retry_after_past_the_deadline_fails_at_once(release_server: ReleaseServer) -> None:
    release_server.add_release("v1.36.5")
    later = Fault(status=503, headers={"Retry-After": "30"}, times=10)
    release_server.fail(f"v1.36.5/{TARBALL}.sha512", later)
    started = time.monotonic()
    proc = e2e_dra("download", "v1.36.5", "--base-url", release_server.url, "--deadline", "5")
    one_line(proc, 5, "HTTP 503", "in 30s (Retry-After), after the deadline", "--deadline")
    assert time.monotonic() - started < 5
    assert release_server.count(f"{TARBALL}.sha512") == 1


@pytest.mark.parametrize(("status", "tries"), [(425, 2), (403, 1), (410, 1)])
def test_only_statuses_that_say_later_are_retried(
    release_server: ReleaseServer, status: int, tries: int
) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    release_server.fail("stable-1.36.txt", Fault(status=status))
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url)
    assert release_server.count("stable-1.36.txt") == tries
    assert proc.returncode == (0 if tries > 1 else 5), proc.stderr


def test_a_cache_home_with_a_newline_is_refused_naming_it(release_server: ReleaseServer) -> None:
    proc = e2e_dra(
        "download", "v1.36.5", "--base-url", release_server.url, env={"XDG_CACHE_HOME": "/tmp/a\nb"}
    )
    one_line(proc, 3, "XDG_CACHE_HOME='/tmp/a\\nb'", "control character")
    assert release_server.requests == []  # refused before anything was asked


def test_a_part_nobody_asked_for_is_said_as_such_not_as_a_refusal(
    release_server: ReleaseServer,
) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    release_server.fail("stable-1.36.txt", Fault(status=206))
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url)
    line = one_line(proc, 5, "HTTP 206", "a part of the file that was not asked for")
    assert "refuses" not in line


def test_a_tarball_that_fails_its_content_checks_is_discarded(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    broken = [m for m in release_members() if not m.name.endswith("/kubelet")]
    release_server.add_release("v1.36.5", broken)
    cache = tmp_path / "c"
    args = ("download", "v1.36.5", "--base-url", release_server.url)
    failed = e2e_dra(*args, cache=cache)
    one_line(failed, 5, f"{release_server.url}/v1.36.5/{TARBALL}", "lacks kubelet", "removed")
    assert not (cache / ".partial" / "v1.36.5").exists()

    release_server.add_release("v1.36.5")  # the mirror is fixed
    fixed = e2e_dra(*args, cache=cache)
    assert fixed.returncode == 0, fixed.stderr
    assert release_server.count(TARBALL) == 2


@pytest.mark.parametrize(
    ("member", "named"),
    [
        (Member("kubernetes/server/bin/kubelet", directory=True), "is a directory"),
        (Member("kubernetes/server/bin/kubelet", link="kube-proxy"), "a symbolic link"),
    ],
)
def test_a_member_that_is_no_file_is_called_what_it_is(
    release_server: ReleaseServer, tmp_path: Path, member: Member, named: str
) -> None:
    members = [m for m in release_members() if not m.name.endswith("/kubelet")]
    release_server.add_release("v1.36.5", [*members, member])
    proc = e2e_dra("download", "v1.36.5", "--base-url", release_server.url, cache=tmp_path / "c")
    line = one_line(proc, 5, f"{release_server.url}/v1.36.5/{TARBALL}", named)
    assert ("link" in line) == ("link" in named)


# -- issue 20: cache paths -------------------------------------------------------------------------


def test_an_empty_cache_dir_flag_is_bad_input(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5")
    here = tmp_path / "cwd"
    here.mkdir()
    proc = e2e_dra(
        "download", "v1.36.5", "--base-url", release_server.url, "--cache-dir", "", cwd=here
    )
    one_line(proc, 3, "--cache-dir ''")
    assert list(here.iterdir()) == []


def test_a_cache_dir_flag_expands_the_home_directory(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5")
    here = tmp_path / "cwd"
    here.mkdir()
    proc = e2e_dra(
        "download",
        "v1.36.5",
        "--base-url",
        release_server.url,
        "--cache-dir",
        "~/releases",
        cwd=here,
        env={"HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(tmp_path / "releases" / "v1.36.5")
    assert list(here.iterdir()) == []


def test_a_cache_path_with_a_newline_is_bad_input(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5")
    odd = str(tmp_path / "a\nb")
    args = ("download", "v1.36.5", "--base-url", release_server.url)
    by_flag = e2e_dra(*args, "--cache-dir", odd)
    one_line(by_flag, 3, "--cache-dir")
    by_variable = e2e_dra(*args, env={"KUBERNETES_SERVER_CACHE_DIR": odd})
    one_line(by_variable, 3, "KUBERNETES_SERVER_CACHE_DIR")
    assert not (tmp_path / "a\nb").exists()


# -- issue 20: durations, names and URLs -----------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("E2E_DRA_SLICE_REMOVAL_TIMEOUT", "-5"),
        ("E2E_DRA_SLICE_REMOVAL_TIMEOUT", "nan"),
        ("E2E_DRA_SLICE_REMOVAL_TIMEOUT", "inf"),
        ("E2E_DRA_PROGRESS_EVERY", "-1s"),
        ("E2E_DRA_DOWNLOAD_DEADLINE", "1h-5m"),
    ],
)
def test_a_negative_or_endless_duration_is_bad_input(variable: str, value: str) -> None:
    proc = e2e_dra("resolve", "1.36", "--base-url", "http://127.0.0.1:9", env={variable: value})
    one_line(proc, 3, f"{variable}={value!r}")


def test_durations_take_go_forms_and_plain_numbers(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5")
    proc = e2e_dra(
        "download",
        "v1.36.5",
        "--base-url",
        release_server.url,
        "--deadline",
        "1m30s",
        cache=tmp_path / "c",
        env={
            "E2E_DRA_PROGRESS_EVERY": "1e9",
            "E2E_DRA_SLICE_REMOVAL_TIMEOUT": "2m0.5s",
            "E2E_DRA_DOWNLOAD_DEADLINE": "1h2m3.5s",
        },
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("flag", ["--os", "--arch"])
def test_an_empty_platform_flag_is_bad_input(flag: str, release_server: ReleaseServer) -> None:
    proc = e2e_dra("download", "v1.36.5", "--base-url", release_server.url, flag, "")
    one_line(proc, 3, f"{flag} ''")
    assert release_server.targets == []


@pytest.mark.parametrize("url", ["http://a b/release", "http://host/rel ease", "http://a\tb/"])
def test_a_url_with_invalid_characters_is_refused_at_once(url: str) -> None:
    started = time.monotonic()
    proc = e2e_dra("resolve", "1.36", "--base-url", url)
    one_line(proc, 3, "--base-url")
    by_variable = e2e_dra("resolve", "1.36", env={"KUBERNETES_RELEASE_URL": url})
    one_line(by_variable, 3, "KUBERNETES_RELEASE_URL")
    assert time.monotonic() - started < 5


# -- the sweep (tests/sweep/bad_inputs.py): what it found ------------------------------------------


@pytest.mark.parametrize("verify", [False, True])
def test_a_cached_binary_replaced_by_a_directory_is_damage_not_a_machine_error(
    release_server: ReleaseServer, tmp_path: Path, verify: bool
) -> None:
    cache = tmp_path / "c"
    args, bin_dir = _downloaded(release_server, cache)
    kubelet = bin_dir / "kubelet"
    os.chmod(kubelet, 0o755)
    kubelet.unlink()
    kubelet.mkdir()  # 4096 bytes, as the fake kubelet: only the kind tells them apart

    again = e2e_dra(*args, *(["--verify"] if verify else []), cache=cache)

    assert again.returncode == 0, again.stderr
    assert "is damaged (kubelet is not a regular file)" in again.stderr
    assert kubelet.is_file() and kubelet.stat().st_size == 4096


@pytest.mark.parametrize(
    ("setting", "args"),
    [
        ("KUBERNETES_RELEASE_URL", ("resolve", "1.36")),
        ("--base-url", ("resolve", "1.36", "--base-url")),
        ("GOPROXY", ("resolve", "1.36")),
        ("--proxy", ("build", "v1.36.5", "--proxy")),
    ],
)
def test_a_url_with_bytes_that_are_not_utf8_is_bad_input(
    setting: str, args: tuple[str, ...], tmp_path: Path
) -> None:
    url = b"http://127.0.0.1:9/\xff"
    env = {"E2E_DRA_RELEASE_SOURCE": "build"} if "build" in args or "GOPROXY" in setting else {}
    argv: list[str | bytes] = [*args]
    if setting.startswith("--"):
        argv.append(url)
    else:
        env[setting] = url  # type: ignore[assignment]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "E2E_DRA", "GO"))}
    proc = subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", *argv],
        capture_output=True,
        text=True,
        errors="backslashreplace",
        env={**base, "E2E_DRA_CACHE_DIR": str(tmp_path), **env},
        timeout=60,
        check=False,
    )
    one_line(proc, 3, setting, "UTF-8")


@pytest.mark.parametrize(
    ("variable", "args"),
    [
        ("E2E_DRA_DOWNLOAD_DEADLINE", ("resolve", "1.36")),
        ("KUBERNETES_SERVER_CACHE_DIR", ("download", "v1.36.5")),
        ("KUBERNETES_SERVER_BIN_DIR", ("versions",)),
        ("KUBERNETES_RELEASE_URL", ("resolve", "1.36")),
    ],
)
def test_a_huge_value_is_named_in_a_short_line(
    variable: str, args: tuple[str, ...], tmp_path: Path
) -> None:
    huge = "/tmp/" + "9" * 100_000 if "DIR" in variable else "9" * 100_000
    if "URL" in variable:
        huge = "http://127.0.0.1:9/" + "a" * 100_000
    env = {variable: huge}
    if variable != "KUBERNETES_RELEASE_URL":
        env["KUBERNETES_RELEASE_URL"] = "http://127.0.0.1:9/release"
    proc = e2e_dra(*args, cache=tmp_path / "c", env=env)
    assert proc.returncode == 3, proc.stderr[-500:]
    line = one_line(proc, 3, variable)
    assert len(line) < 1000


def test_a_huge_unknown_option_is_a_short_usage_line() -> None:
    proc = e2e_dra("resolve", "1.36", "--" + "x" * 100_000)
    assert proc.returncode == 2
    assert len(proc.stderr) < 1100
    assert "unrecognized arguments" in proc.stderr


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (b"KUBE_GIT_VERSION='v01.37.2'\n", "leading zero"),
        (b"KUBE_GIT_VERSION='v1.37.2\xff'\n", "not a Kubernetes version"),
    ],
)
def test_a_version_file_naming_no_version_names_the_file(
    content: bytes, named: str, release_server: ReleaseServer, tmp_path: Path
) -> None:
    version_file = tmp_path / "version"
    version_file.write_bytes(content)
    proc = e2e_dra(
        "versions",
        "--base-url",
        release_server.url,
        env={"KUBE_GIT_VERSION_FILE": str(version_file)},
    )
    one_line(proc, 3, f"KUBE_GIT_VERSION_FILE {version_file}", named)


@pytest.mark.parametrize("status", [401, 403, 410, 418])
def test_a_refusing_mirror_says_what_to_check(release_server: ReleaseServer, status: int) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    release_server.fail("stable-1.36.txt", Fault(status=status))
    proc = e2e_dra("resolve", "1.36", "--base-url", release_server.url)
    one_line(proc, 5, f"HTTP {status}", "stable-1.36.txt", "KUBERNETES_RELEASE_URL or --base-url")


@pytest.mark.parametrize(
    "go_mod", [b"<!DOCTYPE html><html></html>", b"", b"module k8s.io/kubernetes\n\ngo banana\n"]
)
def test_a_go_mod_that_is_not_one_is_a_module_proxy_failure(
    proxy_tree: ProxyTree, tmp_path: Path, go_mod: bytes
) -> None:
    mod = "/k8s.io/kubernetes/@v/v1.36.5.mod"
    proxy_tree.answers[mod] = (200, go_mod, {})
    proc = e2e_dra("build", "v1.36.5", "--proxy", proxy_tree.url, cache=tmp_path / "c")
    one_line(proc, 5, proxy_tree.url + mod, "GOPROXY")


def test_a_module_zip_the_proxy_does_not_serve_is_a_module_proxy_failure(
    proxy_tree: ProxyTree, tmp_path: Path
) -> None:
    proc = e2e_dra(
        "build",
        "v1.36.5",
        "--proxy",
        proxy_tree.url,
        cache=tmp_path / "c",
        env={"GOTOOLCHAIN": "local", "GOFLAGS": ""},
        timeout=120,
    )
    one_line(proc, 5, "k8s.io/kubernetes@v1.36.5", "GOPROXY")


def _says_what_to_do(line: str) -> bool:
    return any(word in line for word in ("give", "check", "point", "unset"))


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("resolve", "1.36"), {"E2E_DRA_DOWNLOAD_DEADLINE": "-1"}),
        (("resolve", "1.36"), {"E2E_DRA_PROGRESS_EVERY": "1e10"}),
        (("previous-minor", "v1.0.0"), {}),
        (("versions",), {"KUBE_GIT_VERSION_FILE": "/nonexistent/version"}),
        (("versions",), {"KUBE_GIT_VERSION_FILE": "/dev/zero"}),
    ],
)
def test_a_refused_value_says_what_to_do(
    args: tuple[str, ...], env: dict[str, str], release_server: ReleaseServer
) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    proc = e2e_dra(*args, env={"KUBERNETES_RELEASE_URL": release_server.url, **env})
    line = one_line(proc, 3)
    assert _says_what_to_do(line), line


@pytest.mark.parametrize(
    "script", ["echo garbage", "echo oops >&2; exit 1", "head -c 5000000 /dev/zero"]
)
def test_a_bin_dir_whose_apiserver_gives_no_version_says_what_to_do(
    release_server: ReleaseServer, tmp_path: Path, script: str
) -> None:
    bin_dir = _bin_dir_whose_apiserver_runs(tmp_path, script)
    proc = e2e_dra(
        "versions",
        "--base-url",
        release_server.url,
        env={"KUBERNETES_SERVER_BIN_DIR": str(bin_dir)},
    )
    line = one_line(proc, 3, "kube-apiserver")
    assert _says_what_to_do(line), line


def test_a_module_proxy_listing_no_stable_release_says_what_to_check(
    proxy_tree: ProxyTree,
) -> None:
    proxy_tree.answers["/k8s.io/kubernetes/@v/list"] = (200, b"", {})
    proc = e2e_dra("resolve", "stable", env=_build_source_env(proxy_tree.url))
    one_line(proc, 5, "lists no stable release", "GOPROXY")


_INTERRUPTED_IMPORT = """\
import os, signal, sys, time

class Interrupting:
    def find_spec(self, name, path=None, target=None):
        if name == "e2e_dra.commands.build":
            if sys.argv[1] == "SIGTERM":
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupting())
from e2e_dra.cli import main
sys.exit(main(["previous-minor", "v1.36.3"]))
"""


@pytest.mark.parametrize(("signal_name", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_the_program_starts_is_one_line(signal_name: str, status: int) -> None:
    """Ctrl-C or SIGTERM while the commands are still being imported (the first tenths of a
    second): one line and the status of its kind, as later, not a traceback of importlib."""
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, signal_name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    one_line(proc, status, "interrupted" if status == 130 else "terminated")
