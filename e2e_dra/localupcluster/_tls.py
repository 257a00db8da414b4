"""TLS material for readiness probes, taken from the cluster's admin kubeconfig.

The apiserver is checked with full verification (cluster CA + admin client certificate); the
kubelet requires a client certificate but serves a bootstrapped one we cannot verify; scheduler and
controller-manager serve self-signed certificates and need no client certificate.
"""

from __future__ import annotations

import base64
import functools
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.localupcluster._errors import ClusterError


@dataclass(frozen=True)
class AdminTLS:
    server: str
    verified: ssl.SSLContext
    unverified_with_client_cert: ssl.SSLContext


@functools.cache
def unverified() -> ssl.SSLContext:
    """Shared: building a context costs tens of milliseconds, a visible share of a restart.
    Never add a client certificate to it: scheduler and controller-manager probes use it too."""
    return _unverified_context()


def _unverified_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _material(entry: dict, key: str, base: Path, scratch: Path) -> Path | None:
    """A file path for ``key`` (``client-certificate``...), writing ``key-data`` out if needed."""
    data = entry.get(f"{key}-data")
    if data:
        path = scratch / key
        path.write_bytes(base64.b64decode(data))
        return path
    value = entry.get(key)
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else base / path


def _current(config: dict, kind: str, name: str | None) -> dict:
    for item in config.get(f"{kind}s") or []:
        if item.get("name") == name:
            return item.get(kind) or {}
    items = config.get(f"{kind}s") or []
    return (items[0].get(kind) or {}) if items else {}


def admin_tls(kubeconfig: Path) -> AdminTLS:
    """Contexts for the apiserver (verified) and kubelet (client cert, unverified server)."""
    import yaml  # heavy: kept out of e2e-dra --help

    try:
        config = yaml.safe_load(kubeconfig.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ClusterError(f"cannot read kubeconfig {kubeconfig}: {exc}") from exc
    context_name = config.get("current-context")
    context = _current(config, "context", context_name)
    cluster = _current(config, "cluster", context.get("cluster"))
    user = _current(config, "user", context.get("user"))
    base = kubeconfig.parent
    with tempfile.TemporaryDirectory(prefix="e2e-dra-tls-") as tmp:
        scratch = Path(tmp)
        ca = _material(cluster, "certificate-authority", base, scratch)
        cert = _material(user, "client-certificate", base, scratch)
        key = _material(user, "client-key", base, scratch)
        if ca is None or cert is None or key is None:
            raise ClusterError(
                f"kubeconfig {kubeconfig} lacks a CA or a client certificate/key for its user"
            )
        try:
            verified = ssl.create_default_context(cafile=str(ca))
            verified.load_cert_chain(str(cert), str(key))
            insecure = _unverified_context()  # its own: this one carries the admin identity
            insecure.load_cert_chain(str(cert), str(key))
        except (OSError, ssl.SSLError) as exc:
            raise ClusterError(f"kubeconfig {kubeconfig}: unusable TLS material: {exc}") from exc
    return AdminTLS(
        server=str(cluster.get("server", "")).rstrip("/"),
        verified=verified,
        unverified_with_client_cert=insecure,
    )
