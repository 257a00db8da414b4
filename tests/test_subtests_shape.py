"""The subtests and the objects they create, checked without a cluster.

Shapes are validated against the ``kubernetes`` package's models, which forbid unknown fields:
a misspelt field name fails here instead of as a 400 twenty minutes into a real run.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
import pkgutil
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from kubernetes.client import models

from e2e_dra import subtest_kit, subtests
from e2e_dra.builder import (
    DEFAULT_ENV,
    IDLE_COMMAND,
    RESOURCES,
    SUBTEST_LABEL,
    SUITE_LABEL,
    Builder,
    ObjectFactory,
    SubtestObjects,
    compact_json,
    is_unschedulable,
    labeled,
    object_path,
    resource_of,
)
from e2e_dra.driver import CLIENT_GONE, GRPCCall, claim_env_name
from e2e_dra.errors import E2EDRAError
from e2e_dra.subtest import Context, Subtest, discover
from e2e_dra.subtests import (
    _admin_access,
    _claim_metadata,
    allocation_edges,
    claim_metadata,
    device_taints,
    kubelet_restart,
    prioritized_list,
    resource_claim_device_status,
    resource_health,
)
from e2e_dra.subtests import _binding_conditions as binding_conditions
from e2e_dra.subtests import _consumable_capacity as consumable_capacity
from e2e_dra.subtests import _extended_resource as extended_resource
from e2e_dra.subtests import _health as health
from e2e_dra.subtests import consumable_capacity as consumable_capacity_subtest
from e2e_dra.waits import WaitTimeout

# Upstream's eight scenarios: the port must keep every one of them. Subtests of our own need no
# entry anywhere: the checks below cover whatever ``discover()`` finds.
UPSTREAM = {
    "core-dra",
    "resource-claim-device-status",
    "device-taints",
    "partitionable-devices",
    "extended-resource-explicit",
    "extended-resource-implicit",
    "pool-name-field-selector-fallback",
    "workload-resourceclaims",
}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
NODE_LISTS = (["127.0.0.1"], ["node-a", "node-b"])

MODELS = {
    ("resource.k8s.io/v1", "DeviceClass"): models.V1DeviceClass,
    ("resource.k8s.io/v1", "ResourceClaim"): models.ResourceV1ResourceClaim,
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): models.V1ResourceClaimTemplate,
    ("resource.k8s.io/v1", "ResourceSlice"): models.V1ResourceSlice,
    ("resource.k8s.io/v1alpha3", "DeviceTaintRule"): models.V1alpha3DeviceTaintRule,
    ("scheduling.k8s.io/v1beta1", "Workload"): models.V1beta1Workload,
    ("scheduling.k8s.io/v1beta1", "PodGroup"): models.V1beta1PodGroup,
    ("v1", "Pod"): models.V1Pod,
    ("v1", "Namespace"): models.V1Namespace,
}


def valid(obj: dict) -> dict:
    """``obj`` as the API would accept it, field names and types (raises if not)."""
    MODELS[obj["apiVersion"], obj["kind"]].model_validate(obj)
    return obj


def builder(suffix: str = "core-dra") -> Builder:
    # Building objects never touches the client: none is needed.
    objects = SubtestObjects(suffix, suite="upgrade-downgrade", image="example.test/busybox:1")
    return objects.builder(None)  # type: ignore[arg-type]


def labels(subtest: str) -> dict[str, str]:
    """What every object of ``subtest`` carries (see ``builder``)."""
    return {SUBTEST_LABEL: subtest, SUITE_LABEL: "upgrade-downgrade"}


# --- discovery ----------------------------------------------------------------------------------


def _subtest_modules() -> list[str]:
    return [
        m.name for m in pkgutil.iter_modules(subtests.__path__) if m.name[0] != "_" and not m.ispkg
    ]


def test_discovery_finds_every_subtest_once() -> None:
    found = discover()
    names = [s.name for s in found]
    assert set(names) >= UPSTREAM, UPSTREAM - set(names)
    assert sorted(names) == sorted(m.replace("_", "-") for m in _subtest_modules())
    assert names == sorted(set(names))  # once each, in name order


def test_subtest_name_is_its_module_name() -> None:
    for module_name in _subtest_modules():
        subtest = importlib.import_module(f"e2e_dra.subtests.{module_name}").SUBTEST
        assert isinstance(subtest, Subtest)
        assert subtest.name == module_name.replace("_", "-")


def test_workload_subtest_declares_what_it_needs() -> None:
    by_name = {s.name: s for s in discover()}
    workload = by_name["workload-resourceclaims"]
    assert workload.requires == ("scheduling.k8s.io/v1beta1",)
    assert set(workload.feature_gates) == {"DRAWorkloadResourceClaims", "GenericWorkload"}
    pool_fallback = by_name["pool-name-field-selector-fallback"]
    assert pool_fallback.privileged_client
    assert pool_fallback.reconcile_pool == "pool-name-field-selector-fallback"
    # The API versions upstream's subtests use by name (no fallback to another version).
    from e2e_dra.subtest_kit import CLAIMS_VERSIONS

    assert by_name["core-dra"].requires == ()  # its older version is named per release
    from e2e_dra.versions import matches

    assert [gv for spec, gv in CLAIMS_VERSIONS.items() if matches(spec, "v1.37.2")] == [
        "resource.k8s.io/v1beta1"
    ]
    assert [gv for spec, gv in CLAIMS_VERSIONS.items() if matches(spec, "v1.38.0-beta.0")] == [
        "resource.k8s.io/v1beta2"
    ]
    assert by_name["device-taints"].requires == ("resource.k8s.io/v1alpha3",)
    assert by_name["resource-claim-device-status"].requires == (
        "resource.k8s.io/v1beta2",
        "resource.k8s.io/v1",
    )
    assert by_name["prioritized-list"].requires == ("resource.k8s.io/v1", "resource.k8s.io/v1beta2")
    for subtest in by_name.values():  # group/version, as RUNTIME_CONFIG takes it
        assert all(
            re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/v\d+((alpha|beta)\d+)?", gv)
            for gv in subtest.requires
        )


# --- driver resources ---------------------------------------------------------------------------


def slices_for(subtest: Subtest, nodes: list[str]) -> list[dict]:
    """The ResourceSlices a driver would publish for ``subtest`` on ``nodes``, pool by pool."""
    driver = f"default{subtest.name}.k8s.io"
    assert subtest.resources is not None
    result = []
    pool_names = []
    for pool in subtest.resources(nodes):
        assert (pool.node_name is None) == pool.all_nodes, f"{pool.name}: node XOR all nodes"
        assert pool.node_name is None or pool.node_name in nodes
        pool_names.append(pool.name)
        for index, partial in enumerate(pool.slices):
            assert len([k for k in ("devices", "sharedCounters") if k in partial]) == 1, partial
            where = {"nodeName": pool.node_name} if pool.node_name else {"allNodes": True}
            spec = {
                "driver": driver,
                "pool": {
                    "name": pool.name,
                    "generation": 0,
                    "resourceSliceCount": len(pool.slices),
                },
                **where,
                **partial,
            }
            result.append(
                valid(
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceSlice",
                        "metadata": {"name": f"{driver}-{pool.name}-{index}"},
                        "spec": spec,
                    }
                )
            )
        _check_pool(pool.slices)
    # A pool name identifies the pool across the whole cluster, per driver.
    assert len(pool_names) == len(set(pool_names)), pool_names
    return result


def _check_pool(slices: list[dict]) -> None:
    devices = [d for s in slices for d in s.get("devices", [])]
    names = [d["name"] for d in devices]
    assert len(names) == len(set(names)), names
    assert all(DNS_LABEL.match(n) for n in names), names
    assert all(len(s.get("devices", [])) <= 128 for s in slices)
    counter_sets = {
        c["name"]: set(c["counters"]) for s in slices for c in s.get("sharedCounters", [])
    }
    for device in devices:
        for consumption in device.get("consumesCounters", []):
            assert consumption["counterSet"] in counter_sets, consumption
            assert set(consumption["counters"]) <= counter_sets[consumption["counterSet"]]


@pytest.mark.parametrize("nodes", NODE_LISTS, ids=["one-node", "two-nodes"])
@pytest.mark.parametrize("subtest", [s for s in discover() if s.resources], ids=lambda s: s.name)
def test_resources_are_valid_slices(subtest: Subtest, nodes: list[str]) -> None:
    slices = slices_for(subtest, nodes)
    assert slices, f"{subtest.name} declares resources but publishes nothing"


def test_subtests_without_resources_publish_nothing() -> None:
    assert {s.name for s in discover() if s.resources is None} == {
        "device-taints",
        "device-tolerations",
        "random-worlds",
        "resource-claim-device-status",
    }


def test_node_device_pools_match_upstream() -> None:
    by_name = {s.name: s for s in discover()}
    for name, count in [
        ("core-dra", 8),
        ("extended-resource-explicit", 8),
        ("extended-resource-implicit", 8),
        ("workload-resourceclaims", 1),
        ("prioritized-list", 12),
        ("admin-access", 1),
    ]:
        slices = slices_for(by_name[name], ["node-a", "node-b"])
        assert [s["spec"]["pool"]["name"] for s in slices] == ["node-a", "node-b"]
        assert [d["name"] for d in slices[0]["spec"]["devices"]] == [
            f"device-{i:02d}" for i in range(count)
        ]


def test_partitionable_pool_shares_8gi() -> None:
    subtest = {s.name: s for s in discover()}["partitionable-devices"]
    counters, devices = slices_for(subtest, ["127.0.0.1"])
    assert counters["spec"]["pool"] == {
        "name": "partitionable-pool",
        "generation": 0,
        "resourceSliceCount": 2,
    }
    assert counters["spec"]["sharedCounters"] == [
        {"name": "memory-pool", "counters": {"memory": {"value": "8Gi"}}}
    ]
    memory = {d["name"]: d["capacity"]["memory"]["value"] for d in devices["spec"]["devices"]}
    assert memory == {
        "memory0-2g": "2Gi",
        "memory1-2g": "2Gi",
        "memory2-2g": "2Gi",
        "memory3-2g": "2Gi",
        "memory4-4g": "4Gi",
        "memory5-4g": "4Gi",
    }


SHARED_DEVICE = {
    "name": "shared-device",
    "allowMultipleAllocations": True,
    "capacity": {
        "memory": {
            "value": "10Gi",
            "requestPolicy": {
                "default": "2Gi",
                "validRange": {"min": "2Gi", "step": "2Gi"},
            },
        }
    },
}


def test_consumable_capacity_publishes_a_shared_and_an_exclusive_device() -> None:
    subtest = {s.name: s for s in discover()}["consumable-capacity"]
    assert subtest.feature_gates == ("DRAConsumableCapacity",)
    assert subtest.releases == ">=1.36"
    (only,) = slices_for(subtest, ["node-a", "node-b"])
    assert only["spec"]["nodeName"] == "node-a"
    assert only["spec"]["pool"]["name"] == "consumable-capacity"
    assert only["spec"]["devices"] == [
        SHARED_DEVICE,
        {
            # No allowMultipleAllocations: whole to one claim at a time.
            "name": "exclusive-device",
            "attributes": {"example.com/name": {"string": "exclusive-device"}},
            "capacity": {"memory": {"value": "8Gi"}},
        },
    ]


def test_consumable_capacity_gate_cycle_twin_publishes_the_shared_device_alone() -> None:
    """The twin's claims carry no selector: an exclusive device there could take them."""
    (pool,) = consumable_capacity.resources(["node-a"])
    assert (pool.name, pool.node_name) == ("consumable-capacity", "node-a")
    assert pool.slices == [{"devices": [SHARED_DEVICE]}]


def test_consumable_capacity_selectors_tell_the_two_devices_apart() -> None:
    """Each claim for a share selects every device but the exclusive one, X1 and X2 only it,
    both by the attribute that names it (CEL cannot see a device's name)."""
    m = consumable_capacity_subtest
    assert m.EXCLUSIVE_DEVICE["attributes"] == {"example.com/name": {"string": "exclusive-device"}}
    named = 'device.attributes["example.com"].?name.orValue("")'
    assert (
        f'{named} == "exclusive-device"',
        f'{named} != "exclusive-device"',
    ) == (m.SELECT_EXCLUSIVE, m.SHARED_ONLY)
    assert "allowMultipleAllocations" not in m.EXCLUSIVE_DEVICE
    assert "attributes" not in consumable_capacity.SHARED_DEVICE  # SHARED_ONLY takes it


def _consumed(request: str) -> int:
    """What the request policy makes of ``request``: at least min, rounded up to min + n*step."""
    from kubernetes.utils import parse_quantity

    policy = consumable_capacity.REQUEST_POLICY["validRange"]
    low, step = parse_quantity(policy["min"]), parse_quantity(policy["step"])
    amount = max(parse_quantity(request), low)
    return int(low + math.ceil((amount - low) / step) * step)


