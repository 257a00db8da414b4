"""Moving one large file over HTTP: resumable, retried, with a progress display.

A transfer that drops continues from the bytes already on disk with a ``Range`` request, in this
run's next attempt or in the next run; a server that ignores ``Range`` (answers 200) simply sends
the whole file again, which is written from the start.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from e2e_dra._console import console, fancy, say
from e2e_dra.releases._http import TRANSIENT_STATUS, TransientStatus, status_error, with_retries

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def download(client: httpx.Client, url: str, part: Path) -> None:
    """Stream ``url`` into ``part``, continuing what is there with a Range request."""
    name = url.rsplit("/", 1)[1]
    with _progress(name) as meter:

        def attempt() -> None:
            offset = part.stat().st_size if part.exists() else 0
            headers = {"Accept-Encoding": "identity"}
            if offset:
                headers["Range"] = f"bytes={offset}-"
            with client.stream("GET", url, headers=headers) as response:
                mode, total = _continue_or_restart(url, response, offset, part)
                meter.restart(0 if mode == "wb" else offset, total)
                with open(part, mode) as out:
                    for chunk in response.iter_raw():  # unbuffered: a drop loses nothing received
                        out.write(chunk)
                        meter.advance(len(chunk))
            if total is not None and part.stat().st_size != total:
                raise httpx.ReadError(f"{url}: got {part.stat().st_size} of {total} bytes")

        with_retries(url, attempt)


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
        return "wb", int(length) if length and length.isdigit() else None
    if response.status_code == 416 and offset:  # the partial file is not a prefix of this one
        part.unlink()
        raise TransientStatus(url, response)
    if response.status_code in TRANSIENT_STATUS:
        raise TransientStatus(url, response)
    raise status_error(url, response)


class _Meter:
    """Bytes of one transfer so far, mirrored on a rich bar when there is one."""

    def __init__(self, bar: Progress | None = None, task: TaskID | None = None) -> None:
        self.done = 0
        self._bar, self._task = bar, task

    def restart(self, at: int, total: int | None) -> None:
        """A new attempt: ``at`` bytes are already on disk (0 when starting over)."""
        self.done = at
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=total, completed=at)

    def advance(self, count: int) -> None:
        self.done += count
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, count)


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
            meter = _Meter(bar, bar.add_task(f"downloading {name}", total=None))
            yield meter
    else:
        say(f"downloading {name}")
        meter = _Meter()
        yield meter
    seconds = max(time.monotonic() - started, 1e-6)
    megabytes = meter.done / 1e6
    say(f"downloaded {name}: {megabytes:.1f} MB in {seconds:.1f}s ({megabytes / seconds:.0f} MB/s)")
