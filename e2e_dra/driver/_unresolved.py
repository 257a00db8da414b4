"""Which of the slice publisher's errors still stand, so that the suite reports those and no other;
and how loud each is said meanwhile (:class:`ErrorVoice`: a restart's on no console).

A pass of the publisher fails now and then for reasons that go away by themselves: while the API
server restarts it refuses the connection, answers 403 (its RBAC is not loaded yet) or 404 (the
release it came back as serves another API version), and a slice changed under us gives a 409.
The next pass succeeds and nothing is wrong. A write the server refuses for good (a 422 Invalid)
fails every pass instead. So an error counts only while no pass has succeeded since it happened;
and it is reported once, not again at every later look while the publisher keeps retrying.

No answer or a 5xx is the server being away, which a restart explains for a while, but not
forever: once no pass has succeeded for :data:`OUTAGE_LIMIT` seconds it stands as an error too
(a server that answers every slice write with a 500 would otherwise be retried unseen).
"""

from __future__ import annotations

import logging
import threading

OUTAGE_LIMIT = 60.0
"""Seconds without a successful pass, the server away all along, before that is an error: an API
server restart takes a few seconds, and the suite waits 300 s for slices after one."""
COMING_BACK = frozenset({401, 403, 404, 409, 429})
"""What an API server answers for a moment as it comes back from a restart: 401 and 403 until its
authenticator and authorizer have loaded their caches (RBAC), 404 while the client learns what
the release it came back as serves, 409 and 429 while every writer that waited catches up."""


class UnresolvedErrors:
    """The errors of the publisher's passes since its last successful one: the latest of each
    slice ("" for what belongs to no one slice, such as the list). Thread-safe: the publisher's
    thread records, the suite's thread takes."""

    def __init__(self, outage_limit: float = OUTAGE_LIMIT) -> None:
        self._lock = threading.Lock()
        self._errors: dict[str, str] = {}  # slice name ("" for none) -> the latest error
        self._reported: set[tuple[str, str]] = set()
        self._outage_limit = outage_limit
        self._away_since: float | None = None  # the first pass that found the server away

    def away(self, message: str, now: float) -> None:
        """A pass got no answer or a 5xx (``message``) at ``now`` (time.monotonic()): nothing
        stands yet; once that has lasted the outage limit since the first such pass, with no
        successful one between, it stands as an error."""
        with self._lock:
            if self._away_since is None:
                self._away_since = now
            elif now - self._away_since >= self._outage_limit:
                self._errors[""] = (
                    f"{message} (no pass has stored the slices for over "
                    f"{self._outage_limit:.0f}s, the server away or failing all along)"
                )

    def failed(self, where: str, message: str) -> None:
        """A pass failed at slice ``where`` (or at no one slice: "") with ``message``."""
        with self._lock:
            self._errors[where] = message

    def succeeded(self) -> None:
        """A pass stored every slice as wanted: all errors so far are resolved, and one that
        happens again later is news again."""
        with self._lock:
            self._errors.clear()
            self._reported.clear()
            self._away_since = None

    def pending(self) -> bool:
        """Whether an error stands that was not taken yet."""
        with self._lock:
            return any(item not in self._reported for item in self._errors.items())

    def take(self) -> list[str]:
        """The standing errors not taken before, oldest slice first; from now on all standing
        ones count as taken (a slice that fails the same way again is not said twice)."""
        with self._lock:
            new = [
                message
                for where, message in self._errors.items()
                if (where, message) not in self._reported
            ]
            self._reported = set(self._errors.items())
        return new


class ErrorVoice:
    """How loud the publisher says the error of a failed pass: a warning (the console shows it) or
    a line of the detail log (INFO: the driver's log and the suite's ``console.log``).

    The suite restarts the API server at every upgrade, downgrade and gate toggle, and a
    restarted server answers every identity but the admin's 403 until its authorizer has loaded
    RBAC: each driver's next pass hit that once per restart, a warning each (84 on the stable
    pair's console: 28 drivers, 3 restarts), each resolved by the pass after it. So an answer of
    :data:`COMING_BACK` from a server that was away (no answer, a 5xx, a watch cut off) since the
    last pass that stored the slices goes to the detail log, unless it has lasted the outage limit
    since. The same error as the pass before, with no success between, goes there too, with how
    often: a driver without RBAC retries every few seconds, and its one warning says it. A 403 of
    a server that was not away (the driver's RBAC missing at its start) is a warning at once.

    How loud says nothing of the verdict: every error stands (:class:`UnresolvedErrors`) until a
    pass succeeds, and what still stands when the suite looks fails a test. Thread-safe: the
    publisher's thread and its watch's note that the server was away."""

    def __init__(self, outage_limit: float = OUTAGE_LIMIT) -> None:
        self._lock = threading.Lock()
        self._outage_limit = outage_limit
        self._away_since: float | None = None
        self._last = ""  # the error said last, while no pass succeeded since
        self._times = 0  # how many passes in a row got it

    def away(self, now: float) -> None:
        """The server did not answer (or answered a 5xx, or cut a watch off) at ``now``."""
        with self._lock:
            if self._away_since is None:
                self._away_since = now

    def succeeded(self) -> None:
        """A pass stored the slices: the server is back, and an error after this is news."""
        with self._lock:
            self._away_since, self._last, self._times = None, "", 0

    def said(self, message: str, status: int | None, now: float) -> tuple[int, str]:
        """(logging level, line) for a pass that failed at ``now`` with ``message``, the API
        server's answer having ``status`` (None: no answer of the server's)."""
        with self._lock:
            if message == self._last:
                self._times += 1
                return logging.INFO, f"{message} (again: {self._times} passes in a row)"
            since = None if self._away_since is None else now - self._away_since
            if status in COMING_BACK and since is not None and since < self._outage_limit:
                return logging.INFO, (
                    f"{message} (the API server was away {since:.1f}s ago: a restarted one "
                    "answers so until it has loaded its caches; trying again)"
                )
            self._last, self._times = message, 1
            return logging.WARNING, message
