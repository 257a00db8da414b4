"""Bring the node runtime into shape, one piece at a time, and say what each piece needed.

Each piece has a cheap check and a way to make it; a second run finds everything and does no
work. ``check_only`` runs the checks alone, so ``e2e-dra provision --check`` and a CI preflight can
say exactly what is missing without touching the host.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from e2e_dra._console import console, fancy
from e2e_dra.errors import ProvisionError
from e2e_dra.provision import _apt, _cni, _containerd, _gobuilds, _images, _kubelet
from e2e_dra.provision._containerd import ContainerdLayout
from e2e_dra.provision._images import PAUSE_IMAGE
from e2e_dra.settings import settings

logger = logging.getLogger(__name__)


def node_dir() -> Path:
    """Where our daemons keep their state: ``E2E_DRA_NODE_DIR``, else /var/lib/e2e-dra."""
    return settings().node_dir


@dataclass
class PieceResult:
    name: str
    action: str  # "found" | "made" | "missing"
    detail: str
    seconds: float = 0.0


class NodeRuntimeIncomplete(ProvisionError):
    """What a check found missing; ``results`` says what each piece looked like."""

    def __init__(self, message: str, results: list[PieceResult]) -> None:
        super().__init__(message)
        self.results = results


@dataclass
class NodeRuntime:
    """A prepared node: where its state lives and what local-up-cluster.sh needs to use it."""

    root: Path
    runtime_endpoint: str = ""
    path_dirs: list[Path] = field(default_factory=list)
    cgroup_v1: bool = True
    containerd_bin_dir: Path | None = None
    results: list[PieceResult] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return _kubelet.local_up_env(
            runtime_endpoint=self.runtime_endpoint,
            path_dirs=self.path_dirs,
            cgroup_v1=self.cgroup_v1,
            eviction_hard=settings().eviction_hard,
        )

    def disk_pressure(self) -> str | None:
        """Why the kubelet would evict every pod as soon as it starts (too little free disk for
        ``EVICTION_HARD``), or None; see :func:`_kubelet.disk_pressure`."""
        filesystems = {"nodefs": _kubelet.KUBELET_ROOT, "imagefs": self.root / "containerd"}
        return _kubelet.disk_pressure(settings().eviction_hard, filesystems)

    @property
    def containerd_log(self) -> Path:
        return ContainerdLayout(self.root / "containerd").daemon.log_file

    def ctr(self) -> list[str]:
        """``ctr`` talking to this node's containerd (for inspecting images and tasks)."""
        if self.containerd_bin_dir is None:
            raise ProvisionError("containerd is not built: run `e2e-dra provision`")
        return _containerd.ctr_argv(
            self.containerd_bin_dir, ContainerdLayout(self.root / "containerd")
        )


@dataclass
class _Piece:
    name: str
    check: Callable[[], str | None]  # where it is; None or ProvisionError(why) when missing
    make: Callable[[], str]  # what was done


