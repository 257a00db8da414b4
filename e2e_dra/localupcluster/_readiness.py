"""When is a component ready: the endpoint upstream checks for each, polled while it runs."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from e2e_dra.hostkit import poll
from e2e_dra.localupcluster._components import ETCD
from e2e_dra.localupcluster._tls import AdminTLS, unverified
from e2e_dra.localupcluster.cmd import Cmd

POLL_INTERVAL = 0.05
"""Upstream polls every second; ready times of 0.2-2 s need a short poll to keep the engine's
overhead under 10 %. A refused connection or a /healthz request costs next to nothing."""


class ComponentExited(Exception):
    """The process ended while we waited for it: worth a retry."""


class ComponentNotReady(Exception):
    """The process runs but did not get ready in time."""


@dataclass(frozen=True)
class Probe:
    url: str
    verify: ssl.SSLContext | bool


def probe_for(component: str, settings: Mapping[str, str], tls: Callable[[], AdminTLS]) -> Probe:
    """The health endpoint of ``component`` (``tls`` is only called for endpoints needing it)."""
    api_host = settings["API_HOST_IP"]
    if component == ETCD:
        return Probe(f"http://{settings['ETCD_HOST']}:{settings['ETCD_PORT']}/health", False)
    if component == "kube-apiserver":
        return Probe(f"https://{api_host}:{settings['API_SECURE_PORT']}/readyz", tls().verified)
    if component == "kube-scheduler":
        return Probe(f"https://{api_host}:{settings['SCHEDULER_SECURE_PORT']}/readyz", unverified())
    if component == "kube-controller-manager":
        return Probe(f"https://{api_host}:{settings['KCM_SECURE_PORT']}/healthz", unverified())
    if component == "kube-proxy":
        return Probe(f"http://{api_host}:{settings['PROXY_HEALTHZ_PORT']}/healthz", False)
    if component == "kubelet":
        host, port = settings["KUBELET_HOST"], settings["KUBELET_PORT"]
        return Probe(f"https://{host}:{port}/healthz", tls().unverified_with_client_cert)
    raise ValueError(f"no readiness check for {component}")


def _wait(cmd: Cmd, timeout: float, what: str, check: Callable[[], str | None]) -> None:
    """Call ``check`` (None = ready, else why not) until ready, the process ends, or time is up."""

    def why_not() -> str | None:
        if not cmd.running():
            raise ComponentExited(f"{cmd.name} stopped unexpectedly while waiting for {what}")
        return check()

    result = poll(why_not, timeout=timeout, interval=POLL_INTERVAL, until=lambda why: not why)
    if not result.done:
        raise ComponentNotReady(f"{what}: {result.value}")


def wait_http_ready(cmd: Cmd, probe: Probe, timeout: float) -> None:
    import httpx  # heavy: kept out of e2e-dra --help

    with httpx.Client(verify=probe.verify, timeout=5.0) as client:

        def check() -> str | None:
            try:
                response = client.get(probe.url)
            except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
                return f"{type(exc).__name__}: {exc}"
            return None if response.status_code == 200 else f"HTTP {response.status_code}"

        _wait(cmd, timeout, f"GET {probe.url}", check)


def wait_nodes_ready(cmd: Cmd, api_url: str, tls: AdminTLS, timeout: float) -> None:
    """Until there is at least one node and every node has condition Ready=True."""
    import httpx  # heavy: kept out of e2e-dra --help

    with httpx.Client(verify=tls.verified, timeout=5.0) as client:

        def check() -> str | None:
            try:
                response = client.get(f"{api_url}/api/v1/nodes")
            except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
                return f"listing nodes: {type(exc).__name__}: {exc}"
            if response.status_code != 200:
                return f"listing nodes: HTTP {response.status_code}"
            nodes = response.json().get("items") or []
            if not nodes:
                return "no node registered yet"
            for node in nodes:
                conditions = node.get("status", {}).get("conditions") or []
                ready = [c for c in conditions if c.get("type") == "Ready"]
                if not ready or ready[0].get("status") != "True":
                    return f"node {node['metadata']['name']} is not Ready"
            return None

        _wait(cmd, timeout, "all nodes Ready", check)
