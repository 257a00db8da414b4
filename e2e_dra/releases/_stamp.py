"""What a build of a release writes besides compiling: the version stamped into its binaries, as
``make`` stamps it, and a writable copy of its source tree (the module cache is read-only)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from e2e_dra._platform import host_platform
from e2e_dra.versions import parse_version

VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
VERSION_DEFS_FILE = ".kube-version-defs"
"""In ``src/``: what ``KUBE_GIT_VERSION_FILE`` may point at, as the tree has no git history."""


def version_ldflags(version: str, info: dict[str, Any]) -> str:
    """What ``make`` would stamp, so ``--version`` and the node's kubelet version are right."""
    parsed = parse_version(version)
    return stamp_ldflags(
        {
            "gitVersion": version,
            "gitMajor": str(parsed.major),
            "gitMinor": str(parsed.minor),
            "gitTreeState": "clean",
            "gitCommit": str((info.get("Origin") or {}).get("Hash", "")),
            "buildDate": str(info.get("Time", "")),  # the release's commit time: reproducible
        }
    )


def stamp_ldflags(values: dict[str, str]) -> str:
    """``-X`` flags setting ``values`` (``gitVersion``...) in both version packages, as ``make``
    does; stripped of debug information as a release build is."""
    flags = ["-s", "-w"]
    for package in VERSION_PACKAGES:
        flags += [f"-X {package}.{name}={value}" for name, value in values.items() if value]
    return " ".join(flags)


def copy_source_tree(
    module_src: Path, dest: Path, version: str, info: dict[str, Any], *, link_bin: bool
) -> None:
    """A writable copy of the module tree (the module cache is read-only).

    With ``link_bin``, ``_output/local/bin/<os>/<arch>`` points at the entry's ``bin/`` (a sibling
    of ``dest``), which is where ``kube::util::find-binary`` looks for kubectl.
    """
    copy_writable(module_src, dest)
    parsed = parse_version(version)
    commit = (info.get("Origin") or {}).get("Hash", "")
    (dest / VERSION_DEFS_FILE).write_text(
        f"KUBE_GIT_COMMIT='{commit}'\nKUBE_GIT_TREE_STATE='clean'\n"
        f"KUBE_GIT_VERSION='{version}'\nKUBE_GIT_MAJOR='{parsed.major}'\n"
        f"KUBE_GIT_MINOR='{parsed.minor}'\n"
    )
    if link_bin:
        goos, goarch = host_platform()
        platform_dir = dest / "_output" / "local" / "bin" / goos
        platform_dir.mkdir(parents=True)
        # relative, so that it survives the rename of the entry into place
        (platform_dir / goarch).symlink_to("../../../../../bin")


def copy_writable(src: Path, dest: Path) -> None:
    """A writable copy of a module cache directory (whose files are read-only)."""
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            path = Path(root, name)
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
    dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
