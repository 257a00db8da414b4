"""Fixtures shared by the test modules (keep this small: one fixture per shared need)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from environment import Environ
from release_server import ReleaseServer

from e2e_dra.settings import use


@pytest.fixture
def release_server() -> Iterator[ReleaseServer]:
    """A loopback release tree (see release_server.py), stopped after the test."""
    server = ReleaseServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def environ() -> Iterator[Environ]:
    """Set and unset variables for the code under test; the settings of before come back after."""
    before = use(None)
    try:
        yield Environ()
    finally:
        use(before)
