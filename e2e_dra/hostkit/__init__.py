"""What every layer needs of this host: files that are old or new but never half-written, waits
with a deadline, tear-downs that try every step, one place that handles Ctrl-C and SIGTERM, and
one rule that keeps credentials out of the URLs a message shows.

Configs read by daemons, CDI specs read by the container runtime, PID files, ledgers, cache
markers and run summaries are all read by someone else at any moment, or after a crash of ours; a
reader must see the old file or the new one. And the suite, the driver, the node runtime, the
engine and the process supervisor all wait for something on this host with a deadline, and all of
them stop things in steps where one failure must not strand the rest. One copy of each, here: this
package sits below everything of ours, imports nothing of it, and the standalone engine and
supervisor may use it too. (It lives under ``e2e_dra`` so that it cannot clash with the PyPI
project named ``hostkit``.)
"""

from e2e_dra.hostkit._atomic import (
    atomic_copy,
    atomic_copy_tail,
    atomic_write_text,
    write_if_changed,
)
from e2e_dra.hostkit._attempts import Attempt, Attempts, NotTried, Teardown
from e2e_dra.hostkit._interrupts import handling_interrupts, join_all, on_interrupt
from e2e_dra.hostkit._poll import Polled, poll
from e2e_dra.hostkit._redact import redact

__all__ = [
    "Attempt",
    "Attempts",
    "NotTried",
    "Polled",
    "Teardown",
    "atomic_copy",
    "atomic_copy_tail",
    "atomic_write_text",
    "handling_interrupts",
    "join_all",
    "on_interrupt",
    "poll",
    "redact",
    "write_if_changed",
]
