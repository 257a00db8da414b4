"""The API client: paths, which errors a restart explains, and its connection pool."""

from __future__ import annotations

import http.server
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from e2e_dra.errors import ExecError
from e2e_dra.kube import Conflict, Kube, KubeError, NotFound, path, transient


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (("v1", "pods", "p"), {"namespace": "default"}, "/api/v1/namespaces/default/pods/p"),
        (("v1", "nodes"), {}, "/api/v1/nodes"),
        (("resource.k8s.io/v1", "resourceslices"), {}, "/apis/resource.k8s.io/v1/resourceslices"),
        (
            ("resource.k8s.io/v1beta2", "resourceclaims", "c"),
            {"namespace": "ns", "subresource": "status"},
            "/apis/resource.k8s.io/v1beta2/namespaces/ns/resourceclaims/c/status",
        ),
    ],
)
def test_paths(args: tuple, kwargs: dict, expected: str) -> None:
    assert path(*args, **kwargs) == expected


@pytest.mark.parametrize(
    "exc",
    [
        KubeError(0, "ProtocolError", "('Connection aborted.', RemoteDisconnected())"),
        KubeError(
            503, "ServiceUnavailable", "the server is currently unable to handle the request"
        ),
        KubeError(403, "Forbidden", 'User "kubernetes-admin" cannot get resource "pods"'),
        KubeError(429, "TooManyRequests", "slow down"),
        ConnectionResetError(104, "Connection reset by peer"),
        urllib3.exceptions.ProtocolError("Connection aborted."),
        ApiException(status=0, reason="Handshake status 500 Internal Server Error"),
        ApiException(status=400, reason="unable to upgrade connection: pod does not exist"),
    ],
)
def test_what_a_restart_explains_is_retried(exc: BaseException) -> None:
    assert transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        NotFound(404, "NotFound", 'pods "p" not found'),
        Conflict(409, "AlreadyExists", 'pods "p" already exists'),
        KubeError(422, "Invalid", "spec.devices.requests[0].name: Required value"),
        AssertionError("timed out after 60s waiting for pod p to be Running"),
        TimeoutError("timed out waiting for claims to be deleted"),
        KeyError("kind"),
        ExecError("default/p/c: ['env'] exited with 1: "),
    ],
)
def test_real_failures_are_not_retried(exc: BaseException) -> None:
    assert not transient(exc)


class _SlowVersion(http.server.BaseHTTPRequestHandler):
    """An API server's /version that answers after a while: requests overlap."""

    protocol_version = "HTTP/1.1"  # keep-alive: a connection goes back to its pool

    def do_GET(self) -> None:
        time.sleep(0.3)
        body = json.dumps({"gitVersion": "v1.38.0-beta.0"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig of a plain HTTP server on this machine that serves a slow /version."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowVersion)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters:\n- name: k\n  cluster:\n    server: http://127.0.0.1:{server.server_port}\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
    )
    yield path
    server.shutdown()
    server.server_close()


def _pool_full_warnings(kube: Kube, at_once: int, caplog: pytest.LogCaptureFixture) -> int:
    """How often ``kube`` threw a connection away, asked ``at_once`` times at the same time."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
        threads = [threading.Thread(target=kube.server_version) for _ in range(at_once)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return sum("Connection pool is full" in r.getMessage() for r in caplog.records)


def test_a_client_shared_by_many_threads_keeps_a_connection_for_each(
    kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A suite's client is shared by every subtest's driver at once: sized for them, no
    connection is thrown away; the library's default (five per CPU) would throw them away."""
    at_once = 24
    sized = Kube.from_kubeconfig(kubeconfig, pool_size=at_once)
    small = Kube.from_kubeconfig(kubeconfig, pool_size=4)
    try:
        assert _pool_full_warnings(sized, at_once, caplog) == 0
        assert _pool_full_warnings(sized.fresh(), at_once, caplog) == 0  # its fresh ones too
        assert _pool_full_warnings(small, at_once, caplog) > 0  # the check can fail
    finally:
        sized.close()
        small.close()
