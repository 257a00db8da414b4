"""admin-access: a claim with ``adminAccess: true`` (DRAAdminAccess) gets a device that another
pod already uses, but only in a namespace labelled ``resource.kubernetes.io/admin-access: "true"``
-- before the upgrade, after it and after the downgrade.

The driver publishes one device (one node, one device). An ordinary claim's pod, the holder,
holds it in the subtest's namespace for the whole run. Every phase first checks that this is all
that holds a device: the driver publishes exactly the holder's device and no other claim of the
subtest has an ordinary allocation. So whenever a waiting pod is judged, every device is held.

Two ordinary claims' pods wait, unschedulable, in every phase: one in the subtest's namespace and
one in the labelled namespace. The label lets a claim ask for admin access; it does not make a
claim without ``adminAccess`` share a device. After a restart, the scheduler that runs now must
have said so itself (a FailedScheduling event since its process started, ``scheduler_reported``):
the pods' status may still be the verdict of the scheduler before it.

In every phase two new admin pods in the labelled namespace get the held device anyway: one
through an admin-access ResourceClaim, one through an admin-access ResourceClaimTemplate, whose
claim the resourceclaim controller of that phase's control plane generates and its scheduler
allocates, with ``adminAccess`` on the allocation result. In every phase an admin-access claim,
and a claim template, in a namespace without the label is refused at creation: the API server's
validation (``AuthorizedForAdmin`` in pkg/registry/resource, called by the claim and template
strategies' ``Validate``; no admission plugin is involved) reads the namespace from etcd and
answers 422 Invalid, a Forbidden error on ``adminAccess`` naming the label, and stores nothing.
The same refusal holds in a third namespace whose label says ``"false"`` (an admin who switched
admin access off by setting the value rather than removing the label): it is the label's value
that grants admin access, not its presence.

In every phase, while the holder holds the device, one more admin claim gets it and is deleted
again, its pod first: that frees nothing. An allocator that counted admin allocations as ordinary
ones would have the device in its set of allocated devices once, with no count of who holds it,
and drop it with the admin claim's allocation. The deallocation puts every waiting pod back in
the scheduler's queue (a deallocated claim may free a device for any of them), and a new
ordinary claim's pod, created once the admin claim is gone, is surely tried: for a few seconds
after that pod's verdict no claim but the holder's may have the device.

After the upgrade, once that phase's admin pods run, the label comes off the labelled namespace.
The API server checks it in two places, the same in 1.37 and 1.38: when a claim or template is
created (``AuthorizedForAdmin``), and when an allocation with admin access is first written to a
claim's status (``AuthorizedForAdminStatus`` in the status strategy's ``ValidateUpdate``, which
skips a claim whose allocation already has it). Never again: the admin allocations made before
are not revoked, and their pods run on untouched. From then on a new admin-access claim or
template there is refused as in the unlabelled one; so is the claim the resourceclaim controller
generates for a new pod from an admin template made while the label was there (the pod gets a
FailedResourceClaimCreation event with the same refusal, and no claim); and so is the first
allocation of an admin claim made in the first phase for no pod: once a pod uses it, the
scheduler's status write is refused, its PodScheduled condition says why, the claim stays
unallocated and the pod waits.

Removing the label after the upgrade rather than after the downgrade puts a restart between the
removal and the next look: the downgraded components must also leave the admin pods of a
namespace that lost its label running untouched, the previous release's API server must refuse
new admin claims there too, and the scheduler that runs then must still fail to store the
waiting pod's allocation. The last phase then puts the label back: that pod's next scheduling
attempt stores its allocation and it runs, and new admin claims and templates work there again.

After each restart, first of all, the holder and every admin pod of the phases before must run
untouched: the same pod, its container neither restarted nor replaced, its claim still reserved
for it and its device still in its environment (``subtest_kit.still_untouched``).

The three namespaces are this subtest's own: the subtest creates them and deletes them at its end,
or the tear-down does (``Builder.defer``). The labelled one never holds anything but this
subtest's claims, templates and pods. Its pods are checked through a Builder bound to that
namespace, used for pod checks only: the objects come from the subtest's own builder (its driver,
its class, its names). Upstream once had an admin-access upgrade test that shared one builder
with other tests, and reverted it; here the subtest's builder and driver are its own.

Gates: DRAAdminAccess is beta and on by default from 1.34 and GA, locked on, from 1.36 (to be
removed in 1.39): nothing to set. Releases without the v1 API (< 1.34) are excluded.
"""