def test_consumable_capacity_numbers_add_up() -> None:
    """The subtest's expectations follow from the device's capacity and request policy: what
    A and B consume, that 4Gi are left (5Gi waits, 3Gi fits), that C's two shares take exactly
    those 4Gi, and that then even 1Gi waits."""
    from kubernetes.utils import parse_quantity

    gi = 2**30
    total = int(parse_quantity(consumable_capacity.TOTAL))
    for requests, consumed in consumable_capacity.FIRST_SHARES:
        assert {r: _consumed(m) for r, m in requests.items()} == {
            r: int(parse_quantity(m)) for r, m in consumed.items()
        }
    used = sum(
        _consumed(m) for requests, _ in consumable_capacity.FIRST_SHARES for m in requests.values()
    )
    left = total - used
    assert left == 4 * gi
    assert _consumed("5Gi") > left >= _consumed("3Gi")
    assert _consumed("1Gi") + _consumed("1Gi") == left
    assert _consumed("1Gi") > 0
    # D waits while C holds the last 4Gi and fits exactly into what C frees.
    m = consumable_capacity_subtest
    ((request, memory),) = m.PENDING.items()
    assert {request: _consumed(memory)} == {
        r: int(parse_quantity(q)) for r, q in m.PENDING_CONSUMED.items()
    }
    assert _consumed(memory) == _consumed("1Gi") + _consumed("1Gi") > 0
    # The exclusive device would take the 5Gi probe (only SHARED_ONLY keeps it off), and X1's
    # and X2's requests together, were it shared (only exclusivity keeps X2 waiting).
    exclusive = parse_quantity(m.EXCLUSIVE_DEVICE["capacity"]["memory"]["value"])
    assert exclusive >= parse_quantity("5Gi")
    assert exclusive >= 2 * sum(parse_quantity(q) for q in m.WHOLE.values())


def test_consumable_capacity_claims_are_valid() -> None:
    b = builder("consumable-capacity")
    claim = valid(consumable_capacity.capacity_claim(b, {"first": "1Gi", "second": "1Gi"}))
    assert claim["metadata"]["name"] == "external-claimconsumable-capacity"
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": name,
            "exactly": {
                "deviceClassName": "defaultconsumable-capacity-class",
                "capacity": {"requests": {"memory": "1Gi"}},
            },
        }
        for name in ("first", "second")
    ]
    # The default opaque config, for every request: the driver's env has its line too.
    assert claim["spec"]["devices"]["config"] == [
        {"opaque": {"driver": "defaultconsumable-capacity.k8s.io", "parameters": {"a": "b"}}}
    ]
    assert subtest_kit.claim_env(claim) == [
        "claim_external_claimconsumable_capacity_first=true",
        "claim_external_claimconsumable_capacity_second=true",
        "user_a=b",
    ]


def test_compact_json_is_what_go_clients_send() -> None:
    """A claim created compact carries its opaque parameters as ``{"a":"b"}``, the bytes the
    status writes of a driver re-encode them to (docs/kubernetes-findings.md, finding 4)."""
    claim = builder("binding-conditions").external_claim()
    text = compact_json(claim)
    assert '"parameters":{"a":"b"}' in text
    assert ": " not in text and ", " not in text
    assert json.loads(text) == claim
    # JSON is YAML: the server reads the body sent as application/yaml the same way.
    assert yaml.safe_load(text) == claim


def test_binding_conditions_pod_sees_the_opaque_config() -> None:
    assert binding_conditions.pod_env("external-claimbinding-conditions") == [
        "claim_external_claimbinding_conditions_my_request=true",
        "user_a=b",
    ]


def test_consumable_capacity_claims_with_a_selector_are_valid() -> None:
    b = builder("consumable-capacity")
    m = consumable_capacity_subtest
    for requests, selector in [
        ({"big": "3Gi"}, m.SHARED_ONLY),
        ({"first": "1Gi", "second": "1Gi"}, m.SHARED_ONLY),
        (m.WHOLE, m.SELECT_EXCLUSIVE),
    ]:
        claim = valid(consumable_capacity.capacity_claim(b, requests, selector))
        assert [r["exactly"]["selectors"] for r in claim["spec"]["devices"]["requests"]] == [
            [{"cel": {"expression": selector}}]
        ] * len(requests)
    unchanged = consumable_capacity.capacity_claim(b, {"late": "1Gi"})
    assert "selectors" not in unchanged["spec"]["devices"]["requests"][0]["exactly"]


def test_consumable_capacity_exclusive_device_must_be_whole() -> None:
    """X1's and X2's results: the exclusive device without shareID or consumedCapacity; a share
    of it, or of another device, fails."""
    m = consumable_capacity_subtest
    driver = "defaultconsumable-capacity.k8s.io"
    result = {"request": "whole", "driver": driver, "pool": "consumable-capacity"}
    found = [{**result, "device": "exclusive-device", "shareID": None}]
    assert m.whole("x1", found, driver) == {
        "whole": {
            "device": (driver, "consumable-capacity", "exclusive-device"),
            "shareID": None,
            "consumedCapacity": {},
        }
    }
    shared = {"shareID": "11111111-1111-4111-8111-111111111111"}
    with pytest.raises(AssertionError, match="allocated as a share"):
        m.whole("x1", [{**found[0], **shared}], driver)
    with pytest.raises(AssertionError, match="allocated as a share"):
        m.whole("x1", [{**found[0], "consumedCapacity": {"memory": "1Gi"}}], driver)
    with pytest.raises(AssertionError, match="want"):
        m.whole("x1", [{**result, "device": "shared-device", **shared}], driver)
    with pytest.raises(AssertionError, match="want"):
        m.whole("x1", found * 2, driver)


def test_consumable_capacity_a_waiting_claim_holds_nothing() -> None:
    m = consumable_capacity_subtest
    m.holds_nothing({"metadata": {"name": "d"}})
    m.holds_nothing({"metadata": {"name": "d"}, "status": {"allocation": None, "reservedFor": []}})
    for status in [
        {"allocation": {"devices": {"results": []}}},
        {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]},
    ]:
        with pytest.raises(AssertionError, match="of a waiting pod holds"):
            m.holds_nothing({"metadata": {"name": "d"}, "status": status})


def test_consumable_capacity_status_entries_are_valid() -> None:
    """The status a driver reports per share: valid, and unique only through the shareID."""
    shares = {
        request: {
            "device": ("defaultconsumable-capacity.k8s.io", "consumable-capacity", "shared-device"),
            "shareID": share,
            "consumedCapacity": {"memory": "2Gi"},
        }
        for request, share in [
            ("first", "11111111-1111-4111-8111-111111111111"),
            ("second", "22222222-2222-4222-8222-222222222222"),
        ]
    }
    results = [
        {
            "request": r,
            "driver": d,
            "pool": p,
            "device": dev,
            "shareID": s["shareID"],
            "consumedCapacity": s["consumedCapacity"],
        }
        for r, s in shares.items()
        for d, p, dev in [s["device"]]
    ]
    entries = consumable_capacity.status_entries(shares)
    valid(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "external-claimconsumable-capacity"},
            "spec": {
                "devices": {"requests": [{"name": "first", "exactly": {"deviceClassName": "c"}}]}
            },
            "status": {"allocation": {"devices": {"results": results}}, "devices": entries},
        }
    )
    assert len({(e["driver"], e["pool"], e["device"]) for e in entries}) == 1
    assert len({e["shareID"] for e in entries}) == 2
    assert all(consumable_capacity.UUID.match(e["shareID"]) for e in entries)


def test_binding_conditions_publishes_cluster_wide_attachable_devices() -> None:
    subtest = {s.name: s for s in discover()}["binding-conditions"]
    assert subtest.feature_gates == ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus")
    assert subtest.releases == ">=1.36"
    assert subtest.privileged_client  # a node identity may not publish a cluster-wide slice
    (only,) = slices_for(subtest, ["node-a", "node-b"])
    assert only["spec"]["allNodes"] is True
    assert "nodeName" not in only["spec"]
    assert [d["name"] for d in only["spec"]["devices"]] == [f"attachable-{i}" for i in range(3)]
    for device in only["spec"]["devices"]:
        assert device["bindsToNode"] is True
        assert device["bindingConditions"] == ["attached"]
        assert device["bindingFailureConditions"] == ["failed"]


def test_binding_conditions_device_status_is_valid() -> None:
    result = {
        "request": "my-request",
        "driver": "defaultbinding-conditions.k8s.io",
        "pool": "binding-conditions",
        "device": "attachable-1",
        "bindingConditions": ["attached"],
        "bindingFailureConditions": ["failed"],
    }
    entry = binding_conditions.device_condition(result, "attached", 1, "set by the test")
    claim = valid(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "external-claimbinding-conditions"},
            "spec": {
                "devices": {
                    "requests": [{"name": "my-request", "exactly": {"deviceClassName": "c"}}]
                }
            },
            "status": {
                "allocation": {
                    "devices": {"results": [result]},
                    "allocationTimestamp": "2026-11-30T22:00:00Z",
                },
                "devices": [entry],
            },
        }
    )
    (device,) = claim["status"]["devices"]
    assert (device["driver"], device["pool"], device["device"]) == (
        result["driver"],
        result["pool"],
        result["device"],
    )
    (condition,) = device["conditions"]
    assert condition["type"] == "attached" and condition["status"] == "True"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", condition["lastTransitionTime"])
    assert re.match(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", condition["reason"])


def test_untouched_checks_expect_the_drivers_line_for_the_claim() -> None:
    """The env a pod must still see after a restart: the line the driver writes for its claim,
    and its opaque config's (env is matched line by line, as a substring)."""
    name = "external-claimbinding-conditions-2"
    assert binding_conditions.pod_env(name) == [
        "claim_external_claimbinding_conditions_2_my_request=true",
        *DEFAULT_ENV,
    ]
    # The scheduler names the one request of an extended-resource claim container-0-request-0.
    line = claim_env_name(
        "implicit-before-upgrade-extended-resource-x7k2p", "container-0-request-0"
    )
    assert f"{line}=true".endswith(extended_resource.REQUEST_ENV)


def test_pool_name_fallback_publishes_one_cluster_wide_device() -> None:
    subtest = {s.name: s for s in discover()}["pool-name-field-selector-fallback"]
    (only,) = slices_for(subtest, ["node-a", "node-b"])
    assert only["spec"]["allNodes"] is True
    assert "nodeName" not in only["spec"]
    assert only["spec"]["devices"] == [{"name": "device-00"}]


# --- builder ------------------------------------------------------------------------------------


def test_names_follow_upstream() -> None:
    b = builder("core-dra")
    assert b.driver_name == "defaultcore-dra.k8s.io"
    assert b.class_name() == "defaultcore-dra-class"
    assert [b.external_claim()["metadata"]["name"] for _ in range(3)] == [
        "external-claimcore-dra",
        "external-claimcore-dra-2",
        "external-claimcore-dra-3",
    ]
    assert [b.pod()["metadata"]["name"] for _ in range(2)] == [
        "testercore-dra-1",
        "testercore-dra-2",
    ]
    assert b.extended_resource_name("explicit") == "defaultcore-dra.k8s.io/resource-explicit"


def test_the_factory_builds_without_a_client() -> None:
    """The objects need no cluster: a bare factory makes what a builder makes, name for name."""
    b = builder("core-dra")
    factory = ObjectFactory("core-dra", image="example.test/busybox:1", labels=b.labels)
    assert valid(factory.pod()) == b.pod()
    assert factory.external_claim() == b.external_claim()
    assert factory.pod_inline() == b.pod_inline()


def test_default_class_and_claim() -> None:
    b = builder("core-dra")
    assert valid(b.device_class()) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "defaultcore-dra-class", "labels": labels("core-dra")},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "defaultcore-dra.k8s.io"'}}]
        },
    }
    claim = valid(b.external_claim())
    assert claim["metadata"] == {
        "name": "external-claimcore-dra",
        "namespace": "default",
        "labels": labels("core-dra"),
    }
    assert claim["spec"] == {
        "devices": {
            "requests": [
                {"name": "my-request", "exactly": {"deviceClassName": "defaultcore-dra-class"}}
            ],
            "config": [{"opaque": {"driver": "defaultcore-dra.k8s.io", "parameters": {"a": "b"}}}],
        }
    }
    v1beta1 = b.claim_spec_v1beta1()
    assert v1beta1["devices"]["requests"] == [
        {"name": "my-request", "deviceClassName": "defaultcore-dra-class"}
    ]
    models.V1beta1ResourceClaimSpec.model_validate(v1beta1)


def test_class_with_extended_resource() -> None:
    b = builder("extended-resource-explicit")
    resource = b.extended_resource_name("explicit")
    cls = valid(b.class_with_extended_resource(resource))
    assert cls["metadata"]["name"] == ("defaultextended-resource-explicit-class-resource-explicit")
    assert cls["spec"]["extendedResourceName"] == (
        "defaultextended-resource-explicit.k8s.io/resource-explicit"
    )


def test_pods_are_restricted_and_idle() -> None:
    b = builder()
    pod = valid(b.pod())
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == "example.test/busybox:1"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "trap exit TERM" in container["command"][-1]


def test_pod_external_and_inline() -> None:
    b = builder()
    pod = valid(b.pod_external("external-claimcore-dra"))
    assert pod["spec"]["resourceClaims"] == [
        {"name": "resource-claim", "resourceClaimName": "external-claimcore-dra"}
    ]
    assert pod["spec"]["containers"][0]["name"] == "with-resource"
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "resource-claim"}]

    pod, template = b.pod_inline()
    valid(pod)
    valid(template)
    assert template["metadata"]["name"] == pod["metadata"]["name"] == "testercore-dra-2"
    assert pod["spec"]["resourceClaims"] == [
        {"name": "my-inline-claim", "resourceClaimTemplateName": "testercore-dra-2"}
    ]
    assert template["spec"]["spec"] == b.claim_spec()


