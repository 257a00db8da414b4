"""``e2e-dra driver kubelet-plugin``: the test driver on its own, with upstream's flags."""

from __future__ import annotations

import argparse
import logging
import threading
from pathlib import Path
from typing import Any

from e2e_dra.errors import E2EDRAError
from e2e_dra.settings import settings

logger = logging.getLogger(__name__)

DEFAULT_DRIVER_NAME = "test-driver.cdi.k8s.io"


def register(subparsers: Any) -> None:
    driver = subparsers.add_parser(
        "driver",
        help="run the test DRA driver outside the suite",
        description="The Python DRA test driver (a port of Kubernetes' dra-test-driver).",
    )
    commands = driver.add_subparsers(title="commands", metavar="COMMAND", required=True)
    plugin = commands.add_parser(
        "kubelet-plugin",
        help="serve as a kubelet plugin on this node until SIGINT/SIGTERM",
        description="Register with the local kubelet, prepare claims by writing CDI specs, and "
        "publish one pool named after the node with --num-devices devices. Stops cleanly on "
        "SIGINT/SIGTERM (sockets removed).",
    )
    plugin.add_argument("--node-name", required=True, help="the node this plugin serves")
    plugin.add_argument("--drivername", default=DEFAULT_DRIVER_NAME, help="%(default)s")
    plugin.add_argument("--num-devices", type=_count, default=4, help="%(default)s")
    plugin.add_argument("--cdi-dir", type=Path, default=Path("/var/run/cdi"), help="%(default)s")
    plugin.add_argument(
        "--datadir",
        type=Path,
        default=Path("/var/lib/kubelet/plugins"),
        help="the DRA socket goes to <datadir>/<drivername>/dra.sock (%(default)s)",
    )
    plugin.add_argument(
        "--plugin-registration-path",
        type=Path,
        default=Path("/var/lib/kubelet/plugins_registry"),
        help="%(default)s",
    )
    plugin.add_argument(
        "--kubeconfig",
        type=Path,
        help="default: $KUBECONFIG, else /var/run/kubernetes/admin.kubeconfig",
    )
    plugin.add_argument(
        "--kube-api-qps",
        type=float,
        default=50,
        help="accepted for compatibility; this client does not rate-limit (%(default)s)",
    )
    plugin.add_argument("--kube-api-burst", type=int, default=100, help="as --kube-api-qps")
    plugin.add_argument(
        "--enable-device-metadata",
        action="store_true",
        help="accepted for compatibility; device metadata is not implemented",
    )
    plugin.add_argument(
        "--namespace",
        default="default",
        help="namespace of the plugin's service account (%(default)s)",
    )
    plugin.add_argument(
        "--privileged",
        action="store_true",
        help="use the kubeconfig's identity instead of the plugin's service account",
    )
    plugin.set_defaults(handler=_kubelet_plugin)


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"--num-devices must not be negative: {text}")
    return value


def _kubeconfig(explicit: Path | None) -> Path:
    """``--kubeconfig``, else ``KUBECONFIG``, else local-up-cluster.sh's admin kubeconfig."""
    chosen = explicit or settings().kubeconfig or Path("/var/run/kubernetes/admin.kubeconfig")
    if not chosen.is_file():
        raise E2EDRAError(f"--kubeconfig: no such file: {chosen}")
    return chosen


def _kubelet_plugin(args: argparse.Namespace) -> int:
    from e2e_dra.driver import Driver, node_devices
    from e2e_dra.kube import Kube

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    kube = Kube.from_kubeconfig(_kubeconfig(args.kubeconfig), user_agent="e2e-dra-driver")
    driver = Driver(
        args.drivername,
        args.node_name,
        kube,
        resources=node_devices(args.node_name, args.num_devices),
        cdi_dir=args.cdi_dir,
        registry_dir=args.plugin_registration_path,
        plugin_dir=args.datadir / args.drivername,
        privileged_client=args.privileged,
        namespace=args.namespace,
    )
    try:
        driver.start()
        logger.info(
            f"driver {driver.name} on node {driver.node_name}: serving {driver.dra_socket}, "
            f"registering via {driver.registration_socket}; Ctrl-C stops"
        )
        threading.Event().wait()  # until Ctrl-C or SIGTERM (the edge raises them here)
    except KeyboardInterrupt:  # SIGTERM too: a server asked to stop stops, and that is success
        logger.info(f"driver {driver.name}: stopping")
    finally:
        driver.stop()
    return 0