from __future__ import annotations

from e2e_dra.builder import (
    POD_DELETE_TIMEOUT,
    PodFailed,
    retrying,
)
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    CLAIM_GONE_TIMEOUT,
    devices_per_node,
    older_writes_hold,
    running,
    scheduler_found_no_fit,
    scheduler_reported,
    still_untouched,
)
from e2e_dra.subtests._admin_access import (
    ADMIN_LABEL,
    DISABLED,
    FORBIDDEN,
    FREED_HOLD,
    SCHEDULER_TIMEOUT,
    SLICES_TIMEOUT,
    Held,
    Result,
    Waiting,
    admin_claim,
    admin_namespace,
    admin_pod_inline,
    allocated_as_admin,
    delete_namespaces,
    disabled_namespace,
    generated_claim,
    in_namespace,
    namespace_objects,
    ordinary_claim,
    ordinary_held,
    plain_namespace,
    pod_using,
    published_devices,
    refused,
    refused_by_scheduler,
    requested_admin_access,
    results_of,
    template_claim_refused,
    wait_service_account,
)
from e2e_dra.waits import WaitTimeout, consistently, eventually


def initial(ctx: Context) -> Phase:
    b = ctx.builder
    with ctx.step(f'create the labelled, the unlabelled and the "{DISABLED}" namespace'):
        b.defer(lambda b: delete_namespaces(b, missing_ok=True))
        b.create(*namespace_objects(b))
        # Pods are admitted only once the namespace's default service account exists.
        wait_service_account(ctx, admin_namespace(b))

    with ctx.step("an ordinary claim's pod holds the only device"):
        holder_claim = b.external_claim()
        holder = b.pod_external(holder_claim["metadata"]["name"])
        b.create(holder_claim, holder)
        b.test_pod(holder)
        results = results_of(ctx, ctx.namespace, holder_claim["metadata"]["name"])
        assert len(results) == 1 and results[0][1] == b.driver_name and not results[0][4], (
            f"ResourceClaim {holder_claim['metadata']['name']}: want one ordinary device of "
            f"{b.driver_name}, got {results}"
        )
        result = results[0]
    in_use = Held(running(b, holder["metadata"]["name"]), holder_claim["metadata"]["name"], result)
    with ctx.step("a second ordinary claim's pod cannot get it"):
        blocked_claim = b.external_claim()
        blocked = b.pod_external(blocked_claim["metadata"]["name"])
        b.create(blocked_claim, blocked)
        b.wait_unschedulable(blocked["metadata"]["name"])
    # Right before the ordinary claim of the labelled namespace: all devices are held.
    _only_holder_holds(ctx, in_use)
    waiting = [
        Waiting(ctx.namespace, blocked["metadata"]["name"], blocked_claim["metadata"]["name"]),
        _ordinary_in_labelled(ctx),
    ]

    admins = [_admin_pod(ctx, result), _template_admin_pod(ctx, result)]
    _admin_claim_deleted(ctx, in_use)
    idle = _idle_admin_claim(ctx)
    _refused_where_not_true(ctx)
    ctx.log(
        f"device {result[2]}/{result[3]} is held by {in_use.pod.name} and shared by admin pods "
        f"{[admin.pod.name for admin in admins]}"
    )

    def after_upgrade(ctx: Context) -> Phase:
        _still_in_use(ctx, in_use, waiting, admins, labelled=True)
        admins.extend([_admin_pod(ctx, result), _template_admin_pod(ctx, result)])
        _admin_claim_deleted(ctx, in_use)
        _refused_where_not_true(ctx)
        refused_pod = _unlabel(ctx, admins, idle)

        def after_downgrade(ctx: Context) -> Phase:
            _still_in_use(ctx, in_use, waiting, admins, labelled=False)
            _refused_since_unlabelled(ctx, admins)
            _allocation_still_refused(ctx, refused_pod, idle)
            _relabel(ctx)
            admins.append(_allocated_once_labelled(ctx, refused_pod, idle, result))
            admins.extend([_admin_pod(ctx, result), _template_admin_pod(ctx, result)])
            _admin_claim_deleted(ctx, in_use)
            _refused_where_not_true(ctx)
            with ctx.step("delete pods, claims, templates and namespaces"):
                _delete_all(ctx, in_use, waiting, admins)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _only_holder_holds(ctx: Context, in_use: Held) -> None:
    """The driver publishes exactly the holder's device, and no other claim of the subtest has
    an ordinary allocation: every device is held, and only by the holder, so a pod that waits
    for an ordinary claim has nothing else it could get, and nothing else took it."""
    b = ctx.builder
    device = (in_use.result[2], in_use.result[3])
    with ctx.step(
        f"the driver publishes one device, {device[0]}/{device[1]}, and only the holder holds it"
    ):
        # Eventually: a restarted kubelet may still be re-publishing the slice.
        eventually(
            lambda: published_devices(b.list("resourceslices"), b.driver_name),
            what=(
                f"driver {b.driver_name} to publish only {device}, which the holder holds "
                "(else the waiting pods prove nothing)"
            ),
            timeout=SLICES_TIMEOUT,
            until=lambda published: published == {device},
        )
        held = ordinary_held(ctx)
        want = {f"{ctx.namespace}/{in_use.claim}": {device}}
        assert held == want, f"devices held without admin access: {held}, want only {want}"


