"""The test seam of :mod:`e2e_dra.settings`: a test changes the environment the code under test
reads without touching the process's own (which its child processes, and other tests, inherit).
The ``environ`` fixture (conftest.py) hands one out and puts the settings of before back after.
"""

from __future__ import annotations

import os

from e2e_dra.settings import Settings, use


class Environ:
    """The environment the code under test reads (through :mod:`e2e_dra.settings`): this
    process's, with the test's changes. Child processes still get the real one."""

    def __init__(self) -> None:
        self.values = dict(os.environ)
        self.apply()

    def set(self, name: str, value: str) -> None:
        self.values[name] = value
        self.apply()

    def unset(self, *names: str) -> None:
        for name in names:
            self.values.pop(name, None)
        self.apply()

    def apply(self) -> Settings:
        """Parse the variables as a run would (a bad value raises here, as it would there)."""
        settings = Settings.from_environ(self.values)
        use(settings)
        return settings