def ensure_node_runtime(
    k8s_source_dir: Path | None = None, *, check_only: bool = False
) -> NodeRuntime:
    """Find, build, install or start whatever of the node runtime is missing (idempotent)."""
    root = node_dir()
    layout = ContainerdLayout(root / "containerd")
    tools = {
        "containerd": _gobuilds.containerd_tool(),
        "etcd": _gobuilds.etcd_tool(_gobuilds.etcd_version_for(k8s_source_dir)),
        "cfssl": _gobuilds.cfssl_tool(),
    }
    if not check_only and os.geteuid() != 0:
        raise ProvisionError(
            "the node runtime (containerd, CNI, /var/lib/kubelet) needs root: "
            "run `e2e-dra provision` as root"
        )

    def built_bin(tool: str) -> Path:
        found = _gobuilds.cached_bin_dir(tools[tool])
        if found is None:
            raise ProvisionError(f"{tool} is not built")
        return found

    def containerd_bin() -> Path:
        return built_bin("containerd")

    pieces = [
        _Piece("debian packages", _check_packages, _install_packages),
        *(_tool_piece(name, tool) for name, tool in tools.items()),
        _Piece("cni", lambda: _check_cni(layout), lambda: _make_cni(layout)),
        _Piece(
            "containerd daemon",
            lambda: _check_daemon(layout, containerd_bin),
            lambda: _make_daemon(layout, containerd_bin()),
        ),
        _Piece(
            "images",
            lambda: _check_images(layout, containerd_bin),
            lambda: _make_images(layout, containerd_bin()),
        ),
        _Piece("host dirs", _check_host_dirs, _make_host_dirs),
    ]
    results: list[PieceResult] = []
    with contextlib.ExitStack() as stack:
        if not check_only:
            stack.enter_context(_provision_lock())
        for piece in pieces:
            results.append(_run_piece(piece, check_only=check_only))
    missing = [r for r in results if r.action == "missing"]
    if missing:
        raise NodeRuntimeIncomplete(
            "node runtime incomplete: "
            + "; ".join(f"{r.name} ({r.detail})" for r in missing)
            + ": run `e2e-dra provision`",
            results,
        )
    return NodeRuntime(
        root=root,
        runtime_endpoint=layout.endpoint,
        path_dirs=[built_bin(t) for t in ("etcd", "cfssl", "containerd")],
        cgroup_v1=_kubelet.uses_cgroup_v1(),
        containerd_bin_dir=containerd_bin(),
        results=results,
    )


def running_ctr() -> list[str]:
    """``ctr`` talking to the containerd that runs now (the ``ctr`` built beside its binary).

    For a subtest that acts on the runtime as the node would (kill a pod's processes, as a
    reboot does); raises ProvisionError when our containerd is not running.
    """
    layout = ContainerdLayout(node_dir() / "containerd")
    running = _containerd.running_binary(layout)
    if running is None or not (running.parent / "ctr").exists():
        raise ProvisionError(
            f"no running containerd of ours with a ctr beside it ({layout.daemon.pid_file}): "
            "run `e2e-dra provision`"
        )
    return _containerd.ctr_argv(running.parent, layout)


def stop_node_runtime() -> bool:
    """Stop our containerd (and the containers it runs); True when one was running."""
    layout = ContainerdLayout(node_dir() / "containerd")
    running = _containerd.running_binary(layout)
    return _containerd.stop(running.parent if running else None, layout)


def _run_piece(piece: _Piece, *, check_only: bool) -> PieceResult:
    started = time.monotonic()
    try:
        found = piece.check()
    except ProvisionError as exc:
        found, why = None, str(exc)
    else:
        why = "not there"
    if found is not None:
        result = PieceResult(piece.name, "found", found, time.monotonic() - started)
        logger.info(f"{piece.name}: found {found}")
        return result
    if check_only:
        logger.info(f"{piece.name}: MISSING ({why})")
        return PieceResult(piece.name, "missing", why)
    logger.info(f"{piece.name}: {why}; making it")
    with console().status(f"{piece.name} ...") if fancy() else contextlib.nullcontext():
        detail = piece.make()
    seconds = time.monotonic() - started
    logger.info(f"{piece.name}: {detail} ({seconds:.1f}s)")
    return PieceResult(piece.name, "made", detail, seconds)


@contextlib.contextmanager
def _provision_lock() -> Iterator[None]:
    """One provisioning at a time per host (two would race to start containerd)."""
    lock = _gobuilds.runtime_cache_dir() / ".provision.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_packages() -> str | None:
    missing = _apt.missing_packages()
    if missing:
        raise ProvisionError(f"missing {', '.join(missing)}")
    return ", ".join(sorted(_apt.PACKAGES))


def _install_packages() -> str:
    missing = _apt.missing_packages()
    _apt.install(missing)
    still = _apt.missing_packages()
    if still:
        raise ProvisionError(f"apt-get installed, yet still missing: {', '.join(still)}")
    return f"installed {', '.join(missing)}"


