"""Which feature gates a pair of releases lets us set, asked of the binaries themselves.

Upstream passes one fixed FEATURE_GATES list to both releases. A gate that one of them does not
know, has locked to the other value, or cannot enable because a gate it depends on is off, makes
the control plane refuse to start, and that would look like a broken upgrade. ``kube-apiserver``
checks all of this while parsing its flags, before it acts on ``--version``, so asking it with
the whole list answers exactly what its release accepts; every gate it refuses is dropped (and
said so), never silently passed on. The kubelet, scheduler and controller-manager share the same
gate registry (``pkg/features``).
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.errors import E2EDRAError
from localupcluster._gates import format_feature_gates, parse_feature_gates

PROBED_BINARY = "kube-apiserver"

_CULPRITS = (
    re.compile(r"unrecognized feature gate: (?P<gate>\w+)"),
    re.compile(r"cannot set feature gate (?P<gate>\w+) to \w+, feature is locked to \w+"),
    re.compile(r"(?P<gate>\w+) is enabled, but depends on features that are disabled"),
)


@functools.cache
def refusal(binary: Path, gates: str) -> str | None:
    """Why ``binary --feature-gates=<gates>`` refuses to start, or None when it accepts them."""
    try:
        done = subprocess.run(
            [str(binary), f"--feature-gates={gates}", "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise E2EDRAError(f"cannot run {binary} to check feature gates: {exc}") from exc
    if done.returncode == 0:
        return None
    return (
        (done.stderr or done.stdout).strip().splitlines()[-1]
        if (done.stderr or done.stdout)
        else f"exit status {done.returncode}"
    )


def culprit(message: str) -> str | None:
    """The gate a refusal message names."""
    for pattern in _CULPRITS:
        match = pattern.search(message)
        if match:
            return match["gate"]
    return None


@dataclass(frozen=True)
class GateChoice:
    """What we asked for, what every release accepts, and why the rest was dropped."""

    kept: dict[str, str]
    dropped: dict[str, str]  # gate -> reason

    @property
    def flag_value(self) -> str:
        return format_feature_gates(self.kept)


def choose_gates(wanted: str, bin_dirs: Iterable[Path]) -> GateChoice:
    """Keep the gates of ``wanted`` (``"A=true,B=false"``) that every release accepts together."""
    kept = parse_feature_gates(wanted, where="FEATURE_GATES")
    dropped: dict[str, str] = {}
    for bin_dir in bin_dirs:
        binary = bin_dir / PROBED_BINARY
        while kept:
            message = refusal(binary, format_feature_gates(kept))
            if message is None:
                break
            gate = culprit(message)
            if gate is None or gate not in kept:
                raise E2EDRAError(
                    f"{binary} refuses --feature-gates={format_feature_gates(kept)}: {message}"
                )
            dropped[gate] = f"refused by {binary}: {_reason(message)}"
            del kept[gate]
    return GateChoice(kept, dropped)


def _reason(message: str) -> str:
    """The part of a klog error line that says what is wrong."""
    match = re.search(r'err="(?P<err>[^"]+)"', message)
    return match["err"] if match else message