def test_workload_pod_group_and_grouped_pods() -> None:
    b = builder("workload-resourceclaims")
    workload, template = b.workload_inline()
    valid(workload)
    valid(template)
    assert workload["metadata"]["name"] == "testerworkload-resourceclaims-0"
    group_template = workload["spec"]["podGroupTemplates"][0]
    assert group_template["resourceClaims"] == [
        {"name": "my-inline-claim", "resourceClaimTemplateName": "testerworkload-resourceclaims-0"}
    ]
    pod_group = valid(b.pod_group(workload, group_template))
    assert pod_group["metadata"]["name"] == "testerworkload-resourceclaims-0-group-0"
    assert pod_group["spec"]["workloadRef"] == {
        "workloadName": "testerworkload-resourceclaims-0",
        "templateName": "group",
    }
    assert pod_group["spec"]["resourceClaims"] == group_template["resourceClaims"]
    assert b.pod_group(workload, group_template)["metadata"]["name"].endswith("-group-1")

    pod = valid(b.grouped_pod_with_claims(pod_group))
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": pod_group["metadata"]["name"]}
    assert pod["spec"]["resourceClaims"] == group_template["resourceClaims"]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "my-inline-claim"}]


def test_device_taint_rule_and_tainted_slice() -> None:
    b = builder("device-taints")
    rule = valid(
        b.device_taint_rule(
            "device-taint-rule",
            pool="devicetaints",
            device="tainted-device",
            taint=device_taints.FROM_RULE,
        )
    )
    assert rule["spec"] == {
        "deviceSelector": {
            "driver": "defaultdevice-taints.k8s.io",
            "pool": "devicetaints",
            "device": "tainted-device",
        },
        "taint": {"key": "devicetaints", "value": "from-rule", "effect": "NoExecute"},
    }
    slice_ = valid(device_taints.tainted_slice(b.driver_name))
    (device,) = slice_["spec"]["devices"]
    assert device["taints"] == [
        {"key": "devicetaints", "value": "from-slice", "effect": "NoSchedule"}
    ]


def test_device_status_entries_are_valid_claim_status() -> None:
    m = resource_claim_device_status
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": m.CLAIM, "finalizers": [m.FINALIZER]},
        "spec": {"devices": {"requests": [{"name": "foo", "exactly": {"deviceClassName": "foo"}}]}},
        "status": {
            "allocation": m.ALLOCATION,
            "devices": [m.DEVICE_ONE, m.DEVICE_TWO_UPDATED, m.DEVICE_THREE],
        },
    }
    valid(claim)
    keys = [(d["driver"], d["pool"], d["device"]) for d in claim["status"]["devices"]]
    assert len(set(keys)) == 3  # list-map keys must be unique
    allocated = {(r["driver"], r["pool"], r["device"]) for r in m.ALLOCATION["devices"]["results"]}
    assert set(keys) == allocated


def _allocated_claim(b: Builder, pod: str) -> dict:
    claim = b.external_claim()
    claim["metadata"].update(
        resourceVersion="7", finalizers=["resource.kubernetes.io/delete-protection"]
    )
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "my-request", "driver": b.driver_name, "pool": "p", "device": "d"}
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": pod, "uid": "u"}],
    }
    return valid(claim)


def test_claim_metadata_pod_uses_both_claims() -> None:
    b = builder("claim-metadata")
    python, compact = b.external_claim(), b.external_claim()
    names = [python["metadata"]["name"], compact["metadata"]["name"]]
    assert names == ["external-claimclaim-metadata", "external-claimclaim-metadata-2"]
    pod = valid(claim_metadata.pod_with_claims(b, names))
    assert pod["spec"]["resourceClaims"] == [
        {"name": "resource-claim", "resourceClaimName": names[0]},
        {"name": "resource-claim-2", "resourceClaimName": names[1]},
    ]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [
        {"name": "resource-claim"},
        {"name": "resource-claim-2"},
    ]
    # Both claims have opaque parameters: what the server stores as raw bytes.
    assert python["spec"]["devices"]["config"][0]["opaque"]["parameters"] == {"a": "b"}
    assert compact["spec"] == python["spec"]


def test_claim_metadata_versions_per_release() -> None:
    from e2e_dra.versions import matches

    def versions(release: str) -> list[str]:
        m = claim_metadata.VERSIONS
        return [gv for gv, spec in m.items() if spec is None or matches(spec, release)]

    assert versions("v1.36.5") == [
        "resource.k8s.io/v1",
        "resource.k8s.io/v1beta2",
        "resource.k8s.io/v1beta1",
    ]
    assert versions("v1.37.2") == versions("v1.36.5")
    assert versions("v1.38.0-beta.0") == ["resource.k8s.io/v1", "resource.k8s.io/v1beta2"]
    assert list(_claim_metadata.METHODS) == [
        "json-patch",
        "merge-patch",
        "strategic-merge-patch",
        "apply",
        "put",
        "put-compact",
    ]


def test_claim_metadata_writes_touch_metadata_only() -> None:
    m = _claim_metadata
    claim = _allocated_claim(builder("claim-metadata"), "tester-1")
    # JSON patch: the first label creates the map; a removal tests the finalizer it removes.
    del claim["metadata"]["labels"]
    assert m.json_patch_ops(claim, "label", "v") == [
        {"op": "add", "path": "/metadata/labels", "value": {m.LABEL: "v"}}
    ]
    claim["metadata"]["labels"] = {"x": "y"}
    assert m.json_patch_ops(claim, "label", "v") == [
        {"op": "add", "path": "/metadata/labels/claim-metadata.example.com~1step", "value": "v"}
    ]
    assert m.json_patch_ops(claim, "add finalizer", "v") == [
        {"op": "add", "path": "/metadata/finalizers/-", "value": m.FINALIZER}
    ]
    claim["metadata"]["finalizers"].append(m.FINALIZER)
    assert m.json_patch_ops(claim, "remove finalizer", "v") == [
        {"op": "test", "path": "/metadata/finalizers/1", "value": m.FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    for op in m.OPERATIONS:
        assert all(p["path"].startswith("/metadata/") for p in m.json_patch_ops(claim, op, "v"))
    # Finalizers merge by value in a strategic merge patch: removed by directive.
    assert m.strategic_merge_patch_body(claim, "remove finalizer", "v") == {
        "metadata": {
            "resourceVersion": "7",
            "$deleteFromPrimitiveList/finalizers": [m.FINALIZER],
        }
    }
    assert m.strategic_merge_patch_body(claim, "add finalizer", "v")["metadata"]["finalizers"] == [
        m.FINALIZER
    ]
    # Server-side apply states only what the field manager owns: no spec, no status.
    body = m.apply_body(claim, "annotation", "v")
    assert body == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "external-claimclaim-metadata",
            "namespace": "default",
            "annotations": {m.ANNOTATION: "v"},
            "finalizers": [m.FINALIZER],
        },
    }
    models.V1ObjectMeta.model_validate(body["metadata"])


def test_claim_metadata_checks_the_answer() -> None:
    m = _claim_metadata
    before = _allocated_claim(builder("claim-metadata"), "tester-1")
    answer = {**before, "metadata": {**before["metadata"], "labels": {m.LABEL: "v"}}}
    assert m.check_answer(before, answer, "label", "v") is None
    assert "without" in (m.check_answer(before, answer, "label", "w") or "")
    changed = {**answer, "spec": {"devices": {"requests": []}}}
    assert "the spec changed" in (m.check_answer(before, changed, "label", "v") or "")
    deallocated = {**answer, "status": {}}
    problems = m.check_answer(before, deallocated, "label", "v") or ""
    assert "status.allocation changed" in problems
    assert "status.reservedFor changed" in problems
    lost = {**answer, "metadata": {**answer["metadata"], "finalizers": []}}
    assert "other finalizers changed" in (m.check_answer(before, lost, "label", "v") or "")


def test_claim_metadata_report_names_claim_method_version_and_message() -> None:
    m = _claim_metadata
    claim = m.Claim("external-claimclaim-metadata", m.PYTHON, "tester-1")
    refused = '422 Invalid: ... is invalid: spec: Invalid value: {"devices":{}}: field is immutable'
    outcomes = [
        m.Outcome(claim, "resource.k8s.io/v1", "json-patch", "label", refused),
        m.Outcome(claim, "resource.k8s.io/v1", "json-patch", "remove finalizer", "not tried: x"),
        m.Outcome(claim, "resource.k8s.io/v1", "put", "label"),
    ]
    text = m.report("v1.36.5", outcomes)
    assert "(v1.36.5) refused or mishandled 2 of 3" in text
    assert 'external-claimclaim-metadata (parameters sent as {"a": "b"}' in text
    assert "json-patch: FAILED 2 of 2: v1 label\n" in text
    assert refused in text
    assert "put: ok (1)" in text
    assert "raw bytes of the opaque parameters" in text


def test_claim_metadata_expects_the_known_bug_exactly() -> None:
    m = _claim_metadata
    spaced = m.Claim("a", m.PYTHON, "tester-1")
    compact = m.Claim("b", m.COMPACT, "tester-1")
    immutable = "422 Invalid: spec: Invalid value: null: field is immutable"
    v1 = "resource.k8s.io/v1"

    def judged(claim, method, error, release="v1.37.2"):
        return m.judged(m.Outcome(claim, v1, method, "label", error), release)

    assert judged(spaced, "json-patch", immutable) is None  # the known bug, as expected
    assert judged(spaced, "json-patch", "not tried: the finalizer was not added") is None
    assert "Narrow KNOWN_REFUSALS" in (judged(spaced, "json-patch", None) or "")  # fixed?
    assert judged(spaced, "json-patch", "500 InternalError: boom") == "500 InternalError: boom"
    assert judged(spaced, "put", immutable) == immutable  # a spaced PUT must be accepted
    assert judged(compact, "put", immutable) is None
    assert judged(compact, "json-patch", immutable) == immutable
    # 1.38 keeps the bytes through a strategic merge patch: refusing it there is a failure
    assert judged(spaced, "strategic-merge-patch", immutable, "v1.36.5") is None
    assert judged(spaced, "strategic-merge-patch", immutable, "v1.38.0-beta.0") == immutable


def _status_claim(generation: int | None = 2) -> dict:
    """An allocated claim of claim-metadata, with the config the scheduler copies."""
    claim = _allocated_claim(builder("claim-metadata"), "tester-1")
    if generation is not None:
        claim["metadata"]["generation"] = generation
    claim["status"]["allocation"]["devices"]["config"] = [
        {
            "source": "FromClaim",
            "opaque": {"driver": "defaultclaim-metadata.k8s.io", "parameters": {"a": "b"}},
        }
    ]
    return claim


