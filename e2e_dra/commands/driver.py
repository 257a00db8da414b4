"""``e2e-dra driver kubelet-plugin``: the test driver on its own, with upstream's flags."""

from __future__ import annotations

import argparse
import logging
import threading
from pathlib import Path
from typing import Any

from e2e_dra.commands._flags import NameFlag, NumberFlag, PathFlag
from e2e_dra.errors import InputError
from e2e_dra.settings import settings

logger = logging.getLogger(__name__)

DEFAULT_DRIVER_NAME = "test-driver.cdi.k8s.io"
DEFAULT_KUBECONFIG = Path("/var/run/kubernetes/admin.kubeconfig")
MAX_DEVICES = 128
"""The most devices one ResourceSlice may hold (resource.k8s.io's ResourceSliceMaxDevices): the
pool is one slice, so more would be refused by the API server anyway, after filling the memory
with a billion device entries."""
MIN_DEVICES = 0
"""Zero is a pool the plugin can serve: it registers, and publishes its node's one ResourceSlice
with no devices, which the API server accepts (a node where the driver runs and offers nothing, as
upstream's ``-num-devices=0``; a claim for it then stays pending). Fewer than none is nothing the
plugin could publish, so a negative count is a usage mistake, refused before anything runs."""
MAX_API_RATE = 10_000
"""Bound of --kube-api-qps and --kube-api-burst: accepted for compatibility only, but a value no
API server could serve is a mistake worth a line."""


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
    plugin.add_argument(
        "--node-name", required=True, action=NameFlag, help="the node this plugin serves"
    )
    plugin.add_argument(
        "--drivername", default=DEFAULT_DRIVER_NAME, action=NameFlag, help="%(default)s"
    )
    plugin.add_argument(
        "--num-devices",
        action=NumberFlag,
        low=MIN_DEVICES,
        high=MAX_DEVICES,
        unit=" devices",
        why=f"a ResourceSlice holds at most {MAX_DEVICES} devices",
        default=4,
        help=f"devices in the node's pool, {MIN_DEVICES} (an empty pool) to {MAX_DEVICES} "
        "(%(default)s)",
    )
    plugin.add_argument(
        "--cdi-dir", action=PathFlag, default=Path("/var/run/cdi"), help="%(default)s"
    )
    plugin.add_argument(
        "--datadir",
        action=PathFlag,
        default=Path("/var/lib/kubelet/plugins"),
        help="the DRA socket goes to <datadir>/<drivername>/dra.sock (%(default)s)",
    )
    plugin.add_argument(
        "--plugin-registration-path",
        action=PathFlag,
        default=Path("/var/lib/kubelet/plugins_registry"),
        help="%(default)s",
    )
    plugin.add_argument(
        "--kubeconfig",
        action=PathFlag,
        help="default: $KUBECONFIG, else /var/run/kubernetes/admin.kubeconfig",
    )
    plugin.add_argument(
        "--kube-api-qps",
        action=NumberFlag,
        low=0,
        high=MAX_API_RATE,
        real=True,
        default=50.0,
        help="accepted for compatibility; this client does not rate-limit (%(default)s)",
    )
    plugin.add_argument(
        "--kube-api-burst",
        action=NumberFlag,
        low=0,
        high=MAX_API_RATE,
        default=100,
        help="as --kube-api-qps",
    )
    plugin.add_argument(
        "--enable-device-metadata",
        action="store_true",
        help="accepted for compatibility; device metadata is not implemented",
    )
    plugin.add_argument(
        "--namespace",
        action=NameFlag,
        label=True,
        default="default",
        help="namespace of the plugin's service account (%(default)s)",
    )
    plugin.add_argument(
        "--privileged",
        action="store_true",
        help="use the kubeconfig's identity instead of the plugin's service account",
    )
    plugin.set_defaults(handler=_kubelet_plugin)


def _kubeconfig(explicit: Path | None) -> Path:
    """``--kubeconfig``, else ``KUBECONFIG``, else local-up-cluster.sh's admin kubeconfig; the
    error names the one that was used."""
    configured = settings().kubeconfig
    if explicit is not None:
        chosen, where = explicit, "--kubeconfig"
    elif configured is not None:
        chosen, where = configured, "KUBECONFIG"
    else:
        chosen, where = DEFAULT_KUBECONFIG, "the default kubeconfig (no --kubeconfig, KUBECONFIG)"
    if not chosen.is_file():
        what = "is not a file" if chosen.exists() else "does not exist"
        raise InputError(
            f"{where} {str(chosen)!r} {what}; give the admin kubeconfig of a running cluster with "
            "--kubeconfig (`e2e-dra cluster up` prints its path)"
        )
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
