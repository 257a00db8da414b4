"""class-config: a DeviceClass's config reaches the devices of the requests that name that class,
and no others, with the scheduler and kubelet of each state.

One claim has three requests: ``first`` and ``third`` name class A, ``second`` names class B;
each class carries an opaque config for the driver (``class: A`` or ``class: B``). The allocation
must list each class's config once, for exactly the requests that name it, and each of the pod's
three containers (one per request) must see its own request's class in its env (the driver puts
the class's parameters there as ``admin_class``). kube-scheduler 1.34.0 wrote class configs
without their requests, so a driver could not tell which request they were for and applied each
to every device of the claim, and it listed a class's config once per request that named it
(kubernetes#134789, fixed in 1.34.2 by kubernetes#135098 and in 1.35.0, as the allocator's
source shows).

Every object is made and removed within its phase.
"""

from __future__ import annotations

import copy

from e2e_dra.builder import DEFAULT_ENV, Builder, request
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import devices_per_node, every_phase, fits_and_runs, remove

CLASS_OF_REQUEST = {"first": "A", "second": "B", "third": "A"}
WRONG_REQUESTS = "applies to requests"


def _check(ctx: Context) -> None:
    b = ctx.builder
    classes = {name: _device_class(b, name) for name in sorted(set(CLASS_OF_REQUEST.values()))}
    b.create(*classes.values())

    with ctx.step("each class's config is allocated for the requests that name the class"):
        claim = b.external_claim(
            requests=[
                request(name, device_class=_name(classes[cls]))
                for name, cls in CLASS_OF_REQUEST.items()
            ]
        )
        pod = _pod(b, claim["metadata"]["name"])
        b.create(claim, pod)
        fits_and_runs(b, pod)
        _expect_configs(b, claim["metadata"]["name"])

    with ctx.step("each container sees the config of its own request's class"):
        for name, cls in CLASS_OF_REQUEST.items():
            b.check_container_env(
                pod["metadata"]["name"], name, [f"admin_class={cls}", *DEFAULT_ENV]
            )
        remove(b, [pod], [claim])

    for device_class in classes.values():
        b.delete("deviceclasses", _name(device_class))


def _device_class(b: Builder, cls: str) -> dict:
    device_class = b.device_class(f"{b.class_name()}-{cls.lower()}")
    device_class["spec"]["config"] = [
        {"opaque": {"driver": b.driver_name, "parameters": {"class": cls}}}
    ]
    return device_class


def _name(obj: dict) -> str:
    return obj["metadata"]["name"]


def _pod(b: Builder, claim: str) -> dict:
    """A pod with one container per request, named like it and using only that request."""
    pod = b.pod_external(claim)
    template = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = []
    for name in CLASS_OF_REQUEST:
        container = copy.deepcopy(template)
        container["name"] = name
        container["resources"]["claims"] = [{"name": "resource-claim", "request": name}]
        pod["spec"]["containers"].append(container)
    return pod


def _expect_configs(b: Builder, claim: str) -> None:
    """The allocation lists each class's config once, for the requests that name the class."""
    allocation = (b.get("resourceclaims", claim).get("status") or {}).get("allocation") or {}
    configs = (allocation.get("devices") or {}).get("config") or []
    from_class = [
        (((c.get("opaque") or {}).get("parameters") or {}).get("class"), c.get("requests") or [])
        for c in configs
        if c.get("source") == "FromClass"
    ]
    for cls in sorted(set(CLASS_OF_REQUEST.values())):
        want = sorted(r for r, c in CLASS_OF_REQUEST.items() if c == cls)
        got = [sorted(requests) for name, requests in from_class if name == cls]
        assert got == [want], (
            f"claim {claim}: the config of class {cls} {WRONG_REQUESTS} {got} "
            f"(one entry per config listed), not once to {want}: {from_class}"
        )


SUBTEST = Subtest(
    name="class-config",
    keps=(4381,),
    initial=every_phase(_check),
    resources=devices_per_node(len(CLASS_OF_REQUEST)),
    releases=">=1.34",
    known_bugs=(
        KnownBug(
            issue=134789,
            component="kube-scheduler",
            releases=">=1.34.0,<1.34.2",
            what="a DeviceClass's config is allocated without the requests it is for, once "
            "per request, so a driver applies it to every device of the claim (fixed in 1.34.2 "
            "and 1.35.0)",
            sign=WRONG_REQUESTS,
        ),
    ),
)