def test_claim_metadata_status_writes_are_a_drivers() -> None:
    """Each status write sets the allocated device's Ready condition under the driver's name;
    apply and merge patch say nothing but that, a PUT keeps the rest of the status."""
    m = _claim_metadata
    claim = _status_claim()
    (entry,) = m.status_entries(claim, "status-apply in after-cluster-creation")
    assert (entry["driver"], entry["pool"], entry["device"]) == (
        "defaultclaim-metadata.k8s.io",
        "p",
        "d",
    )
    (condition,) = entry["conditions"]
    assert condition["type"] == m.CONDITION and condition["status"] == "True"
    assert condition["message"] == "status-apply in after-cluster-creation"
    assert condition["observedGeneration"] == 2
    datetime.strptime(condition["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
    assert (
        "observedGeneration"
        not in (m.status_entries(_status_claim(generation=None), "v")[0]["conditions"][0])
    )
    assert m._driver(claim) == "defaultclaim-metadata.k8s.io"
    # Apply: the driver's field manager owns its entries and nothing else.
    body = m.status_apply_body(claim, "v")
    assert set(body) == {"apiVersion", "kind", "metadata", "status"}
    assert body["metadata"] == {"name": claim["metadata"]["name"], "namespace": "default"}
    assert list(body["status"]) == ["devices"]
    valid({**body, "spec": claim["spec"]})
    assert m.status_merge_patch_body(claim, "v") == {
        "status": {"devices": body["status"]["devices"]}
    }
    # PUT: the claim as read, allocation and reservations included, with the driver's entries.
    put = valid(m.status_put_body(claim, "v"))
    assert put["status"]["allocation"] == claim["status"]["allocation"]
    assert put["status"]["reservedFor"] == claim["status"]["reservedFor"]
    assert put["status"]["devices"] == body["status"]["devices"]
    assert put["metadata"] == claim["metadata"] and put["spec"] == claim["spec"]
    assert list(m.STATUS_METHODS) == ["status-apply", "status-merge-patch", "status-put"]
    assert not set(m.STATUS_METHODS) & set(m.METHODS)


def test_claim_metadata_checks_the_status_answer() -> None:
    m = _claim_metadata
    before = _status_claim()
    answer = m.status_put_body(before, "status-apply in x")
    assert m.check_status_answer(before, answer, "status-apply in x") is None
    # An answer without this write's condition (an older write's message) is not accepted.
    assert "without Ready" in (m.check_status_answer(before, answer, "status-put in x") or "")
    dropped = {**answer, "status": {**answer["status"], "devices": []}}
    assert "without Ready" in (m.check_status_answer(before, dropped, "status-apply in x") or "")
    reallocated = copy.deepcopy(answer)
    reallocated["status"]["allocation"]["devices"]["config"] = []
    problems = m.check_status_answer(before, reallocated, "status-apply in x") or ""
    assert "status.allocation changed" in problems


def test_claim_metadata_expects_the_known_status_refusal_exactly() -> None:
    """The driver's status writes: on a claim stored with spaces apply and merge patch are
    refused on status.allocation, as immutable (the handwritten or the declarative message);
    on a compact one the PUT with spaces is. Anything else is a failure, and so is an expected
    refusal that does not come."""
    m = _claim_metadata
    spaced = m.Claim("a", m.PYTHON, "tester-1")
    compact = m.Claim("b", m.COMPACT, "tester-1")
    v1 = "resource.k8s.io/v1"
    handwritten = (
        '422 Invalid: ResourceClaim.resource.k8s.io "a" is invalid: status.allocation: '
        'Invalid value: {"devices":{}}: field is immutable'
    )
    declarative = (
        '422 Invalid: ResourceClaim.resource.k8s.io "a" is invalid: status.allocation: '
        "Invalid value: null: field cannot be modified once set"
    )
    on_spec = "422 Invalid: spec: Invalid value: null: field is immutable"
    unallocated = (
        "422 Invalid: status.devices[0]: Invalid value: ...: must be an allocated device in the "
        "claim"
    )

    def judged(claim, method, error, release="v1.37.2"):
        return m.judged(m.Outcome(claim, v1, method, m.STATUS_OPERATION, error), release)

    for release in ("v1.36.5", "v1.37.2", "v1.38.0-beta.0"):
        for method in ("status-apply", "status-merge-patch"):
            assert judged(spaced, method, handwritten, release) is None
            assert judged(spaced, method, declarative, release) is None
            assert judged(compact, method, declarative, release) == declarative
        assert judged(compact, "status-put", handwritten, release) is None
        assert judged(spaced, "status-put", handwritten, release) == handwritten
    fixed = judged(spaced, "status-apply", None) or ""
    assert "Narrow KNOWN_REFUSALS" in fixed and "status.allocation" in fixed
    assert judged(compact, "status-put", None) is not None
    # Refused otherwise than by the known bug: a failure, also where a refusal is expected.
    for error in (on_spec, unallocated, "500 InternalError: boom", "not tried: x"):
        assert judged(spaced, "status-apply", error) == error
    assert judged(spaced, "status-apply", handwritten.replace("422 ", "409 ")) is not None


def test_claim_metadata_keeps_what_each_form_got_from_the_status_writes() -> None:
    m = _claim_metadata
    spaced = m.Claim("a", m.PYTHON, "tester-1")
    older = m.Claim("c", m.PYTHON, "tester-0")
    compact = m.Claim("b", m.COMPACT, "tester-1")
    refused = "422 Invalid: status.allocation: " + "x" * 400 + ": field is immutable"
    v1 = "resource.k8s.io/v1"
    outcomes = [
        m.Outcome(spaced, v1, "json-patch", "label", "ignored: not a status write"),
        m.Outcome(spaced, v1, "status-apply", m.STATUS_OPERATION, refused),
        m.Outcome(older, v1, "status-apply", m.STATUS_OPERATION, refused),
        m.Outcome(spaced, v1, "status-put", m.STATUS_OPERATION),
        m.Outcome(compact, v1, "status-apply", m.STATUS_OPERATION),
    ]
    facts = m.status_facts(outcomes)
    assert list(facts) == ["python", "compact"]
    (said,) = facts["python"]["status-apply"]  # the same answer for both claims, once
    assert said.startswith("422 Invalid: status.allocation") and " ... " in said
    assert said.endswith("field is immutable") and len(said) < len(refused)
    assert facts["python"]["status-put"] == ["accepted"]
    assert facts["compact"] == {"status-apply": ["accepted"]}
    json.dumps(facts)  # goes into summary.json
    text = m.report("v1.37.2", outcomes[1:2])
    assert "status-apply: FAILED 1 of 1: v1 status.devices" in text
    assert "finding 4" in text


def _stored_template(b: Builder, name: str) -> dict:
    """A template of claim-metadata as the server answers it: labelled, with a version."""
    template = labeled(claim_metadata.claim_template(b, name), b.labels)
    template["metadata"]["resourceVersion"] = "9"
    return valid(template)


def test_claim_metadata_templates_and_the_claim_made_from_one() -> None:
    """Each phase's pod has a third claim, made from its ``python`` template; both templates
    carry the claims' spec (and so their opaque parameters), and pass the subtest's labels on."""
    m = claim_metadata
    b = builder("claim-metadata")
    names = [b.external_claim()["metadata"]["name"] for _ in range(2)]
    pod = m.pod_with_claims(b, names)
    pod_name = pod["metadata"]["name"]
    template = valid(m.claim_template(b, f"{pod_name}-{_claim_metadata.PYTHON}"))
    assert template["metadata"] == {"name": "testerclaim-metadata-1-python", "namespace": "default"}
    assert template["spec"]["spec"] == b.external_claim()["spec"]
    assert template["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"] == {"a": "b"}
    labelled = labeled(template, b.labels)
    assert labelled["spec"]["metadata"]["labels"] == labels("claim-metadata")
    valid(m.with_template_claim(pod, template["metadata"]["name"]))
    assert pod["spec"]["resourceClaims"][2] == {
        "name": "from-python-template",
        "resourceClaimTemplateName": "testerclaim-metadata-1-python",
    }
    assert pod["spec"]["containers"][0]["resources"]["claims"][2] == {
        "name": "from-python-template"
    }
    # The controller names the claim <pod>-<pod claim>-<random>: untruncated up to 57 characters.
    assert len(f"{pod_name}-{m.POD_CLAIM_FROM_TEMPLATE}-") <= 57
    # Three claims per phase's pod, and every phase's pod keeps its devices: nine devices.
    (pool,) = m.SUBTEST.resources(["127.0.0.1"])  # type: ignore[misc]
    assert len(pool.slices[0]["devices"]) == 3 * len(pod["spec"]["resourceClaims"])


def test_claim_metadata_finds_the_claim_made_from_the_template() -> None:
    m = claim_metadata
    pod = {"metadata": {"name": "tester-1"}, "status": {}}
    with pytest.raises(AssertionError, match="no claim made for its claim from-python-template"):
        m.generated_claim(pod, m.POD_CLAIM_FROM_TEMPLATE)
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "resource-claim", "resourceClaimName": "external-claim"},
        {"name": "from-python-template", "resourceClaimName": "tester-1-from-python-template-x"},
    ]
    assert m.generated_claim(pod, m.POD_CLAIM_FROM_TEMPLATE) == "tester-1-from-python-template-x"


def test_claim_metadata_wants_the_templates_labels_on_the_claim_made_from_it() -> None:
    """The controller copies a template's spec.metadata.labels into the claims it makes; a claim
    without them fails, naming the claim, the template and the labels it lacks."""
    b = builder("claim-metadata")
    template = labeled(claim_metadata.claim_template(b, "tester-1-python"), b.labels)
    mine = {**labels("claim-metadata"), "more": "kept"}
    claim = {"metadata": {"name": "tester-1-from-python-template-x", "labels": mine}}
    claim_metadata.template_labels_kept(template, claim)
    claim["metadata"]["labels"] = {SUBTEST_LABEL: "claim-metadata"}
    with pytest.raises(AssertionError) as failed:
        claim_metadata.template_labels_kept(template, claim)
    assert str(failed.value).startswith(
        "claim tester-1-from-python-template-x, made from ResourceClaimTemplate tester-1-python, "
        f"lacks the labels the template's spec.metadata gives it: {{'{SUITE_LABEL}': "
        "'upgrade-downgrade'}"
    )
    del template["spec"]["metadata"]
    with pytest.raises(AssertionError, match=r"tester-1-python has no spec\.metadata\.labels"):
        claim_metadata.template_labels_kept(template, claim)


def test_claim_metadata_template_writes_touch_metadata_only() -> None:
    m = _claim_metadata
    b = builder("claim-metadata")
    template = _stored_template(b, "testerclaim-metadata-1-python")
    body = m.apply_body(template, "label", "v")
    assert body == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": "testerclaim-metadata-1-python",
            "namespace": "default",
            "labels": {m.LABEL: "v"},
        },
    }
    valid({**body, "spec": template["spec"]})
    for op in m.OPERATIONS:
        if op != "remove finalizer":
            assert all(
                p["path"].startswith("/metadata/") for p in m.json_patch_ops(template, op, "v")
            )
    # A template has no status: an answer without one is no lost allocation.
    answer = {**template, "metadata": {**template["metadata"], "labels": {m.LABEL: "v"}}}
    assert m.check_answer(template, answer, "label", "v") is None
    changed = copy.deepcopy(answer)
    changed["spec"]["spec"]["devices"]["config"] = []
    assert "the spec changed" in (m.check_answer(template, changed, "label", "v") or "")
    assert (m.Claim.resource, m.Template.resource) == ("resourceclaims", "resourceclaimtemplates")
    assert RESOURCES[m.Template.resource] == ("resource.k8s.io/v1", True)


def test_claim_metadata_expects_the_known_template_refusal_exactly() -> None:
    """Templates: refused as claims are (the same methods, by how the parameters were stored),
    always with the handwritten message on ``spec``; a claim made from a ``python`` template is
    refused as a ``python`` claim is. Anything else fails, and so does a refusal that does not
    come."""
    m = _claim_metadata
    spaced = m.Template("t", m.PYTHON)
    compact = m.Template("u", m.COMPACT)
    made = m.Claim("t-from-python-template-x", m.FROM_PYTHON_TEMPLATE, "tester-1")
    v1 = "resource.k8s.io/v1"
    refused = (
        '422 Invalid: ResourceClaimTemplate.resource.k8s.io "t" is invalid: spec: Invalid value: '
        '{"metadata":{},"spec":{"devices":{}}}: field is immutable'
    )
    listed = refused.replace("invalid: spec:", "invalid: [spec:").replace("immutable", "immutable]")
    elsewhere = refused.replace("invalid: spec:", "invalid: spec.spec.devices:")
    claims_refusal = "422 Invalid: spec: Invalid value: null: field is immutable"

    def judged(target, method, error, release="v1.37.2", operation="label"):
        return m.judged(m.Outcome(target, v1, method, operation, error), release)

    for release in ("v1.36.5", "v1.37.2", "v1.38.0-beta.0"):
        for method in ("json-patch", "merge-patch", "apply", "put-compact"):
            assert judged(spaced, method, refused, release) is None
            assert judged(spaced, method, listed, release) is None
            assert judged(spaced, method, elsewhere, release) == elsewhere
            assert judged(compact, method, refused, release) == refused
        assert judged(compact, "put", refused, release) is None
        assert judged(spaced, "put", refused, release) == refused
    # The declarative message a claim gets from 1.37 is not a template's.
    assert judged(spaced, "json-patch", claims_refusal) == claims_refusal
    assert judged(spaced, "strategic-merge-patch", refused, "v1.36.5") is None
    assert judged(spaced, "strategic-merge-patch", refused, "v1.38.0-beta.0") == refused
    not_tried = "not tried: the finalizer was not added"
    assert judged(spaced, "apply", not_tried, operation="remove finalizer") is None
    fixed = judged(spaced, "apply", None) or ""
    assert "Narrow KNOWN_TEMPLATE_REFUSALS" in fixed and "template's spec" in fixed
    assert judged(compact, "put", None) is not None
    assert judged(compact, "json-patch", None) is None
    # The claim made from the python template: as a python claim.
    assert judged(made, "json-patch", claims_refusal) is None
    assert judged(made, "put", claims_refusal) == claims_refusal
    status = (
        "422 Invalid: status.allocation: Invalid value: null: field cannot be modified once set"
    )
    assert judged(made, "status-apply", status, operation=m.STATUS_OPERATION) is None
    assert "Narrow KNOWN_REFUSALS" in (judged(made, "put-compact", None) or "")
    text = m.report("v1.37.2", [m.Outcome(spaced, v1, "put", "label", refused)])
    assert "ResourceClaimTemplate t (parameters sent as" in text
    assert "raw bytes of the opaque parameters" in text


def test_claim_metadata_keeps_what_each_kind_got_from_the_metadata_writes() -> None:
    m = _claim_metadata
    spaced = m.Template("testerclaim-metadata-1-python", m.PYTHON)
    older = m.Template("testerclaim-metadata-0-python", m.PYTHON)
    claim = m.Claim("external-claimclaim-metadata", m.PYTHON, "tester-1")
    v1, v1beta2 = "resource.k8s.io/v1", "resource.k8s.io/v1beta2"

    def refused(name: str) -> str:
        return f'422 Invalid: ResourceClaimTemplate.resource.k8s.io "{name}" is invalid: spec: x'

    outcomes = [
        m.Outcome(spaced, v1, "json-patch", "label", refused(spaced.name)),
        m.Outcome(older, v1beta2, "json-patch", "annotation", refused(older.name)),
        m.Outcome(spaced, v1, "json-patch", "remove finalizer", "not tried: x"),
        m.Outcome(spaced, v1, "put", "label"),
        m.Outcome(claim, v1, "put", "label"),
        m.Outcome(claim, v1, "status-put", m.STATUS_OPERATION),
        m.Outcome(claim, v1, "read back", "final state"),
    ]
    facts = m.metadata_facts(outcomes)
    assert facts == {
        "ResourceClaimTemplate": {
            "python": {
                # the same refusal of two templates, once; what was not tried is left out
                "json-patch": [refused("<name>")],
                "put": ["accepted"],
            }
        },
        "ResourceClaim": {"python": {"put": ["accepted"]}},
    }
    json.dumps(facts)  # goes into summary.json


