"""One process supervisor for everything e2e-dra starts: cluster components, node runtime daemons
and Go builds.

Each of them must be stoppable as a whole: a component under ``sudo``, a daemon's helpers and a
build's compilers are children of the process we started, and killing only that process would
leave them holding ports, directories or CPU. So every process starts in its own process group
(or session), logs to a file, and is stopped by signalling its whole group. A process started by an
earlier run is found again by its pid *and* start time, so a reused pid is never signalled.

This package stands alone, below everything of ours but ``e2e_dra.hostkit`` (its waits): the node
runtime and the builds sit below the cluster engine, which imports nothing of e2e-dra but these
two, and all three use it. (It lives under ``e2e_dra`` so that it cannot clash with the PyPI
project named ``supervise``.)
"""

from e2e_dra.supervise._ask import ANSWER_LIMIT, Answer, ask
from e2e_dra.supervise._identity import ProcessId, group_members, start_ticks, terminate
from e2e_dra.supervise._process import Finished, Process, ProcessError, describe_exit, run

__all__ = [
    "ANSWER_LIMIT",
    "Answer",
    "Finished",
    "Process",
    "ProcessError",
    "ProcessId",
    "ask",
    "describe_exit",
    "group_members",
    "run",
    "start_ticks",
    "terminate",
]