def _ordinary_in_labelled(ctx: Context) -> Waiting:
    """A claim without admin access in the labelled namespace is an ordinary claim: it does not
    get the device in use, and its pod waits."""
    b = ctx.builder
    namespace = admin_namespace(b)
    claim = ordinary_claim(b, namespace)
    name = claim["metadata"]["name"]
    pod = pod_using(b, name, namespace)
    with ctx.step(f"an ordinary claim {namespace}/{name} does not share the device in use"):
        created, _ = b.create(claim, pod)
        requested = requested_admin_access(created["spec"])
        assert not requested, f"the API server stored adminAccess={requested!r} for {name}"
        in_namespace(ctx, namespace).wait_unschedulable(pod["metadata"]["name"])
        results = results_of(ctx, namespace, name)
        assert not results, f"ResourceClaim {namespace}/{name} was allocated {results}"
    return Waiting(namespace, pod["metadata"]["name"], name)


def _admin_pod(ctx: Context, held: Result) -> Held:
    """A new admin-access claim in the labelled namespace gets the device that ``held`` names,
    and its pod runs."""
    b = ctx.builder
    namespace = admin_namespace(b)
    claim = admin_claim(b, namespace)
    name = claim["metadata"]["name"]
    pod = pod_using(b, name, namespace)
    admin = in_namespace(ctx, namespace)
    with ctx.step(f"admin-access claim {namespace}/{name} gets the device in use"):
        created, _ = b.create(claim, pod)
        requested = requested_admin_access(created["spec"])
        assert requested is True, f"the API server stored adminAccess={requested!r} for {name}"
        admin.test_pod(pod)
        allocated_as_admin(ctx, namespace, name, held)
    return Held(running(admin, pod["metadata"]["name"]), name, results_of(ctx, namespace, name)[0])


def _template_admin_pod(ctx: Context, held: Result) -> Held:
    """A new pod in the labelled namespace whose claim comes from a new admin-access template:
    the resourceclaim controller generates the claim (owned by the pod, asking for admin
    access), it gets the device that ``held`` names, and the pod runs."""
    b = ctx.builder
    namespace = admin_namespace(b)
    pod, template = admin_pod_inline(b, namespace)
    name = template["metadata"]["name"]
    admin = in_namespace(ctx, namespace)
    with ctx.step(f"the claim from admin-access template {namespace}/{name} gets the device"):
        created, _ = b.create(template, pod)
        requested = requested_admin_access(created["spec"]["spec"])
        assert requested is True, f"the API server stored adminAccess={requested!r} for {name}"
        admin.test_pod(pod)
        now = retrying(admin.read_pod)(pod["metadata"]["name"])
        claim_name = generated_claim(now)
        assert claim_name, f"pod {namespace}/{pod['metadata']['name']} runs without a claim name"
        claim = retrying(admin.get)("resourceclaims", claim_name)
        owners = [o.get("uid") for o in claim["metadata"].get("ownerReferences") or []]
        assert owners == [now["metadata"]["uid"]], (
            f"ResourceClaim {namespace}/{claim_name} is owned by {owners}, not by its pod "
            f"{now['metadata']['uid']}: not the claim generated for it"
        )
        requested = requested_admin_access(claim["spec"])
        assert requested is True, (
            f"ResourceClaim {namespace}/{claim_name}, generated from {name}, has "
            f"adminAccess={requested!r}"
        )
        allocated_as_admin(ctx, namespace, claim_name, held)
    result = results_of(ctx, namespace, claim_name)[0]
    return Held(running(admin, pod["metadata"]["name"]), claim_name, result, template=name)


