"""Progress lines on pytest's terminal while a suite runs: headlines by default, every line when
asked.

A main job's subtests log every object they create and delete, each driver's registration and
whole objects: shown live, that is thousands of lines among which the run's progress and its
failures are lost. By default the terminal shows the headlines (:mod:`._narrative`) and
warnings; ``-v`` (pytest's verbosity) or ``E2E_DRA_CONSOLE=detail`` shows every progress line, as
the suite's ``console.log`` keeps them in any case.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from e2e_dra._console import is_headline, is_progress
from e2e_dra._suite._narrative import REPLAYED, LineFormatter
from e2e_dra.settings import settings


def shows_detail(config: pytest.Config) -> bool:
    """Whether the terminal shows every progress line, not only the headlines: ``-v`` or
    ``E2E_DRA_CONSOLE=detail``."""
    return config.get_verbosity() > 0 or settings().console == "detail"


class LiveProgress(logging.Handler):
    """Progress records as ``[HH:MM:SS] message`` lines on the terminal, while a suite runs.

    Written through pytest's terminal writer with output capture suspended, as pytest's own
    live logging does, each on a line of its own (:func:`write_alone`); off when the user turned
    pytest's live logging on (they see it there).
    """

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(logging.INFO)
        self.config = config
        self.setFormatter(LineFormatter())
        self.addFilter(is_progress)
        self._write_lock = threading.Lock()

    @contextlib.contextmanager
    def shown(self) -> Iterator[None]:
        if self.config.getoption("log_cli_level", None) or self.config.getini("log_cli"):
            yield
            return
        detail = shows_detail(self.config)
        if not detail:
            self.addFilter(is_headline)
        root = logging.getLogger()
        root.addHandler(self)
        try:
            yield
        finally:
            root.removeHandler(self)
            self.removeFilter(is_headline)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, REPLAYED, False):  # shown live already
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        try:
            line = self.format(record)
            with self._write_lock:
                quiet = capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()
                with quiet:
                    write_alone(reporter, self.config.get_terminal_writer(), line)
        except Exception:  # a progress line must never fail a test
            self.handleError(record)


def write_alone(reporter: Any, writer: Any, line: str) -> None:
    """``line`` on pytest's terminal (``reporter``, its ``writer``), starting at its first column.

    pytest's own ``write_line`` ends the current line only after a file name it wrote (its
    ``currentfspath``), so the progress letters it writes after one of our lines (the test that
    logged it passed: ``.``) open a line it does not know of, and the next of ours would follow
    them (``....[2/4] gate-cycle``). The writer knows how much of its current line is written:
    the line is ended first when that is anything, and ours goes out in one write with its
    newline, so a letter pytest writes at the same moment cannot land between the two."""
    start = "\n" if reporter.currentfspath or writer.width_of_current_line else ""
    reporter.currentfspath = None  # pytest names the file again before its next letter
    writer.write(f"{start}{line}\n", flush=True)
