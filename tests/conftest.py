"""Fixtures shared by the test modules (keep this small: one fixture per shared need)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from environment import Environ
from module_proxy import ProxyTree
from release_server import ReleaseServer

from e2e_dra.settings import Settings, use


@pytest.fixture
def release_server() -> Iterator[ReleaseServer]:
    """A loopback release tree (see release_server.py), stopped after the test."""
    server = ReleaseServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy_tree() -> Iterator[ProxyTree]:
    """A loopback Go module proxy (see module_proxy.py) shaped like the real one was: its list
    lags behind, v1.38 only has a beta listed."""
    tree = ProxyTree(
        listed=["v1.35.4", "v1.36.1", "v1.36.3", "v1.37.2", "v1.38.0-beta.0", "v1.36.0-rc.1"],
        served=[
            *("v1.36.4", "v1.36.5"),
            *("v1.38.0-beta.1", "v1.38.0-rc.0"),
            *("v1.39.0-alpha.0", "v1.39.0-alpha.1"),
        ],
    )
    yield tree
    tree.stop()


@pytest.fixture
def environ() -> Iterator[Environ]:
    """Set and unset variables for the code under test; the settings of before come back after."""
    before = use(None)
    try:
        yield Environ()
    finally:
        use(before)


@pytest.fixture(autouse=True)
def _host_caches_out_of_reach(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Off the real lane no test reads or writes this host's caches: their variables point at a
    fresh directory, for the code under test and for the processes it starts. (A unit test that
    once reached the real cache left an empty cfssl entry marked complete, which stalled every
    cluster after it.)"""
    if request.node.get_closest_marker("real"):
        yield
        return
    root = tmp_path_factory.mktemp("caches")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("E2E_DRA_CACHE_DIR", str(root))
        patch.setenv("KUBERNETES_SERVER_CACHE_DIR", str(root / "releases"))
        # Nor does a plan there hold a real driver (a Go program to build): a test that wants
        # one names it.
        patch.setenv("E2E_DRA_DRIVERS", "none")
        import os

        before = use(Settings.from_environ(os.environ))
        try:
            yield
        finally:
            use(before)