def _admin_claim_deleted(ctx: Context, in_use: Held) -> None:
    """One more admin claim gets the device ``in_use`` holds and is deleted, its pod first:
    afterwards no ordinary claim but the holder's gets the device, neither a new one whose pod
    is created once the admin claim is gone (the scheduler tries a new pod at once) nor a
    waiting one (its pod is back in the queue since the deallocation), for :data:`FREED_HOLD`
    seconds after the new pod's verdict. The new pod and its claim are deleted again: they
    prove nothing to the phases after this one."""
    b = ctx.builder
    namespace = admin_namespace(b)
    admin = in_namespace(ctx, namespace)
    gone = _admin_pod(ctx, in_use.result)
    deleted = f"{namespace}/{gone.claim}"
    with ctx.step(f"delete admin-access claim {deleted}, its pod {gone.pod.name} first"):
        admin.delete_pod_and_wait(gone.pod.name)
        retrying(admin.delete)("resourceclaims", gone.claim)
        admin.wait_gone("resourceclaims", gone.claim, timeout=CLAIM_GONE_TIMEOUT)
    pool_device = (in_use.result[2], in_use.result[3])
    device = "/".join(pool_device)
    holder = f"{ctx.namespace}/{in_use.claim}"
    claim = b.external_claim()
    name = claim["metadata"]["name"]
    pod = b.pod_external(name)
    with ctx.step(f"with {deleted} gone, new ordinary claim {name} does not get {device} either"):
        b.create(claim, pod)
        try:
            b.wait_unschedulable(pod["metadata"]["name"], timeout=SCHEDULER_TIMEOUT)
            consistently(
                lambda: ordinary_held(ctx),
                what=f"{device} held without admin access by {holder} alone",
                duration=FREED_HOLD,
                holds=lambda held: held == {holder: {pool_device}},
            )
        except (PodFailed, WaitTimeout) as exc:
            taken = sorted(key for key in ordinary_held(ctx) if key != holder)
            if not taken:
                raise
            raise AssertionError(
                f"device {device} went to ResourceClaim {', '.join(taken)} after admin-access "
                f"claim {deleted} was deleted, while ResourceClaim {holder} holds it: deleting "
                "an admin-access allocation freed the device for ordinary claims"
            ) from exc
        b.delete_pod_and_wait(pod["metadata"]["name"])
        retrying(b.delete)("resourceclaims", name)


def _still_in_use(
    ctx: Context, in_use: Held, waiting: list[Waiting], admins: list[Held], *, labelled: bool
) -> None:
    """The holder and every admin pod run untouched since they started (checked first, before
    anything else looks at them), the holder still holds the only device and the ordinary pods
    still wait by this scheduler's verdict, every admin pod still has the same allocation, and
    the labelled namespace has its label (``labelled``) or still lacks it."""
    b = ctx.builder
    admin = in_namespace(ctx, admin_namespace(b))
    with ctx.step(f"pod {in_use.pod.name} and the admin pods run untouched"):
        still_untouched(b, in_use.pod, [in_use.claim])
        for held in admins:
            still_untouched(admin, held.pod, [held.claim])
    with ctx.step(f"{in_use.pod.name} still holds {in_use.result[2]}/{in_use.result[3]}"):
        b.test_pod(b.read_pod(in_use.pod.name))
        now = results_of(ctx, ctx.namespace, in_use.claim)
        assert now == [in_use.result], (
            f"ResourceClaim {in_use.claim}: results were {[in_use.result]}, now {now}"
        )
    _only_holder_holds(ctx, in_use)
    names = ", ".join(f"{w.namespace}/{w.pod}" for w in waiting)
    with ctx.step(f"the scheduler that runs now leaves {names} waiting"):
        for w in waiting:
            there = in_namespace(ctx, w.namespace)
            scheduler_found_no_fit(ctx, w.pod, w.namespace)
            there.wait_unschedulable(w.pod)
            results = results_of(ctx, w.namespace, w.claim)
            assert not results, f"ResourceClaim {w.namespace}/{w.claim} was allocated {results}"
    _check_labels(ctx, labelled=labelled)
    for held in admins:
        with ctx.step(f"admin pod {held.pod.name} still runs with {held.claim} as allocated"):
            admin.test_pod(admin.read_pod(held.pod.name))
            now = results_of(ctx, admin_namespace(b), held.claim)
            assert now == [held.result], (
                f"ResourceClaim {held.claim}: results were {[held.result]}, now {now}"
            )


