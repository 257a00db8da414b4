"""How the engine talks: records on a :class:`logging.Logger` its user hands it.

The engine imports nothing of the e2e-dra harness, so it does not know how lines are shown; it
logs progress at INFO and leaves handlers to the program (a command line's handler, pytest's live
logging). Without a logger of the user's, records go to the ``e2e_dra.localupcluster`` logger.
"""

from __future__ import annotations

import logging

Log = logging.Logger

DEFAULT_LOGGER = "e2e_dra.localupcluster"

LOG_TAIL_LINES = 25
"""How many last lines of a process's log an error quotes: enough to show why it failed."""


def engine_log(log: Log | None) -> Log:
    """The logger to use: the user's, or the engine's own."""
    return log if log is not None else logging.getLogger(DEFAULT_LOGGER)
