"""What the slice publisher wants in the API, and which of its errors count, without a server."""

from __future__ import annotations

import pytest

from e2e_dra.driver import Pool, node_devices
from e2e_dra.driver._slices import SliceRefused, _contains, _writing
from e2e_dra.driver._unresolved import UnresolvedErrors
from e2e_dra.kube import KubeError


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
