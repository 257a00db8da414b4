"""The prepared-devices net: the kubelet's checkpoint held to the claims' allocations, on
checkpoints written as the kubelet writes them (``checkpoint/v1``) and claims as the API serves
them."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_dra._suite._prepared import allocated, mismatches, prepared, read_checkpoint

DRIVER = "upstream.e2e.k8s.io"
POOL = "127.0.0.1"


def _entry(uid: str, devices: list[tuple[str, str]], name: str = "c", driver: str = DRIVER) -> dict:
    """A checkpoint entry as the kubelet writes it from a NodePrepareResources answer."""
    return {
        "ClaimUID": uid,
        "ClaimName": name,
        "Namespace": "default",
        "PodUIDs": {"pod-uid": {}},
        "DriverState": {
            driver: {
                "Devices": [
                    {"PoolName": p, "DeviceName": d, "RequestNames": ["r"], "CDIDeviceIDs": []}
                    for p, d in devices
                ]
            }
        },
    }


def _claim(uid: str, devices: list[tuple[str, str]] | None, name: str = "c") -> dict:
    claim: dict = {
        "metadata": {"name": name, "namespace": "default", "uid": uid, "labels": {}},
        "status": {},
    }
    if devices is not None:
        results = [{"request": "r", "driver": DRIVER, "pool": p, "device": d} for p, d in devices]
        claim["status"]["allocation"] = {"devices": {"results": results}}
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-uid"}]
    return claim


def _by_name(*claims: dict) -> dict[tuple[str, str], dict]:
    return {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}


def _find(entries: list[dict], claims: dict) -> list[str]:
    return [f.message for f in mismatches(entries, claims, lambda claim: "owner")]


def test_what_was_prepared_as_allocated_is_no_finding() -> None:
    entry = _entry("u1", [(POOL, "device-00"), (POOL, "device-01")])
    claim = _claim("u1", [(POOL, "device-01"), (POOL, "device-00")])
    assert (
        prepared(entry)
        == allocated(claim)
        == {(DRIVER, POOL, "device-00"), (DRIVER, POOL, "device-01")}
    )
    assert _find([entry], _by_name(claim)) == []


def test_an_answer_with_pool_and_device_swapped_is_a_finding_naming_both() -> None:
    entry = _entry("u1", [("device-00", POOL)])
    (said,) = _find([entry], _by_name(_claim("u1", [(POOL, "device-00")])))
    assert said == (
        f"prepared devices: the kubelet's checkpoint says driver(s) prepared {DRIVER} (pool "
        f"'device-00', device '{POOL}') for ResourceClaim default/c, which its allocation does not "
        f"have (allocated: {DRIVER}/{POOL}/device-00): a NodePrepareResources answer that names "
        "other devices than the claim's"
    )


def test_another_device_or_another_drivers_device_is_a_finding_too() -> None:
    claim = _claim("u1", [(POOL, "device-00")])
    assert _find([_entry("u1", [(POOL, "device-03")])], _by_name(claim))
    assert _find([_entry("u1", [(POOL, "device-00")], driver="other.k8s.io")], _by_name(claim))


def test_a_claim_gone_replaced_or_deallocated_is_the_lifecycle_nets_business() -> None:
    wrong = _entry("u1", [(POOL, "device-09")])
    assert _find([wrong], {}) == []  # gone: the unprepare is pending
    assert _find([wrong], _by_name(_claim("u2", [(POOL, "device-00")]))) == []  # made anew
    assert _find([wrong], _by_name(_claim("u1", None))) == []  # deallocated
    again = _claim("u1", [(POOL, "device-00")])  # given back, allocated again for another pod
    again["status"]["reservedFor"][0]["uid"] = "next-pod-uid"
    assert _find([wrong], _by_name(again)) == []  # the kubelet's entry of before


def test_the_checkpoint_file_as_the_kubelet_writes_it(tmp_path: Path) -> None:
    file = tmp_path / "dra_manager_state"
    assert read_checkpoint(file) == []  # nothing prepared yet
    entries = [_entry("u1", [(POOL, "device-00")])]
    data = {"kind": "DRACheckpoint", "apiVersion": "checkpoint/v1", "ClaimInfoStateList": entries}
    file.write_text(json.dumps({"Data": json.dumps(data), "Checksum": 12345}))
    assert read_checkpoint(file) == entries
    file.write_text('{"Data": "{\\"kind\\": \\"DRACheck')  # caught while being written
    assert read_checkpoint(file) is None
