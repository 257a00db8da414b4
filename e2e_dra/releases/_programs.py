"""Go programs built from the Go module proxy and cached like releases: a package of
``k8s.io/kubernetes`` at a release (upstream's DRA test driver), or a command of any other module
at a version (``sigs.k8s.io/dra-example-driver``).

Each program is one :class:`~e2e_dra._cache.CacheEntry` (verified on every use, filled under a
lock, never half-written), and says which modules it was linked with, read from its own build
info: which ``k8s.io/dynamic-resource-allocation`` a driver carries is what decides how it talks
to a kubelet and an API server of another release.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e_dra._cache import CacheEntry
from e2e_dra._gotool import binary_go_version, binary_modules, go_build, go_env, run_go
from e2e_dra._paths import cache_root
from e2e_dra.releases._checkout_build import build_package, checkout_version
from e2e_dra.releases._gobuild import GoBuildSource
from e2e_dra.releases._goproxy import escape_module_path
from e2e_dra.releases._select import SOURCE_DIR_ENV
from e2e_dra.releases._stamp import version_ldflags
from e2e_dra.settings import settings
from e2e_dra.versions import is_minor, parse_version

logger = logging.getLogger(__name__)

HELPER_MODULE = "k8s.io/dynamic-resource-allocation"
"""The library a DRA driver's kubelet plugin is built on (its ``kubeletplugin`` helper)."""


@dataclass(frozen=True)
class Program:
    """One built program: its binary, the version it was built at, and the modules it links."""

    name: str
    version: str
    binary: Path
    modules: dict[str, str] = field(default_factory=dict, repr=False)
    deviations: tuple[str, ...] = ()

    @property
    def helper(self) -> str | None:
        """The ``k8s.io/dynamic-resource-allocation`` version it was linked with, if any."""
        return self.modules.get(HELPER_MODULE)

    def describe(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "binary": str(self.binary),
            "go": binary_go_version(self.binary),
            HELPER_MODULE: self.helper,
            "deviations": list(self.deviations),
        }


def kubernetes_program(
    version: str, package: str, name: str, source: GoBuildSource | None = None
) -> Program:
    """``k8s.io/kubernetes/<package>`` at ``version`` (a release tag or MAJOR.MINOR), built with
    the release's own Go and the same repairs as its server binaries (said as deviations).

    A build between releases (a checkout's ``v1.38.0-beta.0-dirty``) is built from that checkout
    when ``KUBERNETES_SOURCE_DIR`` is it, so that the program carries the change under test;
    without it, the release the build is on stands in, said as a deviation."""
    if not is_minor(version) and not (parsed := parse_version(version)).is_release:
        tree = settings().source_dir
        if tree is not None and (tree / ".git").exists():
            with _CHECKOUT_BUILDS:
                if _checkout_version(tree) == version:
                    return _checkout_program(tree, package, name)
        program = kubernetes_program(parsed.tag, package, name, source)
        said = (
            f"{name}: {parsed.tag}'s build, as Kubernetes {version} is a build between releases "
            f"and {SOURCE_DIR_ENV} names no checkout of it"
        )
        return dataclasses.replace(program, deviations=(*program.deviations, said))
    source = source or GoBuildSource()
    tag = source.release_tag(version)
    entry = CacheEntry(source.cache_dir, f"{tag}-{name}", holds=[f"bin/{name}"])

    def fill(out: Path) -> dict[str, Any]:
        started = time.monotonic()
        log = source.log_for(f"{tag}-{name}")
        recipe, module_dir = source.build_module(tag, out, log, commands=())
        (out / "bin").mkdir()
        go_build(
            [f"k8s.io/kubernetes/{package}"],
            output=out / "bin" / name,
            flags=["-ldflags", version_ldflags(tag, recipe.info)],
            cwd=module_dir,
            what=f"building {name} of Kubernetes {tag} ({recipe.toolchain.name})",
            log=log,
            env=source.go_environment(),
            toolchain=recipe.toolchain,
        )
        logger.info(f"built {name} of Kubernetes {tag} in {time.monotonic() - started:.0f}s")
        return {"program": name, "version": tag, "deviations": list(recipe.deviations)}

    entry.fill(fill)
    return _program(entry, name, tag)


_CHECKOUT_BUILDS = threading.Lock()
"""Held while a checkout's version is read or one of its programs built: drivers of concurrent
subtests start together, and two ``go build`` runs must not write one binary at once."""


@functools.cache
def _checkout_version(tree: Path) -> str:
    """The checkout's version, read once per run: its status script takes a second or two, and
    a developer's tree does not change under a run that is testing it."""
    return checkout_version(tree)


@functools.cache
def _checkout_program(tree: Path, package: str, name: str) -> Program:
    """``package`` built from the checkout once per run (a driver starts in every phase; the
    build and its version stamps would be repeated for the same tree)."""
    binary, built = build_package(tree, package, name)
    logger.info(f"built {name} of Kubernetes {built} from {tree}")
    return Program(name, built, binary, binary_modules(binary))


def module_program(module: str, version: str, command: str, name: str) -> Program:
    """``<module>/<command>`` at ``version``, built inside the module's own tree, so that its
    go.mod and go.sum decide every dependency, as its release build does. (``go install
    pkg@version`` would be the same build, but it asks the proxy for the module's version list,
    which some proxies refuse.)"""
    entry = CacheEntry(cache_root() / "programs", f"{name}-{version}", holds=[f"bin/{name}"])

    def fill(out: Path) -> dict[str, Any]:
        started = time.monotonic()
        log = cache_root() / "programs" / ".logs" / f"{name}-{version}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        env = go_env(GOFLAGS="-mod=readonly")
        what = f"building {module}/{command} {version}"
        run_go(["mod", "download", f"{module}@{version}"], cwd=out, what=what, log=log, env=env)
        tree = Path(env["GOMODCACHE"]) / f"{escape_module_path(module)}@{version}"
        (out / "bin").mkdir()
        go_build(
            [f"./{command}"],
            output=out / "bin" / name,
            flags=["-trimpath"],
            cwd=tree,
            what=what,
            log=log,
            env=env,
        )
        logger.info(f"built {module} {version} in {time.monotonic() - started:.0f}s")
        return {"program": name, "module": module, "version": version}

    entry.fill(fill)
    return _program(entry, name, version)


def _program(entry: CacheEntry, name: str, version: str) -> Program:
    binary = entry.path / "bin" / name
    deviations = tuple(entry.metadata().get("deviations") or ())
    return Program(name, version, binary, binary_modules(binary), deviations)
