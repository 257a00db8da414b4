"""Our own containerd: CDI on, its whole state under the node dir, found again by PID file.

It is not the host's containerd (if there is one): it listens on its own socket, keeps images and
containers under ``<node dir>/containerd`` and uses our CNI config and pause image, so test runs
neither depend on nor disturb anything else on the host.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.hostkit import write_if_changed
from e2e_dra.provision._cni import CNI_BIN_DIR
from e2e_dra.provision._daemon import Daemon

#: where CDI specs are read from; /var/run/cdi is where DRA drivers of the suite write them.
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
RUNC = Path("/usr/sbin/runc")


@dataclass(frozen=True)
class ContainerdLayout:
    """Every path of our containerd, below one directory."""

    base: Path  # <node dir>/containerd

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def cni_conf_dir(self) -> Path:
        return self.base.parent / "cni" / "net.d"

    @property
    def daemon(self) -> Daemon:
        return Daemon("containerd", self.base / "containerd.pid", self.base / "containerd.log")


def render_config(
    layout: ContainerdLayout,
    *,
    sandbox_image: str,
    runc: Path = RUNC,
    restrict_oom_score_adj: bool | None = None,
) -> str:
    """config.toml (version 3, which every containerd 2.x reads).

    CDI is always on in containerd 2.x (2.4 rejects the old ``enable_cdi`` key as unknown); only
    the spec dirs are ours to say.

    Without CAP_SYS_RESOURCE (VMs and containers often drop it) runc cannot lower a process's
    oom_score_adj and fails with "can't get final child's PID from pipe"; the kubelet asks for
    -998 for every pod sandbox. ``restrict_oom_score_adj`` clamps it to containerd's own value.
    """
    if restrict_oom_score_adj is None:
        restrict_oom_score_adj = not can_lower_oom_score_adj()

    def toml_list(items: tuple[str, ...] | list[str]) -> str:
        return "[" + ", ".join(f"'{i}'" for i in items) + "]"

    base = layout.base
    return f"""\
# Written by e2e-dra provision; changes are overwritten.
version = 3
root = '{base / "root"}'
state = '{base / "state"}'
imports = []

[grpc]
  address = '{layout.socket}'

[ttrpc]
  address = '{layout.socket}.ttrpc'

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = '{sandbox_image}'

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = {str(restrict_oom_score_adj).lower()}
  cdi_spec_dirs = {toml_list(CDI_SPEC_DIRS)}

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = '{runc}'
  SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = {toml_list([str(CNI_BIN_DIR)])}
  conf_dir = '{layout.cni_conf_dir}'
"""


def can_lower_oom_score_adj() -> bool:
    """Whether this process has CAP_SYS_RESOURCE (capability bit 24) in its effective set."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 24 & 1)
    except (OSError, ValueError):
        pass
    return False


def ctr_argv(bin_dir: Path, layout: ContainerdLayout) -> list[str]:
    return [str(bin_dir / "ctr"), "--address", str(layout.socket)]


def answers(bin_dir: Path, layout: ContainerdLayout) -> bool:
    """Whether a containerd serves our socket now."""
    if not layout.socket.exists():
        return False
    proc = subprocess.run(
        [*ctr_argv(bin_dir, layout), "version"], capture_output=True, timeout=20, check=False
    )
    return proc.returncode == 0


def write_config(layout: ContainerdLayout, *, sandbox_image: str) -> bool:
    """Write config.toml; True when it changed (a running daemon must then restart)."""
    return write_if_changed(layout.config, render_config(layout, sandbox_image=sandbox_image))


def running_binary(layout: ContainerdLayout) -> Path | None:
    who = layout.daemon.running()
    return who.exe() if who else None


def start(bin_dir: Path, layout: ContainerdLayout) -> int:
    """Start containerd detached; returns its PID once the socket answers."""
    for sub in ("root", "state"):
        (layout.base / sub).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # the shim is looked up on PATH; runc and the CNI plugins are configured by absolute path
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    return layout.daemon.start(
        [str(bin_dir / "containerd"), "--config", str(layout.config)],
        env=env,
        ready=lambda: answers(bin_dir, layout),
    )


def stop(bin_dir: Path | None, layout: ContainerdLayout) -> bool:
    """Kill the tasks it runs (so no shim outlives it), then stop the daemon by PID."""
    if bin_dir is not None and answers(bin_dir, layout):
        ctr = ctr_argv(bin_dir, layout)
        namespaces = _lines([*ctr, "namespaces", "ls", "-q"])
        for ns in namespaces:
            for task in _lines([*ctr, "-n", ns, "tasks", "ls", "-q"]):
                subprocess.run(
                    [*ctr, "-n", ns, "tasks", "kill", "-s", "SIGKILL", task],
                    capture_output=True,
                    check=False,
                )
                subprocess.run(
                    [*ctr, "-n", ns, "tasks", "delete", "-f", task],
                    capture_output=True,
                    check=False,
                )
    return layout.daemon.stop()


def _lines(argv: list[str]) -> list[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.stdout.split() if proc.returncode == 0 else []
