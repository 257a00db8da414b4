"""Commands about versions and releases: previous-minor, resolve, download, versions.

Their names, arguments and stdout are an interface other tools call; stdout carries only the
answer (the last line of ``download`` is the binaries' directory), progress goes to stderr.
"""

from __future__ import annotations

import argparse
from typing import Any

from e2e_dra.commands._flags import PathFlag
from e2e_dra.settings import directory

_BASE_URL_HELP = (
    "release tree to use (default: $KUBERNETES_RELEASE_URL, else https://dl.k8s.io/release)"
)


def register(subparsers: Any) -> None:
    previous = subparsers.add_parser(
        "previous-minor",
        help="print the MAJOR.MINOR to upgrade from",
        description="Print the release line to upgrade from: minor - 1, or minor - 2 for an "
        "-alpha.0 build (during code freeze master already calls itself the next alpha.0).",
    )
    previous.add_argument("version", metavar="VERSION", help="e.g. v1.37.0-alpha.0.812+0123abcd")
    previous.set_defaults(handler=_previous_minor)

    resolve = subparsers.add_parser(
        "resolve",
        help="print the exact release a version, MAJOR.MINOR, 'stable' or 'latest' names",
        description="Print the exact release: for MAJOR.MINOR its newest stable release "
        "(stable-X.Y.txt), or its newest pre-release (latest-X.Y.txt) when there is none yet; "
        "'stable' and 'latest' as stable.txt and latest.txt. Asks the automatic release source "
        "($E2E_DRA_RELEASE_SOURCE: dl.k8s.io where it answers, else the Go module proxy).",
    )
    resolve.add_argument("spec", metavar="VERSION|MAJOR.MINOR|stable|latest")
    resolve.add_argument("--base-url", help=_BASE_URL_HELP)
    resolve.set_defaults(handler=_resolve)

    download = subparsers.add_parser(
        "download",
        help="download, verify and cache a release's server binaries; print their directory",
        description="Download kubernetes-server-<os>-<arch>.tar.gz, verify it against its "
        "published checksum and unpack the cluster components into the cache (once). The last "
        "line of stdout is the directory holding the binaries.",
    )
    download.add_argument("version", metavar="VERSION|MAJOR.MINOR|stable|latest")
    download.add_argument("--base-url", help=_BASE_URL_HELP)
    download.add_argument(
        "--cache-dir",
        action=PathFlag,
        parse=directory,
        help="cache root, ~ expanded (default: $KUBERNETES_SERVER_CACHE_DIR, else the user cache "
        "dir)",
    )
    download.add_argument("--os", dest="os_", metavar="OS", help="default: this machine's")
    download.add_argument("--arch", metavar="ARCH", help="default: this machine's")
    download.add_argument(
        "--deadline",
        metavar="SECONDS",
        help="give up when the whole fetch takes longer (e.g. 1800, 30m, 1h30m; 0: never; default: "
        "$E2E_DRA_DOWNLOAD_DEADLINE, else 1800)",
    )
    download.add_argument(
        "--min-speed",
        metavar="BYTES_PER_S",
        help="give up when a transfer is slower than this over 30s (e.g. 50k, 1M; 0: never; "
        "default: $E2E_DRA_DOWNLOAD_MIN_SPEED, else 50k)",
    )
    download.add_argument(
        "--verify",
        action="store_true",
        help="re-read a cached release against the digests recorded when it was written "
        "(a damaged entry is downloaded again)",
    )
    download.set_defaults(handler=_download)

    versions = subparsers.add_parser(
        "versions",
        help="show the version under test, its previous minor and the release that resolves to",
        description="Show the version under test (from a Kubernetes source tree, "
        "$KUBE_GIT_VERSION_FILE or <bin dir>/kube-apiserver --version; else "
        "$E2E_DRA_KUBERNETES_VERSION, by default 'latest'), its previous minor and the release "
        "that minor resolves to, as the suites choose them. Nothing is fetched.",
    )
    versions.add_argument(
        "--source-dir",
        action=PathFlag,
        help="Kubernetes source tree (default: $KUBERNETES_SOURCE_DIR)",
    )
    versions.add_argument(
        "--bin-dir", action=PathFlag, help="server binaries (default: $KUBERNETES_SERVER_BIN_DIR)"
    )
    versions.add_argument(
        "--base-url", help="resolve with this release tree instead of the default source"
    )
    versions.set_defaults(handler=_versions)


def _previous_minor(args: argparse.Namespace) -> int:
    from e2e_dra.versions import previous_minor

    print(previous_minor(args.version))
    return 0


def _resolve(args: argparse.Namespace) -> int:
    from e2e_dra.releases import resolve_release

    print(resolve_release(args.spec, _release_source(args.base_url)))
    return 0


def _download(args: argparse.Namespace) -> int:
    from e2e_dra.releases import Budget, DownloadSource, resolve_release

    source = DownloadSource(
        base_url=args.base_url,
        cache_dir=args.cache_dir,
        os_=args.os_,
        arch=args.arch,
        budget=Budget.from_env(args.deadline, args.min_speed),
    )
    print(source.fetch(resolve_release(args.version, source), verify=args.verify).bin_dir)
    return 0


def _versions(args: argparse.Namespace) -> int:
    from e2e_dra.releases import plan_versions

    plan = plan_versions(
        _release_source(args.base_url), source_dir=args.source_dir, bin_dir=args.bin_dir
    )
    print(f"version under test: {plan.current}  ({plan.current_origin})")
    print(f"previous minor:     {plan.previous_minor}")
    print(f"previous release:   {plan.previous}  ({plan.source})")
    return 0


def _release_source(base_url: str | None) -> Any:
    from e2e_dra.releases import DownloadSource, release_source

    return DownloadSource(base_url=base_url) if base_url else release_source()
