"""The subtests and the objects they create, checked without a cluster.

Shapes are validated against the ``kubernetes`` package's models, which forbid unknown fields:
a misspelt field name fails here instead of as a 400 twenty minutes into a real run.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
from kubernetes.client import models

import subtests
from e2e_dra.builder import Builder, is_unschedulable, object_path
from e2e_dra.errors import E2EDRAError
from e2e_dra.subtest import Subtest, discover
from subtests import device_taints, resource_claim_device_status

EXPECTED = {
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
}


def valid(obj: dict) -> dict:
    """``obj`` as the API would accept it, field names and types (raises if not)."""
    MODELS[obj["apiVersion"], obj["kind"]].model_validate(obj)
    return obj


def builder(suffix: str = "core-dra") -> Builder:
    # Building objects never touches the client: none is needed.
    return Builder(None, suffix, image="example.test/busybox:1")  # type: ignore[arg-type]


# --- discovery ----------------------------------------------------------------------------------


def test_discovery_finds_every_subtest_once() -> None:
    found = discover()
    assert {s.name for s in found} == EXPECTED
    assert len(found) == len(EXPECTED)
    assert [s.name for s in found] == sorted(s.name for s in found)


def test_subtest_name_is_its_module_name() -> None:
    modules = [
        m.name for m in pkgutil.iter_modules(subtests.__path__) if m.name[0] != "_" and not m.ispkg
    ]
    assert len(modules) == len(EXPECTED)
    for module_name in modules:
        subtest = importlib.import_module(f"subtests.{module_name}").SUBTEST
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
    assert all(not s.requires for s in by_name.values() if s is not workload)


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
        "resource-claim-device-status",
    }


def test_node_device_pools_match_upstream() -> None:
    by_name = {s.name: s for s in discover()}
    for name, count in [
        ("core-dra", 8),
        ("extended-resource-explicit", 8),
        ("extended-resource-implicit", 8),
        ("workload-resourceclaims", 1),
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


def test_default_class_and_claim() -> None:
    b = builder("core-dra")
    assert valid(b.device_class()) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "defaultcore-dra-class"},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "defaultcore-dra.k8s.io"'}}]
        },
    }
    claim = valid(b.external_claim())
    assert claim["metadata"] == {"name": "external-claimcore-dra", "namespace": "default"}
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


def test_unschedulable_means_pending_with_reason() -> None:
    def pod(phase: str, reason: str) -> dict:
        condition = {"type": "PodScheduled", "status": "False", "reason": reason}
        return {"status": {"phase": phase, "conditions": [condition]}}

    assert is_unschedulable(pod("Pending", "Unschedulable"))
    assert not is_unschedulable(pod("Pending", "SchedulerError"))
    assert not is_unschedulable(pod("Running", "Unschedulable"))
    assert not is_unschedulable({"status": {"phase": "Pending"}})
