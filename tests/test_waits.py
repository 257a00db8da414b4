"""eventually/consistently: what they return, when they give up, and what they say then."""

from __future__ import annotations

import itertools
import re
import threading
import time

import pytest

from e2e_dra.errors import ComponentCrashed
from e2e_dra.kube import KubeError, NotFound
from e2e_dra.waits import (
    WaitTimeout,
    abort_when,
    consistently,
    consistently_throughout,
    eventually,
)


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


def test_consistently_throughout_watches_the_steps_and_the_time_after() -> None:
    looks: list[float] = []

    def probe() -> str:
        looks.append(time.monotonic())
        return "same"

    with consistently_throughout(probe, what="x", after=0.2, poll=0.01, holds=same):
        time.sleep(0.1)
        ended = time.monotonic()
        during = len(looks)
    assert during >= 2  # looked while the steps ran
    assert time.monotonic() - ended >= 0.2  # and for the whole window after them
    assert looks[-1] - ended >= 0.2


def test_consistently_throughout_reports_a_break_during_the_steps_when_they_end() -> None:
    state = {"value": "same"}
    steps_done = []
    breaks = r"claim c stable stopped holding [\d.]+s into the steps.*'changed'"
    watch = consistently_throughout(
        lambda: state["value"], what="claim c stable", after=5, poll=0.01, holds=same
    )
    with pytest.raises(WaitTimeout, match=breaks), watch:
        time.sleep(0.05)
        state["value"] = "changed"
        time.sleep(0.05)
        state["value"] = "same"  # changed back: the break is not forgotten
        time.sleep(0.05)
        steps_done.append(True)
    assert steps_done  # the steps were not interrupted


def test_consistently_throughout_reports_a_break_after_the_steps() -> None:
    state = {"value": "same"}
    timer = threading.Timer(0.1, lambda: state.update(value="changed"))
    started = time.monotonic()
    watch = consistently_throughout(
        lambda: state["value"], what="x", after=5, poll=0.01, holds=same
    )
    with pytest.raises(WaitTimeout, match=r"stopped holding [\d.]+s after the steps"), watch:
        timer.start()
    assert time.monotonic() - started < 4  # at the break, not at the window's end


def test_consistently_throughout_fails_on_a_probe_error() -> None:
    def probe() -> str:
        raise KubeError(409, "Conflict", "real")

    watch = consistently_throughout(probe, what="x", after=5, poll=0.01)
    with pytest.raises(WaitTimeout, match=r"could not check that x .*Conflict"), watch:
        pass


def test_consistently_throughout_lets_an_error_of_the_steps_win() -> None:
    state = {"value": "same"}
    started = time.monotonic()
    watch = consistently_throughout(
        lambda: state["value"], what="x", after=5, poll=0.01, holds=same
    )
    with pytest.raises(RuntimeError, match="pod did not start") as caught, watch:
        state["value"] = "changed"
        time.sleep(0.05)
        raise RuntimeError("pod did not start")
    assert time.monotonic() - started < 4  # the window is not waited out
    notes = caught.value.__notes__
    assert any(re.search(r"meanwhile: x stopped holding [\d.]+s into the steps", n) for n in notes)


def same(value: str) -> bool:
    return value == "same"
