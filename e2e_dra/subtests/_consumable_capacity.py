"""What consumable-capacity (DRAConsumableCapacity) shares with its gate-cycle twin: the shared
device, the claims asking for shares of it, and the checks on what the scheduler recorded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from e2e_dra.builder import RESOURCE_V1, Builder, request
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context
from e2e_dra.subtest_kit import claim_env

GATE = "DRAConsumableCapacity"
POOL = "consumable-capacity"
DEVICE = "shared-device"
CAPACITY = "memory"
TOTAL = "10Gi"
# Each share consumes 2Gi + n * 2Gi: a request is rounded up to the next such value.
DEFAULT_REQUEST = "2Gi"
"""What a share without a capacity request consumes: the request policy's default."""
REQUEST_POLICY: dict[str, Any] = {
    "default": DEFAULT_REQUEST,
    "validRange": {"min": "2Gi", "step": "2Gi"},
}
SHARED_DEVICE = {
    "name": DEVICE,
    "allowMultipleAllocations": True,
    "capacity": {CAPACITY: {"value": TOTAL, "requestPolicy": REQUEST_POLICY}},
}
# Claims A and B: request -> memory asked for, and request -> memory consumed after rounding.
FIRST_SHARES = [({"big": "3Gi"}, {"big": "4Gi"}), ({"small": "1Gi"}, {"small": "2Gi"})]
CLAIM_GONE_TIMEOUT = 60.0
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

Shares = dict[str, dict]
"""request name -> {"device", "shareID", "consumedCapacity"} of one claim's allocation."""


def resources(nodes: Sequence[str]) -> list[Pool]:
    # One device for the whole cluster would do; a node-local pool is what a driver publishes.
    return [Pool(POOL, slices=[{"devices": [SHARED_DEVICE]}], node_name=nodes[0])]


def capacity_claim(b: Builder, requests: dict[str, str], selector: str | None = None) -> dict:
    """A claim with one request per entry of ``requests`` (request name -> memory to ask for),
    each kept by the CEL ``selector`` (if any) to some of the class's devices, and the default
    opaque config, which applies to each of them."""
    selectors = [] if selector is None else [selector]
    return b.external_claim(
        requests=[
            request(name, selectors=selectors, capacity={CAPACITY: memory})
            for name, memory in requests.items()
        ]
    )


def claim_and_pod(
    ctx: Context, requests: dict[str, str], *, selector: str | None = None
) -> tuple[dict, dict]:
    """A :func:`capacity_claim` (kept to ``selector``'s devices) and a pod that uses it, both
    created.

    The claim is sent as compact JSON, as Go clients send it: the scheduler copies its opaque
    parameters' bytes into ``status.allocation``, and the driver's server-side apply of
    ``status.devices`` (:func:`report_status`) is refused (422, status.allocation is immutable)
    unless they were compact (docs/kubernetes-findings.md, finding 4)."""
    b = ctx.builder
    claim = capacity_claim(b, requests, selector)
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, compact=True)
    b.create(pod)
    return claim, pod


def check_pods(ctx: Context, pods: dict[str, dict], claims: dict[str, dict]) -> None:
    """Each pod runs with its own claim prepared (the kubelet prepared every share)."""
    for claim_name, pod in pods.items():
        ctx.builder.test_pod(pod, env=claim_env(claims[claim_name]))


def results(ctx: Context, claim_name: str) -> list[dict]:
    claim = ctx.builder.get("resourceclaims", claim_name)
    allocation = (claim.get("status") or {}).get("allocation")
    assert allocation, f"ResourceClaim {claim_name} is not allocated: {claim.get('status')}"
    return allocation["devices"]["results"]


def shares_of(ctx: Context, claim: dict, consumed: dict[str, str]) -> Shares:
    """The claim's results, checked: each request got a share of the shared device, consuming
    ``consumed`` (request -> memory after the request policy's rounding)."""
    name = claim["metadata"]["name"]
    shares: Shares = {}
    for result in results(ctx, name):
        where = f"ResourceClaim {name} request {result.get('request')}"
        assert (result.get("driver"), result.get("pool"), result.get("device")) == (
            ctx.builder.driver_name,
            POOL,
            DEVICE,
        ), f"{where}: allocated {result}, not a share of {POOL}/{DEVICE}"
        share = result.get("shareID")
        assert isinstance(share, str) and UUID.match(share), (
            f"{where}: shareID {share!r} in {result}"
        )
        used = result.get("consumedCapacity") or {}
        assert _amounts(used) == _amounts({CAPACITY: consumed[result["request"]]}), (
            f"{where}: consumedCapacity {used}, want {CAPACITY}={consumed[result['request']]} "
            f"(the request rounded up by {REQUEST_POLICY})"
        )
        shares[result["request"]] = {
            "device": (result["driver"], result["pool"], result["device"]),
            "shareID": share,
            "consumedCapacity": dict(used),
        }
    assert sorted(shares) == sorted(consumed), (
        f"ResourceClaim {name}: results for {sorted(shares)}, want {sorted(consumed)}"
    )
    return shares


