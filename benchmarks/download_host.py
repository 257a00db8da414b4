"""A loopback stand-in for https://dl.k8s.io that answers only the marker files it is given.

Upstream's ``test/e2e_dra`` asks dl.k8s.io for ``release/stable-<minor>.txt`` on every run, before
it looks at its cache of the previous release; nothing can turn that off. Where dl.k8s.io cannot
be reached, a side-by-side run with upstream's suite needs that one answer, and nothing more:

- it listens on 127.0.0.1 as an HTTPS proxy (``HTTPS_PROXY``), takes ``CONNECT dl.k8s.io:443``
  and refuses every other host (403), so nothing else leaves through it by mistake;
- inside the tunnel it speaks TLS with a certificate for ``dl.k8s.io`` signed by a throwaway CA
  made for this run (``SSL_CERT_FILE``: the system's CAs plus that one, which Go reads on Linux);
- it answers ``GET /release/<name>`` for the names it was given, 404 for everything else (a
  tarball too: the previous release must come from the cache it was given), and records each
  request, so the caller can show that the tarball was never fetched.

Every read is bounded (a request head of 64 lines of 8 KiB), and each connection has a deadline.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

HOST = "dl.k8s.io"
LINE_LIMIT = 8192
HEAD_LINES = 64
DEADLINE = 30.0  # seconds a client has for its whole exchange
SYSTEM_CAS = (Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pki/tls/certs/ca-bundle.crt"))


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # "CONNECT example.com:443", or the path asked in the tunnel
    status: int


def make_certificates(into: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate and key for dl.k8s.io signed by it (openssl); returns the
    certificate, the key and a CA bundle of the system's CAs plus this CA."""
    into.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        done = subprocess.run(["openssl", *args], cwd=into, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"openssl {args[0]} failed: {last}")

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=e2e-dra stand-in for dl.k8s.io",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "host.key", "-out", "host.csr",
        "-subj", f"/CN={HOST}",
    )  # fmt: skip
    (into / "ext.cnf").write_text(
        f"subjectAltName=DNS:{HOST}\nextendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    openssl(
        "x509", "-req", "-in", "host.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "host.crt", "-days", "2", "-extfile", "ext.cnf",
    )  # fmt: skip
    bundle = into / "bundle.crt"
    with open(bundle, "wb") as out:
        for system in SYSTEM_CAS:
            if system.is_file():
                with open(system, "rb") as cas:
                    shutil.copyfileobj(cas, out)
                break
        out.write((into / "ca.crt").read_bytes())
    return into / "host.crt", into / "host.key", bundle


class DownloadHostStandIn:
    """``with DownloadHostStandIn(dir, {"stable-1.37.txt": "v1.37.2"}) as host:`` then give a
    process ``host.env()``; ``host.requests`` says what it was asked."""

    def __init__(self, workdir: Path, answers: dict[str, str]) -> None:
        self.workdir = workdir
        self.answers = {f"/release/{name}": body for name, body in answers.items()}
        self.requests: list[Request] = []
        self._guard = threading.Lock()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._context: ssl.SSLContext | None = None
        self.bundle: Path | None = None

    def __enter__(self) -> DownloadHostStandIn:
        cert, key, self.bundle = make_certificates(self.workdir)
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        self._server = server
        self._thread = threading.Thread(target=self._accept, name="dl-standin", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.getsockname()[1])

    def env(self) -> dict[str, str]:
        """What a Go program needs to reach the stand-in instead of dl.k8s.io; loopback
        addresses (the cluster) never go through it."""
        assert self.bundle is not None
        proxy = f"http://127.0.0.1:{self.port}"
        return {
            "HTTPS_PROXY": proxy,
            "https_proxy": proxy,
            "NO_PROXY": "localhost,127.0.0.1,::1",
            "no_proxy": "localhost,127.0.0.1,::1",
            "SSL_CERT_FILE": str(self.bundle),
        }

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _note(self, method: str, target: str, status: int) -> None:
        with self._guard:
            self.requests.append(Request(method, target, status))

    def _serve(self, conn: socket.socket) -> None:
        assert self._context is not None
        conn.settimeout(DEADLINE)
        try:
            head = _read_head(conn.makefile("rb"))
            if not head:
                return
            method, target = ([*head[0].split(" "), "", ""])[:2]
            if method != "CONNECT" or target != f"{HOST}:443":
                self._note(method, target, 403)
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with self._context.wrap_socket(conn, server_side=True) as tls:
                request = _read_head(tls.makefile("rb"))
                if not request:
                    return
                verb, path = ([*request[0].split(" "), "", ""])[:2]
                body = self.answers.get(path) if verb == "GET" else None
                status = 200 if body is not None else 404
                self._note(verb, path, status)
                data = (body or "").encode()
                reason = "OK" if status == 200 else "Not Found"
                tls.sendall(
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
                    f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                    + data
                )
        except (OSError, ssl.SSLError, ValueError):
            return
        finally:
            conn.close()


def _read_head(stream: IO[bytes]) -> list[str]:
    """A request line and its headers, bounded; [] when the client sent nothing usable."""
    lines: list[str] = []
    for _ in range(HEAD_LINES):
        line = stream.readline(LINE_LIMIT)
        if not line or line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.decode("latin-1").rstrip("\r\n"))
    return []
