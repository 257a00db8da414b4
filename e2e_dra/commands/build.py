"""``e2e-dra build``: Kubernetes server binaries and source tree from the Go module proxy.

The last stdout line is the binaries' directory, as with ``download``, so scripts can use either.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from e2e_dra.commands._flags import PathFlag
from e2e_dra.settings import directory


def register(subparsers: Any) -> None:
    build = subparsers.add_parser(
        "build",
        help="build a release from the Go module proxy (once); print its binaries' directory",
        description="Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, "
        "kube-proxy and kubectl of a Kubernetes release from the Go module proxy ($GOPROXY) and "
        "keep them with the release's source tree in the cache. A cached release is not rebuilt. "
        "The last line of stdout is the directory holding the binaries.",
    )
    build.add_argument(
        "version",
        metavar="VERSION|MAJOR.MINOR|stable|latest",
        help="e.g. v1.38.0-beta.0, 1.36, stable or latest",
    )
    build.add_argument("--proxy", help="Go module proxy URL (default: the first entry of GOPROXY)")
    build.add_argument(
        "--cache-dir",
        action=PathFlag,
        parse=directory,
        help="where built releases are kept (default: <e2e-dra cache>/kubernetes)",
    )
    build.add_argument(
        "--source-dir",
        action="store_true",
        help="also print the source tree (hack/local-up-cluster.sh) on the line before",
    )
    build.add_argument(
        "--control-plane-only",
        action="store_true",
        help="build kube-apiserver, kube-controller-manager, kube-scheduler and kubectl only "
        "(what a control-plane-first upgrade needs; for releases whose node side cannot be built)",
    )
    build.set_defaults(handler=_build)
    register_source(subparsers)


def _build(args: argparse.Namespace) -> int:
    from e2e_dra.releases import (
        BUILT_COMMANDS,
        CONTROL_PLANE_COMMANDS,
        GoBuildSource,
        resolve_release,
    )

    source = GoBuildSource(proxy_url=args.proxy, cache_dir=args.cache_dir)
    commands = CONTROL_PLANE_COMMANDS if args.control_plane_only else BUILT_COMMANDS
    release = source.fetch(resolve_release(args.version, source), commands)
    if args.source_dir:
        print(release.source_dir)
    print(release.bin_dir)
    return 0


def register_source(subparsers: Any) -> None:
    source = subparsers.add_parser(
        "source",
        help="write a release's source as a Kubernetes checkout (one git commit) to change",
        description="Write the buildable source tree of a Kubernetes release served by the Go "
        "module proxy into DIR, laid out as a Kubernetes checkout: k8s.io/kubernetes at the root "
        "and each staging module under staging/src/k8s.io/, as one git commit tagged with the "
        "release. Change it, then run the suite with KUBERNETES_SOURCE_DIR=DIR: the commands the "
        "change touches are built from DIR, the others are the release's own build. What the "
        "proxy here refuses is replaced as the release's build replaces it, and listed in "
        "DIR/.e2e-dra/README.md. The last line of stdout is DIR.",
    )
    source.add_argument(
        "version",
        metavar="VERSION|MAJOR.MINOR|stable|latest",
        help="e.g. v1.38.0-beta.0, 1.37, stable or latest",
    )
    source.add_argument("dir", metavar="DIR", help="a new (or empty) directory")
    source.add_argument("--proxy", help="Go module proxy URL (default: the first entry of GOPROXY)")
    source.set_defaults(handler=_source)


def _source(args: argparse.Namespace) -> int:
    from e2e_dra.errors import InputError
    from e2e_dra.releases import GoBuildSource, resolve_release, write_checkout

    if not args.dir.strip():  # Path("") is ".": never write into wherever the command started
        raise InputError("DIR is empty; name a new directory to write the checkout into")
    source = GoBuildSource(proxy_url=args.proxy)
    checkout = write_checkout(source, resolve_release(args.version, source), Path(args.dir))
    for deviation in checkout.deviations:
        print(f"deviation: {deviation}")
    print(checkout.path)
    return 0
