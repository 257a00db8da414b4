"""Where e2e-dra keeps things between runs.

The directories come from :mod:`e2e_dra.settings`, which checks what can be told without touching
the disk (``~user`` that does not expand); everything else about them (a file in the way,
read-only, full) is found when they are first written, by :class:`e2e_dra._cache.CacheEntry`, and
reported as one line. This module adds the defaults that need a look at the user's home.
"""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_cache_dir

from e2e_dra.settings import settings

APP_NAME = "e2e-dra"


def cache_root() -> Path:
    """The root of every cache of ours: ``E2E_DRA_CACHE_DIR``, else the user cache dir (under
    ``XDG_CACHE_HOME`` when set, held to what ``E2E_DRA_CACHE_DIR`` is held to)."""
    explicit, home = settings().cache_dir, settings().xdg_cache_home
    if explicit is not None:
        return explicit
    return home / APP_NAME if home is not None else Path(user_cache_dir(APP_NAME, appauthor=False))


def server_cache_dir() -> Path:
    """Release binaries: ``KUBERNETES_SERVER_CACHE_DIR`` (as upstream), else ``<root>/releases``."""
    explicit = settings().server_cache_dir
    return explicit if explicit is not None else cache_root() / "releases"


def artifacts_dir() -> Path:
    """Logs and dumps of a run: ``ARTIFACTS`` (as upstream), else ``/tmp/artifacts``."""
    return settings().artifacts
