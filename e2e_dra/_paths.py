"""Where e2e-dra keeps things between runs."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "e2e-dra"


def cache_root() -> Path:
    """The root of every cache of ours: ``E2E_DRA_CACHE_DIR``, else the user cache dir."""
    explicit = os.environ.get("E2E_DRA_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser().resolve()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir(APP_NAME, appauthor=False))


def server_cache_dir() -> Path:
    """Release binaries: ``KUBERNETES_SERVER_CACHE_DIR`` (as upstream), else ``<root>/releases``."""
    explicit = os.environ.get("KUBERNETES_SERVER_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser().resolve()
    return cache_root() / "releases"


def artifacts_dir() -> Path:
    """Logs and dumps of a run: ``ARTIFACTS`` (as upstream), else ``/tmp/artifacts``."""
    return Path(os.environ.get("ARTIFACTS") or "/tmp/artifacts")
