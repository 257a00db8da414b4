"""The driver away for longer than the kubelet's wipe delay (the phase after the upgrade): what is
prepared runs on, what is asked meanwhile waits, and happens once the driver is back."""

from __future__ import annotations

import time

from e2e_dra.builder import Builder
from e2e_dra.driver import ProcessDriver
from e2e_dra.subtest import Context
from e2e_dra.subtests.drivers._held import Held
from e2e_dra.subtests.drivers._kubelet import WIPE_DELAY
from e2e_dra.subtests.drivers._pods import Claimed, claim_spec, runs_with_device
from e2e_dra.subtests.drivers._pools import same_devices
from e2e_dra.subtests.drivers._unprepare import unprepared

DOWNTIME = WIPE_DELAY + 10.0


def driver_away(ctx: Context, b: Builder, driver: ProcessDriver, held: Held) -> Claimed:
    """The driver stops for longer than the kubelet's wipe delay. Meanwhile the prepared pod
    runs on, a pod deleted asks for an unprepare, and a new pod waits; once it is back its
    slices return (with as many devices as it was last told to publish), the unprepare happens,
    and the waiting pod starts."""
    with ctx.step(f"the driver stops for {DOWNTIME:.0f}s, past the kubelet's wipe delay"):
        driver.stop()
        started = time.monotonic()
        b.delete("pods", held.passing.name)
        pod, claim_template = b.pod_inline()
        claim_template["spec"]["spec"] = claim_spec(b)
        b.create(claim_template, pod)
        time.sleep(max(0.0, DOWNTIME - (time.monotonic() - started)))
    with ctx.step("while the driver is away the prepared pod runs on and the new pod waits"):
        held.untouched(b)
        phase = b.read_pod(pod["metadata"]["name"]).get("status", {}).get("phase")
        assert phase != "Running", (
            f"pod {pod['metadata']['name']} runs although driver {driver.name} is stopped"
        )
    with ctx.step("the driver is back: its slices return with the same devices"):
        driver.start(ctx.releases.get("kubelet", ""))
        driver.wait_registered(60)
        driver.wait_for_slices(120)
        same_devices(driver, held.devices)
    with ctx.step("the unprepare asked while the driver was away happens"):
        unprepared(ctx, driver, held.passing)
        b.wait_pod_gone(held.passing.name)
    with ctx.step("the pod that waited for the driver runs and sees its device"):
        return runs_with_device(ctx, b, driver, pod)
