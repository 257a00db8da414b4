"""extended-resource-eviction: a NoExecute DeviceTaintRule evicts a pod that got its device
through an extended resource, as it evicts a pod that names a claim, in every phase.

Each phase maps an extended resource to this driver's devices (a DeviceClass with
``extendedResourceName``), starts a pod that asks for one, finds the device the scheduler's
special claim got, and taints exactly that device with a NoExecute rule: the pod must be evicted.
kube-controller-manager's device-taint eviction looked only at ``spec.resourceClaims``, never
at ``status.extendedResourceClaimStatus``, so such a pod kept running on a device that must not
be used, up to 1.37.1 (kubernetes#141290, fixed in 1.37.2 by kubernetes#142289; no 1.36 release
has the fix, as their controller's source shows).

The rule selects this driver's device only, so the other subtests never see it.
"""

from __future__ import annotations

from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import devices_per_node, every_phase
from e2e_dra.subtests._extended_resource import (
    claim_name_from_pod,
    create_pod,
    verify_pod_running_with_claim,
)

RULE_VERSION = "resource.k8s.io/v1alpha3"  # as device-taints: the version every release serves
TAINT = {"key": "extended-resource-eviction", "value": "evict", "effect": "NoExecute"}
EVICTION_TIMEOUT = 120.0  # eviction is at once (no toleration): the rest is the pod's grace


def _check(ctx: Context) -> None:
    b = ctx.builder
    phase = ctx.phase.removeprefix("after-cluster-")
    resource = b.extended_resource_name(f"evict-{phase}")
    b.create(b.class_with_extended_resource(resource))
    pod = create_pod(ctx, f"evicted-{phase}", resource)
    verify_pod_running_with_claim(ctx, pod, resource)
    claim = b.get("resourceclaims", claim_name_from_pod(ctx, pod))
    (result,) = claim["status"]["allocation"]["devices"]["results"]

    version = b.api_version(RULE_VERSION, "devicetaintrules")
    rule = b.device_taint_rule(
        f"evicts-{phase}",
        pool=result["pool"],
        device=result["device"],
        taint=TAINT,
        api_version=version,
    )
    b.create(rule)
    name = rule["metadata"]["name"]
    b.defer(lambda b: b.delete("devicetaintrules", name, version=version, missing_ok=True))
    with ctx.step(f"a NoExecute rule on {result['pool']}/{result['device']} evicts pod {pod}"):
        b.wait_pod_gone(pod, EVICTION_TIMEOUT)
    b.delete("devicetaintrules", name, version=version)


SUBTEST = Subtest(
    name="extended-resource-eviction",
    keps=(5004, 5055),
    initial=every_phase(_check),
    resources=devices_per_node(2),
    requires=(RULE_VERSION,),
    releases=">=1.36",
    kubelet_releases=">=1.34",
    known_bugs=(
        KnownBug(
            141290,
            "kube-controller-manager",
            ">=1.36.0,<1.37.2",
            "device-taint eviction ignores pods that got their device through an extended "
            "resource (fixed in 1.37.2 by kubernetes#142289)",
            r"timed out after \S+ waiting for Pod evicted-\S+ to be deleted",
        ),
    ),
)
