"""Where e2e-dra keeps things between runs.

A directory named in the environment is checked for what can be told without touching the disk
(``~user`` that does not expand); everything else about it (a file in the way, read-only, full) is
found when it is first written, by :class:`e2e_dra._cache.CacheEntry`, and reported as one line.
"""

from __future__ import annotations

import os
from pathlib import Path

from e2e_dra.errors import InputError

APP_NAME = "e2e-dra"


def cache_root() -> Path:
    """The root of every cache of ours: ``E2E_DRA_CACHE_DIR``, else the user cache dir."""
    explicit = os.environ.get("E2E_DRA_CACHE_DIR")
    if explicit:
        return env_dir("E2E_DRA_CACHE_DIR", explicit)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir(APP_NAME, appauthor=False))


def server_cache_dir() -> Path:
    """Release binaries: ``KUBERNETES_SERVER_CACHE_DIR`` (as upstream), else ``<root>/releases``."""
    explicit = os.environ.get("KUBERNETES_SERVER_CACHE_DIR")
    if explicit:
        return env_dir("KUBERNETES_SERVER_CACHE_DIR", explicit)
    return cache_root() / "releases"


def env_dir(name: str, value: str) -> Path:
    """``value`` of the variable ``name`` as an absolute path, or one line saying why it is not."""
    try:
        return Path(value).expanduser().resolve()
    except (RuntimeError, OSError, ValueError) as exc:
        raise InputError(
            f"{name}={value!r} is not a usable directory ({exc}); give an absolute path"
        ) from None


def artifacts_dir() -> Path:
    """Logs and dumps of a run: ``ARTIFACTS`` (as upstream), else ``/tmp/artifacts``."""
    return Path(os.environ.get("ARTIFACTS") or "/tmp/artifacts")
