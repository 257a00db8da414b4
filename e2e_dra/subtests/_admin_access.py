"""What admin-access's phases share: its namespaces, the objects it makes there (an admin claim,
an admin claim template and its pod, an ordinary claim), and the reading of what the server
answers (allocation results, the devices that are held, the scheduler's refusal). The scenario
is told in the docstring of :mod:`e2e_dra.subtests.admin_access`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from e2e_dra.builder import Builder, KubeError, NotFound, Request, request, resource_of, retrying
from e2e_dra.subtest import Context
from e2e_dra.subtest_kit import Running
from e2e_dra.waits import eventually

ADMIN_LABEL = "resource.kubernetes.io/admin-access"
DISABLED = "false"
"""The label's value in the namespace where admin access was switched off by saying so, not by
removing the label: only ``"true"`` grants it (``AuthorizedForAdmin`` compares the value)."""
REFUSAL = (
    "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label "
    "on the containing namespace"
)
FORBIDDEN = f"adminAccess: Forbidden: {REFUSAL}"
"""The field error in a refusal: the claim's and the template's alike name the path
``spec.devices.requests[i].adminAccess`` (``AuthorizedForAdmin`` builds it the same for both)."""
CLAIM_CREATION_REFUSED = "FailedResourceClaimCreation"
"""The resourceclaim controller's event on a pod whose claim it could not create."""
NAMESPACE_GONE_TIMEOUT = 120.0
SERVICE_ACCOUNT_TIMEOUT = 60.0
CONTROLLER_EVENT_TIMEOUT = 60.0
SLICES_TIMEOUT = 30.0
SCHEDULER_TIMEOUT = 60.0
FREED_HOLD = 5.0
"""Seconds after a new ordinary pod's first verdict, once an admin claim is gone, in which no
ordinary claim but the holder's may get the device: the new pod is tried at once, and this
covers the other waiting pods, which the admin claim's deallocation put back in the queue."""

Result = tuple[str, str, str, str, bool]
"""(request, driver, pool, device, adminAccess) of one allocation result."""
Device = tuple[str, str]
"""(pool, device) of this subtest's driver."""


class Held(NamedTuple):
    """A pod that runs with one claim: as it ran once it ran, its claim, and the claim's one
    allocation result; for a claim generated from a ResourceClaimTemplate, that template."""

    pod: Running
    claim: str
    result: Result
    template: str | None = None


class Waiting(NamedTuple):
    """A pod that waits for an ordinary claim, and where."""

    namespace: str
    pod: str
    claim: str


def admin_namespace(b: Builder) -> str:
    """The labelled namespace: ``<namespace><subtest>-labelled``."""
    return f"{b.namespace}{b.name_suffix}-labelled"


def plain_namespace(b: Builder) -> str:
    """The namespace without the label: ``<namespace><subtest>-unlabelled``."""
    return f"{b.namespace}{b.name_suffix}-unlabelled"


def disabled_namespace(b: Builder) -> str:
    """The namespace whose label says :data:`DISABLED`: ``<namespace><subtest>-labelled-false``."""
    return f"{b.namespace}{b.name_suffix}-labelled-{DISABLED}"


def namespace_objects(b: Builder) -> list[dict]:
    """The labelled, the unlabelled and the disabled namespace, in that order."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": admin_namespace(b), "labels": {ADMIN_LABEL: "true"}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plain_namespace(b)}},
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": disabled_namespace(b), "labels": {ADMIN_LABEL: DISABLED}},
        },
    ]


def label_said(value: str | None) -> str:
    """What a namespace's admin-access label is, for a message: ``value`` (None: it has none)."""
    return f"has no {ADMIN_LABEL} label" if value is None else f'has {ADMIN_LABEL}: "{value}"'


def pod_using(b: Builder, claim_name: str, namespace: str) -> dict:
    """A pod in ``namespace`` that uses the existing claim ``claim_name`` there."""
    pod = b.pod_external(claim_name)
    pod["metadata"]["namespace"] = namespace
    return pod


def ordinary_claim(b: Builder, namespace: str, requests: Sequence[Request] | None = None) -> dict:
    """The default claim (or one with ``requests``), in ``namespace``."""
    claim = b.external_claim(requests)
    claim["metadata"]["namespace"] = namespace
    return claim