def test_object_paths() -> None:
    b = builder()
    assert object_path(b.external_claim()) == (
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/external-claimcore-dra"
    )
    assert (
        object_path(b.device_class(), collection=True) == "/apis/resource.k8s.io/v1/deviceclasses"
    )
    assert object_path(b.pod()) == "/api/v1/namespaces/default/pods/testercore-dra-1"
    workload, _ = b.workload_inline()
    assert object_path(workload, collection=True) == (
        "/apis/scheduling.k8s.io/v1beta1/namespaces/default/workloads"
    )
    with pytest.raises(E2EDRAError, match="ConfigMap"):
        object_path({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})


def test_objects_by_name_have_their_paths_at_the_usual_or_a_named_version() -> None:
    b = builder()
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    assert b.url("resourceclaims", "c") == f"{claims}/c"
    assert b.url("resourceclaims") == claims
    assert b.url("resourceclaims", "c", version="resource.k8s.io/v1beta1") == (
        "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaims/c"
    )
    assert b.url("resourceclaims", "c", subresource="status") == f"{claims}/c/status"
    assert b.url("pods", "p") == "/api/v1/namespaces/default/pods/p"
    assert b.url("podgroups", "g") == (
        "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/g"
    )
    # Cluster-wide resources have no namespace in their path.
    assert b.url("resourceslices", "s") == "/apis/resource.k8s.io/v1/resourceslices/s"
    assert b.url("devicetaintrules", "r") == ("/apis/resource.k8s.io/v1alpha3/devicetaintrules/r")
    assert b.url("namespaces", "n") == "/api/v1/namespaces/n"
    assert b.url("nodes", "127.0.0.1") == "/api/v1/nodes/127.0.0.1"
    with pytest.raises(E2EDRAError, match="configmaps"):
        b.url("configmaps", "x")
    other = b.in_namespace("elsewhere")
    assert other.url("resourceclaims", "c") == (
        "/apis/resource.k8s.io/v1/namespaces/elsewhere/resourceclaims/c"
    )
    assert other.url("resourceslices", "s") == "/apis/resource.k8s.io/v1/resourceslices/s"
    assert resource_of(b.external_claim()) == "resourceclaims"
    assert resource_of(b.pod_inline()[1]) == "resourceclaimtemplates"
    for kind, plural in (("ResourceClaim", "resourceclaims"), ("Pod", "pods")):
        assert plural in RESOURCES, kind


def test_a_builder_per_phase_shares_the_subtests_names_and_tear_down() -> None:
    """Names count on across the phases' builders, and what one phase deferred or created is
    torn down by the builder of the last: the state is the subtest's, the client the phase's."""
    objects = SubtestObjects("core-dra", suite="upgrade-downgrade", image="example.test/busybox:1")
    first, second = objects.builder(None), objects.builder(None)  # type: ignore[arg-type]
    assert first is not second
    assert first.external_claim()["metadata"]["name"] == "external-claimcore-dra"
    assert second.external_claim()["metadata"]["name"] == "external-claimcore-dra-2"
    assert first.pod()["metadata"]["name"] == "testercore-dra-1"
    assert second.pod()["metadata"]["name"] == "testercore-dra-2"
    workload, _ = first.workload_inline()
    assert second.workload()["metadata"]["name"] == "testercore-dra-1"
    assert workload["metadata"]["name"] == "testercore-dra-0"

    def cleanup(b: Builder) -> None:
        pass

    first.defer(cleanup)
    assert second.deferred == (cleanup,)
    objects.leftovers.track(first.device_class(), "after-cluster-creation")
    assert objects.builder(None).leftovers.classes == ["defaultcore-dra-class"]  # type: ignore[arg-type]
    # In another namespace: the same subtest, its names and its tear-down.
    elsewhere = second.in_namespace("elsewhere")
    assert elsewhere.external_claim()["metadata"] == {
        "name": "external-claimcore-dra-3",
        "namespace": "elsewhere",
        "labels": labels("core-dra"),
    }
    assert elsewhere.deferred == (cleanup,)
    # Nothing re-points a builder: a restart means a new one.
    assert not hasattr(first, "use_client")
    assert not hasattr(objects, "kube")


def test_every_object_the_builder_makes_carries_the_labels() -> None:
    b = builder("workload-resourceclaims")
    want = labels("workload-resourceclaims")
    pod, template = b.pod_inline()
    workload, workload_template = b.workload_inline()
    pod_group = b.pod_group(workload, workload["spec"]["podGroupTemplates"][0])
    made = [
        b.device_class(),
        b.class_with_extended_resource(b.extended_resource_name("x")),
        b.external_claim(),
        b.pod(),
        b.pod_external("c"),
        pod,
        template,
        workload,
        workload_template,
        pod_group,
        b.grouped_pod_with_claims(pod_group),
        b.device_taint_rule("r", pool="p", device="d", taint={"key": "k", "effect": "NoSchedule"}),
    ]
    for obj in made:
        assert valid(obj)["metadata"]["labels"] == want, obj["kind"]
    # The claims made from a template carry them too.
    for obj in (template, workload_template):
        models.V1ResourceClaimTemplate.model_validate(obj)
        assert obj["spec"]["metadata"]["labels"] == want


def test_what_the_builder_creates_is_labelled_even_if_made_by_hand() -> None:
    b = builder("device-taints")
    want = labels("device-taints")
    hand_made = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s", "labels": {"mine": "yes", SUBTEST_LABEL: "kept"}},
        "spec": {"driver": "d", "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1}},
    }
    labelled = labeled(hand_made, b.labels)
    assert labelled["metadata"]["labels"] == {**want, "mine": "yes", SUBTEST_LABEL: "kept"}
    assert hand_made["metadata"]["labels"] == {"mine": "yes", SUBTEST_LABEL: "kept"}  # a copy
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"spec": b.claim_spec()},
    }
    labelled = valid(labeled(template, b.labels))
    assert labelled["metadata"]["labels"] == labelled["spec"]["metadata"]["labels"] == want


def test_no_subtest_imports_another_subtest() -> None:
    """Shared helpers live in e2e_dra.subtest_kit (or a private ``_module`` of e2e_dra.subtests
    for a pair of twins), never in a subtest module another one imports."""
    import ast

    root = Path(subtests.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "e2e_dra.subtests"
            ):
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["e2e_dra", "subtests"] and not any(
                    p.startswith("_") for p in parts[2:]
                ):
                    found.append(f"{path.relative_to(root)}: {name}")
    assert found == []


def test_claims_said_with_requests_are_what_the_api_expects() -> None:
    """The kit's claim for a named device and pool-names-per-driver's claim for its twin's
    class, made with ``requests=``: valid claims whose one request is as the API stores it."""
    from e2e_dra.subtests import pool_names_per_driver

    b = builder("pool-names-per-driver")
    where = valid(subtest_kit.claim_where(b, "model", "x"))
    assert where["spec"]["devices"]["requests"] == [
        {
            "name": "my-request",
            "exactly": {
                "deviceClassName": "defaultpool-names-per-driver-class",
                "selectors": [
                    {
                        "cel": {
                            "expression": (
                                'device.attributes["defaultpool-names-per-driver.k8s.io"]'
                                '.model == "x"'
                            )
                        }
                    }
                ],
            },
        }
    ]
    twin_class = pool_names_per_driver._twin_class(b, "twin.k8s.io")
    twin = valid(pool_names_per_driver._twin_claim(b, "twin.k8s.io", twin_class))
    assert twin["spec"]["devices"]["requests"] == [
        {"name": "my-request", "exactly": {"deviceClassName": twin_class["metadata"]["name"]}}
    ]
    assert [c["opaque"]["driver"] for c in twin["spec"]["devices"]["config"]] == ["twin.k8s.io"]


def test_subtests_spell_the_drivers_env_lines_through_the_kit() -> None:
    """``claim_<claim>_<request>=true`` is the driver's naming: the subtests get it from
    ``subtest_kit.claim_env`` and ``request_env``, so a change to it is made in one place."""
    import ast

    root = Path(subtests.__file__).parent
    found = [
        f"{path.relative_to(root)}: {alias.name}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name == "claim_env_name"
    ]
    assert found == []
    assert subtest_kit.request_env("external-claimcore-dra", "my-request") == (
        "claim_external_claimcore_dra_my_request=true"
    )
    claim = builder().external_claim()
    assert subtest_kit.claim_env(claim) == [
        f"{claim_env_name(claim['metadata']['name'], 'my-request')}=true",
        *DEFAULT_ENV,
    ]


def test_unschedulable_means_pending_with_reason() -> None:
    def pod(phase: str, reason: str) -> dict:
        condition = {"type": "PodScheduled", "status": "False", "reason": reason}
        return {"status": {"phase": phase, "conditions": [condition]}}

    assert is_unschedulable(pod("Pending", "Unschedulable"))
    assert not is_unschedulable(pod("Pending", "SchedulerError"))
    assert not is_unschedulable(pod("Running", "Unschedulable"))
    assert not is_unschedulable({"status": {"phase": "Pending"}})


# --- resource-health, kubelet-restart ------------------------------------------------------------


def test_resource_health_declares_its_gate_and_releases() -> None:
    from e2e_dra.subtest import unsupported_release

    subtest = {s.name: s for s in discover()}["resource-health"]
    assert subtest.feature_gates == ("ResourceHealthStatus",)
    assert unsupported_release(subtest.releases, "v1.36.5", "v1.37.2") is None
    assert unsupported_release(subtest.releases, "v1.35.8") == "v1.35.8"
    # One device per node, named as the subtest sets its health.
    (pool,) = subtest.resources(["node-a"])
    assert (pool.name, pool.slices[0]["devices"]) == ("node-a", [{"name": health.DEVICE}])


def test_resource_health_reads_the_claims_devices_from_pod_status() -> None:
    pod = valid(builder().pod_external("external-claim"))
    container = pod["spec"]["containers"][0]["name"]
    assert pod["spec"]["resourceClaims"][0]["name"] == health.POD_CLAIM
    pod["status"] = {
        "containerStatuses": [
            {
                "name": container,
                "image": "example.test/busybox:1",
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "allocatedResourcesStatus": [
                    {
                        "name": f"claim:{health.POD_CLAIM}",
                        "resources": [
                            {
                                "resourceID": "k8s.io/claim=uid-request",
                                "health": "Unhealthy",
                                "message": "broken",
                            }
                        ],
                    },
                    {
                        "name": "claim:other",
                        "resources": [{"resourceID": "x", "health": "Healthy"}],
                    },
                ],
            }
        ]
    }
    models.V1Pod.model_validate(pod)
    assert health._claim_health(pod) == [("Unhealthy", "broken")]
    assert health._claim_health({"status": {}}) == []


def test_resource_health_unknown_window_tells_the_kubelets_timeout_apart() -> None:
    # The kubelet marks the silent device Unknown at the first list after the device's timeout:
    # between SILENT_TIMEOUT and SILENT_TIMEOUT + one re-send, then a pod sync. The lower bound
    # must exclude a kubelet that drops unreported devices at once (the first list without it,
    # one re-send later), and the upper bound one that waits out its own 30 s default instead.
    from e2e_dra.driver._health import RESEND_PERIOD

    assert resource_health.SILENT_TIMEOUT > 2 * RESEND_PERIOD
    slack = resource_health.UNKNOWN_WITHIN - (resource_health.SILENT_TIMEOUT + RESEND_PERIOD)
    assert slack >= 10
    assert resource_health.UNKNOWN_WITHIN < resource_health.KUBELET_DEFAULT_HEALTH_TIMEOUT


def test_resource_health_stopped_plugin_window_tells_dropped_health_from_timed_out() -> None:
    # A kubelet drops a stopped driver's health when its stream ends: Unknown at the pod's next
    # sync, which the nudges bring within moments. One that kept it until the device timed out
    # (its 30 s default, counted from the last re-send before the stop) must not fit the window,
    # and the window must hold several nudges (a first one may reach the kubelet before the
    # stream's end does).
    from e2e_dra.driver._health import RESEND_PERIOD

    window = resource_health.UNKNOWN_AFTER_STOP_WITHIN
    assert window < resource_health.KUBELET_DEFAULT_HEALTH_TIMEOUT - RESEND_PERIOD
    assert window >= 5 * resource_health.NUDGE_EVERY


def _checkpoint_context(tmp_path: Path, claims: list[dict]) -> Context:
    from e2e_dra.driver import Driver

    b = builder("kubelet-restart")
    driver = Driver(b.driver_name, "node-a", None, kubelet_root=tmp_path, get_claim=dict)
    data = {"kind": "DRACheckpoint", "apiVersion": "checkpoint/v1", "ClaimInfoStateList": claims}
    (tmp_path / subtest_kit.CHECKPOINT).write_text(
        json.dumps({"Data": json.dumps(data), "Checksum": 0})
    )
    return Context(None, driver, b, ["node-a"], "phase", tmp_path, log=lambda _: None)  # type: ignore[arg-type]


def _claim_state(uid: str, driver: str, devices: list[dict]) -> dict:
    return {
        "ClaimUID": uid,
        "ClaimName": "external-claim",
        "Namespace": "default",
        "PodUIDs": {"pod-uid": {}},
        "DriverState": {driver: {"Devices": devices}},
    }