def _check_labels(ctx: Context, *, labelled: bool) -> None:
    """The unlabelled namespace lacks the label; the labelled one has it if ``labelled``, else
    it still lacks it since the phase before took it off."""
    b = ctx.builder
    state = "has its label" if labelled else "still lacks the label taken off before"
    with ctx.step(f"the labelled namespace {state}, the unlabelled one has none"):
        labels = {
            name: retrying(b.get)("namespaces", name)["metadata"].get("labels", {})
            for name in (admin_namespace(b), plain_namespace(b))
        }
        want = "true" if labelled else None
        assert labels[admin_namespace(b)].get(ADMIN_LABEL) == want, labels
        assert ADMIN_LABEL not in labels[plain_namespace(b)], labels


def _unlabel(ctx: Context, admins: list[Held], idle: str) -> str:
    """Take the label off the labelled namespace: new admin access is refused there from now on,
    also for the admin claim ``idle`` made while it was there, once a pod needs it allocated
    (that pod, which waits, is returned); what was granted stays."""
    b = ctx.builder
    namespace = admin_namespace(b)
    with ctx.step(f"take the {ADMIN_LABEL} label off {namespace}"):
        body = {"metadata": {"labels": {ADMIN_LABEL: None}}}
        labels = retrying(b.patch)("namespaces", namespace, body)["metadata"].get("labels", {})
        assert ADMIN_LABEL not in labels, f"namespace {namespace} still has labels {labels}"
    _refused_since_unlabelled(ctx, admins)
    refused_pod = _allocation_refused(ctx, idle)
    admin = in_namespace(ctx, namespace)
    with ctx.step("the admin pods keep running and keep their allocations without the label"):
        for held in admins:
            still_untouched(admin, held.pod, [held.claim])
            now = results_of(ctx, namespace, held.claim)
            assert now == [held.result], (
                f"ResourceClaim {namespace}/{held.claim}: allocated {[held.result]} while the "
                f"namespace had the label, now {now}"
            )
    return refused_pod


def _idle_admin_claim(ctx: Context) -> str:
    """An admin-access claim in the labelled namespace that no pod uses yet: stored, and (as
    every claim, allocated only for a pod) not allocated. Its first allocation comes after the
    label is gone."""
    b = ctx.builder
    namespace = admin_namespace(b)
    claim = admin_claim(b, namespace)
    name = claim["metadata"]["name"]
    with ctx.step(f"admin-access claim {namespace}/{name}, for no pod yet, is not allocated"):
        (created,) = b.create(claim)
        requested = requested_admin_access(created["spec"])
        assert requested is True, f"the API server stored adminAccess={requested!r} for {name}"
        results = results_of(ctx, namespace, name)
        assert not results, f"ResourceClaim {namespace}/{name} was allocated {results} for no pod"
    return name


def _allocation_refused(ctx: Context, claim: str) -> str:
    """A new pod uses the admin claim ``claim``, made while the namespace had its label: the
    scheduler allocates the device in use, but the API server refuses to store an allocation
    with admin access in a namespace without the label (``AuthorizedForAdminStatus``, on the
    claim's status), so the pod waits and the claim stays unallocated. The pod is returned."""
    b = ctx.builder
    namespace = admin_namespace(b)
    pod = b.pod_external(claim)
    pod["metadata"]["namespace"] = namespace
    name = pod["metadata"]["name"]
    with ctx.step(f"pod {namespace}/{name} waits: the allocation of {claim} is refused"):
        b.create(pod)
        _scheduling_refused(ctx, name, claim)
    return name


def _allocation_still_refused(ctx: Context, pod: str, claim: str) -> None:
    """After a restart, the scheduler that runs now still cannot store the allocation of the
    admin claim ``claim`` for ``pod``, as long as the namespace lacks its label."""
    admin = in_namespace(ctx, admin_namespace(ctx.builder))
    with ctx.step(f"the scheduler that runs now cannot allocate {claim} for {pod} either"):
        scheduler_reported(ctx, pod, "FailedScheduling", admin)
        _scheduling_refused(ctx, pod, claim)


