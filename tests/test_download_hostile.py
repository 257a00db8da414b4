"""Downloads and the release cache under hostile conditions: mirrors that crawl, lock holders that
are paused, files planted in the cache, credentials in URLs, text in the wrong encoding.

Everything runs against the loopback release tree (``release_server.py``) and real processes; the
only times asserted are generous bounds that prove a command ended (3x its deadline).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from release_server import (
    CLUSTER_BINARIES,
    Fault,
    Member,
    ReleaseServer,
    damaged_tarball,
    fake_binary,
    release_members,
)

from e2e_dra._cache import CacheEntry
from e2e_dra.errors import LocalError, ReleaseError
from e2e_dra.hostkit import redact
from e2e_dra.releases import Budget
from e2e_dra.releases._download import DownloadSource, host_platform
from e2e_dra.releases._http import DeadlineExceeded
from e2e_dra.releases._select import _answers

TARBALL = "kubernetes-server-linux-amd64.tar.gz"
ROOT = Path(__file__).resolve().parents[1]


def source(server: ReleaseServer, cache: Path, deadline: float = 0) -> DownloadSource:
    budget = Budget(deadline=deadline, min_speed=0)
    return DownloadSource(
        base_url=server.url, cache_dir=cache, os_="linux", arch="amd64", budget=budget
    )


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, str]:
    """``e2e-dra ARGS`` in a subprocess: its exit status and stderr."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "E2E_DRA"))}
    base.update({"E2E_DRA_RELEASE_SOURCE": "download", "CI": "true", **(env or {})})
    proc = subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", *args],
        capture_output=True,
        text=True,
        env=base,
        timeout=timeout,
        check=False,
    )
    return proc.returncode, proc.stderr


