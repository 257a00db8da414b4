"""A summary file read and parsed, and nothing else: bounded, a regular file, UTF-8 JSON whose
objects name each key once. What it holds is checked in ``_load``."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from e2e_dra.errors import LocalError, describe_os_error
from e2e_dra.report._limits import MAX_SUMMARY_BYTES, SummaryError

FIX = "fix that file or leave its folder out of the report"


def read_summary(path: Path) -> bytes:
    """At most :data:`MAX_SUMMARY_BYTES` of ``path``, a regular file (a FIFO would block)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise SummaryError(f"{path}: is a directory, not a summary.json; remove it")
            if not stat.S_ISREG(mode):
                raise SummaryError(
                    f"{path}: is not a regular file (a FIFO, socket or device); {FIX}"
                )
            data = file.read(MAX_SUMMARY_BYTES + 1)
    except FileNotFoundError:
        raise SummaryError(f"{path}: no such file; check the folder") from None
    except IsADirectoryError:
        raise SummaryError(f"{path}: is a directory, not a summary.json; remove it") from None
    except OSError as exc:
        raise LocalError(describe_os_error(exc, path)) from None
    if len(data) > MAX_SUMMARY_BYTES:
        limit = MAX_SUMMARY_BYTES // (1024 * 1024)
        raise SummaryError(f"{path}: larger than {limit} MiB, not a summary of e2e-dra; {FIX}")
    return data


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; one naming a key twice is refused (readers disagree on which one wins)."""
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return made


def _integer(text: str) -> int | float:
    """A JSON integer; one of more digits than any field's range is infinite, which every
    number's check refuses (``int()`` would refuse it with a ValueError of its own)."""
    return int(text) if len(text) <= 20 else float(text)


def parse_json(path: Path, data: bytes) -> Any:
    """``data`` as JSON: each failure one :class:`SummaryError` naming ``path`` and the way out."""
    try:
        return json.loads(data.decode("utf-8"), parse_int=_integer, object_pairs_hook=_object)
    except UnicodeDecodeError:
        raise SummaryError(f"{path}: not UTF-8 text; {FIX}") from None
    except json.JSONDecodeError as exc:
        raise SummaryError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); {FIX}") from None
    except RecursionError:
        raise SummaryError(f"{path}: JSON nested too deeply; {FIX}") from None
    except _DuplicateKey as exc:
        key = exc.key[:80]
        raise SummaryError(f"{path}: the key {key!r} is given twice in one object; {FIX}") from None
