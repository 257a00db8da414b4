"""This machine as Go and Kubernetes release files name it (``linux``, ``amd64``)."""

from __future__ import annotations

import platform

_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def host_platform() -> tuple[str, str]:
    """This machine as Go names it: ``("linux", "amd64")``."""
    machine = platform.machine().lower()
    return platform.system().lower(), _GO_ARCH.get(machine, machine)
