"""admin-access: a claim with ``adminAccess: true`` (DRAAdminAccess) gets a device that another
pod already uses, but only in a namespace labelled ``resource.kubernetes.io/admin-access: "true"``
-- before the upgrade, after it and after the downgrade.

The driver publishes one device. An ordinary claim's pod holds it in the subtest's namespace for
the whole run, and a second ordinary claim's pod waits, unschedulable, in every phase: the device
is in use. In every phase a new admin-access claim in the labelled namespace is allocated that
same device anyway and its pod runs; the admin pods of earlier phases still run, with the same
allocation. In every phase an admin-access claim, and a claim template, in a namespace without the
label is refused at creation: the API server's validation (``AuthorizedForAdmin`` in
pkg/registry/resource, called by the claim and template strategies' ``Validate``) answers 422
Invalid, a Forbidden error on ``adminAccess`` naming the label, and stores nothing.

After each restart, first of all, the holder and every admin pod of the phases before must run
untouched: the same pod, its container neither restarted nor replaced, its claim still reserved
for it and its device still in its environment (``subtest_kit.still_untouched``).

The two namespaces are this subtest's own: the subtest creates them and deletes them at its end,
or the tear-down does (``Builder.defer``). The labelled one never holds anything but this
subtest's admin claims and pods. Its pods are checked through a Builder bound to that namespace,
used for pod checks only: the objects come from the subtest's own builder (its driver, its class,
its names). Upstream once had an admin-access upgrade test that shared one builder with other
tests, and reverted it; here the subtest's builder and driver are its own.

Gates: DRAAdminAccess is beta and on by default from 1.34 and GA, locked on, from 1.36 (to be
removed in 1.39): nothing to set. Releases without the v1 API (< 1.34) are excluded.
"""

from __future__ import annotations

from e2e_dra.builder import Builder, NotFound, resource_of, retrying
from e2e_dra.kube import KubeError
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import Running, devices_per_node, running, still_untouched
from e2e_dra.waits import eventually

ADMIN_LABEL = "resource.kubernetes.io/admin-access"
REFUSAL = (
    "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label "
    "on the containing namespace"
)
NAMESPACE_GONE_TIMEOUT = 120.0
SERVICE_ACCOUNT_TIMEOUT = 60.0

Result = tuple[str, str, str, str, bool]
"""(request, driver, pool, device, adminAccess) of one allocation result."""
Held = tuple[Running, str, Result]
"""(its pod as it ran once it ran, claim, its one allocation result)."""


def admin_namespace(b: Builder) -> str:
    """The labelled namespace: ``<namespace><subtest>-labelled``."""
    return f"{b.namespace}{b.name_suffix}-labelled"


def plain_namespace(b: Builder) -> str:
    """The namespace without the label: ``<namespace><subtest>-unlabelled``."""
    return f"{b.namespace}{b.name_suffix}-unlabelled"


def namespace_objects(b: Builder) -> list[dict]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": admin_namespace(b), "labels": {ADMIN_LABEL: "true"}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plain_namespace(b)}},
    ]


