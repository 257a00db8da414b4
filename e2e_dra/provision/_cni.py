"""Pod networking that reaches nothing: a bridge without gateway, masquerade or routes.

Nothing of ours talks to pod IPs, and pods must not reach anywhere, so the network is the least
that lets the runtime create a pod sandbox. hack/local-up-cluster.sh downloads CNI plugins from
GitHub unless ``/opt/cni/bin/loopback`` exists, so Debian's plugins are copied there. The config
lives in our own directory (containerd is pointed at it) so it neither overrides nor is overridden
by other configs in /etc/cni/net.d.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from e2e_dra.errors import ProvisionError
from e2e_dra.hostkit import atomic_copy, write_if_changed

DEBIAN_PLUGIN_DIR = Path("/usr/lib/cni")
CNI_BIN_DIR = Path("/opt/cni/bin")
PLUGINS = ("bridge", "host-local", "loopback")
NETWORK_NAME = "e2e-dra"
BRIDGE = "e2edra0"
POD_SUBNET = "10.88.0.0/16"


def conflist(subnet: str = POD_SUBNET) -> dict:
    return {
        "cniVersion": "1.0.0",
        "name": NETWORK_NAME,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": False,
                "isDefaultGateway": False,
                "ipMasq": False,
                "hairpinMode": False,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "routes": []},
            }
        ],
    }


def missing_plugins(bin_dir: Path = CNI_BIN_DIR) -> list[str]:
    return [p for p in PLUGINS if not os.access(bin_dir / p, os.X_OK)]


def install_plugins(source: Path = DEBIAN_PLUGIN_DIR, bin_dir: Path = CNI_BIN_DIR) -> list[str]:
    """Copy the plugins we use into ``bin_dir`` (all or none); returns what was copied."""
    wanted = missing_plugins(bin_dir)
    absent = [str(source / p) for p in wanted if not (source / p).is_file()]
    if absent:
        raise ProvisionError(
            f"CNI plugin {', '.join(absent)} is missing: "
            "install Debian's containernetworking-plugins"
        )
    for plugin in wanted:
        bin_dir.mkdir(parents=True, exist_ok=True)
        atomic_copy(source / plugin, bin_dir / plugin)
    return wanted


def conflist_text() -> str:
    return json.dumps(conflist(), indent=2) + "\n"


def write_config(conf_dir: Path) -> bool:
    """Write our conflist into ``conf_dir``; True when it changed."""
    return write_if_changed(conf_dir / f"10-{NETWORK_NAME}.conflist", conflist_text())
