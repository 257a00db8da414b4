"""Moving one large file over HTTP: resumable, retried, with a progress display.

A transfer that drops continues from the bytes already on disk with a ``Range`` request, in this
run's next attempt or in the next run; a server that ignores ``Range`` (answers 200) simply sends
the whole file again, which is written from the start.

The partial file is opened once per attempt, without following a link (a link planted in its place
is removed: :func:`e2e_dra._cache.open_nofollow`), so its size, the Range asked for and the bytes
appended all concern the same file, inside the cache. What is resumed is never trusted: the caller
checks the digest of the whole file, old bytes and new, and starts afresh when it differs.

The status and headers must arrive within :data:`~e2e_dra.releases._http.HEADERS_WAIT` (and the
budget), every read of the body within what is left of the budget (a wall-clock deadline on every
socket operation, :func:`~e2e_dra.releases._http.deadline`), and every chunk is checked against the
fetch's :class:`~e2e_dra.releases._http.Budget`: past the overall deadline, or slower than the
minimum speed over a whole window, the transfer stops with one line saying so (the bytes received
stay on disk for the next run). Where no live bar can be drawn (CI logs, a pipe) a plain progress
line is printed every ``E2E_DRA_PROGRESS_EVERY`` seconds (default 10), so a slow download is visible
while it happens, not only when it ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from e2e_dra._cache import open_nofollow
from e2e_dra._console import console, fancy
from e2e_dra.hostkit import redact
from e2e_dra.releases._http import (
    HEADERS_WAIT,
    MIN_SPEED_ENV,
    TRANSIENT_STATUS,
    Budget,
    TooSlow,
    TransientStatus,
    deadline,
    file_name,
    status_error,
    with_retries,
)
from e2e_dra.settings import settings

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def download(client: httpx.Client, url: str, part: Path, budget: Budget | None = None) -> bool:
    """Stream ``url`` into ``part``, continuing what is there with a Range request; True when
    some of what ``part`` holds now was there before an attempt (it was resumed), so that the
    caller knows a digest that fails may be the old bytes' fault."""
    name = file_name(url)
    budget = budget or Budget()
    resumed = False
    with _progress(name) as meter:

        def attempt() -> None:
            nonlocal resumed
            budget.check(url)
            fd = open_nofollow(part, os.O_RDWR | os.O_CREAT)
            with open(fd, "r+b", buffering=0) as out, deadline(budget.remaining()):
                offset = os.fstat(fd).st_size
                headers = {"Accept-Encoding": "identity"}
                if offset:
                    headers["Range"] = f"bytes={offset}-"
                request = client.build_request(
                    "GET", url, headers=headers, timeout=budget.timeout()
                )
                with deadline(HEADERS_WAIT):
                    response = client.send(request, stream=True)
                try:
                    mode, total = _continue_or_restart(url, response, offset, part)
                    if mode == "wb":
                        out.truncate(0)
                    else:
                        resumed = True
                    out.seek(0, os.SEEK_END)
                    meter.restart(0 if mode == "wb" else offset, total)
                    speed = _SpeedCheck(url, budget)
                    for chunk in response.iter_raw():  # unbuffered: a drop loses nothing received
                        out.write(chunk)
                        meter.advance(len(chunk))
                        budget.check(url)
                        speed.advance(len(chunk))
                finally:
                    response.close()
                size = os.fstat(fd).st_size
            if total is not None and size != total:
                raise httpx.ReadError(redact(f"{url}: got {size} of {total} bytes"))

        with_retries(url, attempt, budget)
    return resumed


