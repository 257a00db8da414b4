"""Commands about versions and releases: previous-minor, resolve, download, versions.

Their names, arguments and stdout are an interface other tools call; stdout carries only the
answer (the last line of ``download`` is the binaries' directory), progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

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
        help="print the newest release of MAJOR.MINOR",
        description="Print the newest stable release of MAJOR.MINOR (stable-X.Y.txt), or its "
        "newest pre-release (latest-X.Y.txt) when there is no stable one yet.",
    )
    resolve.add_argument("minor", metavar="MAJOR.MINOR")
    resolve.add_argument("--base-url", help=_BASE_URL_HELP)
    resolve.set_defaults(handler=_resolve)

    download = subparsers.add_parser(
        "download",
        help="download, verify and cache a release's server binaries; print their directory",
        description="Download kubernetes-server-<os>-<arch>.tar.gz, verify it against its "
        "published checksum and unpack the cluster components into the cache (once). The last "
        "line of stdout is the directory holding the binaries.",
    )
    download.add_argument("version", metavar="VERSION|MAJOR.MINOR")
    download.add_argument("--base-url", help=_BASE_URL_HELP)
    download.add_argument(
        "--cache-dir",
        type=Path,
        help="cache root (default: $KUBERNETES_SERVER_CACHE_DIR, else the user cache dir)",
    )
    download.add_argument("--os", dest="os_", metavar="OS", help="default: this machine's")
    download.add_argument("--arch", metavar="ARCH", help="default: this machine's")
    download.set_defaults(handler=_download)

    versions = subparsers.add_parser(
        "versions",
        help="show the version under test, its previous minor and the release that resolves to",
        description="Show the version under test (from a Kubernetes source tree, "
        "$KUBE_GIT_VERSION_FILE or <bin dir>/kube-apiserver --version; the newest stable release "
        "when none is given), its previous minor and the release that minor resolves to.",
    )
    versions.add_argument(
        "--source-dir", type=Path, help="Kubernetes source tree (default: $KUBERNETES_SOURCE_DIR)"
    )
    versions.add_argument(
        "--bin-dir", type=Path, help="server binaries (default: $KUBERNETES_SERVER_BIN_DIR)"
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
    from e2e_dra.releases._download import DownloadSource

    print(DownloadSource(base_url=args.base_url).resolve(args.minor))
    return 0


def _download(args: argparse.Namespace) -> int:
    from e2e_dra.releases._download import DownloadSource
    from e2e_dra.versions import is_minor, parse_minor

    source = DownloadSource(
        base_url=args.base_url, cache_dir=args.cache_dir, os_=args.os_, arch=args.arch
    )
    version = args.version
    if is_minor(version):
        version = source.resolve(str(parse_minor(version)))
    print(source.fetch(version).bin_dir)
    return 0


def _versions(args: argparse.Namespace) -> int:
    from e2e_dra.versions import previous_minor, source_version

    source = _release_source(args.base_url)
    source_dir = args.source_dir or _env_path("KUBERNETES_SOURCE_DIR")
    bin_dir = args.bin_dir or _env_path("KUBERNETES_SERVER_BIN_DIR")
    if source_dir or bin_dir or os.environ.get("KUBE_GIT_VERSION_FILE"):
        current = str(source_version(source_dir, bin_dir))
        evidence = ", ".join(str(p) for p in (source_dir, bin_dir) if p) or "$KUBE_GIT_VERSION_FILE"
    else:
        current = source.latest_stable()
        evidence = f"newest stable release, {source.name}"
    line = previous_minor(current)
    previous = source.resolve(str(line))
    print(f"version under test: {current}  ({evidence})")
    print(f"previous minor:     {line}")
    print(f"previous release:   {previous}  ({source.name})")
    return 0


def _release_source(base_url: str | None) -> Any:
    if base_url:
        from e2e_dra.releases._download import DownloadSource

        return DownloadSource(base_url=base_url)
    try:
        from e2e_dra.releases import release_source
    except ImportError as exc:  # an install without the build source
        from e2e_dra.errors import ReleaseError

        raise ReleaseError(f"no default release source ({exc}); pass --base-url URL") from None
    return release_source()


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None
