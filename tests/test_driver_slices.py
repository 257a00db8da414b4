"""What the slice publisher wants in the API, and which of its errors count, without a server."""

from __future__ import annotations

import logging

import pytest

from e2e_dra.driver import Pool, node_devices
from e2e_dra.driver._slices import SlicePublisher, SliceRefused, _contains, _writing
from e2e_dra.driver._unresolved import ErrorVoice, UnresolvedErrors
from e2e_dra.kube import Kube, KubeError


def test_node_devices_is_one_pool_named_after_the_node():
    (pool,) = node_devices("node-1", 3)

    assert pool == Pool(
        name="node-1",
        slices=[{"devices": [{"name": "device-00"}, {"name": "device-01"}, {"name": "device-02"}]}],
        node_name="node-1",
    )


def test_server_defaults_do_not_count_as_a_difference():
    wanted = {"devices": [{"name": "d", "taints": [{"key": "k", "effect": "NoSchedule"}]}]}
    stored = {
        "devices": [
            {"name": "d", "taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": "now"}]}
        ],
        "perDeviceNodeSelection": None,
    }

    assert _contains(stored, wanted)


def test_dropped_or_edited_fields_count_as_a_difference():
    wanted = {"devices": [{"name": "d", "attributes": {"x": {"int": 1}}}, {"name": "e"}]}

    assert not _contains({"devices": [{"name": "d"}, {"name": "e"}]}, wanted)  # field dropped
    assert not _contains({"devices": [{"name": "d", "attributes": {"x": {"int": 2}}}]}, wanted)
    assert not _contains({"devices": [{"name": "d", "attributes": {"x": {"int": 1}}}]}, wanted)


# --- which publish errors still stand: UnresolvedErrors, _writing ---------------------------------

FORBIDDEN = "GET /apis/resource.k8s.io/v1/resourceslices: 403 Forbidden: cannot list it"
INVALID = 'ResourceSlice d-n-0: PUT ...: 422 Invalid: spec.devices[0].name: Invalid value: "Bad_"'


def test_an_error_a_later_pass_resolves_is_never_reported() -> None:
    """The API server restarted: its RBAC was not loaded for a moment, then the pass succeeded."""
    errors = UnresolvedErrors()
    errors.failed("", FORBIDDEN)
    assert errors.pending()
    errors.succeeded()
    assert not errors.pending()
    assert errors.take() == []


def test_an_error_that_stands_is_reported_once_while_the_publisher_retries() -> None:
    errors = UnresolvedErrors()
    errors.failed("d-n-0", INVALID)
    assert errors.take() == [INVALID]
    errors.failed("d-n-0", INVALID)  # the next retry fails the same way
    assert not errors.pending()
    assert errors.take() == []


def test_the_latest_error_of_each_slice_stands_oldest_slice_first() -> None:
    errors = UnresolvedErrors()
    errors.failed("d-n-0", "409 Conflict")
    errors.failed("d-n-1", "422 Invalid: one")
    errors.failed("d-n-0", INVALID)
    assert errors.take() == [INVALID, "422 Invalid: one"]
    errors.failed("d-n-1", "422 Invalid: two")  # another refusal of a slice already reported
    assert errors.take() == ["422 Invalid: two"]


def test_an_error_that_comes_back_after_a_successful_pass_is_news_again() -> None:
    errors = UnresolvedErrors()
    errors.failed("d-n-0", INVALID)
    assert errors.take() == [INVALID]
    errors.succeeded()
    errors.failed("d-n-0", INVALID)
    assert errors.take() == [INVALID]


def test_a_refused_write_names_the_slice_and_keeps_what_the_server_said() -> None:
    said = KubeError(
        422,
        "Invalid",
        'ResourceSlice.resource.k8s.io "d-n-0" is invalid: spec.devices[0].name: Invalid value',
        method="PUT",
        path="/apis/resource.k8s.io/v1/resourceslices/d-n-0",
    )
    with pytest.raises(SliceRefused) as raised, _writing("d-n-0"):
        raise said
    assert raised.value.slice == "d-n-0"
    assert raised.value.error is said
    assert str(raised.value) == f"ResourceSlice d-n-0: {said}"
    assert "422 Invalid" in str(raised.value)


@pytest.mark.parametrize(
    "away",
    [
        KubeError(0, "MaxRetryError", "connection refused", method="POST", path="/x"),
        KubeError(503, "ServiceUnavailable", "the server is shutting down"),
    ],
)
def test_a_server_that_is_away_is_no_refusal(away: KubeError) -> None:
    """Unreachable: the loop retries quietly; only answers of the server name a slice."""
    with pytest.raises(KubeError) as raised, _writing("d-n-0"):
        raise away
    assert raised.value is away


def test_a_server_away_for_too_long_stands_as_an_error_once() -> None:
    """No answer or a 5xx is a restart for a while; for longer than the limit, with no pass
    stored in between, it is reported (once), and a successful pass ends it."""
    errors = UnresolvedErrors(outage_limit=60)
    said = "driver d: publishing ResourceSlices failed: 500 InternalError"
    errors.away(said, now=100.0)
    errors.away(said, now=159.0)
    assert errors.take() == []  # 59 s: a restart may still explain it
    errors.away(said, now=160.0)
    (reported,) = errors.take()
    assert reported.startswith(said) and "for over 60s" in reported
    errors.away(said, now=200.0)
    assert errors.take() == []  # said once
    errors.succeeded()
    errors.away(said, now=300.0)
    errors.away(said, now=330.0)
    assert errors.take() == []  # a new outage counts from its own start


