"""A cleanup's steps: each tried, each failure logged and named, the first raised with the rest as
notes; a tear-down's list of them under one deadline."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e_dra.hostkit import Attempt, Attempts, NotTried, Teardown


def test_every_step_is_tried_and_the_first_error_raised_with_the_others_as_notes() -> None:
    logged: list[str] = []
    ran: list[str] = []
    attempts = Attempts("cleanup", logged.append, note="e2e-dra: cleanup also failed")

    def failing(name: str) -> None:
        ran.append(name)
        raise RuntimeError(f"{name} broke")

    attempts("first step", lambda: failing("one"))
    attempts("second step", lambda: ran.append("two"))
    attempts.fail(AssertionError("safety net:\nfound"))
    attempts("third step", lambda: failing("three"))
    with pytest.raises(RuntimeError) as raised:
        attempts.raise_first()
    assert str(raised.value) == "one broke"
    assert ran == ["one", "two", "three"]
    assert logged == [
        "cleanup: first step failed: one broke",
        "cleanup: third step failed: three broke",
    ]
    assert raised.value.__notes__ == [
        "e2e-dra: cleanup also failed: AssertionError: safety net:\nfound",
        "e2e-dra: cleanup also failed: RuntimeError: three broke",
    ]


def test_steps_that_all_pass_raise_nothing_and_an_interrupt_is_not_held_back() -> None:
    attempts = Attempts("cleanup", print)
    attempts("a step", lambda: None)
    attempts.raise_first()

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        attempts("a step", interrupted)


def test_each_failure_is_kept_with_the_name_of_its_step() -> None:
    attempts = Attempts("cleanup", print)
    found = AssertionError("safety net: found")
    attempts("stop the driver", lambda: 1 / 0)
    attempts.fail(found, "what the safety nets still hold")
    assert [(name, type(exc)) for name, exc in attempts.failed] == [
        ("stop the driver", ZeroDivisionError),
        ("what the safety nets still hold", AssertionError),
    ]
    assert attempts.errors == [exc for _, exc in attempts.failed]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_teardown_tries_its_attempts_in_order_and_a_failure_stops_none_of_the_rest() -> None:
    ran: list[str] = []
    logged: list[str] = []

    def step(name: str, *, fails: bool = False) -> Attempt:
        def run() -> None:
            ran.append(name)
            if fails:
                raise RuntimeError(f"{name} broke")

        return Attempt(name, run)

    teardown = Teardown("cleanup", logged.append, timeout=60.0, note="cleanup also failed")
    teardown.run([step("dump", fails=True), step("stop drivers"), step("stop", fails=True)])

    assert ran == ["dump", "stop drivers", "stop"]
    assert [name for name, _ in teardown.failed] == ["dump", "stop"]
    assert logged == ["cleanup: dump failed: dump broke", "cleanup: stop failed: stop broke"]
    with pytest.raises(RuntimeError, match="dump broke") as raised:
        teardown.raise_first()
    assert raised.value.__notes__ == ["cleanup also failed: RuntimeError: stop broke"]


def test_past_its_deadline_a_teardown_still_stops_things_but_looks_no_more_and_says_so() -> None:
    clock = Clock()
    ran: list[str] = []
    teardown = Teardown("cleanup", print, timeout=30.0, clock=clock)

    def slow() -> None:
        ran.append("slow look")
        clock.now += 31.0

    teardown.run(
        [
            Attempt("slow look", slow, look=True),
            Attempt("last look", lambda: ran.append("last look"), look=True),
            Attempt("stop the cluster", lambda: ran.append("stop the cluster")),
        ]
    )

    assert ran == ["slow look", "stop the cluster"]
    assert teardown.left() == 0.0
    ((name, exc),) = teardown.failed
    assert name == "last look" and isinstance(exc, NotTried)
    assert str(exc) == "last look: not tried: the cleanup's 30 s were up"


def test_a_teardowns_attempts_may_be_decided_as_it_goes() -> None:
    """A generator's next attempt sees what the ones before it did."""
    seen: list[str] = []

    def attempts() -> Iterator[Attempt]:
        yield Attempt("first", lambda: seen.append("first"))
        if seen:
            yield Attempt("after the first", lambda: seen.append("second"))

    teardown = Teardown("cleanup", print, timeout=1.0)
    teardown.run(attempts())
    assert seen == ["first", "second"]
    teardown.raise_first()