def admin_claim(b: Builder, namespace: str) -> dict:
    """The default claim, in ``namespace``, asking for admin access to its device."""
    return ordinary_claim(b, namespace, [request(admin_access=True)])


def admin_pod_inline(b: Builder, namespace: str) -> tuple[dict, dict]:
    """A pod in ``namespace`` whose claim comes from a template named like it, and that
    template, which asks for admin access."""
    pod, template = b.pod_inline(requests=[request(admin_access=True)])
    pod["metadata"]["namespace"] = namespace
    template["metadata"]["namespace"] = namespace
    return pod, template


def admin_claim_template(b: Builder, namespace: str) -> dict:
    """A claim template, in ``namespace``, asking for admin access."""
    return admin_pod_inline(b, namespace)[1]


def pod_from_template(b: Builder, namespace: str, template: str) -> dict:
    """A new pod in ``namespace`` whose claim comes from the existing template ``template``."""
    pod, _ = b.pod_inline()
    pod["metadata"]["namespace"] = namespace
    pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = template
    return pod


def generated_claim(pod: dict) -> str | None:
    """The name of the claim the resourceclaim controller generated for the pod's one claim
    from a template, as the pod's status says (None: none yet)."""
    (wanted,) = pod["spec"]["resourceClaims"]
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == wanted["name"]:
            return status.get("resourceClaimName")
    return None


def requested_admin_access(spec: dict) -> object:
    """What the one request of a claim spec (a claim's ``spec``, a template's ``spec.spec``)
    says of admin access, as the server stored it (None: nothing)."""
    return spec["devices"]["requests"][0]["exactly"].get("adminAccess")


def published_devices(slices: Iterable[dict], driver: str) -> set[Device]:
    """Every device that ``driver``'s ResourceSlices publish."""
    return {
        (s["spec"]["pool"]["name"], d["name"])
        for s in slices
        if s["spec"].get("driver") == driver
        for d in s["spec"].get("devices") or []
    }


def ordinary_allocations(claims: Iterable[dict], driver: str) -> dict[str, set[Device]]:
    """``namespace/claim`` -> the devices of ``driver`` allocated to it without admin access:
    what the allocator counts as in use (it skips results with ``adminAccess``)."""
    held: dict[str, set[Device]] = {}
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or []:
            if r.get("driver") == driver and not r.get("adminAccess"):
                metadata = claim["metadata"]
                key = f"{metadata['namespace']}/{metadata['name']}"
                held.setdefault(key, set()).add((r["pool"], r["device"]))
    return held


def ordinary_held(ctx: Context) -> dict[str, set[Device]]:
    """:func:`ordinary_allocations` over every claim there can be: the subtest's own in its
    namespace, and all in the labelled namespace, which holds nothing but this subtest's."""
    b = ctx.builder
    claims = retrying(b.list)("resourceclaims", mine=True)
    claims += retrying(in_namespace(ctx, admin_namespace(b)).list)("resourceclaims")
    return ordinary_allocations(claims, b.driver_name)


def refused_by_scheduler(pod: dict) -> bool:
    """The pod is not bound, and the scheduler's last word on it (its PodScheduled condition)
    is the API server's refusal of an allocation with admin access."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending" or (pod.get("spec") or {}).get("nodeName"):
        return False
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and FORBIDDEN in (c.get("message") or "")
        for c in status.get("conditions") or []
    )


def allocated_as_admin(ctx: Context, namespace: str, claim: str, held: Result) -> None:
    """``claim`` is allocated the device ``held`` names, with admin access on the result."""
    results = results_of(ctx, namespace, claim)
    want = [(held[0], held[1], held[2], held[3], True)]
    assert results == want, f"ResourceClaim {namespace}/{claim}: results {results}, want {want}"


def results_of(ctx: Context, namespace: str, claim: str) -> list[Result]:
    """The claim's allocation results (empty when it is not allocated)."""
    obj = retrying(in_namespace(ctx, namespace).get)("resourceclaims", claim)
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return [
        (r["request"], r["driver"], r["pool"], r["device"], bool(r.get("adminAccess")))
        for r in (allocation.get("devices") or {}).get("results") or []
    ]


def in_namespace(ctx: Context, namespace: str) -> Builder:
    """Pod checks (run, env, delete) in ``namespace``; build objects with ``ctx.builder``."""
    return ctx.builder.in_namespace(namespace)


