"""A real API client of a server nobody runs: what a watch or a net sees while the API server is
down (it restarts between phases), without a cluster and without mocking the client."""

from __future__ import annotations

import socket
from pathlib import Path

from e2e_dra.kube import Kube


def unreachable_kube(tmp_path: Path, **options: str) -> Kube:
    """A client of an API server at a local port that nobody listens on (``options``: those of
    :meth:`Kube.from_kubeconfig`, such as ``user_agent``)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return Kube.from_kubeconfig(kubeconfig, **options)