def error_line(stderr: str) -> str:
    """The one error line, last on stderr, and no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("e2e-dra: error:")]
    assert len(errors) == 1, stderr
    assert stderr.splitlines()[-1] == errors[0]
    return errors[0]


def nothing_served(cache: Path) -> None:
    """No entry marked complete, no temp dir."""
    if cache.exists():
        assert [
            p.name for p in cache.iterdir() if not p.name.startswith((".locks", ".partial"))
        ] == []


# -- a deadline is a wall-clock deadline -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "spec"),
    [
        ("stable-1.36.txt", "1.36"),
        (f"v1.36.5/{TARBALL}.sha512", "v1.36.5"),
        (f"v1.36.5/{TARBALL}", "v1.36.5"),
    ],
    ids=["marker", "sha512", "tarball"],
)
def test_a_mirror_that_sends_a_byte_at_a_time_ends_at_the_deadline(
    release_server: ReleaseServer, tmp_path: Path, path: str, spec: str
) -> None:
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    release_server.add_release("v1.36.5")
    release_server.fail(path, Fault(drip=0.2, times=100))  # headers too: no read ever waits long
    fetcher = source(release_server, tmp_path, deadline=2)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="deadline") as caught:
        fetcher.fetch(fetcher.resolve(spec) if spec == "1.36" else spec)
    assert time.monotonic() - started < 6  # it ended: 3x the deadline
    assert Path(path).name in str(caught.value)
    nothing_served(tmp_path)


def test_the_cli_deadline_holds_against_a_dripping_checksum(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5")
    release_server.fail(f"v1.36.5/{TARBALL}.sha512", Fault(drip=0.3, times=100))
    status, stderr = cli(
        "download", "v1.36.5", "--deadline", "3", "--base-url", release_server.url,
        "--cache-dir", str(tmp_path), timeout=30,
    )  # fmt: skip
    line = error_line(stderr)
    assert status == 5
    assert f"{TARBALL}.sha512" in line and "deadline" in line


def test_the_reachability_probe_gives_up_on_a_dripping_server(
    release_server: ReleaseServer,
) -> None:
    release_server.put("stable.txt", "v1.36.5\n")
    release_server.fail("stable.txt", Fault(drip=0.2, times=100))
    started = time.monotonic()
    assert _answers.__wrapped__(f"{release_server.url}/stable.txt") is False  # type: ignore[attr-defined]
    assert time.monotonic() - started < 9  # 3x its 3 s


# -- the cache lock: no wait without end -----------------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from e2e_dra._cache import CacheEntry
with CacheEntry(Path(sys.argv[1]), sys.argv[2]).lock():
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another e2e-dra process holding the lock of ``<tmp>/cache/v1.36.5``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "cache"), "v1.36.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield holder
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()


def test_a_stopped_lock_holder_is_named_and_not_waited_for(
    release_server: ReleaseServer, tmp_path: Path, lock_holder: subprocess.Popen[str]
) -> None:
    release_server.add_release("v1.36.5")
    lock_holder.send_signal(signal.SIGSTOP)
    status, stderr = cli(
        "download", "v1.36.5", "--base-url", release_server.url,
        "--cache-dir", str(tmp_path / "cache"), timeout=60,
    )  # fmt: skip
    line = error_line(stderr)
    assert status == 6
    assert f"process {lock_holder.pid}" in line
    assert "stopped" in line and f"kill -CONT {lock_holder.pid}" in line
    nothing_served(tmp_path / "cache")


def test_a_lock_held_by_a_running_process_is_waited_for_until_the_deadline(
    release_server: ReleaseServer, tmp_path: Path, lock_holder: subprocess.Popen[str]
) -> None:
    release_server.add_release("v1.36.5")
    started = time.monotonic()
    with pytest.raises(LocalError) as caught:
        source(release_server, tmp_path / "cache", deadline=2).fetch("v1.36.5")
    assert time.monotonic() - started < 6
    assert f"process {lock_holder.pid}" in str(caught.value)
    assert f"kill {lock_holder.pid}" in str(caught.value)


def test_a_lock_released_while_waiting_is_taken(tmp_path: Path) -> None:
    entry = CacheEntry(tmp_path, "k", lock_wait=30)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.replace("600", "1"), str(tmp_path), "k"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    with entry.lock():
        assert holder.wait(timeout=10) == 0
    assert (tmp_path / ".locks" / "k.lock").read_text().strip() == str(os.getpid())


# -- nothing planted in the cache is followed ------------------------------------------------------


def _served_as_published(bin_dir: Path) -> None:
    for name in CLUSTER_BINARIES:
        assert (bin_dir / name).read_bytes() == fake_binary(name)


@pytest.mark.parametrize("planted", ["part", "partial-dir", "partial-root", "lock-file", "stamp"])
def test_a_link_planted_in_the_cache_is_never_written_through(
    release_server: ReleaseServer, tmp_path: Path, planted: str
) -> None:
    release_server.add_release("v1.36.5")
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"precious\n")
    partial = cache / ".partial" / "v1.36.5"
    link = {
        "part": partial / f"{TARBALL}.part",
        "partial-dir": partial,
        "partial-root": cache / ".partial",
        "lock-file": cache / ".locks" / "v1.36.5.lock",
        "stamp": partial / f"{TARBALL}.part.verified.json",
    }[planted]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim if planted in {"part", "lock-file", "stamp"} else outside)

    _served_as_published(source(release_server, cache).fetch("v1.36.5").bin_dir)

    assert victim.read_bytes() == b"precious\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert not link.is_symlink()


def test_an_entry_that_is_a_link_is_not_served(release_server: ReleaseServer, tmp_path: Path):
    release_server.add_release("v1.36.5")
    elsewhere = tmp_path / "elsewhere"
    _served_as_published(source(release_server, elsewhere).fetch("v1.36.5").bin_dir)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "v1.36.5").symlink_to(elsewhere / "v1.36.5")

    bin_dir = source(release_server, cache).fetch("v1.36.5").bin_dir

    assert not bin_dir.is_symlink()
    assert release_server.count(TARBALL) == 2  # downloaded into this cache, not borrowed


# -- nothing resumed that is not re-verified -------------------------------------------------------


@pytest.mark.parametrize("verify", [False, True])
def test_a_verified_partial_changed_since_is_hashed_again_and_fetched_afresh(
    release_server: ReleaseServer, tmp_path: Path, verify: bool
) -> None:
    published = release_server.add_release("v1.36.5")
    partial = tmp_path / ".partial" / "v1.36.5"
    partial.mkdir(parents=True)
    part = partial / f"{TARBALL}.part"
    part.write_bytes(damaged_tarball())
    info = part.stat()
    digest = hashlib.sha512(published).hexdigest()
    stamp = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "digests": {"sha512": digest}}
    (partial / f"{TARBALL}.part.verified.json").write_text(json.dumps(stamp))

    _served_as_published(source(release_server, tmp_path).fetch("v1.36.5", verify=verify).bin_dir)
    assert release_server.count(TARBALL) == 1


def test_a_resumed_partial_with_a_changed_byte_is_discarded_and_fetched_afresh(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    published = release_server.add_release("v1.36.5")
    partial = tmp_path / ".partial" / "v1.36.5"
    partial.mkdir(parents=True)
    damaged = bytearray(published[:10_000])
    damaged[5000] ^= 0xFF
    (partial / f"{TARBALL}.part").write_bytes(bytes(damaged))

    _served_as_published(source(release_server, tmp_path).fetch("v1.36.5").bin_dir)

    ranges = [headers.get("range") for headers in release_server.headers_of(TARBALL)]
    assert ranges == ["bytes=10000-", None]  # resumed, judged whole, then fetched afresh


# -- binaries are sanity-checked before an entry counts as complete --------------------------------


def _tarball(binaries: dict[str, bytes], mode: int = 0o755) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in binaries.items():
            info = tarfile.TarInfo(f"kubernetes/server/bin/{name}")
            info.size, info.mode = len(data), mode if name == "kubelet" else 0o755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _publish(server: ReleaseServer, tarball: bytes) -> None:
    server.put(f"v1.36.5/{TARBALL}", tarball)
    server.put(f"v1.36.5/{TARBALL}.sha512", hashlib.sha512(tarball).hexdigest())


@pytest.mark.parametrize(
    ("kubelet", "mode", "said"),
    [
        (b"", 0o755, "kubelet is empty"),
        (fake_binary("kubelet"), 0o644, "kubelet is not executable"),
    ],
    ids=["empty", "not-executable"],
)
def test_a_broken_binary_with_a_matching_checksum_is_refused_and_nothing_cached(
    release_server: ReleaseServer, tmp_path: Path, kubelet: bytes, mode: int, said: str
) -> None:
    binaries = {name: fake_binary(name) for name in CLUSTER_BINARIES} | {"kubelet": kubelet}
    _publish(release_server, _tarball(binaries, mode))
    status, stderr = cli(
        "download", "v1.36.5", "--base-url", release_server.url, "--cache-dir", str(tmp_path)
    )
    line = error_line(stderr)
    assert status == 5
    assert said in line and TARBALL in line
    nothing_served(tmp_path)


def _native_source(server: ReleaseServer, cache: Path) -> DownloadSource:
    os_, arch = host_platform()
    return DownloadSource(base_url=server.url, cache_dir=cache, os_=os_, arch=arch)


def _scripts(version: str) -> dict[str, bytes]:
    return {name: f"#!/bin/sh\necho 'Kubernetes {version}'\n".encode() for name in CLUSTER_BINARIES}


def test_binaries_that_run_must_name_the_release(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    os_, arch = host_platform()
    name = f"kubernetes-server-{os_}-{arch}.tar.gz"
    wrong = _tarball(_scripts("v1.35.0"))
    release_server.put(f"v1.36.5/{name}", wrong)
    release_server.put(f"v1.36.5/{name}.sha512", hashlib.sha512(wrong).hexdigest())
    with pytest.raises(ReleaseError, match=r"v1\.35\.0.*not v1\.36\.5"):
        _native_source(release_server, tmp_path).fetch("v1.36.5")
    nothing_served(tmp_path)

    right = _tarball(_scripts("v1.36.5"))
    release_server.put(f"v1.36.5/{name}", right)
    release_server.put(f"v1.36.5/{name}.sha512", hashlib.sha512(right).hexdigest())
    assert (_native_source(release_server, tmp_path).fetch("v1.36.5").bin_dir / "kubelet").is_file()


# -- credentials are never printed -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:p@ss@host/r?token=abc", "https://***@host/r?token=***"),
        (
            "get 'http://TOKEN@h:8/x/y?sig=1&e=2' failed",
            "get 'http://***@h:8/x/y?sig=***&e=***' failed",
        ),
        ("http://h/release?s3cr3t", "http://h/release?***"),
        ("http://h/release and no secret", "http://h/release and no secret"),
    ],
)
def test_redact_masks_user_info_and_query_values(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redact(shown) == shown


def test_credentials_in_the_release_url_are_never_printed_or_recorded(
    release_server: ReleaseServer, tmp_path: Path
) -> None:
    release_server.add_release("v1.36.5")
    secret_url = release_server.url.replace("http://", "http://user:s3cr3t@") + "?token=t0k3n"
    env = {"KUBERNETES_RELEASE_URL": secret_url, "KUBERNETES_SERVER_CACHE_DIR": str(tmp_path)}
    for args in (["download", "v1.36.9"], ["download", "1.36"], ["resolve", "1.99"]):
        status, stderr = cli(*args, env=env)
        line = error_line(stderr)
        assert status in {4, 5}, stderr
        assert "s3cr3t" not in stderr and "t0k3n" not in stderr
        assert "***@127.0.0.1" in line and "token=***" in line
    status, stderr = cli("download", "v1.36.5", env=env)
    assert status == 0, stderr
    marker = (tmp_path / "v1.36.5" / ".e2e-dra-complete.json").read_text()
    assert "s3cr3t" not in marker and "t0k3n" not in marker


# -- text in another encoding is one line ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "headers", "said"),
    [
        ("v1.36.5\n".encode("utf-16"), {}, "not UTF-8"),
        ("v1.36.5\n".encode("utf-32"), {}, "not UTF-8"),
        (b"v1.36.5\xff\n", {}, "not UTF-8"),
        (None, {"Content-Type": "text/plain; charset=rot13"}, "not a Kubernetes version"),
        (None, {"Content-Type": "text/plain; charset=utf-32"}, "not a Kubernetes version"),
    ],
    ids=["utf-16", "utf-32", "latin-1", "charset-rot13", "charset-utf-32"],
)
def test_a_marker_in_another_encoding_is_one_error_line(
    release_server: ReleaseServer,
    tmp_path: Path,
    body: bytes | None,
    headers: dict[str, str],
    said: str,
) -> None:
    release_server.put("stable-1.36.txt", body or b"v1.36.5\n")
    if headers:  # a 200 with the server's own body ("injected failure") and this charset
        release_server.fail("stable-1.36.txt", Fault(status=200, headers=headers))
    status, stderr = cli(
        "download", "1.36", "--base-url", release_server.url, "--cache-dir", str(tmp_path)
    )
    line = error_line(stderr)
    assert status == 5
    assert "stable-1.36.txt" in line and said in line


def test_a_sidecar_in_utf16_is_one_error_line(release_server: ReleaseServer, tmp_path: Path):
    tarball = release_server.add_release("v1.36.5")
    release_server.put(
        f"v1.36.5/{TARBALL}.sha512", hashlib.sha512(tarball).hexdigest().encode("utf-16")
    )
    with pytest.raises(ReleaseError, match=r"\.sha512 is not UTF-8 text"):
        source(release_server, tmp_path).fetch("v1.36.5")
    nothing_served(tmp_path)


def test_members_are_as_the_release_server_builds_them() -> None:
    """The loopback tree's binaries are 0755 bytes no machine runs: they pass the checks that
    apply to them (not empty, executable) and are never asked their --version."""
    for member in release_members():
        if Path(member.name).name in CLUSTER_BINARIES:
            assert member.data and not member.data.startswith((b"\x7fELF", b"#!"))
    assert isinstance(Member("x"), Member)


def test_without_a_deadline_each_small_request_still_ends(
    release_server: ReleaseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--deadline 0 means no overall deadline, not a request that may last for ever: one try of
    a small file ends at SMALL_FILE_WAIT (shortened here), and is not tried again."""
    import e2e_dra.releases._http as http

    monkeypatch.setattr(http, "SMALL_FILE_WAIT", 1.5)
    release_server.put("stable-1.36.txt", "v1.36.5\n")
    release_server.fail("stable-1.36.txt", Fault(drip=0.2, times=100))
    started = time.monotonic()
    with pytest.raises(ReleaseError, match=r"stable-1\.36\.txt failed after 1 attempt.*too slowly"):
        source(release_server, tmp_path, deadline=0).resolve("1.36")
    assert time.monotonic() - started < 5
