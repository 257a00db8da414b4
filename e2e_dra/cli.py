"""``e2e-dra``: the entry point (``python -m e2e_dra.cli``, the ``e2e-dra`` script).

It imports nothing heavy itself: the commands (:mod:`e2e_dra.commands._main`) take a few tenths of
a second to import, and a Ctrl-C or SIGTERM in that time ends as every other does, one line and
130 or 143, not a traceback of importlib. A signal that arrives after the command has decided its
exit status (while the interpreter shuts down) is ignored: the status stands.

The standard streams are settled first, for everything after, including that line
(:func:`e2e_dra._console.standard_streams`: a closed stdout or stderr, a pipe whose reader left).
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Sequence

from e2e_dra._console import standard_streams  # light: the standard library and our settings
from e2e_dra.hostkit import handling_interrupts  # light: what every layer needs, nothing else

PROG = "e2e-dra"
_EXIT_INTERRUPTED = 130  # e2e_dra.errors.EXIT_INTERRUPTED, not imported: start-up stays light
_EXIT_TERMINATED = 143  # e2e_dra.errors.EXIT_TERMINATED


class _TerminatedEarly(KeyboardInterrupt):
    """SIGTERM while the commands are imported."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``e2e-dra`` with ``argv`` (None: the command line, as the program itself)."""
    with standard_streams():
        try:
            with handling_interrupts(terminated=_TerminatedEarly):
                from e2e_dra.commands._main import main as run
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, _TerminatedEarly)
            what = "terminated (SIGTERM)" if terminated else "interrupted"
            with contextlib.suppress(OSError):
                print(f"{PROG}: error: {what}", file=sys.stderr, flush=True)
            return _decided(argv, _EXIT_TERMINATED if terminated else _EXIT_INTERRUPTED)
        return _decided(argv, run(argv))


def _decided(argv: Sequence[str] | None, status: int) -> int:
    """``status``; as the program (``argv`` None), a signal from now on must not replace it."""
    if argv is None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return status


if __name__ == "__main__":
    sys.exit(main())