def _amounts(quantities: dict[str, str]) -> dict[str, Decimal]:
    return {key: parse_quantity(value) for key, value in quantities.items()}


def check_distinct(recorded: dict[str, Shares]) -> None:
    ids = [share["shareID"] for shares in recorded.values() for share in shares.values()]
    assert len(ids) == len(set(ids)), f"two shares of {DEVICE} have the same shareID: {recorded}"


def check_recorded(ctx: Context, claims: dict[str, dict], recorded: dict[str, Shares]) -> None:
    """Every claim's results are what the scheduler wrote: device, shareID, consumedCapacity."""
    for name in claims:
        now: Shares = {
            r["request"]: {
                "device": (r.get("driver"), r.get("pool"), r.get("device")),
                "shareID": r.get("shareID"),
                "consumedCapacity": dict(r.get("consumedCapacity") or {}),
            }
            for r in results(ctx, name)
        }
        assert now == recorded[name], (
            f"ResourceClaim {name}: allocation results changed since they were recorded: "
            f"now {now}, recorded {recorded[name]}"
        )


def check_left(
    ctx: Context, *, too_much: str, fits: str | None, selector: str | None = None
) -> None:
    """A claim for ``too_much`` waits; one for ``fits`` (if any) runs. Both are removed again,
    and waited for, so that the next check sees the device as it was. ``selector``: a CEL
    selector for both (see :func:`capacity_claim`)."""
    b = ctx.builder
    claim, pod = claim_and_pod(ctx, {"probe": too_much}, selector=selector)
    b.wait_unschedulable(pod["metadata"]["name"])
    delete_pod_and_claim(ctx, pod, claim)
    if fits is not None:
        claim, pod = claim_and_pod(ctx, {"probe": fits}, selector=selector)
        b.test_pod(pod, env=claim_env(claim))
        delete_pod_and_claim(ctx, pod, claim)


def delete_pod_and_claim(ctx: Context, pod: dict, claim: dict) -> None:
    """Strict: the pod and the claim must still be there; returns when both are gone."""
    b = ctx.builder
    b.delete_pod_and_wait(pod["metadata"]["name"])
    b.delete("resourceclaims", claim["metadata"]["name"])
    b.wait_gone("resourceclaims", claim["metadata"]["name"], timeout=CLAIM_GONE_TIMEOUT)


def status_entries(shares: Shares) -> list[dict]:
    """One ``status.devices`` entry per share; they differ only by ``shareID`` and their data."""
    return [
        {
            "driver": share["device"][0],
            "pool": share["device"][1],
            "device": share["device"][2],
            "shareID": share["shareID"],
            "networkData": {"interfaceName": f"share-{name}"},
        }
        for name, share in sorted(shares.items())
    ]


def report_status(ctx: Context, claim_name: str, shares: Shares) -> list[dict]:
    """Apply :func:`status_entries` as the driver would (its field manager); returns the entries
    as stored."""
    driver = next(iter(shares.values()))["device"][0]
    entries = status_entries(shares)
    body = {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": ctx.namespace},
        "status": {"devices": entries},
    }
    claim = ctx.builder.patch(
        "resourceclaims",
        claim_name,
        body,
        subresource="status",
        kind="apply",
        fieldManager=driver,
        force=True,
    )
    stored = _devices(claim)
    entries.sort(key=lambda device: device["shareID"])
    assert stored == entries, (
        f"ResourceClaim {claim_name}: status.devices stored {stored}, sent {entries}"
    )
    return stored


def _devices(claim: dict) -> list[dict]:
    # The server writes unset fields as null; compare them as absent.
    return sorted(
        (
            {k: v for k, v in device.items() if v is not None}
            for device in (claim.get("status") or {}).get("devices") or []
        ),
        key=lambda device: device.get("shareID") or "",
    )


def check_status(ctx: Context, claim_name: str, entries: list[dict]) -> None:
    claim = ctx.builder.get("resourceclaims", claim_name)
    now = _devices(claim)
    want = sorted(entries, key=lambda device: device["shareID"])
    assert now == want, f"ResourceClaim {claim_name}: status.devices now {now}, written {want}"
