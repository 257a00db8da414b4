"""A loopback Go module proxy: ``@v/list`` plus the ``.info``/``.mod`` of a few releases.

The proxy protocol is a plain file tree over HTTP, so this stands in for proxy.golang.org as the
loopback release tree (release_server.py) stands in for dl.k8s.io; the code under test talks plain
HTTP to it. Shared by the build tests and the failure tests that run the real command.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading

KUBERNETES_GO_MOD = """\
// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

require github.com/google/cel-go v0.29.2 // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go // the client
\tk8s.io/dynamic-resource-allocation => ./staging/src/k8s.io/dynamic-resource-allocation
)

replace github.com/example/forked v1.2.3 => github.com/example/fork v1.2.4
"""


class ProxyTree:
    """A loopback Go module proxy holding ``@v/list`` plus the ``.info``/``.mod`` of releases."""

    def __init__(self, listed: list[str], served: list[str]) -> None:
        self.listed = listed
        self.served = set(served) | set(listed)
        self.requests: list[str] = []
        self.status_for_missing = 404
        self.go_mod = KUBERNETES_GO_MOD  # what every release's .mod says
        self.overrides: dict[str, int] = {}
        # path -> (status, body, headers): a proxy that answers something else than it should
        self.answers: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        # other modules: module path -> {version: status of its zip}
        self.module_zips: dict[str, dict[str, int]] = {}
        tree = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                tree.requests.append(f"HEAD {self.path}")
                module, _, name = self.path.lstrip("/").partition("/@v/")
                version = name.removesuffix(".zip")
                self.send_response(tree.module_zips.get(module, {}).get(version, 404))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                tree.requests.append(self.path)
                if self.path in tree.answers:
                    status, data, headers = tree.answers[self.path]
                else:
                    status, body = tree.answer(self.path)
                    data, headers = body.encode(), {}
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                with contextlib.suppress(OSError):  # the client stopped reading
                    self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def answer(self, path: str) -> tuple[int, str]:
        if path in self.overrides:
            return self.overrides[path], "teapot"
        module, _, name = path.lstrip("/").partition("/@v/")
        if module in self.module_zips and name == "list":
            return 200, "".join(f"{v}\n" for v in self.module_zips[module])
        prefix = "/k8s.io/kubernetes/@v/"
        if not path.startswith(prefix):
            return 404, "not found"
        name = path.removeprefix(prefix)
        if name == "list":
            return 200, "".join(f"{v}\n" for v in self.listed)
        version, _, kind = name.rpartition(".")
        if version not in self.served:
            return self.status_for_missing, f"not found: {version}"
        if kind == "info":
            return 200, json.dumps({"Version": version, "Time": "2026-09-23T17:07:00Z"})
        if kind == "mod":
            return 200, self.go_mod
        return 404, "not found"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
