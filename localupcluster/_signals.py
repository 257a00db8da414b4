"""Stop the cluster when the run is interrupted (Ctrl-C, SIGTERM, interpreter exit).

The handler stops every component first and then hands the signal to whatever handler was there
before, so Ctrl-C still raises KeyboardInterrupt and a SIGTERM still ends the process -- but never
with a kube-* or etcd process left behind.
"""

from __future__ import annotations

import atexit
import signal
import threading
from collections.abc import Callable
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class InterruptGuard:
    def __init__(self, on_interrupt: Callable[[str], None]) -> None:
        self._on_interrupt = on_interrupt
        self._previous: dict[int, object] = {}
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        atexit.register(self._at_exit)
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed:
            return
        atexit.unregister(self._at_exit)
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._previous.items():
                if signal.getsignal(sig) == self._handle:
                    signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous.clear()
        self._installed = False

    def _at_exit(self) -> None:
        self._on_interrupt("interpreter exit")

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        try:
            self._on_interrupt(signal.Signals(signum).name)
        finally:  # whatever stopping met, the signal still ends the run as it would have
            self._deliver(signum, frame, previous)

    def _deliver(self, signum: int, frame: FrameType | None, previous: object) -> None:
        self.uninstall()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
