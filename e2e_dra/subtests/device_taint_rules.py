"""device-taint-rules: a DeviceTaintRule taints what its selector selects, and a rule without a
selector taints nothing (the API's documented rule), in every phase.

Each phase makes two NoSchedule rules: one without ``deviceSelector``, then one that selects
this driver's ``d0``. A new pod whose claim only ``d0`` satisfies must be found unschedulable,
which proves the scheduler has seen both rules (they come to it in the order they were made);
then a pod whose claim only ``d1`` satisfies must run. kube-scheduler 1.36.0 to 1.37.0 took the
rule without a selector as selecting every device of every driver, so nothing could be allocated
while it existed (kubernetes#141620, fixed in 1.37.1 by kubernetes#141648; the 1.36 releases
read a missing selector as an empty one, as their ResourceSlice tracker's source shows).
kube-scheduler 1.36.0 to 1.36.2 ignored DeviceTaintRules and panicked once one existed and a
ResourceSlice changed (kubernetes#139651).

On those releases the phase runs by itself (as every phase a known bug is expected to break):
the rule without a selector would taint every other subtest's devices too, and fail them for a
bug that is not theirs.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import Builder
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import (
    TAINT_RULES_IGNORED,
    TAINT_RULES_IGNORED_SIGN,
    claim_where,
    every_phase,
    fits_and_runs,
    remove,
)

POOL = "taint-rules"
RULE_VERSION = "resource.k8s.io/v1alpha3"  # as device-taints: the version every release serves
TAINT = {"key": "device-taint-rules", "value": "ruled", "effect": "NoSchedule"}


def resources(nodes: Sequence[str]) -> list[Pool]:
    devices = [{"name": name, "attributes": {"which": {"string": name}}} for name in ("d0", "d1")]
    return [Pool(POOL, slices=[{"devices": devices}], node_name=nodes[0])]


def _check(ctx: Context) -> None:
    b = ctx.builder
    version = b.api_version(RULE_VERSION, "devicetaintrules")
    phase = ctx.phase.removeprefix("after-cluster-")
    unselected = _rule(b, f"no-selector-{phase}", version, device=None)
    selected = _rule(b, f"selects-d0-{phase}", version, device="d0")
    b.create(unselected, selected)
    names = [rule["metadata"]["name"] for rule in (unselected, selected)]
    b.defer(lambda b: _delete_rules(b, names, version, missing_ok=True))

    with ctx.step("the scheduler keeps a pod off the device a rule selects"):
        held, held_claim = _pod_for(b, "d0")
        b.wait_unschedulable(held["metadata"]["name"])  # a new pod: this scheduler's verdict
    with ctx.step("a rule without a selector taints nothing: a pod gets the other device"):
        free, free_claim = _pod_for(b, "d1")
        fits_and_runs(b, free)

    remove(b, [free, held], [free_claim, held_claim])
    _delete_rules(b, names, version)


def _delete_rules(b: Builder, names: Sequence[str], version: str, missing_ok: bool = False) -> None:
    for name in names:
        b.delete("devicetaintrules", name, version=version, missing_ok=missing_ok)


def _rule(b: Builder, name: str, version: str, device: str | None) -> dict:
    rule = b.device_taint_rule(
        name, pool=POOL, device=device or "", taint=TAINT, api_version=version
    )
    if device is None:
        del rule["spec"]["deviceSelector"]
    return rule


def _pod_for(b: Builder, device: str) -> tuple[dict, dict]:
    """A claim only ``device`` satisfies, and a pod using it, both created."""
    claim = claim_where(b, "which", device)
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    return pod, claim


SUBTEST = Subtest(
    name="device-taint-rules",
    keps=(5055,),
    initial=every_phase(_check),
    resources=resources,
    requires=(RULE_VERSION,),
    releases=">=1.36",
    kubelet_releases=">=1.34",
    known_bugs=(  # both are in 1.36.0-1.36.2, where the first shows first: rules are ignored
        KnownBug(
            139651,
            "kube-scheduler",
            ">=1.36.0,<1.36.3",
            TAINT_RULES_IGNORED,
            TAINT_RULES_IGNORED_SIGN,
        ),
        KnownBug(
            141620,
            "kube-scheduler",
            ">=1.36.0,<1.37.1",
            "a DeviceTaintRule without a device selector taints every device (fixed in 1.37.1 "
            "by kubernetes#141648; 1.36 never got the fix)",
            r"is unschedulable, though its devices are free",
        ),
    ),
)
