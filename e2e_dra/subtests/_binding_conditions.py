"""What binding-conditions (DRADeviceBindingConditions) shares with its gate-cycle twin: the
attachable devices, the claims that wait for them, and setting and checking their conditions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from e2e_dra.builder import DEFAULT_ENV, DEFAULT_REQUEST, RESOURCE_V1
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context
from e2e_dra.subtest_kit import request_env, scheduler_reported
from e2e_dra.waits import consistently, eventually

GATES = ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus")
POOL = "binding-conditions"
ATTACHED = "attached"
FAILED = "failed"
DEVICES = [
    {
        "name": f"attachable-{index}",
        "bindsToNode": True,
        "bindingConditions": [ATTACHED],
        "bindingFailureConditions": [FAILED],
    }
    for index in range(3)
]
ALLOCATION_TIMEOUT = 60.0
# How long a waiting pod must stay unbound. The scheduler checks the conditions as soon as it
# starts waiting (then every 5 s): a scheduler that did not wait binds at once, after the event.
WAITING = 3.0
# The scheduler's binding timeout (DynamicResourcesBindingTimeoutDefault in 1.37.2 and 1.38; the
# cluster sets none): a claim whose device is not ready that long after its allocation is given
# up even without a failure.
BINDING_TIMEOUT = 600.0
# How long a failed device may keep its claim: the scheduler sees the failure within 5 s (PreBind
# looks that often), then backoff and requeue add a few more. Well under BINDING_TIMEOUT, so a
# scheduler that gives the device up only when the binding times out fails the check.
RESCHEDULE_TIMEOUT = 120.0
# The scheduler's event when PreBind starts waiting for a device's binding conditions.
PENDING_EVENT = "BindingConditionsPending"


def resources(nodes: Sequence[str]) -> list[Pool]:
    # Cluster-wide: bindsToNode is what ties the allocation to one node.
    return [Pool(POOL, slices=[{"devices": DEVICES}], all_nodes=True)]


def claim_and_pod(ctx: Context) -> tuple[str, dict]:
    """A claim for one attachable device, with the default opaque config, and a pod that uses
    it, both created; the claim's name and the pod.

    The claim is sent as compact JSON (``{"a":"b"}``), as Go clients and kubectl send it, not as
    this client's ``json.dumps`` (``{"a": "b"}``). The API server keeps the parameters' bytes as
    sent and the scheduler copies them into ``status.allocation``; the driver's server-side apply
    of the status (:func:`set_condition`) rebuilds the allocation compact, and unless those bytes
    are the stored ones the allocation no longer compares equal to itself: 422, status.allocation
    is immutable (seen with 1.36.5 and 1.37.2 while these claims were sent with spaces).
    docs/kubernetes-findings.md, finding 4; e2e_dra/subtests/claim_metadata.py pins it down."""
    b = ctx.builder
    claim = b.external_claim()
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, compact=True)
    b.create(pod)
    return claim["metadata"]["name"], pod


def pod_env(claim_name: str) -> list[str]:
    """What the driver gives a pod of claim ``claim_name``: the claim's line and the lines of
    its opaque config."""
    return [request_env(claim_name, DEFAULT_REQUEST), *DEFAULT_ENV]


def check_pod(ctx: Context, pod: dict) -> None:
    """Runs, with its claim prepared by the driver, opaque config included."""
    claim = pod["spec"]["resourceClaims"][0]["resourceClaimName"]
    ctx.builder.test_pod(pod, env=pod_env(claim))


def read_claim(ctx: Context, name: str) -> dict:
    return ctx.builder.get("resourceclaims", name)


def _allocation(ctx: Context, claim: dict, pod: dict) -> dict:
    """The claim's allocation, checked: one attachable device of our pool, both condition lists
    copied from the device, pinned to the one node, and reserved for the pod."""
    name = claim["metadata"]["name"]
    allocation = claim["status"]["allocation"]
    (result,) = allocation["devices"]["results"]
    where = f"ResourceClaim {name}"
    assert (result.get("driver"), result.get("pool")) == (ctx.builder.driver_name, POOL), (
        f"{where}: allocated {result}, not a device of pool {POOL}"
    )
    assert result.get("bindingConditions") == [ATTACHED], (
        f"{where}: the allocation result has bindingConditions {result.get('bindingConditions')}, "
        f"want [{ATTACHED!r}] copied from the device (result: {result})"
    )
    assert result.get("bindingFailureConditions") == [FAILED], (
        f"{where}: the allocation result has bindingFailureConditions "
        f"{result.get('bindingFailureConditions')}, want [{FAILED!r}] copied from the device "
        f"(result: {result})"
    )
    node = ctx.nodes[0]
    pinned = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    assert allocation.get("nodeSelector") == pinned, (
        f"{where}: bindsToNode should pin the allocation to node {node}; "
        f"nodeSelector is {allocation.get('nodeSelector')}"
    )
    assert allocation.get("allocationTimestamp"), f"{where}: no allocationTimestamp: {allocation}"
    reserved = [c.get("name") for c in claim["status"].get("reservedFor") or []]
    assert reserved == [pod["metadata"]["name"]], f"{where}: reserved for {reserved}"
    return allocation


def wait_for_binding_conditions(ctx: Context, claim_name: str, pod: dict) -> dict:
    """Until the claim is allocated and the scheduler says it waits for the binding conditions;
    then the pod must stay unbound (while nothing is attached). The allocation, checked."""
    claim = eventually(
        lambda: read_claim(ctx, claim_name),
        what=f"ResourceClaim {claim_name} to be allocated and reserved",
        timeout=ALLOCATION_TIMEOUT,
        until=lambda c: bool((c.get("status") or {}).get("reservedFor")),
    )
    allocation = _allocation(ctx, claim, pod)
    pod_name = pod["metadata"]["name"]
    eventually(
        lambda: ctx.builder.list(
            "events",
            fieldSelector=f"involvedObject.name={pod_name},reason={PENDING_EVENT}",
        ),
        what=f"the scheduler to report that pod {pod_name} waits for binding conditions",
        timeout=ALLOCATION_TIMEOUT,
    )
    _check_unbound(ctx, pod_name)
    return allocation


def _check_unbound(ctx: Context, pod_name: str) -> None:
    consistently(
        lambda: ctx.builder.read_pod(pod_name),
        what=f"pod {pod_name} pending without a node",
        duration=WAITING,
        holds=lambda p: not p["spec"].get("nodeName") and p["status"].get("phase") == "Pending",
    )


def check_still_waiting(ctx: Context, claim_name: str, pod: dict, allocation: dict) -> None:
    """After a restart the claim keeps its allocation and the pod is still held back, by the
    scheduler that runs now: it took the pod to PreBind and waits there itself."""
    claim = read_claim(ctx, claim_name)
    now = _allocation(ctx, claim, pod)
    assert now == allocation, (
        f"ResourceClaim {claim_name}: allocation changed while its pod waited: "
        f"now {now}, before {allocation}"
    )
    scheduler_reported(ctx, pod["metadata"]["name"], PENDING_EVENT)
    _check_unbound(ctx, pod["metadata"]["name"])


def device_condition(result: dict, condition: str, generation: int | None, why: str) -> dict:
    """A ``status.devices`` entry for the device of allocation ``result`` with ``condition``
    true (what a driver's controller reports once the device is attached, or has failed).
    ``generation``: the claim's, where the server sets one (1.36 does not)."""
    observed = {} if generation is None else {"observedGeneration": generation}
    return {
        "driver": result["driver"],
        "pool": result["pool"],
        "device": result["device"],
        "conditions": [
            {
                "type": condition,
                "status": "True",
                "reason": "E2EDRA",
                "message": why,
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **observed,
            }
        ],
    }


def set_condition(ctx: Context, claim_name: str, condition: str) -> None:
    """Report ``condition`` as true for the claim's device, as the driver's controller would
    (server-side apply under the driver's name)."""
    claim = read_claim(ctx, claim_name)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    entry = device_condition(
        result, condition, claim["metadata"].get("generation"), f"set by the test ({ctx.phase})"
    )
    body = {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": ctx.namespace},
        "status": {"devices": [entry]},
    }
    ctx.log(f"ResourceClaim {claim_name}: {condition}=True for device {result['device']}")
    ctx.builder.patch(
        "resourceclaims",
        claim_name,
        body,
        subresource="status",
        kind="apply",
        fieldManager=result["driver"],
        force=True,
    )


def claim_status(ctx: Context, claim_name: str) -> dict:
    """What must survive: the allocation and the device status (as the server stores them)."""
    status = read_claim(ctx, claim_name)["status"]
    return {"allocation": status["allocation"], "devices": status.get("devices")}


def check_recorded(ctx: Context, recorded: dict[str, dict], pods: dict[str, dict]) -> None:
    for claim_name, status in recorded.items():
        now = claim_status(ctx, claim_name)
        assert now == status, (
            f"ResourceClaim {claim_name}: status changed since its pod bound: "
            f"now {now}, recorded {status}"
        )
        check_pod(ctx, pods[claim_name])


def fail_and_reallocate(ctx: Context, claim_name: str, pod: dict, before: dict) -> dict:
    """The driver reports the waiting pod's device failed (``FAILED`` true); the scheduler must
    give it up at once and allocate the claim anew: a later allocation without the failed device
    status, reserved for the pod, which still waits. ``before``: the allocation that failed. The
    new allocation, which the pod now waits on."""
    set_condition(ctx, claim_name, FAILED)
    pod_name = pod["metadata"]["name"]
    (failed,) = before["devices"]["results"]
    start = time.monotonic()

    def reallocated(seen: dict) -> bool:
        return bool(seen["reservedFor"] and seen["allocated"] > before["allocationTimestamp"])

    eventually(
        lambda: _binding_state(read_claim(ctx, claim_name)),
        what=(
            f"ResourceClaim {claim_name} of pod {pod_name} to be allocated anew after the driver "
            f"set {FAILED}=True on its device {failed['device']} (a failure frees the device at "
            f"once; the scheduler's binding timeout is {BINDING_TIMEOUT:g} s)"
        ),
        timeout=RESCHEDULE_TIMEOUT,
        until=reallocated,
    )
    ctx.facts[f"reallocated_after_failure_s/{ctx.phase}"] = round(time.monotonic() - start, 1)
    claim = read_claim(ctx, claim_name)
    allocation = _allocation(ctx, claim, pod)
    devices = claim["status"].get("devices") or []
    assert not any(c.get("type") == FAILED for d in devices for c in d.get("conditions") or []), (
        f"ResourceClaim {claim_name}: the failed status outlived the allocation: {devices}"
    )
    _check_unbound(ctx, pod_name)
    return allocation


def _binding_state(claim: dict) -> dict:
    """What a failed wait for reallocation shows of the claim (the whole claim would drown it in
    metadata): when and which device it was allocated, for whom, and its device conditions."""
    status = claim.get("status") or {}
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return {
        "allocated": allocation.get("allocationTimestamp") or "",
        "devices": [r.get("device") for r in results],
        "reservedFor": [c.get("name") for c in status.get("reservedFor") or []],
        "conditions": [
            f"{d.get('device')}: {c.get('type')}={c.get('status')}"
            for d in status.get("devices") or []
            for c in d.get("conditions") or []
        ],
    }
