"""Stand-ins for staging modules that a release needs and the Go module proxy refuses.

Kubernetes publishes each staging directory as its own module (``k8s.io/api`` at ``v0.38.0``...). A
proxy may refuse one outright: here every version of ``k8s.io/apiextensions-api``, which 1.38 split
out of ``k8s.io/apiextensions-apiserver`` and which kube-apiserver imports. Without it no 1.38 API
server can be built from the proxy. Such a split is a move: the packages were cut out of the older
module unchanged and the files that stayed behind (conversions to the internal types) import the
new module. So the stand-in is assembled from the packages as the previous minor's older module
published them, with their import paths moved, and the build compiles the release's own code
against it; any field the release added to the moved types would fail that compile, as the
release's generated conversions name every field.

This is a deviation from the published release and is reported as one, in the build's output, its
cache entry and the run's ``summary.json``. Only splits listed here are known; a refused staging
module that is not listed is left alone (some, like ``k8s.io/ktesting``, are imported by tests
only), and the build reports what it misses.

The second kind is a package a release moved out of ``k8s.io/kubernetes`` into a module of its
own, changing its API on the way: 1.38's iptables client, now ``sigs.k8s.io/iptables-wrappers``
``pkg/iptables``, which the kubelet and kube-proxy import and some proxies refuse at every
version. Its stand-in holds the previous release's package unchanged, as an internal package, and
an adapter of ours (``standin_go/``, shipped with e2e-dra) that gives it the moved package's API.
The release's code that calls it is compiled against that adapter, so any call the adapter lacks
fails the build. Where the proxy serves the real module, the real one is built and nothing is
assembled.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

SMD_MODULE = re.compile(r"sigs\.k8s\.io/structured-merge-diff/v\d+")


@dataclass(frozen=True)
class Split:
    """A staging module cut out of another one; assembled from the older module's packages."""

    module: str
    origin: str
    packages: tuple[str, ...]
    # Files of those packages that stayed in the origin module.
    left_behind: tuple[str, ...] = ()
    # Declarations the moved files still need from the files that stayed behind: file -> source.
    shims: tuple[tuple[str, str], ...] = ()


KNOWN_SPLITS: dict[str, Split] = {
    split.module: split
    for split in (
        Split(
            module="k8s.io/apiextensions-api",
            origin="k8s.io/apiextensions-apiserver",
            packages=(
                "pkg/apis/apiextensions/v1",
                "pkg/apis/apiextensions/v1beta1",
                "pkg/client/applyconfiguration",
                "pkg/client/clientset/clientset",
                "pkg/client/informers",
                "pkg/client/listers",
            ),
            left_behind=("conversion.go", "zz_generated.conversion.go"),
            shims=tuple(
                (
                    f"pkg/apis/apiextensions/{version}/zz_standin.go",
                    f"package {version}\n\nvar nullLiteral = []byte(`null`)\n",
                )
                for version in ("v1", "v1beta1")
            ),
        ),
    )
}


def assemble(
    split: Split, origin_dir: Path, dest: Path, go_line: str, smd_module: str | None
) -> None:
    """Write the stand-in module for ``split`` into ``dest`` from the origin module's tree.

    ``smd_module`` is the structured-merge-diff major the release requires: the older module's
    generated apply configurations may name an older one.
    """
    moved = [f"{split.origin}/{package}" for package in split.packages]
    for package in split.packages:
        shutil.copytree(
            origin_dir / package,
            dest / package,
            ignore=shutil.ignore_patterns("*_test.go", "testdata", *split.left_behind),
        )
    for path, source in split.shims:
        (dest / path).write_text(source)
    rewrite = _import_rewriter(split, moved, smd_module)
    for go_file in dest.rglob("*.go"):
        go_file.chmod(0o644)
        go_file.write_text(rewrite(go_file.read_text()))
    for entry in dest.rglob("*"):
        if entry.is_dir():
            entry.chmod(0o755)
    (dest / "go.mod").write_text(f"module {split.module}\n\ngo {go_line}\n")


def _import_rewriter(
    split: Split, moved: list[str], smd_module: str | None
) -> Callable[[str], str]:
    # longest first, so that a package is not rewritten through its parent's prefix
    pattern = re.compile("|".join(re.escape(p) for p in sorted(moved, key=len, reverse=True)))

    def rewrite(text: str) -> str:
        text = pattern.sub(lambda m: split.module + m[0].removeprefix(split.origin), text)
        if smd_module:
            text = SMD_MODULE.sub(smd_module, text)
        return text

    return rewrite


@dataclass(frozen=True)
class Move:
    """A package moved out of ``k8s.io/kubernetes`` into ``module``; assembled from the previous
    release's copy of it (``origin``) and an adapter of ours to the moved package's API."""

    module: str
    package: str  # in the new module
    origin: str  # in k8s.io/kubernetes of the previous release
    adapter: str  # a file of standin_go/
    differences: str  # what the stand-in does not do as the module does, said in the deviation

    def describe(self, origin_version: str) -> str:
        return (
            f"assembled from k8s.io/kubernetes {origin_version} {self.origin}, the package it was "
            f"moved from, with e2e-dra's adapter to its API ({self.differences})"
        )


LEGACY_DIR = "internal/legacy"
"""Where a move's stand-in keeps the previous release's package, below the moved package."""

KNOWN_MOVES: dict[str, Move] = {
    move.module: move
    for move in (
        Move(
            module="sigs.k8s.io/iptables-wrappers",
            package="pkg/iptables",
            origin="pkg/util/iptables",
            adapter="iptables_wrappers.go",
            differences="both modes run the installed iptables, as 1.37 did",
        ),
    )
}


def assemble_move(move: Move, kubernetes_dir: Path, dest: Path, go_line: str) -> None:
    """Write the stand-in module for ``move`` into ``dest``.

    ``kubernetes_dir`` is the previous release's ``k8s.io/kubernetes`` tree. Only the package's
    own non-test files are taken: its ``testing`` fake and tests stay behind.
    """
    origin = kubernetes_dir / move.origin
    files = sorted(f for f in origin.glob("*.go") if not f.name.endswith("_test.go"))
    if not files:
        raise FileNotFoundError(f"{origin} holds no Go package to assemble {move.module} from")
    package_dir = dest / move.package
    legacy = package_dir / LEGACY_DIR
    legacy.mkdir(parents=True)
    for go_file in files:
        (legacy / go_file.name).write_text(go_file.read_text())
    adapter = resources.files("e2e_dra.releases").joinpath("standin_go", move.adapter)
    (package_dir / move.adapter).write_text(adapter.read_text())
    (dest / "go.mod").write_text(f"module {move.module}\n\ngo {go_line}\n")
