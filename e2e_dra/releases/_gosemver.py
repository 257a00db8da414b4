"""Go module versions, compared as the go command compares them (``golang.org/x/mod/semver``).

Not PEP 440: ``v1.2.3-rc.1`` is a pre-release of ``v1.2.3`` whose identifiers compare one by one
(numeric ones as numbers, below any alphanumeric one; more identifiers sort after fewer), a
pseudo-version such as ``v0.0.0-20240101000000-abcdef123456`` is a pre-release of the version it
names, and build metadata (``+incompatible``) takes no part in the order. ``v1`` and ``v1.2`` are
shorthands for ``v1.0.0`` and ``v1.2.0``. Anything else (no leading ``v``, leading zeros, empty
identifiers) is not a version: :func:`parse` says None, and :func:`compare` puts it below every
valid one, as Go does.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_NUMBER = r"(?:0|[1-9][0-9]*)"
_IDENTIFIER = r"[0-9A-Za-z-]+"
_VERSION = re.compile(
    rf"v(?P<major>{_NUMBER})(?:\.(?P<minor>{_NUMBER})(?:\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_IDENTIFIER}(?:\.{_IDENTIFIER})*))?"
    rf"(?:\+(?P<build>{_IDENTIFIER}(?:\.{_IDENTIFIER})*))?)?)?"
)
_NUMERIC = re.compile(r"[0-9]+")
_PSEUDO = re.compile(r"(?:.*[-.])?[0-9]{14}-[0-9A-Za-z]+")
"""The tail of a pseudo-version's pre-release: ``yyyymmddhhmmss-commit``."""


@functools.total_ordering
@dataclass(frozen=True)
class GoVersion:
    """A valid Go module version; ordered as ``semver.Compare`` orders them."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...]
    build: str
    text: str

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def is_pseudo(self) -> bool:
        """``v0.0.0-20240101000000-abcdef123456`` and the like: a commit, not a tag."""
        return bool(self.prerelease) and _PSEUDO.fullmatch(".".join(self.prerelease)) is not None

    def _key(self) -> tuple[int, int, int]:
        return self.major, self.minor, self.patch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GoVersion):
            return NotImplemented
        return self._key() == other._key() and self.prerelease == other.prerelease

    def __hash__(self) -> int:
        return hash((self._key(), self.prerelease))

    def __lt__(self, other: GoVersion) -> bool:
        if self._key() != other._key():
            return self._key() < other._key()
        return _prerelease_below(self.prerelease, other.prerelease)

    def __str__(self) -> str:
        return self.text


def parse(text: str) -> GoVersion | None:
    """The Go module version ``text``, or None when Go would not take it for one."""
    match = _VERSION.fullmatch(text)
    if match is None:
        return None
    pre = match["pre"]
    identifiers = tuple(pre.split(".")) if pre else ()
    if any(_NUMERIC.fullmatch(i) and len(i) > 1 and i[0] == "0" for i in identifiers):
        return None  # a numeric identifier with a leading zero
    return GoVersion(
        major=int(match["major"]),
        minor=int(match["minor"] or 0),
        patch=int(match["patch"] or 0),
        prerelease=identifiers,
        build=match["build"] or "",
        text=text,
    )


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as ``a`` sorts below, with or above ``b``; an invalid version sorts below
    every valid one and equal to another invalid one (``semver.Compare``)."""
    first, second = parse(a), parse(b)
    if first is None or second is None:
        return (first is not None) - (second is not None)
    return (first > second) - (first < second)


def _prerelease_below(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Semantic Versioning 2.0.0, rule 11: a release is above all of its pre-releases."""
    if a == b:
        return False
    if not a or not b:
        return bool(a)  # only a pre-release sorts below the other
    for x, y in zip(a, b, strict=False):
        if x == y:
            continue
        x_numeric, y_numeric = _NUMERIC.fullmatch(x), _NUMERIC.fullmatch(y)
        if x_numeric and y_numeric:
            return int(x) < int(y)
        if x_numeric or y_numeric:
            return bool(x_numeric)  # numeric identifiers sort below alphanumeric ones
        return x < y  # ASCII order
    return len(a) < len(b)
