"""The one exception type users see.

Every failure that is the user's to fix (bad input, a missing tool, an unreachable mirror) is raised
as an :class:`E2EDRAError` whose message is a single line naming the input or the thing that failed.
The CLI prints that line and exits non-zero; tracebacks are for our bugs only.
"""

from __future__ import annotations


class E2EDRAError(Exception):
    """A failure with a message that tells the user what to do."""


class VersionError(E2EDRAError, ValueError):
    """A version string that Kubernetes would not produce, or one with no previous minor."""


class ReleaseError(E2EDRAError):
    """A release could not be resolved, fetched, verified or unpacked."""


class ProvisionError(E2EDRAError):
    """A part of the node runtime is missing and could not be installed."""


class ExecError(E2EDRAError):
    """A command in a container ran and failed, or did not finish (no restart explains that)."""
