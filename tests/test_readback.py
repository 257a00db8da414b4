"""The read-back net's judgement, on plain objects and the schema a real v1.37.2 API server
publishes for ResourceClaims (its OpenAPI v3 document, trimmed to what a claim reaches)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from e2e_dra._suite._readback import Schema, _schema_of, read_back_problems, unread

SCHEMAS = json.loads(
    (Path(__file__).parent / "data/openapi/resource.k8s.io-v1-claim-v1.37.2.json").read_text()
)["components"]["schemas"]


@pytest.fixture
def schema() -> Schema:
    found = _schema_of(SCHEMAS, "resource.k8s.io/v1", "ResourceClaim")
    assert found is not None
    return found


def claim(rv: str = "7") -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": rv,
            "labels": {"e2e-dra/subtest": "core-dra"},
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "managedFields": [{"manager": "kube-scheduler", "time": "2026-12-07T09:00:00Z"}],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "exactly": {
                            "deviceClassName": "dc",
                            "count": 1,
                            "allocationMode": "ExactCount",
                            "tolerations": [{"key": "k", "operator": "Exists"}],
                        },
                    }
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "r",
                            "driver": "d",
                            "pool": "p",
                            "device": "dev-0",
                            "shareID": "3c1b2a6e-0b8f-4a55-9b4f-2f2b3f1d0c11",
                            "consumedCapacity": {"memory": "4Gi"},
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}],
        },
    }


def test_an_object_read_back_unchanged_is_fine(schema: Schema) -> None:
    assert read_back_problems("ResourceClaim", claim(), claim(), schema) == []


def test_fields_the_reading_server_adds_are_fine(schema: Schema) -> None:
    now = claim()
    now["status"]["devices"] = []
    now["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = False
    assert read_back_problems("ResourceClaim", claim(), now, schema) == []


def test_a_field_it_knows_but_drops_is_a_finding_naming_it(schema: Schema) -> None:
    now = claim()
    del now["status"]["allocation"]["devices"]["results"][0]["shareID"]
    (problem,) = read_back_problems("ResourceClaim", claim(), now, schema)
    assert "was not written during it, but reads back otherwise" in problem
    assert "status.allocation.devices.results[0].shareID is gone" in problem


def test_a_value_read_otherwise_is_a_finding(schema: Schema) -> None:
    now = claim()
    now["spec"]["devices"]["requests"][0]["exactly"]["tolerations"][0]["operator"] = "Equal"
    (problem,) = read_back_problems("ResourceClaim", claim(), now, schema)
    assert "spec.devices.requests[0].exactly.tolerations[0].operator was 'Exists'" in problem


def test_metadata_counts_but_managed_fields_do_not(schema: Schema) -> None:
    now = claim()
    now["metadata"]["managedFields"] = []
    assert read_back_problems("ResourceClaim", claim(), now, schema) == []
    del now["metadata"]["labels"]
    (problem,) = read_back_problems("ResourceClaim", claim(), now, schema)
    assert "metadata.labels is gone" in problem


def test_a_field_newer_than_the_reading_release_may_be_gone(schema: Schema) -> None:
    """What the newer release wrote in a field the older one's schema does not have is read
    without it after a downgrade: the API's documented way, no finding. Under a map (labels,
    a capacity's name) every key counts."""
    was = claim()
    was["spec"]["devices"]["requests"][0]["exactly"]["aFieldOf2030"] = {"x": 1}
    was["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["cores"] = "2"
    now = claim()
    (problem,) = read_back_problems("ResourceClaim", was, now, schema)
    assert "aFieldOf2030" not in problem
    assert "consumedCapacity.cores is gone" in problem


def test_a_claim_written_during_the_step_keeps_its_spec_and_allocation(schema: Schema) -> None:
    now = claim(rv="9")
    now["status"]["reservedFor"] = []  # the controller let its pod go: fine
    now["metadata"]["labels"] = {}
    assert read_back_problems("ResourceClaim", claim(), now, schema) == []
    now["status"]["allocation"]["devices"]["results"][0]["device"] = "dev-1"
    (problem,) = read_back_problems("ResourceClaim", claim(), now, schema)
    assert problem.startswith("changed what the API makes immutable")
    assert "status.allocation.devices.results[0].device was 'dev-0', reads 'dev-1'" in problem


def test_a_deallocated_claim_is_no_finding(schema: Schema) -> None:
    now = claim(rv="9")
    del now["status"]["allocation"]
    assert read_back_problems("ResourceClaim", claim(), now, schema) == []


def test_other_kinds_written_during_the_step_are_not_judged(schema: Schema) -> None:
    now = claim(rv="9")
    now["spec"] = {}
    assert read_back_problems("ResourceSlice", claim(), now, None) == []
    assert read_back_problems("ResourceClaim", claim(), now, schema) != []


def test_without_a_schema_every_field_gone_counts() -> None:
    was = {"spec": {"a": 1, "b": {"c": [1, 2]}}}
    assert unread(was, {"spec": {"b": {"c": [1, 2]}}}, None) == ["spec.a is gone (was 1)"]
    assert unread(was, {"spec": {"a": 1, "b": {"c": [1]}}}, None) == [
        "spec.b.c was [1, 2], reads [1]"
    ]
    assert unread(copy.deepcopy(was), was, None) == []