# --- how loud a failed pass is said: ErrorVoice, through the publisher's own loop --------------

DENIED = KubeError(
    403,
    "Forbidden",
    'resourceslices.resource.k8s.io is forbidden: User "system:serviceaccount:default:'
    'd-k8s-io-kubelet-plugin" cannot list resource "resourceslices" at the cluster scope',
    method="GET",
    path="/apis/resource.k8s.io/v1/resourceslices",
)
REFUSED = KubeError(0, "MaxRetryError", "connection refused", method="GET", path="/apis")
STORED = None  # a pass that stores every slice as wanted


class _Passes(SlicePublisher):
    """The publisher's own loop (``_run``) over passes scripted in order, each failing with its
    error or storing the slices (``STORED``); no server is asked anything. The loop ends after
    the last one."""

    def __init__(self, *passes: Exception | None) -> None:
        from kubernetes import client

        nowhere = client.Configuration()
        nowhere.host = "https://127.0.0.1:9"  # the discard port: never asked (passes scripted)
        super().__init__("d.k8s.io", Kube(nowhere))
        self.passes = list(passes)

    def _reconcile(self) -> tuple[str, bool]:
        self._kick.set()  # no backoff wait between the scripted passes
        if not self.passes:
            self._stopping.set()
            raise RuntimeError("the script ended")
        failure = self.passes.pop(0)
        if failure is not None:
            raise failure
        return "1", False

    def _watch(self, resource_version: str) -> None:
        """After a stored pass the next one comes at once, as after a watch event."""


def _said(caplog: pytest.LogCaptureFixture, *passes: Exception | None) -> list[tuple[int, str]]:
    publisher = _Passes(*passes)
    with caplog.at_level(logging.DEBUG, logger="e2e_dra.driver._slices"):
        publisher._run()
    return [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "e2e_dra.driver._slices" and r.levelno >= logging.INFO
    ]


def test_a_restarted_servers_403_is_not_on_the_console_and_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API server restarts: no answer, then 403 until its authorizer has loaded RBAC, then
    the slices are stored. Detail log only, and nothing stands for the suite to report."""
    said = _said(caplog, REFUSED, REFUSED, DENIED, DENIED, STORED)

    assert [level for level, _ in said] == [logging.INFO, logging.INFO]
    assert all("403 Forbidden" in line and "was away" in line for _, line in said), said
    publisher = _Passes(REFUSED, DENIED, STORED)
    publisher._run()
    assert publisher.take_unresolved(grace=0) == []


def test_a_403_at_start_is_a_warning_once_then_counted_in_the_detail_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The driver's RBAC is missing: the server never was away, so the first 403 is a warning;
    the retries that get the same are counted, in the detail log. It stands for the suite."""
    said = _said(caplog, DENIED, DENIED, DENIED, DENIED)

    assert [level for level, _ in said] == [logging.WARNING] + [logging.INFO] * 3
    assert said[0][1] == f"ResourceSlices of d.k8s.io: {DENIED}"
    assert [line.rsplit("(", 1)[1] for _, line in said[1:]] == [
        "again: 2 passes in a row)",
        "again: 3 passes in a row)",
        "again: 4 passes in a row)",
    ]
    publisher = _Passes(DENIED, DENIED)
    publisher._run()
    (standing,) = publisher.take_unresolved(grace=0)
    assert "403 Forbidden" in standing


def test_an_error_after_a_stored_pass_is_news_and_a_refusal_is_never_a_restarts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pass that stored the slices ends the restart and the repeats: the next 403 of a server
    that was not away since is a warning again. A 422 right after a restart is no moment's
    answer of a restarting server: a warning at once."""
    invalid = SliceRefused("d-n-0", KubeError(422, "Invalid", "spec.devices[0].name: Invalid"))

    said = _said(caplog, REFUSED, DENIED, STORED, DENIED, STORED, REFUSED, invalid)

    assert [level for level, _ in said] == [logging.INFO, logging.WARNING, logging.WARNING]
    assert "422 Invalid" in said[2][1]


def test_a_403_that_outlasts_the_outage_limit_after_a_restart_is_a_warning() -> None:
    """RBAC the server came back without (deleted meanwhile) answers 403 after the restart for
    good: once the outage limit has passed since the server was away, it is said as any other
    error, once; a moment after a restart it was not."""
    voice = ErrorVoice(outage_limit=60)
    message = f"ResourceSlices of d.k8s.io: {DENIED}"
    voice.away(now=100.0)

    assert voice.said(message, 403, now=101.0)[0] == logging.INFO
    assert voice.said(message, 403, now=159.0)[0] == logging.INFO
    assert voice.said(message, 403, now=160.0) == (logging.WARNING, message)
    assert voice.said(message, 403, now=165.0)[0] == logging.INFO  # said once
    assert voice.said(message, None, now=166.0)[0] == logging.INFO
