"""Ctrl-C and SIGTERM, handled in one place: the program's edge.

A program installs the handlers once, where it starts (:func:`handling_interrupts`: the command
line, the pytest plugin, a script). A library that must stop something at once when the program
is interrupted (the engine's cluster processes) only says what (:func:`on_interrupt`) and
installs no handler of its own, so two libraries cannot fight over a signal.

On a signal, every registered stop runs first (the newest first; one that fails does not keep
the others from running), then the program ends as its edge chose: Ctrl-C raises
KeyboardInterrupt where the program is; SIGTERM raises the edge's ``terminated`` exception (so
it unwinds exactly as after Ctrl-C), or with ``terminated=None`` the process dies of the signal
as it would have without us. The registered stops also run when the interpreter exits.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

Stop = Callable[[str], None]
"""What to do when the program is interrupted; gets why ("SIGTERM", "interpreter exit")."""

_stops: dict[int, Stop] = {}
_keys = itertools.count()
_lock = threading.Lock()


def on_interrupt(stop: Stop) -> Callable[[], None]:
    """Run ``stop(why)`` when the program is interrupted or exits; returns what cancels that."""
    key = next(_keys)
    with _lock:
        _stops[key] = stop

    def cancel() -> None:
        with _lock:
            _stops.pop(key, None)

    return cancel


def run_stops(why: str) -> None:
    """Run (and forget) every registered stop, newest first."""
    with _lock:
        stops = [_stops.pop(key) for key in sorted(_stops, reverse=True)]
    for stop in stops:
        try:
            stop(why)
        except Exception as exc:  # one stop that fails must not strand the others
            print(f"stopping after {why} failed: {exc}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def handling_interrupts(
    *, terminated: type[BaseException] | None = KeyboardInterrupt
) -> Iterator[None]:
    """SIGINT and SIGTERM run the registered stops, then end the program (see the module).

    Only the main thread can install handlers; elsewhere this does nothing. The handlers of
    before are back when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        why = signal.Signals(signum).name
        run_stops(why)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt(why)
        if terminated is not None:
            raise terminated(why)
        signal.signal(signum, signal.SIG_DFL)  # die of it, as without us
        signal.raise_signal(signum)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


atexit.register(run_stops, "interpreter exit")