def _tool_piece(name: str, tool: _gobuilds.GoTool) -> _Piece:
    def check() -> str | None:
        found = _gobuilds.cached_bin_dir(tool)
        return f"{tool.version} in {found}" if found else None

    def make() -> str:
        return f"built {tool.version} into {_gobuilds.build(tool)}"

    return _Piece(name, check, make)


def _check_cni(layout: ContainerdLayout) -> str | None:
    missing = _cni.missing_plugins()
    if missing:
        raise ProvisionError(f"no {', '.join(missing)} in {_cni.CNI_BIN_DIR}")
    path = layout.cni_conf_dir / f"10-{_cni.NETWORK_NAME}.conflist"
    if not path.is_file() or path.read_text() != _cni.conflist_text():
        raise ProvisionError(f"{path} is missing or outdated")
    return f"plugins in {_cni.CNI_BIN_DIR}, config {path}"


def _make_cni(layout: ContainerdLayout) -> str:
    copied = _cni.install_plugins()
    _cni.write_config(layout.cni_conf_dir)
    return f"copied {', '.join(copied) or 'no'} plugins to {_cni.CNI_BIN_DIR}, wrote config"


def _check_daemon(layout: ContainerdLayout, bin_dir: Callable[[], Path]) -> str | None:
    binary = bin_dir() / "containerd"
    pid = layout.daemon.running_pid()
    if pid is None:
        raise ProvisionError("not running")
    if _containerd.running_binary(layout) != binary:
        raise ProvisionError(f"PID {pid} runs another containerd build than {binary}")
    if not layout.config.is_file() or layout.config.read_text() != _containerd.render_config(
        layout, sandbox_image=PAUSE_IMAGE
    ):
        raise ProvisionError(f"{layout.config} is missing or outdated")
    if not _containerd.answers(bin_dir(), layout):
        raise ProvisionError(f"PID {pid} does not answer on {layout.socket}")
    return f"PID {pid} on {layout.endpoint}"


def _make_daemon(layout: ContainerdLayout, bin_dir: Path) -> str:
    _containerd.write_config(layout, sandbox_image=PAUSE_IMAGE)
    if layout.daemon.running_pid() is not None:
        layout.daemon.stop()  # outdated config or binary; its containers keep running in shims
    pid = _containerd.start(bin_dir, layout)
    log = layout.daemon.log_file
    return f"started PID {pid} on {layout.endpoint} (state in {layout.base}, log {log})"


def _check_images(layout: ContainerdLayout, bin_dir: Callable[[], Path]) -> str | None:
    if not _containerd.answers(bin_dir(), layout):
        raise ProvisionError("containerd is not running")
    have = _images.imported_digests(_containerd.ctr_argv(bin_dir(), layout))
    stale = [i.name for i in _images.node_images() if have.get(i.name) != i.manifest_digest]
    if stale:
        raise ProvisionError(f"not imported: {', '.join(stale)}")
    return f"{PAUSE_IMAGE}, {_images.TEST_IMAGE}"


def _make_images(layout: ContainerdLayout, bin_dir: Path) -> str:
    ctr = _containerd.ctr_argv(bin_dir, layout)
    have = _images.imported_digests(ctr)
    imported = []
    for image in _images.node_images():
        if have.get(image.name) != image.manifest_digest:
            _images.import_image(ctr, image)
            imported.append(image.name)
    return f"imported {', '.join(imported)}"


def _check_host_dirs() -> str | None:
    missing = _kubelet.missing_host_dirs()
    if missing:
        raise ProvisionError(f"no {', '.join(map(str, missing))}")
    return ", ".join(map(str, _kubelet.HOST_DIRS))


def _make_host_dirs() -> str:
    _kubelet.make_host_dirs()
    return "created " + ", ".join(map(str, _kubelet.HOST_DIRS))
