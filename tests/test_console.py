"""Progress lines go where the running front end shows them."""

from __future__ import annotations

import pytest

from e2e_dra._console import said_through, say


def test_progress_lines_follow_the_innermost_sink(capsys: pytest.CaptureFixture[str]) -> None:
    outer: list[str] = []
    inner: list[str] = []
    with said_through(outer.append):
        say("starting kube-apiserver")
        with said_through(inner.append):
            say("waiting for another e2e-dra cluster on this host")
        say("kube-apiserver is ready")
    say("back on stderr")

    assert outer == ["starting kube-apiserver", "kube-apiserver is ready"]
    assert inner == ["waiting for another e2e-dra cluster on this host"]
    assert "back on stderr" in capsys.readouterr().err


def test_a_failing_block_gives_the_sink_back(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []
    with pytest.raises(RuntimeError), said_through(seen.append):
        raise RuntimeError("boom")
    say("after the failure")
    assert seen == []
    assert "after the failure" in capsys.readouterr().err
