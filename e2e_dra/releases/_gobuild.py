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
import functools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from e2e_dra._cache import CacheEntry
from e2e_dra._console import console, fancy
from e2e_dra._gotool import BuildProgress, GoToolchain, go_build, go_env, run_go, toolchain_for
from e2e_dra._paths import cache_root
from e2e_dra.errors import ProvisionError, ReleaseError, UnbuildableRelease
from e2e_dra.releases._gomodule import (
    KUBERNETES_MODULE,
    Substitute,
    build_go_mod,
    go_directive,
    local_replaced,
    parse_requires,
    staging_version,
    toolchain_directive,
)
from e2e_dra.releases._goproxy import (
    ModuleProxy,
    escape_module_path,
    served_substitutes,
)
from e2e_dra.releases._http import GOPROXY_SETTING
from e2e_dra.releases._release import SERVER_COMPONENTS, Release
from e2e_dra.releases._stamp import copy_source_tree, version_ldflags
from e2e_dra.releases._standins import (
    KNOWN_MOVES,
    KNOWN_SPLITS,
    SMD_MODULE,
    assemble,
    assemble_move,
)
from e2e_dra.versions import is_minor, parse_version, previous_minor

logger = logging.getLogger(__name__)

BUILT_COMMANDS: tuple[str, ...] = (*SERVER_COMPONENTS, "kubectl")
"""kubectl too: local-up-cluster.sh and the suite want the kubectl of the version under test."""
CONTROL_PLANE_COMMANDS: tuple[str, ...] = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
)
"""What a control-plane-first upgrade needs of the release it upgrades to: a release whose kubelet
cannot be built here can still have its control plane tested."""
NODE_COMMANDS: tuple[str, ...] = ("kube-apiserver", "kubelet", "kube-proxy")
"""What an older node of kubelet-last needs of its release: its kubelet and kube-proxy, and its
kube-apiserver, not to run but because its flag parsing is how the suite learns which feature
gates the release (and so its kubelet) accepts; the rest of the control plane comes from
another release."""
_PARTIAL_KEYS = {CONTROL_PLANE_COMMANDS: "control-plane", NODE_COMMANDS: "node-and-apiserver"}

UNLINKED_STAGING = frozenset(
    {
        "k8s.io/ktesting",
        "k8s.io/sample-apiserver",
        "k8s.io/sample-cli-plugin",
        "k8s.io/sample-controller",
    }
)
"""Staging modules that are examples or test helpers: no command links them, so a proxy that
refuses them (this one refuses all but sample-apiserver at v0.38.0-beta.0) does not make a
release unobtainable, and asking needs no download of its source. Only that quick answer trusts
this list: a build still checks every refused module's importers in the source it compiles, and
names the module if one of them is linked after all."""

_SOURCE_SUFFIX = "-source"
SOURCE_DIR_HINT = "KUBERNETES_SOURCE_DIR, see README: Testing your Kubernetes change"


