"""Known Kubernetes bugs: which one should break an entry, and whether a failure is that bug.

The suite runs a phase that a declared bug breaks on the releases running now, and expects it to
fail there (:class:`~e2e_dra.subtest.KnownBug`). Whether a failure is that bug is a decision on
plain values: the declarations, the entry, the releases, the failure with its notes and the step
it ended. :class:`KnownBugs` makes it, apart from the run that acts on it (containing the bug,
ending chains, recording), so that every rule can be tested without pytest or a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from e2e_dra._suite._steps import Entry
from e2e_dra.subtest import KnownBug

NET_NOTE = "e2e-dra: safety net: "
"""How a safety net's finding is noted on a failure that happened anyway."""


@dataclass(frozen=True)
class Expected:
    """A known bug expected to break an entry, how it is said with its releases, and the subtest
    that declares it (whose objects trigger it)."""

    bug: KnownBug
    said: str
    owner: str

    def not_this(self) -> str:
        """The note of a failure on the bug's releases that does not show its sign."""
        where = f" in a step named with {self.bug.during!r}" if self.bug.during else ""
        return (
            f"e2e-dra: {self.said} was expected to break this, but this failure does not show "
            f"its sign ({self.bug.sign!r}){where}: it is a failure of its own"
        )

    def not_seen(self, where: str) -> str:
        """Why an entry this bug should have broken fails when it passed instead: the
        declaration no longer says what happens, and must change."""
        return (
            f"{self.said} should have broken {where}, and it passed: if this release fixed it, "
            "narrow the declaration's releases; if not, the suite no longer sees it"
        )


@dataclass(frozen=True)
class Verdict:
    """How a failed entry counts: the bug expected to break it (if any), the line that shows
    its sign (None: the failure is not the bug's), what the safety nets found that the sign does
    not cover, and the step of the phase the failure ended.

    Expected only when the sign showed and nothing beside it did: a net finding the sign does
    not cover is a defect of its own, and a known bug must not hide it.
    """

    known: Expected | None
    seen: str | None
    beyond: tuple[str, ...]
    step: str | None
    message: str  # what JUnit, the page and a glance show

    @property
    def expected(self) -> bool:
        """The failure is the known bug's, and only its: an expected failure."""
        return self.known is not None and self.seen is not None and not self.beyond

    @property
    def showed(self) -> bool:
        """The bug's sign showed (expected or not): what the bug acts on must be contained. A
        sign matched on a blank line shows nothing to contain (as the run always read it)."""
        return bool(self.seen)


class KnownBugs:
    """The known bugs the subtests of one run declare, and the verdicts on their entries.

    ``subtests`` are the run's subtests by name (those with ``known_bugs`` declare some);
    ``planned`` names the subtests with a phase in the run, whose bugs may break a cluster step.
    """

    def __init__(self, subtests: Mapping[str, Any], planned: Iterable[str | None]) -> None:
        self.subtests = dict(subtests)
        self.planned = {name for name in planned if name is not None}

    def expected(
        self,
        entry: Entry,
        releases_now: Callable[[], Mapping[str, str]],
        ended: Collection[str] = (),
    ) -> Expected | None:
        """The known Kubernetes bug that should break ``entry`` on the releases running now: a
        phase's own subtest's, or for a cluster step, one that a planned subtest whose chain has
        not ``ended`` declares for it; None when no known bug breaks it here. ``releases_now``
        (component -> ``v1.36.2``) is asked only when a subtest declares a bug."""
        if entry.always:
            return None
        if entry.chain_position is not None:
            owners = [entry.subtest or ""]
        else:
            owners = sorted(self.planned - set(ended))
        declaring = [o for o in owners if getattr(self.subtests.get(o), "known_bugs", ())]
        if not declaring:
            return None
        releases = releases_now()
        for owner in declaring:
            bug = self.subtests[owner].known_bug(entry.name, releases)
            if bug is not None:
                return Expected(bug, bug.describe(releases), owner)
        return None

    @staticmethod
    def judge(
        known: Expected | None,
        failure: BaseException,
        collected: Sequence[str] = (),
        step: str | None = None,
    ) -> Verdict:
        """Whether ``failure`` is ``known``, the bug expected to break its entry (None when none
        is, or the failure cannot be a bug's: an interruption, the run's own "it passed").

        The sign is looked for in the failure's text, its notes and the lines ``collected`` for
        it, and only when the failure ended the step the bug breaks (``step``, its ``during``).
        A safety net's note (``NET_NOTE``) that the sign does not match is a finding beside the
        bug: with the sign shown, it fails the entry and the message names both."""
        notes = list(getattr(failure, "__notes__", ()))
        seen = None
        if known is not None and known.bug.breaks_step(step):
            seen = known.bug.seen_in("\n".join([str(failure), *notes, *collected]))
        beyond = tuple(
            line.removeprefix(NET_NOTE)
            for line in notes
            if line.startswith(NET_NOTE) and known is not None and not known.bug.seen_in(line)
        )
        expected = known is not None and seen is not None and not beyond
        said = known.said if known is not None else ""
        shown = (seen or "").removeprefix("e2e-dra: ")  # a note's line, as the others read
        message = f"{said}; seen as: {shown}" if expected else one_line(failure)
        if seen is not None and beyond:  # the bug showed, and something else broke too
            message = f"safety net: {beyond[0]} (beside {said}, which showed)"
        if step is not None:
            message = f"in step {step!r}: {message}"
        return Verdict(known, seen, beyond, step, message)


def one_line(exc: BaseException) -> str:
    """``exc`` as its type and first line: how a failure is named in a message or a note."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
