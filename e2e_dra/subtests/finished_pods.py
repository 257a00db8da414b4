"""finished-pods: a pod that ends by itself (a Job's pod, a batch step) gives its device back, with
the controller manager, scheduler and kubelet of each state.

The node has one device, so each check's second pod runs only if the first one's device came
back:

- a pod with a claim from a template exits 0: once it has Succeeded, the resourceclaim
  controller deletes the claim made for it (the pod was its only user and is done), and a pod
  that needs the device runs;
- a pod using an existing claim exits 0: the controller takes it out of the claim's
  ``reservedFor`` and, as it was the last user, deallocates the claim; a pod with another claim
  for the device runs.

A controller that keeps a finished pod's reservation, or the claim made for it, leaks the
device until somebody deletes the pod: every finished Job would hold its devices. Each phase
makes and removes its own objects.
"""

from __future__ import annotations

from e2e_dra.builder import Builder
from e2e_dra.subtest import Context, Subtest
from e2e_dra.subtest_kit import claim_and_pod, devices_per_node, every_phase, remove
from e2e_dra.waits import eventually

DONE_TIMEOUT = 90.0
"""How long the controller may take to see a pod done and act on its claims: it does so on the
pod's update, so seconds; the rest is slack for a loaded 2-core node."""
EXIT_NOW = ["sh", "-c", "exit 0"]


def _check(ctx: Context) -> None:
    b = ctx.builder
    with ctx.step("a finished pod's claim from a template is deleted, and its device is free"):
        pod, template = b.pod_inline()
        pod["spec"]["containers"][0]["command"] = list(EXIT_NOW)
        b.create(template, pod)
        made = _succeeded(b, pod["metadata"]["name"])
        assert made, f"pod {pod['metadata']['name']} names no claim made for it"
        b.wait_gone("resourceclaims", made, timeout=DONE_TIMEOUT)
        claim, next_pod = claim_and_pod(b)
        b.create(claim, next_pod)
        b.test_pod(next_pod)
        remove(b, [next_pod, pod], [claim])
        b.delete("resourceclaimtemplates", template["metadata"]["name"])

    with ctx.step("a finished pod leaves its claim, which is deallocated, and its device is free"):
        claim, pod = claim_and_pod(b)
        pod["spec"]["containers"][0]["command"] = list(EXIT_NOW)
        b.create(claim, pod)
        _succeeded(b, pod["metadata"]["name"])
        name = claim["metadata"]["name"]
        eventually(
            lambda: b.get("resourceclaims", name).get("status") or {},
            what=f"claim {name} to be neither reserved nor allocated once its only pod finished",
            timeout=DONE_TIMEOUT,
            until=lambda status: not status.get("reservedFor") and not status.get("allocation"),
        )
        other_claim, next_pod = claim_and_pod(b)
        b.create(other_claim, next_pod)
        b.test_pod(next_pod)
        remove(b, [next_pod, pod], [other_claim, claim])


def _succeeded(b: Builder, name: str) -> str:
    """Once pod ``name`` has Succeeded: the claim it used (its only one), as the pod's status
    names it for a claim from a template."""
    pod = eventually(
        lambda: b.read_pod(name),
        what=f"pod {name} to run to completion",
        timeout=DONE_TIMEOUT,
        until=lambda pod: pod.get("status", {}).get("phase") in ("Succeeded", "Failed"),
    )
    status = pod["status"]
    assert status["phase"] == "Succeeded", f"pod {name} ended {status['phase']}: {status}"
    claims = [s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []]
    spec = pod["spec"]["resourceClaims"][0]
    return spec.get("resourceClaimName") or (claims[0] if claims else "")


SUBTEST = Subtest(
    name="finished-pods",
    keps=(4381,),
    initial=every_phase(_check),
    resources=devices_per_node(1),
    releases=">=1.34",
)
