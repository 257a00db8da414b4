"""Running the Go toolchain for the things we build from the Go module proxy.

Kubernetes, containerd, etcd and cfssl are built here because their release downloads cannot be
reached from every machine. All builds share one module cache and one build cache under our cache
root, so a second build of anything reuses the first one's work and survives between runs.

A release may need a newer Go than the one installed (Kubernetes 1.38's go.mod says ``go 1.27.0``).
Then, as upstream's ``hack/lib/golang.sh`` does, we build with the Go the release names in its
``.go-version``, fetched through the Go module proxy, unless the user's ``GOTOOLCHAIN`` names one.
(The module itself is downloaded first with the oldest Go its go.mod accepts, as
``GOTOOLCHAIN=auto`` would pick it.) A fetched toolchain is run by path with ``GOTOOLCHAIN=local``:
the go command checks a toolchain it switches to against the checksum database every time, even
one already in the module cache, which fails under the ``GOSUMDB=off`` our module builds use; so
only the fetch goes through the checksum database. Toolchains share the build cache safely: Go keys
every cached action by the identity of the compiler that produced it.
"""

from __future__ import annotations

import functools
import logging
import mmap
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e_dra._paths import cache_root
from e2e_dra._platform import host_platform
from e2e_dra.errors import ProvisionError
from e2e_dra.settings import settings
from e2e_dra.supervise import ProcessError, run

logger = logging.getLogger(__name__)

