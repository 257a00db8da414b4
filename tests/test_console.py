"""Progress lines are log records; the command line shows them on stderr as plain lines in CI."""

from __future__ import annotations

import logging
import re

import pytest

from e2e_dra._console import as_headline, is_headline, is_progress, showing_progress

LONG_URL = "https://dl.k8s.io/release/" + "v1.35.1/" * 30 + "kubernetes-server-linux-amd64.tar.gz"


def test_a_command_shows_our_lines_plain_and_whole(capsys: pytest.CaptureFixture[str]) -> None:
    with showing_progress():
        logging.getLogger("e2e_dra.releases._transfer").info(f"downloading {LONG_URL}")
        logging.getLogger("e2e_dra.localupcluster").info("starting kube-apiserver")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err  # never wrapped, whatever the width
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] downloading " + re.escape(LONG_URL), err[0])
    assert err[1].endswith("] starting kube-apiserver")


def test_other_libraries_show_warnings_only(capsys: pytest.CaptureFixture[str]) -> None:
    with showing_progress():
        logging.getLogger("httpx").info("HTTP Request: GET https://dl.k8s.io")
        logging.getLogger("httpx").warning("retrying")
    assert capsys.readouterr().err.splitlines()[0].endswith("] retrying")


def test_after_the_command_nothing_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    before = logging.getLogger("e2e_dra").level
    with showing_progress():
        pass
    logging.getLogger("e2e_dra").info("after the command")
    assert "after the command" not in capsys.readouterr().err
    assert logging.getLogger("e2e_dra").level == before


@pytest.mark.parametrize(
    ("name", "level", "shown"),
    [
        ("e2e_dra.builder", logging.INFO, True),
        ("e2e_dra.localupcluster", logging.INFO, True),
        ("e2e_dra.driver", logging.DEBUG, False),
        ("httpx", logging.INFO, False),
        ("kubernetes.client", logging.WARNING, True),
    ],
)
def test_progress_is_ours_from_info_and_anyones_from_warning(
    name: str, level: int, shown: bool
) -> None:
    record = logging.LogRecord(name, level, __file__, 1, "message", None, None)
    assert is_progress(record) is shown


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("Retrying (%r) after connection broken by '%r': %s", False),  # an API server restart
        ("Connection pool is full, discarding connection: %s", True),
    ],
)
def test_urllib3_retries_are_not_progress_but_its_other_warnings_are(
    message: str, shown: bool
) -> None:
    record = logging.LogRecord(
        "urllib3.connectionpool", logging.WARNING, __file__, 1, message, ("a", "b", "/x"), None
    )
    assert is_progress(record) is shown


@pytest.mark.parametrize(
    ("name", "level", "marked", "headline"),
    [
        ("e2e_dra._suite._narrative", logging.INFO, True, True),  # a suite's headline
        ("e2e_dra.builder", logging.INFO, False, False),  # "Creating Pod ...": detail
        ("e2e_dra.driver._registration", logging.INFO, False, False),  # "kubelet registered"
        ("e2e_dra.driver._slices", logging.WARNING, False, True),  # something went wrong
        ("kubernetes.client", logging.WARNING, False, True),
        ("httpx", logging.INFO, True, False),  # not progress at all, marked or not
        ("urllib3.connectionpool", logging.WARNING, False, False),  # its "Retrying ..."
    ],
)
def test_a_suites_console_shows_headlines_and_warnings(
    name: str, level: int, marked: bool, headline: bool
) -> None:
    message = "Retrying (%r)" if name.startswith("urllib3") else "message"
    record = logging.LogRecord(name, level, __file__, 1, message, ("x",) * message.count("%"), None)
    if marked:
        record.__dict__.update(as_headline())
    assert is_headline(record) is headline
