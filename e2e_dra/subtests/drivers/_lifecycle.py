"""The real driver of a phase: found in its context, noted in the summary, selected by the
subtest's DeviceClass, and moved with the kubelet when its build follows the kubelet's release
(after the upgrade, or while the kubelet is down at the downgrade and re-upgrade)."""

from __future__ import annotations

from e2e_dra.builder import Builder
from e2e_dra.driver import ProcessDriver
from e2e_dra.kube import Kube
from e2e_dra.subtest import Context, WhileKubeletDown


def real_driver(ctx: Context) -> ProcessDriver:
    if ctx.real_driver is None:
        raise AssertionError("the real drivers' chain runs on a real driver, and has none")
    return ctx.real_driver


def note(ctx: Context, driver: ProcessDriver) -> None:
    """What runs in this phase, kept in summary.json (``driver/<phase>``)."""
    ctx.facts[f"driver/{ctx.phase}"] = driver.describe()
    ctx.log(
        f"{ctx.phase}: driver {driver.name}: {driver.kind.label}, helper library {helper(driver)}"
    )


def helper(driver: ProcessDriver) -> str:
    """The ``k8s.io/dynamic-resource-allocation`` the running build links (its ResourceSlice
    controller is what keeps the slices), or what is known of it."""
    return str(driver.describe().get("k8s.io/dynamic-resource-allocation") or "unknown")


def follow_kubelet(ctx: Context, driver: ProcessDriver) -> None:
    """A driver built for each kubelet release moves with the kubelet: stopped and started
    again as its new build while claims are prepared, as a DaemonSet update does (unless the
    step replaced it already)."""
    kubelet = ctx.releases.get("kubelet", "")
    with ctx.step(f"the driver runs the build for kubelet {kubelet}"):
        driver.switch(kubelet)


def replace_with_next_step(
    ctx: Context, driver: ProcessDriver, kubelets: tuple[str, ...]
) -> WhileKubeletDown | None:
    """A driver whose build follows the kubelet is replaced during the next cluster step, while
    the kubelet is down, when the chain already met the kubelet release that step brings back
    (the one before this phase's): a node upgraded together with its driver, which the new
    kubelet meets at its start. The upgrade (a release not met yet) moves it after the step."""
    if len(kubelets) < 2 or driver.surging or not driver.changes_for(kubelets[-2]):
        return None
    following = kubelets[-2]

    def replace(kube: Kube) -> None:
        driver.switch(following, wait=False)  # it registers once the kubelet is back

    return ctx.while_kubelet_down(
        f"driver {driver.name} replaced by its build for kubelet {following}", replace
    )


def select_driver(b: Builder, driver: ProcessDriver) -> None:
    """The subtest's default class selects the driver by the name it really serves under (a
    driver that takes no name has its own)."""
    if driver.name != b.driver_name:
        selector = {"cel": {"expression": f'device.driver == "{driver.name}"'}}
        b.patch("deviceclasses", b.class_name(), {"spec": {"selectors": [selector]}})
