"""eventually/consistently: what they return, when they give up, and what they say then."""

from __future__ import annotations

import itertools

import pytest

from e2e_dra.errors import ComponentCrashed
from e2e_dra.kube import KubeError, NotFound
from e2e_dra.waits import WaitTimeout, abort_when, consistently, eventually


def test_eventually_returns_the_first_value_that_satisfies() -> None:
    counter = itertools.count()
    assert (
        eventually(lambda: next(counter), what="3", timeout=5, poll=0, until=lambda v: v >= 3) == 3
    )


def test_eventually_retries_assertions_and_api_errors() -> None:
    attempts = iter(
        [AssertionError("not yet"), NotFound(404, "NotFound", 'pods "p" not found'), "done"]
    )

    def probe() -> str:
        item = next(attempts)
        if isinstance(item, BaseException):
            raise item
        return item

    assert eventually(probe, what="done", timeout=5, poll=0) == "done"


def test_eventually_timeout_names_what_and_last_value() -> None:
    with pytest.raises(WaitTimeout) as caught:
        eventually(
            lambda: "Pending",
            what="pod p to run",
            timeout=0.05,
            poll=0.01,
            until=lambda phase: phase == "Running",
        )
    assert "waiting for pod p to run" in str(caught.value)
    assert "last value: 'Pending'" in str(caught.value)


def test_eventually_timeout_names_last_error() -> None:
    def probe() -> None:
        raise KubeError(0, "ProtocolError", "connection reset")

    with pytest.raises(WaitTimeout, match=r"last error: KubeError: .*connection reset"):
        eventually(probe, what="x", timeout=0.05, poll=0.01)


def test_eventually_does_not_hide_programming_errors() -> None:
    calls = []

    def probe() -> None:
        calls.append(1)
        raise KeyError("status")

    with pytest.raises(KeyError):
        eventually(probe, what="x", timeout=5, poll=0)
    assert len(calls) == 1


def test_consistently_returns_last_value_while_holding() -> None:
    counter = itertools.count()
    assert (
        consistently(
            lambda: next(counter), what="n", duration=0.05, poll=0.01, holds=lambda v: v >= 0
        )
        >= 1
    )


def test_consistently_fails_when_the_condition_breaks() -> None:
    values = iter(["Running", "Running", "Failed", "Running"])
    with pytest.raises(WaitTimeout, match=r"pod p running stopped holding .* value: 'Failed'"):
        consistently(
            lambda: next(values),
            what="pod p running",
            duration=5,
            poll=0,
            holds=lambda phase: phase == "Running",
        )


@pytest.mark.parametrize(
    "error",
    [KubeError(403, "Forbidden", "bogus after restart"), KubeError(409, "Conflict", "real")],
    ids=["transient", "real"],
)
def test_consistently_fails_on_any_error_at_once(error: KubeError) -> None:
    values = iter(["ok", error])
    calls = itertools.count()

    def probe() -> str:
        next(calls)
        item = next(values, "ok")
        if isinstance(item, BaseException):
            raise item
        return item

    with pytest.raises(WaitTimeout, match=f"could not check that x .*{error.reason}"):
        consistently(probe, what="x", duration=5, poll=0.01)
    assert next(calls) == 2  # failed on the second look, not after 5 s


def test_a_crash_ends_a_wait_even_when_every_error_is_retried() -> None:
    calls = itertools.count()

    def crashed() -> str | None:
        return "kube-scheduler ended" if next(calls) else None  # the second look

    with abort_when(crashed), pytest.raises(ComponentCrashed, match="kube-scheduler ended"):
        eventually(lambda: False, what="x", timeout=5, poll=0, retry_on=(Exception,))
