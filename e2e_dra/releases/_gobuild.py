"""Kubernetes releases built from the Go module proxy, for machines that cannot reach dl.k8s.io.

The proxy serves every ``k8s.io/kubernetes`` release tag with its non-Go files (so
``hack/local-up-cluster.sh`` and ``hack/lib`` come along), and the published staging modules,
which is all a build needs. A build takes minutes on a cold Go cache, so each version is built once
into ``<cache root>/kubernetes/<version>/`` (``bin/`` and ``src/``) under the same atomic, locked
cache rules as downloads; the Go module and build caches live under our cache root too, so even
the first build of a second version reuses most of the first one's work.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx

from e2e_dra._cache import CacheEntry
from e2e_dra._console import console, fancy, say
from e2e_dra._gotool import go_env, go_version, run_go
from e2e_dra._paths import cache_root
from e2e_dra.errors import ReleaseError
from e2e_dra.releases import Release
from e2e_dra.releases._download import host_platform
from e2e_dra.releases._gomodule import KUBERNETES_MODULE, build_go_mod
from e2e_dra.releases._goproxy import ModuleProxy, escape_module_path
from e2e_dra.versions import is_minor, parse_version
from localupcluster import KUBE_CLUSTER_COMPONENTS

BUILT_COMMANDS: tuple[str, ...] = (*KUBE_CLUSTER_COMPONENTS, "kubectl")
"""kubectl too: local-up-cluster.sh and the suite want the kubectl of the version under test."""

VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
VERSION_DEFS_FILE = ".kube-version-defs"
"""In ``src/``: what ``KUBE_GIT_VERSION_FILE`` may point at, as the tree has no git history."""

_SOURCE_SUFFIX = "-source"


class GoBuildSource:
    """A :class:`~e2e_dra.releases.ReleaseSource` that builds releases from the Go module proxy."""

    name = "build"

    def __init__(
        self,
        proxy_url: str | None = None,
        cache_dir: Path | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._proxy_url = proxy_url
        self._transport = transport
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root() / "kubernetes"

    @cached_property
    def proxy(self) -> ModuleProxy:
        """Made on first use, so that a cache hit needs neither GOPROXY nor the network."""
        return ModuleProxy(KUBERNETES_MODULE, self._proxy_url, transport=self._transport)

    def resolve(self, minor: str) -> str:
        return self.proxy.resolve(minor)

    def latest_stable(self) -> str:
        return self.proxy.latest_stable()

    def fetch(self, version: str) -> Release:
        """Build ``version`` (``v1.37.2``, ``1.37.2``, or ``1.37`` for its newest release)."""
        tag = self.release_tag(version)
        entry = CacheEntry(self.cache_dir, tag)
        if not entry.is_complete():
            entry.fill(lambda out: self._build(tag, out))
        return Release(
            version=tag, bin_dir=entry.path / "bin", source_dir=entry.path / "src", origin="build"
        )

    def source_tree(self, version: str) -> Path:
        """The module source tree of ``version`` alone, for binaries that came from elsewhere."""
        tag = self.release_tag(version)
        built = CacheEntry(self.cache_dir, tag)
        if built.is_complete():
            return built.path / "src"
        entry = CacheEntry(self.cache_dir, tag + _SOURCE_SUFFIX)
        if not entry.is_complete():
            entry.fill(lambda out: self._source_only(tag, out))
        return entry.path / "src"

    def release_tag(self, version: str) -> str:
        """The exact release tag meant by ``version``; only released tags are on the proxy."""
        if is_minor(version):
            return self.resolve(version)
        parsed = parse_version(version)
        if not parsed.is_release:
            raise ReleaseError(
                f"Kubernetes {version} is a build between releases; only released versions "
                "can be built from the Go module proxy (give a source checkout instead)"
            )
        return parsed.tag

    # --- filling cache entries ----------------------------------------------------------------

    def _build(self, version: str, out: Path) -> dict[str, Any]:
        started = time.monotonic()
        info = self.proxy.info(version)  # a clear error when the proxy lacks the version
        log = self._log(version)
        module_dir, module_src = self._download(version, out, log)
        bin_dir = out / "bin"
        bin_dir.mkdir()
        ldflags = version_ldflags(version, info)
        env = self._go_env()
        timings: dict[str, float] = {}
        with _progress(len(BUILT_COMMANDS), f"building Kubernetes {version}") as step:
            for index, command in enumerate(BUILT_COMMANDS, 1):
                step(command)
                begun = time.monotonic()
                package = f"{KUBERNETES_MODULE}/cmd/{command}"
                run_go(
                    ["build", "-o", str(bin_dir / command), "-ldflags", ldflags, package],
                    cwd=module_dir,
                    what=f"building {command} {version} ({index}/{len(BUILT_COMMANDS)})",
                    log=log,
                    env=env,
                )
                timings[command] = round(time.monotonic() - begun, 1)
                (bin_dir / command).chmod(0o555)
        copy_source_tree(module_src, out / "src", version, info, link_bin=True)
        say(f"built Kubernetes {version} in {time.monotonic() - started:.0f}s (log: {log})")
        return {
            "version": version,
            "origin": "build",
            "proxy": self.proxy.base_url,
            "go": go_version(),
            "build_seconds": timings,
            "total_seconds": round(time.monotonic() - started, 1),
        }

    def _source_only(self, version: str, out: Path) -> dict[str, Any]:
        info = self.proxy.info(version)
        log = self._log(version + _SOURCE_SUFFIX)
        _module_dir, module_src = self._download(version, out, log)
        copy_source_tree(module_src, out / "src", version, info, link_bin=False)
        return {"version": version, "origin": "build", "proxy": self.proxy.base_url}

    def _download(self, version: str, out: Path, log: Path) -> tuple[Path, Path]:
        """Write the build module and fetch ``k8s.io/kubernetes@version`` into the module cache."""
        module_dir = out / "module"
        module_dir.mkdir()
        (module_dir / "go.mod").write_text(build_go_mod(self.proxy.go_mod(version), version))
        env = self._go_env()
        run_go(
            ["mod", "download", KUBERNETES_MODULE],
            cwd=module_dir,
            what=f"downloading {KUBERNETES_MODULE}@{version}",
            log=log,
            env=env,
        )
        module_src = Path(env["GOMODCACHE"]) / f"{escape_module_path(KUBERNETES_MODULE)}@{version}"
        if not (module_src / "hack" / "local-up-cluster.sh").is_file():
            raise ReleaseError(f"{module_src} has no hack/local-up-cluster.sh")
        return module_dir, module_src

    def _go_env(self) -> dict[str, str]:
        """Our Go environment, fetching modules from the same proxy we resolved against."""
        env = go_env()
        if self._proxy_url:
            env["GOPROXY"] = self._proxy_url
        return env

    def _log(self, name: str) -> Path:
        """Outside the entry, so that the log of a failed build survives the failed entry."""
        log = self.cache_dir / ".logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        return log


def version_ldflags(version: str, info: dict[str, Any]) -> str:
    """What ``make`` would stamp, so ``--version`` and the node's kubelet version are right."""
    parsed = parse_version(version)
    values = {
        "gitVersion": version,
        "gitMajor": str(parsed.major),
        "gitMinor": str(parsed.minor),
        "gitTreeState": "clean",
        "gitCommit": str((info.get("Origin") or {}).get("Hash", "")),
        "buildDate": str(info.get("Time", "")),  # the release's commit time: reproducible
    }
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
    shutil.copytree(module_src, dest, symlinks=True)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            path = Path(root, name)
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
    dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
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


@contextlib.contextmanager
def _progress(total: int, title: str) -> Iterator[Callable[[str], None]]:
    """``step(name)`` marks the start of the next of ``total`` steps; a bar on a terminal."""
    if not fancy():
        yield lambda _name: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn())
    with Progress(
        *columns, MofNCompleteColumn(), TimeElapsedColumn(), console=console(), transient=True
    ) as progress:
        task = progress.add_task(title, total=total)
        started: list[str] = []

        def step(name: str) -> None:
            progress.update(task, description=f"{title}: {name}", completed=len(started))
            started.append(name)

        yield step
        progress.update(task, completed=total)
