"""containerd, etcd and cfssl, built from the Go module proxy and cached per version.

Debian's containerd (1.6) has no CDI and its etcd (3.4) is older than any recent Kubernetes
accepts; GitHub release downloads cannot be reached everywhere the module proxy can. Each tool is a
:class:`~e2e_dra._cache.CacheEntry` ``<cache>/runtime/<tool>-<version>/bin``, so a second
provisioning builds nothing and an interrupted build leaves nothing that looks complete.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from e2e_dra._cache import CacheEntry
from e2e_dra._gotool import go_build, go_env, go_version, run_go
from e2e_dra._paths import cache_root
from e2e_dra.errors import ProvisionError
from e2e_dra.settings import settings

#: etcd when no Kubernetes source tree says which one it expects (hack/lib/etcd.sh of v1.37).
DEFAULT_ETCD_VERSION = "v3.7.0"

_ETCD_MAIN = """package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""


@dataclass(frozen=True)
class GoTool:
    """One tool and how to build it from the proxy."""

    name: str
    version: str
    module: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    ldflags: str = "-s -w"
    tags: str = ""
    #: a main.go for a tiny build module; for modules whose go.mod has replace directives,
    #: which ``go install pkg@version`` refuses.
    main_source: str | None = None

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


def runtime_cache_dir() -> Path:
    return cache_root() / "runtime"


def containerd_tool(version: str | None = None) -> GoTool:
    version = _v(version or settings().containerd_version)
    module = "github.com/containerd/containerd/v2"
    return GoTool(
        name="containerd",
        version=version,
        module=module,
        packages=tuple(
            f"{module}/cmd/{c}" for c in ("containerd", "ctr", "containerd-shim-runc-v2")
        ),
        binaries=("containerd", "ctr", "containerd-shim-runc-v2"),
        ldflags=f"-s -w -X {module}/version.Version={version}",
        # the graph drivers that need cgo; the node uses overlayfs
        tags="no_btrfs,no_devmapper,no_zfs,urfave_cli_no_docs",
    )


def cfssl_tool(version: str | None = None) -> GoTool:
    version = _v(version or settings().cfssl_version)
    module = "github.com/cloudflare/cfssl"
    return GoTool(
        name="cfssl",
        version=version,
        module=module,
        packages=(f"{module}/cmd/cfssl", f"{module}/cmd/cfssljson"),
        binaries=("cfssl", "cfssljson"),
    )


def etcd_tool(version: str) -> GoTool:
    return GoTool(
        name="etcd",
        version=_v(version),
        module="go.etcd.io/etcd/server/v3",
        packages=("go.etcd.io/etcd/server/v3/etcdmain",),
        binaries=("etcd",),
        main_source=_ETCD_MAIN,
    )


def etcd_version_for(k8s_source_dir: Path | None) -> str:
    """The etcd a Kubernetes tree asks for (``ETCD_VERSION`` in hack/lib/etcd.sh)."""
    explicit = settings().etcd_version
    if explicit:
        return _v(explicit)
    if k8s_source_dir is None:
        return DEFAULT_ETCD_VERSION
    script = Path(k8s_source_dir) / "hack" / "lib" / "etcd.sh"
    try:
        text = script.read_text()
    except OSError as exc:
        raise ProvisionError(f"cannot read {script} to learn the etcd version: {exc}") from exc
    found = re.search(r"^ETCD_VERSION=\$\{ETCD_VERSION:-([0-9][^}]*)\}", text, re.MULTILINE)
    if not found:
        raise ProvisionError(f"{script} does not set ETCD_VERSION=${{ETCD_VERSION:-X.Y.Z}}")
    return _v(found.group(1))


def cached_bin_dir(tool: GoTool) -> Path | None:
    """``.../bin`` of a complete build of ``tool``, or None."""
    entry = _entry(tool)
    return entry.path / "bin" if entry.is_complete() else None


def _entry(tool: GoTool) -> CacheEntry:
    """The tool's cache entry, complete only with every binary of the tool in ``bin/``."""
    return CacheEntry(runtime_cache_dir(), tool.key, holds=[f"bin/{b}" for b in tool.binaries])


def build(tool: GoTool) -> Path:
    """The tool's bin dir, building it first when the cache does not have it."""
    entry = _entry(tool)

    def populate(tmp: Path) -> dict[str, object]:
        started = time.monotonic()
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        flags = ["-trimpath", "-ldflags", tool.ldflags] + (
            ["-tags", tool.tags] if tool.tags else []
        )
        what = f"building {tool.name} {tool.version}"
        # Outside the entry: a failed fill removes its temp dir, and the error points here.
        log = runtime_cache_dir() / ".logs" / f"{tool.key}.log"
        log.unlink(missing_ok=True)
        if tool.main_source is None:
            pkgs = [f"{p}@{tool.version}" for p in tool.packages]
            run_go(
                ["install", *flags, *pkgs],
                cwd=tmp,
                what=what,
                log=log,
                env=go_env(GOBIN=str(bin_dir)),
            )
        else:
            src = tmp / "src"
            src.mkdir()
            (src / "go.mod").write_text(
                f"module e2e-dra.invalid/build/{tool.name}\n\ngo {_local_go_minor()}\n\n"
                f"require {tool.module} {tool.version}\n"
            )
            (src / "main.go").write_text(tool.main_source)
            run_go(["mod", "tidy"], cwd=src, what=f"{what} (resolving modules)", log=log)
            go_build(
                ["."], output=bin_dir / tool.binaries[0], flags=flags, cwd=src, what=what, log=log
            )
        missing = [b for b in tool.binaries if not (bin_dir / b).is_file()]
        if missing:
            raise ProvisionError(f"{what}: the build produced no {', '.join(missing)} (see {log})")
        return {
            "tool": tool.name,
            "version": tool.version,
            "module": tool.module,
            "build_seconds": round(time.monotonic() - started, 1),
        }

    return entry.fill(populate) / "bin"


def _local_go_minor() -> str:
    out = go_version()
    found = re.match(r"go(\d+\.\d+)", out)
    if not found:
        raise ProvisionError(
            f"cannot tell the Go toolchain's version from `go env GOVERSION`: {out!r}"
        )
    return found.group(1)


def _v(version: str) -> str:
    version = version.strip()
    if not re.fullmatch(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", version):
        raise ProvisionError(f"not a release version: {version!r} (expected e.g. v3.7.0)")
    return version if version.startswith("v") else f"v{version}"
