"""A cleanup's steps: each tried, each failure logged, the first raised with the rest as notes."""

from __future__ import annotations

import pytest

from e2e_dra.hostkit import Attempts


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
