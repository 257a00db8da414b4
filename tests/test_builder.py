"""The builder's own behaviour: one surface over its parts, claims said with ``requests=``, and
the tear-down that keeps to the subtest's objects.

Shapes are validated against the ``kubernetes`` package's models (which forbid unknown fields);
the tear-down's selectors and owner rule here, the tear-down itself against a real API server in
``tests/real/test_builder_real.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes.client import models

from e2e_dra.builder import (
    SUBTEST_LABEL,
    SUITE_LABEL,
    UNLABELLED,
    Builder,
    ObjectClient,
    ObjectFactory,
    Pods,
    SubtestObjects,
    Sweeper,
    event_time,
    label_selector,
    made_for,
    request,
)
from e2e_dra.kube import Kube

CLASS = "defaultcore-dra-class"


def builder(suffix: str = "core-dra", kube: Kube | None = None) -> Builder:
    objects = SubtestObjects(suffix, suite="upgrade-downgrade", image="example.test/busybox:1")
    return objects.builder(kube)  # type: ignore[arg-type]


def requests_of(claim: dict) -> list[dict]:
    """The claim's requests, once the claim validates as a v1 ResourceClaim."""
    models.ResourceV1ResourceClaim.model_validate(claim)
    return claim["spec"]["devices"]["requests"]


# --- one surface --------------------------------------------------------------------------------

SUBTEST_CALLS = {
    ObjectFactory: ("external_claim", "claim_spec", "pod_external", "pod_inline", "device_class"),
    ObjectClient: (
        "get",
        "list",
        "patch",
        "update",
        "delete",
        "wait_gone",
        "url",
        "api_version",
        "api_version_by_release",
    ),
    Pods: (
        "read_pod",
        "wait_running",
        "wait_unschedulable",
        "wait_pod_gone",
        "delete_pod_and_wait",
        "test_pod",
        "check_container_env",
        "exec",
    ),
    Sweeper: ("create", "defer", "tear_down"),
}


@pytest.mark.parametrize(
    ("part", "names"), SUBTEST_CALLS.items(), ids=lambda p: getattr(p, "__name__", "")
)
def test_the_builder_has_each_parts_methods_as_written_there(part: type, names: tuple) -> None:
    """What a subtest calls on ``ctx.builder`` is the part's own method, written once: the
    builder adds no second signature that passes the call on."""
    b = builder()
    assert isinstance(b, part)
    for name in names:
        assert getattr(Builder, name) is getattr(part, name), name
        defined_in = [cls.__name__ for cls in Builder.__mro__ if name in vars(cls)]
        # create: the client creates, the sweeper remembers the classes it must delete later
        assert defined_in == (["Sweeper", "ObjectClient"] if name == "create" else [part.__name__])
    assert set(vars(Builder)) - set(vars(object)) <= {
        "__init__",
        "__module__",
        "__doc__",
        "__qualname__",
        "__firstlineno__",
        "__static_attributes__",
        "in_namespace",
        "set_up",
    }


# --- requests= ----------------------------------------------------------------------------------


def test_the_default_request_is_upstreams() -> None:
    b = builder()
    assert b.external_claim()["spec"] == b.external_claim(requests=[request()])["spec"]
    assert requests_of(b.external_claim()) == [
        {"name": "my-request", "exactly": {"deviceClassName": CLASS}}
    ]


def test_requests_say_only_what_is_set() -> None:
    """Each field goes out only when given: a count without a mode leaves the mode to the
    server's default, as the hand-written claims did."""
    b = builder()
    claim = b.external_claim(
        requests=[
            request("a", count=2),
            request("b", allocation_mode="ExactCount", count=3, device_class="other-class"),
            request("all", allocation_mode="All", selectors=['device.driver == "d"']),
            request("admin", admin_access=True),
            request("tolerant", tolerations=[{"key": "k", "operator": "Exists"}]),
            request("share", capacity={"memory": "2Gi"}),
        ]
    )
    assert requests_of(claim) == [
        {"name": "a", "exactly": {"deviceClassName": CLASS, "count": 2}},
        {
            "name": "b",
            "exactly": {
                "deviceClassName": "other-class",
                "allocationMode": "ExactCount",
                "count": 3,
            },
        },
        {
            "name": "all",
            "exactly": {
                "deviceClassName": CLASS,
                "allocationMode": "All",
                "selectors": [{"cel": {"expression": 'device.driver == "d"'}}],
            },
        },
        {"name": "admin", "exactly": {"deviceClassName": CLASS, "adminAccess": True}},
        {
            "name": "tolerant",
            "exactly": {
                "deviceClassName": CLASS,
                "tolerations": [{"key": "k", "operator": "Exists"}],
            },
        },
        {
            "name": "share",
            "exactly": {"deviceClassName": CLASS, "capacity": {"requests": {"memory": "2Gi"}}},
        },
    ]
    # The default opaque config stays, for every request.
    assert claim["spec"]["devices"]["config"] == b.external_claim()["spec"]["devices"]["config"]
    models.V1beta2ResourceClaimSpec.model_validate(claim["spec"])  # v1beta2 has the same shape


