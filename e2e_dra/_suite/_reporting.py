"""Where the run is, for the person watching: a live status line on a terminal, lines in CI.

pytest captures what tests print, so progress written the ordinary way would only show up after a
test ends. On a terminal the status line goes straight to the controlling tty (capture does not
touch it); otherwise each line goes through pytest's terminal reporter with capture suspended,
which is also what CI logs keep.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import IO, Any


class LiveView:
    """``activity()`` frames a step or phase; ``say()`` tells what it is waiting for now."""

    def __init__(self, write_line: Callable[[str], None], *, fancy: bool) -> None:
        self._write_line = write_line
        self._tty: IO[str] | None = None
        self._console: Any = None
        self._status: Any = None
        self._activity = ""
        self._started = 0.0
        if fancy:
            self._open_tty()

    def _open_tty(self) -> None:
        from rich.console import Console

        try:
            self._tty = open("/dev/tty", "w")  # noqa: SIM115 -- kept open for the whole run
        except OSError:
            return
        self._console = Console(file=self._tty, highlight=False)

    @contextlib.contextmanager
    def activity(self, text: str) -> Iterator[None]:
        self._activity, self._started = text, time.monotonic()
        if self._console is None:
            self._write_line(f"e2e-dra: {text}")
            yield
            return
        self._status = self._console.status(f"[bold]{text}[/]")
        self._status.start()
        try:
            yield
        finally:
            self._status.stop()
            self._status = None

    def say(self, text: str) -> None:
        """Show ``text`` live, and print it too: a failed test's report shows what it printed."""
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)
        if self._status is not None:
            elapsed = time.monotonic() - self._started
            self._status.update(f"[bold]{self._activity}[/] ({elapsed:.0f}s): {text}")
        else:
            self._write_line(f"e2e-dra: {text}")

    def close(self) -> None:
        if self._tty is not None:
            self._tty.close()
            self._tty = None
            self._console = None
