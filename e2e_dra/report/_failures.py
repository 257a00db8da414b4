"""The page's two lists of what did not pass: real failures first, known bugs apart.

``Failures (n)`` holds only what fails a run (failed, interrupted), the first to end first, as
the headline names it: a reader of a red page starts there. ``Known Kubernetes bugs seen (n)``
holds the phases a known Kubernetes bug broke as their subtest declares it must (``xfailed``):
they do not fail a run, so they never sit under a "Failures" heading, where a passing page would
read as a failing one. Each known bug is named once, with its upstream issue, and the phases it
broke under it.

Times say what they measure: "ran 6.0s" is how long the entry ran, "ended 1m07s into the run"
when it ended, counted from its run's start.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from e2e_dra.report._knownbugs import KnownBug, known_bug
from e2e_dra.report._load import Result
from e2e_dra.report._runs import Run, expected_failures, real_failures
from e2e_dra.report._timeline import clock

FAILURES_ID = "failures"
KNOWN_BUGS_ID = "known-bugs"

Links = Callable[[Run, Result], str]
"""The links (HTML) to what explains an entry."""
Anchor = Callable[[Run], str]
"""The ``id`` of a run's section of the page."""


def ran(result: Result) -> str:
    """How long ``result`` ran and when it ended, each said as what it is."""
    return f"ran {clock(result.seconds)}, ended {clock(result.start + result.seconds)} into the run"


def failures_html(runs: list[Run], links: Links, anchor: Anchor) -> str:
    """``Failures (n)``: every real failure, the first to end first."""
    found = real_failures(runs)
    heading = f'<h2 id="{FAILURES_ID}">Failures ({len(found)})</h2>'
    if not found:
        return f"{heading}<p>None: no entry failed or was interrupted.</p>"
    items = []
    for run, r in found:
        step = f", failing step: {escape(r.failed_step)}" if r.failed_step else ""
        message = f'<pre class="message">{escape(r.message)}</pre>' if r.message else ""
        items.append(
            f'<li><a href="#{anchor(run)}">{escape(run.label)}</a> <code>{escape(r.id)}</code> '
            f"<b>{escape(r.outcome)}</b>{step} ({ran(r)}){message}{links(run, r)}</li>"
        )
    return f'{heading}<ol class="failures">{"".join(items)}</ol>'


def known_bugs_html(runs: list[Run], links: Links, anchor: Anchor) -> str:
    """``Known Kubernetes bugs seen (n)``: per bug, its upstream issue and what it broke."""
    found = expected_failures(runs)
    heading = f'<h2 id="{KNOWN_BUGS_ID}">Known Kubernetes bugs seen ({len(found)})</h2>'
    if not found:
        return f"{heading}<p>None.</p>"
    bugs: dict[KnownBug, list[tuple[Run, Result]]] = {}
    for run, r in found:
        bug = known_bug(r) or KnownBug(None)
        bugs.setdefault(_key(bug, bugs), []).append((run, r))
    items = []
    for bug, seen in bugs.items():
        entries = "".join(
            f'<li><a href="#{anchor(run)}">{escape(run.label)}</a> <code>{escape(r.id)}</code> '
            f"({ran(r)}){links(run, r)}</li>"
            for run, r in seen
        )
        items.append(f"<li>{_bug_said(bug)}: seen {len(seen)} time(s)<ul>{entries}</ul></li>")
    return (
        f"{heading}<p class=muted>Each of these phases failed as its subtest declares it must on "
        "these releases: a known bug seen, not a failure of the run (a run where one is no longer "
        f'seen fails).</p><ul class="known-bugs">{"".join(items)}</ul>'
    )


def _key(bug: KnownBug, bugs: dict[KnownBug, list[tuple[Run, Result]]]) -> KnownBug:
    """The bug ``bug`` is listed under: the first one seen of its number (the same bug on
    another release names another one, and is still one bug)."""
    return next((b for b in bugs if b.number == bug.number), bug)


def _bug_said(bug: KnownBug) -> str:
    """The bug's name, linked to its upstream issue, and what it does."""
    url = bug.url
    name = escape(bug.name)
    named = f'<a class="upstream" href="{escape(url, quote=True)}">{name}</a>' if url else name
    where = f" ({escape(bug.where)})" if bug.where else ""
    what = f": {escape(bug.what)}" if bug.what else ""
    return f"<b>{named}</b>{where}{what}"
