"""Shared by the workload-resourceclaims subtests of both suites (DRAWorkloadResourceClaims).

A PodGroup that lists a claim gets one ResourceClaim generated for the whole group, reserved for
the group rather than for its pods. Both suites check that claim the same way and compare it over
time by the same three fields, so those checks live here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from e2e_dra.subtest import Context
from e2e_dra.waits import consistently, consistently_throughout

STABLE_FOR = 15.0  # upstream's checkClaimsStable: Consistently 15 s ...
STABLE_POLL = 0.1  # ... polling every 100 ms


def start_group(ctx: Context, pods: int) -> tuple[dict, list[dict], dict]:
    """A Workload with one inline-claim PodGroup and ``pods`` running pods in it: upstream's
    first phase of both variants. Returns the PodGroup, the pods and the group's claim."""
    b = ctx.builder
    workload, template = b.workload_inline()
    pod_group = b.pod_group(workload, workload["spec"]["podGroupTemplates"][0])
    members = [b.grouped_pod_with_claims(pod_group) for _ in range(pods)]
    b.create(workload, pod_group, template, *members)
    for pod in members:
        b.test_pod(pod)
    return pod_group, members, group_claim(ctx, pod_group)


def join_group(ctx: Context, pod_group: dict) -> dict:
    """A new pod of ``pod_group`` sharing the group's claims, created and checked to run."""
    b = ctx.builder
    pod = b.grouped_pod_with_claims(pod_group)
    b.create(pod)
    b.test_pod(pod)
    return pod


def stays(probe: Callable[[], Any], *, what: str, holds: Callable[[Any], bool]) -> None:
    """Upstream's checkClaimsStable: ``holds(probe())`` for 15 s, looked at every 100 ms."""
    consistently(probe, what=what, duration=STABLE_FOR, poll=STABLE_POLL, holds=holds)


@contextlib.contextmanager
def claim_stays_throughout(ctx: Context, claim_name: str, stable: dict) -> Iterator[None]:
    """Claim ``claim_name`` keeps ``stable`` (its :func:`claim_state`) while the block's steps run
    and for 15 s after the last, looked at every 100 ms: each step is followed by at least
    upstream's 15 s of watching, as with a :func:`stays` after every step, without waiting out
    one window per step. The watch runs beside the steps, so it has a client of its own."""
    kube = ctx.kube.fresh()
    url = ctx.builder.url("resourceclaims", claim_name)
    try:
        with consistently_throughout(
            lambda: claim_state(kube.get(url)),
            what=f"ResourceClaim {claim_name} keeping its UID, reservation and allocation",
            after=STABLE_FOR,
            poll=STABLE_POLL,
            holds=lambda state: state == stable,
        ):
            yield
    finally:
        kube.close()


def group_claim(ctx: Context, pod_group: dict) -> dict:
    """The claim generated for ``pod_group``, checked to be reserved for the group alone.

    The group's status must name exactly one generated claim for its only claim entry, and that
    claim's ``status.reservedFor`` must be exactly the PodGroup (not its pods).
    """
    group_name = pod_group["metadata"]["name"]
    group = ctx.builder.get("podgroups", group_name)
    statuses = group.get("status", {}).get("resourceClaimStatuses", [])
    claim_in_group = group["spec"]["resourceClaims"][0]["name"]
    assert len(statuses) == 1 and statuses[0].get("name") == claim_in_group, (
        f"PodGroup status.resourceClaimStatuses {statuses} should name one claim {claim_in_group}"
    )
    claim_name = statuses[0].get("resourceClaimName")
    assert claim_name, f"PodGroup status is missing the generated ResourceClaim name: {statuses}"
    claim = ctx.builder.get("resourceclaims", claim_name)
    expected_reservation = [
        {
            "apiGroup": "scheduling.k8s.io",
            "resource": "podgroups",
            "name": group_name,
            "uid": group["metadata"]["uid"],
        }
    ]
    reserved_for = claim.get("status", {}).get("reservedFor")
    assert reserved_for == expected_reservation, (
        f"ResourceClaim {claim_name} is reserved for {reserved_for}, "
        f"expected only PodGroup {group_name}"
    )
    return claim


def claim_state(claim: dict) -> dict:
    """What must not change while pods come and go: identity, reservation, allocation (in that
    order, the short ones first, so that a failure's value shows them)."""
    status = claim.get("status", {})
    return {
        "uid": claim["metadata"]["uid"],
        "reservedFor": status.get("reservedFor"),
        "allocation": status.get("allocation"),
    }
