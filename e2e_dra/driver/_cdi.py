"""CDI specs: how the driver's env vars reach the container (the runtime injects them).

One spec file per prepared (claim, request), named so that unprepare can find it without state:
``<cdi dir>/<driver>-<claim uid>-<request>.json``. Runtimes read the directory at any moment, so a
spec appears by rename, never half-written.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path

from e2e_dra.hostkit import atomic_write_text

# Old enough for every runtime that supports CDI; it covers env-only container edits.
CDI_VERSION = "0.3.0"
CDI_CLASS = "test"


def device_name(claim_uid: str, request: str) -> str:
    return f"claim-{claim_uid}-{request}"


def device_id(driver: str, claim_uid: str, request: str) -> str:
    """The fully qualified CDI device name the kubelet passes to the runtime."""
    return f"{driver}/{CDI_CLASS}={device_name(claim_uid, request)}"


def spec_path(cdi_dir: Path, driver: str, claim_uid: str, request: str) -> Path:
    return cdi_dir / f"{driver}-{claim_uid}-{request}.json"


def build_spec(driver: str, claim_uid: str, request: str, env: Mapping[str, str]) -> dict | None:
    """The spec of one device, or None when there is nothing to inject.

    Runtimes reject a device without container edits, so an empty env means "no CDI device".
    """
    if not env:
        return None
    return {
        "cdiVersion": CDI_VERSION,
        "kind": f"{driver}/{CDI_CLASS}",
        "devices": [
            {
                "name": device_name(claim_uid, request),
                "containerEdits": {"env": sorted(f"{key}={value}" for key, value in env.items())},
            }
        ],
    }


def write_spec(path: Path, spec: dict) -> None:
    """Replace ``path`` atomically with ``spec`` (mode 0644, readable by the runtime)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(spec), mode=0o644)


def remove_spec(path: Path) -> None:
    """Remove ``path``; already gone is fine (the kubelet may unprepare twice)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