def wait_service_account(ctx: Context, namespace: str) -> None:
    eventually(
        lambda: in_namespace(ctx, namespace).get("serviceaccounts", "default"),
        what=f"service account {namespace}/default",
        timeout=SERVICE_ACCOUNT_TIMEOUT,
        poll=0.5,
    )


def delete_namespaces(b: Builder, *, missing_ok: bool) -> None:
    """Delete the namespaces (with whatever is left in them) and wait until they are gone."""
    names = [ns["metadata"]["name"] for ns in namespace_objects(b)]
    for name in names:
        b.delete("namespaces", name, missing_ok=missing_ok)
    for name in names:
        b.wait_gone("namespaces", name, timeout=NAMESPACE_GONE_TIMEOUT)


def refused(ctx: Context, namespace: str, why: str) -> None:
    """An admin-access claim and claim template are refused in ``namespace``, whose label does
    not say "true" (``why``; read first, so that a refusal proves what it claims to)."""
    b = ctx.builder
    labels = retrying(b.get)("namespaces", namespace)["metadata"].get("labels") or {}
    label = labels.get(ADMIN_LABEL)
    assert label != "true", f"namespace {namespace} {label_said(label)}: no refusal is due there"
    for obj in (admin_claim(b, namespace), admin_claim_template(b, namespace)):
        what = f"{obj['kind']} {namespace}/{obj['metadata']['name']}"
        with ctx.step(f"{what} with admin access is refused: {why}"):
            try:
                retrying(b.create)(obj)
            except KubeError as exc:
                assert exc.status == 422 and FORBIDDEN in exc.message, (
                    f"creating {what} failed, but not as refused admin access "
                    f"(want 422 with {FORBIDDEN!r}): {exc}"
                )
                ctx.log(f"refused as expected: {exc.message}")
            else:
                raise AssertionError(
                    f"the API server created {what} with adminAccess: true although namespace "
                    f'{namespace} {label_said(label)}: only "true" grants admin access'
                )
            try:
                there = in_namespace(ctx, namespace)
                retrying(there.get)(resource_of(obj), obj["metadata"]["name"])
            except NotFound:
                pass
            else:
                raise AssertionError(f"{what} was refused, yet it exists")


def template_claim_refused(ctx: Context, template: str) -> None:
    """A new pod from admin template ``template`` in the labelled namespace, which has lost its
    label: the resourceclaim controller's claim for it is refused (its event says so with the
    API server's words), the pod gets no claim and is not scheduled. The pod is deleted at once:
    the controller would retry and, once the label is back, succeed."""
    b = ctx.builder
    namespace = admin_namespace(b)
    admin = in_namespace(ctx, namespace)
    pod = pod_from_template(b, namespace, template)
    name = pod["metadata"]["name"]
    with ctx.step(f"pod {namespace}/{name} gets no claim from admin template {template}"):
        b.create(pod)
        selector = f"involvedObject.name={name},reason={CLAIM_CREATION_REFUSED}"
        events = eventually(
            lambda: admin.list("events", fieldSelector=selector),
            what=f"a {CLAIM_CREATION_REFUSED} event about pod {name} with {FORBIDDEN!r}",
            timeout=CONTROLLER_EVENT_TIMEOUT,
            until=lambda events: any(FORBIDDEN in e.get("message", "") for e in events),
        )
        ctx.log(f"refused as expected: {events[-1].get('message')}")
        now = retrying(admin.read_pod)(name)
        assert generated_claim(now) is None, (
            f"pod {namespace}/{name} names claim {generated_claim(now)} although its creation "
            "was refused"
        )
        assert now.get("status", {}).get("phase") == "Pending" and not now["spec"].get(
            "nodeName"
        ), f"pod {namespace}/{name} without its claim was scheduled: {now.get('status')}"
        uid = now["metadata"]["uid"]
        owned = [
            c["metadata"]["name"]
            for c in retrying(admin.list)("resourceclaims")
            if uid in [o.get("uid") for o in c["metadata"].get("ownerReferences") or []]
        ]
        assert not owned, f"the claim for pod {namespace}/{name} was refused, yet {owned} exist"
        retrying(admin.delete)("pods", name)
        admin.wait_pod_gone(name)