def _scheduling_refused(ctx: Context, pod: str, claim: str) -> None:
    """Until ``pod``'s PodScheduled condition carries the refusal (the scheduler writes each
    attempt's error there), with ``pod`` not bound and ``claim`` not allocated."""
    namespace = admin_namespace(ctx.builder)
    admin = in_namespace(ctx, namespace)
    now = eventually(
        lambda: admin.read_pod(pod),
        what=f"the scheduler to report that storing the allocation of {claim} for {pod} failed "
        f"with {FORBIDDEN!r}",
        timeout=SCHEDULER_TIMEOUT,
        until=refused_by_scheduler,
    )
    ctx.log(f"refused as expected: {now['status']['conditions']}")
    results = results_of(ctx, namespace, claim)
    assert not results, f"ResourceClaim {namespace}/{claim} was allocated {results}"


def _allocated_once_labelled(ctx: Context, pod: str, claim: str, held: Result) -> Held:
    """With the label back, the scheduler's next attempt stores the allocation: ``pod`` runs,
    ``claim`` shares the device ``held`` names with admin access."""
    namespace = admin_namespace(ctx.builder)
    admin = in_namespace(ctx, namespace)
    with ctx.step(f"with the label back, {claim} is allocated and {pod} runs"):
        admin.test_pod(admin.read_pod(pod))
        allocated_as_admin(ctx, namespace, claim, held)
    return Held(running(admin, pod), claim, results_of(ctx, namespace, claim)[0])


def _relabel(ctx: Context) -> None:
    """Put the label back on the labelled namespace, for this phase's new admin claims."""
    b = ctx.builder
    namespace = admin_namespace(b)
    with ctx.step(f"put the {ADMIN_LABEL} label back on {namespace}"):
        body = {"metadata": {"labels": {ADMIN_LABEL: "true"}}}
        labels = retrying(b.patch)("namespaces", namespace, body)["metadata"].get("labels", {})
        assert labels.get(ADMIN_LABEL) == "true", f"namespace {namespace} has labels {labels}"


def _refused_since_unlabelled(ctx: Context, admins: list[Held]) -> None:
    """In the labelled namespace without its label: a new admin-access claim and template are
    refused, and so is the claim generated for a new pod from an admin template made while the
    label was there."""
    b = ctx.builder
    refused(ctx, admin_namespace(b), "its label was taken off")
    template = next(held.template for held in admins if held.template)
    template_claim_refused(ctx, template)


def _refused_where_not_true(ctx: Context) -> None:
    """Where the label never said "true", admin access is refused alike: in the namespace
    without it, and in the one where it says :data:`DISABLED`."""
    b = ctx.builder
    refused(ctx, plain_namespace(b), "it never had the label")
    refused(ctx, disabled_namespace(b), f'its label says "{DISABLED}"')


def _delete_all(ctx: Context, in_use: Held, waiting: list[Waiting], admins: list[Held]) -> None:
    """Strict deletes (NotFound fails: each object was expected to be there), pods first (all
    at once, then waited for), then their claims (a generated claim goes with its pod: waited
    for) and templates, then the namespaces."""
    b = ctx.builder
    admin_ns = admin_namespace(b)
    pods = [(admin_ns, held.pod.name, held.claim, held.template) for held in admins]
    pods += [(w.namespace, w.pod, w.claim, None) for w in waiting]
    pods.append((ctx.namespace, in_use.pod.name, in_use.claim, None))
    for namespace, pod, _, _ in pods:
        retrying(in_namespace(ctx, namespace).delete)("pods", pod)
    for namespace, pod, claim, template in pods:
        there = in_namespace(ctx, namespace)
        there.wait_pod_gone(pod)
        if template is None:
            retrying(there.delete)("resourceclaims", claim)
        else:
            there.wait_gone("resourceclaims", claim, timeout=POD_DELETE_TIMEOUT)
            retrying(there.delete)("resourceclaimtemplates", template)
    delete_namespaces(b, missing_ok=False)


SUBTEST = Subtest(
    name="admin-access",
    keps=(5018,),
    initial=initial,
    # One device: the ordinary claim that holds it leaves none for anyone but admin access
    # (checked in every phase: ``_only_holder_holds``).
    resources=devices_per_node(1),
    releases=">=1.34",
)
