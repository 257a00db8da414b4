"""Config files that are either the old or the new version, never half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_if_changed(path: Path, text: str) -> bool:
    """Atomically replace ``path`` with ``text`` unless it already holds it; True if it changed."""
    try:
        if path.read_text() == text:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True
