"""A sweep of bad inputs and faults against the ``e2e-dra`` command line.

Run it from a clone, with its virtualenv::

    .venv/bin/python tests/sweep/bad_inputs.py [--jobs 2] [--only SUBSTRING] [--kind KIND]...

It proves the promise of the README's "Command line" section, case by case: every failure ends as
one line on stderr (``e2e-dra: error: ...``, the last line, naming the input), an exit status of
its kind, never a traceback (exit 70), a hang or unbounded memory, and nothing corrupt left in the
cache (a damaged entry is never served).

Everything it talks to is on 127.0.0.1: the loopback release tree (``tests/release_server.py``),
the loopback Go module proxy (``tests/module_proxy.py``) and a few raw TCP servers made here for
faults those two cannot play (a server that never answers, one that answers garbage). Every case
gets its own temporary directory, its own servers, its own caches and its own ``HOME``, so the
real ``~/.cache/e2e-dra`` is never touched.

Each case is data (:class:`Case`: one or more :class:`Step` s), run by one runner (:func:`run_step`:
a subprocess under a 2 GiB address-space limit set by a tiny launcher that execs ``python -m
e2e_dra.cli``, with a timeout) and judged by one judge (:func:`judge`). The script prints a table of
kinds x (cases, passed, failed), the failures with their command, environment, exit status and
last stderr lines, and exits 1 if any case failed.

Limits of the machine, not of the product: Linux refuses a single argument or environment string
longer than 128 KiB (``MAX_ARG_STRLEN``), so "huge" values given on the command line or in the
environment are 128 KiB less a little (:data:`HUGE`); huge *files* (markers, checksum files, proxy
answers, version files) are 1 MiB and more. This runs as root, so a mode of 000 does not make a
directory unreadable; read-only directories are made with ``chattr +i`` where it works (else those
cases are skipped and said to be).

Signals are sent once the command has visibly started (the loopback server saw its request), or
0.6 s after it was started: a signal in the first tenths of a second lands in the interpreter's
own start-up (``site``, the editable install's finder), before any code of ours can handle it,
and ends as Python's traceback or death by SIGINT, which no Python program can prevent.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(TESTS))

from module_proxy import ProxyTree  # noqa: E402
from release_server import (  # noqa: E402
    CLUSTER_BINARIES,
    Fault,
    Member,
    ReleaseServer,
    damaged_tarball,
    fake_binary,
    release_members,
    server_tarball,
)

TARBALL = "kubernetes-server-linux-amd64.tar.gz"
MARKER = ".e2e-dra-complete.json"
WANTED = (*CLUSTER_BINARIES, "kubectl")
MEMORY_LIMIT = 2 << 30  # bytes of address space
HUGE = 128 * 1024 - 64  # the longest argument or environment string Linux passes on
MB = 1 << 20
LAUNCHER = (  # SIGINT as on a terminal: a shell that starts the sweep in the background ignores it
    "import os, resource, signal, sys; limit = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'e2e_dra.cli', *sys.argv[2:]])"
)
ERROR_PREFIX = "e2e-dra: error:"
STDOUT_GONE = 141  # the documented quiet end when nobody reads stdout (128 + SIGPIPE)
STREAM_FDS = {"stdin": 0, "stdout": 1, "stderr": 2}
CLOSING_LAUNCHER = (  # closes the descriptors named in argv[1], then runs the launcher
    "import os, sys; [os.close(int(fd)) for fd in sys.argv[1].split(',')]; "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)
# an error line says what to do: one of these words (or it is an interruption, which needs none)
ADVICE = (
    "check",
    "try",
    "use",
    "give",
    "set",
    "unset",
    "run again",
    "remove",
    "fix",
    "choose",
    "point",
    "make",
    "raise",
    "lower",
    "free",
    "build",
    "publish",
    "see ",
    "attach",
    "write it",
    "expected",
    "e.g.",
    "is not a",
    "must",
)

# --- cases as data --------------------------------------------------------------------------------

Expect = int | tuple[int, ...]  # 0: success (and, for download, a verified result)


@dataclass
class Step:
    """One run of ``e2e-dra ARGS`` and what it must end as."""

    args: Sequence[str | bytes]
    expect: Expect = 0
    named: tuple[str, ...] = ()  # the error line must hold each (placeholders: see Ctx.fmt)
    env: dict[str, str | bytes | None] = field(default_factory=dict)  # None: unset it
    before: Callable[[Ctx], None] | None = None  # e.g. damage the cache, fix the mirror
    signal: int | None = None  # sent once ``when`` holds
    when: Callable[[Ctx], bool] | None = None
    timeout: float = 30.0
    served: bool = True  # on success of a download, the printed bin dir must hold the published
    may_serve_damage: bool = False  # documented: a stat-only check cannot see this damage
    advice: bool = True  # the error line must say what to do
    stdin_devnull: bool = True
    close: tuple[str, ...] = ()  # "stdin", "stdout", "stderr": closed when the command starts
    desert: tuple[str, ...] = ()  # "stdout", "stderr": a pipe whose reader has already exited


@dataclass
class Case:
    id: str
    kind: str
    steps: list[Step]
    setup: Callable[[Ctx], None] | None = None
    env: dict[str, str | bytes | None] = field(default_factory=dict)
    proxy: bool = False  # start a loopback Go module proxy
    skip: Callable[[], str | None] | None = None  # a reason to skip it on this machine


@dataclass
class Outcome:
    case: Case
    problems: list[str]
    records: list[dict[str, object]]
    skipped: str | None = None


# --- the context of one case: its dir, its servers ------------------------------------------------


class Ctx:
    def __init__(self, case: Case, root: Path) -> None:
        self.case = case
        self.tmp = root
        self.server = ReleaseServer().start()
        self.proxy: ProxyTree | None = None
        if case.proxy:
            self.proxy = ProxyTree(listed=["v1.36.4", "v1.36.5", "v1.37.2"], served=[])
        self.published: dict[str, dict[str, bytes]] = {}
        self.raw: list[RawServer] = []
        self.immutable: list[Path] = []
        (root / "home").mkdir()
        (root / "cwd").mkdir()
        (root / "afile").write_text("a file, not a directory\n")
        os.mkfifo(root / "fifo")
        self.standard_tree()

    # -- the loopback release tree --

    def standard_tree(self) -> None:
        s = self.server
        s.put("stable.txt", "v1.37.2\n")
        s.put("latest.txt", "v1.37.2\n")
        s.put("stable-1.37.txt", "v1.37.2\n")
        s.put("stable-1.36.txt", "v1.36.5\n")
        s.put("stable-1.35.txt", "v1.35.8\n")
        self.publish("v1.36.5")
        self.publish("v1.37.2")

    def publish(self, version: str, members: list[Member] | None = None, **kw: object) -> bytes:
        members = members if members is not None else release_members()
        tarball = self.server.add_release(version, members, **kw)  # type: ignore[arg-type]
        self.published[version] = {
            Path(m.name).name: m.data
            for m in members
            if m.link is None and not m.directory and Path(m.name).name in WANTED
        }
        return tarball

    def put_tarball(self, version: str, data: bytes, *, sidecar: bool = True) -> None:
        """Serve ``data`` as the tarball, with a matching sha512 (the mirror vouches for it)."""
        self.server.put(f"{version}/{TARBALL}", data)
        if sidecar:
            self.server.put(f"{version}/{TARBALL}.sha512", hashlib.sha512(data).hexdigest())
        self.published.pop(version, None)

    @property
    def cache(self) -> Path:
        return self.tmp / "cache"

    def entry(self, version: str = "v1.36.5") -> Path:
        return self.cache / version

    def fmt(self, text: str) -> str:
        values = {
            "url": self.server.url,
            "tmp": str(self.tmp),
            "cache": str(self.cache),
            "proxy": self.proxy.url if self.proxy else "http://127.0.0.1:9",
            "raw": self.raw[0].url if self.raw else "http://127.0.0.1:9",
            "port": str(self.server.url.split(":")[2].split("/")[0]),
        }
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        return text

    def close(self) -> None:
        for path in self.immutable:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
        self.server.stop()
        if self.proxy:
            self.proxy.stop()
        for raw in self.raw:
            raw.stop()


class RawServer:
    """A TCP server on 127.0.0.1 that plays one fault no HTTP server would: ``silent`` accepts
    and never answers; ``garbage`` answers bytes that are not HTTP; ``endless`` sends a 200 with
    no length and a body that never ends; ``liar`` promises 10 bytes and sends a gigabyte;
    ``drip`` sends a status line and headers that never end, a byte every half second;
    ``chunked`` sends a chunked body that never ends; ``gib`` promises 1 GiB and sends it."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/release"
        self.stopped = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.recv(65536)
            if self.mode == "garbage":
                conn.sendall(b"\x00\xffHELLO THIS IS NOT HTTP\r\n\r\n" * 10)
                conn.close()
            elif self.mode in {"endless", "liar"}:
                head = b"HTTP/1.1 200 OK\r\n"
                head += b"Content-Length: 10\r\n" if self.mode == "liar" else b""
                conn.sendall(head + b"Connection: close\r\n\r\n")
                block = b"v" * 65536
                while not self.stopped.is_set():
                    conn.sendall(block)
            elif self.mode == "drip":  # a status line and headers that never end, a byte a second
                for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"." * 100_000:
                    if self.stopped.wait(0.5):
                        break
                    conn.sendall(bytes([byte]))
            elif self.mode in {"chunked", "gib"}:  # a chunked body without end; a 1 GiB promise
                framed = self.mode == "chunked"
                head = b"HTTP/1.1 200 OK\r\n"
                head += (
                    b"Transfer-Encoding: chunked\r\n"
                    if framed
                    else b"Content-Length: 1073741824\r\n"
                )
                conn.sendall(head + b"\r\n")
                block = b"f" * 65536
                chunk = b"10000\r\n" + block + b"\r\n" if framed else block
                while not self.stopped.is_set():
                    conn.sendall(chunk)
            else:  # silent
                self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()
        with contextlib.suppress(OSError):
            self.sock.close()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.close()


# --- running and judging --------------------------------------------------------------------------


def base_env(ctx: Ctx) -> dict[str, str | bytes]:
    drop = ("KUBE", "E2E_DRA", "GO", "XDG_", "PYTHON")
    others = {"CI", "ARTIFACTS", "KUBECONFIG", "RUNTIME_CONFIG", "EVICTION_HARD", "HOME"}
    env: dict[str, str | bytes] = {
        k: v for k, v in os.environ.items() if not k.startswith(drop) and k not in others
    }
    env.update(
        HOME=str(ctx.tmp / "home"),
        KUBERNETES_SERVER_CACHE_DIR=str(ctx.cache),
        E2E_DRA_CACHE_DIR=str(ctx.tmp / "root"),
        E2E_DRA_RELEASE_SOURCE="download",
        KUBERNETES_RELEASE_URL=ctx.server.url,
        ARTIFACTS=str(ctx.tmp / "artifacts"),
        E2E_DRA_HOST_LOCK=str(ctx.tmp / "host.lock"),
        E2E_DRA_NODE_DIR=str(ctx.tmp / "node"),
        GOTOOLCHAIN="local",
        GOENV=str(ctx.tmp / "goenv"),
        GOPROXY=ctx.proxy.url if ctx.proxy else "off",
        GOSUMDB="off",
        E2E_DRA_PROGRESS_EVERY="5",
    )
    return env


def step_env(ctx: Ctx, step: Step) -> dict[str | bytes, str | bytes]:
    env: dict[str | bytes, str | bytes] = dict(base_env(ctx))
    for key, value in {**ctx.case.env, **step.env}.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = ctx.fmt(value) if isinstance(value, str) else value
    return env


