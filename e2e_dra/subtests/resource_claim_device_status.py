"""resource-claim-device-status: ResourceClaim ``status.devices`` entries written by different
field managers (as drivers do) survive upgrade and downgrade, through v1beta2 and v1.

No driver is involved: the allocation is written by hand for three fake drivers, and the
device class ``foo`` does not exist. What is tested is the API server's storage, conversion and
server-side-apply ownership of the entries.

Each of the first three phases also deallocates a claim whose status lists a device: the API
server must drop the entries of devices no longer allocated (``dropDeallocatedStatusDevices``),
as the claim controller relies on when it deallocates; an entry left behind makes every later
status update of the claim invalid, so the claim is never freed.
"""

from __future__ import annotations

import json

from e2e_dra.builder import RESOURCE_V1 as V1
from e2e_dra.builder import Builder, NotFound
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import RESOURCE_V1BETA2 as V1BETA2
from e2e_dra.subtest_kit import older_writes_hold

CLAIM = "claim-with-device-status"
DEALLOCATED = "claim-deallocated-with-device-status"
FINALIZER = "test.example.com/my-test-finalizer"

ALLOCATION = {
    "devices": {
        "results": [
            {"request": "foo", "driver": "one", "pool": "global", "device": "my-device"},
            {"request": "foo", "driver": "two", "pool": "global", "device": "another-device"},
            {"request": "foo", "driver": "three", "pool": "global", "device": "my-device"},
        ]
    }
}
# Without upstream's "data" field: server-side apply re-encodes raw extensions with negligible
# differences that would break the equality checks.
DEVICE_ONE = {
    "driver": "one",
    "pool": "global",
    "device": "my-device",
    "networkData": {
        "interfaceName": "net-1",
        "ips": ["10.9.8.0/24", "2001:db8::/64"],
        "hardwareAddress": "ea:9f:cb:40:b1:7b",
    },
}


def _device(driver: str, device: str, interface: str) -> dict:
    return {
        "driver": driver,
        "pool": "global",
        "device": device,
        "networkData": {"interfaceName": interface},
    }


DEVICE_TWO = _device("two", "another-device", "net-2")
DEVICE_TWO_UPDATED = _device("two", "another-device", "yet-another-net")
DEVICE_THREE = _device("three", "my-device", "net-3")


def initial(ctx: Context) -> Phase:
    version = ctx.builder.api_version(V1BETA2, "resourceclaims/status")
    b = ctx.builder
    (claim,) = b.create(
        {
            "apiVersion": version,
            "kind": "ResourceClaim",
            "metadata": {"name": CLAIM, "namespace": ctx.namespace},
            "spec": {
                "devices": {"requests": [{"name": "foo", "exactly": {"deviceClassName": "foo"}}]}
            },
        },
    )
    b.defer(lambda b: remove_claim(b, missing_ok=True))

    claim["metadata"]["finalizers"] = [FINALIZER]
    claim = b.update("resourceclaims", CLAIM, claim, version=version)
    claim["status"] = {"allocation": ALLOCATION}
    claim = b.update("resourceclaims", CLAIM, claim, version=version, subresource="status")

    claim["status"]["devices"] = [DEVICE_ONE]
    claim = b.update("resourceclaims", CLAIM, claim, version=version, subresource="status")
    _expect_devices(claim, [DEVICE_ONE], "after update")

    claim = _apply_status(ctx, version, "manager-1", [DEVICE_TWO])
    _expect_devices(claim, [DEVICE_ONE, DEVICE_TWO], "after apply by manager-1")
    claim = _apply_status(ctx, version, "manager-2", [DEVICE_THREE])
    _expect_devices(claim, [DEVICE_ONE, DEVICE_TWO, DEVICE_THREE], "after apply by manager-2")
    ctx.log(json.dumps(claim, indent=2))
    _deallocation_drops_device_status(ctx)
    return after_upgrade


