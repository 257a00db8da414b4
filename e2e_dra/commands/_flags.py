"""The rules every command's flags follow, in one place: paths, numbers and names are checked when
the command line is read, before anything runs, and a value that cannot be used stops the command
with one line naming the flag, the value and what to give instead. A path or a name is a
malformed value (exit status 3, as the same value in a variable would be); a number that is not
one or lies outside its bounds is a usage mistake (exit status 2, the usage line argparse writes
for its own ``type=int``), since the bounds are part of the flag's usage, said in its ``--help``.

- A path flag (:class:`PathFlag`) is read as its variable is (:func:`e2e_dra.settings.path`, or
  :func:`~e2e_dra.settings.directory` for a directory of ours): ``~`` expanded, and an empty one
  refused rather than read as the current directory (a socket, a CDI spec or a log written
  wherever the command was started).
- A size or count (:class:`NumberFlag`) has a lower and an upper bound: a value pasted by mistake
  (``--num-devices 1000000000``) is refused at once instead of filling the memory.
- A Kubernetes name (:class:`NameFlag`) is what the API server would accept; a driver name
  becomes a directory under ``--datadir``, so ``..`` or ``/`` in it would put sockets elsewhere.

They are argparse actions, not ``type=`` functions: argparse turns a ``type=`` function's error
into "invalid value" with exit status 2 and drops our message and advice.
"""

from __future__ import annotations

import abc
import argparse
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from e2e_dra.errors import InputError
from e2e_dra.settings import parsed
from e2e_dra.settings import path as a_path


class _CheckedFlag(argparse.Action, abc.ABC):
    """A flag whose value :meth:`check` turns into what the command gets, or refuses in one
    line naming the flag (``flag``: as the user wrote it)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, self.check(str(values), _flag(self, option_string)))

    @abc.abstractmethod
    def check(self, text: str, flag: str) -> Any:
        """The value the command gets for ``text``; an InputError naming ``flag`` if none."""


class PathFlag(_CheckedFlag):
    """A path flag, parsed with ``parse`` (default: :func:`e2e_dra.settings.path`)."""

    def __init__(self, *args: Any, parse: Callable[[str], Path] = a_path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parse = parse

    def check(self, text: str, flag: str) -> Path:
        return parsed(self.parse, text, flag)


class NumberFlag(_CheckedFlag):
    """A whole number (or, with ``real=True``, a decimal one) from ``low`` to ``high``; ``unit``
    names what is counted, for the message. Refused as usage (exit status 2, through the parser's
    own one-line error), as argparse refuses ``--count x`` for ``type=int``: ``--num-devices -1``
    is the same kind of mistake as ``--num-devices x``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        try:
            super().__call__(parser, namespace, values, option_string)
        except InputError as exc:
            parser.error(str(exc))

    def __init__(
        self,
        *args: Any,
        low: float,
        high: float,
        real: bool = False,
        unit: str = "",
        why: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.low, self.high, self.real, self.unit, self.why = low, high, real, unit, why

    def check(self, text: str, flag: str) -> float:
        kind = "a number" if self.real else "a whole number"
        bounds = f"from {_shown(self.low)} to {_shown(self.high)}{self.unit}"
        try:
            value: float = float(text.strip()) if self.real else int(text.strip(), 10)
        except ValueError:
            raise InputError(f"{flag} {text!r} is not {kind}; give one {bounds}") from None
        if not (math.isfinite(value) and self.low <= value <= self.high):
            why = f" ({self.why})" if self.why and value > self.high else ""
            raise InputError(f"{flag} {text!r} is out of range{why}; give {kind} {bounds}")
        return value


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class NameFlag(_CheckedFlag):
    """A Kubernetes name: a DNS subdomain (at most 253 characters), or with ``label=True`` a DNS
    label (at most 63), as the API server checks them."""

    def __init__(self, *args: Any, label: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.label = label

    def check(self, text: str, flag: str) -> str:
        pattern, longest = (_DNS_LABEL, 63) if self.label else (_DNS_SUBDOMAIN, 253)
        what = "DNS label" if self.label else "DNS subdomain"
        if not text or len(text) > longest or not pattern.fullmatch(text):
            raise InputError(
                f"{flag} {text!r} is not a Kubernetes name; give a {what} of at most "
                f"{longest} characters: lower-case letters, digits, '-'"
                f"{'' if self.label else ' and dots'} (e.g. {self.default or 'node-1'})"
            )
        return text


def _flag(action: argparse.Action, option_string: str | None) -> str:
    return option_string or "/".join(action.option_strings) or action.dest


def _shown(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)