def test_first_available_subrequests_have_no_exactly_level() -> None:
    b = builder()
    (prioritized,) = requests_of(
        b.external_claim(
            requests=[
                request(
                    "r",
                    first_available=[
                        request("big", allocation_mode="ExactCount", count=2),
                        request("any", selectors=["true"]),
                    ],
                )
            ]
        )
    )
    assert prioritized == {
        "name": "r",
        "firstAvailable": [
            {"name": "big", "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2},
            {
                "name": "any",
                "deviceClassName": CLASS,
                "selectors": [{"cel": {"expression": "true"}}],
            },
        ],
    }
    for subrequest in prioritized["firstAvailable"]:
        models.V1DeviceSubRequest.model_validate(subrequest)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (request("r", count=1, first_available=[request("s")]), "the subrequests say"),
        (request("r", device_class="c", first_available=[request("s")]), "the subrequests say"),
        (request("r", first_available=[request("s", admin_access=True)]), "nor admin access"),
        (
            request("r", first_available=[request("s", first_available=[request("t")])]),
            "neither subrequests",
        ),
    ],
)
def test_a_request_the_api_would_refuse_is_refused_here(wrong: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        builder().external_claim(requests=[wrong])  # type: ignore[list-item]


def test_templates_and_workloads_take_requests_too() -> None:
    b = builder("workload-resourceclaims")
    wanted = [request("a", count=2), request("b", admin_access=True)]
    pod, template = b.pod_inline(requests=wanted)
    workload, workload_template = b.workload_inline(requests=wanted)
    for made in (template, workload_template):
        models.V1ResourceClaimTemplate.model_validate(made)
        assert made["spec"]["spec"] == b.claim_spec(wanted)
        assert [r["name"] for r in made["spec"]["spec"]["devices"]["requests"]] == ["a", "b"]
    models.V1Pod.model_validate(pod)
    models.V1beta1Workload.model_validate(workload)


# --- the tear-down ------------------------------------------------------------------------------


def test_the_selectors_of_the_tear_down() -> None:
    labels = {SUBTEST_LABEL: "core-dra", SUITE_LABEL: "upgrade-downgrade"}
    assert label_selector(labels) == "e2e-dra/subtest=core-dra,e2e-dra/suite=upgrade-downgrade"
    assert UNLABELLED == "!e2e-dra/subtest"


def test_a_claim_is_made_for_a_pod_that_owns_it() -> None:
    def claim(*uids: str) -> dict:
        owners = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid} for uid in uids]
        return {"metadata": {"name": "c", "ownerReferences": owners}}

    assert made_for(claim("pod-1"), {"pod-1", "pod-2"})
    assert made_for(claim("elsewhere", "pod-2"), {"pod-1", "pod-2"})
    assert not made_for(claim("elsewhere"), {"pod-1"})
    assert not made_for({"metadata": {"name": "c"}}, {"pod-1"})


def test_an_event_counts_as_seen_when_it_was_last_reported() -> None:
    repeated = {
        "eventTime": "2026-12-02T00:25:01.500000Z",
        "series": {"count": 3, "lastObservedTime": "2026-12-02T00:27:09.250000Z"},
        "lastTimestamp": None,
    }
    legacy = {"eventTime": None, "firstTimestamp": "2026-12-02T00:20:00Z",
              "lastTimestamp": "2026-12-02T00:21:00Z"}  # fmt: skip

    assert event_time(repeated) == datetime(2026, 12, 2, 0, 27, 9, 250000, tzinfo=UTC)
    assert event_time(legacy) == datetime(2026, 12, 2, 0, 21, tzinfo=UTC)
    assert event_time({}) == datetime.min.replace(tzinfo=UTC)
