"""Feature-gate flags: merging into a command line, and gates a kubelet refuses to toggle."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from e2e_dra.localupcluster._components import FEATURE_GATED_COMPONENTS
from e2e_dra.localupcluster._errors import ClusterError

FLAG = "--feature-gates="

_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}


def parse_feature_gates(gates: str, *, where: str = "feature gates") -> dict[str, str]:
    """``"a=true,b=false"`` -> {"a": "true", "b": "false"}; values normalized as by Go."""
    result: dict[str, str] = {}
    for item in gates.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip().lower()
        if not sep or not key or value not in _TRUE | _FALSE:
            raise ClusterError(
                f"invalid feature gate {item!r} in {where} {gates!r}: give name=true or "
                "name=false pairs separated by commas (e.g. DRADeviceTaints=true)"
            )
        result[key] = "true" if value in _TRUE else "false"
    return result


def format_feature_gates(gates: dict[str, str]) -> str:
    return ",".join(f"{key}={gates[key]}" for key in sorted(gates))


def merge_feature_gates(argv: Sequence[str], gates: str) -> list[str]:
    """One ``--feature-gates`` flag holding the command line's gates overridden by ``gates``.

    Every existing flag is folded into the first one's position (later flags win, then ``gates``
    wins); without an existing flag the merged one is appended. Keys are sorted so the result is
    stable. The input is not modified.
    """
    merged: dict[str, str] = {}
    first_index: int | None = None
    result: list[str] = []
    for arg in argv:
        if arg.startswith(FLAG):
            if first_index is None:
                first_index = len(result)
            merged.update(parse_feature_gates(arg[len(FLAG) :], where="command line flag"))
            continue
        result.append(arg)
    merged.update(parse_feature_gates(gates))
    if first_index is None:
        if not merged:
            return list(argv)
        first_index = len(result)
    result.insert(first_index, FLAG + format_feature_gates(merged))
    return result


PROBED_BINARY = "kube-apiserver"
"""Which binary of a release answers for its gates: it validates ``--feature-gates`` while parsing
its flags, before it acts on ``--version``, so asking it costs a fraction of a second. The kubelet
checks gates only later, while it starts, but shares the apiserver's registry (pkg/features), so
the apiserver of the same release answers for it too."""

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
        raise ClusterError(f"cannot run {binary} to check feature gates: {exc}") from exc
    if done.returncode == 0:
        return None
    output = (done.stderr or done.stdout).strip()
    return output.splitlines()[-1] if output else f"exit status {done.returncode}"


def culprit(message: str) -> str | None:
    """The gate a refusal message names."""
    for pattern in _CULPRITS:
        match = pattern.search(message)
        if match:
            return match["gate"]
    return None


def refused_gates(binary: Path, gates: dict[str, str]) -> dict[str, str]:
    """Ask ``binary`` until it accepts what is left of ``gates``: gate -> why it was refused.

    ``gates`` loses the refused ones. A refusal that names no gate is an error.
    """
    refused: dict[str, str] = {}
    while gates:
        message = refusal(binary, format_feature_gates(gates))
        if message is None:
            break
        gate = culprit(message)
        if gate is None or gate not in gates:
            raise ClusterError(
                f"{binary} refuses --feature-gates={format_feature_gates(gates)}: {message}"
            )
        match = re.search(r'err="(?P<err>[^"]+)"', message)
        refused[gate] = match["err"] if match else message
        del gates[gate]
    return refused


def filter_locked_gates(gates: str, bin_dir: Path) -> str:
    """``gates`` without those the release in ``bin_dir`` refuses (locked, unknown or lacking a
    dependency): for the kubelet, which has no ``--emulated-version`` to make them settable."""
    kept = parse_feature_gates(gates)
    refused_gates(bin_dir / PROBED_BINARY, kept)
    return format_feature_gates(kept)


def gates_to_toggle(gates: str, kubelet_bin_dir: Path) -> dict[str, str]:
    """``gates`` for each feature-gated component. The kubelet gets them without those its
    release (``kubelet_bin_dir``) refuses: it has no ``--emulated-version`` to make them
    settable. The control plane keeps them all."""
    return {
        component: filter_locked_gates(gates, kubelet_bin_dir) if component == "kubelet" else gates
        for component in FEATURE_GATED_COMPONENTS
    }
