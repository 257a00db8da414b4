"""prepare-retry: a pod whose prepare failed part way starts once the kubelet retried, and the
kubelet holds each of its devices once.

The pod uses two claims of this driver. The driver answers NodePrepareResources with an error for
the second claim and prepares the first, so the kubelet's attempt fails part way and it tries
again (at once: the subtest updates the pod rather than wait out the kubelet's back-off). Then
the driver lets the second claim through, and the pod must run with both claims' env, and the
kubelet's record of the first claim (its checkpoint, from which it gives the container runtime
the claim's CDI device IDs) must list its device once.

kubelets 1.34.0 to 1.34.11, 1.35.0 to 1.35.9 and 1.36.0 to 1.36.3 appended the devices of each
answer to what the failed attempt had recorded already, so the first claim's device was listed
twice and the runtime got duplicate CDI device IDs (kubernetes#140274; 1.37.0 and the picks in
1.34.12 (#140953, as its source shows), 1.35.10 (#140954) and 1.36.4 (#140955) reset the
driver's devices before recording an answer).

The kubelet reads the claims of one answer in no fixed order (a Go map) and stops at the first
error, so a failed attempt records the first claim's device only when it happens to read that
claim first. The driver therefore keeps failing the second claim until the kubelet's checkpoint,
which it writes as each attempt starts, shows that an attempt did record the first claim's
device; only then does it let the second claim through. A kubelet that never reads them in that
order within the timeout fails the phase with that said (each attempt has an even chance).

Every object is made and removed within its phase, each phase on the kubelet of its state.
"""

from __future__ import annotations

import itertools

from e2e_dra.builder import Builder
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import (
    checkpointed_devices,
    claim_env,
    devices_per_node,
    every_phase,
    fits_and_runs,
    nudge,
    remove,
)
from e2e_dra.waits import eventually

# One attempt per poll, each with an even chance of recording the first claim: sixty of them.
RECORDED_TIMEOUT = 120.0
POLL = 2.0
DUPLICATED = "after a retried prepare"


def _check(ctx: Context) -> None:
    b = ctx.builder
    first, second = b.external_claim(), b.external_claim()
    first_name, second_name = first["metadata"]["name"], second["metadata"]["name"]
    pod = _pod_with_both(b, first_name, second_name)
    with (
        ctx.driver.fail_prepare(second_name),
        ctx.step("the kubelet records the first claim in an attempt that failed"),
    ):
        b.create(first, second, pod)
        uid = _uid(b, first_name)
        attempts = itertools.count(1)

        def recorded() -> list[dict] | None:
            # The kubelet retries a failed prepare 60 to 90 s later by itself; an update of
            # the pod has it try at once.
            nudge(b, pod["metadata"]["name"], f"{ctx.phase}-{next(attempts)}")
            return checkpointed_devices(ctx, uid)

        eventually(
            recorded,
            what=f"the kubelet to record claim {first_name}'s device in an attempt that the "
            f"driver failed for claim {second_name}",
            timeout=RECORDED_TIMEOUT,
            poll=POLL,
        )
    with ctx.step("once the driver lets both through, the pod runs with both claims"):
        fits_and_runs(b, pod)
        b.test_pod(pod, claim_env(first, second))
    with ctx.step("the kubelet holds each claim's device once"):
        for name in (first_name, second_name):
            _expect_once(ctx, name, _uid(b, name))
    remove(b, [pod], [first, second])


def _pod_with_both(b: Builder, first: str, second: str) -> dict:
    pod = b.pod_external(first)
    pod["spec"]["resourceClaims"].append({"name": "second", "resourceClaimName": second})
    pod["spec"]["containers"][0]["resources"]["claims"].append({"name": "second"})
    return pod


def _uid(b: Builder, claim: str) -> str:
    return b.get("resourceclaims", claim)["metadata"]["uid"]


def _expect_once(ctx: Context, name: str, uid: str) -> None:
    devices = checkpointed_devices(ctx, uid)
    assert devices is not None, (
        f"claim {name} is not in the kubelet's checkpoint, though its pod runs"
    )
    given = [(d.get("PoolName"), d.get("DeviceName")) for d in devices]
    ctx.log(f"{ctx.phase}: the kubelet holds claim {name} with devices {given}")
    assert len(given) == 1, (
        f"the kubelet holds claim {name}'s devices {given} {DUPLICATED}, not its one device once: "
        f"the container runtime is given its CDI device IDs {len(given)} times"
    )


SUBTEST = Subtest(
    name="prepare-retry",
    keps=(4381,),
    initial=every_phase(_check),
    resources=devices_per_node(2),
    known_bugs=(
        KnownBug(
            issue=140274,
            component="kubelet",
            releases=">=1.34.0,<1.34.12 || >=1.35.0,<1.35.10 || >=1.36.0,<1.36.4",
            what="a retried prepare records the devices of the claims it prepared again, "
            "so the runtime gets duplicate CDI device IDs (fixed in 1.34.12, 1.35.10, 1.36.4 "
            "and 1.37.0)",
            sign=DUPLICATED,
        ),
    ),
)
