"""device-tolerations: a claim's tolerations keep its pod on a device whose taint says NoExecute.

Two tolerations, each on a device of its own: one that names the taint's key, value and effect,
and one with no key and no effect (``operator: Exists``), which the API documents as tolerating
every taint and which tools that must reach any device write. The scheduler allocates each
device and copies the request's tolerations into the allocation; the device-taint eviction
controller reads them there and must leave both pods alone. Releases before 1.38.0-beta.0 ignore
the empty effect and evict that pod at once (kubernetes#143376), so an upgrade fixes the pod
and a downgrade breaks it again.

Every phase checks the components of that state anew, with objects of its own: a cluster-wide
slice of two devices, both tainted NoExecute, two claims and two pods that must run and stay.
No driver resources: the subtest publishes the slice itself (no kubelet serves a cluster-wide
pool, so it waits for nothing after a restart).
"""

from __future__ import annotations

from e2e_dra.builder import Builder, cluster_slice, request
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import allocated, every_phase, remove
from e2e_dra.waits import consistently

KEY = "devicetolerations"
TAINT = {"key": KEY, "value": "maintenance", "effect": "NoExecute"}
TOLERATIONS = {
    # device name -> (the toleration its claim asks for, what the check is called)
    "by-key": (
        {"key": KEY, "operator": "Equal", "value": "maintenance", "effect": "NoExecute"},
        "a toleration of the taint's key, value and NoExecute effect",
    ),
    "every-taint": (
        {"operator": "Exists"},
        "a toleration with no key and an empty effect (every taint)",
    ),
}
STAYS = 5.0  # the eviction controller acts as the claim is allocated: a pod that runs this long
# after it started was let be


def tainted_slice(driver: str, name: str) -> dict:
    """One cluster-wide slice (its own pool) with a NoExecute-tainted device per toleration."""
    devices = [
        {
            "name": device,
            "attributes": {"example.com/toleration": {"string": device}},
            "taints": [TAINT],
        }
        for device in TOLERATIONS
    ]
    return cluster_slice(driver, name, devices)


def tolerated(ctx: Context) -> None:
    """Each toleration's pod gets its tainted device, runs and is not evicted."""
    b = ctx.builder
    name = f"{KEY}-{ctx.phase}"
    b.create(tainted_slice(b.driver_name, name))
    b.defer(lambda b: b.delete("resourceslices", name, missing_ok=True))

    claims, pods = {}, {}
    for device, (toleration, _) in TOLERATIONS.items():
        selector = f'device.attributes["example.com"].toleration == "{device}"'
        claims[device] = b.external_claim(
            requests=[request(selectors=[selector], tolerations=[toleration])]
        )
        pods[device] = b.pod_external(claims[device]["metadata"]["name"])
        b.create(claims[device], pods[device])
    for device, (toleration, what) in TOLERATIONS.items():
        with ctx.step(stays_step(what)):
            b.test_pod(pods[device])
            _stays(b, pods[device]["metadata"]["name"])
        with ctx.step(f"{what}: the allocation carries it, for the eviction controller"):
            _carries(b, claims[device]["metadata"]["name"], toleration)
    remove(b, list(pods.values()), list(claims.values()))
    b.delete("resourceslices", name)


def stays_step(what: str) -> str:
    """The step that proves the pod of a claim with toleration ``what`` runs and stays."""
    return f"{what}: its pod runs on the NoExecute-tainted device and stays"


def _stays(b: Builder, pod_name: str) -> None:
    """The running pod ``pod_name`` is still that pod, running, :data:`STAYS` seconds on."""
    uid = b.read_pod(pod_name)["metadata"]["uid"]

    def now() -> tuple[str, str | None]:
        pod = b.read_pod(pod_name)
        return pod["metadata"]["uid"], pod.get("status", {}).get("phase")

    try:
        consistently(
            now,
            what=f"pod {pod_name} running",
            duration=STAYS,
            holds=lambda seen: seen == (uid, "Running"),
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}{b.events_of(pod_name)}") from exc


def _carries(b: Builder, claim_name: str, toleration: dict) -> None:
    results = allocated(b, claim_name)
    given = [r.get("tolerations") or [] for r in results]
    wanted = [[toleration]]
    # The server may add fields (tolerationSeconds: null is left out); compare what we set.
    seen = [[{k: t.get(k) for k in toleration} for t in each] for each in given]
    assert seen == wanted, (
        f"claim {claim_name}'s allocation carries tolerations {given}, but its request asked "
        f"for {[toleration]}: the eviction controller reads them from the allocation"
    )


SUBTEST = Subtest(
    name="device-tolerations",
    keps=(5055,),
    initial=every_phase(tolerated),
    # Device taints in slices are served (DRADeviceTaints on) from 1.36, as in device-taints.
    releases=">=1.36",
    known_bugs=(
        KnownBug(
            issue=143376,
            component="kube-controller-manager",
            releases="<1.38.0-beta.0",
            what=(
                "device-taint eviction ignores a toleration with an empty effect, though the API "
                "says it matches every effect, and evicts its pod at once (fixed in "
                "1.38.0-beta.0 by kubernetes#143376)"
            ),
            sign=r"(?s)DeviceTaintManagerEviction.*in step 'a toleration with no key and an empty",
            confined=True,  # it evicts this subtest's pod, on this subtest's own slice
        ),
    ),
    # Taints are the scheduler's and the controller-manager's business; any kubelet with DRA v1
    # (GA in 1.34) serves the pods.
    kubelet_releases=">=1.34",
)
