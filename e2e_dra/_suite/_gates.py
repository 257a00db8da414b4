"""Which feature gates a pair of releases lets us set, read from the binaries themselves.

Upstream passes a fixed FEATURE_GATES list to both releases. A gate that one of them does not know,
or that it has locked (GA, removed), makes that component refuse to start, and the failure would
look like a broken upgrade. The binaries say what they accept: ``--help`` lists every settable
gate as ``Name=true|false (ALPHA|BETA - default=...)``; anything missing there is dropped (and
said so), never silently passed on.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.errors import E2EDRAError
from localupcluster._gates import format_feature_gates, parse_feature_gates

GATED_BINARIES = ("kube-apiserver", "kubelet")
"""The control plane shares the apiserver's gate registry; the kubelet has its own."""

_GATE_LINE = re.compile(
    r"(?:[A-Za-z0-9_-]+:)?(?P<name>[A-Za-z][A-Za-z0-9]*)=true\|false"
    r"\s*\((?P<stage>[A-Z]+)?\s*-\s*default=(?P<default>true|false)\)"
)


def settable_gates(help_text: str) -> dict[str, str]:
    """Gate name -> stage ("ALPHA", "BETA", ...) for every gate a ``--help`` text lists."""
    return {m["name"]: m["stage"] or "" for m in _GATE_LINE.finditer(help_text)}


@functools.cache
def binary_gates(binary: Path) -> frozenset[str]:
    """The gates ``binary --help`` lists as settable (cached: a binary does not change)."""
    try:
        done = subprocess.run(
            [str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        raise E2EDRAError(f"cannot run {binary} --help to list its feature gates: {exc}") from exc
    gates = settable_gates(done.stdout + done.stderr)
    if not gates:
        raise E2EDRAError(f"{binary} --help lists no feature gates; is it a Kubernetes binary?")
    return frozenset(gates)


@dataclass(frozen=True)
class GateChoice:
    """What we asked for, what all binaries accept, and why the rest was dropped."""

    kept: dict[str, str]
    dropped: dict[str, str]  # gate -> reason

    @property
    def flag_value(self) -> str:
        return format_feature_gates(self.kept)


def common_gates(bin_dirs: Iterable[Path]) -> dict[str, frozenset[str]]:
    """Per binary path, the gates it accepts, for every gated binary of every bin dir."""
    return {
        str(bin_dir / name): binary_gates(bin_dir / name)
        for bin_dir in bin_dirs
        for name in GATED_BINARIES
    }


def choose_gates(wanted: str, accepted: Mapping[str, frozenset[str]]) -> GateChoice:
    """Keep the gates of ``wanted`` ("A=true,B=false") that every binary in ``accepted`` lists."""
    kept: dict[str, str] = {}
    dropped: dict[str, str] = {}
    for gate, value in parse_feature_gates(wanted, where="FEATURE_GATES").items():
        refusing = [binary for binary, gates in accepted.items() if gate not in gates]
        if refusing:
            dropped[gate] = "not settable in " + ", ".join(refusing) + " (unknown, GA or locked)"
        else:
            kept[gate] = value
    return GateChoice(kept, dropped)
