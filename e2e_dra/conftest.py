"""The suites of this directory run under the e2e-dra suite plugin, and only they do: loaded
here, it is not a plugin of every pytest run on the machine."""

from __future__ import annotations

import pytest

PLUGIN = "e2e_dra.pytest_plugin"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin(PLUGIN):  # unless -p loaded it already
        pluginmanager.import_plugin(PLUGIN)
