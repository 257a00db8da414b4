"""Replacing a file whole: written into a temporary sibling, then renamed over it.

``rename(2)`` within one directory is atomic, so a reader (the container runtime scanning its CDI
directory, containerd reading its config, the next run reading a PID file or a ledger) sees the
old file or the new one, never part of either. The temporary file is created in the target's
directory (a rename cannot cross file systems), named ``.<name>.<random>.tmp`` (hidden, and no
``*.json`` a directory scanner would pick up), and removed again when anything fails.

It is created with mode 0666 less the umask, as ``open()`` would create the target, so a file
replaced here has the mode a plain write would give it unless ``mode`` says otherwise (not
``tempfile.mkstemp``'s 0600: a ledger other users read must stay readable). Nothing is fsynced:
this guards against a crash of the process, not of the host; what must survive a power loss
checks its content when read (the cache records every file's digest).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def atomic_write_text(
    path: Path, text: str, *, mode: int | None = None, encoding: str = "utf-8"
) -> None:
    """Replace ``path`` with ``text`` (its directory must exist); ``mode``: its permission bits."""
    with _replacing(path, mode) as out:
        out.write(text.encode(encoding))


def atomic_copy(source: Path, path: Path) -> None:
    """Replace ``path`` with a copy of ``source``, its permission bits and times (as
    ``shutil.copy2``, but never a half-copied executable under the target's name)."""
    with open(source, "rb") as src:
        info = os.fstat(src.fileno())
        with _replacing(path, info.st_mode & 0o7777) as out:
            shutil.copyfileobj(src, out)
            out.flush()
            os.utime(out.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))


def atomic_copy_tail(source: Path, path: Path, *, since: int = 0, limit: int) -> int:
    """Replace ``path`` with what ``source`` holds from offset ``since`` on, but at most its last
    ``limit`` bytes (a log that keeps growing); returns the offset it copied up to. A source
    shorter than ``since`` was rotated or truncated: then all of it counts."""
    with open(source, "rb") as src:
        end = os.fstat(src.fileno()).st_size
        start = since if since <= end else 0
        src.seek(max(start, end - limit))
        with _replacing(path, None) as out:
            left = end - src.tell()
            while left > 0:
                chunk = src.read(min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
    return end


def write_if_changed(path: Path, text: str) -> bool:
    """Replace ``path`` with ``text`` unless it holds that already, creating its directory; True
    when it changed (a daemon reading it must then restart)."""
    try:
        if path.read_bytes() == text.encode():
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return True


@contextlib.contextmanager
def _replacing(path: Path, mode: int | None) -> Iterator[BinaryIO]:
    """A new temporary sibling of ``path`` open for writing; renamed over ``path`` when the block
    ends, removed when it raises.

    An OSError of the temporary file (or of a write, which names no file) names ``path``: the
    temporary name is ours, gone once this fails, and the user asked for ``path`` (a full disk
    while writing ``report.html`` says ``report.html``, not ``.report.html.1a2b3c4d.tmp``)."""
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise _naming(exc, tmp, path) from None
    try:
        with open(fd, "wb") as out:
            yield out
            if mode is not None:
                os.fchmod(out.fileno(), mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming(exc, tmp, path) from None
        raise


def _naming(exc: OSError, tmp: Path, path: Path) -> OSError:
    """``exc`` naming ``path`` where it named ``tmp`` or nothing (an error of another file, such
    as the source of a copy, is left as it is)."""
    if exc.filename is not None and os.fspath(exc.filename) != os.fspath(tmp):
        return exc
    renamed = OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))  # the errno's subclass
    renamed.__traceback__ = exc.__traceback__
    return renamed