DEFAULT_SUMDB = "sum.golang.org"
FETCH_TIMEOUT = 600.0
"""Seconds fetching a Go toolchain may take."""
_GO_VERSION_RE = re.compile(r"go(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class GoToolchain:
    """One Go toolchain: its name (``go1.27.3``) and the go command that runs it."""

    name: str
    go: str
    fetched: bool = False  # through the module proxy, as opposed to the installed one


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


@functools.cache
def go_version() -> str:
    """``go1.26.8``: the installed toolchain (never one that ``GOTOOLCHAIN`` would switch to)."""
    env = dict(os.environ, GOTOOLCHAIN="local")
    return subprocess.run(
        [go_binary(), "env", "GOVERSION"], capture_output=True, text=True, check=False, env=env
    ).stdout.strip()


BUILDINFO_MAGIC = b"\xff Go buildinf:"
BUILDINFO_SCANNED = 256 << 20
"""Bytes of a binary searched for Go's build-info header (it sits in the data section: a
kube-apiserver of 120 MiB has it at about 70 MiB)."""


@functools.cache
def binary_go_version(binary: Path) -> str | None:
    """``go1.27.3``: the Go that built ``binary``, read from the build info the linker writes
    (``go version FILE`` says the same, but needs no Go installed); None when the file has none
    (not a Go binary, or one older than Go 1.18) or cannot be read. Read once per path and
    process: the summary asks after every entry."""
    try:
        with binary.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(BUILDINFO_MAGIC, 0, BUILDINFO_SCANNED)
            if at < 0 or at + 32 >= len(data) or not data[at + 15] & 2:
                return None  # flags bit 1: the version is inline (Go >= 1.18)
            length, start = _uvarint(data, at + 32)
            text = bytes(data[start : start + min(length, 64)]).decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    return text if _GO_VERSION_RE.match(text) else None


def binary_modules(binary: Path) -> dict[str, str]:
    """The modules ``binary`` was linked with, by path (``k8s.io/dynamic-resource-allocation``
    -> ``v0.36.2``; a replaced module at its replacement's version): ``go version -m`` without
    Go installed. Its main module is under ``"main"``. Empty when the file has no build info."""
    try:
        with binary.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(BUILDINFO_MAGIC, 0, BUILDINFO_SCANNED)
            if at < 0 or at + 32 >= len(data) or not data[at + 15] & 2:
                return {}
            length, start = _uvarint(data, at + 32)  # the Go version, then the module info
            length, start = _uvarint(data, start + length)
            text = bytes(data[start : start + min(length, 1 << 20)]).decode("utf-8", "replace")
    except (OSError, ValueError):
        return {}
    modules: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if fields[0] == "mod" and len(fields) >= 3:
            modules["main"] = f"{fields[1]} {fields[2]}"
        elif fields[0] == "dep" and len(fields) >= 3:
            modules[fields[1]] = fields[2]
        elif fields[0] == "=>" and len(fields) >= 3 and modules:
            last = list(modules)[-1]  # the dependency just listed was replaced by this one
            modules[last] = fields[2] if fields[2] != "(devel)" else fields[1]
    return modules


def _uvarint(data: mmap.mmap, at: int) -> tuple[int, int]:
    """The unsigned varint at ``at`` and where what follows it starts."""
    value = shift = 0
    for offset in range(10):
        byte = data[at + offset]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at + offset + 1
        shift += 7
    raise ValueError("varint too long")


def go_version_key(version: str) -> tuple[int, int, int]:
    """``go1.27.3``, ``1.27`` or ``1.27.0`` -> ``(1, 27, 3)``; a language version ends in 0."""
    text = version if version.startswith("go") else f"go{version}"
    match = _GO_VERSION_RE.match(text)
    if not match:
        raise ProvisionError(f"not a Go version: {version!r} (e.g. go1.27.3)")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def installed_toolchain() -> GoToolchain:
    return GoToolchain(name=go_version(), go=go_binary())


def toolchain_for(required: str, preferred: str | None = None) -> GoToolchain:
    """The toolchain that builds a module whose go.mod says ``go <required>``.

    In order: the user's ``GOTOOLCHAIN`` when it names a toolchain (``go1.27.3``) or forbids
    fetching one (``local``, ``local+path``); the installed Go when it is new enough;
    ``preferred`` (a release's ``.go-version``, or a go.mod's ``toolchain`` line) when it is new
    enough; else the required version itself. ``GOTOOLCHAIN`` itself was checked when the
    settings were read, so every value here is one the go command accepts.
    """
    name, _, mode = (settings().gotoolchain or "").partition("+")
    installed = installed_toolchain()
    new_enough = go_version_key(installed.name) >= go_version_key(required)
    if name == "local" and mode != "auto":
        if not new_enough:
            raise ProvisionError(
                f"this build needs Go >= {required} and GOTOOLCHAIN={settings().gotoolchain} "
                f"forbids fetching one (installed: {installed.name}): unset GOTOOLCHAIN or set it "
                "to a toolchain such as go1.27.3"
            )
        return installed
    if name.startswith("go"):
        chosen = name
    elif new_enough:
        return installed
    elif preferred and go_version_key(preferred) >= go_version_key(required):
        chosen = preferred if preferred.startswith("go") else f"go{preferred}"
    else:
        chosen = f"go{required}"
    go_version_key(chosen)  # a release's .go-version is not checked anywhere else
    if chosen == installed.name:
        return installed
    return fetch_toolchain(chosen)


def fetch_toolchain(name: str) -> GoToolchain:
    """``golang.org/toolchain@v0.0.1-<name>.<os>-<arch>`` from the module proxy, once."""
    env = go_env()
    goos, goarch = host_platform()
    root = Path(env["GOMODCACHE"]) / "golang.org" / f"toolchain@v0.0.1-{name}.{goos}-{goarch}"
    go = root / "bin" / "go"
    if go.is_file():
        return GoToolchain(name=name, go=str(go), fetched=True)
    sumdb = settings().gosumdb or DEFAULT_SUMDB
    if sumdb == "off":
        raise ProvisionError(
            f"fetching Go toolchain {name} needs the checksum database, which GOSUMDB=off turns "
            f"off: unset GOSUMDB, or install {name} yourself and put it first on PATH"
        )
    logger.info(f"fetching Go toolchain {name} through the Go module proxy ...")
    started = time.monotonic()
    try:
        done = run(
            "go version",
            [go_binary(), "version"],
            env=dict(env, GOTOOLCHAIN=name, GOSUMDB=sumdb),
            timeout=FETCH_TIMEOUT,
        )
        returncode, output = done.returncode, done.output
    except ProcessError as exc:
        returncode, output = None, str(exc)
    if returncode != 0 or not go.is_file():
        last = (output.strip().splitlines() or ["no output"])[-1]
        raise ProvisionError(
            f"could not fetch Go toolchain {name} through GOPROXY ({last}); set GOTOOLCHAIN to "
            "a toolchain your proxy serves (e.g. go1.27.3) or install a newer Go"
        )
    logger.info(f"fetched Go toolchain {name} in {time.monotonic() - started:.0f}s ({root})")
    return GoToolchain(name=name, go=str(go), fetched=True)


def go_env(**extra: str) -> dict[str, str]:
    """The environment of every Go build of ours: ours, with the Go settings of ours in force."""
    root = cache_root() / "go"
    given = settings()
    env = dict(os.environ)  # passed on to the go command
    if given.goproxy:
        env["GOPROXY"] = given.goproxy
    env.setdefault("CGO_ENABLED", "0")  # static binaries, unless the user asks for cgo
    env.update(
        GOMODCACHE=str(root / "mod"),
        GOCACHE=str(root / "build"),
        GOPATH=str(root / "path"),
        GOFLAGS="-mod=mod",
        # The checksum database is not reachable everywhere the proxy is; go.sum entries come
        # from the proxy's own module zips.
        GOSUMDB="off" if given.gosumdb is None else given.gosumdb,
        # We pick the toolchain ourselves (toolchain_for) and run it by path.
        GOTOOLCHAIN="local",
    )
    env.update(extra)
    return env


HEARTBEAT_SECONDS = 30.0
"""How often a running go command says it is still running (a cold Kubernetes build compiles for
many minutes, and a log that is not a terminal shows no progress bar)."""


@dataclass(frozen=True)
class BuildProgress:
    """Where a ``go build`` is: ``compiled`` of ``total`` packages (None when ``go list`` could
    not count them), the package it compiles now, and seconds since it started."""

    compiled: int
    total: int | None
    package: str | None
    elapsed: float

    def __str__(self) -> str:
        counted = f"{self.compiled}/{self.total}" if self.total is not None else f"{self.compiled}"
        now = f", now {self.package}" if self.package else ""
        return f"{counted} packages compiled, {duration(self.elapsed)}{now}"


def duration(seconds: float) -> str:
    """``42s``, ``5m30s``, ``1h02m03s``: as Go prints a rounded duration."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def run_go(
    args: Sequence[str],
    *,
    cwd: Path,
    what: str,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    toolchain: GoToolchain | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
) -> None:
    """Run ``go <args>`` in ``cwd`` (its own session: an interrupted build must not leave
    compilers running); a failure raises with the tail of its output and the log. Every
    ``heartbeat`` seconds a line says it is still running. For ``go build``, see :func:`go_build`.
    """
    started = time.monotonic()
    _run_go(
        args,
        cwd=cwd,
        what=what,
        log=log,
        env=env,
        toolchain=toolchain,
        heartbeat=heartbeat,
        on_tick=lambda: logger.info(f"still {what}: {duration(time.monotonic() - started)}"),
    )


def go_build(
    targets: Sequence[str],
    *,
    output: Path,
    flags: Sequence[str] = (),
    cwd: Path,
    what: str,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    toolchain: GoToolchain | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
    on_progress: Callable[[BuildProgress], None] | None = None,
) -> BuildProgress:
    """``go build -v <flags> -o <output> <targets>``, saying how far it is.

    The packages it needs are counted first (``go list -deps``); ``-v`` then prints each package
    as it is compiled (never one the build cache holds). Every ``heartbeat`` seconds a line says
    how many have been compiled of how many, and ``on_progress`` (a progress bar) hears of each
    package. Returns where the build ended.
    """
    env = env or go_env()
    needed = _count_packages(targets, flags, cwd=cwd, what=what, env=env, toolchain=toolchain)
    started = time.monotonic()
    compiled: list[str] = []

    def now() -> BuildProgress:
        return BuildProgress(
            compiled=len(compiled),
            total=len(needed) if needed is not None else None,
            package=compiled[-1] if compiled else None,
            elapsed=time.monotonic() - started,
        )

    def on_line(line: str) -> None:
        # -v prints bare import paths; errors and "go: downloading" lines are not packages
        package = line.strip()
        if needed is not None:
            is_package = package in needed
        else:
            is_package = _IMPORT_PATH.fullmatch(package) is not None
        if is_package:
            compiled.append(package)
            if on_progress is not None:
                on_progress(now())

    if needed is not None:
        logger.info(f"{what}: {len(needed)} packages to compile or take from the build cache")
    _run_go(
        ["build", "-v", *flags, "-o", str(output), *targets],
        cwd=cwd,
        what=what,
        log=log,
        env=env,
        toolchain=toolchain,
        heartbeat=heartbeat,
        on_line=on_line,
        on_tick=lambda: logger.info(f"still {what}: {now()}"),
    )
    ended = now()
    if ended.total is not None:
        cached = max(0, ended.total - ended.compiled)
        logger.info(
            f"{what}: {ended.compiled} of {ended.total} packages compiled, "
            f"{cached} from the build cache"
        )
    return ended


_IMPORT_PATH = re.compile(r"[A-Za-z0-9_.~+\-]+(/[A-Za-z0-9_.~+\-]+)*")


def _count_packages(
    targets: Sequence[str],
    flags: Sequence[str],
    *,
    cwd: Path,
    what: str,
    env: dict[str, str],
    toolchain: GoToolchain | None,
) -> set[str] | None:
    """The packages ``go build <flags> <targets>`` needs (``go list -deps``), or None when go
    list fails: then the build runs anyway and reports the error if it is one."""
    cmd = [toolchain.go if toolchain else go_binary(), "list", "-deps", *flags, *targets]
    try:
        done = run(f"{what} (counting packages)", cmd, cwd=cwd, env=env)
    except ProcessError as exc:
        logger.info(f"{what}: cannot count its packages ({exc}); building without a total")
        return None
    if done.returncode != 0:
        last = (done.output.strip().splitlines() or ["no output"])[-1]
        logger.info(f"{what}: go list cannot count its packages ({last}); building without a total")
        return None
    return {line.strip() for line in done.output.splitlines() if line.strip()}


def _run_go(
    args: Sequence[str],
    *,
    cwd: Path,
    what: str,
    log: Path | None,
    env: dict[str, str] | None,
    toolchain: GoToolchain | None,
    heartbeat: float,
    on_tick: Callable[[], None],
    on_line: Callable[[str], None] | None = None,
) -> None:
    cmd = [toolchain.go if toolchain else go_binary(), *args]
    logger.info(f"{what}: go {' '.join(args[:2])} ...")
    started = time.monotonic()
    log = log or cwd / "go-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = run(
            what,
            cmd,
            cwd=cwd,
            env=env or go_env(),
            log_file=log,
            on_line=on_line,
            on_tick=on_tick,
            tick=heartbeat,
        )
    except ProcessError as exc:
        raise ProvisionError(f"{what}: {exc}") from exc
    if done.returncode != 0:
        raise ProvisionError(
            f"{what} failed (go exited {done.returncode}); last lines of {log}:\n  "
            + "\n  ".join(done.tail(15).splitlines())
        )
    logger.info(f"{what}: done in {duration(time.monotonic() - started)}")
