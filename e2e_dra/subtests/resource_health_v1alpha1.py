"""resource-health-v1alpha1: a driver that offers only ``DRAResourceHealth`` v1alpha1 (as drivers
built on the 1.34 to 1.36 kubelet-plugin libraries do, and will until they are rebuilt) still gets
its device health into pod status, with every kubelet.

1.37 and later kubelets prefer v1, but must still take v1alpha1 where a driver offers nothing
else: its removal is announced for 1.40, and a kubelet that drops it sooner cuts those drivers'
health off without a word (their registration still succeeds). In each phase a new pod uses the
driver's one device; the kubelet must watch health through v1alpha1, and pod status must follow
the device Healthy, then Unhealthy with the driver's message, then Healthy again. Each phase
makes and removes its own pod and claim.
"""

from __future__ import annotations

from e2e_dra.subtest import Context, Subtest
from e2e_dra.subtest_kit import claim_and_pod, devices_per_node, every_phase, remove
from e2e_dra.subtests._health import (
    DEVICE,
    UNHEALTHY_MESSAGE,
    health_stream,
    wait_health,
)

OFFERED = ("v1alpha1",)
SERVICE = "v1alpha1.DRAResourceHealth"


def _check(ctx: Context) -> None:
    b = ctx.builder
    for node in ctx.nodes:
        ctx.driver.set_health(node, DEVICE, "Healthy")
    claim, pod = claim_and_pod(b)
    b.create(claim, pod)
    b.test_pod(pod)
    name = pod["metadata"]["name"]
    device = f"{ctx.nodes[0]}/{DEVICE}"
    with ctx.step(f"the kubelet watches device health through {SERVICE}, all the driver offers"):
        _, service = health_stream(ctx)
        ctx.facts[f"health_service/{ctx.phase}"] = service
        assert service == SERVICE, f"the kubelet watches device health through {service}"
    with ctx.step("pod status shows the device Healthy"):
        wait_health(ctx, name, "Healthy", device=device)
    with ctx.step("pod status follows the device to Unhealthy and back"):
        ctx.driver.set_health(ctx.nodes[0], DEVICE, "Unhealthy", UNHEALTHY_MESSAGE)
        wait_health(ctx, name, "Unhealthy", UNHEALTHY_MESSAGE, device=device)
        ctx.driver.set_health(ctx.nodes[0], DEVICE, "Healthy")
        wait_health(ctx, name, "Healthy", device=device)
    remove(b, [pod], [claim])


SUBTEST = Subtest(
    name="resource-health-v1alpha1",
    keps=(4680,),
    initial=every_phase(_check),
    resources=devices_per_node(1),
    driver_health=OFFERED,
    feature_gates=("ResourceHealthStatus",),
    releases=">=1.36",
)
