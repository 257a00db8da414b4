"""consumable-capacity (gate cycle): with DRAConsumableCapacity off, the API server stores no new
``allowMultipleAllocations``, capacity ``requestPolicy`` or capacity request, but keeps the shares
already allocated (``shareID``, ``consumedCapacity``) and the slices that have the fields; the
scheduler then counts a shared device as taken. Once the gate is on again the fields are stored
again and a claim created while it was off gets a share of its own.

Upstream's rules: pkg/registry/resource/resourceslice/strategy.go
(``dropDisabledDRAConsumableCapacityFields``: a slice being written loses
``allowMultipleAllocations`` and every ``requestPolicy`` unless the stored one has one of them),
pkg/api/resourceclaimspec (``capacity`` of each request dropped from a claim's spec unless the
stored spec has one), resourceclaim/strategy.go (``shareID`` and ``consumedCapacity`` of results
and ``shareID`` of ``status.devices`` dropped unless the stored status has one). With the gate off
the scheduler counts every allocated result as a whole device (pkg/scheduler/.../
dynamicresources/allocateddevices.go) and no device allows more than one allocation.

- gate on: claims A (3Gi, 4Gi consumed) and B (1Gi, 2Gi) share the driver's one device, A with a
  driver-style ``status.devices`` entry for its share; a probe slice keeps the fields.
- gate off: the kubelet restarted and deleted the driver's node-local slice, so the driver's
  new slice lacks the fields (had it survived, it would keep them: checked either way); the probe
  from before keeps them, also through an update; a probe created now loses them and an update
  cannot add them. A's and B's shares and A's status are as allocated, their pods run; the
  driver's status update of A (a status update, which the dropping rule sees) is taken and the
  shares stay. Claim C, created now with a capacity request, is stored without it, and its pod is
  unschedulable: the shared device counts as taken.
- gate on again: the driver's slice has the fields again; C, still without a capacity request,
  gets a share of the requestPolicy's default (2Gi) and its pod runs next to A's and B's, which
  still hold what they held; the probes keep the fields again.
"""

from __future__ import annotations

import copy

from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtests import _consumable_capacity as cc
from e2e_dra.subtests._gated_fields import driver_slice, expect_fields, stored_with_fields

GATE = "DRAConsumableCapacity"
FIELDS = (("allowMultipleAllocations",), ("capacity", "*", "requestPolicy"))
DEVICES = [cc.SHARED_DEVICE]
# Without a capacity request a share consumes the request policy's default.
DEFAULT_SHARE = cc.DEFAULT_REQUEST


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    claims: dict[str, dict] = {}
    running: dict[str, dict] = {}
    recorded: dict[str, cc.Shares] = {}
    with ctx.step("the driver's slice and a new slice are stored with the fields"):
        first_slice, probes = stored_with_fields(ctx, DEVICES, FIELDS)
    with ctx.step("two claims share the device; a driver reports a status for one share"):
        for requests, consumed in cc.FIRST_SHARES:
            claim, pod = cc.claim_and_pod(ctx, requests)
            claims[claim["metadata"]["name"]] = claim
            running[claim["metadata"]["name"]] = pod
            b.wait_running(pod["metadata"]["name"])
            recorded[claim["metadata"]["name"]] = cc.shares_of(ctx, claim, consumed)
        cc.check_distinct(recorded)
        cc.check_pods(ctx, running, claims)
        name_a = next(iter(claims))
        statuses = cc.report_status(ctx, name_a, recorded[name_a])

    def gate_off(ctx: Context) -> Phase:
        with ctx.step("the driver's slice keeps the fields only if it was not replaced"):
            now = driver_slice(ctx)
            replaced = now["metadata"]["uid"] != first_slice["metadata"]["uid"]
            ctx.log(f"{ctx.phase}: the driver's slice was replaced: {replaced}")
            expect_fields(
                now,
                FIELDS,
                kept=not replaced,
                why="the driver's, " + ("created anew" if replaced else "stored before"),
            )
        with ctx.step("a stored slice keeps the fields, also through an update"):
            probes.gate_off_stored_keep(ctx)
        with ctx.step("a new slice loses the fields, and an update cannot add them"):
            probes.gate_off_new_lose(ctx)
        with ctx.step("the shares and the share's status survive; the pods run"):
            cc.check_recorded(ctx, claims, recorded)
            cc.check_status(ctx, name_a, statuses)
            cc.check_pods(ctx, running, claims)
        with ctx.step("the driver's status update of a shared claim is taken, its shares kept"):
            # Every status update of the claim (the driver's, the claim controller's reservedFor)
            # goes through the rule that drops the fields: it must keep those in use.
            cc.report_status(ctx, name_a, recorded[name_a])
            cc.check_recorded(ctx, claims, recorded)
        with ctx.step("a new claim loses its capacity request; the shared device is taken"):
            claim_c, pod_c = cc.claim_and_pod(ctx, {"late": "1Gi"})
            name_c = claim_c["metadata"]["name"]
            stored = ctx.builder.get("resourceclaims", claim_c["metadata"]["name"])
            kept = [
                r["name"]
                for r in stored["spec"]["devices"]["requests"]
                if r["exactly"].get("capacity")
            ]
            assert not kept, f"ResourceClaim {name_c} kept capacity requests for {kept}"
            ctx.builder.wait_unschedulable(pod_c["metadata"]["name"])

        def gate_on_again(ctx: Context) -> None:
            with ctx.step("the driver's slice has the fields again"):
                expect_fields(driver_slice(ctx), FIELDS, kept=True, why="the driver's")
            with ctx.step("the claim created while off gets a share of the default"):
                ctx.builder.wait_running(pod_c["metadata"]["name"])
                stored_c = copy.deepcopy(claim_c)
                stored_c["spec"] = ctx.builder.get("resourceclaims", claim_c["metadata"]["name"])[
                    "spec"
                ]
                recorded[name_c] = cc.shares_of(ctx, stored_c, {"late": DEFAULT_SHARE})
                claims[name_c] = stored_c
                running[name_c] = pod_c
                cc.check_distinct(recorded)
            with ctx.step("every share is as allocated and every pod runs"):
                cc.check_recorded(ctx, claims, recorded)
                cc.check_status(ctx, name_a, statuses)
                cc.check_pods(ctx, running, claims)
            with ctx.step("slices keep the fields again"):
                probes.gate_on_again(ctx)

        return gate_on_again

    return gate_off


SUBTEST = Subtest(
    name="consumable-capacity",
    keps=(5075,),
    initial=initial,
    toggled_gates=(GATE,),
    # 1.37 added it, on by default, and refuses it on while DRAConsumableCapacity is off.
    dependent_gates=("DRAFractionalCapacityRange",),
    resources=cc.resources,
    # Beta from 1.36; GA but not locked in 1.38: every release since can switch it off.
    releases=">=1.36",
)
