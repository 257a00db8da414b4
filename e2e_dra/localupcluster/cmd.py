"""One cluster component (or helper command): a supervised process whose errors are the engine's.

Components are often wrapped in ``sudo``; killing only the wrapper would orphan the component,
which keeps holding its ports. The supervisor (``e2e_dra.supervise``, shared with the node runtime's
daemons and the Go builds) starts every command in its own process group and stops it by
signalling the whole group (SIGKILL like upstream, optionally after a SIGTERM grace period).
"""

from __future__ import annotations

from typing import ClassVar

from e2e_dra.localupcluster._errors import ClusterError
from e2e_dra.supervise import Process


class Cmd(Process):
    """A process in its own process group (not its own session: it stays ours to stop, and a
    Ctrl-C on our terminal reaches only the foreground group, which is not it); see
    :class:`e2e_dra.supervise.Process`."""

    error: ClassVar[type[Exception]] = ClusterError
