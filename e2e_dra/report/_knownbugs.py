"""Which known Kubernetes bug an expected failure (``xfailed``) is, read from its message.

A subtest declares the Kubernetes bugs that break it on some releases; such a phase must fail, and
its summary entry ends ``xfailed`` with a message the suite writes as ``known Kubernetes bug
kubernetes#<n> (<component> <release>): <what> (<url>); seen as: ...``. The report shows these
apart from real failures (a reader of a red run looks for what broke, not for what was expected to),
and links each to its upstream issue.

The upstream link is made here from the issue's number alone (``kubernetes/kubernetes`` issues),
never taken from the summary's text: it is the one kind of link of the page that leaves the
artifacts, and a summary cannot choose where it leads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from e2e_dra.report._load import Result

KUBERNETES_ISSUES = "https://github.com/kubernetes/kubernetes/issues/"
"""Where a known bug's issue lives (``e2e_dra.subtest.KUBERNETES_ISSUES``; a test keeps the two
in step, since this layer may not import that one)."""

_NAMED = re.compile(r"known Kubernetes bug kubernetes#(\d{1,9})(?: \(([^()]{0,200})\))?")
_WHAT = re.compile(r"\): (.{1,1000}?) \(https://github\.com/kubernetes/kubernetes/\w+/\d+\)")


@dataclass(frozen=True)
class KnownBug:
    """A known Kubernetes bug as an expected failure names it; ``number`` None: its message
    names none (a summary of an older e2e-dra, or one written by hand)."""

    number: int | None
    where: str = ""  # the component and its release: "kube-controller-manager v1.37.2"
    what: str = ""  # what goes wrong, in one line

    @property
    def name(self) -> str:
        return f"kubernetes#{self.number}" if self.number is not None else "a known bug, not named"

    @property
    def url(self) -> str | None:
        """The bug's upstream issue, made from its number; None when it has none."""
        return f"{KUBERNETES_ISSUES}{self.number}" if self.number is not None else None


def known_bug(result: Result) -> KnownBug | None:
    """The known bug ``result`` failed on, or None when it is not an expected failure."""
    if result.outcome != "xfailed":
        return None
    return named_bug(result.message) or KnownBug(None)


def named_bug(message: str) -> KnownBug | None:
    """The known bug ``message`` names (an expected failure's, from the summary or the reason
    pytest reports it with), or None when it names none."""
    found = _NAMED.search(message)
    if found is None:
        return None
    what = _WHAT.search(message, found.end() - 1) if found.group(2) is not None else None
    return KnownBug(int(found.group(1)), found.group(2) or "", what.group(1) if what else "")