def test_kubelet_restart_reads_the_checkpoint(tmp_path: Path) -> None:
    driver = builder("kubelet-restart").driver_name
    device = {
        "PoolName": "node-a",
        "DeviceName": "device-00",
        "RequestNames": ["my-request"],
        "CDIDeviceIDs": ["x"],
    }
    ctx = _checkpoint_context(
        tmp_path,
        [
            _claim_state("one", driver, [device]),
            _claim_state("twice", driver, [device, device]),
            _claim_state("none", driver, []),
        ],
    )
    assert subtest_kit.checkpointed_devices(ctx, "none") == []
    assert subtest_kit.checkpointed_devices(ctx, "missing") is None
    kubelet_restart._expect_one_device(ctx, "one")
    with pytest.raises(AssertionError, match="want one checkpointed device"):
        kubelet_restart._expect_one_device(ctx, "twice")
    with pytest.raises(AssertionError, match="not in the kubelet's checkpoint"):
        kubelet_restart._expect_one_device(ctx, "missing")


def test_kubelet_restart_rejects_a_claim_checkpointed_twice(tmp_path: Path) -> None:
    driver = builder("kubelet-restart").driver_name
    ctx = _checkpoint_context(
        tmp_path, [_claim_state("dup", driver, []), _claim_state("dup", driver, [])]
    )
    with pytest.raises(AssertionError, match="2 times"):
        subtest_kit.checkpointed_devices(ctx, "dup")


def test_a_checkpoint_over_its_bound_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    ctx = _checkpoint_context(tmp_path, [])
    monkeypatch.setattr(subtest_kit, "MAX_CHECKPOINT_BYTES", 64)
    with pytest.raises(AssertionError, match="dra_manager_state is over 64 bytes; not read"):
        subtest_kit.checkpointed_devices(ctx, "any")


def test_prepare_retry_tells_a_device_held_twice_by_the_known_bugs_sign(tmp_path: Path) -> None:
    """kubernetes#140274's sign is in the message for a claim whose device the kubelet lists
    twice after the retried prepare; one device passes, and so does nothing else."""
    from e2e_dra.subtests import prepare_retry

    driver = builder("kubelet-restart").driver_name
    device = {"PoolName": "node-a", "DeviceName": "device-00", "CDIDeviceIDs": ["x"]}
    ctx = _checkpoint_context(
        tmp_path,
        [_claim_state("once", driver, [device]), _claim_state("twice", driver, [device] * 2)],
    )
    prepare_retry._expect_once(ctx, "first", "once")
    with pytest.raises(AssertionError) as held_twice:
        prepare_retry._expect_once(ctx, "first", "twice")
    bug = prepare_retry.SUBTEST.known_bugs[0]
    assert bug.seen_in(str(held_twice.value)) is not None
    assert "given its CDI device IDs 2 times" in str(held_twice.value)
    with pytest.raises(AssertionError, match="not in the kubelet's checkpoint") as missing:
        prepare_retry._expect_once(ctx, "first", "missing")
    assert bug.seen_in(str(missing.value)) is None


@pytest.mark.parametrize(
    ("kubelet", "buggy"),
    [
        ("v1.34.11", True),
        ("v1.34.12", False),  # kubernetes#140953
        ("v1.35.8", True),
        ("v1.35.10", False),  # kubernetes#140954
        ("v1.36.3", True),
        ("v1.36.4", False),
        ("v1.37.2", False),
    ],
)
def test_kubernetes_140274_is_expected_only_of_kubelets_without_a_pick_of_its_fix(
    kubelet: str, buggy: bool
) -> None:
    from e2e_dra.subtests import kubelet_restart, prepare_retry
    from e2e_dra.versions import matches

    bug = prepare_retry.SUBTEST.known_bugs[0]
    assert bug.applies("after-cluster-creation", {"kubelet": kubelet}) is buggy
    assert matches(kubelet_restart.DUPLICATING_KUBELETS, kubelet) is buggy


def test_device_tolerations_tells_the_evicted_every_taint_pod_by_the_known_bugs_sign(
    tmp_path: Path,
) -> None:
    """kubernetes#143376's sign: an eviction of the pod whose claim tolerates every taint, on the
    controller-managers before the fix; the same eviction of the other pod is another bug."""
    from e2e_dra.subtests import device_tolerations as m
    from e2e_dra.versions import matches

    ctx = _checkpoint_context(tmp_path, [])
    evicted = (
        "pod default/p is gone while we waited for it to run; its events: Scheduled: "
        "Successfully assigned default/p to 127.0.0.1; DeviceTaintManagerEviction: Marking for "
        "deletion"
    )
    seen = {}
    for device, (_, what) in m.TOLERATIONS.items():
        with pytest.raises(AssertionError) as failed, ctx.step(m.stays_step(what)):
            raise AssertionError(evicted)
        bug = m.SUBTEST.known_bugs[0]
        seen[device] = bug.seen_in("\n".join([str(failed.value), *failed.value.__notes__]))
    assert seen["every-taint"] is not None and seen["by-key"] is None
    assert [v for v in ("v1.36.5", "v1.37.2", "v1.38.0-alpha.0", "v1.38.0-beta.0")
            if matches(bug.releases, v)] == ["v1.36.5", "v1.37.2", "v1.38.0-alpha.0"]  # fmt: skip


def test_device_tolerations_says_the_events_of_a_pod_evicted_before_its_exec(
    tmp_path: Path,
) -> None:
    """Evicted as it started, the every-taint pod fails the exec that proves it runs; the failure
    must carry its events, or kubernetes#143376 reads as a failure of its own."""
    from e2e_dra.builder import KubeError
    from e2e_dra.subtests import device_tolerations as m

    class Evicting:
        def test_pod(self, pod: dict) -> None:
            raise KubeError(0, "ExecFailed", "Handshake status 404 Not Found", path="default/p")

        def events_of(self, name: str) -> str:
            return "; its events: Scheduled: ...; DeviceTaintManagerEviction: Marking for deletion"

    ctx = _checkpoint_context(tmp_path, [])
    what = m.TOLERATIONS["every-taint"][1]
    with pytest.raises(AssertionError) as failed, ctx.step(m.stays_step(what)):
        m._runs(Evicting(), {"metadata": {"name": "p"}})  # type: ignore[arg-type]
    said = "\n".join([str(failed.value), *failed.value.__notes__])
    assert "ExecFailed" in said
    assert m.SUBTEST.known_bugs[0].seen_in(said) is not None


def test_device_tolerations_calls_an_eviction_off_only_while_the_toleration_runs(
    tmp_path: Path,
) -> None:
    """The cancelled pod's device loses its taint (the others keep theirs) once the pod runs;
    a pod that ran too close to the end of its toleration calls nothing off, and says so."""
    from e2e_dra.subtests import device_tolerations as m

    class Slices:
        def __init__(self) -> None:
            self.updated: list[dict] = []

        def test_pod(self, pod: dict) -> None:
            pass

        def get(self, resource: str, name: str) -> dict:
            return copy.deepcopy(m.tainted_slice("d.example.com", name))

        def update(self, resource: str, name: str, body: dict) -> dict:
            self.updated.append(body)
            return body

    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}}
    claim = {"metadata": {"name": "c"}}
    now = datetime.now(UTC)
    b, ctx = Slices(), _checkpoint_context(tmp_path, [])
    assert m.Bounded(pod, claim, now).taint_removed_in_time(ctx, b, "s")  # type: ignore[arg-type]
    (updated,) = b.updated
    taints = {d["name"]: d.get("taints") for d in updated["spec"]["devices"]}
    assert taints == {
        "by-key": [m.TAINT],
        "every-taint": [m.TAINT],
        "bounded": [m.TAINT],
        "cancelled": None,
    }

    late = now - timedelta(seconds=m.TOLERATION_SECONDS - 1)
    b, ctx = Slices(), _checkpoint_context(tmp_path, [])
    assert not m.Bounded(pod, claim, late).taint_removed_in_time(ctx, b, "s")  # type: ignore[arg-type]
    assert b.updated == []
    assert "too close to the end of its toleration" in ctx.facts["nothing_to_prove/phase"]


def test_device_tolerations_times_the_bounded_toleration_from_the_taint() -> None:
    """The bounded toleration's pod is due for eviction tolerationSeconds after its device's
    taint's timeAdded, as the server answered the slice's creation."""
    from e2e_dra.builder import request
    from e2e_dra.subtests import device_tolerations as m

    b = builder("device-tolerations")
    created = valid(m.tainted_slice(b.driver_name, "s"))
    names = [d["name"] for d in created["spec"]["devices"]]
    assert names == ["by-key", "every-taint", "bounded", "cancelled"]
    assert all(d["taints"] == [m.TAINT] for d in created["spec"]["devices"])
    claim = valid(b.external_claim(requests=[request(tolerations=[m.BOUNDED_TOLERATION])]))
    (asked,) = claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"]
    assert asked["tolerationSeconds"] == m.TOLERATION_SECONDS and asked["effect"] == "NoExecute"

    created["spec"]["devices"][2]["taints"][0]["timeAdded"] = "2020-01-02T10:00:00Z"
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}}
    bounded = m.Bounded(pod, claim, m.taint_added(created, "bounded"))
    assert bounded.due == datetime.fromisoformat("2020-01-02T10:00:20Z")
    marked = {
        "type": "DisruptionTarget",
        "reason": m.EVICTION,
        "lastTransitionTime": "2020-01-02T10:00:21Z",
    }
    assert m.eviction_time({"status": {"conditions": [marked]}}) == datetime.fromisoformat(
        "2020-01-02T10:00:21Z"
    )
    assert m.eviction_time({"status": {"conditions": [{**marked, "reason": "Other"}]}}) is None


def test_kubelet_restart_reads_which_pods_a_checkpointed_claim_serves(tmp_path: Path) -> None:
    """A kubelet unprepares a claim for a pod it knows from the checkpoint's PodUIDs, a set
    written as ``{"<pod uid>": {}}``; a claim that left the checkpoint is waited out at once."""
    driver = builder("kubelet-restart").driver_name
    ctx = _checkpoint_context(tmp_path, [_claim_state("held", driver, [])])
    kubelet_restart._expect_pod_reference(ctx, "held", "pod-uid")
    with pytest.raises(AssertionError, match=r"for pods \['pod-uid'\], not for other-pod"):
        kubelet_restart._expect_pod_reference(ctx, "held", "other-pod")
    with pytest.raises(AssertionError, match="not in the kubelet's checkpoint"):
        kubelet_restart._expect_pod_reference(ctx, "gone", "pod-uid")
    subtest_kit.wait_out_of_checkpoint(ctx, "gone", timeout=1)


def _call(method: str, error: str | None) -> GRPCCall:
    """An ended call to the driver, as its call log records it."""
    return GRPCCall(
        f"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin{method}", None, error=error, done=True
    )


def test_kubelet_restart_wants_one_call_its_kubelet_saw_succeed_after_the_registration() -> None:
    m = kubelet_restart
    gone, ok = _call(m.UNPREPARE, CLIENT_GONE), _call(m.UNPREPARE, None)
    assert m._one_success([(3, gone), (7, ok)], m.UNPREPARE, "u", after=5) == 7
    assert m._one_success([(3, ok)], m.UNPREPARE, "u", after=None) == 3
    assert m._outcomes([(3, gone), (7, ok)]) == f"2 calls: #3 {CLIENT_GONE}, #7 ok"
    with pytest.raises(AssertionError, match="NodeUnprepareResources of claim u succeeded 2 times"):
        m._one_success([(3, ok), (7, ok)], m.UNPREPARE, "u", after=None)
    with pytest.raises(AssertionError, match="succeeded 0 times"):
        m._one_success([(3, gone)], m.UNPREPARE, "u", after=None)
    with pytest.raises(AssertionError, match=r"other than with their kubelet gone: \['boom'\]$"):
        m._one_success([(3, _call(m.UNPREPARE, "boom")), (7, ok)], m.UNPREPARE, "u", after=None)
    # The old kubelet's call, seen through before it went, is not the new kubelet's.
    with pytest.raises(AssertionError, match=r"\(record 3\) started before .* \(record 5\)"):
        m._one_success([(3, ok), (7, gone)], m.UNPREPARE, "u", after=5)


def test_allocation_edges_keeps_a_shared_claim_prepared_until_its_last_pod_goes() -> None:
    """A claim two pods share: no unprepare when the pod that prepared it goes, and one that
    succeeded, after the deletion of the last, once that goes too."""
    m = allocation_edges
    unprepare = subtest_kit.UNPREPARE
    ok, gone = _call(unprepare, None), _call(unprepare, CLIENT_GONE)
    m._kept_prepared([], "shared", "tester-1", "tester-2")
    with pytest.raises(AssertionError) as failed:
        m._kept_prepared([(4, ok)], "shared", "tester-1", "tester-2")
    assert str(failed.value) == (
        "claim shared was unprepared (1 NodeUnprepareResources call(s)) when pod tester-1, which "
        "prepared it, was deleted, although pod tester-2 still runs with it: the kubelet did not "
        "count that pod among the claim's users"
    )
    m._unprepared_once([(9, ok)], "shared", "tester-2", since=8)
    for calls, said in (
        ([], "none"),
        ([(4, ok)], "#4 ok"),  # before the last pod was deleted
        ([(9, gone)], f"#9 {CLIENT_GONE}"),
        ([(9, ok), (10, ok)], "#9 ok, #10 ok"),
    ):
        with pytest.raises(AssertionError, match=f"from call #8 on\\), got {re.escape(said)}$"):
            m._unprepared_once(calls, "shared", "tester-2", since=8)


