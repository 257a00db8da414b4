"""A tiny stand-in for a Kubernetes component (or etcd, or kubectl), stdlib only.

Invoked by generated wrapper scripts as ``fake_component.py --fake-name=NAME --fake-version=V
<real args...>``. It records every start (argv, pid, process group, time) as a JSON line in
``$FAKE_RECORD_DIR/<name>.jsonl`` and serves the health endpoint the engine checks, on the port and
with the TLS setup found in its arguments (or kubelet config file), like the real component would.

Behaviour switches, files in ``$FAKE_RECORD_DIR``:
  <name>.die-early    an integer N: exit 1 right away while N > 0 (N is decremented each time)
  <name>.ready-delay  seconds after start before health answers 200 (503 until then)
The fake kubelet also asks for a serving certificate (``<cert dir>/fake-kubelet.csr``) and is
healthy only once the script approved it (``<cert dir>/fake-kubelet.approved``), like the real one.
``kubectl`` records its call and exits with ``$FAKE_KUBECTL_EXIT`` (default 0).
``kube-apiserver --feature-gates=... --version`` refuses to set a gate of ``LOCKED`` (those locked
in the fake's release) to false, as the real one does while parsing its flags.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import ssl
import sys
import time
from pathlib import Path

LOCKED = {"v1.37": ("DRAExtendedResource",)}


def flag(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and index + 1 < len(args):
            return args[index + 1]
    return None


def config_value(path: str, key: str) -> str | None:
    match = re.search(rf"^{key}:\s*\"?([^\"\n]*)\"?\s*$", Path(path).read_text(), re.MULTILINE)
    return match.group(1) if match else None


def main() -> int:
    name = version = ""
    args = []
    for arg in sys.argv[1:]:
        if arg.startswith("--fake-name="):
            name = arg.split("=", 1)[1]
        elif arg.startswith("--fake-version="):
            version = arg.split("=", 1)[1]
        else:
            args.append(arg)
    if "--version" in args:
        gates = dict(g.split("=", 1) for g in (flag(args, "feature-gates") or "").split(",") if g)
        for gate, value in gates.items():
            if gate in LOCKED.get(version[:5], ()) and value == "false":
                print(f'err="cannot set feature gate {gate} to false, feature is locked to true"')
                return 1
        print(f"Kubernetes {version}")
        return 0
    record_dir = Path(os.environ["FAKE_RECORD_DIR"])
    record = {"argv": args, "version": version, "pid": os.getpid(), "pgid": os.getpgid(0)}
    with open(record_dir / f"{name}.jsonl", "a") as out:
        out.write(json.dumps({**record, "time": time.time()}) + "\n")
    print(f"{name} {version} starting with {args}", flush=True)
    if name == "kubectl":
        return int(os.environ.get("FAKE_KUBECTL_EXIT", "0"))

    die_file = record_dir / f"{name}.die-early"
    if die_file.exists() and int(die_file.read_text() or 0) > 0:
        die_file.write_text(str(int(die_file.read_text()) - 1))
        print(f"{name}: dying early on purpose", flush=True)
        return 1
    delay_file = record_dir / f"{name}.ready-delay"
    ready_at = time.time() + (float(delay_file.read_text()) if delay_file.exists() else 0.0)

    cert = key = client_ca = None
    approval: Path | None = None
    if name == "etcd":
        port = int((flag(args, "listen-client-urls") or "").rsplit(":", 1)[1])
    elif name == "kube-proxy":
        port = int(flag(args, "healthz-port") or 0)
    elif name == "kubelet":
        config = flag(args, "config") or ""
        port = int(config_value(config, "port") or 0)
        cert, key = config_value(config, "tlsCertFile"), config_value(config, "tlsPrivateKeyFile")
        client_ca = config_value(config, "clientCAFile")
        cert_dir = Path(config_value(config, "fakeCertDir") or ".")
        (cert_dir / "fake-kubelet.csr").touch()
        approval = cert_dir / "fake-kubelet.approved"
    else:
        port = int(flag(args, "secure-port") or 0)
        cert_dir = flag(args, "cert-dir") or "."
        cert = flag(args, "tls-cert-file") or f"{cert_dir}/serving.crt"
        key = flag(args, "tls-private-key-file") or f"{cert_dir}/serving.key"
        client_ca = flag(args, "client-ca-file")

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ready = time.time() >= ready_at and (approval is None or approval.exists())
            if self.path == "/version":
                body, status = json.dumps({"gitVersion": version}).encode(), 200
            else:
                body, status = (b"ok", 200) if ready else (b"not ready", 503)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *fmt_args: object) -> None:
            print(f"{name}: {format % fmt_args}", flush=True)

    http.server.ThreadingHTTPServer.allow_reuse_address = True
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Health)
    if cert and key:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        if client_ca:
            context.load_verify_locations(client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"{name}: serving on port {port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
