"""Running the Go toolchain for the things we build from the Go module proxy.

Kubernetes, containerd, etcd and cfssl are built here because their release downloads cannot be
reached from every machine. All builds share one module cache and one build cache under our cache
root, so a second build of anything reuses the first one's work and survives between runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from e2e_dra._console import say
from e2e_dra._paths import cache_root
from e2e_dra.errors import ProvisionError


def go_binary() -> str:
    found = shutil.which("go") or (
        "/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None
    )
    if not found:
        raise ProvisionError(
            "the Go toolchain is needed to build Kubernetes and the node runtime from the Go "
            "module proxy: install Go >= 1.26.6 (https://go.dev/doc/install) and put `go` on PATH"
        )
    return found


def go_version() -> str:
    """``go1.26.8``: what ``go env GOVERSION`` says (empty when it says nothing)."""
    return subprocess.run(
        [go_binary(), "env", "GOVERSION"], capture_output=True, text=True, check=False
    ).stdout.strip()


def go_env(**extra: str) -> dict[str, str]:
    """The environment of every Go build of ours."""
    root = cache_root() / "go"
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(root / "mod"),
        GOCACHE=str(root / "build"),
        GOPATH=str(root / "path"),
        GOFLAGS="-mod=mod",
        # The checksum database is not reachable everywhere the proxy is; go.sum entries come
        # from the proxy's own module zips.
        GOSUMDB=os.environ.get("GOSUMDB", "off"),
        GOTOOLCHAIN="local",
        CGO_ENABLED=os.environ.get("CGO_ENABLED", "0"),
    )
    env.update(extra)
    return env


def run_go(
    args: Sequence[str],
    *,
    cwd: Path,
    what: str,
    log: Path | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """Run ``go <args>`` in ``cwd``; a failure raises with the tail of its output and the log."""
    cmd = [go_binary(), *args]
    say(f"{what}: go {' '.join(args[:2])} ...")
    started = time.monotonic()
    log = log or cwd / "go-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        # Own process group: an interrupted build must not leave compilers running.
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env or go_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise ProvisionError(
            f"{what} failed (go exited {proc.returncode}); last lines of {log}:\n  "
            + "\n  ".join(tail)
        )
    say(f"{what}: done in {time.monotonic() - started:.0f}s")
