"""Feature-gate flags: merging into a command line, and gates a kubelet refuses to toggle."""

from __future__ import annotations

import re
from collections.abc import Sequence

from e2e_dra.errors import E2EDRAError

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
            raise E2EDRAError(
                f"invalid feature gate {item!r} in {where} {gates!r}: want name=true|false"
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


_DRA_LOCKED_SINCE: dict[str, tuple[int, int]] = {
    "DynamicResourceAllocation": (1, 35),
    "DRAAdminAccess": (1, 36),
    "KubeletPodResourcesDynamicResources": (1, 36),
    "KubeletPodResourcesGet": (1, 36),
    "DRAExtendedResource": (1, 37),
    "DRAPrioritizedList": (1, 37),
    "DRAResourceClaimDeviceStatus": (1, 37),
    "DRADeviceTaints": (1, 38),
    "DRADeviceTaintRules": (1, 38),
}
"""Gate -> first minor in which it is ``LockToDefault`` (pkg/features/kube_features.go, v1.37.2;
the 1.38 entries come from its "LockToDefault: true in 1.38" notes). A gate stays here after it is
removed from Kubernetes: a removed gate cannot be set either. Maintain this when a new minor lands.
"""


def locked_gates(minor: tuple[int, int]) -> frozenset[str]:
    """DRA-related gates a component of that (major, minor) rejects an explicit value for."""
    return frozenset(gate for gate, since in _DRA_LOCKED_SINCE.items() if minor >= since)


LOCKED_GATES: dict[str, frozenset[str]] = {
    f"1.{minor}": locked_gates((1, minor)) for minor in range(35, 39)
}
"""The table by minor, for people reading it; :func:`locked_gates` also answers other minors."""

_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def filter_locked_gates(gates: str, version: str) -> str:
    """Drop the gates locked in ``version`` ("v1.37.2"): the kubelet has no --emulated-version."""
    match = _VERSION.search(version)
    if match is None:
        raise E2EDRAError(f"cannot tell the Kubernetes minor of version {version!r}")
    locked = locked_gates((int(match.group(1)), int(match.group(2))))
    kept = {k: v for k, v in parse_feature_gates(gates).items() if k not in locked}
    return format_feature_gates(kept)
