"""Which feature gates and API versions a pair of releases lets us set, asked of the releases.

Upstream passes one fixed FEATURE_GATES list to both releases. A gate that one of them does not
know, has locked to the other value, or cannot enable because a gate it depends on is off, makes
the control plane refuse to start, and that would look like a broken upgrade. ``kube-apiserver``
checks all of this while parsing its flags, before it acts on ``--version``, so asking it with
the whole list answers exactly what its release accepts; every gate it refuses is dropped (and
said so), never silently passed on. The kubelet, scheduler and controller-manager share the same
gate registry (``pkg/features``).

``--runtime-config`` is checked only after ``--version`` has exited, so the binaries cannot be asked
about API versions that way; a release's source tree can: it serves ``<group>/<version>`` only if it
has ``pkg/apis/<group>/<version>``. An API version one release lacks is dropped and said so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.localupcluster import (
    PROBED_BINARY,
    format_feature_gates,
    parse_feature_gates,
    refused_gates,
)


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
        for gate, why in refused_gates(binary, kept).items():
            dropped[gate] = f"refused by {binary}: {why}"
    return GateChoice(kept, dropped)


def choose_runtime_config(
    wanted: Iterable[str], source_dirs: Iterable[Path | None]
) -> tuple[list[str], dict[str, str]]:
    """Keep the API group/versions (``resource.k8s.io/v1beta1``) every release's tree has.

    A release without a source tree (binaries only) is not asked: its entries are kept.
    """
    kept = list(dict.fromkeys(wanted))
    dropped: dict[str, str] = {}
    for source_dir in source_dirs:
        apis = source_dir / "pkg" / "apis" if source_dir else None
        if apis is None or not apis.is_dir():
            continue
        for group_version in list(kept):
            group, _, version = group_version.rpartition("/")
            if not (apis / group.split(".")[0] / version).is_dir():
                dropped[group_version] = f"{source_dir} has no {group_version}"
                kept.remove(group_version)
    return kept, dropped
