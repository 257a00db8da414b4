"""``e2e-dra provision``: make this host able to run the suite, or say what it lacks."""

from __future__ import annotations

import argparse
import logging
import shlex
from pathlib import Path
from typing import Any

from e2e_dra._console import console
from e2e_dra.commands._flags import PathFlag
from e2e_dra.settings import settings

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "provision",
        help="prepare the node runtime (containerd with CDI, CNI, etcd, cfssl, images)",
        description="Find, build, install or start what the suite needs on this host: the two "
        "Kubernetes releases under test, containerd with CDI (built from the Go module proxy), "
        "runc and CNI plugins (Debian), etcd and cfssl (Go module proxy), the pause and test "
        "images (from Debian's busybox-static). Idempotent: a second run only checks.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="only report what is there or missing")
    mode.add_argument("--stop", action="store_true", help="stop our containerd and its containers")
    parser.add_argument(
        "--runtime-only",
        action="store_true",
        help="skip the Kubernetes releases; the etcd version comes from --source-dir",
    )
    parser.add_argument(
        "--source-dir",
        action=PathFlag,
        help="a Kubernetes source tree whose hack/lib/etcd.sh names the etcd to build "
        "(default: the current release's; with --runtime-only: $KUBERNETES_SOURCE_DIR)",
    )
    parser.add_argument(
        "--print-env",
        action="store_true",
        help="print what hack/local-up-cluster.sh needs as `export VAR=value` lines on stdout",
    )
    parser.set_defaults(handler=_provision)


def _provision(args: argparse.Namespace) -> int:
    from e2e_dra.provision import (
        NodeRuntimeIncomplete,
        ensure_node_runtime,
        node_dir,
        stop_node_runtime,
    )

    if args.stop:
        stopped = stop_node_runtime()
        logger.info(f"containerd in {node_dir()}: {'stopped' if stopped else 'was not running'}")
        return 0
    source_dir = args.source_dir
    if source_dir is None and not args.runtime_only and not args.check:
        from e2e_dra.releases import versions_under_test

        versions = versions_under_test()
        for label, release in (("current", versions.current), ("previous", versions.previous)):
            logger.info(
                f"kubernetes {label}: {release.version} ({release.origin}) in {release.bin_dir}"
            )
        source_dir = versions.current.source_dir
    if source_dir is None:
        source_dir = settings().source_dir
    try:
        runtime = ensure_node_runtime(source_dir, check_only=args.check)
    except NodeRuntimeIncomplete as incomplete:
        _print_results(incomplete.results, node_dir())
        raise
    _print_results(runtime.results, node_dir())
    if args.print_env:
        for key, value in runtime.env().items():
            print(f"export {key}={shlex.quote(value)}")
    return 0


def _print_results(results: list[Any], node: Path) -> None:
    from rich.table import Table  # heavy: kept out of e2e-dra --help

    table = Table("piece", "state", "seconds", "detail", title=f"node runtime in {node}")
    for result in results:
        table.add_row(result.name, result.action, f"{result.seconds:.1f}", result.detail)
    console().print(table)
