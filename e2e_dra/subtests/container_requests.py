"""container-requests: each container of a pod gets the devices of the requests it names, every
request of a claim it names whole, and nothing of what it does not name, with the kubelet of
each state.

``containers[].resources.claims`` is how a pod shares its claims out among its containers
(KEP-4381: "if empty, everything from the claim is made available, otherwise only the result of
this request"); the kubelet turns it into each container's list of CDI devices when the
container is made, from the claims it prepared. One pod here holds every way of naming: a claim
with requests ``a`` and ``b`` and a second claim with request ``c``, and five containers:
``both`` names ``a`` and ``b`` (two entries for one claim), ``only-a`` names ``a``, ``whole``
names the first claim without a request, ``other`` names the second claim, ``none`` names
nothing. The check is the builder's (``container_views``, run by every pod check of every
subtest): each container's environment shows exactly the requests it may see, as the driver
spells them.

Every object is made and removed within its phase.
"""

from __future__ import annotations

import copy

from e2e_dra.builder import Builder, request
from e2e_dra.subtest import Context, Subtest
from e2e_dra.subtest_kit import devices_per_node, every_phase, fits_and_runs, remove

FIRST, SECOND = "first", "second"  # the pod's names for its two claims
CONTAINERS: dict[str, list[tuple[str, str | None]]] = {
    # container -> what it names: (the pod's claim, its request; None: the whole claim)
    "both": [(FIRST, "a"), (FIRST, "b")],
    "only-a": [(FIRST, "a")],
    "whole": [(FIRST, None)],
    "other": [(SECOND, None)],
    "none": [],
}


def _check(ctx: Context) -> None:
    b = ctx.builder
    first = b.external_claim(requests=[request("a"), request("b")])
    second = b.external_claim(requests=[request("c")])
    pod = _pod(b, {FIRST: first, SECOND: second})
    with ctx.step("each container sees the requests it names, and nothing else"):
        b.create(first, second, pod)
        # No env line every container must have: "none" gets nothing of either claim.
        fits_and_runs(b, pod, env=())
    remove(b, [pod], [first, second])


def _pod(b: Builder, claims: dict[str, dict]) -> dict:
    """A pod with the two claims under the names :data:`CONTAINERS` use, and those containers."""
    pod = b.pod_external(claims[FIRST]["metadata"]["name"])
    template = copy.deepcopy(pod["spec"]["containers"][0])
    pod["spec"]["resourceClaims"] = [
        {"name": name, "resourceClaimName": claim["metadata"]["name"]}
        for name, claim in claims.items()
    ]
    pod["spec"]["containers"] = []
    for name, named in CONTAINERS.items():
        container = copy.deepcopy(template)
        container["name"] = name
        container["resources"]["claims"] = [
            {"name": claim} if req is None else {"name": claim, "request": req}
            for claim, req in named
        ]
        pod["spec"]["containers"].append(container)
    return pod


SUBTEST = Subtest(
    name="container-requests",
    keps=(4381,),
    initial=every_phase(_check),
    resources=devices_per_node(3),
    releases=">=1.34",
)
