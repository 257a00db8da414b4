"""A component's binary in its command line as the script printed it: finding it, checking it,
swapping it for another release's (what an upgrade or a downgrade does), and asking its version.

The script may wrap a command line in ``sudo -E``, so the binary is the first word whose basename
is the component's name, not the first word.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from e2e_dra.localupcluster._errors import ClusterError


def binary_index(argv: list[str], component: str) -> int:
    """Index of the first word whose basename is ``component`` (skips ``sudo -E`` wrappers)."""
    for index, word in enumerate(argv):
        if word and os.path.basename(word) == component:
            return index
    raise ClusterError(f"binary filename of {component} not found in {' '.join(argv)!r}")


def component_binary(argv: list[str], component: str) -> str:
    """The binary ``argv`` runs for ``component``."""
    return argv[binary_index(argv, component)]


def require_executable(binary: str | Path, component: str) -> None:
    """Fail, naming the component, when ``binary`` cannot be run: better than a start that fails
    with a confusing error in the component's log."""
    if not os.access(binary, os.X_OK):
        raise ClusterError(f"component binary {binary} for {component} is missing")


def replace_binary(argv: list[str], component: str, binary: Path) -> Path:
    """Put ``binary`` in place of ``component``'s binary in ``argv`` (in place); returns the one it
    replaced, which is what undoes the swap."""
    index = binary_index(argv, component)
    replaced = Path(argv[index])
    argv[index] = str(binary)
    return replaced


def binary_version(binary: str) -> str:
    """``<binary> --version``'s version (e.g. "v1.37.2")."""
    try:
        output = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterError(f"cannot run {binary} --version: {exc}") from exc
    match = re.search(r"v\d+\.\d+\.\d+\S*", output)
    if match is None:
        raise ClusterError(f"{binary} --version printed no version: {output.strip()!r}")
    return match.group(0)
