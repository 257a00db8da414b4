"""device-taints: a taint published in a ResourceSlice and one added by a DeviceTaintRule keep
working across upgrade and downgrade (scheduling honours them, tolerations let a pod in, a
NoExecute rule evicts it, and the rule still applies after the downgrade).

No driver resources: the subtest publishes its own cluster-wide slice, so it waits for nothing
after a restart (the kubelet only wipes slices of node-local drivers).

The pod that tolerates the slice's taint runs across the upgrade untouched (checked first thing
after it: the same pod, its container neither restarted nor replaced, its claim still reserved
for it, its device still in its environment) until the NoExecute rule evicts it on purpose. So
only the upgrade has a pod to check: after the downgrade the pod is made anew and must wait.

Every phase also sends a claim that tolerates every taint (``operator: Exists`` with no key:
what tools that must reach any device write), which each release must accept. The one the older
release stored is read, updated and sent again on the re-upgrade. Whether such a claim's pod may
stay on a NoExecute-tainted device is device-tolerations' check.
"""

from __future__ import annotations

from e2e_dra.builder import Builder, cluster_slice, request
from e2e_dra.subtest import Context, KnownBug, Phase, Subtest
from e2e_dra.subtest_kit import (
    TAINT_RULES_IGNORED,
    TAINT_RULES_IGNORED_SIGN,
    older_writes_hold,
    running,
    still_untouched,
)
from e2e_dra.waits import consistently

TAINT_KEY = "devicetaints"
POOL = "devicetaints"
SLICE = "devicetaints"
DEVICE = "tainted-device"
RULE = "device-taint-rule"
RULE_VERSION = "resource.k8s.io/v1alpha3"  # upstream creates the rule through v1alpha3
FROM_SLICE = {"key": TAINT_KEY, "value": "from-slice", "effect": "NoSchedule"}
FROM_RULE = {"key": TAINT_KEY, "value": "from-rule", "effect": "NoExecute"}
TOLERATE_ALL = {"operator": "Exists"}  # no key, no effect: every taint
EVICTION_TIMEOUT = 300.0
SELECT_TAINTED = 'device.attributes["example.com"].?type.orValue("") == "devicetaints"'


def tainted_slice(driver: str) -> dict:
    device = {
        "name": DEVICE,
        "attributes": {"example.com/type": {"string": "devicetaints"}},
        "taints": [FROM_SLICE],
    }
    return cluster_slice(driver, SLICE, [device], pool=POOL)


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    b.create(tainted_slice(b.driver_name))
    b.defer(lambda b: _delete_slice(b, missing_ok=True))

    claim = b.external_claim(requests=[request(selectors=[SELECT_TAINTED])])
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    b.wait_unschedulable(pod["metadata"]["name"])

    # Tolerate the slice's taint: re-create the claim under the same name.
    claim["spec"] = b.claim_spec([request(selectors=[SELECT_TAINTED], tolerations=[FROM_SLICE])])
    b.delete("resourceclaims", claim["metadata"]["name"])
    b.wait_gone("resourceclaims", claim["metadata"]["name"], timeout=60)
    b.create(claim)
    b.test_pod(pod)
    tolerating = running(b, pod["metadata"]["name"])
    _tolerating_everything(ctx)

    def after_upgrade(ctx: Context) -> Phase:
        b = ctx.builder
        with ctx.step(f"pod {tolerating.name} runs untouched"):
            still_untouched(b, tolerating, [claim["metadata"]["name"]])
        consistently(
            lambda: b.read_pod(pod["metadata"]["name"])["status"].get("phase"),
            what=f"pod {pod['metadata']['name']} running",
            duration=30,
            poll=5,
            holds=lambda phase: phase == "Running",
        )
        version = b.api_version(RULE_VERSION, "devicetaintrules")
        rule = b.device_taint_rule(
            RULE, pool=POOL, device=DEVICE, taint=FROM_RULE, api_version=version
        )
        b.create(rule)
        b.defer(lambda b: b.delete("devicetaintrules", RULE, version=version, missing_ok=True))
        b.wait_pod_gone(pod["metadata"]["name"], EVICTION_TIMEOUT)
        _tolerating_everything(ctx)

        def after_downgrade(ctx: Context) -> Phase:
            b = ctx.builder
            b.create(pod)
            b.wait_unschedulable(pod["metadata"]["name"])
            _tolerating_everything(ctx)
            # Our own slice: delete it now, before the tear-down sweeps the other objects.
            _delete_slice(b)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _tolerating_everything(ctx: Context) -> None:
    """A claim whose request tolerates every taint is accepted."""
    b = ctx.builder
    with ctx.step("a claim tolerating every taint (operator Exists, no key) is accepted"):
        b.create(
            b.external_claim(
                requests=[request(selectors=[SELECT_TAINTED], tolerations=[TOLERATE_ALL])]
            )
        )


def _delete_slice(b: Builder, *, missing_ok: bool = False) -> None:
    b.delete("resourceslices", SLICE, missing_ok=missing_ok)


SUBTEST = Subtest(
    name="device-taints",
    keps=(5055,),
    initial=initial,
    requires=(RULE_VERSION,),
    releases=">=1.36",
    known_bugs=(
        KnownBug(
            issue=139651,
            component="kube-scheduler",
            releases=">=1.36.0,<1.36.3",
            step="downgrade",  # the restarted scheduler panics on the rule and the new slices
            what=TAINT_RULES_IGNORED,
            sign=TAINT_RULES_IGNORED_SIGN,
        ),
    ),
    # Taints are the scheduler's and the controller-manager's business; any kubelet with DRA v1
    # (GA in 1.34) serves the pods.
    kubelet_releases=">=1.34",
)