def test_kubelet_restart_has_a_device_for_each_claim_it_holds_at_once() -> None:
    """The first pod's claim, and the deleted second pod's until a kubelet unprepares it."""
    (pool,) = kubelet_restart.SUBTEST.resources(["node-a"])
    assert [d["name"] for d in pool.slices[0]["devices"]] == ["device-00", "device-01"]


def test_gates_of_prioritized_list_and_admin_access_are_on_by_default() -> None:
    """Both gates are on by default from 1.34 (GA in 1.36), so neither subtest names one: a
    gate named in FEATURE_GATES breaks the cluster once a release has removed it."""
    from e2e_dra.versions import matches

    by_name = {s.name: s for s in discover()}
    for name in ("prioritized-list", "admin-access"):
        subtest = by_name[name]
        assert subtest.feature_gates == ()
        assert subtest.releases is not None
        for version in ("v1.34.0", "v1.36.5", "v1.37.2", "v1.38.0-beta.0"):
            assert matches(subtest.releases, version), (name, version)
        assert not matches(subtest.releases, "v1.33.9"), name  # no resource.k8s.io/v1 yet


def test_prioritized_claim_wants_the_first_of_two_subrequests_that_fit() -> None:
    m = prioritized_list
    b = builder("prioritized-list")
    claim = valid(m.prioritized_claim(b))
    assert claim["metadata"] == {
        "name": "external-claimprioritized-list",
        "namespace": "default",
        "labels": labels("prioritized-list"),
    }
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["name"] == "my-request"
    assert "exactly" not in request  # one or the other
    unmatched, too_many, preferred, fallback = request["firstAvailable"]
    assert [s["name"] for s in request["firstAvailable"]] == list(m.SUBREQUESTS)
    assert {s["deviceClassName"] for s in request["firstAvailable"]} == {b.class_name()}
    assert m.CHOSEN == "my-request/preferred"
    # The first two cannot be satisfied by what the driver publishes.
    (slice_,) = slices_for({s.name: s for s in discover()}["prioritized-list"], ["127.0.0.1"])
    devices = slice_["spec"]["devices"]
    assert all("attributes" not in d for d in devices)
    assert unmatched["selectors"] == [{"cel": {"expression": m.NO_DEVICE}}]
    assert '"example.com"' in m.NO_DEVICE and ".?model" in m.NO_DEVICE
    assert too_many["allocationMode"] == "ExactCount"
    assert too_many["count"] == len(devices) + 1
    # The last two both fit (the node has room for three such claims besides the configured
    # ones, see test_prioritized_list_devices_hold_every_pod_to_the_end): the first wins.
    assert preferred["allocationMode"] == "ExactCount"
    assert preferred["count"] == m.PREFERRED_COUNT
    assert fallback == {"name": "fallback", "deviceClassName": b.class_name()}
    # The default opaque config applies to every request, so the pod gets user_a=b.
    assert "requests" not in claim["spec"]["devices"]["config"][0]
    # The same request in the older shapes, which the subtest reads back.
    models.V1beta2ResourceClaimSpec.model_validate(claim["spec"])
    v1beta1 = {"devices": {"requests": [request], "config": claim["spec"]["devices"]["config"]}}
    models.V1beta1ResourceClaimSpec.model_validate(v1beta1)


def test_prioritized_list_devices_hold_every_pod_to_the_end() -> None:
    """Each phase adds a claim of each kind and no pod goes before the last phase ends: the
    node's devices must hold three of each (sharing a claim takes none); the pools are
    exactly that, so too-many (one more) never fits."""
    m = prioritized_list
    (slice_,) = slices_for({s.name: s for s in discover()}["prioritized-list"], ["127.0.0.1"])
    devices = len(slice_["spec"]["devices"])
    b = builder("prioritized-list")
    configured, other = m.configured_claim(b)["spec"]["devices"]["requests"]
    # No count: one device (ExactCount 1) for whichever subrequest, one for other-request.
    assert all("count" not in s for s in configured["firstAvailable"])
    assert "count" not in other["exactly"]
    assert len(m.CONFIGURED_REQUESTS) == 2
    assert 3 * (m.PREFERRED_COUNT + 2) == devices == m.DEVICES == 12
    (request,) = m.prioritized_claim(b)["spec"]["devices"]["requests"]
    assert request["firstAvailable"][1]["count"] == devices + 1


def test_configured_claim_scopes_config_and_a_constraint_to_subrequests() -> None:
    m = prioritized_list
    b = builder("prioritized-list")
    claim = valid(m.configured_claim(b))
    devices = claim["spec"]["devices"]
    config_request, other = devices["requests"]
    assert config_request["name"] == "config-request" and "exactly" not in config_request
    assert [s["name"] for s in config_request["firstAvailable"]] == [
        "constrained",
        "fits",
        "also-fits",
    ]
    assert all(
        s == {"name": s["name"], "deviceClassName": b.class_name()}
        for s in config_request["firstAvailable"]
    ), "one device each: only the constraint tells constrained from fits"
    assert other == {"name": "other-request", "exactly": {"deviceClassName": b.class_name()}}
    # What the API server's validation accepts: a request, or request/subrequest.
    names = {"config-request", "other-request"} | {
        f"config-request/{s}" for s in ("constrained", "fits", "also-fits")
    }
    assert devices["constraints"] == [
        {"requests": ["config-request/constrained"], "matchAttribute": "dra.example.com/model"}
    ]
    assert re.fullmatch(r"[a-z0-9.-]+/[a-zA-Z_][a-zA-Z0-9_]{0,31}", m.NO_ATTRIBUTE)
    (slice_,) = slices_for({s.name: s for s in discover()}["prioritized-list"], ["127.0.0.1"])
    assert all("attributes" not in d for d in slice_["spec"]["devices"])
    config = [(c.get("requests"), c["opaque"]["parameters"]) for c in devices["config"]]
    assert config == [
        (None, {"a": "b"}),
        (["config-request"], {"request": "config-request"}),
        (["config-request/constrained"], {"subrequest": "constrained"}),
        (["config-request/fits"], {"subrequest": "fits"}),
        (["config-request/also-fits"], {"subrequest": "also-fits"}),
        (["other-request"], {"request": "other-request"}),
    ]
    assert all(set(r or []) <= names for r, _ in config)
    assert {c["opaque"]["driver"] for c in devices["config"]} == {b.driver_name}
    models.V1beta2ResourceClaimSpec.model_validate(claim["spec"])
    # The scheduler copies all but the entries of the subrequests it passed over.
    assert [r for r, _ in m.ALLOCATED_CONFIG] == [
        (),
        ("config-request",),
        ("config-request/fits",),
        ("other-request",),
    ]


def test_configured_pod_gives_each_container_its_own_request() -> None:
    m = prioritized_list
    b = builder("prioritized-list")
    pod = valid(m.configured_pod(b, "external-claimprioritized-list-2"))
    assert pod["spec"]["resourceClaims"] == [
        {"name": "resource-claim", "resourceClaimName": "external-claimprioritized-list-2"}
    ]
    containers = pod["spec"]["containers"]
    assert [c["name"] for c in containers] == ["config-request", "other-request"]
    assert [c["resources"] for c in containers] == [
        {"claims": [{"name": "resource-claim", "request": "config-request"}]},
        {"claims": [{"name": "resource-claim", "request": "other-request"}]},
    ]
    assert all(c["command"] == list(IDLE_COMMAND) for c in containers)
    assert containers[0]["securityContext"] is not containers[1]["securityContext"]


def test_configured_env_is_the_chosen_subrequests_and_its_own_requests_only() -> None:
    env = prioritized_list.configured_env("external-claimprioritized-list-2")
    assert env == {
        "config-request": [
            "claim_external_claimprioritized_list_2_config_request=true",
            "user_a=b",
            "user_request=config-request",
            "user_subrequest=fits",
        ],
        "other-request": [
            "claim_external_claimprioritized_list_2_other_request=true",
            "user_a=b",
            "user_request=other-request",
        ],
    }
    output = (
        "PATH=/bin\nuser_a=b\nKUBERNETES_PORT=tcp://10.0.0.1:443\nuser_subrequest=fits\n"
        "claim_x_config_request=true\nHOME=/\nadmin_k=v\n"
    )
    assert prioritized_list.driver_env(output) == [
        "admin_k=v",
        "claim_x_config_request=true",
        "user_a=b",
        "user_subrequest=fits",
    ]


def _allocated_configured(b: Builder, results: list[str], config: list[dict]) -> dict:
    """A configured claim as the server might answer it once allocated (test data)."""
    claim = prioritized_list.configured_claim(b)
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": r, "driver": b.driver_name, "pool": "node-a", "device": f"d{i}"}
                    for i, r in enumerate(results)
                ],
                "config": config,
            }
        }
    }
    return claim


def test_configured_allocation_wants_fits_and_only_the_config_that_applies() -> None:
    m = prioritized_list
    b = builder("prioritized-list")
    spec_config = m.configured_claim(b)["spec"]["devices"]["config"]
    copied = [{"source": "FromClaim", **c} for c in spec_config]
    allocated = [copied[0], copied[1], copied[3], copied[5]]
    good = _allocated_configured(b, ["config-request/fits", "other-request"], allocated)
    found = m.configured_allocation(good, b.driver_name, "here")
    assert [r[0] for r in found.results] == ["config-request/fits", "other-request"]
    assert found.config == m.ALLOCATED_CONFIG

    ignored = _allocated_configured(b, ["config-request/constrained", "other-request"], allocated)
    with pytest.raises(AssertionError, match=r"here: allocated for .*constrained"):
        m.configured_allocation(ignored, b.driver_name, "here")
    with pytest.raises(AssertionError, match="allocated for nothing"):
        m.configured_allocation(_allocated_configured(b, [], []), b.driver_name, "here")
    everything = _allocated_configured(b, ["config-request/fits", "other-request"], copied)
    with pytest.raises(AssertionError, match="allocation config"):
        m.configured_allocation(everything, b.driver_name, "here")
    lost = _allocated_configured(b, ["config-request/fits", "other-request"], allocated)
    lost["spec"]["devices"]["constraints"][0]["requests"] = ["config-request"]
    with pytest.raises(AssertionError, match="constraints"):
        m.configured_allocation(lost, b.driver_name, "here")


def test_admin_access_objects() -> None:
    m = _admin_access
    b = builder("admin-access")
    labelled, unlabelled, disabled = (valid(ns) for ns in m.namespace_objects(b))
    assert labelled["metadata"] == {
        "name": "defaultadmin-access-labelled",
        "labels": {"resource.kubernetes.io/admin-access": "true"},
    }
    assert unlabelled["metadata"] == {"name": "defaultadmin-access-unlabelled"}
    # Admin access switched off by the label's value, not its absence: refused all the same.
    assert disabled["metadata"] == {
        "name": "defaultadmin-access-labelled-false",
        "labels": {"resource.kubernetes.io/admin-access": "false"},
    }
    assert disabled["metadata"]["name"] == m.disabled_namespace(b)
    assert all(DNS_LABEL.match(ns["metadata"]["name"]) for ns in (labelled, unlabelled, disabled))
    assert m.label_said(None) == "has no resource.kubernetes.io/admin-access label"
    assert m.label_said("false") == 'has resource.kubernetes.io/admin-access: "false"'

    claim = valid(m.admin_claim(b, m.admin_namespace(b)))
    assert claim["metadata"] == {
        "name": "external-claimadmin-access",
        "namespace": "defaultadmin-access-labelled",
        "labels": labels("admin-access"),
    }
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": "my-request",
            "exactly": {"deviceClassName": "defaultadmin-access-class", "adminAccess": True},
        }
    ]
    assert object_path(claim, collection=True) == (
        "/apis/resource.k8s.io/v1/namespaces/defaultadmin-access-labelled/resourceclaims"
    )
    template = valid(m.admin_claim_template(b, m.plain_namespace(b)))
    assert template["metadata"]["namespace"] == "defaultadmin-access-unlabelled"
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] is True
    # Upstream's message (pkg/registry/resource/utils.go), naming the label.
    assert m.ADMIN_LABEL in m.REFUSAL


def test_admin_access_template_pod_and_ordinary_claim() -> None:
    m = _admin_access
    b = builder("admin-access")
    namespace = m.admin_namespace(b)
    pod, template = (valid(o) for o in m.admin_pod_inline(b, namespace))
    assert pod["metadata"]["namespace"] == template["metadata"]["namespace"] == namespace
    assert pod["spec"]["resourceClaims"] == [
        {"name": "my-inline-claim", "resourceClaimTemplateName": template["metadata"]["name"]}
    ]
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {
            "name": "my-request",
            "exactly": {"deviceClassName": "defaultadmin-access-class", "adminAccess": True},
        }
    ]
    # The claims generated from it carry the subtest's labels (the claim watch attributes them).
    assert template["spec"]["metadata"]["labels"] == labels("admin-access")
    assert object_path(template, collection=True) == (
        "/apis/resource.k8s.io/v1/namespaces/defaultadmin-access-labelled/resourceclaimtemplates"
    )

    again = valid(m.pod_from_template(b, namespace, template["metadata"]["name"]))
    assert again["metadata"]["namespace"] == namespace
    assert again["metadata"]["name"] != pod["metadata"]["name"]
    assert again["spec"]["resourceClaims"] == pod["spec"]["resourceClaims"]

    ordinary = valid(m.ordinary_claim(b, namespace))
    assert ordinary["metadata"]["namespace"] == namespace
    assert ordinary["spec"]["devices"]["requests"] == [
        {"name": "my-request", "exactly": {"deviceClassName": "defaultadmin-access-class"}}
    ]