def run_step(ctx: Ctx, step: Step) -> dict[str, object]:
    """Run one step; what happened, for the judge."""
    if step.before is not None:
        step.before(ctx)
    args = [ctx.fmt(a) if isinstance(a, str) else a for a in step.args]
    env = step_env(ctx, step)
    cmd = [sys.executable, "-c", LAUNCHER, str(MEMORY_LIMIT), *args]
    if step.close:
        fds = ",".join(str(STREAM_FDS[name]) for name in step.close)
        cmd = [sys.executable, "-c", CLOSING_LAUNCHER, fds, *cmd[1:]]
    streams: dict[str, int] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    for name in step.desert:  # the write end of a pipe whose read end is closed already
        read_end, streams[name] = os.pipe()
        os.close(read_end)
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=streams["stdout"],
        stderr=streams["stderr"],
        env=env,
        cwd=ctx.tmp / "cwd",
        start_new_session=True,
    )
    for name in step.desert:
        os.close(streams[name])
    signalled = None
    timed_out = False
    try:
        if step.signal is not None:
            deadline = time.monotonic() + min(step.timeout, 20)
            while time.monotonic() < deadline and proc.poll() is None:
                if step.when is None or step.when(ctx):
                    time.sleep(0.2)
                    proc.send_signal(step.signal)
                    signalled = step.signal
                    break
                time.sleep(0.02)
        out, err = proc.communicate(timeout=max(1.0, step.timeout - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    with contextlib.suppress(ProcessLookupError):  # whatever it left behind
        os.killpg(proc.pid, signal.SIGKILL)
    return {
        "args": [a if isinstance(a, str) else a.decode("utf-8", "backslashreplace") for a in args],
        "env": {
            (k if isinstance(k, str) else k.decode()): _shown(v)
            for k, v in {**ctx.case.env, **step.env}.items()
        },
        "status": proc.returncode,
        "stdout": os.fsdecode(out or b""),  # a path printed as bytes that are not UTF-8 stays so
        "stderr": (err or b"").decode("utf-8", "backslashreplace"),
        "seconds": round(time.monotonic() - started, 2),
        "timed_out": timed_out,
        "signalled": signalled,
    }


def _shown(value: object) -> object:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    if isinstance(value, str) and len(value) > 120:
        return f"{value[:60]}...<{len(value)} chars>"
    return value


def judge(ctx: Ctx, step: Step, got: dict[str, object]) -> list[str]:
    """What is wrong with this step's outcome (nothing: it passed)."""
    problems: list[str] = []
    status = got["status"]
    stderr = str(got["stderr"])
    lines = stderr.splitlines()
    expected = step.expect if isinstance(step.expect, tuple) else (step.expect,)
    if got["timed_out"]:
        return [f"hung: no end within {step.timeout:.0f}s"]
    if not isinstance(status, int) or status < 0:
        return [f"killed by signal {-int(status)} (memory limit or crash?)"]  # type: ignore[arg-type]
    if "Traceback" in stderr:
        problems.append("a traceback on stderr")
    if "MemoryError" in stderr:
        problems.append("MemoryError")
    if "Exception ignored" in stderr:
        problems.append("'Exception ignored' on stderr")
    if status == 70:
        problems.append("exit 70: an internal error (a bug)")
    if status not in expected:
        problems.append(f"exit {status}, expected {'/'.join(map(str, expected))}")
    unread = {*step.close, *step.desert}
    if status == STDOUT_GONE and "stdout" in unread:
        if any(line.startswith(ERROR_PREFIX) for line in lines):
            problems.append("stdout was gone, but the end was not quiet (an error line)")
    elif status != 0 and "stderr" in unread:
        pass  # nobody reads stderr: the error line went nowhere, the status is all there is
    elif status != 0:
        errors = [line for line in lines if line.startswith(ERROR_PREFIX)]
        if status == 2 and not errors:
            errors = [line for line in lines if "error:" in line]
        if len(errors) != 1:
            problems.append(f"{len(errors)} error lines, expected exactly one")
        elif lines[-1] != errors[0]:
            problems.append("the error line is not the last line of stderr")
        else:
            line = errors[0]
            for text in step.named:
                want = ctx.fmt(text)
                if want not in line:
                    problems.append(f"the error line does not name {want[:80]!r}")
            if step.advice and status not in {130, 143} and not any(w in line for w in ADVICE):
                problems.append("the error line does not say what to do")
            if len(line) > 2000:
                problems.append(f"the error line is {len(line)} characters long")
    elif step.served and "download" in got["args"] and "--help" not in got["args"]:  # type: ignore[operator]
        problems += served_problems(ctx, str(got["stdout"]), step)
    if not step.may_serve_damage:
        problems += cache_problems(ctx)
    return problems


def served_problems(ctx: Ctx, stdout: str, step: Step) -> list[str]:
    """The bin dir a successful download printed must hold exactly what the mirror published."""
    lines = stdout.splitlines()
    if not lines:
        return ["success, but no bin dir on stdout"]
    bin_dir = Path(lines[-1])
    version = bin_dir.name
    published = ctx.published.get(version)
    if published is None:
        return [f"success, but {version} was not published as a good release"]
    if not str(bin_dir).startswith(str(ctx.tmp)):
        return [f"served {bin_dir}, outside this case's directory (the real cache?)"]
    problems = []
    for name, data in published.items():
        try:
            if (bin_dir / name).read_bytes() != data and not step.may_serve_damage:
                problems.append(f"served a damaged {name} from {bin_dir}")
        except OSError as exc:
            problems.append(f"served {bin_dir} without a readable {name} ({exc.strerror})")
    return problems


def cache_problems(ctx: Ctx) -> list[str]:
    """Nothing left in the download cache that a later run would serve damaged, and no temp dir."""
    root = ctx.cache
    if not root.is_dir():
        return []
    problems = []
    for entry in root.iterdir():
        if entry.name.startswith(".tmp-"):
            problems.append(f"a temp dir was left behind: {entry.name}")
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            record = json.loads((entry / MARKER).read_text())
            files = record.get("files") if isinstance(record, dict) else None
        except (OSError, ValueError):
            continue  # not complete: never served, rebuilt by the next run
        if not isinstance(files, dict):
            continue
        published = ctx.published.get(entry.name, {})
        for name, data in published.items():
            path = entry / name
            ok = path.is_file() and not path.is_symlink() and path.read_bytes() == data
            recorded = files.get(name)
            if not ok and recorded is not None:
                # recorded and marked complete, but not what was published: served if the
                # stat check misses it
                info = path.stat() if path.exists() else None
                looks_recorded = isinstance(recorded, list) and len(recorded) == 3
                if (
                    info is not None
                    and looks_recorded
                    and [info.st_size, info.st_mtime_ns] == recorded[:2]
                ):
                    problems.append(f"entry {entry.name} holds a damaged {name} it would serve")
    return problems


def run_case(case: Case) -> Outcome:
    if case.skip is not None and (reason := case.skip()):
        return Outcome(case, [], [], skipped=reason)
    root = Path(tempfile.mkdtemp(prefix=f"sweep-{case.id[:40].replace('/', '_')}-"))
    ctx = Ctx(case, root)
    problems: list[str] = []
    records: list[dict[str, object]] = []
    try:
        if case.setup is not None:
            case.setup(ctx)
        for index, step in enumerate(case.steps):
            got = run_step(ctx, step)
            records.append(got)
            found = judge(ctx, step, got)
            problems += [f"step {index + 1}: {p}" for p in found]
            if found:
                break
    except Exception as exc:  # the sweep's own bug: the case fails, the sweep goes on
        problems.append(f"the sweep itself failed: {type(exc).__name__}: {exc}")
    finally:
        ctx.close()
        shutil.rmtree(root, ignore_errors=True)
    return Outcome(case, problems, records)


# --- case builders --------------------------------------------------------------------------------

CASES: list[Case] = []


def case(
    id: str,
    kind: str,
    args: Sequence[str | bytes],
    expect: Expect = 0,
    named: tuple[str, ...] = (),
    **kw: object,
) -> Case:
    step_kw = {k: kw.pop(k) for k in list(kw) if k in Step.__dataclass_fields__}
    made = Case(id, kind, [Step(args, expect, named, **step_kw)], **kw)  # type: ignore[arg-type]
    CASES.append(made)
    return made


def download(*extra: str) -> list[str]:
    return ["download", "v1.36.5", *extra]


def chattr_works() -> str | None:
    probe = Path(tempfile.mkdtemp(prefix="sweep-chattr-"))
    try:
        ok = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    except OSError:
        ok = False
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return None if ok else "chattr +i is not supported here"


def make_readonly(ctx: Ctx) -> None:
    path = ctx.tmp / "ro"
    path.mkdir()
    subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    ctx.immutable.append(path)


# -- 1. environment variables ----------------------------------------------------------------------

GARBAGE_STRINGS: list[tuple[str, str | bytes]] = [
    ("empty", ""),
    ("blank", "   "),
    ("huge", "x" * HUGE),
    ("control", "a\x01b\x1b[31mc"),
    ("newline", "a\nb"),
    ("non-utf8", b"\xff\xfe\xc3("),
]
DURATION_VARS = (
    "E2E_DRA_DOWNLOAD_DEADLINE",
    "E2E_DRA_PROGRESS_EVERY",
    "E2E_DRA_SLICE_REMOVAL_TIMEOUT",
)
DURATION_VALUES: list[tuple[str, str | bytes, Expect]] = [
    ("empty", "", 0),
    ("blank", " \t ", 0),
    ("huge-number", "9" * HUGE, 3),
    ("huge-text", "x" * HUGE, 3),
    ("control", "1\x01", 3),
    ("newline", "1\n2", 3),
    ("non-utf8", b"1\xff", 3),
    ("negative", "-1", 3),
    ("negative-go", "-1s", (2, 3)),  # as a flag value argparse takes it for an option
    ("nan", "nan", 3),
    ("inf", "inf", 3),
    ("minus-inf", "-inf", (2, 3)),
    ("overflow", "1e400", 3),
    ("centuries", "1e10", 3),
    ("leading-zeros", "0030", 0),
    ("arabic-digits", "\u0661\u0668\u0660\u0660", (0, 3)),
    ("fullwidth-digits", "\uff11\uff18\uff10\uff10", (0, 3)),
    ("underscores", "1_000", (0, 3)),
    ("mixed-signs", "1h-5m", 3),
    ("space-inside", "5 s", 3),
    ("two-dots", "1.5.5", 3),
    ("hex", "0x10", 3),
    ("go-form", "1m30s", 0),
    ("micro", "1\u00b5s", (0, 5)),  # a deadline of 1 microsecond passes at once
    ("huge-go-hours", "99999999999h", 3),
    ("zero", "0", 0),
    ("minus-zero", "-0", 0),
    ("plus", "+30", 0),
]
RATE_VALUES: list[tuple[str, str | bytes, Expect]] = [
    ("empty", "", 0),
    ("blank", "  ", 0),
    ("huge-number", "9" * HUGE, 3),
    ("huge-text", "k" * HUGE, 3),
    ("control", "5\x01k", 3),
    ("non-utf8", b"5\xffk", 3),
    ("negative", "-1", 3),
    ("nan", "nan", 3),
    ("inf", "inf", 3),
    ("too-fast", "1e12", 3),
    ("tera", "1T", 3),
    ("unit-only", "k", 3),
    ("hex", "0x10", 3),
    ("leading-zeros", "0050k", 0),
    ("arabic-digits", "\u0665\u0660k", (0, 3)),
    ("with-unit", "50kb/s", 0),
    ("mega", "1M", 0),
    ("zero", "0", 0),
]
URL_VALUES: list[tuple[str, str | bytes, Expect]] = [
    ("ftp", "ftp://x/release", 3),
    ("words", "not a url", 3),
    ("no-host", "http://", 3),
    ("open-bracket", "http://[::1", 3),
    ("space-in-host", "http://a b/release", 3),
    ("fragment", "{url}#top", 3),
    ("port-too-big", "http://127.0.0.1:99999/release", 3),
    ("port-letters", "http://127.0.0.1:abc/release", 3),
    ("control", "http://127.0.0.1\x01/release", 3),
    ("non-utf8", b"http://127.0.0.1/\xff", 3),
    ("huge", "http://127.0.0.1/" + "a" * HUGE, 3),
    ("file-scheme", "file:///etc/passwd", 3),
    ("javascript", "javascript:alert(1)", 3),
    ("scheme-relative", "//127.0.0.1/release", 3),
    ("userinfo-only", "http://user@/release", 3),
    ("nothing-listens", "http://127.0.0.1:9/release", 5),
    ("tls-to-plain", "https://127.0.0.1:{port}/release", 5),
    ("wrong-path", "http://127.0.0.1:{port}/nothing-here", 4),
    ("ipv6-loopback-closed", "http://[::1]:9/release", 5),
    ("upper-scheme", "HTTP://127.0.0.1:{port}/release", 0),
    ("trailing-slash", "{url}/", 0),
    ("query", "{url}?token=x", 0),
]
DIR_VALUES: list[tuple[str, str | bytes, Expect, Callable[[], str | None] | None]] = [
    ("tilde-unknown-user", "~nosuchuser/x", 3, None),
    ("newline", "{tmp}/a\nb", 3, None),
    ("control", "{tmp}/a\x1bb", 3, None),
    ("tab", "{tmp}/a\tb", 3, None),
    ("huge", "/tmp/" + "a" * HUGE, 3, None),
    ("long-component", "{tmp}/" + "a" * 300, 3, None),
    ("is-a-file", "{tmp}/afile", 6, None),
    ("under-a-file", "{tmp}/afile/sub", 6, None),
    ("is-a-fifo", "{tmp}/fifo", 6, None),
    ("dev-zero", "/dev/zero", 6, None),
    ("under-dev-null", "/dev/null/x", 6, None),
    ("proc", "/proc/self/sweep-cache", 6, None),
    ("read-only", "{tmp}/ro", 6, chattr_works),
    ("relative", "relcache", 0, None),
    ("tilde-home", "~/c", 0, None),
    ("non-utf8", b"", (0, 3), None),  # filled in per case: <tmp>/c\xff
    ("dot-dot", "{tmp}/x/../c", 0, None),
    ("symlink-loop", "{tmp}/loop/c", (3, 6), None),
]
PATH_VALUES: list[tuple[str, str | bytes, Expect]] = [
    ("tilde-unknown-user", "~nosuchuser/x", 3),
    ("huge", "/tmp/" + "a" * HUGE, 3),  # no file system holds it
    ("control", "a\x01b", 0),
    ("dev-zero", "/dev/zero", 0),
    ("non-utf8", b"/tmp/\xff", 0),
    ("empty", "", 0),
]


def env_cases() -> None:
    probe_resolve = ["resolve", "1.36"]
    for var in DURATION_VARS:
        for label, value, expect in DURATION_VALUES:
            args = download() if var == "E2E_DRA_DOWNLOAD_DEADLINE" else probe_resolve
            case(f"env/{var}/{label}", "env: durations", args, expect, (var,), env={var: value})
    case(
        "env/E2E_DRA_DOWNLOAD_DEADLINE/1ms",
        "env: durations",
        download(),
        5,
        ("E2E_DRA_DOWNLOAD_DEADLINE", "deadline"),
        env={"E2E_DRA_DOWNLOAD_DEADLINE": "1ms"},
    )
    var = "E2E_DRA_DOWNLOAD_MIN_SPEED"
    for label, value, expect in RATE_VALUES:
        case(f"env/{var}/{label}", "env: rates", download(), expect, (var,), env={var: value})
    var = "KUBERNETES_RELEASE_URL"
    for label, value, expect in URL_VALUES:
        named = (var,) if expect == 3 else ()
        case(
            f"env/{var}/{label}",
            "env: URLs",
            probe_resolve,
            expect,
            named,
            env={var: value, "E2E_DRA_DOWNLOAD_DEADLINE": "4"},
        )
    for label in ("empty", "blank"):  # blank is unset: the default; the flag keeps it on loopback
        case(
            f"env/{var}/{label}",
            "env: URLs",
            [*probe_resolve, "--base-url", "{url}"],
            0,
            env={var: "" if label == "empty" else "  "},
        )
    var = "E2E_DRA_RELEASE_SOURCE"
    for label, value, expect in [
        ("unknown", "bogus", 3),
        ("capitalised", "Download", 3),
        ("padded", " download ", 0),
        ("huge", "d" * HUGE, 3),
        ("control", "down\x01load", 3),
        ("non-utf8", b"download\xff", 3),
        ("empty-auto", "", 0),  # auto: the loopback tree answers, so download
        ("both", "download,build", 3),
    ]:
        named = (var,) if expect == 3 else ()
        case(
            f"env/{var}/{label}",
            "env: release source",
            probe_resolve,
            expect,
            named,
            env={var: value},
        )
    # cache directories: the download cache and the root (whose releases/ is the default)
    for var in ("KUBERNETES_SERVER_CACHE_DIR", "E2E_DRA_CACHE_DIR"):
        for label, value, expect, skip in DIR_VALUES:
            env: dict[str, str | bytes | None] = {var: value}
            if var == "E2E_DRA_CACHE_DIR":
                env["KUBERNETES_SERVER_CACHE_DIR"] = None
            setup = None
            if label == "read-only":
                setup = make_readonly
            elif label == "non-utf8":
                env[var] = b"%s/c\xff" % b"{tmp}"
            elif label == "symlink-loop":

                def setup(ctx: Ctx) -> None:
                    (ctx.tmp / "loop").symlink_to(ctx.tmp / "loop")

            named = (var,) if expect != 0 else ()
            made = case(
                f"env/{var}/{label}",
                "env: cache dirs",
                download(),
                expect,
                named,
                env=env,
                setup=setup,
                skip=skip,
            )
            if label == "non-utf8":
                made.setup = _fill_bytes_env(var)
    for label, value in [("empty", ""), ("blank", "  ")]:
        case(
            f"env/E2E_DRA_CACHE_DIR/{label}-uses-home",
            "env: cache dirs",
            download(),
            0,
            env={"E2E_DRA_CACHE_DIR": value, "KUBERNETES_SERVER_CACHE_DIR": None},
        )
    var = "E2E_DRA_NODE_DIR"
    for label, value, expect in [
        ("newline", "/tmp/a\nb", 3),
        ("tilde-unknown-user", "~nosuchuser/x", 3),
        ("is-a-file", "{tmp}/afile", 0),
        ("huge", "/tmp/" + "a" * HUGE, 3),
        ("non-utf8", b"/tmp/\xff", 0),
    ]:
        named = (var,) if expect == 3 else ()
        case(f"env/{var}/{label}", "env: paths", probe_resolve, expect, named, env={var: value})
    for var in ("ARTIFACTS", "E2E_DRA_HOST_LOCK", "KUBECONFIG"):
        for label, value, expect in PATH_VALUES:
            named = (var,) if expect == 3 else ()
            case(f"env/{var}/{label}", "env: paths", probe_resolve, expect, named, env={var: value})
    # strings passed on as they are: nothing in these commands may trip over them
    for var in (
        "E2E_DRA_KUBELET_VERSION",
        "EVICTION_HARD",
        "E2E_DRA_CONTAINERD_VERSION",
        "E2E_DRA_ETCD_VERSION",
        "E2E_DRA_CFSSL_VERSION",
        "RUNTIME_CONFIG",
        "GOSUMDB",
        "CI",
    ):
        for label, value in GARBAGE_STRINGS:
            case(f"env/{var}/{label}", "env: passed-on strings", ["versions"], 0, env={var: value})
    var = "E2E_DRA_KUBERNETES_VERSION"
    for label, value, expect in [
        ("leading-zero", "v01.37.2", 3),
        ("four-parts", "1.37.2.3", 3),
        ("latest-ish", "latest-ish", 3),
        ("ci-build", "v1.38.0-alpha.0.812+0123abcd", 3),
        ("dirty", "v1.37.2-dirty", 3),
        ("unknown-minor", "1.99", 4),
        ("unknown-release", "v1.99.0", 4),
        ("stable", "stable", 0),
        ("latest", "latest", 0),
        ("minor", "1.37", 0),
        ("v-minor", "v1.37", 0),
        ("minor-leading-zero", "1.037", 3),
        ("upper-case", "STABLE", 3),
        ("huge", "1" * HUGE, 3),
        ("control", "1.37\x01", 3),
        ("non-utf8", b"1.37\xff", 3),
        ("arabic-digits", "\u0661.\u0663\u0667", 3),
        ("empty", "", 0),
        ("minor-zero", "1.0", (0, 3, 4)),
    ]:
        named = (var,) if expect == 3 else ("1.9",) if expect == 4 else ()
        case(f"env/{var}/{label}", "env: versions", ["versions"], expect, named, env={var: value})
    var = "KUBE_GIT_VERSION_FILE"
    files: list[tuple[str, bytes | None, str, Expect]] = [
        ("missing", None, "{tmp}/nope", 3),
        ("is-a-dir", None, "{tmp}", 3),
        ("dev-zero", None, "/dev/zero", 3),
        ("fifo", None, "{tmp}/fifo", 3),
        ("tilde-unknown-user", None, "~nosuchuser/v", 3),
        ("empty-file", b"", "{tmp}/v", 3),
        ("garbage", b"\x00\xff\xfe garbage", "{tmp}/v", 3),
        ("non-utf8", b"KUBE_GIT_VERSION='v1.37.2\xff'\n", "{tmp}/v", 3),
        ("huge", b"KUBE_GIT_VERSION='v1.37.2'\n" + b"#" * MB, "{tmp}/v", 3),
        ("unclosed-quote", b"KUBE_GIT_VERSION='v1.37.2\n", "{tmp}/v", 3),
        ("leading-zero", b"KUBE_GIT_VERSION='v01.37.2'\n", "{tmp}/v", 3),
        ("ci-build", b"KUBE_GIT_VERSION='v1.38.0-alpha.0.812+0123abcd'\n", "{tmp}/v", 3),
        ("unknown-release", b"KUBE_GIT_VERSION='v1.99.0'\n", "{tmp}/v", 4),
        ("good", b"KUBE_GIT_VERSION='v1.37.2'\n", "{tmp}/v", 0),
        ("no-version", b"KUBE_GIT_COMMIT=abc\n", "{tmp}/v", 3),
        ("symlink-loop", None, "{tmp}/loop", 3),
    ]
    for label, content, where, expect in files:

        def setup(ctx: Ctx, content: bytes | None = content, label: str = label) -> None:
            if content is not None:
                (ctx.tmp / "v").write_bytes(content)
            if label == "symlink-loop":
                (ctx.tmp / "loop").symlink_to(ctx.tmp / "loop")

        named = (var,) if expect == 3 else ()
        case(
            f"env/{var}/{label}",
            "env: version file",
            ["versions"],
            expect,
            named,
            env={var: where},
            setup=setup,
        )
    for var in ("KUBERNETES_SERVER_BIN_DIR", "KUBERNETES_SOURCE_DIR"):
        for label, where, expect in [
            ("missing", "{tmp}/nope", 3),
            ("is-a-file", "{tmp}/afile", 3),
            ("fifo", "{tmp}/fifo", 3),
            ("dev-zero", "/dev/zero", 3),
            ("empty-dir", "{tmp}/cwd", 3),
            ("tilde-unknown-user", "~nosuchuser/x", 3),
            ("huge", "/tmp/" + "a" * HUGE, 3),
            ("control", "{tmp}/a\x01b", 3),
            ("non-utf8", b"/tmp/\xff\xfe", 3),
            ("symlink-loop", "{tmp}/loop", 3),
        ]:

            def setup(ctx: Ctx, label: str = label) -> None:
                if label == "symlink-loop":
                    (ctx.tmp / "loop").symlink_to(ctx.tmp / "loop")

            case(
                f"env/{var}/{label}",
                "env: local build dirs",
                ["versions"],
                expect,
                (var,),
                env={var: where},
                setup=setup,
            )
    for label, script, expect, timeout in [
        ("good", "echo 'Kubernetes v1.37.2'", 0, 30.0),
        ("garbage", "echo garbage", 3, 30.0),
        ("non-utf8", "printf 'Kubernetes v1.37.2\\377'", 3, 30.0),
        ("fails", "echo oops >&2; exit 1", 3, 30.0),
        ("huge", "head -c 5000000 /dev/zero", 3, 30.0),
        ("killed", "kill -9 $$", 3, 30.0),
        ("hangs", "exec sleep 600", 3, 75.0),
    ]:

        def setup(ctx: Ctx, script: str = script, label: str = label) -> None:
            bin_dir = ctx.tmp / "bin"
            bin_dir.mkdir()
            (bin_dir / "kube-apiserver").write_text(f"#!/bin/sh\n{script}\n")
            (bin_dir / "kube-apiserver").chmod(0o755)

        case(
            f"env/KUBERNETES_SERVER_BIN_DIR/apiserver-{label}",
            "env: local build dirs",
            ["versions"],
            expect,
            ("kube-apiserver",) if expect else (),
            env={"KUBERNETES_SERVER_BIN_DIR": "{tmp}/bin"},
            setup=setup,
            timeout=timeout,
        )
    for label, setup_kind, expect in [
        ("apiserver-is-a-dir", "dir", 3),
        ("apiserver-not-executable", "noexec", 3),
    ]:

        def setup(ctx: Ctx, kind: str = setup_kind) -> None:
            bin_dir = ctx.tmp / "bin"
            bin_dir.mkdir()
            if kind == "dir":
                (bin_dir / "kube-apiserver").mkdir()
            else:
                (bin_dir / "kube-apiserver").write_text("#!/bin/sh\necho 'Kubernetes v1.37.2'\n")
                (bin_dir / "kube-apiserver").chmod(0o644)

        case(
            f"env/KUBERNETES_SERVER_BIN_DIR/{label}",
            "env: local build dirs",
            ["versions"],
            expect,
            ("kube-apiserver",),
            env={"KUBERNETES_SERVER_BIN_DIR": "{tmp}/bin"},
            setup=setup,
        )
    # the Go side
    var = "GOPROXY"
    for label, value, expect in [
        ("off", "off", 3),
        ("direct", "direct", 3),
        ("garbage", "garbage", 3),
        ("space", "http://a b", 3),
        ("ftp", "ftp://x", 3),
        ("off-first", "off,{proxy}", 3),
        ("huge", "http://" + "a" * HUGE, 3),
        ("control", "http://127.0.0.1:\x01", 3),
        ("non-utf8", b"http://127.0.0.1/\xff", 3),
        ("fragment", "{proxy}#x", 3),
        ("nothing-listens", "http://127.0.0.1:9", 5),
        ("proxy-then-direct", "{proxy},direct", 0),
        ("pipe-list", "{proxy}|https://127.0.0.1:9", 0),
        ("empty-reads-go-env", "", 0),
    ]:

        def setup(ctx: Ctx) -> None:  # `go env GOPROXY` answers the loopback proxy
            assert ctx.proxy is not None
            (ctx.tmp / "goenv").write_text(f"GOPROXY={ctx.proxy.url}\n")

        named = (var,) if expect in (3, 5) else ()
        case(
            f"env/{var}/{label}",
            "env: Go",
            probe_resolve,
            expect,
            named,
            env={var: value, "E2E_DRA_RELEASE_SOURCE": "build"},
            proxy=True,
            setup=setup,
            timeout=45.0,
        )
    var = "GOTOOLCHAIN"
    for label, value, expect in [
        ("word", "gofoo", 3),
        ("bad-minor", "go1.x", 3),
        ("leading-zero", "go1.027", 3),
        ("huge", "go1." + "1" * HUGE, (0, 3)),  # a well-formed name; only a fetch would fail
        ("control", "go1.27\x01", 3),
        ("non-utf8", b"go1.27\xff", 3),
        ("local", "local", 0),
        ("auto", "go1.27.3+auto", 0),
        ("path", "path", 0),
        ("empty", "", 0),
    ]:
        named = (var,) if expect == 3 else ()
        case(
            f"env/{var}/{label}",
            "env: Go",
            probe_resolve,
            expect,
            named,
            env={var: value, "E2E_DRA_RELEASE_SOURCE": "build"},
            proxy=True,
        )


def _fill_bytes_env(var: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        ctx.case.steps[0].env[var] = os.fsencode(str(ctx.tmp)) + b"/c\xff"

    return setup


# -- 2. command-line flags -------------------------------------------------------------------------


def flag_cases() -> None:
    for flag in ("--deadline", "--min-speed"):
        values = DURATION_VALUES if flag == "--deadline" else RATE_VALUES
        for label, value, expect in values:
            if label in {"empty", "blank"}:
                expect = 3  # a flag given empty is not "unset"
            case(
                f"flag/{flag}/{label}",
                "flags: numbers",
                [*download(), flag, value],
                expect,
                (flag,),
            )
    case(
        "flag/--deadline/1ms",
        "flags: numbers",
        [*download(), "--deadline", "1ms"],
        5,
        ("deadline",),
    )
    for flag in ("--os", "--arch"):
        for label, value, expect in [
            ("empty", "", 3),
            ("slash", "a/b", 3),
            ("dot-dot", "../x", 3),
            ("upper", "LINUX", 3),
            ("long", "x" * 40, 3),
            ("newline", "linux\n", 3),
            ("non-utf8", b"linux\xff", 3),
            ("fullwidth", "\uff4c\uff49\uff4e\uff55\uff58", 3),
            ("huge", "a" * HUGE, 3),
            ("unpublished", "darwin" if flag == "--os" else "arm64", 4),
        ]:
            named = (flag,) if expect == 3 else ("v1.36.5",)
            case(
                f"flag/{flag}/{label}", "flags: platform", [*download(), flag, value], expect, named
            )
    for label, value, expect, skip in DIR_VALUES:
        args: list[str | bytes] = [*download(), "--cache-dir", value]
        if label == "non-utf8":
            args = []  # filled in below
        named = ("--cache-dir",) if expect != 0 else ()
        setup = make_readonly if label == "read-only" else None
        if label == "symlink-loop":

            def setup(ctx: Ctx) -> None:
                (ctx.tmp / "loop").symlink_to(ctx.tmp / "loop")

        made = case(
            f"flag/--cache-dir/{label}", "flags: paths", args, expect, named, setup=setup, skip=skip
        )
        if label == "non-utf8":

            def fill(ctx: Ctx, made: Case = made) -> None:
                made.steps[0].args = [
                    *download(),
                    "--cache-dir",
                    os.fsencode(str(ctx.tmp)) + b"/c\xff",
                ]

            made.setup = fill
    case(
        "flag/--cache-dir/empty",
        "flags: paths",
        [*download(), "--cache-dir", ""],
        3,
        ("--cache-dir",),
    )
    for label, value, expect in URL_VALUES:
        named = ("--base-url",) if expect == 3 else ()
        case(
            f"flag/--base-url/{label}",
            "flags: URLs",
            ["resolve", "1.36", "--base-url", value],
            expect,
            named,
            env={"E2E_DRA_DOWNLOAD_DEADLINE": "4"},
        )
    case("flag/--base-url/empty", "flags: URLs", ["resolve", "1.36", "--base-url", ""], (0, 3), ())
    for flag in ("--bin-dir", "--source-dir"):
        for label, value in [
            ("empty", ""),
            ("missing", "{tmp}/nope"),
            ("is-a-file", "{tmp}/afile"),
            ("fifo", "{tmp}/fifo"),
            ("dev-zero", "/dev/zero"),
            ("empty-dir", "{tmp}/cwd"),
            ("tilde-unknown-user", "~nosuchuser/x"),
            ("huge", "/tmp/" + "a" * HUGE),
            ("non-utf8", b"/tmp/\xff"),
        ]:
            case(f"flag/{flag}/{label}", "flags: paths", ["versions", flag, value], 3, (flag,))
    for label, value, expect in [
        ("empty", "", (3, 5)),  # empty: GOPROXY's proxy, whose zip is missing
        ("ftp", "ftp://x", 3),
        ("words", "not a url", 3),
        ("space", "http://a b", 3),
        ("huge", "http://" + "a" * HUGE, 3),
        ("non-utf8", b"http://127.0.0.1/\xff", 3),
        ("nothing-listens", "http://127.0.0.1:9", 5),
    ]:
        named = ("--proxy",) if expect == 3 else ()
        case(
            f"flag/build--proxy/{label}",
            "flags: URLs",
            ["build", "v1.36.5", "--proxy", value],
            expect,
            named,
            env={"E2E_DRA_RELEASE_SOURCE": "build"},
            proxy=True,
            timeout=45.0,
        )
    for label, value, expect in [
        ("empty", "", 3),
        ("newline", "{tmp}/a\nb", 3),
        ("is-a-file", "{tmp}/afile", 6),
        ("under-a-file", "{tmp}/afile/x", 6),
        ("tilde-unknown-user", "~nosuchuser/x", 3),
    ]:
        case(
            f"flag/build--cache-dir/{label}",
            "flags: paths",
            ["build", "v1.36.5", "--proxy", "{proxy}", "--cache-dir", value],
            expect,
            ("--cache-dir",),
            env={"E2E_DRA_RELEASE_SOURCE": "build"},
            proxy=True,
        )
    # usage
    for label, args, expect in [
        ("no-command", [], 2),
        ("unknown-command", ["frobnicate"], 2),
        ("empty-command", [""], 2),
        ("non-utf8-command", [b"\xff"], 2),
        ("unknown-option", ["resolve", "1.36", "--frob"], 2),
        ("missing-argument", ["download"], 2),
        ("missing-value", [*download(), "--deadline"], 2),
        ("extra-argument", ["resolve", "1.36", "1.37"], 2),
        ("help", ["--help"], 0),
        ("short-help", ["-h"], 0),
        ("download-help", ["download", "--help"], 0),
        ("build-help", ["build", "--help"], 0),
        ("version", ["--version"], 0),
        ("huge-option", ["resolve", "1.36", "--" + "x" * HUGE], 2),
    ]:
        case(f"usage/{label}", "usage", args, expect, (), advice=expect == 2)


# -- 3. version specs ------------------------------------------------------------------------------


def version_cases() -> None:
    for label, spec, expect in [
        ("leading-zero-major", "v01.37.2", 3),
        ("leading-zero-minor", "v1.037.2", 3),
        ("leading-zero-patch", "v1.36.05", 3),
        ("four-parts", "1.37.2.3", 3),
        ("latest-ish", "latest-ish", 3),
        ("stable-ish", "stable-1.36", 3),
        ("upper-stable", "STABLE", 3),
        ("upper-v", "V1.36.5", 3),
        ("ci-build", "v1.38.0-alpha.0.812+0123abcd", 3),
        ("describe", "v1.37.0-alpha.0.812-g0123abcd", 3),
        ("dirty", "v1.36.5-dirty", 3),
        ("empty", "", 3),
        ("blank", "   ", 3),
        ("huge", "1" * HUGE, 3),
        ("control", "v1.36\x01", 3),
        ("non-utf8", b"v1.36.5\xff", 3),
        ("arabic-digits", "\u0661.\u0663\u0666", 3),
        ("fullwidth", "\uff11.\uff13\uff16", 3),
        ("minor-10-digits", "1.9999999999", 3),
        ("unknown-minor", "1.99", 4),
        ("minor-nine-digits", "1.999999999", 4),
        ("unknown-release", "v1.36.99", 4),  # resolve prints an exact version as it is
        ("no-v", "1.36.5", 0),
        ("padded", " 1.36 ", 0),
        ("v-minor", "v1.36", 0),
        ("stable", "stable", 0),
        ("latest", "latest", 0),
        ("rc-leading-zero", "v1.37.0-rc.01", 3),
        ("pre-kind", "v1.37.0-gamma.1", 3),
    ]:
        named = (
            (repr(spec)[1:-1][:40],)
            if expect == 3 and isinstance(spec, str) and spec.strip() and len(spec) < 100
            else ()
        )
        case(f"version/download/{label}", "version specs", ["download", spec], expect, named)
        if expect != 0 or label in {"no-v", "padded"}:
            resolved = 0 if label == "unknown-release" else expect
            case(f"version/resolve/{label}", "version specs", ["resolve", spec], resolved, named)
    for label, spec, expect in [
        ("ci-build", "v1.37.0-alpha.0.812+0123abcd", 0),
        ("alpha0", "v1.37.0-alpha.0", 0),
        ("describe", "v1.37.0-alpha.0.812-g0123abcd", 0),
        ("dirty", "v1.37.2-dirty", 0),
        ("minor", "1.36", 0),
        ("first-minor", "v1.0.0", 3),
        ("zero-zero", "v0.0.1", 3),
        ("alpha0-of-1.1", "v1.1.0-alpha.0", 3),
        ("major-2", "v2.0.0", 3),
        ("huge-major", "v" + "9" * 100 + ".1.1", (0, 3)),
        ("too-long", "v1.36." + "9" * 200, 3),
        ("empty", "", 3),
        ("leading-zero", "v01.37.2", 3),
        ("four-parts", "1.37.2.3", 3),
        ("latest", "latest", 3),
        ("non-utf8", b"v1.37\xff", 3),
        ("newline", "v1.37.2\nv1.36.1", 3),
    ]:
        case(
            f"version/previous-minor/{label}", "version specs", ["previous-minor", spec], expect, ()
        )
    # markers that name odd things (the tree, not the user, says the version)
    for label, marker, content, spec, expect in [
        ("ci-build", "latest.txt", "v1.38.0-alpha.0.812+0123abcd\n", "latest", 0),
        ("dirty", "latest.txt", "v1.38.0-alpha.0.812+0123abcd-dirty\n", "latest", 5),
        ("other-line", "stable-1.36.txt", "v1.35.8\n", "1.36", 5),
        ("two-versions", "stable.txt", "v1.36.5\nv1.37.2\n", "stable", 5),
        ("bom", "stable.txt", "\ufeffv1.37.2\n", "stable", (0, 5)),
        ("crlf", "stable.txt", "v1.37.2\r\n", "stable", 0),
        ("leading-zero", "stable.txt", "v01.37.2\n", "stable", 5),
    ]:

        def setup(ctx: Ctx, marker: str = marker, content: str = content) -> None:
            ctx.server.put(marker, content)
            if "812+0123abcd" in content and "dirty" not in content:
                ctx.publish(content.strip())

        named = (marker,) if expect == 5 else ()
        case(
            f"version/marker/{label}",
            "version specs",
            ["download", spec],
            expect,
            named,
            setup=setup,
        )


# -- 4. release-tree faults ------------------------------------------------------------------------


def _tar(members: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for item in members:
            if isinstance(item, tuple):
                archive.addfile(item[0], io.BytesIO(item[1]))
            else:
                archive.addfile(item)
    return buffer.getvalue()


def _info(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo("kubernetes/server/bin/" + name if "/" not in name else name)
    info.type, info.size, info.linkname, info.mode, info.mtime = (
        kind,
        size,
        link,
        0o755,
        1_700_000_000,
    )
    return info


def _with_member(
    special: tarfile.TarInfo | tuple[tarfile.TarInfo, bytes], drop: str = "kubelet"
) -> bytes:
    items: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]] = []
    for m in release_members():
        if Path(m.name).name == drop:
            continue
        info = tarfile.TarInfo(m.name)
        info.size, info.mode, info.mtime = len(m.data), 0o755, 1_700_000_000
        items.append((info, m.data))
    items.append(special)
    return _tar(items)


def release_cases() -> None:
    tb = f"v1.36.5/{TARBALL}"
    sha = f"{tb}.sha512"

    def fault(path: str, **kw: object) -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            ctx.server.fail(path, Fault(**kw))  # type: ignore[arg-type]

        return setup

    # statuses
    for where, path, spec in [
        ("tarball", tb, "v1.36.5"),
        ("sha512", sha, "v1.36.5"),
        ("marker", "stable-1.36.txt", "1.36"),
    ]:
        name = Path(path).name
        for status, expect, times in [
            (403, 5, 1),
            (401, 5, 1),
            (410, (4, 5), 1),
            (500, 5, 10),
            (502, 0, 1),
            (418, 5, 1),
        ]:
            case(
                f"release/{where}/http-{status}{'-always' if times > 1 else '-once'}",
                "release tree",
                ["download", spec],
                expect,
                (name,) if expect else (),
                setup=fault(path, status=status, times=times),
                timeout=45.0,
            )
        case(
            f"release/{where}/429-retry-after-1",
            "release tree",
            ["download", spec],
            0,
            setup=fault(path, status=429, headers={"Retry-After": "1"}),
        )
        case(
            f"release/{where}/429-retry-after-past-deadline",
            "release tree",
            ["download", spec, "--deadline", "5"],
            5,
            (name, "Retry-After"),
            setup=fault(path, status=429, headers={"Retry-After": "3600"}, times=10),
        )
        case(
            f"release/{where}/429-retry-after-garbage",
            "release tree",
            ["download", spec],
            0,
            setup=fault(path, status=429, headers={"Retry-After": "soon\x7f"}, times=2),
        )
        case(
            f"release/{where}/503-retry-after-date",
            "release tree",
            ["download", spec],
            0,
            setup=fault(path, status=503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
        )
        case(
            f"release/{where}/redirect-loop",
            "release tree",
            ["download", spec],
            5,
            (name, "loop"),
            setup=fault(path, redirect_to_self=True, times=1000),
        )
        case(
            f"release/{where}/mislabelled-gzip",
            "release tree",
            ["download", spec],
            0,
            setup=lambda ctx, p=path: ctx.server.mislabel(p),
        )
        case(
            f"release/{where}/stalls",
            "release tree",
            ["download", spec, "--deadline", "4"],
            5,
            (name, "deadline"),
            setup=fault(path, stall_after=2, times=100),
        )
    case(
        "release/tarball/404",
        "release tree",
        ["download", "v1.36.5"],
        (4, 5),
        (TARBALL,),
        setup=lambda ctx: ctx.server.files.pop(f"/release/{tb}"),
    )
    case("release/unknown-version", "release tree", ["download", "v1.36.9"], 4, ("v1.36.9",))
    case("release/marker/both-404", "release tree", ["download", "1.34"], 4, ("1.34",))
    case(
        "release/marker/latest-fallback",
        "release tree",
        ["download", "1.38"],
        0,
        setup=lambda ctx: (
            ctx.server.put("latest-1.38.txt", "v1.38.0-beta.0\n"),
            ctx.publish("v1.38.0-beta.0"),
        ),
    )
    # bodies
    case(
        "release/tarball/truncated-always",
        "release tree",
        download(),
        5,
        (TARBALL,),
        setup=fault(tb, drop_after=1000, times=100),
        timeout=45.0,
    )
    case(
        "release/tarball/truncated-once",
        "release tree",
        download(),
        0,
        setup=fault(tb, drop_after=5000),
    )
    case(
        "release/tarball/range-ignored-after-drop",
        "release tree",
        download(),
        0,
        setup=lambda ctx: (
            ctx.server.fail(tb, Fault(drop_after=5000)),
            setattr(ctx.server, "ignore_range", True),
        ),
    )
    case(
        "release/tarball/trickle-past-deadline",
        "release tree",
        [*download(), "--deadline", "3"],
        5,
        (TARBALL, "deadline"),
        setup=fault(tb, trickle=2000, times=100),
    )

    def wrong_sum(ctx: Ctx) -> None:
        ctx.server.put(sha, hashlib.sha512(b"something else").hexdigest())

    case(
        "release/sha512/wrong",
        "release tree",
        download(),
        5,
        (TARBALL, "mismatch"),
        setup=wrong_sum,
    )
    made = case(
        "release/sha512/wrong-then-fixed",
        "release tree",
        download(),
        5,
        (TARBALL,),
        setup=wrong_sum,
    )
    made.steps.append(Step(download(), 0, before=lambda ctx: ctx.publish("v1.36.5")))
    for label, body in [
        ("garbage", "not a digest at all"),
        ("empty", ""),
        ("html", "<html><body>404 Not Found</body></html>"),
        ("short-hex", "abcdef"),
        ("non-hex", "z" * 128),
        ("binary", b"\x00\xff" * 64),
        ("huge", "a" * (2 * MB)),
        ("sha256-length", "a" * 64),
    ]:
        case(
            f"release/sha512/{label}",
            "release tree",
            download(),
            5,
            (f"{TARBALL}.sha512",),
            setup=lambda ctx, b=body: ctx.server.put(sha, b),
        )
    case(
        "release/sha512/with-file-name",
        "release tree",
        download(),
        0,
        setup=lambda ctx: ctx.publish("v1.36.5", sidecar_format="named"),
    )
    case(
        "release/sha512/upper-case",
        "release tree",
        download(),
        0,
        setup=lambda ctx: ctx.server.put(sha, ctx.server.files[f"/release/{sha}"].upper()),
    )
    case(
        "release/sha512/missing-sha256-present",
        "release tree",
        download(),
        0,
        setup=lambda ctx: ctx.publish("v1.36.5", sidecars=("sha256",)),
    )
    case(
        "release/sha512/none-published",
        "release tree",
        download(),
        5,
        (TARBALL, "checksum"),
        setup=lambda ctx: ctx.server.files.pop(f"/release/{sha}"),
    )
    # tarballs that match their checksum and are broken inside
    bad_tarballs: list[tuple[str, Callable[[], bytes], str]] = [
        ("garbage", lambda: os.urandom(5000), "readable"),
        ("empty", lambda: b"", "readable"),
        ("plain-tar", lambda: gzip.decompress(server_tarball(release_members())), "readable"),
        ("gzip-of-garbage", lambda: gzip.compress(os.urandom(5000)), "readable"),
        ("truncated-gzip", lambda: server_tarball(release_members())[:20000], "readable"),
        ("html", lambda: b"<html><body>Login</body></html>", "readable"),
        (
            "missing-kubelet",
            lambda: server_tarball(
                [m for m in release_members() if not m.name.endswith("/kubelet")]
            ),
            "kubelet",
        ),
        ("no-binaries", lambda: server_tarball([Member("kubernetes/README", b"x")]), "lacks"),
        ("kubelet-directory", lambda: _with_member(_info("kubelet", tarfile.DIRTYPE)), "kubelet"),
        (
            "kubelet-symlink",
            lambda: _with_member(_info("kubelet", tarfile.SYMTYPE, link="/etc/passwd")),
            "kubelet",
        ),
        (
            "kubelet-hardlink",
            lambda: _with_member(
                _info("kubelet", tarfile.LNKTYPE, link="kubernetes/server/bin/kube-proxy")
            ),
            "kubelet",
        ),
        ("kubelet-char-device", lambda: _with_member(_info("kubelet", tarfile.CHRTYPE)), "kubelet"),
        (
            "kubelet-block-device",
            lambda: _with_member(_info("kubelet", tarfile.BLKTYPE)),
            "kubelet",
        ),
        ("kubelet-fifo", lambda: _with_member(_info("kubelet", tarfile.FIFOTYPE)), "kubelet"),
        ("absolute-member", lambda: _with_member((_info("/kubelet", size=3), b"abc")), "kubelet"),
        (
            "dot-dot-member",
            lambda: _with_member((_info("../../kubelet", size=3), b"abc")),
            "kubelet",
        ),
        (
            "kubelet-twice",
            lambda: _with_member((_info("kubelet", size=3), b"abc"), drop="none"),
            "kubelet",
        ),
        ("size-lie", lambda: server_tarball(release_members())[:-300], "readable"),
    ]
    for label, make, said in bad_tarballs:
        case(
            f"release/tarball/{label}",
            "release tree",
            download(),
            5,
            (TARBALL, said),
            setup=lambda ctx, mk=make: ctx.put_tarball("v1.36.5", mk()),
        )

    def escape(ctx: Ctx) -> None:  # binaries are copied by name: a linked dir leads nowhere
        link = _info("kubernetes/server/bin", tarfile.SYMTYPE, link="/tmp")
        ctx.put_tarball("v1.36.5", _with_member(link, drop="none"))
        ctx.published["v1.36.5"] = {
            Path(m.name).name: m.data for m in release_members() if Path(m.name).name in WANTED
        }

    case("release/tarball/symlink-dir-escape", "release tree", download(), 0, setup=escape)
    case(
        "release/tarball/gzip-bomb-32M-binary",
        "release tree",
        download(),
        0,
        setup=lambda ctx: ctx.publish(
            "v1.36.5",
            [
                Member(m.name, b"\0" * (32 * MB) if m.name.endswith("/kubelet") else m.data)
                for m in release_members()
            ],
        ),
    )
    case(
        "release/tarball/without-kubectl",
        "release tree",
        download(),
        0,
        setup=lambda ctx: ctx.publish("v1.36.5", release_members(kubectl=False)),
    )
    case(
        "release/tarball/mislabelled-and-checksum",
        "release tree",
        download(),
        0,
        setup=lambda ctx: (ctx.server.mislabel(tb), ctx.server.mislabel(sha)),
    )
    # markers
    for label, body, expect in [
        ("html", "<!DOCTYPE html><html><body>Sign in</body></html>", 5),
        ("empty", "", 5),
        ("huge", "v" * (2 * MB), 5),
        ("exactly-1MiB", "v1.36.5" + " " * (MB - 7), 0),
        ("binary", b"\x00\xff\xfe\x01" * 8, 5),
        ("gzipped-unlabelled", gzip.compress(b"v1.36.5\n"), 5),
        ("json", '{"version": "v1.36.5"}', 5),
    ]:
        case(
            f"release/marker/{label}",
            "release tree",
            ["download", "1.36"],
            expect,
            ("stable-1.36.txt",) if expect else (),
            setup=lambda ctx, b=body: ctx.server.put("stable-1.36.txt", b),
        )

    def gz_labelled(ctx: Ctx) -> None:
        ctx.server.put("stable-1.36.txt", gzip.compress(b"v1.36.5\n"))
        ctx.server.mislabel("stable-1.36.txt")

    case(
        "release/marker/gzipped-labelled",
        "release tree",
        ["download", "1.36"],
        0,
        setup=gz_labelled,
    )

    def bomb(ctx: Ctx) -> None:
        ctx.server.put("stable-1.36.txt", gzip.compress(b"\0" * 200 * MB, compresslevel=1))
        ctx.server.mislabel("stable-1.36.txt")

    case(
        "release/marker/gzip-bomb",
        "release tree",
        ["download", "1.36"],
        5,
        ("stable-1.36.txt",),
        setup=bomb,
    )
    case(
        "release/marker/huge-stable-probe",
        "release tree",
        ["resolve", "1.36"],
        0,
        env={"E2E_DRA_RELEASE_SOURCE": ""},
        setup=lambda ctx: ctx.server.put("stable.txt", b"v" * (64 * MB)),
    )
    # servers that are not HTTP servers
    for mode, expect, extra in [
        ("silent", 5, ["--deadline", "4"]),
        ("garbage", 5, []),
        ("endless", 5, []),
        ("liar", (0, 5), []),
    ]:

        def setup(ctx: Ctx, mode: str = mode) -> None:
            ctx.raw.append(RawServer(mode))

        case(
            f"release/raw-server/{mode}",
            "release tree",
            ["download", "1.36", "--base-url", "{raw}", *extra],
            expect,
            ("stable-1.36.txt",) if expect == 5 else (),
            setup=setup,
            timeout=45.0,
        )


# -- 5. module-proxy faults ------------------------------------------------------------------------


def proxy_cases() -> None:
    info = "/k8s.io/kubernetes/@v/v1.36.5.info"
    mod = "/k8s.io/kubernetes/@v/v1.36.5.mod"
    listing = "/k8s.io/kubernetes/@v/list"
    build = ["build", "v1.36.5", "--proxy", "{proxy}"]
    resolve = ["resolve", "1.36"]
    env = {"E2E_DRA_RELEASE_SOURCE": "build"}

    def answer(
        path: str, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            assert ctx.proxy is not None
            ctx.proxy.answers[path] = (status, body, headers or {})

        return setup

    html = b"<!DOCTYPE html><html><body>Sign in</body></html>"
    for where, path, args in [
        ("info", info, build),
        ("mod", mod, build),
        ("list", listing, resolve),
    ]:
        name = path.rsplit("/", 1)[1]
        for label, status, body, expect in [
            ("html", 200, html, 5 if where != "list" else 4),
            ("http-500", 500, b"oops", 5),
            ("http-403", 403, b"forbidden", 4 if where == "info" else 5 if where == "mod" else 4),
            ("http-418", 418, b"teapot", 5),
            ("huge", 200, b"x" * (2 * MB), 5),
            ("empty", 200, b"", 5 if where != "list" else 4),
            ("binary", 200, b"\x00\xff\xfe" * 100, 5 if where != "list" else 4),
            ("json-array", 200, b"[1, 2]", 5 if where != "list" else 4),
        ]:
            if where == "mod" and label in {"http-403"}:
                expect = (4, 5)
            named: tuple[str, ...] = (name,) if expect == 5 and where != "list" else ()
            if expect == 5 and where == "list":
                named = ("list",)
            case(
                f"proxy/{where}/{label}",
                "module proxy",
                args,
                expect,
                named,
                env=env,
                proxy=True,
                setup=answer(path, status, body),
                timeout=45.0,
            )
    case(
        "proxy/info/wrong-json-types",
        "module proxy",
        build,
        5,
        ("v1.36.5.info",),
        env=env,
        proxy=True,
        setup=answer(info, 200, b'{"Version": "v1.36.5", "Time": 5}'),
    )
    case(
        "proxy/mod/go-directive-garbage",
        "module proxy",
        build,
        5,
        (".mod", "GOPROXY"),
        env=env,
        proxy=True,
        setup=answer(mod, 200, b"module k8s.io/kubernetes\n\ngo banana\n"),
    )
    # needs a newer Go than this machine's, and GOTOOLCHAIN=local forbids fetching one: exit 7
    case(
        "proxy/mod/go-too-new",
        "module proxy",
        build,
        (5, 7),
        ("GOTOOLCHAIN",),
        env=env,
        proxy=True,
        setup=answer(mod, 200, b"module k8s.io/kubernetes\n\ngo 9.99\n"),
        timeout=60.0,
    )
    case(
        "proxy/mod/zip-missing",
        "module proxy",
        build,
        5,
        ("v1.36.5", "GOPROXY"),
        env=env,
        proxy=True,
        timeout=90.0,
    )
    case(
        "proxy/unknown-version/build",
        "module proxy",
        ["build", "v1.99.0", "--proxy", "{proxy}"],
        4,
        ("v1.99.0", "GOPROXY"),
        env=env,
        proxy=True,
    )
    case(
        "proxy/unknown-version/resolve",
        "module proxy",
        ["resolve", "1.99"],
        4,
        ("1.99",),
        env=env,
        proxy=True,
    )
    case(
        "proxy/unknown-version/build-minor",
        "module proxy",
        ["build", "1.99", "--proxy", "{proxy}"],
        4,
        ("1.99",),
        env=env,
        proxy=True,
    )
    case(
        "proxy/ci-build",
        "module proxy",
        ["build", "v1.38.0-alpha.0.812+0123abcd", "--proxy", "{proxy}"],
        3,
        (),
        env=env,
        proxy=True,
    )
    case(
        "proxy/list-garbage-lines",
        "module proxy",
        resolve,
        0,
        env=env,
        proxy=True,
        setup=answer(listing, 200, b"garbage\nv1.36.5\n\xff\xfe\nv01.36.9\n"),
    )
    case(
        "proxy/stable-empty-list",
        "module proxy",
        ["resolve", "stable"],
        (4, 5),
        ("stable",),
        env=env,
        proxy=True,
        setup=answer(listing, 200, b""),
    )
    case(
        "proxy/redirect-loop",
        "module proxy",
        resolve,
        5,
        ("loop", "GOPROXY"),
        env=env,
        proxy=True,
        setup=answer(listing, 302, b"", {"Location": listing}),
    )
    for mode in ("silent", "garbage"):

        def setup(ctx: Ctx, mode: str = mode) -> None:
            ctx.raw.append(RawServer(mode))

        # a proxy that never answers: no deadline applies (6 tries of 30 s), slow but bounded
        case(
            f"proxy/raw-server/{mode}",
            "module proxy",
            ["resolve", "1.36"],
            5,
            ("GOPROXY",),
            env={**env, "GOPROXY": "{raw}"},
            setup=setup,
            timeout=240.0,
        )


# -- 6. cache damage between runs ------------------------------------------------------------------


def _first_download(ctx: Ctx) -> None:
    got = run_step(ctx, Step(download()))
    if got["status"] != 0:
        raise RuntimeError(f"the first download failed: {got['stderr']}")
    os.chmod(ctx.entry(), 0o755)


def _damage(kind: str) -> Callable[[Ctx], None]:
    def damage(ctx: Ctx) -> None:
        entry = ctx.entry()
        kubelet = entry / "kubelet"
        marker = entry / MARKER
        if kubelet.exists():
            os.chmod(kubelet, 0o755)
        if kind == "delete-binary":
            kubelet.unlink()
        elif kind == "truncate-binary":
            os.truncate(kubelet, 10)
        elif kind == "one-byte-same-size-and-mtime":
            before = kubelet.stat()
            with open(kubelet, "r+b") as out:
                out.seek(100)
                out.write(b"X")
            os.utime(kubelet, ns=(before.st_atime_ns, before.st_mtime_ns))
        elif kind == "one-byte-new-mtime":
            with open(kubelet, "r+b") as out:
                out.write(b"X")
        elif kind == "binary-replaced-by-symlink":
            kubelet.unlink()
            kubelet.symlink_to("/bin/true")
        elif kind == "binary-replaced-by-dir":
            kubelet.unlink()
            kubelet.mkdir()
        elif kind == "marker-garbage":
            marker.write_text("garbage{")
        elif kind == "marker-empty":
            marker.write_text("")
        elif kind == "marker-empty-object":
            marker.write_text("{}")
        elif kind == "marker-list":
            marker.write_text("[1, 2, 3]")
        elif kind == "marker-deleted":
            marker.unlink()
        elif kind == "marker-is-a-dir":
            marker.unlink()
            marker.mkdir()
        elif kind == "marker-missing-files":
            record = json.loads(marker.read_text())
            record["files"]["ghost"] = [10, 0, "0" * 64]
            marker.write_text(json.dumps(record))
        elif kind == "marker-wrong-types":
            record = json.loads(marker.read_text())
            record["files"]["kubelet"] = "x"
            marker.write_text(json.dumps(record))
        elif kind == "marker-files-null":
            record = json.loads(marker.read_text())
            record["files"] = None
            marker.write_text(json.dumps(record))
        elif kind == "marker-forged-for-damage":  # damage, and a record that agrees with it
            kubelet.write_bytes(b"evil")
            record = json.loads(marker.read_text())
            info = kubelet.stat()
            record["files"]["kubelet"] = [
                info.st_size,
                info.st_mtime_ns,
                hashlib.sha256(b"evil").hexdigest(),
            ]
            marker.write_text(json.dumps(record))
        elif kind == "marker-huge":
            marker.write_text(
                '{"files": {' + ", ".join(f'"f{i}": [1, 1, "x"]' for i in range(200_000)) + "}}"
            )
        elif kind == "marker-path-escape":
            record = json.loads(marker.read_text())
            record["files"]["../../afile"] = [1, 1, "0" * 64]
            marker.write_text(json.dumps(record))
        elif kind == "entry-is-a-file":
            shutil.rmtree(
                entry, onerror=lambda f, p, e: (os.chmod(os.path.dirname(p), 0o755), f(p))
            )
            entry.write_text("not a dir")
        elif kind == "extra-file":
            (entry / "extra").write_text("harmless")
        elif kind == "partial-garbage":
            shutil.rmtree(
                entry, onerror=lambda f, p, e: (os.chmod(os.path.dirname(p), 0o755), f(p))
            )
            part = ctx.cache / ".partial" / "v1.36.5"
            part.mkdir(parents=True, exist_ok=True)
            (part / f"{TARBALL}.part").write_bytes(os.urandom(200_000))
        elif kind == "partial-stamp-lies":
            shutil.rmtree(
                entry, onerror=lambda f, p, e: (os.chmod(os.path.dirname(p), 0o755), f(p))
            )
            part_dir = ctx.cache / ".partial" / "v1.36.5"
            part_dir.mkdir(parents=True, exist_ok=True)
            part = part_dir / f"{TARBALL}.part"
            part.write_bytes(os.urandom(3000))
            info = part.stat()
            digest = ctx.server.files[f"/release/v1.36.5/{TARBALL}.sha512"].decode().split()[0]
            stamp = {
                "size": info.st_size,
                "mtime_ns": info.st_mtime_ns,
                "digests": {"sha512": digest},
            }
            (part_dir / f"{TARBALL}.part.verified.json").write_text(json.dumps(stamp))
        elif kind == "locks-is-a-file":
            shutil.rmtree(ctx.cache / ".locks")
            (ctx.cache / ".locks").write_text("x")
        elif kind == "stale-tmp-dir":
            (ctx.cache / ".tmp-v1.36.5-deadbeef").mkdir()
            (ctx.cache / ".tmp-v1.36.5-deadbeef" / "kubelet").write_text("half")
            kubelet.unlink()
        else:
            raise ValueError(kind)

    return damage


DAMAGE = [
    ("delete-binary", 0, False),
    ("truncate-binary", 0, False),
    ("one-byte-same-size-and-mtime", 0, True),  # the documented limit of the stat-only check
    ("one-byte-new-mtime", 0, False),
    ("binary-replaced-by-symlink", 0, False),
    ("binary-replaced-by-dir", 0, False),
    ("marker-garbage", 0, False),
    ("marker-empty", 0, False),
    ("marker-empty-object", 0, False),
    ("marker-list", 0, False),
    ("marker-deleted", 0, False),
    ("marker-is-a-dir", (0, 6), False),
    ("marker-missing-files", 0, False),
    ("marker-wrong-types", 0, False),
    ("marker-files-null", 0, False),
    ("marker-huge", 0, False),
    ("marker-path-escape", 0, False),
    ("entry-is-a-file", (0, 6), False),
    ("extra-file", 0, False),
    ("partial-garbage", 0, False),
    ("partial-stamp-lies", (0, 5), False),
    ("locks-is-a-file", (0, 6), False),  # a complete entry is served without its lock
    ("stale-tmp-dir", 0, False),
]


def cache_cases() -> None:
    for kind, expect, documented in DAMAGE:
        named = ("v1.36.5",) if expect == 5 else ((".locks",) if expect == 6 else ())
        plain = Step(download(), expect, named, before=_damage(kind), may_serve_damage=documented)
        verify = Step([*download(), "--verify"], 0 if kind != "locks-is-a-file" else (0, 6), named)
        if kind == "entry-is-a-file":
            verify.expect = (0, 6)
        CASES.append(Case(f"cache/{kind}", "cache damage", [plain, verify], setup=_first_download))
    # damage while the mirror is gone: never served, the mirror is asked again
    for kind in (
        "delete-binary",
        "truncate-binary",
        "one-byte-new-mtime",
        "marker-garbage",
        "marker-missing-files",
    ):

        def before(ctx: Ctx, kind: str = kind) -> None:
            _damage(kind)(ctx)
            ctx.server.files.clear()

        CASES.append(
            Case(
                f"cache/{kind}-mirror-gone",
                "cache damage",
                [
                    Step(download(), 4, ("v1.36.5",), before=before),
                    Step([*download(), "--verify"], 4, ("v1.36.5",)),
                ],
                setup=_first_download,
            )
        )

    def same_mtime_then_verify_mirror_gone(ctx: Ctx) -> None:
        _damage("one-byte-same-size-and-mtime")(ctx)
        ctx.server.files.clear()

    CASES.append(
        Case(
            "cache/one-byte-same-mtime-verify-first-mirror-gone",
            "cache damage",
            [
                Step(
                    [*download(), "--verify"],
                    4,
                    ("v1.36.5",),
                    before=same_mtime_then_verify_mirror_gone,
                ),
                Step(download(), 4, ("v1.36.5",)),
            ],
            setup=_first_download,
        )
    )


# -- 7. signals ------------------------------------------------------------------------------------


def signal_cases() -> None:
    tb = f"v1.36.5/{TARBALL}"

    def sent(path: str) -> Callable[[Ctx], bool]:
        return lambda ctx: ctx.server.body_bytes_sent[f"/release/{path}"] > 0

    def asked(path: str) -> Callable[[Ctx], bool]:
        return lambda ctx: ctx.server.count(path) > 0

    def big(ctx: Ctx) -> None:
        ctx.publish("v1.36.5", release_members(binary_size=300_000))

    def fixed(ctx: Ctx) -> None:
        ctx.server.faults.clear()
        ctx.server.release_stall.set()

    for signum, status, name in [
        (signal.SIGINT, 130, "interrupted"),
        (signal.SIGTERM, 143, "terminated"),
    ]:
        sig = signal.Signals(signum).name
        for where, fault_path, when, spec, fault in [
            ("tarball-stalled", tb, sent(tb), "v1.36.5", Fault(stall_after=100_000)),
            ("tarball-trickle", tb, sent(tb), "v1.36.5", Fault(trickle=50_000, times=5)),
            (
                "sha512-stalled",
                f"{tb}.sha512",
                asked(f"{TARBALL}.sha512"),
                "v1.36.5",
                Fault(stall_after=10),
            ),
            (
                "marker-stalled",
                "stable-1.36.txt",
                asked("stable-1.36.txt"),
                "1.36",
                Fault(stall_after=2),
            ),
            (
                "retry-after-wait",
                tb,
                asked(TARBALL),
                "v1.36.5",
                Fault(status=503, headers={"Retry-After": "30"}),
            ),
        ]:

            def setup(ctx: Ctx, path: str = fault_path, fault: Fault = fault) -> None:
                big(ctx)
                ctx.server.fail(path, Fault(**vars(fault)))

            CASES.append(
                Case(
                    f"signal/{sig}/{where}",
                    "signals",
                    [
                        Step(
                            ["download", spec],
                            status,
                            (name,),
                            signal=signum,
                            when=when,
                            advice=False,
                        ),
                        Step(["download", spec], 0, before=fixed),
                        Step(["download", spec, "--verify"], 0),
                    ],
                    setup=setup,
                )
            )
    # a signal while the cache entry is being verified (a big entry, --verify hashes it all)

    def huge_entry(ctx: Ctx) -> None:
        ctx.publish(
            "v1.36.5",
            [
                Member(
                    m.name,
                    fake_binary(Path(m.name).name, 20 * MB)
                    if m.name.endswith(("/kubelet", "/kube-apiserver"))
                    else m.data,
                )
                for m in release_members()
            ],
        )
        _first_download(ctx)

    for signum, status in [(signal.SIGINT, 130), (signal.SIGTERM, 143)]:
        sig = signal.Signals(signum).name
        CASES.append(
            Case(
                f"signal/{sig}/during-verify",
                "signals",
                [
                    Step(
                        [*download(), "--verify"],
                        (0, status),
                        signal=signum,
                        when=_after(0.4),  # past start-up (see the module's docstring)
                        advice=False,
                    ),
                    Step([*download(), "--verify"], 0),
                ],
                setup=huge_entry,
            )
        )


def _after(seconds: float) -> Callable[[Ctx], bool]:
    """True from ``seconds`` after it is first asked."""
    first: list[float] = []

    def when(ctx: Ctx) -> bool:
        first[:] = first or [time.monotonic()]
        return time.monotonic() - first[0] >= seconds

    return when


# --- the report's input (report_cases) ----------------------------------------------------------


def _summary_doc(**more: object) -> dict[str, object]:
    """A minimal valid summary, with ``more`` over it."""
    return {"suite": "s", "results": []} | more


def _put_summary(ctx: Ctx, suite: str | bytes, text: str | bytes) -> Path:
    """``{tmp}/run/<suite>/summary.json`` holding ``text`` (a name that is bytes stays bytes)."""
    folder = Path(os.fsdecode(os.path.join(os.fsencode(ctx.tmp / "run"), os.fsencode(suite))))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "summary.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return path


def _summaries(*docs: tuple[str, str | bytes | dict[str, object]]) -> Callable[[Ctx], None]:
    """A setup writing one summary per (suite folder, JSON text or document)."""

    def setup(ctx: Ctx) -> None:
        for suite, doc in docs:
            _put_summary(ctx, suite, doc if isinstance(doc, str | bytes) else json.dumps(doc))

    return setup


def _phase_doc(subtest: str, phase: str, **more: object) -> dict[str, object]:
    return {
        "id": f"{subtest}/{phase}",
        "outcome": "failed",
        "seconds": 1.0,
        "start": 0.0,
        "subtest": subtest,
        "phase": phase,
    } | more


OLD_REPORT = "<p>the report before</p>\n"


def _old_report(ctx: Ctx) -> None:
    (ctx.tmp / "out").mkdir(exist_ok=True)
    (ctx.tmp / "out" / "report.html").write_text(OLD_REPORT)


def _with_old_report(setup: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    def both(ctx: Ctx) -> None:
        setup(ctx)
        _old_report(ctx)

    return both


def _then(check: Callable[[Ctx], str | None]) -> Step:
    """A step after a report: ``check`` says what is wrong with what it left (None: nothing);
    the step itself only runs ``--version``."""

    def before(ctx: Ctx) -> None:
        problem = check(ctx)
        if problem:
            raise AssertionError(problem)

    return Step(["--version"], 0, before=before)


def _old_report_intact(ctx: Ctx) -> str | None:
    page = ctx.tmp / "out" / "report.html"
    if not page.is_file() or page.read_text() != OLD_REPORT:
        return "the report that was there was replaced or removed by a report that failed"
    return None


def _safe_links(folder: str = "run") -> Callable[[Ctx], str | None]:
    """Every href of ``{tmp}/<folder>/report.html`` relative, without a scheme, and to a file
    (or, ending in ``/``, a folder) inside ``{tmp}/run``; the page valid UTF-8."""

    def check(ctx: Ctx) -> str | None:
        import re
        from urllib.parse import unquote_to_bytes

        page = ctx.tmp / folder / "report.html"
        try:
            html = page.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return f"no readable UTF-8 report.html: {exc}"
        if "<script" in html.lower():
            return "a <script> on the page"
        root = (ctx.tmp / "run").resolve()
        for link in re.findall(r'href="([^"]*)"', html):
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", link) or link.startswith(("/", "\\")):
                return f"a link with a scheme or an absolute path: {link[:80]!r}"
            target = (page.parent / os.fsdecode(unquote_to_bytes(link))).resolve()
            there = target.is_dir() if link.endswith("/") else target.is_file()  # pods-<state>/
            if not target.is_relative_to(root) or not there:
                return f"a link out of the artifacts or to nothing: {link[:80]!r}"
        return None

    return check


def _evidence_says(text: str, *, unescaped: bool = False) -> Callable[[Ctx], str | None]:
    """``{tmp}/out/prr-evidence.md`` (or ``{tmp}/run/``'s, where the report went there) holds
    ``text``; with ``unescaped``, no link, HTML tag or code span from a summary is left
    unescaped in it either."""

    def check(ctx: Ctx) -> str | None:
        import re

        for folder in ("out", "run"):
            evidence = ctx.tmp / folder / "prr-evidence.md"
            if evidence.is_file():
                break
        else:
            return "no prr-evidence.md next to the report"
        said = evidence.read_text(encoding="utf-8")
        if text not in said:
            return f"prr-evidence.md lacks {text!r}"
        if unescaped and re.search(r"(?<!\\)(<script|\]\(|`c)", said):
            return "prr-evidence.md holds markup from a summary unescaped"
        return None

    return check


def _report(out: str = "{tmp}/out") -> list[str]:
    return ["report", "{tmp}/run", "-o", out]


def _numbers_cases() -> None:
    ok = {"id": "a", "outcome": "passed"}
    for name, field_name, text in [
        ("seconds-inf-literal", "results[0].seconds", '{"seconds": Infinity}'),
        ("seconds-minus-inf", "results[0].seconds", '{"seconds": -Infinity}'),
        ("seconds-nan-literal", "results[0].seconds", '{"seconds": NaN}'),
        ("seconds-1e400", "results[0].seconds", '{"seconds": 1e400}'),
        ("seconds-1e308", "results[0].seconds", '{"seconds": 1e308}'),
        ("seconds-negative", "results[0].seconds", '{"seconds": -5}'),
        ("seconds-a-century", "results[0].seconds", '{"seconds": 3155760000}'),
        ("start-5000-digits", "results[0].start", '{"start": ' + "9" * 5000 + "}"),
        ("start-a-string", "results[0].start", '{"start": "10"}'),
        ("start-bool", "results[0].start", '{"start": true}'),
    ]:
        entry = json.dumps(ok)[:-1] + ", " + text[1:]
        case(
            f"report/numbers/{name}",
            "report-numbers",
            _report(),
            3,
            ("summary.json", field_name),
            setup=_summaries(("s", '{"suite": "s", "results": [' + entry + "]}")),
        )
    many = [{"id": f"e{i}", "outcome": "passed", "seconds": 600_000.0} for i in range(3)]
    for name, field_name, doc in [
        ("wall-seconds-1e300", "wall_seconds", _summary_doc(wall_seconds=1e300)),
        ("wall-seconds-huge-int", "wall_seconds", _summary_doc(wall_seconds=10**19)),
        ("old-schema-sum-beyond-a-week", "results[1]", _summary_doc(results=many)),
        ("started-year-1", "started", _summary_doc(started="0001-01-01T00:00:00+0000")),
        ("started-year-9999", "started", _summary_doc(started="9999-12-31T23:59:59+2359")),
        ("schema-version-huge", "schema_version", _summary_doc(schema_version=10**18)),
        (
            "ready-started-minus-1e300",
            "components_ready[0].started",
            _summary_doc(components_ready=[{"state": "a", "component": "b", "started": -1e300}]),
        ),
        (
            "ready-attempts-huge",
            "components_ready[0].attempts",
            _summary_doc(components_ready=[{"state": "a", "component": "b", "attempts": 10**15}]),
        ),
        (
            "ready-seconds-1e200",
            "components_ready[0].seconds",
            _summary_doc(components_ready=[{"state": "a", "component": "b", "seconds": 1e200}]),
        ),
        ("kep-number-zero", "keps_by_subtest['x'][0]", _summary_doc(keps_by_subtest={"x": [0]})),
        (
            "kep-number-of-31-digits",
            "keps_by_subtest['x'][1]",
            _summary_doc(keps_by_subtest={"x": [4381, 10**30]}),
        ),
        (
            "kep-number-a-bool",
            "keps_by_subtest['x'][0]",
            _summary_doc(keps_by_subtest={"x": [True]}),
        ),
    ]:
        case(
            f"report/numbers/{name}",
            "report-numbers",
            _report(),
            3,
            ("summary.json", field_name),
            setup=_summaries(("s", doc)),
        )
    # a number refused leaves the report that was there
    bad = (
        '{"suite": "s", "results": [{"id": "x/p", "outcome": "failed", "seconds": NaN, '
        '"subtest": "x", "phase": "p"}]}'
    )
    CASES.append(
        Case(
            "report/numbers/nan-keeps-the-old-report",
            "report-numbers",
            [Step(_report(), 3, ("results[0].seconds",)), _then(_old_report_intact)],
            setup=_with_old_report(_summaries(("s", bad))),
        )
    )


def _size_cases() -> None:
    pad = " " * (30 * MB)  # whitespace: valid JSON, 30 MiB each, under the per-file cap

    def big_ones(ctx: Ctx) -> None:
        for name in ("a", "b", "c"):
            _put_summary(ctx, name, '{"suite": "s", "results": []' + pad + "}")

    case(
        "report/size/three-summaries-of-30-mib",
        "report-size",
        _report(),
        3,
        ("c/summary.json", "MiB of summaries"),
        setup=big_ones,
        timeout=60,
    )

    def values(ctx: Ctx) -> None:  # 800 000 values each: fine alone, too many together
        for name in ("a", "b", "c"):
            _put_summary(
                ctx, name, '{"suite": "s", "results": [], "x": [' + "{}," * 400_000 + "{}]}"
            )

    case(
        "report/size/json-values-of-three-summaries",
        "report-size",
        _report(),
        3,
        ("c/summary.json", "JSON values"),
        setup=values,
    )

    def one_huge(ctx: Ctx) -> None:
        path = _put_summary(ctx, "s", "")
        with path.open("wb") as file:
            file.truncate(40 * MB)  # sparse

    case(
        "report/size/one-of-40-mib",
        "report-size",
        _report(),
        3,
        ("larger than 32 MiB",),
        setup=one_huge,
    )

    def dicts(ctx: Ctx) -> None:  # 31 MiB of {}: 10 million objects, parsed 800 MB
        _put_summary(ctx, "s", '{"suite": "s", "results": [], "x": [' + "{}," * (10 * MB) + "{}]}")

    case(
        "report/size/ten-million-objects",
        "report-size",
        _report(),
        3,
        ("JSON values",),
        setup=dicts,
        timeout=60,
    )
    wide = _summary_doc(results=[_phase_doc(f"t{i}", "p") for i in range(400)])
    long = _summary_doc(suite="u", results=[_phase_doc("t", f"p{i}") for i in range(700)])
    case(
        "report/size/matrix-of-two-thin-summaries",
        "report-size",
        _report(),
        3,
        ("b/summary.json", "matrix of 401 subtests x 701 phases"),
        setup=_summaries(("a", wide), ("b", long)),
    )
    square = _summary_doc(results=[_phase_doc(f"t{i}", f"p{i}") for i in range(3000)])
    case(
        "report/size/matrix-3000-by-3000",
        "report-size",
        _report(),
        3,
        ("results[].subtest",),
        setup=_summaries(("s", square)),
    )
    entries = _summary_doc(results=[{"id": "a", "outcome": "passed"}] * 100_001)
    case(
        "report/size/100001-results",
        "report-size",
        _report(),
        3,
        ("entries",),
        setup=_summaries(("s", entries)),
    )
    text = _summary_doc(
        results=[_phase_doc(f"t{i % 40}", f"p{i % 6}", message='&"<' * 2700) for i in range(300)]
    )
    case(
        "report/size/messages-of-2-million-characters",
        "report-size",
        _report(),
        3,
        ("names and messages",),
        setup=_summaries(("s", text)),
    )
    binaries = {f"s{i}": {f"c{i}-{j}": "v" for j in range(200)} for i in range(200)}
    case(
        "report/size/binaries-200-states-of-200-components",
        "report-size",
        _report(),
        3,
        ("binaries",),
        setup=_summaries(("s", _summary_doc(binaries=binaries))),
    )

    def suites(ctx: Ctx) -> None:
        for i in range(1001):
            _put_summary(ctx, f"s{i}", '{"suite": "s", "results": []}')

    case(
        "report/size/1001-summaries", "report-size", _report(), 3, ("more than 1000",), setup=suites
    )
    nested = '{"suite": "s", "results": [], "x": ' + "[" * 200_000 + "]" * 200_000 + "}"
    case(
        "report/size/nested-200000-deep",
        "report-size",
        _report(),
        3,
        ("nested too deeply",),
        setup=_summaries(("s", nested)),
    )
    nested = '{"suite": "s", "results": [], "facts": ' + "[" * 900 + "]" * 900 + "}"
    case(
        "report/size/nested-900-deep-in-facts",
        "report-size",
        _report(),
        0,
        setup=_summaries(("s", nested)),
    )
    name = "n" * 100_000
    case(
        "report/size/a-subtest-name-of-100000",
        "report-size",
        _report(),
        3,
        ("results[0].subtest", "characters long"),
        setup=_summaries(("s", _summary_doc(results=[_phase_doc(name, "p", id="x/p")]))),
    )
    case(
        "report/size/33-keps-for-one-subtest",
        "report-size",
        _report(),
        3,
        ("keps_by_subtest['x']", "more than 32"),
        setup=_summaries(("s", _summary_doc(keps_by_subtest={"x": list(range(1, 34))}))),
    )
    # every phase shown once per KEP its subtest names: more evidence than the report shows
    checks = [
        {"name": f"{i:02} " + "c" * 150, "start": 0.0, "seconds": 0.0, "outcome": "passed"}
        for i in range(45)
    ]
    many_keps = _summary_doc(
        keps_by_subtest={f"t{i}": list(range(1000, 1032)) for i in range(30)},
        results=[_phase_doc(f"t{i}", f"p{j}", outcome="passed", steps=checks)
                 for i in range(30) for j in range(4)],
    )  # fmt: skip
    CASES.append(
        Case(
            "report/size/evidence-over-its-budget-is-cut-and-said",
            "report-size",
            [Step(_report(), 0), _then(_evidence_says("**Left out**: the evidence of KEP-"))],
            setup=_summaries(("s", many_keps)),
        )
    )
    long_message = _summary_doc(results=[_phase_doc("x", "p", message="m" * 1_000_000)])
    case(
        "report/size/a-message-of-a-million-is-cut",
        "report-size",
        _report(),
        0,
        setup=_summaries(("s", long_message)),
    )


def _names_cases() -> None:
    doc = _summary_doc(results=[_phase_doc("x", "p")])
    for name, suite in [
        ("javascript-folder", "javascript:alert(1)"),
        ("data-url-folder", "data:text,hi"),
        ("vbscript-upper", "VBScript:msgbox"),
        ("html-in-folder-name", '"><script>alert(1)<'),
        ("hash-and-query", "a#b?c=d"),
        ("percent-and-backslash", "50%25\\x"),
        ("newline-in-name", "a\nb"),
    ]:
        CASES.append(
            Case(
                f"report/names/{name}",
                "report-names",
                [Step(["report", "{tmp}/run"], 0), _then(_safe_links())],
                setup=_summaries((suite, doc)),
            )
        )
    hostile = "x](javascript:alert(1)) <script>alert(1)</script> | `c`"
    markup = _summary_doc(
        keps_by_subtest={hostile: [4381]},
        results=[_phase_doc(hostile, "p", outcome="passed", steps=[
            {"name": f"[a]({hostile})", "start": 0.0, "seconds": 0.0, "outcome": "passed"}])],
    )  # fmt: skip
    CASES.append(
        Case(
            "report/names/markup-in-the-evidence",
            "report-names",
            [
                Step(["report", "{tmp}/run"], 0),
                _then(_safe_links()),
                _then(_evidence_says(r"\[a\](x\](javascript:alert(1)) \<script>", unescaped=True)),
            ],
            setup=_summaries(("s", markup)),
        )
    )
    for name, suite, text in [
        ("non-utf8-folder", b"caf\xe9", json.dumps(doc)),
        (
            "lone-surrogates-in-json",
            "s",
            '{"suite": "s\\udcff", "results": [{"id": "x\\ud800", '
            '"outcome": "failed", "subtest": "x\\udfff", "phase": "p", "message": "\\ud83d"}]}',
        ),
        (
            "html-in-every-name",
            "s",
            json.dumps(
                _summary_doc(
                    suite="<script>",
                    results=[_phase_doc("<script>x", "</td><script>", message="<b>")],
                    binaries={"<i>": {"<script>": "<script>"}},
                )
            ),
        ),
        (
            "glob-characters-in-names",
            "s",
            json.dumps(
                _summary_doc(
                    binaries={"**/[": {"kubelet": "v"}},
                    results=[
                        {"id": "bring-up", "outcome": "passed", "step": "bring-up"},
                        {"id": "x/p", "outcome": "failed", "subtest": "**/../[x", "phase": "p"},
                    ],
                )
            ),
        ),
    ]:
        CASES.append(
            Case(
                f"report/names/{name}",
                "report-names",
                [Step(["report", "{tmp}/run"], 0), _then(_safe_links())],
                setup=_summaries((suite, text)),
            )
        )

    def logs_out(ctx: Ctx) -> None:
        (ctx.tmp / "secret.log").write_text("secret\n")
        suite = ctx.tmp / "run" / "s"
        (suite / "dumps").mkdir(parents=True)
        (suite / "dumps" / "dump-x_p.json").symlink_to(ctx.tmp / "secret.log")
        (suite / "javascript:alert(1)").write_text("")
        logs = [
            {"label": "up", "path": "../../secret.log"},
            {"label": "abs", "path": str(ctx.tmp / "secret.log")},
            {"label": "link out", "path": "dumps/dump-x_p.json"},
            {"label": "scheme", "path": "javascript:alert(1)"},
            {"label": "url", "path": "https://example.com/x"},
        ]
        _put_summary(ctx, "s", json.dumps(_summary_doc(results=[_phase_doc("x", "p", logs=logs)])))

    CASES.append(
        Case(
            "report/names/logs-leading-out",
            "report-names",
            [Step(["report", "{tmp}/run"], 0), _then(_safe_links())],
            setup=logs_out,
        )
    )

    def symlink_out(ctx: Ctx) -> None:
        (ctx.tmp / "elsewhere").mkdir()
        (ctx.tmp / "elsewhere" / "summary.json").write_text(json.dumps(_summary_doc()))
        (ctx.tmp / "run" / "s").mkdir(parents=True)
        (ctx.tmp / "run" / "s" / "summary.json").symlink_to(ctx.tmp / "elsewhere" / "summary.json")

    case(
        "report/names/summary-symlink-out-of-the-tree",
        "report-names",
        _report(),
        3,
        ("s/summary.json", "leads out of"),
        setup=symlink_out,
    )

    def fifo(ctx: Ctx) -> None:
        (ctx.tmp / "run" / "s").mkdir(parents=True)
        os.mkfifo(ctx.tmp / "run" / "s" / "summary.json")

    case(
        "report/names/summary-is-a-fifo",
        "report-names",
        _report(),
        3,
        ("{tmp}/run", "no summary.json"),
        setup=fifo,
        timeout=20,
    )

    def folder_link_out(ctx: Ctx) -> None:
        (ctx.tmp / "elsewhere").mkdir()
        (ctx.tmp / "elsewhere" / "summary.json").write_text(json.dumps(_summary_doc()))
        (ctx.tmp / "run").mkdir()
        (ctx.tmp / "run" / "s").symlink_to(ctx.tmp / "elsewhere")

    case(
        "report/names/suite-folder-symlink-out",
        "report-names",
        _report(),
        3,
        ("leads out of",),
        setup=folder_link_out,
    )

    def dev_zero(ctx: Ctx) -> None:
        (ctx.tmp / "run" / "s").mkdir(parents=True)
        (ctx.tmp / "run" / "s" / "summary.json").symlink_to("/dev/zero")

    case(
        "report/names/summary-is-dev-zero",
        "report-names",
        _report(),
        3,
        ("no summary.json",),
        setup=dev_zero,
    )
    for name, text, said in [
        ("top-level-array", "[1, 2]", "the top level is not a JSON object"),
        ("top-level-string", '"summary"', "the top level is not a JSON object"),
        ("duplicate-keys", '{"suite": "s", "results": [], "suite": "t"}', "given twice"),
        (
            "duplicate-keys-nested",
            '{"suite": "s", "results": [{"id": "a", "id": "b", "outcome": "passed"}]}',
            "'id' is given twice",
        ),
        ("not-utf8", b'{"suite": "\xff", "results": []}', "not UTF-8"),
        ("utf8-bom", b'\xef\xbb\xbf{"suite": "s", "results": []}', "not JSON"),
        ("empty-file", "", "not JSON"),
        ("nul-bytes", "\x00" * 100, "not JSON"),
        ("results-an-object", '{"suite": "s", "results": {}}', "results is missing"),
        (
            "outcome-unknown",
            '{"suite": "s", "results": [{"id": "a", "outcome": "x"}]}',
            "results[0].outcome",
        ),
        (
            "logs-not-a-list",
            json.dumps(_summary_doc(results=[_phase_doc("x", "p", logs={})])),
            "results[0].logs",
        ),
        (
            "deviations-nested",
            json.dumps(_summary_doc(current={"version": "v", "deviations": [[[["x"]]]]})),
            "current.deviations[0]",
        ),
    ]:
        case(
            f"report/names/{name}",
            "report-names",
            _report(),
            3,
            ("summary.json", said),
            setup=_summaries(("s", text)),
        )


def _output_cases() -> None:
    case("report/output/empty-dir", "report-output", ["report", ""], 3, ("DIR '' is empty",))
    case(
        "report/output/empty-output",
        "report-output",
        ["report", "{tmp}/run", "-o", ""],
        3,
        ("--output '' is empty",),
        setup=_summaries(("s", _summary_doc())),
    )
    case(
        "report/output/empty-second-dir",
        "report-output",
        ["report", "{tmp}/run", ""],
        3,
        ("DIR '' is empty",),
        setup=_summaries(("s", _summary_doc())),
    )
    case(
        "report/output/output-is-a-file",
        "report-output",
        _report("{tmp}/afile"),
        3,
        ("{tmp}/afile", "not a directory"),
        setup=_summaries(("s", _summary_doc())),
    )
    case(
        "report/output/output-is-a-fifo",
        "report-output",
        _report("{tmp}/fifo"),
        3,
        ("{tmp}/fifo", "not a directory"),
        setup=_summaries(("s", _summary_doc())),
    )
    case(
        "report/output/dir-is-a-file",
        "report-output",
        ["report", "{tmp}/afile"],
        3,
        ("afile", "not a directory"),
    )
    case(
        "report/output/dir-missing",
        "report-output",
        ["report", "{tmp}/gone"],
        3,
        ("gone", "no such directory"),
    )
    case(
        "report/output/non-utf8-output",
        "report-output",
        ["report", "{tmp}/run", "-o", b"out\xff"],
        0,
        setup=_summaries(("s", _summary_doc())),
    )

    def trace_in_the_way(ctx: Ctx) -> None:
        _summaries(("s", _summary_doc(results=[_phase_doc("x", "p")])))(ctx)
        _old_report(ctx)
        (ctx.tmp / "out" / "trace.json").mkdir()

    def page_in_the_way(ctx: Ctx) -> None:
        _summaries(("s", _summary_doc()))(ctx)
        (ctx.tmp / "out" / "report.html").mkdir(parents=True)

    def surrogate_keeps_old(ctx: Ctx) -> None:
        _summaries(("s", '{"suite": "s\\udcff", "results": [], "wall_seconds": 1e999}'))(ctx)
        _old_report(ctx)

    CASES.append(
        Case(
            "report/output/trace-in-the-way-keeps-the-old-report",
            "report-output",
            [Step(_report(), 6, ("trace.json",)), _then(_old_report_intact)],
            setup=trace_in_the_way,
        )
    )
    case(
        "report/output/page-is-a-directory",
        "report-output",
        _report(),
        6,
        ("report.html",),
        setup=page_in_the_way,
    )
    CASES.append(
        Case(
            "report/output/bad-summary-keeps-the-old-report",
            "report-output",
            [Step(_report(), 3, ("wall_seconds",)), _then(_old_report_intact)],
            setup=surrogate_keeps_old,
        )
    )

    def readonly_out(ctx: Ctx) -> None:
        _summaries(("s", _summary_doc()))(ctx)
        make_readonly(ctx)

    case(
        "report/output/read-only-output",
        "report-output",
        _report("{tmp}/ro"),
        6,
        ("{tmp}/ro",),
        setup=readonly_out,
        skip=chattr_works,
    )


LINK_BASE = "https://gcsweb.example.org/gcs/b/logs/j/1/artifacts"


def _links_under(base: str) -> Callable[[Ctx], str | None]:
    """Every href of ``{tmp}/run/report.html`` is ``base/`` and a percent-encoded path to a file
    (a folder, ending in ``/``) inside ``{tmp}/run``; the page has no script."""

    def check(ctx: Ctx) -> str | None:
        import re
        from urllib.parse import unquote_to_bytes

        html = (ctx.tmp / "run" / "report.html").read_text(encoding="utf-8")
        if "<script" in html.lower():
            return "a <script> on the page"
        root = (ctx.tmp / "run").resolve()
        for link in re.findall(r'href="([^"]*)"', html):
            if not link.startswith(base + "/"):
                return f"a link not under the base: {link[:80]!r}"
            path = os.fsdecode(unquote_to_bytes(link.removeprefix(base + "/")))
            target = (ctx.tmp / "run" / path).resolve()
            there = target.is_dir() if link.endswith("/") else target.is_file()
            if not target.is_relative_to(root) or not there:
                return f"a link out of the artifacts or to nothing: {link[:80]!r}"
        return None

    return check


def _link_base_cases() -> None:
    """``--link-base`` and ``E2E_DRA_REPORT_LINK_BASE``: only an http(s) URL of a folder, one
    line naming the input otherwise; with one, every link under it, still only into the tree."""
    doc = _summary_doc(results=[_phase_doc("x", "p")])
    for name, value in [
        ("ftp", "ftp://example.org/x"),
        ("javascript", "javascript:alert(1)"),
        ("data", "data:text/html,<script>alert(1)</script>"),
        ("file", "file:///etc"),
        ("scheme-relative", "//example.org/x"),
        ("relative", "artifacts"),
        ("empty", ""),
        ("query", "https://example.org/x?token=s3cr3t"),
        ("fragment", "https://example.org/x#top"),
        ("quote", 'https://example.org/x"><script>'),
        ("newline", "https://example.org/x\ny"),
        ("non-utf8", b"https://example.org/\xff"),
        ("huge", "https://example.org/" + "a" * HUGE),
    ]:
        case(
            f"report/link-base/flag-{name}",
            "report-link-base",
            [*_report(), "--link-base", value],
            3,
            ("--link-base",),
            setup=_summaries(("s", doc)),
        )
    case(
        "report/link-base/setting-vbscript",
        "report-link-base",
        _report(),
        3,
        ("E2E_DRA_REPORT_LINK_BASE",),
        env={"E2E_DRA_REPORT_LINK_BASE": "VBScript:msgbox"},
        setup=_summaries(("s", doc)),
    )
    for name, suite in [
        ("javascript-folder", "javascript:alert(1)"),
        ("html-in-folder-name", '"><script>alert(1)<'),
        ("hash-and-query", "a#b?c=d"),
    ]:
        CASES.append(
            Case(
                f"report/link-base/names-{name}",
                "report-link-base",
                [
                    Step(["report", "{tmp}/run", "--link-base", LINK_BASE + "/"], 0),
                    _then(_links_under(LINK_BASE)),
                ],
                setup=_summaries((suite, doc)),
            )
        )


def report_cases() -> None:
    """Hostile artifact folders and summaries given to ``e2e-dra report``: numbers out of range
    (report-numbers), sizes and counts over the report's budget alone or together
    (report-size), names that are schemes, HTML, not UTF-8 or lead out of the artifacts, and
    summaries that are not ones (report-names), where the report goes (report-output), and the
    base its links are under (report-link-base)."""
    _numbers_cases()
    _size_cases()
    _names_cases()
    _output_cases()
    _link_base_cases()


# --- slow mirrors, held locks, planted files, secrets (transfer_cases) ----------------------------

SECRET = "s3cr3t"
HOLDER_SCRIPT = """
import sys, time
from pathlib import Path
from e2e_dra._cache import CacheEntry
with CacheEntry(Path(sys.argv[1]), sys.argv[2]).lock():
    print("locked", flush=True)
    time.sleep(float(sys.argv[3]))
"""


class LockHolder(RawServer):
    """Another e2e-dra process holding the cache lock of v1.36.5 for ``seconds`` (stopped with
    SIGSTOP when ``stopped``); kept in ``ctx.raw`` so that the case's end kills it."""

    def __init__(self, ctx: Ctx, seconds: float = 600, stopped: bool = False) -> None:
        self.mode, self.url, self.conns = "holder", "", []
        self.stopped = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER_SCRIPT, str(ctx.cache), "v1.36.5", str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "locked\n"
        if stopped:
            self.proc.send_signal(signal.SIGSTOP)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()


def _hold_lock(seconds: float = 600, stopped: bool = False) -> Callable[[Ctx], None]:
    return lambda ctx: ctx.raw.append(LockHolder(ctx, seconds, stopped))


def _release_holders(ctx: Ctx) -> None:
    for raw in ctx.raw:
        if isinstance(raw, LockHolder):
            raw.stop()


def _secret_url(ctx: Ctx, url: str | None = None) -> str:
    """``url`` (the release tree's) with a password and a token in it."""
    return (url or ctx.server.url).replace("http://", f"http://user:{SECRET}@") + f"?token={SECRET}"


def _victim(ctx: Ctx) -> Path:
    return ctx.tmp / "outside" / "victim"


def _plant(where: str) -> Callable[[Ctx], None]:
    """A link (or a FIFO) in the cache where the next download will look, pointing outside it."""

    def setup(ctx: Ctx) -> None:
        outside = ctx.tmp / "outside"
        outside.mkdir(exist_ok=True)
        _victim(ctx).write_bytes(b"precious\n")
        partial = ctx.cache / ".partial" / "v1.36.5"
        path = {
            "part": partial / f"{TARBALL}.part",
            "stamp": partial / f"{TARBALL}.part.verified.json",
            "partial-dir": partial,
            "partial-root": ctx.cache / ".partial",
            "lock-file": ctx.cache / ".locks" / "v1.36.5.lock",
            "locks-dir": ctx.cache / ".locks",
            "part-fifo": partial / f"{TARBALL}.part",
        }[where]
        path.parent.mkdir(parents=True, exist_ok=True)
        if where == "part-fifo":
            os.mkfifo(path)
        elif where in {"part", "stamp", "lock-file"}:
            path.symlink_to(_victim(ctx))
        else:
            path.symlink_to(outside)

    return setup


def _outside_untouched(ctx: Ctx) -> None:
    """Raises (the case fails) when anything was written outside the cache."""
    outside = ctx.tmp / "outside"
    if outside.exists():
        names = sorted(p.name for p in outside.iterdir())
        if names != ["victim"] or _victim(ctx).read_bytes() != b"precious\n":
            raise AssertionError(f"written outside the cache: {outside} holds {names}")


def _plant_entry_link(ctx: Ctx) -> None:
    """The entry is a link to a forged one elsewhere whose marker agrees with its evil kubelet."""
    _first_download(ctx)
    forged = ctx.tmp / "outside" / "forged"
    shutil.copytree(ctx.entry(), forged)
    os.chmod(forged, 0o755)
    kubelet = forged / "kubelet"
    os.chmod(kubelet, 0o755)
    kubelet.write_bytes(b"evil")
    record = json.loads((forged / MARKER).read_text())
    info = kubelet.stat()
    record["files"]["kubelet"] = [
        info.st_size,
        info.st_mtime_ns,
        hashlib.sha256(b"evil").hexdigest(),
    ]
    (forged / MARKER).write_text(json.dumps(record))
    shutil.rmtree(ctx.entry(), onerror=lambda f, p, e: (os.chmod(os.path.dirname(p), 0o755), f(p)))
    ctx.entry().symlink_to(forged)


def _plant_partial(kind: str) -> Callable[[Ctx], None]:
    """A partial download an earlier run could have left, changed since: ``stamped`` a whole
    tarball with one byte changed and a stamp that agrees with its size and time; ``prefix`` the
    first 10 kB with one byte flipped (resumed with a Range request)."""

    def setup(ctx: Ctx) -> None:
        partial = ctx.cache / ".partial" / "v1.36.5"
        partial.mkdir(parents=True, exist_ok=True)
        part = partial / f"{TARBALL}.part"
        published = ctx.server.files[f"/release/v1.36.5/{TARBALL}"]
        if kind == "stamped":
            part.write_bytes(damaged_tarball())
            info = part.stat()
            stamp = {
                "size": info.st_size,
                "mtime_ns": info.st_mtime_ns,
                "digests": {"sha512": hashlib.sha512(published).hexdigest()},
            }
            (partial / f"{TARBALL}.part.verified.json").write_text(json.dumps(stamp))
        else:
            damaged = bytearray(published[:10_000])
            damaged[5000] ^= 0xFF
            part.write_bytes(bytes(damaged))

    return setup


def _kubelet_tarball(data: bytes, mode: int = 0o755) -> Callable[[Ctx], None]:
    """A tarball that matches its checksum and holds this kubelet."""

    def setup(ctx: Ctx) -> None:
        special = _info("kubelet", size=len(data))
        special.mode = mode
        ctx.put_tarball("v1.36.5", _with_member((special, data)))

    return setup


def _scripts(version: str, body: str | None = None) -> list[Member]:
    """A release whose server binaries are scripts that answer ``--version`` (as a build for
    this machine would); ``body`` replaces what kubelet does."""
    members = []
    for member in release_members():
        name = Path(member.name).name
        if name in CLUSTER_BINARIES:
            script = (
                body if body is not None and name == "kubelet" else f"echo 'Kubernetes {version}'"
            )
            members.append(Member(member.name, f"#!/bin/sh\n{script}\n".encode()))
        else:
            members.append(member)
    return members


def transfer_cases() -> None:
    """Downloads against mirrors that crawl, locks held by a paused process, files planted in the
    cache, credentials in URLs."""
    tb = f"v1.36.5/{TARBALL}"

    def fault(path: str, **kw: object) -> Callable[[Ctx], None]:
        return lambda ctx: ctx.server.fail(path, Fault(**kw))  # type: ignore[arg-type]

    def raw(mode: str) -> Callable[[Ctx], None]:
        return lambda ctx: ctx.raw.append(RawServer(mode))

    # -- slow-mirror: --deadline is a wall-clock deadline; every case ends within 3x of it
    for where, path, spec in [
        ("marker", "stable-1.36.txt", "1.36"),
        ("sha512", f"{tb}.sha512", "v1.36.5"),
        ("tarball", tb, "v1.36.5"),
    ]:
        case(
            f"slow-mirror/{where}-sent-a-byte-at-a-time",
            "slow-mirror",
            ["download", spec, "--deadline", "4"],
            5,
            (Path(path).name, "deadline"),
            setup=fault(path, drip=0.3, times=100),
            timeout=12.0,
        )
    case(
        "slow-mirror/tarball-trickle-no-min-speed",
        "slow-mirror",
        [*download(), "--deadline", "4", "--min-speed", "0"],
        5,
        (TARBALL, "deadline"),
        setup=fault(tb, trickle=10, times=100),
        timeout=12.0,
    )
    case(
        "slow-mirror/redirect-to-a-dripping-file",
        "slow-mirror",
        ["download", "1.36", "--deadline", "4"],
        5,
        ("stable-1.36.txt", "deadline"),
        setup=lambda ctx: (
            ctx.server.fail("stable-1.36.txt", Fault(status=302, headers={"Location": "slow"})),
            ctx.server.put("slow", "v1.36.5\n"),
            ctx.server.fail("slow", Fault(drip=0.3, times=100)),
        ),
        timeout=12.0,
    )
    for mode, spec, extra, expect, named in [
        ("drip", "1.36", ["--deadline", "4"], 5, ("stable-1.36.txt", "deadline")),
        ("drip", "1.36", [], 5, ("stable-1.36.txt",)),  # the default: one try, ended at 60 s
        ("chunked", "1.36", [], 5, ("stable-1.36.txt", "bytes")),
        ("gib", "v1.36.5", [], 5, (f"{TARBALL}.sha512", "bytes")),
        ("silent", "v1.36.5", ["--deadline", "3"], 5, (f"{TARBALL}.sha512", "deadline")),
    ]:
        label = f"{mode}-{'deadline' if extra else 'default'}-{spec}"
        case(
            f"slow-mirror/raw-{label}",
            "slow-mirror",
            ["download", spec, "--base-url", "{raw}", *extra],
            expect,
            named,
            setup=raw(mode),
            timeout=12.0 if extra else 180.0,
        )
    # the reachability probe (no release source set): 3 s, however slowly the server sends
    for mode in ("drip", "silent"):
        case(
            f"slow-mirror/probe-{mode}",
            "slow-mirror",
            ["resolve", "1.36"],
            0,
            env={"E2E_DRA_RELEASE_SOURCE": None, "KUBERNETES_RELEASE_URL": "{raw}"},
            setup=raw(mode),
            proxy=True,
            timeout=15.0,
        )
    case(
        "slow-mirror/probe-dripping-stable-txt",
        "slow-mirror",
        ["resolve", "1.36"],
        0,
        env={"E2E_DRA_RELEASE_SOURCE": None},
        setup=fault("stable.txt", drip=0.3, times=100),
        proxy=True,
        timeout=15.0,
    )

    # -- held-lock: waiting for another process has an end and names it
    case(
        "held-lock/stopped-holder",
        "held-lock",
        download(),
        6,
        ("v1.36.5", "stopped", "kill -CONT"),
        setup=_hold_lock(stopped=True),
        timeout=20.0,
    )
    case(
        "held-lock/running-holder-past-deadline",
        "held-lock",
        [*download(), "--deadline", "3"],
        6,
        ("v1.36.5", "waited", "kill"),
        setup=_hold_lock(),
        timeout=12.0,
    )
    case(
        "held-lock/holder-that-finishes",
        "held-lock",
        [*download(), "--deadline", "30"],
        0,
        setup=_hold_lock(seconds=2),
    )
    CASES.append(
        Case(
            "held-lock/stopped-holder-then-gone",
            "held-lock",
            [
                Step(download(), 6, ("stopped",), timeout=20.0),
                Step(download(), 0, before=_release_holders),
                Step([*download(), "--verify"], 0),
            ],
            setup=_hold_lock(stopped=True),
        )
    )
    CASES.append(
        Case(
            "held-lock/stopped-holder-of-a-complete-entry",  # a hit needs no lock
            "held-lock",
            [Step(download(), 0, before=_hold_lock(stopped=True))],
            setup=_first_download,
        )
    )

    # -- planted: no link in the cache is followed, nothing resumed is trusted
    for where in (
        "part",
        "stamp",
        "partial-dir",
        "partial-root",
        "lock-file",
        "locks-dir",
        "part-fifo",
    ):
        CASES.append(
            Case(
                f"planted/{where}",
                "planted",
                [
                    Step(download(), 0),
                    Step([*download(), "--verify"], 0, before=_outside_untouched),
                ],
                setup=_plant(where),
            )
        )
    CASES.append(
        Case(
            "planted/entry-links-to-a-forged-entry",
            "planted",
            [Step(download(), 0), Step([*download(), "--verify"], 0)],
            setup=_plant_entry_link,
        )
    )
    for kind in ("stamped", "prefix"):
        for verify in ((), ("--verify",)):
            CASES.append(
                Case(
                    f"planted/partial-{kind}-one-byte-changed{'-verify' if verify else ''}",
                    "planted",
                    [Step([*download(), *verify], 0), Step([*download(), "--verify"], 0)],
                    setup=_plant_partial(kind),
                )
            )
    CASES.append(
        Case(
            "planted/partial-stamped-mirror-gone",  # a stamp alone never makes it trusted
            "planted",
            [
                Step(
                    download(),
                    4,
                    ("v1.36.5",),
                    before=lambda ctx: ctx.server.files.pop(f"/release/{tb}"),
                )
            ],
            setup=_plant_partial("stamped"),
        )
    )

    # -- broken-binary: a checksum that matches is not enough to be complete
    for label, data, mode, named in [
        ("kubelet-empty", b"", 0o755, ("kubelet", "empty")),
        ("kubelet-not-executable", fake_binary("kubelet"), 0o644, ("kubelet", "executable")),
        ("kubelet-other-version", b"#!/bin/sh\necho 'Kubernetes v1.35.0'\n", 0o755, ("v1.35.0",)),
        ("kubelet-says-nothing", b"#!/bin/sh\nexit 0\n", 0o755, ("kubelet", "--version")),
        ("kubelet-fails", b"#!/bin/sh\necho broken >&2; exit 2\n", 0o755, ("kubelet",)),
        ("kubelet-hangs", b"#!/bin/sh\nexec sleep 600\n", 0o755, ("kubelet", "does not run")),
        ("kubelet-chatty", b"#!/bin/sh\nyes Kubernetes\n", 0o755, ("kubelet",)),
        ("kubelet-missing-interpreter", b"#!/nonexistent/sh\n", 0o755, ("kubelet",)),
        ("kubelet-elf-garbage", b"\x7fELF" + os.urandom(200), 0o755, ("kubelet",)),
    ]:
        case(
            f"broken-binary/{label}",
            "broken-binary",
            download(),
            5,
            (TARBALL, *named),
            setup=_kubelet_tarball(data, mode),
            timeout=60.0,
        )
    case(
        "broken-binary/scripts-that-name-the-release",
        "broken-binary",
        download(),
        0,
        setup=lambda ctx: ctx.publish("v1.36.5", _scripts("v1.36.5")),
    )

    # -- secrets: a password or token in a URL is never printed (shown as ***)
    for label, args, env, expect, named in [
        ("userinfo-404", ["download", "v1.36.9"], {}, 4, ("***@127.0.0.1", "token=***")),
        ("marker-403", ["download", "1.36"], {}, 5, ("***@127.0.0.1", "token=***")),
        ("sha512-garbage", download(), {}, 5, ("***@127.0.0.1", "token=***")),
        ("tarball-wrong-sum", download(), {}, 5, ("***@127.0.0.1", "mismatch")),
        ("deadline", [*download(), "--deadline", "3"], {}, 5, ("***@127.0.0.1", "deadline")),
        ("nothing-listens", ["download", "1.36"], {"port": "9"}, 5, ("***@127.0.0.1:9",)),
        ("port-too-big", ["download", "1.36"], {"port": "99999"}, 3, ("***@",)),
        ("utf16-marker", ["download", "1.36"], {}, 5, ("***@127.0.0.1", "UTF-8")),
    ]:

        def setup(ctx: Ctx, label: str = label) -> None:
            if label == "marker-403":
                ctx.server.fail("stable-1.36.txt", Fault(status=403))
            elif label == "sha512-garbage":
                ctx.server.put(f"{tb}.sha512", "not a digest")
            elif label == "tarball-wrong-sum":
                ctx.server.put(f"{tb}.sha512", hashlib.sha512(b"other").hexdigest())
            elif label == "deadline":
                ctx.server.fail(f"{tb}.sha512", Fault(drip=0.3, times=100))
            elif label == "utf16-marker":
                ctx.server.put("stable-1.36.txt", "v1.36.5\n".encode("utf-16"))

        port = env.get("port")
        url = f"http://user:{SECRET}@127.0.0.1:{port}/release?token={SECRET}" if port else None
        case(
            f"secrets/{label}",
            "secrets",
            args,
            expect,
            named,
            env={"KUBERNETES_RELEASE_URL": url} if url else {},
            setup=(
                (
                    lambda ctx, s=setup: (
                        s(ctx),
                        ctx.case.env.update(KUBERNETES_RELEASE_URL=_secret_url(ctx)),
                    )
                )
                if not url
                else None
            ),
            timeout=15.0,
        )
    case(
        "secrets/goproxy-userinfo",
        "secrets",
        ["resolve", "1.36"],
        (3, 4, 5),
        ("***@127.0.0.1:9",),
        env={
            "E2E_DRA_RELEASE_SOURCE": "build",
            "GOPROXY": f"http://user:{SECRET}@127.0.0.1:9/proxy?token={SECRET}",
        },
        timeout=60.0,
    )

    # -- mirror-text: markers and checksums in another encoding, and odd redirects
    for label, body, expect in [
        ("utf-16", "v1.36.5\n".encode("utf-16"), 5),
        ("utf-16-no-bom", "v1.36.5\n".encode("utf-16-le"), 5),
        ("utf-32", "v1.36.5\n".encode("utf-32"), 5),
        ("latin-1", "v1.36.5\xe9\n".encode("latin-1"), 5),
        ("utf-8-bom", "\ufeffv1.36.5\n".encode(), 0),
    ]:
        case(
            f"mirror-text/marker-{label}",
            "mirror-text",
            ["download", "1.36"],
            expect,
            ("stable-1.36.txt",) if expect else (),
            setup=lambda ctx, b=body: ctx.server.put("stable-1.36.txt", b),
        )
    case(
        "mirror-text/sha512-utf-16",
        "mirror-text",
        download(),
        5,
        (f"{TARBALL}.sha512", "UTF-8"),
        setup=lambda ctx: ctx.server.put(
            f"{tb}.sha512", ctx.server.files[f"/release/{tb}.sha512"].decode().encode("utf-16")
        ),
    )
    for charset in ("rot13", "utf-32", "base64", "no-such-codec"):
        case(
            f"mirror-text/marker-charset-{charset}",
            "mirror-text",
            ["download", "1.36"],
            5,
            ("stable-1.36.txt",),
            setup=fault(
                "stable-1.36.txt",
                status=200,
                headers={"Content-Type": f"text/plain; charset={charset}"},
            ),
        )
    for label, location in [
        ("file", "file:///etc/passwd"),
        ("ftp", "ftp://127.0.0.1/release/stable-1.36.txt"),
        ("javascript", "javascript:alert(1)"),
        ("nothing-listens-with-secret", f"http://user:{SECRET}@127.0.0.1:9/x?token={SECRET}"),
        ("garbage", "http://[::1"),
    ]:
        case(
            f"mirror-text/redirect-to-{label}",
            "mirror-text",
            ["download", "1.36"],
            5,
            ("stable-1.36.txt",),
            setup=fault("stable-1.36.txt", status=302, headers={"Location": location}, times=10),
            timeout=60.0,
        )


# --- closed streams and other command-line edges (stream_cases) -----------------------------------


NO_KUBECONFIG = "{tmp}/no-cluster/admin.kubeconfig"
"""Every ``driver`` case names a kubeconfig that does not exist: the default one may be a real
cluster's on this host, and a flag the command wrongly accepts must not reach it."""


def _plugin(*flags: str | bytes) -> list[str | bytes]:
    """``driver kubelet-plugin`` that can never reach a cluster (see :data:`NO_KUBECONFIG`)."""
    return ["driver", "kubelet-plugin", "--node-name", "n1", "--kubeconfig", NO_KUBECONFIG, *flags]


def _stream_commands() -> list[tuple[str, list[str | bytes], int]]:
    """(label, args, status when every stream is read) of commands that print an answer."""
    return [
        ("previous-minor", ["previous-minor", "v1.37.0"], 0),
        ("previous-minor-bad", ["previous-minor", "v1.x"], 3),
        ("help", ["--help"], 0),
        ("version", ["--version"], 0),
        ("download-help", ["download", "--help"], 0),
        ("resolve", ["resolve", "1.36"], 0),
        ("download", download(), 0),
        ("download-unpublished", ["download", "v1.36.9"], 4),
        ("versions", ["versions"], 0),
        ("usage", ["frobnicate"], 2),
    ]


def stream_cases() -> None:
    """Closed standard streams, absurd sizes, empty paths."""
    # closed-streams: stdout nobody reads ends quietly with 141 (an error still wins: it is said
    # on stderr with its own status); stderr nobody reads changes nothing but its lines
    for label, args, status in _stream_commands():
        gone = STDOUT_GONE if status == 0 else status
        for how, kw, expect in [
            ("stdout-closed", {"close": ("stdout",)}, gone),
            ("stdout-deserted", {"desert": ("stdout",)}, gone),
            ("stderr-closed", {"close": ("stderr",)}, status),
            ("stderr-deserted", {"desert": ("stderr",)}, status),
            ("stdin-closed", {"close": ("stdin",)}, status),
            ("all-closed", {"close": ("stdin", "stdout", "stderr")}, gone),
            ("both-deserted", {"desert": ("stdout", "stderr")}, gone),
        ]:
            case(f"streams/{label}/{how}", "closed-streams", args, expect, (), **kw)
    # a download whose stderr is closed: no file it opens may become fd 2 (progress lines in the
    # tarball or the marker would be served as damage); the judge checks what it served
    case(
        "streams/download-verify/stderr-closed",
        "closed-streams",
        [*download(), "--verify"],
        0,
        (),
        close=("stderr",),
    )
    # sizes: every count or rate flag has bounds; a value outside them (or no number) is a usage
    # mistake, as argparse's own type=int: exit 2, in one line naming the flag
    for flag, values in [
        (
            "--num-devices",
            [
                ("billion", "1000000000", 2),
                ("one-past", "129", 2),
                ("negative", "-1", 2),
                ("float", "4.5", 2),
                ("exponent", "1e3", 2),
                ("words", "four", 2),
                ("empty", "", 2),
                ("huge", "9" * HUGE, 2),
                ("non-utf8", b"4\xff", 2),
            ],
        ),
        (
            "--kube-api-qps",
            [
                ("nan", "nan", 2),
                ("inf", "inf", 2),
                ("overflow", "1e400", 2),
                ("past", "10001", 2),
                ("negative", "-5", 2),
            ],
        ),
        (
            "--kube-api-burst",
            [("past", "99999999999", 2), ("float", "1.5", 2), ("negative", "-1", 2)],
        ),
    ]:
        for label, value, expect in values:
            named = (flag,)
            case(f"sizes/{flag}/{label}", "sizes", _plugin(flag, value), expect, named)
    for label, value in [("zero", "0"), ("most", "128")]:  # in range: on to the kubeconfig
        case(
            f"sizes/--num-devices/{label}",
            "sizes",
            _plugin("--num-devices", value),
            3,
            ("--kubeconfig", "does not exist"),
        )
    # empty-paths: no path flag reads '' as the current directory
    for flag in ("--cdi-dir", "--datadir", "--plugin-registration-path", "--kubeconfig"):
        case(f"empty-paths/driver{flag}", "empty-paths", _plugin(flag, ""), 3, (f"{flag} ''",))
    for where, prefix, flags in [
        ("cluster-up", ["cluster", "up"], ("--source-dir", "--bin-dir", "--log-dir")),
        ("provision", ["provision"], ("--source-dir",)),
        ("provision-check", ["provision", "--check"], ("--source-dir",)),
        ("versions", ["versions"], ("--source-dir", "--bin-dir")),
        ("download", download(), ("--cache-dir",)),
        ("build", ["build", "v1.36.5"], ("--cache-dir",)),
    ]:
        for flag in flags:
            case(
                f"empty-paths/{where}{flag}",
                "empty-paths",
                [*prefix, flag, ""],
                3,
                (f"{flag} ''",),
            )
    # names the API server would refuse: refused before anything is written under --datadir
    for flag, value in [
        ("--node-name", ""),
        ("--node-name", "Upper"),
        ("--drivername", "../../etc"),
        ("--drivername", "a/b"),
        ("--drivername", "x" * 254),
        ("--namespace", ""),
        ("--namespace", "a.b"),
    ]:
        label = {"": "empty"}.get(value, value if len(value) < 20 else "long")
        label = label.replace("/", "slash").replace(".", "dot")
        case(f"names/{flag}/{label}", "names", _plugin(flag, value), 3, (flag,))
    case(
        "names/--feature-gates/no-value",
        "names",
        ["cluster", "up", "--feature-gates", "DRAThing"],
        3,
        ("--feature-gates",),
    )


# --- main -----------------------------------------------------------------------------------------


def all_cases() -> list[Case]:
    CASES.clear()
    env_cases()
    flag_cases()
    version_cases()
    release_cases()
    proxy_cases()
    cache_cases()
    signal_cases()
    report_cases()
    transfer_cases()
    stream_cases()
    ids = Counter(c.id for c in CASES)
    duplicated = [i for i, n in ids.items() if n > 1]
    assert not duplicated, duplicated
    return list(CASES)


def describe_failure(outcome: Outcome) -> str:
    lines = [f"FAIL {outcome.case.id}  [{outcome.case.kind}]"]
    lines += [f"    {p}" for p in outcome.problems]
    if outcome.records:
        last = outcome.records[-1]
        shown_args = " ".join(shlex.quote(str(_shown(a))) for a in last["args"])  # type: ignore[union-attr]
        lines.append(f"    command: e2e-dra {shown_args}")
        if last["env"]:
            lines.append(f"    env: {last['env']}")
        lines.append(f"    exit: {last['status']} after {last['seconds']}s")
        tail = str(last["stderr"]).splitlines()[-4:]
        lines += [f"    stderr| {line[:400]}" for line in tail]
    return "\n".join(lines)


def table(outcomes: list[Outcome]) -> str:
    kinds: dict[str, list[int]] = {}
    for o in outcomes:
        row = kinds.setdefault(o.case.kind, [0, 0, 0, 0])
        row[0] += 1
        if o.skipped:
            row[3] += 1
        elif o.problems:
            row[2] += 1
        else:
            row[1] += 1
    width = max(len(k) for k in kinds) + 2
    out = [f"{'kind':<{width}}{'cases':>7}{'passed':>8}{'failed':>8}{'skipped':>9}"]
    totals = [0, 0, 0, 0]
    for kind, row in kinds.items():
        out.append(f"{kind:<{width}}{row[0]:>7}{row[1]:>8}{row[2]:>8}{row[3]:>9}")
        totals = [a + b for a, b in zip(totals, row, strict=True)]
    out.append(f"{'total':<{width}}{totals[0]:>7}{totals[1]:>8}{totals[2]:>8}{totals[3]:>9}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--only", help="run the cases whose id holds this")
    parser.add_argument(
        "--kind", action="append", help="run the cases of this kind (again: of these kinds)"
    )
    parser.add_argument("--report", type=Path, help="write every outcome as JSON here")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    args = parser.parse_args(argv)
    cases = all_cases()
    if args.only:
        cases = [c for c in cases if args.only in c.id]
    if args.kind:
        cases = [c for c in cases if any(kind in c.kind for kind in args.kind)]
    if args.list:
        for c in cases:
            print(f"{c.kind:24} {c.id}")
        print(f"{len(cases)} cases")
        return 0
    started = time.monotonic()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for outcome in pool.map(run_case, cases):
            outcomes.append(outcome)
            mark = "skip" if outcome.skipped else ("FAIL" if outcome.problems else "ok")
            print(f"{mark:4} {outcome.case.id}", flush=True)
    failed = [o for o in outcomes if o.problems]
    print()
    for outcome in failed:
        print(describe_failure(outcome))
    for outcome in outcomes:
        if outcome.skipped:
            print(f"SKIP {outcome.case.id}: {outcome.skipped}")
    print()
    print(table(outcomes))
    print(f"\n{len(outcomes)} cases in {time.monotonic() - started:.0f}s; {len(failed)} failed")
    if args.report:
        args.report.write_text(
            json.dumps(
                [
                    {
                        "id": o.case.id,
                        "kind": o.case.kind,
                        "problems": o.problems,
                        "skipped": o.skipped,
                        "steps": o.records,
                    }
                    for o in outcomes
                ],
                indent=1,
                default=str,
            )
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