class _SpeedCheck:
    """Fails a transfer whose average over the last ``budget.window`` seconds is too low."""

    def __init__(self, url: str, budget: Budget) -> None:
        self._url, self._budget = url, budget
        self._marks: list[tuple[float, int]] = [(time.monotonic(), 0)]
        self._total = 0

    def advance(self, count: int) -> None:
        if not self._budget.min_speed:
            return
        now = time.monotonic()
        self._total += count
        self._marks.append((now, self._total))
        window = self._budget.window
        while len(self._marks) > 2 and now - self._marks[1][0] >= window:
            self._marks.pop(0)  # keep the newest mark that is at least a window old first
        since, done = self._marks[0]
        if now - since >= window:
            rate = (self._total - done) / (now - since)
            if rate < self._budget.min_speed:
                raise TooSlow(
                    redact(
                        f"getting {self._url} is too slow: {rate / 1000:.1f} kB/s over the last "
                        f"{now - since:.0f}s, below the minimum of "
                        f"{self._budget.min_speed / 1000:.1f} kB/s; run again to continue (what "
                        f"arrived is kept), use a faster mirror (KUBERNETES_RELEASE_URL) or lower "
                        f"{MIN_SPEED_ENV} / --min-speed"
                    )
                )


def _continue_or_restart(
    url: str, response: httpx.Response, offset: int, part: Path
) -> tuple[str, int | None]:
    """How to write this response: append to the partial file, or start it over."""
    if response.status_code == 206 and offset:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
        if match and int(match[1]) == offset:
            return "ab", int(match[3]) if match[3] != "*" else None
        part.unlink()  # a range we did not ask for: start over on the next attempt
        raise TransientStatus(url, response)
    if response.status_code == 200:  # a server that ignores Range sends everything again
        length = response.headers.get("Content-Length")
        return "wb", int(length) if length and length.isdecimal() else None
    if response.status_code == 416 and offset:  # the partial file is not a prefix of this one
        part.unlink()
        raise TransientStatus(url, response)
    if response.status_code in TRANSIENT_STATUS:
        raise TransientStatus(url, response)
    raise status_error(url, response)


class _Meter:
    """Bytes of one transfer so far, mirrored on a rich bar when there is one."""

    def __init__(
        self,
        name: str,
        bar: Progress | None = None,
        task: TaskID | None = None,
        every: float = 0.0,
    ) -> None:
        self.done = 0
        self.total: int | None = None
        self._name = name
        self._bar, self._task = bar, task
        self._every = every
        self._started = self._last_line = time.monotonic()
        self._at_start = 0

    def restart(self, at: int, total: int | None) -> None:
        """A new attempt: ``at`` bytes are already on disk (0 when starting over)."""
        self.done, self.total = at, total
        self._at_start, self._started = at, time.monotonic()
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=total, completed=at)

    def advance(self, count: int) -> None:
        self.done += count
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, count)
        elif self._every:
            now = time.monotonic()
            if now - self._last_line >= self._every:
                self._last_line = now
                logger.info(self.line(now))

    def line(self, now: float) -> str:
        """``<name>: 120.0 of 600.0 MB (20%), 12.3 MB/s, ~39s left``: short, one per period."""
        rate = (self.done - self._at_start) / max(now - self._started, 1e-6)
        text = f"{self._name}: {self.done / 1e6:.1f}"
        if self.total:
            text += f" of {self.total / 1e6:.1f} MB ({100 * self.done // self.total}%)"
        else:
            text += " MB"
        text += f", {rate / 1e6:.2f} MB/s"
        if self.total and rate > 0:
            text += f", ~{(self.total - self.done) / rate:.0f}s left"
        return text


@contextlib.contextmanager
def _progress(name: str) -> Iterator[_Meter]:
    """A rich bar on a terminal; elsewhere a line when the transfer starts and when it ends."""
    started = time.monotonic()
    if fancy():
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console(), transient=True) as bar:
            meter = _Meter(name, bar, bar.add_task(f"downloading {name}", total=None))
            yield meter
    else:
        logger.info(f"downloading {name}")
        meter = _Meter(name, every=settings().progress_every)
        yield meter
    seconds = max(time.monotonic() - started, 1e-6)
    megabytes = meter.done / 1e6
    logger.info(
        f"downloaded {name}: {megabytes:.1f} MB in {seconds:.1f}s ({megabytes / seconds:.0f} MB/s)"
    )