def test_admin_access_generated_claim_from_pod_status() -> None:
    m = _admin_access
    pod, _ = m.admin_pod_inline(builder("admin-access"), "ns")
    assert m.generated_claim(pod) is None
    pod["status"] = {"resourceClaimStatuses": [{"name": "other", "resourceClaimName": "x"}]}
    assert m.generated_claim(pod) is None
    pod["status"]["resourceClaimStatuses"].append(
        {"name": "my-inline-claim", "resourceClaimName": "tester-1-my-inline-claim-abcde"}
    )
    assert m.generated_claim(pod) == "tester-1-my-inline-claim-abcde"


def _admin_access_claim(namespace: str, name: str, *results: dict) -> dict:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "status": {"allocation": {"devices": {"results": list(results)}}},
    }


def test_admin_access_counts_what_holds_devices() -> None:
    m = _admin_access
    driver = "defaultadmin-access.k8s.io"
    slices = [
        {"spec": {"driver": driver, "pool": {"name": "node-a"}, "devices": [{"name": "d0"}]}},
        {
            "spec": {
                "driver": "other.k8s.io",
                "pool": {"name": "node-a"},
                "devices": [{"name": "x"}],
            }
        },
        {"spec": {"driver": driver, "pool": {"name": "node-b"}}},
    ]
    assert m.published_devices(slices, driver) == {("node-a", "d0")}

    result = {"request": "r", "driver": driver, "pool": "node-a", "device": "d0"}
    claims = [
        _admin_access_claim("default", "holder", result),
        # Admin access is not counted as in use, as the allocator does.
        _admin_access_claim("labelled", "admin", {**result, "adminAccess": True}),
        _admin_access_claim("default", "other-driver", {**result, "driver": "other.k8s.io"}),
        {"metadata": {"namespace": "default", "name": "waiting"}, "status": {}},
        {"metadata": {"namespace": "labelled", "name": "pending"}},
    ]
    assert m.ordinary_allocations(claims, driver) == {"default/holder": {("node-a", "d0")}}
    also = _admin_access_claim("labelled", "ordinary", {**result, "adminAccess": False})
    assert m.ordinary_allocations([*claims, also], driver) == {
        "default/holder": {("node-a", "d0")},
        "labelled/ordinary": {("node-a", "d0")},
    }


def test_admin_access_scheduler_refusal_is_read_from_the_pod() -> None:
    m = _admin_access
    # As the scheduler writes a PreBind failure of the DRA plugin into PodScheduled (1.37, 1.38).
    message = (
        'running PreBind plugin "DynamicResources": add allocation and reservation to claim '
        'ns/c: ResourceClaim.resource.k8s.io "c" is invalid: '
        f"status.allocation.devices.results[0].adminAccess: Forbidden: {m.REFUSAL}"
    )
    condition = {"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}
    pod = {
        "spec": {},
        "status": {"phase": "Pending", "conditions": [{**condition, "message": message}]},
    }
    assert m.refused_by_scheduler(pod)
    other = {**condition, "reason": "Unschedulable", "message": "cannot allocate all claims"}
    assert not m.refused_by_scheduler(
        {**pod, "status": {"phase": "Pending", "conditions": [other]}}
    )
    assert not m.refused_by_scheduler({**pod, "spec": {"nodeName": "127.0.0.1"}})
    assert not m.refused_by_scheduler({**pod, "status": {**pod["status"], "phase": "Running"}})
    assert not m.refused_by_scheduler({"spec": {}, "status": {"phase": "Pending"}})


def test_admin_access_refusal_matches_what_the_api_server_says() -> None:
    # How apimachinery prints the Forbidden field error of AuthorizedForAdmin (same path for a
    # claim and a template), as the 422 and the resourceclaim controller's event carry it.
    m = _admin_access
    claim = (
        'ResourceClaim.resource.k8s.io "c" is invalid: spec.devices.requests[0].adminAccess: '
        f"Forbidden: {m.REFUSAL}"
    )
    event = (
        'PodResourceClaim my-inline-claim: create ResourceClaim : ResourceClaim.resource.k8s.io "" '
        f"is invalid: spec.devices.requests[0].adminAccess: Forbidden: {m.REFUSAL}"
    )
    assert m.FORBIDDEN in claim and m.FORBIDDEN in event
    internal = (
        "spec.devices.requests[0].adminAccess: Internal error: could not retrieve namespace to "
        "verify admin access"
    )
    assert m.FORBIDDEN not in internal


FAKE_CTR = """#!/bin/sh
# ctr as the CRI namespace of a node answers it: pod p1 runs sandbox s1 and container c1; c0 is an
# exited container of p1, x1 a task of another pod.
shift 4  # --address <socket> -n k8s.io
echo "$*" >> "$(dirname "$0")/calls"
case "$*" in
  'containers ls -q labels."io.kubernetes.pod.uid"==p1') printf 'c0\\nc1\\ns1\\n' ;;
  'containers ls -q labels."io.kubernetes.pod.uid"==p1,labels."io.cri-containerd.kind"==sandbox')
    echo s1 ;;
  'containers ls -q '*) ;;
  'tasks ls') printf 'TASK PID STATUS\\nc1 12 RUNNING\\nx1 13 RUNNING\\n'
    printf 'c0 0 STOPPED\\ns1 11 RUNNING\\n' ;;
  'tasks kill --signal SIGKILL '*) ;;
  *) echo "unexpected: $*" >&2; exit 1 ;;
esac
"""


def test_kubelet_restart_kills_the_pods_sandbox_first_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctr = tmp_path / "ctr"
    ctr.write_text(FAKE_CTR)
    ctr.chmod(0o755)
    monkeypatch.setattr(kubelet_restart, "running_ctr", lambda: [str(ctr), "--address", "s"])
    assert kubelet_restart._kill_pod_processes("p1") == ["s1", "c1"]
    kills = [line for line in (tmp_path / "calls").read_text().splitlines() if "kill" in line]
    assert kills == ["tasks kill --signal SIGKILL s1", "tasks kill --signal SIGKILL c1"]
    # A pod without a running sandbox and container is not what the reboot needs: nothing dies.
    (tmp_path / "calls").unlink()
    with pytest.raises(AssertionError, match="want a running sandbox and container"):
        kubelet_restart._kill_pod_processes("p2")
    assert "kill" not in (tmp_path / "calls").read_text()


def test_kubelet_restart_pins_the_duplicated_checkpoint_to_kubelets_without_the_fix() -> None:
    from e2e_dra.subtests import kubelet_restart
    from e2e_dra.versions import matches

    buggy = [
        v
        for v in ("v1.35.8", "v1.36.5", "v1.37.2", "v1.38.0-beta.0")
        if matches(kubelet_restart.DUPLICATING_KUBELETS, v)
    ]
    assert buggy == ["v1.35.8"]  # 1.36 resets a claim's devices before it adds them again


def test_resource_health_expects_v1_from_1_37_and_v1alpha1_before() -> None:
    from e2e_dra.subtests.resource_health import HEALTH_SERVICES
    from e2e_dra.versions import matches

    def want(kubelet: str) -> list[str]:
        return [name for spec, name in HEALTH_SERVICES.items() if matches(spec, kubelet)]

    assert want("v1.36.5") == ["v1alpha1.DRAResourceHealth"]
    assert want("v1.37.0-alpha.0") == want("v1.37.2") == ["v1.DRAResourceHealth"]
    assert want("v1.38.0-beta.0") == ["v1.DRAResourceHealth"]


def test_the_schedulers_word_needs_to_know_when_it_started() -> None:
    from e2e_dra.subtest import Context
    from e2e_dra.subtest_kit import scheduler_reported

    ctx = Context(
        kube=None,  # type: ignore[arg-type]
        plugin=None,
        builder=None,  # type: ignore[arg-type]
        nodes=["127.0.0.1"],
        phase="after-cluster-upgrade",
        artifacts=None,  # type: ignore[arg-type]
    )
    with pytest.raises(AssertionError, match="after-cluster-upgrade: when the kube-scheduler"):
        scheduler_reported(ctx, "pod", "FailedScheduling")


def _klog(at: float, message: str) -> str:
    """A klog line as the scheduler writes it, at ``at`` (local time, microseconds)."""
    t = time.localtime(at)
    micro = int((at - int(at)) * 1e6)
    stamp = f"{t.tm_mon:02d}{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
    return f"I{stamp}.{micro:06d}    4242 schedule_one.go:797] {message}\n"


def test_only_a_no_fit_decided_after_the_slices_were_back_is_the_schedulers_verdict(
    tmp_path: Path,
) -> None:
    """The scheduler tried the pod while the restarted kubelet had wiped the devices: that "no
    fit" is stale; only one logged after the driver's last slice write counts."""
    from types import SimpleNamespace

    from e2e_dra.subtest_kit import NO_FIT, SCHEDULER, scheduler_found_no_fit

    started = time.time() - 30
    back = started + 10  # the driver's slices were written again
    log = tmp_path / "kube-scheduler-1.log"
    no_fit = (
        NO_FIT
        + ' pod="default/waiting" err="0/1 nodes are available: 1 cannot allocate all claims."'
    )
    log.write_text(
        _klog(started - 5, no_fit)  # the scheduler before this one
        + _klog(started + 2, no_fit)  # this one, with the devices wiped
        + _klog(back + 1, NO_FIT + ' pod="default/other" err="..."')
    )
    ctx = Context(
        kube=None,  # type: ignore[arg-type]
        plugin=SimpleNamespace(slices_written_at=back),  # type: ignore[arg-type]
        builder=None,  # type: ignore[arg-type]
        nodes=["127.0.0.1"],
        phase="after-cluster-upgrade",
        artifacts=tmp_path,
        started={SCHEDULER: started},
        logs={SCHEDULER: log},
    )
    with pytest.raises(WaitTimeout, match=r"to try pod waiting after .* and find no fit"):
        scheduler_found_no_fit(ctx, "waiting", "default", timeout=1)
    with log.open("a") as f:
        f.write(_klog(back + 2, no_fit))
    assert 'pod="default/waiting"' in scheduler_found_no_fit(ctx, "waiting", "default", timeout=1)
    with pytest.raises(WaitTimeout):
        scheduler_found_no_fit(ctx, "waiting", "elsewhere", timeout=1)
    not_ready = (
        NO_FIT
        + ' pod="default/late" err="0/1 nodes are available: 1 node(s) had untolerated taint"'
    )
    with log.open("a") as f:
        f.write(_klog(back + 3, not_ready))
    with pytest.raises(
        AssertionError, match=r"the last no-fit was for another reason: .*untolerated"
    ):
        scheduler_found_no_fit(ctx, "late", "default", timeout=1)


def test_a_klog_line_without_a_year_is_never_put_in_the_future() -> None:
    from e2e_dra.subtest_kit import KLOG_TIME, _klog_time

    new_year = time.mktime((2027, 1, 1, 0, 0, 5, 0, 0, -1))
    december = KLOG_TIME.match("I1231 23:59:58.500000    1 x.go:1] last year")
    january = KLOG_TIME.match("I0101 00:00:04.000000    1 x.go:1] this year")
    assert december is not None and january is not None
    assert new_year - 10 < _klog_time(december, new_year) < new_year
    assert new_year - 2 < _klog_time(january, new_year) < new_year


def test_every_phase_runs_its_check_in_each_phase_and_ends_the_chain() -> None:
    from e2e_dra.subtest_kit import every_phase

    seen: list[str] = []
    phase = every_phase(lambda ctx: seen.append(ctx))
    for name in ("creation", "upgrade", "downgrade", "re-upgrade"):
        assert phase is not None
        phase = phase(name)  # type: ignore[arg-type]
    assert phase is None
    assert seen == ["creation", "upgrade", "downgrade", "re-upgrade"]


def test_what_the_older_release_stored_must_read_back_as_sent() -> None:
    """The re-upgrade leg's comparison: what the server added is fine, what it lost or changed
    is named by its path."""
    from e2e_dra.subtest_kit import _not_kept

    sent = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}}
    defaulted = {
        "devices": {
            "requests": [
                {"name": "r", "exactly": {"deviceClassName": "c", "count": 1}},
            ]
        }
    }
    assert _not_kept(sent, defaulted, "spec") == []
    changed = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "d"}}]}}
    assert _not_kept(sent, changed, "spec") == [
        "spec.devices.requests[0].exactly.deviceClassName: sent 'c', reads 'd'"
    ]
    assert _not_kept(sent, {"devices": {"requests": []}}, "spec") == [
        "spec.devices.requests: sent [{'name': 'r', 'exactly': {'deviceClassName': 'c'}}], reads []"
    ]


def test_what_a_phase_asks_for_while_the_kubelet_is_down_tells_the_next_phase_how_it_went() -> None:
    """The next phase must tell a deletion that happened from one the step gave no chance
    (control-plane-first never stops the kubelet: nothing to prove) from one that failed (the
    phase fails, naming it)."""
    from e2e_dra.subtest import WhileKubeletDown

    done = WhileKubeletDown("delete pod p", lambda kube: None, done_in="1-v1.38.0")
    assert done.happened()
    skipped = WhileKubeletDown("delete pod p", lambda kube: None, not_done="no kubelet restart")
    assert not skipped.happened() and skipped.not_done == "no kubelet restart"
    failed = WhileKubeletDown("delete pod p", lambda kube: None, error=RuntimeError("403"))
    with pytest.raises(
        AssertionError, match="delete pod p, while the kubelet was down, failed: 403"
    ):
        failed.happened()
