"""Download + verify + extract of a ~300 MB server tarball on loopback, against curl/sha512sum/tar.

Prints: our cold time vs the shell baseline (ratio; target <= 1.3), our peak RSS (target < 150 MB)
and the warm-cache time with the number of requests it made (target < 0.5 s, 0 requests).

    python benchmarks/bench_download.py [--size-mb 300] [--repeat 3] [--work-dir DIR]

Ours runs as ``e2e-dra download`` in a child process, so the figures include interpreter start-up
and the RSS is that process's alone (``wait4``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

VERSION = "v1.35.2"
TARBALL = "kubernetes-server-linux-amd64.tar.gz"
BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "kubectl",
)
OTHERS = ("kubeadm", "kube-apiserver.tar", "kube-proxy.tar", "kube-scheduler.tar")


def build_release_tree(root: Path, size_mb: int) -> Path:
    """``<root>/release/<version>/<tarball>`` and its .sha512, of incompressible members."""
    release = root / "release" / VERSION
    tarball = release / TARBALL
    if tarball.is_file() and (release / f"{TARBALL}.sha512").is_file():
        return root / "release"
    release.mkdir(parents=True, exist_ok=True)
    names = BINARIES + OTHERS
    per_member = size_mb * 1_000_000 // len(names)
    digest = hashlib.sha512()
    partial = tarball.with_suffix(".tmp")
    with (
        open(partial, "wb") as raw,
        tarfile.open(fileobj=raw, mode="w:gz", compresslevel=1) as archive,
    ):
        for name in names:
            info = tarfile.TarInfo(f"kubernetes/server/bin/{name}")
            info.size = per_member
            info.mode = 0o755
            archive.addfile(info, io.BytesIO(os.urandom(per_member)))
    with open(partial, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    (release / f"{TARBALL}.sha512").write_text(f"{digest.hexdigest()}  {TARBALL}\n")
    partial.rename(tarball)
    return root / "release"


class CountingServer:
    """A static file server on loopback that counts what it is asked."""

    def __init__(self, directory: Path) -> None:
        counter = self
        self.requests = 0

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                counter.requests += 1

        handler = functools.partial(Handler, directory=str(directory))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/release"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def shell_baseline(url: str, scratch: Path) -> float:
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    started = time.perf_counter()
    tarball = scratch / TARBALL
    subprocess.run(["curl", "-sSf", "-o", str(tarball), f"{url}/{VERSION}/{TARBALL}"], check=True)
    subprocess.run(["sha512sum", str(tarball)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(scratch)], check=True)
    elapsed = time.perf_counter() - started
    shutil.rmtree(scratch, ignore_errors=True)
    return elapsed


def ours(url: str, cache: Path) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one ``e2e-dra download`` child process."""
    command = [sys.executable, "-m", "e2e_dra.cli", "download", VERSION]
    command += ["--base-url", url, "--cache-dir", str(cache)]
    env = {**os.environ, "CI": "true"}
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"e2e-dra download failed:\n{stderr.decode()}")
    bin_dir = Path(stdout.decode().splitlines()[-1])
    assert all((bin_dir / name).is_file() for name in BINARIES), bin_dir
    return elapsed, usage.ru_maxrss / 1024  # Linux reports KiB


def api_warm_fetch(url: str, cache: Path) -> float:
    """A cache hit through the API, without interpreter and CLI start-up."""
    from e2e_dra.releases._download import DownloadSource

    source = DownloadSource(base_url=url, cache_dir=cache)
    started = time.perf_counter()
    source.fetch(VERSION)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, help="keeps the tarball between runs")
    args = parser.parse_args()

    work = args.work_dir or Path(tempfile.gettempdir()) / "e2e-dra-bench-download"
    work.mkdir(parents=True, exist_ok=True)
    print(f"building a {args.size_mb} MB tarball in {work} (kept for later runs)", flush=True)
    tree = build_release_tree(work, args.size_mb)
    size = (tree / VERSION / TARBALL).stat().st_size
    server = CountingServer(tree.parent)
    try:
        baseline, cold, rss = [], [], []
        for _ in range(args.repeat):
            baseline.append(shell_baseline(server.url, work / "baseline"))
            cache = work / "cache"
            shutil.rmtree(cache, ignore_errors=True)
            seconds, peak = ours(server.url, cache)
            cold.append(seconds)
            rss.append(peak)
        server.requests = 0
        warm, _ = ours(server.url, work / "cache")
        warm_in_process = api_warm_fetch(server.url, work / "cache")
        warm_requests = server.requests
    finally:
        server.stop()
        shutil.rmtree(work / "cache", ignore_errors=True)

    base_s, cold_s = statistics.median(baseline), statistics.median(cold)
    print(f"tarball:                       {size / 1e6:.0f} MB on loopback, {args.repeat} runs")
    print(f"curl + sha512sum + tar -x:     {base_s:.2f} s (median)")
    print(f"e2e-dra download (cold):       {cold_s:.2f} s (median)")
    print(f"ratio:                         {cold_s / base_s:.2f}  (target <= 1.3)")
    print(f"peak RSS (e2e-dra download):   {max(rss):.0f} MB  (target < 150 MB)")
    print(f"warm cache (e2e-dra download): {warm:.2f} s  (target < 0.5 s)")
    print(f"warm cache (fetch() call):     {warm_in_process * 1000:.1f} ms")
    print(f"requests made on warm runs:    {warm_requests}  (target 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
