"""TLS material from an admin kubeconfig: file references as well as embedded data."""

from __future__ import annotations

import base64
import ssl
import subprocess
from pathlib import Path

import pytest

from e2e_dra.localupcluster import ClusterError
from e2e_dra.localupcluster._tls import admin_tls

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
  - name: other
    cluster: {{server: https://elsewhere:1}}
  - name: local
    cluster:
      {ca}
      server: https://localhost:6443/
users:
  - name: admin
    user:
      {cert}
      {key}
contexts:
  - name: local
    context: {{cluster: local, user: admin}}
current-context: local
"""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = ["openssl", "req", *ec, "-subj", "/CN=test"]
    subprocess.run([*run, "-x509", "-keyout", root / "ca.key", "-out", root / "ca.crt"], check=True)
    subprocess.run([*run, "-x509", "-keyout", root / "c.key", "-out", root / "c.crt"], check=True)
    return root


def test_file_references_are_resolved_relative_to_the_kubeconfig(pki: Path) -> None:
    config = pki / "rel.kubeconfig"
    config.write_text(
        KUBECONFIG.format(
            ca="certificate-authority: ca.crt",
            cert="client-certificate: c.crt",
            key=f"client-key: {pki / 'c.key'}",
        )
    )
    tls = admin_tls(config)
    assert tls.server == "https://localhost:6443"
    assert tls.verified.verify_mode == ssl.CERT_REQUIRED
    assert tls.unverified_with_client_cert.verify_mode == ssl.CERT_NONE
    assert len(tls.verified.get_ca_certs()) == 1


def test_embedded_data_is_used(pki: Path) -> None:
    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = pki / "flat.kubeconfig"
    config.write_text(
        KUBECONFIG.format(
            ca=f"certificate-authority-data: {data('ca.crt')}",
            cert=f"client-certificate-data: {data('c.crt')}",
            key=f"client-key-data: {data('c.key')}",
        )
    )
    assert len(admin_tls(config).verified.get_ca_certs()) == 1


def test_missing_client_key_is_named(pki: Path) -> None:
    config = pki / "nokey.kubeconfig"
    config.write_text(
        KUBECONFIG.format(
            ca="certificate-authority: ca.crt", cert="client-certificate: c.crt", key=""
        )
    )
    with pytest.raises(ClusterError, match=rf"kubeconfig {config} lacks a CA or a client"):
        admin_tls(config)


def test_unreadable_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"cannot read kubeconfig .*missing"):
        admin_tls(tmp_path / "missing")