def admin_claim(b: Builder, namespace: str) -> dict:
    """The default claim, in ``namespace``, asking for admin access to its device."""
    claim = b.external_claim()
    claim["metadata"]["namespace"] = namespace
    claim["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return claim


def admin_claim_template(b: Builder, namespace: str) -> dict:
    """A claim template, in ``namespace``, asking for admin access."""
    _, template = b.pod_inline()
    template["metadata"]["namespace"] = namespace
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return template


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    with ctx.step("create the labelled and the unlabelled namespace"):
        b.defer(lambda b: _delete_namespaces(b, missing_ok=True))
        b.create(*namespace_objects(b))
        # Pods are admitted only once the namespace's default service account exists.
        _wait_service_account(ctx, admin_namespace(b))

    with ctx.step("an ordinary claim's pod holds the only device"):
        holder_claim = b.external_claim()
        holder = b.pod_external(holder_claim["metadata"]["name"])
        b.create(holder_claim, holder)
        b.test_pod(holder)
        results = _results(ctx, ctx.namespace, holder_claim["metadata"]["name"])
        assert len(results) == 1 and results[0][1] == b.driver_name and not results[0][4], (
            f"ResourceClaim {holder_claim['metadata']['name']}: want one ordinary device of "
            f"{b.driver_name}, got {results}"
        )
        result = results[0]
        device = result[2:4]
    with ctx.step("a second ordinary claim's pod cannot get it"):
        blocked_claim = b.external_claim()
        blocked = b.pod_external(blocked_claim["metadata"]["name"])
        b.create(blocked_claim, blocked)
        b.wait_unschedulable(blocked["metadata"]["name"])

    in_use = (running(b, holder["metadata"]["name"]), holder_claim["metadata"]["name"], result)
    waiting = blocked["metadata"]["name"]
    admins = [_admin_pod(ctx, result)]
    _refused(ctx)
    ctx.log(
        f"device {device} is held by {in_use[0].name} and shared by admin pod {admins[0][0].name}"
    )

    def after_upgrade(ctx: Context) -> Phase:
        _still_in_use(ctx, in_use, waiting, admins)
        admins.append(_admin_pod(ctx, result))
        _refused(ctx)

        def after_downgrade(ctx: Context) -> None:
            _still_in_use(ctx, in_use, waiting, admins)
            admins.append(_admin_pod(ctx, result))
            _refused(ctx)
            with ctx.step("delete pods, claims and namespaces"):
                _delete_all(ctx, in_use, waiting, blocked_claim["metadata"]["name"], admins)

        return after_downgrade

    return after_upgrade


def _admin_pod(ctx: Context, held: Result) -> Held:
    """A new admin-access claim in the labelled namespace gets the device that ``held`` names,
    and its pod runs."""
    b = ctx.builder
    namespace = admin_namespace(b)
    claim = admin_claim(b, namespace)
    name = claim["metadata"]["name"]
    pod = b.pod_external(name)
    pod["metadata"]["namespace"] = namespace
    admin = _in(ctx, namespace)
    with ctx.step(f"admin-access claim {namespace}/{name} gets the device in use"):
        created, _ = b.create(claim, pod)
        requested = created["spec"]["devices"]["requests"][0]["exactly"].get("adminAccess")
        assert requested is True, f"the API server stored adminAccess={requested!r} for {name}"
        admin.test_pod(pod)
        results = _results(ctx, namespace, name)
        want = [(held[0], held[1], held[2], held[3], True)]
        assert results == want, f"ResourceClaim {namespace}/{name}: results {results}, want {want}"
    return running(admin, pod["metadata"]["name"]), name, results[0]


def _still_in_use(ctx: Context, in_use: Held, waiting: str, admins: list[Held]) -> None:
    """The holder and every admin pod run untouched since they started (checked first, before
    anything else looks at them), the holder still with its device, the other ordinary pod
    still waits, every admin pod still with the same device, and the namespaces still are as
    made."""
    b = ctx.builder
    admin = _in(ctx, admin_namespace(b))
    pod, claim, result = in_use
    with ctx.step(f"pod {pod.name} and the admin pods run untouched"):
        still_untouched(b, pod, [claim])
        for was, admin_claim_name, _ in admins:
            still_untouched(admin, was, [admin_claim_name])
    with ctx.step(f"{pod.name} still holds {result[2]}/{result[3]}, {waiting} still waits"):
        b.test_pod(b.read_pod(pod.name))
        now = _results(ctx, ctx.namespace, claim)
        assert now == [result], f"ResourceClaim {claim}: results were {[result]}, now {now}"
        b.wait_unschedulable(waiting)
    with ctx.step("the namespaces keep their labels"):
        labels = {
            name: retrying(b.get)("namespaces", name)["metadata"].get("labels", {})
            for name in (admin_namespace(b), plain_namespace(b))
        }
        assert labels[admin_namespace(b)].get(ADMIN_LABEL) == "true", labels
        assert ADMIN_LABEL not in labels[plain_namespace(b)], labels
    for pod, claim, result in admins:
        with ctx.step(f"admin pod {pod.name} still runs with {claim} as allocated before"):
            admin.test_pod(admin.read_pod(pod.name))
            now = _results(ctx, admin_namespace(b), claim)
            assert now == [result], f"ResourceClaim {claim}: results were {[result]}, now {now}"


def _refused(ctx: Context) -> None:
    """An admin-access claim and claim template are refused where the label is missing."""
    b = ctx.builder
    namespace = plain_namespace(b)
    for obj in (admin_claim(b, namespace), admin_claim_template(b, namespace)):
        what = f"{obj['kind']} {namespace}/{obj['metadata']['name']}"
        with ctx.step(f"{what} with admin access is refused without the label"):
            try:
                retrying(b.create)(obj)
            except KubeError as exc:
                assert exc.status == 422 and REFUSAL in exc.message, (
                    f"creating {what} failed, but not as refused admin access "
                    f"(want 422 with {REFUSAL!r}): {exc}"
                )
                ctx.log(f"refused as expected: {exc.message}")
            else:
                raise AssertionError(
                    f"the API server created {what} with adminAccess: true although namespace "
                    f"{namespace} lacks the {ADMIN_LABEL} label"
                )
            try:
                retrying(_in(ctx, namespace).get)(resource_of(obj), obj["metadata"]["name"])
            except NotFound:
                pass
            else:
                raise AssertionError(f"{what} was refused, yet it exists")


def _results(ctx: Context, namespace: str, claim: str) -> list[Result]:
    """The claim's allocation results (empty when it is not allocated)."""
    obj = retrying(_in(ctx, namespace).get)("resourceclaims", claim)
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return [
        (r["request"], r["driver"], r["pool"], r["device"], bool(r.get("adminAccess")))
        for r in (allocation.get("devices") or {}).get("results") or []
    ]


def _in(ctx: Context, namespace: str) -> Builder:
    """Pod checks (run, env, delete) in ``namespace``; build objects with ``ctx.builder``."""
    return ctx.builder.in_namespace(namespace)


def _wait_service_account(ctx: Context, namespace: str) -> None:
    eventually(
        lambda: _in(ctx, namespace).get("serviceaccounts", "default"),
        what=f"service account {namespace}/default",
        timeout=SERVICE_ACCOUNT_TIMEOUT,
        poll=0.5,
    )


def _delete_all(
    ctx: Context, in_use: Held, waiting: str, waiting_claim: str, admins: list[Held]
) -> None:
    """Strict deletes (NotFound fails: each object was expected to be there), pods first (all
    at once, then waited for), then their claims, then the namespaces."""
    b = ctx.builder
    admin_ns = admin_namespace(b)
    pods = [(admin_ns, pod.name, claim) for pod, claim, _ in admins]
    pods += [(ctx.namespace, waiting, waiting_claim), (ctx.namespace, in_use[0].name, in_use[1])]
    for namespace, pod, _ in pods:
        retrying(_in(ctx, namespace).delete)("pods", pod)
    for namespace, pod, claim in pods:
        _in(ctx, namespace).wait_pod_gone(pod)
        retrying(_in(ctx, namespace).delete)("resourceclaims", claim)
    _delete_namespaces(b, missing_ok=False)


def _delete_namespaces(b: Builder, *, missing_ok: bool) -> None:
    """Delete both namespaces (with whatever is left in them) and wait until they are gone."""
    names = [admin_namespace(b), plain_namespace(b)]
    for name in names:
        b.delete("namespaces", name, missing_ok=missing_ok)
    for name in names:
        b.wait_gone("namespaces", name, timeout=NAMESPACE_GONE_TIMEOUT)


SUBTEST = Subtest(
    name="admin-access",
    initial=initial,
    # One device: the ordinary claim that holds it leaves none for anyone but admin access.
    resources=devices_per_node(1),
    releases=">=1.34",
)