def after_upgrade(ctx: Context) -> Phase:
    claim = _apply_status(
        ctx, ctx.builder.api_version(V1, "resourceclaims/status"), "manager-1", [DEVICE_TWO_UPDATED]
    )
    _expect_devices(claim, [DEVICE_ONE, DEVICE_TWO_UPDATED, DEVICE_THREE], "after v1 apply")
    _deallocation_drops_device_status(ctx)
    return after_downgrade


def after_downgrade(ctx: Context) -> Phase:
    version = ctx.builder.api_version(V1BETA2, "resourceclaims/status")
    # An apply that states nothing removes what manager-2 owned.
    claim = _apply_status(ctx, version, "manager-2", None)
    _expect_devices(claim, [DEVICE_ONE, DEVICE_TWO_UPDATED], "after empty apply by manager-2")
    remove_claim(ctx.builder)
    _deallocation_drops_device_status(ctx)
    return older_writes_hold


def _deallocation_drops_device_status(ctx: Context) -> None:
    """A claim allocated by hand, with a device's status written, is deallocated by a status
    update that still carries that status (as the claim controller sends it): the stored claim
    has no device status left. Finalized while allocated, as every allocated claim must be."""
    b = ctx.builder
    b.defer(lambda b: remove_claim(b, DEALLOCATED, missing_ok=True))
    with ctx.step("deallocating a claim drops the status of its devices"):
        (claim,) = b.create(
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "metadata": {
                    "name": DEALLOCATED,
                    "namespace": ctx.namespace,
                    "finalizers": [FINALIZER],
                },
                "spec": {
                    "devices": {
                        "requests": [{"name": "foo", "exactly": {"deviceClassName": "foo"}}]
                    }
                },
            }
        )
        claim["status"] = {"allocation": ALLOCATION}
        claim = b.update("resourceclaims", DEALLOCATED, claim, version=V1, subresource="status")
        claim["status"]["devices"] = [DEVICE_ONE]
        claim = b.update("resourceclaims", DEALLOCATED, claim, version=V1, subresource="status")
        _expect_devices(claim, [DEVICE_ONE], "while allocated")
        claim["status"]["allocation"] = None
        claim = b.update("resourceclaims", DEALLOCATED, claim, version=V1, subresource="status")
        _expect_devices(claim, [], "after the deallocation")
        remove_claim(b, DEALLOCATED)


def _apply_status(ctx: Context, version: str, manager: str, devices: list[dict] | None) -> dict:
    body: dict = {
        "apiVersion": version,
        "kind": "ResourceClaim",
        "metadata": {"name": CLAIM, "namespace": ctx.namespace},
    }
    if devices is not None:
        body["status"] = {"devices": devices}
    return ctx.builder.patch(
        "resourceclaims",
        CLAIM,
        body,
        version=version,
        subresource="status",
        kind="apply",
        fieldManager=manager,
        force=True,
    )


def _expect_devices(claim: dict, expected: list[dict], when: str) -> None:
    # The server writes unset fields as null ("conditions": null); Go compares them as absent.
    actual = [
        {k: v for k, v in device.items() if v is not None}
        for device in claim.get("status", {}).get("devices") or []
    ]
    assert actual == expected, f"status.devices {when}: expected {expected}, got {actual}"


def remove_claim(b: Builder, name: str = CLAIM, *, missing_ok: bool = False) -> None:
    """Deallocate, drop the test finalizer, delete: a finalized claim never goes away by itself.

    The clean-up says ``missing_ok``: a claim that was already being deleted goes away with its
    finalizer, before the delete."""
    try:
        claim = b.get("resourceclaims", name, version=V1)
    except NotFound:  # clean-up after a phase that failed before it was created
        return
    if claim.get("status", {}).get("allocation"):
        claim["status"]["allocation"] = None
        claim = b.update("resourceclaims", name, claim, version=V1, subresource="status")
    claim["metadata"]["finalizers"] = None
    b.update("resourceclaims", name, claim, version=V1)
    b.delete("resourceclaims", name, version=V1, missing_ok=missing_ok)


SUBTEST = Subtest(
    name="resource-claim-device-status", keps=(4817,), initial=initial, requires=(V1BETA2, V1)
)
