"""Ctrl-C and SIGTERM, handled in one place: the program's edge.

A program installs the handlers once, where it starts (:func:`handling_interrupts`: the command
line, the pytest plugin, a script). A library that must stop something at once when the program
is interrupted (the engine's cluster processes) only says what (:func:`on_interrupt`) and
installs no handler of its own, so two libraries cannot fight over a signal.

On a signal, every registered stop starts at once (the newest first; one that fails does not
keep the others from running), and the program ends as its edge chose: Ctrl-C raises
KeyboardInterrupt where the program is; SIGTERM raises the edge's ``terminated`` exception (so
it unwinds exactly as after Ctrl-C), or with ``terminated=None`` the process dies of the signal
as it would have without us, once the stops are done. The registered stops also run when the
interpreter exits.

The stops run in a thread of their own, never in the signal handler: the handler runs in the
main thread between any two of its bytecodes, maybe while it holds a lock (a log handler's, a
terminal writer's) that a stop needs too, and a stop run there would wait for it for ever. The
edge waits for that thread before it lets the program go on.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import signal
import sys
import threading
import time
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


STOPS_GRACE = 120.0
"""How long the program's edge waits for the stops after a signal before it goes on anyway."""


class _DyingOf(BaseException):
    """Unwinds to the edge, which then dies of the signal (``terminated=None``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def handling_interrupts(
    *, terminated: type[BaseException] | None = KeyboardInterrupt
) -> Iterator[None]:
    """SIGINT and SIGTERM start the registered stops, then end the program (see the module).

    Only the main thread can install handlers; elsewhere this does nothing. The handlers of
    before are back when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stoppers: list[threading.Thread] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        why = signal.Signals(signum).name
        stopper = threading.Thread(target=run_stops, args=(why,), name=f"stops after {why}")
        stopper.start()
        stoppers.append(stopper)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt(why)
        if terminated is not None:
            raise terminated(why)
        raise _DyingOf(signum)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except _DyingOf as dying:
        _wait_for(stoppers)  # before dying; the finally's wait then finds them ended
        signal.signal(dying.signum, signal.SIG_DFL)  # die of it, as without us
        signal.raise_signal(dying.signum)
    finally:
        _wait_for(stoppers)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def join_all(threads: list[threading.Thread]) -> None:
    """Wait for every thread, in short slices, so that Ctrl-C and SIGTERM still reach the main
    thread (a plain ``join()`` would hold them off until the thread ends)."""
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)


def _wait_for(stoppers: list[threading.Thread]) -> None:
    deadline = time.monotonic() + STOPS_GRACE
    for stopper in stoppers:
        stopper.join(max(0.0, deadline - time.monotonic()))
        if stopper.is_alive():
            print(f"{stopper.name}: still running after {STOPS_GRACE:.0f}s", file=sys.stderr)


atexit.register(run_stops, "interpreter exit")
