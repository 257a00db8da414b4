"""The engine's one exception type."""

from __future__ import annotations


class ClusterError(Exception):
    """The cluster could not be started or changed; the message (one line) names the component,
    its log or the input at fault, and what to do."""

    exit_status = 1
    """The exit status a command line ending with this error should have (a plain failure)."""
