"""``e2e-dra cluster up``: a DRA-enabled local cluster for a person to poke at.

It stays in the foreground; Ctrl-C or SIGTERM stops every component and exits 0. Only stdout's
``kubeconfig: PATH`` line is meant for other tools; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import threading
from pathlib import Path
from typing import Any

from e2e_dra._paths import artifacts_dir
from e2e_dra.commands._flags import PathFlag
from e2e_dra.errors import InputError
from e2e_dra.settings import settings

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    cluster = subparsers.add_parser(
        "cluster", help="run a local cluster (hack/local-up-cluster.sh)"
    )
    actions = cluster.add_subparsers(dest="cluster_command", metavar="COMMAND", required=True)
    up = actions.add_parser(
        "up",
        help="bring a DRA-enabled cluster up and keep it running until Ctrl-C",
        description="Run hack/local-up-cluster.sh -d from a Kubernetes source tree and start its "
        "components ourselves, with the resource.k8s.io beta/alpha APIs enabled. Prints "
        "`kubeconfig: PATH` once every component is ready, then waits; Ctrl-C or SIGTERM stops "
        "every component and exits 0. Defaults come from the versions under test (the current "
        "release) and the node runtime from `e2e-dra provision`.",
    )
    up.add_argument("--source-dir", action=PathFlag, help="Kubernetes source tree (hack/)")
    up.add_argument("--bin-dir", action=PathFlag, help="directory with the five server binaries")
    up.add_argument("--feature-gates", default="", metavar="G", help="e.g. DRADeviceTaints=true")
    up.add_argument(
        "--log-dir", action=PathFlag, help="component logs (default: $ARTIFACTS/cluster-up)"
    )
    up.add_argument(
        "--no-provision",
        action="store_true",
        help="use the environment as it is instead of `e2e-dra provision`'s node runtime",
    )
    up.add_argument(
        "--skip-node-ready",
        action="store_true",
        help="do not wait for the node to be Ready (the kubelet's /healthz is still awaited)",
    )
    up.set_defaults(handler=_up)


DRA_RUNTIME_CONFIG = "resource.k8s.io/v1beta1,resource.k8s.io/v1beta2,resource.k8s.io/v1alpha3"
"""Older resource.k8s.io versions on top of the default v1, so any client version can be tried."""


def _up(args: argparse.Namespace) -> int:
    from e2e_dra.localupcluster import Cluster, ClusterError, parse_feature_gates

    try:
        parse_feature_gates(args.feature_gates, where="--feature-gates")
    except ClusterError as exc:  # a malformed value given by the user, as any other flag's
        raise InputError(str(exc)) from None
    source_dir, bin_dir = args.source_dir, args.bin_dir
    if source_dir is None or bin_dir is None:
        from e2e_dra.releases import versions_under_test

        current = versions_under_test().current
        source_dir = source_dir or current.source_dir
        bin_dir = bin_dir or current.bin_dir
    if source_dir is None:
        raise InputError(
            "no Kubernetes source tree for hack/local-up-cluster.sh (the release under test has "
            "none: it was downloaded); give one with --source-dir or KUBERNETES_SOURCE_DIR, or "
            "set E2E_DRA_RELEASE_SOURCE=build to build the release with its source"
        )
    env = _cluster_env(source_dir, provision=not args.no_provision)

    cluster = Cluster(
        source_dir,
        args.log_dir or artifacts_dir() / "cluster-up",
        wait_for_nodes=not args.skip_node_ready,
        log=logger,
        host_lock=settings().host_lock,
    )
    try:
        cluster.start("up", bin_dir, env, args.feature_gates)
    except KeyboardInterrupt as exc:  # the engine stopped every component already
        logger.info(f"interrupted by {exc} while starting: every component is stopped")
        return 0
    try:  # from here on, Ctrl-C or SIGTERM (the edge raises them here) is how it ends
        print(f"kubeconfig: {cluster.kubeconfig}", flush=True)
        logger.info("cluster is up; press Ctrl-C to stop it")
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop(reason="stopped by the user")
    logger.info("cluster stopped")
    return 0


def _cluster_env(source_dir: Path | None, *, provision: bool) -> dict[str, str]:
    env = {"RUNTIME_CONFIG": settings().runtime_config or DRA_RUNTIME_CONFIG}
    if provision:
        from e2e_dra.provision import ensure_node_runtime

        env = {**ensure_node_runtime(source_dir).env(), **env}
    return env
