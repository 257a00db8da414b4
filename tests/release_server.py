"""A loopback HTTP server laid out like dl.k8s.io/release, with the faults real mirrors have.

It is the one stand-in the download tests use: nothing real can be reached here, and the code under
test talks plain HTTP to it exactly as it would to the real site. Files are bytes built by the
tests (tarballs of small fake binaries, marker files, checksum sidecars).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from e2e_dra.hostkit import poll

CLUSTER_BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
)
PREFIX = "/release"


@dataclass
class Member:
    """One tar member: a file with ``data``, a symlink to ``link``, or a directory."""

    name: str
    data: bytes = b""
    link: str | None = None
    directory: bool = False


def fake_binary(name: str, size: int = 4096) -> bytes:
    """Deterministic, incompressible-ish bytes that differ per binary."""
    seed = hashlib.sha512(name.encode()).digest()
    blocks = (hashlib.sha512(seed + i.to_bytes(4, "big")).digest() for i in range(size // 64 + 1))
    return b"".join(blocks)[:size]


def server_tarball(members: Iterable[Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.mtime = 1_700_000_000
            if member.link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = member.link
                archive.addfile(info)
            elif member.directory:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
            else:
                info.size = len(member.data)
                info.mode = 0o755
                archive.addfile(info, io.BytesIO(member.data))
    return buffer.getvalue()


def damaged_tarball(binary: str = "kubelet") -> bytes:
    """A well-formed server tarball of the published members whose ``binary`` has its first byte
    changed: what a damaged download or a forged mirror gives."""
    members = release_members()
    for member in members:
        if member.name.endswith(f"/{binary}"):
            member.data = b"X" + member.data[1:]
    return server_tarball(members)


def release_members(binary_size: int = 4096, *, kubectl: bool = True) -> list[Member]:
    """What a real server tarball looks like, shrunk: the binaries plus things we must skip."""
    names = [*CLUSTER_BINARIES, *(["kubectl"] if kubectl else []), "kubeadm"]
    members = [Member("kubernetes/server/bin/" + n, fake_binary(n, binary_size)) for n in names]
    members.append(Member("kubernetes/server/bin/kube-apiserver.tar", b"image, not wanted"))
    members.append(Member("kubernetes/LICENSES", b"licenses"))
    return members


@dataclass
class Fault:
    """What to do to the next ``times`` GETs of one path."""

    status: int | None = None  # answer this status instead
    drop_after: int | None = None  # send only this many body bytes, then close the connection
    stall_after: int | None = None  # send this many body bytes, then hang until released
    redirect_to_self: bool = False  # answer 302 with Location: the same path (a redirect loop)
    redirect_onward: bool = False  # answer 302 to the same path with a new query (a long chain)
    trickle: int | None = None  # send the body at this many bytes per second
    drip: float | None = None  # send all of it, status line and headers too, a byte every drip s
    headers: dict[str, str] = field(default_factory=dict)  # sent with an injected status
    times: int = 1


@dataclass
class ReleaseServer:
    files: dict[str, bytes] = field(default_factory=dict)
    faults: dict[str, list[Fault]] = field(default_factory=dict)
    ignore_range: bool = False
    # paths served with this Content-Encoding header while the body stays as it is (plain): a
    # misconfigured mirror
    mislabelled: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)  # request targets as sent, query included
    request_times: list[tuple[str, float]] = field(default_factory=list)  # (path, monotonic)
    body_bytes_sent: Counter[str] = field(default_factory=Counter)
    release_stall: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- content ------------------------------------------------------------------------------

    def put(self, path: str, data: bytes | str) -> None:
        """Serve ``data`` at ``/release/<path>``."""
        self.files[f"{PREFIX}/{path.lstrip('/')}"] = (
            data.encode() if isinstance(data, str) else data
        )

    def add_release(
        self,
        version: str,
        members: list[Member] | None = None,
        *,
        os_arch: str = "linux-amd64",
        sidecars: Iterable[str] = ("sha512",),
        sidecar_format: str = "bare",
    ) -> bytes:
        """Publish a server tarball of ``version`` and its checksum sidecars; return the tarball."""
        tarball = server_tarball(members if members is not None else release_members())
        name = f"kubernetes-server-{os_arch}.tar.gz"
        self.put(f"{version}/{name}", tarball)
        for algorithm in sidecars:
            digest = hashlib.new(algorithm, tarball).hexdigest()
            text = digest if sidecar_format == "bare" else f"{digest}  {name}\n"
            self.put(f"{version}/{name}.{algorithm}", text)
        return tarball

    def mislabel(self, path: str, encoding: str = "gzip") -> None:
        """Serve ``path`` with ``Content-Encoding: encoding`` over its plain bytes."""
        self.mislabelled[f"{PREFIX}/{path.lstrip('/')}"] = encoding

    def fail(self, path: str, fault: Fault) -> None:
        self.faults.setdefault(f"{PREFIX}/{path.lstrip('/')}", []).append(fault)

    # -- observation --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{PREFIX}"

    def count(self, suffix: str) -> int:
        """GETs so far of paths ending in ``suffix``."""
        with self._lock:
            return sum(1 for path, _ in self.requests if path.endswith(suffix))

    def headers_of(self, suffix: str) -> list[dict[str, str]]:
        with self._lock:
            return [headers for path, headers in self.requests if path.endswith(suffix)]

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> ReleaseServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                server._serve(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self.release_stall.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    # -- serving ------------------------------------------------------------------------------

    def _next_fault(self, path: str) -> Fault | None:
        with self._lock:
            queue = self.faults.get(path) or []
            if not queue:
                return None
            fault = queue[0]
            fault.times -= 1
            if fault.times <= 0:
                queue.pop(0)
            return fault

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?", 1)[0]
        with self._lock:
            self.requests.append((path, {k.lower(): v for k, v in handler.headers.items()}))
            self.targets.append(handler.path)
            self.request_times.append((path, time.monotonic()))
        fault = self._next_fault(path)
        if fault is not None and fault.status is not None:
            return self._answer(handler, fault.status, b"injected failure\n", fault.headers)
        if fault is not None and (fault.redirect_to_self or fault.redirect_onward):
            handler.send_response(302)
            onward = f"{path}?hop={fault.times}" if fault.redirect_onward else handler.path
            handler.send_header("Location", onward)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return None
        data = self.files.get(path)
        if data is None:
            return self._answer(handler, 404, b"404 page not found\n")
        if fault is not None and fault.drip:
            return self._drip(handler, path, data, fault.drip)
        start = 0
        wanted = handler.headers.get("Range", "")
        if wanted.startswith("bytes=") and wanted.endswith("-") and not self.ignore_range:
            start = int(wanted[len("bytes=") : -1])
            if start >= len(data):
                return self._answer(handler, 416, b"")
        body = data[start:]
        handler.send_response(206 if start else 200)
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Accept-Ranges", "bytes")
        if start:
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        if path in self.mislabelled:
            handler.send_header("Content-Encoding", self.mislabelled[path])
        handler.end_headers()
        if fault is not None and fault.trickle:
            return self._trickle(handler, path, body, fault.trickle)
        limit = None
        if fault is not None:
            limit = fault.drop_after if fault.drop_after is not None else fault.stall_after
        self._send_body(handler, path, body, limit)
        if fault is not None and fault.stall_after is not None:
            while not self.release_stall.wait(0.05):
                pass
        if limit is not None:
            handler.close_connection = True

    def _send_body(
        self, handler: BaseHTTPRequestHandler, path: str, body: bytes, limit: int | None
    ) -> None:
        view = memoryview(body)[: limit if limit is not None else len(body)]
        for offset in range(0, len(view), 1 << 16):
            chunk = view[offset : offset + (1 << 16)]
            try:
                handler.wfile.write(chunk)
            except OSError:  # the client went away
                return
            with self._lock:
                self.body_bytes_sent[path] += len(chunk)
        handler.wfile.flush()

    def _trickle(self, handler: BaseHTTPRequestHandler, path: str, body: bytes, rate: int) -> None:
        """A mirror that never stops and never hurries: ``rate`` bytes a second, in tenths."""
        step = max(1, rate // 10)
        for offset in range(0, len(body), step):
            if self.release_stall.is_set():
                break
            try:
                handler.wfile.write(body[offset : offset + step])
                handler.wfile.flush()
            except OSError:
                return
            with self._lock:
                self.body_bytes_sent[path] += len(body[offset : offset + step])
            time.sleep(0.1)
        handler.close_connection = True

    def _drip(self, handler: BaseHTTPRequestHandler, path: str, data: bytes, every: float) -> None:
        """A mirror that sends even its status line and headers a byte at a time: no read ever
        waits long, and the response never ends in any reasonable time."""
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\nX-Padding: {'.' * 64}\r\n\r\n"
        ).encode()
        for index, byte in enumerate(head + data):
            if self.release_stall.wait(every):
                break
            try:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
            except OSError:
                return
            if index >= len(head):
                with self._lock:
                    self.body_bytes_sent[path] += 1
        handler.close_connection = True

    def _answer(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
    ) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)


def wait_until(condition: Callable[[], object], timeout: float = 20.0) -> None:
    if not poll(condition, timeout=timeout, interval=0.02).done:
        raise AssertionError("condition not met in time")