@dataclass(frozen=True)
class Recipe:
    """What a build of one release here is made of (:meth:`GoBuildSource.recipe`)."""

    version: str
    info: dict[str, Any]  # the proxy's .info of the release (its commit and time)
    go_mod: str  # k8s.io/kubernetes' own go.mod
    module_src: Path  # the release's module tree, in the (read-only) module cache
    toolchain: GoToolchain
    substitutes: tuple[Substitute, ...]  # refused versions built at an older served one
    standins: dict[str, tuple[Substitute, Path]]  # refused modules, assembled: module -> dir

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(str(s) for s in (*self.substitutes, *(s for s, _ in self.standins.values())))


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

    @functools.cached_property
    def proxy(self) -> ModuleProxy:
        """Made on first use, so that a cache hit needs neither GOPROXY nor the network."""
        return ModuleProxy(KUBERNETES_MODULE, self._proxy_url, transport=self._transport)

    def resolve(self, minor: str) -> str:
        return self.proxy.resolve(minor)

    def latest_stable(self) -> str:
        return self.proxy.latest_stable()

    def latest(self) -> str:
        return self.proxy.latest()

    def fetch(self, version: str, commands: tuple[str, ...] = BUILT_COMMANDS) -> Release:
        """Build ``version`` (``v1.37.2``, ``1.37.2``, or ``1.37`` for its newest release).

        ``commands`` may be :data:`CONTROL_PLANE_COMMANDS` or :data:`NODE_COMMANDS` alone; a whole
        build serves either too.
        """
        tag = self.release_tag(version)
        entry = CacheEntry(self.cache_dir, tag)
        if commands != BUILT_COMMANDS and not entry.is_complete():
            entry = CacheEntry(self.cache_dir, f"{tag}-{_PARTIAL_KEYS[commands]}")
        if not entry.is_complete():
            entry.fill(lambda out: self._build(tag, out, commands))
        return Release(
            version=tag,
            bin_dir=entry.path / "bin",
            source_dir=entry.path / "src",
            origin="build",
            deviations=tuple(entry.metadata().get("substituted_modules") or ()),
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

    def _build(self, version: str, out: Path, commands: tuple[str, ...]) -> dict[str, Any]:
        started = time.monotonic()
        log = self.log_for(version)
        recipe, module_dir = self.build_module(version, out, log, commands)
        module_src, toolchain, info = recipe.module_src, recipe.toolchain, recipe.info
        upstream_go = _go_version_file(module_src)
        bin_dir = out / "bin"
        bin_dir.mkdir()
        ldflags = version_ldflags(version, info)
        env = self.go_environment()
        timings: dict[str, float] = {}
        with _progress(len(commands), f"building Kubernetes {version}") as bar:
            for index, command in enumerate(commands, 1):
                bar.step(command)
                begun = time.monotonic()
                go_build(
                    [f"{KUBERNETES_MODULE}/cmd/{command}"],
                    output=bin_dir / command,
                    flags=["-ldflags", ldflags],
                    cwd=module_dir,
                    what=f"building {command} {version} ({index}/{len(commands)}, "
                    f"{toolchain.name})",
                    log=log,
                    env=env,
                    toolchain=toolchain,
                    on_progress=functools.partial(_show_progress, bar, command),
                )
                timings[command] = round(time.monotonic() - begun, 1)
                (bin_dir / command).chmod(0o555)
        copy_source_tree(module_src, out / "src", version, info, link_bin=True)
        logger.info(
            f"built Kubernetes {version} with {toolchain.name} in "
            f"{time.monotonic() - started:.0f}s (log: {log})"
        )
        return {
            "version": version,
            "origin": "build",
            "proxy": self.proxy.base_url,
            "go": toolchain.name,
            "go_fetched": toolchain.fetched,
            "go_upstream": f"go{upstream_go}" if upstream_go else None,
            "commands": list(commands),
            "substituted_modules": list(recipe.deviations),
            "build_seconds": timings,
            "total_seconds": round(time.monotonic() - started, 1),
        }

    def build_module(
        self, version: str, out: Path, log: Path, commands: tuple[str, ...]
    ) -> tuple[Recipe, Path]:
        """``out/module``: a module whose ``go build`` of a ``k8s.io/kubernetes`` package
        builds ``version`` from published modules (stand-ins in ``out/standins``), with the
        recipe that says how (its toolchain, its deviations)."""
        recipe = self.recipe(version, out / "standins", log, commands)
        module_dir = out / "module"
        module_dir.mkdir()
        (module_dir / "go.mod").write_text(
            build_go_mod(
                recipe.go_mod,
                version,
                recipe.substitutes,
                {module: f"../standins/{module}" for module in recipe.standins},
            )
        )
        return recipe, module_dir

    def recipe(
        self,
        version: str,
        standins_dir: Path,
        log: Path,
        commands: tuple[str, ...] = BUILT_COMMANDS,
    ) -> Recipe:
        """What building ``version``'s ``commands`` here takes: the release's module tree, the Go
        toolchain, and each module the proxy refuses with what is built instead (served older
        versions; stand-ins assembled into ``standins_dir``), each said as a deviation."""
        info = self.proxy.info(version)  # a clear error when the proxy lacks the version
        kubernetes_go_mod = self.proxy.go_mod(version)
        module_src = self._download_kubernetes(version, log, self._toolchain(version))
        upstream_go = _go_version_file(module_src)
        toolchain = toolchain_for(
            go_directive(kubernetes_go_mod), upstream_go or toolchain_directive(kubernetes_go_mod)
        )
        substitutes = self._substitutes(version, module_src, commands)
        for substitute in substitutes:
            logger.info(
                f"deviation: {substitute}: the Go module proxy does not serve the pinned version"
            )
        standins = {
            **self._split_standins(version, kubernetes_go_mod, standins_dir, log, toolchain),
            **self._move_standins(
                version, kubernetes_go_mod, module_src, commands, standins_dir, log, toolchain
            ),
        }
        return Recipe(
            version=version,
            info=info,
            go_mod=kubernetes_go_mod,
            module_src=module_src,
            toolchain=toolchain,
            substitutes=tuple(s for s in substitutes if s.module not in standins),
            standins=standins,
        )

    def _source_only(self, version: str, out: Path) -> dict[str, Any]:
        info = self.proxy.info(version)
        log = self.log_for(version + _SOURCE_SUFFIX)
        module_src = self._download_kubernetes(version, log, self._toolchain(version))
        copy_source_tree(module_src, out / "src", version, info, link_bin=False)
        return {"version": version, "origin": "build", "proxy": self.proxy.base_url}

    def _toolchain(self, version: str) -> GoToolchain:
        go_mod = self.proxy.go_mod(version)
        return toolchain_for(go_directive(go_mod), toolchain_directive(go_mod))

    def download(self, module_path: str, version: str, log: Path, toolchain: GoToolchain) -> Path:
        """Fetch ``module_path@version`` into the module cache; its directory there."""
        env = self.go_environment()
        module = f"{module_path}@{version}"
        scratch = Path(env["GOMODCACHE"]).parent / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            run_go(
                ["mod", "download", module],
                cwd=scratch,
                what=f"downloading {module}",
                log=log,
                env=dict(env, GOFLAGS="", GO111MODULE="on"),
                toolchain=toolchain,
            )
        except ProvisionError as exc:
            if f"reading {self.proxy.base_url}/" not in str(exc):
                raise  # not the proxy's answer: this machine's (a full disk, no Go)
            raise ReleaseError(  # go names the proxy's answer: the proxy is at fault
                f"{exc}; check {GOPROXY_SETTING}: it must serve the module's zip"
            ) from None
        return Path(env["GOMODCACHE"]) / f"{escape_module_path(module_path)}@{version}"

    def _download_kubernetes(self, version: str, log: Path, toolchain: GoToolchain) -> Path:
        module_src = self.download(KUBERNETES_MODULE, version, log, toolchain)
        if not (module_src / "hack" / "local-up-cluster.sh").is_file():
            raise ReleaseError(f"{module_src} has no hack/local-up-cluster.sh")
        return module_src

    def _substitutes(
        self, version: str, module_src: Path, commands: tuple[str, ...] = BUILT_COMMANDS
    ) -> list[Substitute]:
        """Pinned modules the proxy refuses, with what we build instead, said out loud.

        A refused module that the release's own (non-test) code imports, that has no served older
        version, and that ``commands`` may link makes the release unbuildable here: that is said at
        once, before minutes of compiling end in the same error.
        """
        substitutes, unserved = self._refused(version)
        missing = {
            f"{module} {pinned} (imported by {', '.join(users[:3])})"
            for module, pinned in unserved
            if (users := _importers(module_src, module))
            and any(_linked_by(user, commands) for user in users)
        }
        if missing:
            raise UnbuildableRelease(
                f"Kubernetes {version} cannot be built from the Go module proxy "
                f"{self.proxy.base_url}: it serves no version of {'; '.join(sorted(missing))}. "
                f"Build a checkout ({SOURCE_DIR_HINT}), or use a release mirror or a module proxy "
                "that serves it"
            )
        return substitutes

    def _refused(self, version: str) -> tuple[list[Substitute], list[tuple[str, str]]]:
        """The pinned modules the proxy refuses: those with an older served version (as
        substitutes), and those with none and no stand-in. Asked with one HEAD request each."""
        kubernetes_go_mod = self.proxy.go_mod(version)
        staging = local_replaced(kubernetes_go_mod)
        # a moved package the proxy refuses gets a stand-in (_standins), whatever it serves
        requires = [
            r
            for r in parse_requires(kubernetes_go_mod)
            if r[0] not in staging and r[0] not in KNOWN_MOVES
        ]
        substitutes, unserved = served_substitutes(
            self.proxy.base_url, requires, transport=self._transport
        )
        published = [(module, staging_version(version)) for module in sorted(staging)]
        _, unpublished = served_substitutes(
            self.proxy.base_url, published, transport=self._transport, allow_older=False
        )
        unserved += [(m, v) for m, v in unpublished if m not in KNOWN_SPLITS]
        return substitutes, unserved

    def unobtainable(self, version: str, commands: tuple[str, ...] = BUILT_COMMANDS) -> str | None:
        """Why ``version`` cannot be built here, found in seconds; None when it can or is built.

        The proxy's answers alone settle it when every refused module has a substitute or a
        stand-in. Only a module refused outright needs the release's source (tens of MB, and
        maybe a newer Go) to see whether ``commands`` import it; that fetch is said first.
        """
        tag = self.release_tag(version)
        if CacheEntry(self.cache_dir, tag).is_complete():
            return None
        if commands != BUILT_COMMANDS:
            partial = CacheEntry(self.cache_dir, f"{tag}-{_PARTIAL_KEYS[commands]}")
            if partial.is_complete():
                return None
        _, unserved = self._refused(tag)
        unserved = [(m, v) for m, v in unserved if m not in UNLINKED_STAGING]
        if not unserved:
            return None
        logger.info(
            f"the Go module proxy serves no version of {', '.join(m for m, _ in unserved)}: "
            f"fetching the source of Kubernetes {tag} to see which commands import it"
        )
        log = self.log_for(f"{tag}-check")
        try:
            module_src = self._download_kubernetes(tag, log, self._toolchain(tag))
            self._substitutes(tag, module_src, commands)
        except UnbuildableRelease as exc:
            return str(exc)
        return None

    def _move_standins(
        self,
        version: str,
        kubernetes_go_mod: str,
        module_src: Path,
        commands: tuple[str, ...],
        into: Path,
        log: Path,
        toolchain: GoToolchain,
    ) -> dict[str, tuple[Substitute, Path]]:
        """Stand-ins for refused modules that ``commands`` link and that hold a package moved out
        of ``k8s.io/kubernetes``."""
        pinned = {m: v for m, v in parse_requires(kubernetes_go_mod) if m in KNOWN_MOVES}
        refused = [
            KNOWN_MOVES[module]
            for module in sorted(pinned)
            if any(_linked_by(user, commands) for user in _importers(module_src, module))
            and not ModuleProxy(module, self.proxy.base_url, transport=self._transport).serves(
                pinned[module]
            )
        ]
        if not refused:
            return {}
        previous = self.resolve(str(previous_minor(version)))
        kubernetes_dir = self.download(KUBERNETES_MODULE, previous, log, toolchain)
        found: dict[str, tuple[Substitute, Path]] = {}
        for move in refused:
            dest = into / move.module
            assemble_move(move, kubernetes_dir, dest, go_directive(kubernetes_go_mod))
            substitute = Substitute(
                module=move.module, pinned=pinned[move.module], used=move.describe(previous)
            )
            logger.info(f"deviation: {substitute}: the Go module proxy does not serve it")
            found[move.module] = (substitute, dest)
        return found

    def _split_standins(
        self, version: str, kubernetes_go_mod: str, into: Path, log: Path, toolchain: GoToolchain
    ) -> dict[str, tuple[Substitute, Path]]:
        """Stand-ins for the staging modules the proxy refuses and we know how to assemble."""
        staging = staging_version(version)
        refused = [
            module
            for module in sorted(local_replaced(kubernetes_go_mod) & set(KNOWN_SPLITS))
            if not ModuleProxy(module, self.proxy.base_url, transport=self._transport).serves(
                staging
            )
        ]
        if not refused:
            return {}
        origin_version = staging_version(self.resolve(str(previous_minor(version))))
        smd = next(
            (m for m, _ in parse_requires(kubernetes_go_mod) if SMD_MODULE.fullmatch(m)), None
        )
        found: dict[str, tuple[Substitute, Path]] = {}
        for module in refused:
            split = KNOWN_SPLITS[module]
            origin_dir = self.download(split.origin, origin_version, log, toolchain)
            dest = into / module
            assemble(split, origin_dir, dest, go_directive(kubernetes_go_mod), smd)
            used = f"assembled from {split.origin} {origin_version}, the packages it was split from"
            substitute = Substitute(module=module, pinned=staging, used=used)
            logger.info(f"deviation: {substitute}: the Go module proxy does not serve it")
            found[module] = (substitute, dest)
        return found

    def go_environment(self) -> dict[str, str]:
        """Our Go environment, fetching modules from the same proxy we resolved against."""
        env = go_env()
        if self._proxy_url:
            env["GOPROXY"] = self._proxy_url
        return env

    def log_for(self, name: str) -> Path:
        """Outside the entry, so that the log of a failed build survives the failed entry."""
        log = self.cache_dir / ".logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        return log


_TEST_HELPERS = {"testing", "testutil", "testutils", "fake", "testdata"}
"""Packages by these names hold test helpers, which no server binary links."""


def _linked_by(directory: str, commands: tuple[str, ...]) -> bool:
    """Whether one of ``commands`` may link the package in ``directory`` (when in doubt: yes).

    ``cmd/<name>`` belongs to that command alone; the kubelet's own package and the proxy's
    packages are linked by the kubelet and kube-proxy only. Every other library may be shared.
    """
    parts = directory.split("/")
    if parts[0] == "cmd" and len(parts) > 1:
        return parts[1] in commands
    if directory == "pkg/kubelet":
        return "kubelet" in commands
    if parts[:2] == ["pkg", "proxy"]:
        return "kube-proxy" in commands
    return True


def _importers(module_src: Path, module: str) -> list[str]:
    """Directories of the release's commands and libraries whose non-test code imports it."""
    needle = f'"{module}'
    found: list[str] = []
    for top in ("cmd", "pkg", "plugin"):
        for go_file in sorted((module_src / top).rglob("*.go")):
            relative = go_file.parent.relative_to(module_src)
            if go_file.name.endswith("_test.go") or _TEST_HELPERS & set(relative.parts):
                continue
            directory = str(relative)
            if directory not in found and needle in go_file.read_text(errors="replace"):
                found.append(directory)
    return found


def _go_version_file(module_src: Path) -> str | None:
    """The Go release upstream builds this tree with (``.go-version``), if it says."""
    with contextlib.suppress(OSError):
        return (module_src / ".go-version").read_text().strip() or None
    return None


class _Bar:
    """The steps of a build on a terminal: :meth:`step` starts the next one, :meth:`detail` says
    where it is. Does nothing where there is no terminal (the build logs its progress)."""

    def step(self, name: str) -> None:
        pass

    def detail(self, text: str) -> None:
        pass


def _show_progress(bar: _Bar, command: str, where: BuildProgress) -> None:
    bar.detail(f"{command} {where}")


@contextlib.contextmanager
def _progress(total: int, title: str) -> Iterator[_Bar]:
    """A bar of ``total`` steps on a terminal."""
    if not fancy():
        yield _Bar()
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

        class Live(_Bar):
            started = 0

            def step(self, name: str) -> None:
                progress.update(task, description=f"{title}: {name}", completed=self.started)
                self.started += 1

            def detail(self, text: str) -> None:
                progress.update(task, description=f"{title}: {text}")

        yield Live()
        progress.update(task, completed=total)
