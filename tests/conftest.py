"""Fixtures shared by the test modules (keep this small: one fixture per shared need)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from release_server import ReleaseServer


@pytest.fixture
def release_server() -> Iterator[ReleaseServer]:
    """A loopback release tree (see release_server.py), stopped after the test."""
    server = ReleaseServer().start()
    try:
        yield server
    finally:
        server.stop()
