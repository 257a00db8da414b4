"""Asking a program a short question (``--version``, a workspace-status script) and reading its
answer within bounds.

What such a program prints is outside input: it may be huge, not UTF-8, never end, or leave a
background child holding its output open. So the answer is read from both pipes by threads that
keep at most ``limit`` bytes of each (the rest is read and dropped, so the program never blocks),
the program gets ``timeout`` seconds, and when it has ended, whatever it left in its process group
is killed, which closes the pipes. An interrupt (Ctrl-C, SIGTERM as an exception) kills the group
too before it propagates. The answer is decoded with replacement characters, never an error.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from e2e_dra.supervise._process import ProcessError

ANSWER_LIMIT = 64 * 1024
"""Bytes kept of each stream: far more than any version line or workspace status."""
_READ = 64 * 1024
_DRAIN_PATIENCE = 5.0  # seconds the readers get to see EOF once the group is gone


@dataclass(frozen=True)
class Answer:
    """What a program said: its exit status and its output, each cut at the limit."""

    returncode: int
    stdout: str
    stderr: str
    truncated: bool  # one of the streams said more than the limit; the rest was dropped


def ask(
    name: str,
    argv: Sequence[str],
    *,
    timeout: float = 30.0,
    limit: int = ANSWER_LIMIT,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Answer:
    """Run ``argv`` with no input, in a session of its own, and return its bounded answer.

    Raises :class:`ProcessError` (one line naming ``name``) when it cannot start or does not
    end within ``timeout`` seconds; either way nothing of it is left running.
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    except OSError as exc:
        raise ProcessError(f"cannot run {name}: {exc.strerror or exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    over: list[str] = []
    readers = [
        threading.Thread(target=_keep, args=(stream, kept[key], limit, over, key), daemon=True)
        for key, stream in (("stdout", proc.stdout), ("stderr", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ProcessError(f"{name} did not answer within {timeout:g}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        _kill_group(proc)  # a background child that still holds the pipes
        for reader in readers:
            reader.join(timeout=_DRAIN_PATIENCE)
    return Answer(
        returncode=returncode,
        stdout=kept["stdout"].decode(errors="replace"),
        stderr=kept["stderr"].decode(errors="replace"),
        truncated=bool(over),
    )


def _keep(stream: IO[bytes], into: bytearray, limit: int, over: list[str], key: str) -> None:
    with stream:
        # Popen's pipes are io.BufferedReader (read1: what is there, without waiting for a full
        # buffer); typeshed types them as IO[bytes], which has no read1
        while chunk := stream.read1(_READ):  # type: ignore[attr-defined]
            room = limit - len(into)
            if len(chunk) > room:
                over.append(key)
            into += chunk[: max(room, 0)]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_DRAIN_PATIENCE)
