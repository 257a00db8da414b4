"""The cache entry contract: complete or absent, filled once, even by racing processes."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from e2e_dra._cache import MARKER, CacheEntry


def test_fill_populates_once_and_records_metadata(tmp_path: Path) -> None:
    calls = []

    def populate(target: Path) -> dict:
        calls.append(target)
        (target / "kube-apiserver").write_text("binary")
        return {"version": "v1.36.5"}

    entry = CacheEntry(tmp_path, "v1.36.5")
    assert not entry.is_complete()
    assert entry.fill(populate) == tmp_path / "v1.36.5"
    assert entry.fill(populate) == tmp_path / "v1.36.5"
    assert len(calls) == 1
    assert calls[0] != entry.path  # filled elsewhere, renamed into place
    assert (entry.path / "kube-apiserver").read_text() == "binary"
    assert entry.metadata()["version"] == "v1.36.5"


def test_failed_fill_leaves_nothing_that_counts_as_a_hit(tmp_path: Path) -> None:
    def broken(target: Path) -> None:
        (target / "kube-apiserver").write_text("half")
        raise RuntimeError("network went away")

    entry = CacheEntry(tmp_path, "v1.36.5")
    with pytest.raises(RuntimeError):
        entry.fill(broken)
    assert not entry.is_complete()
    assert not entry.path.exists()
    assert [p.name for p in tmp_path.iterdir()] == [".locks"]


def test_incomplete_leftovers_are_replaced(tmp_path: Path) -> None:
    # What upstream's layout (or a crash mid-rename on another tool) could leave behind.
    (tmp_path / "v1.36.5").mkdir()
    (tmp_path / "v1.36.5" / "kube-apiserver").write_text("stale")
    os.chmod(tmp_path / "v1.36.5" / "kube-apiserver", 0o555)
    (tmp_path / ".tmp-v1.36.5-deadbeef").mkdir()
    entry = CacheEntry(tmp_path, "v1.36.5")
    assert not entry.is_complete()
    entry.fill(lambda target: (target / "kube-apiserver").write_text("fresh") and None)
    assert (entry.path / "kube-apiserver").read_text() == "fresh"
    assert not (tmp_path / ".tmp-v1.36.5-deadbeef").exists()
    assert (entry.path / MARKER).is_file()


@pytest.mark.parametrize("key", ["", ".", "..", "a/b"])
def test_bad_keys_are_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="invalid cache key"):
        CacheEntry(tmp_path, key)


def _slow_fill(root: str, counter: str) -> None:
    def populate(target: Path) -> None:
        with open(counter, "a") as handle:
            handle.write("x")
        time.sleep(0.3)
        (target / "done").write_text("yes")

    CacheEntry(Path(root), "shared").fill(populate)


def test_racing_processes_fill_once(tmp_path: Path) -> None:
    counter = tmp_path / "populate-calls"
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_slow_fill, args=(str(tmp_path / "cache"), str(counter)))
        for _ in range(3)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    assert counter.read_text() == "x"
    assert (tmp_path / "cache" / "shared" / "done").read_text() == "yes"


# -- an entry is trusted only while its files are what was written -------------------------------


def _filled(tmp_path: Path, calls: list[Path]) -> CacheEntry:
    def populate(target: Path) -> dict:
        calls.append(target)
        (target / "bin").mkdir()
        for name, size in (("kube-apiserver", 5000), ("kubelet", 3000)):
            (target / "bin" / name).write_bytes(name.encode() * (size // len(name)))
        os.symlink("bin/kubelet", target / "link")
        return {"version": "v1.36.5"}

    entry = CacheEntry(tmp_path, "v1.36.5")
    entry.fill(populate)
    return entry


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: (p / "bin" / "kube-apiserver").unlink(), "bin/kube-apiserver is missing"),
        (lambda p: os.truncate(p / "bin" / "kubelet", 100), "bin/kubelet has 100 bytes"),
        (lambda p: (p / "bin" / "kubelet").write_bytes(b"x" * 2996), "sha256 differs"),
        (lambda p: ((p / "link").unlink(), os.symlink("elsewhere", p / "link")), "points else"),
    ],
)
def test_a_damaged_entry_is_rebuilt(
    tmp_path: Path, damage: object, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[Path] = []
    entry = _filled(tmp_path, calls)
    os.chmod(entry.path / "bin", 0o755)
    damage(entry.path)  # type: ignore[operator]
    with caplog.at_level(logging.INFO, logger="e2e_dra"):
        assert not entry.is_complete()
    assert reason in caplog.text
    _filled(tmp_path, calls)
    assert len(calls) == 2
    assert entry.is_complete()


def test_an_entry_without_a_file_it_must_hold_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    CacheEntry(tmp_path, "tool").fill(lambda tmp: (tmp / "bin").mkdir())  # a filler that broke
    entry = CacheEntry(tmp_path, "tool", holds=["bin/tool"])
    with caplog.at_level(logging.INFO, logger="e2e_dra"):
        assert not entry.is_complete()
    assert "is damaged (it lacks bin/tool); it will be rebuilt" in caplog.text

    def populate(tmp: Path) -> None:
        (tmp / "bin").mkdir()
        (tmp / "bin" / "tool").write_text("#!/bin/sh\n")

    entry.fill(populate)
    assert entry.is_complete() and (entry.path / "bin" / "tool").is_file()


def test_a_touched_file_with_the_same_bytes_is_still_trusted(tmp_path: Path) -> None:
    calls: list[Path] = []
    entry = _filled(tmp_path, calls)
    os.utime(entry.path / "bin" / "kubelet", ns=(1, 1))  # a copy that did not keep times
    assert entry.is_complete()
    _filled(tmp_path, calls)
    assert len(calls) == 1


def test_a_rewrite_that_kept_size_and_time_is_found_by_a_deep_check(tmp_path: Path) -> None:
    calls: list[Path] = []
    entry = _filled(tmp_path, calls)
    kubelet = entry.path / "bin" / "kubelet"
    before = kubelet.stat()
    with open(kubelet, "r+b") as out:
        out.write(b"X")
    os.utime(kubelet, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert entry.is_complete()  # the routine check is stat only, by design
    assert not entry.is_complete(deep=True)
    entry.fill(lambda t: (t / "new").write_text("rebuilt") and None, deep=True)
    assert (entry.path / "new").exists()


def test_files_added_later_are_not_judged(tmp_path: Path) -> None:
    calls: list[Path] = []
    entry = _filled(tmp_path, calls)
    (entry.path / "scratch").write_text("a build's leftover")
    assert entry.is_complete()


@pytest.mark.parametrize(
    "marker", ["garbage{", "{}", '{"version": "v1.36.5"}', '{"files": "x"}', "[]"]
)
def test_an_unreadable_record_of_files_means_rebuilt_never_re_recorded(
    tmp_path: Path, marker: str
) -> None:
    calls: list[Path] = []
    entry = _filled(tmp_path, calls)
    os.chmod(entry.path / "bin", 0o755)
    (entry.path / "bin" / "kubelet").unlink()  # damage that a fresh record would bless
    (entry.path / MARKER).write_text(marker)

    assert not entry.is_complete()
    assert not entry.is_complete(deep=True)
    _filled(tmp_path, calls)

    assert len(calls) == 2
    assert (entry.path / "bin" / "kubelet").is_file()


def test_damage_found_once_is_never_served_again(tmp_path: Path) -> None:
    calls: list[Path] = []
    entry = _filled(tmp_path, calls)
    kubelet = entry.path / "bin" / "kubelet"
    before = kubelet.stat()
    os.chmod(kubelet, 0o644)
    with open(kubelet, "r+b") as out:
        out.write(b"X")
    os.utime(kubelet, ns=(before.st_atime_ns, before.st_mtime_ns))

    assert not entry.is_complete(deep=True)  # what --verify asks first

    assert not entry.is_complete()  # the routine check of a later run does not serve it
    (aside,) = tmp_path.glob(".damaged-v1.36.5-*")
    assert (aside / "bin" / "kubelet").read_bytes().startswith(b"X")

    def unreachable(_tmp: Path) -> None:
        raise RuntimeError("the mirror does not answer")

    with pytest.raises(RuntimeError):  # the refill fails ...
        entry.fill(unreachable)
    assert not entry.is_complete()  # ... and still nothing is served
    _filled(tmp_path, calls)  # a later fill rebuilds it and clears what was set aside
    assert entry.is_complete(deep=True)
    assert not list(tmp_path.glob(".damaged-*"))
