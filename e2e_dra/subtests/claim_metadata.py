"""claim-metadata: only the spec of a ResourceClaim is immutable. Labels, annotations and
finalizers of a claim that is allocated and reserved for a running pod can be changed in every
phase, through every served API version (v1, v1beta2, and v1beta1 before 1.38) and every way a
client writes an object: JSON patch, JSON merge patch, strategic merge patch (served for
ResourceClaims like for every built-in type), server-side apply, and a full PUT of the object as
read. Its driver can report the allocated device's status (``status.devices``) as a driver's
controller does: server-side apply under the driver's name, a merge patch, or a PUT of the
status as read (through v1 only: the metadata updates already go through every version).

Each phase starts a fresh pod with three fresh claims, creates two fresh ResourceClaimTemplates,
and updates them and every claim and template of the phases before (so an object written by the
previous release is updated by the next one). The pods of the phases before must run untouched,
checked first thing after each restart: the same pod, its container neither restarted nor
replaced, its claims still reserved for it and its devices still in its environment. The claims
and templates carry the same opaque parameters ``{"a": "b"}`` but are written differently:

* ``python``: created by this suite's client, which sends ``{"a": "b"}`` (``json.dumps`` puts a
  space after ``:`` and ``,``), as core-dra's claims are;
* ``compact``: created from YAML, which the server turns into ``{"a":"b"}``, as kubectl and the
  Go clients send it;
* ``from-python-template`` (claims only): made for the pod by the resourceclaim controller from
  the phase's ``python`` template. The controller copies the template's ``spec.spec`` into the
  claim (``pkg/controller/resourceclaim``, ``handleClaim``) and creates it over protobuf (the
  controller-manager's ``--kube-api-content-type`` default), which carries the RawExtension's
  bytes as they are: the claim is stored with the template creator's spaces, as a ``python``
  claim is (read from the source, and seen so on every release tested).

Why both: the API server keeps the opaque ``parameters`` (a ``runtime.RawExtension``) as the
bytes the creating client sent, and writes them compacted in every JSON answer. A JSON or merge
patch is applied to the server's own compacted encoding of the claim; a strategic merge patch
(before 1.38) and server-side apply rebuild the whole object from a map (compact, keys sorted);
a PUT carries whatever the client's encoder makes of the parameters. The immutability check of
the spec (``ValidateImmutableField`` in ``pkg/apis/resource/validation``, and from 1.37 the
declarative ``+k8s:immutable`` on ``spec``) compares with ``apiequality.Semantic.DeepEqual``,
which has no rule for RawExtension and so compares those bytes. Whenever they differ from the
stored ones, a metadata-only update is refused, ``spec: Invalid value: ...: field is immutable``
(``Invalid value: null`` from 1.37), although the parameters are the same JSON. Measured on
v1.36.5, v1.37.2 and v1.38.0-beta.0 alike, allocated or not, through every version; only
v1.38.0-beta.0's strategic merge patch, which now copies the top-level fields it does not patch,
keeps the bytes. Nothing documents the refusal (the API says the spec is immutable, not the
metadata), so it is a Kubernetes bug (docs/kubernetes-findings.md, finding 1).

The status has the same flaw (finding 4). The scheduler copies the opaque config, bytes and all,
into ``status.allocation``, which is immutable once set: ``validateResourceClaimStatusUpdate``
compares it with ``ValidateImmutableField``, and from 1.37 the declarative
``+k8s:update=NoModify`` on ``allocation`` skips only values that ``Semantic.DeepEqual`` finds
equal. A status write that re-encodes the allocation (server-side apply and merge patch compact
it, a PUT carries the client's encoding) is refused unless the bytes come out as stored:
``status.allocation: ... field is immutable`` (``field cannot be modified once set`` where the
declarative check answers, from 1.37). So a driver cannot report its device's status on a claim
whose creator sent ``{"a": "b"}``, unless it writes the status back as that creator spelled it.

A ResourceClaimTemplate's spec is immutable as well, checked the same way
(``ValidateResourceClaimTemplateUpdate``: ``ValidateImmutableField(template.Spec, ...)`` in
1.36, 1.37 and 1.38; no declarative ``+k8s:immutable`` on it, so the refusal always quotes the
new spec, never ``null``). So its labels, annotations and finalizers are refused alike, by the
same write methods, and a claim made from it inherits its bytes: ``KNOWN_TEMPLATE_REFUSALS``
and ``from-python-template`` (read from the source, and seen so on every release tested).
Templates have no status.

The subtest pins all of it down instead of failing on it: ``KNOWN_REFUSALS`` (claims) and
``KNOWN_TEMPLATE_REFUSALS`` (both in :mod:`e2e_dra.subtests._claim_metadata`, with the writes and
the checks of their answers) list, per way the parameters were stored, the write methods the bug
makes every release (or the releases named) refuse. Those must be refused exactly so (``field
is immutable`` on the spec; 422 on ``status.allocation`` for a status write); any other refusal
or mishandled answer fails the phase, and so does a known refusal that no longer happens (the
bug is fixed in that release: narrow the table), so the subtest notices the fix as surely as a
regression. What each way of storing got from each status write is kept in the facts
(``status_writes/<phase>``), and what it got from each metadata-only write method, by kind
(``metadata_writes/<phase>``).

The claim made from the phase's ``python`` template must also carry the labels of the
template's ``spec.metadata`` (the builder puts the subtest's labels there), checked before any
write: the API says the controller copies them, and whatever finds a workload's claims by label
(selectors, quota and cost reports, this subtest's removal of its finalizer) counts on it. Each
phase's claim is new, so after the upgrade it is the new kube-controller-manager that made it.
"""

from __future__ import annotations

from e2e_dra.builder import RESOURCE_V1 as V1
from e2e_dra.builder import Builder, is_allocated
from e2e_dra.kube import Conflict, Kube, KubeError, path, retrying
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    RESOURCE_V1BETA1,
    RESOURCE_V1BETA2,
    Running,
    devices_per_node,
    older_writes_hold,
    running,
    still_untouched,
)
from e2e_dra.subtests._claim_metadata import (
    COMPACT,
    FINALIZER,
    FROM_PYTHON_TEMPLATE,
    METHODS,
    NOT_TRIED,
    OPERATIONS,
    PYTHON,
    STATUS_METHODS,
    STATUS_OPERATION,
    TEMPLATE,
    Claim,
    Outcome,
    Target,
    Template,
    Write,
    check_answer,
    check_status_answer,
    expected_refusal,
    judged,
    metadata_facts,
    remove_finalizers,
    report,
    status_facts,
    unchanged,
)
from e2e_dra.versions import matches

# The versions to write through, and the releases that serve each (v1beta1 is gone in 1.38).
VERSIONS = {
    V1: None,
    RESOURCE_V1BETA2: None,
    RESOURCE_V1BETA1: "<1.38.0-alpha.0",
}


# The pod's name for its claim from the phase's ``python`` template.
POD_CLAIM_FROM_TEMPLATE = FROM_PYTHON_TEMPLATE


def initial(ctx: Context) -> Phase:
    claims, templates = _new_objects(ctx)
    pods = [_started(ctx, claims)]
    ctx.builder.defer(remove_finalizers)
    _update_all(ctx, claims, templates)

    def after_upgrade(ctx: Context) -> Phase:
        _still_untouched(ctx, pods)
        new_claims, new_templates = _new_objects(ctx)
        claims.extend(new_claims)
        templates.extend(new_templates)
        pods.append(_started(ctx, new_claims))
        _update_all(ctx, claims, templates)

        def after_downgrade(ctx: Context) -> Phase:
            _still_untouched(ctx, pods)
            new_claims, new_templates = _new_objects(ctx)
            claims.extend(new_claims)
            templates.extend(new_templates)
            _update_all(ctx, claims, templates)
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _new_objects(ctx: Context) -> tuple[list[Claim], list[Template]]:
    """A ``python`` and a ``compact`` template, and a running pod with three claims, all
    allocated and reserved: a ``python`` and a ``compact`` one, and the one the resourceclaim
    controller makes for it from the ``python`` template.

    ``compact`` objects are sent as compact JSON, as kubectl and the Go clients send them
    (``Builder.create(compact=True)``); ``python`` ones as this client's ``json.dumps``."""
    b = ctx.builder
    python, compact = b.external_claim(), b.external_claim()
    pod = pod_with_claims(b, [python["metadata"]["name"], compact["metadata"]["name"]])
    pod_name = pod["metadata"]["name"]
    templates = {form: claim_template(b, f"{pod_name}-{form}") for form in (PYTHON, COMPACT)}
    with_template_claim(pod, templates[PYTHON]["metadata"]["name"])
    with ctx.step("create two templates and a pod with three claims, one from a template"):
        b.create(python)
        b.create(compact, compact=True)
        b.create(templates[PYTHON])
        b.create(templates[COMPACT], compact=True)
        b.create(pod)
        b.test_pod(pod)
        generated = generated_claim(retrying(b.read_pod)(pod_name), POD_CLAIM_FROM_TEMPLATE)
    template_name = templates[PYTHON]["metadata"]["name"]
    with ctx.step(f"the claim made from template {template_name} carries the template's labels"):
        template_labels_kept(
            retrying(b.get)(Template.resource, template_name),
            retrying(b.get)(Claim.resource, generated),
        )
    claims = [
        Claim(python["metadata"]["name"], PYTHON, pod_name),
        Claim(compact["metadata"]["name"], COMPACT, pod_name),
        Claim(generated, FROM_PYTHON_TEMPLATE, pod_name),
    ]
    return claims, [Template(t["metadata"]["name"], form) for form, t in templates.items()]


def _started(ctx: Context, claims: list[Claim]) -> tuple[Running, list[str]]:
    """The one pod of ``claims`` as it runs now, and the names of its claims."""
    (pod,) = {claim.pod for claim in claims}
    return running(ctx.builder, pod), [claim.name for claim in claims]


def _still_untouched(ctx: Context, pods: list[tuple[Running, list[str]]]) -> None:
    """Each pod of a phase before runs as it did then, its claims still reserved for it (each
    carries the default parameters: the driver's ``user_a=b`` is in its env)."""
    for was, claim_names in pods:
        with ctx.step(f"pod {was.name} runs untouched"):
            still_untouched(ctx.builder, was, claim_names)


def claim_template(b: Builder, name: str) -> dict:
    """A ResourceClaimTemplate ``name`` for the default claim, opaque parameters included (the
    builder labels it, and the claims made from it, when it creates it)."""
    return {
        "apiVersion": V1,
        "kind": TEMPLATE,
        "metadata": {"name": name, "namespace": b.namespace},
        "spec": {"spec": b.claim_spec()},
    }


def with_template_claim(pod: dict, template_name: str) -> dict:
    """``pod`` with one more claim, made for it from the template ``template_name``, which its
    container uses too."""
    pod["spec"]["resourceClaims"].append(
        {"name": POD_CLAIM_FROM_TEMPLATE, "resourceClaimTemplateName": template_name}
    )
    pod["spec"]["containers"][0]["resources"]["claims"].append({"name": POD_CLAIM_FROM_TEMPLATE})
    return pod


def generated_claim(pod: dict, pod_claim: str) -> str:
    """The name of the claim the resourceclaim controller made for ``pod``'s claim
    ``pod_claim``, as the pod's status says (the pod runs, so the claim is there)."""
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    for status in statuses:
        if status.get("name") == pod_claim and status.get("resourceClaimName"):
            return str(status["resourceClaimName"])
    raise AssertionError(
        f"pod {pod['metadata']['name']} runs, but its status names no claim made for its claim "
        f"{pod_claim}: resourceClaimStatuses is {statuses}"
    )


def template_labels_kept(template: dict, claim: dict) -> None:
    """``claim``, which the resourceclaim controller made from ``template`` (both as read), carries
    every label the template's ``spec.metadata`` gives the claims made from it (the builder puts
    the subtest's there). The API says they are copied; label selectors, quota and cost reports
    that find a workload's claims by label count on it."""
    template_name, claim_name = template["metadata"]["name"], claim["metadata"]["name"]
    wanted = (template["spec"].get("metadata") or {}).get("labels") or {}
    assert wanted, f"ResourceClaimTemplate {template_name} has no spec.metadata.labels to check"
    has = claim["metadata"].get("labels") or {}
    missing = {key: value for key, value in wanted.items() if has.get(key) != value}
    assert not missing, (
        f"claim {claim_name}, made from ResourceClaimTemplate {template_name}, lacks the labels "
        f"the template's spec.metadata gives it: {missing} (the claim's labels: {has})"
    )


def pod_with_claims(b: Builder, claim_names: list[str]) -> dict:
    """A pod whose container uses each of the existing claims ``claim_names``."""
    pod = b.pod_external(claim_names[0])
    for index, name in enumerate(claim_names[1:], 2):
        pod["spec"]["resourceClaims"].append(
            {"name": f"resource-claim-{index}", "resourceClaimName": name}
        )
        pod["spec"]["containers"][0]["resources"]["claims"].append(
            {"name": f"resource-claim-{index}"}
        )
    return pod


# --- the checks ---------------------------------------------------------------------------------


def _versions(b: Builder, release: str, resource: str) -> list[str]:
    """The versions to write ``resource`` through that ``release`` serves."""
    return [
        b.api_version(gv, resource)
        for gv, releases in VERSIONS.items()
        if releases is None or matches(releases, release)
    ]


def _update_all(ctx: Context, claims: list[Claim], templates: list[Template]) -> None:
    release = retrying(ctx.kube.server_version)()
    outcomes: list[Outcome] = []
    versions = _versions(ctx.builder, release, Claim.resource)
    for claim in claims:
        with ctx.step(f"metadata-only updates of {claim.name} ({claim.written_as})"):
            first = _read(ctx.kube, V1, claim, ctx.namespace)
            _check_allocated(first, claim)
            outcomes += _update_object(ctx, claim, versions)
        with ctx.step(f"the driver writes status.devices of {claim.name} ({claim.written_as})"):
            outcomes += _write_status(ctx, claim)
        outcomes.append(_read_back(ctx.kube, claim, ctx.namespace, first))
    versions = _versions(ctx.builder, release, Template.resource)
    for template in templates:
        with ctx.step(f"metadata-only updates of template {template.name} ({template.written_as})"):
            first = _read(ctx.kube, V1, template, ctx.namespace)
            outcomes += _update_object(ctx, template, versions)
        outcomes.append(_read_back(ctx.kube, template, ctx.namespace, first))
    ctx.facts[f"status_writes/{ctx.phase}"] = status_facts(outcomes)
    ctx.facts[f"metadata_writes/{ctx.phase}"] = metadata_facts(outcomes)
    known = [o for o in outcomes if o.error is not None and expected_refusal(o, release)]
    for outcome in outcomes:
        outcome.error = judged(outcome, release)
    failed = [o for o in outcomes if o.error is not None]
    ctx.log(
        f"{len(outcomes) - len(failed) - len(known)} of {len(outcomes)} writes (metadata-only "
        f"updates of claims and templates, the driver's status) accepted, {len(known)} refused "
        f"as the known bug makes {release} refuse them"
    )
    if failed:
        raise AssertionError(report(release, outcomes))


def _update_object(ctx: Context, target: Target, versions: list[str]) -> list[Outcome]:
    """Every operation on ``target``'s metadata through every method and version; what became
    of each."""
    kube, namespace = ctx.kube, ctx.namespace
    outcomes = []
    for version in versions:
        url = path(version, target.resource, target.name, namespace=namespace)
        before = current = _read(kube, version, target, namespace)
        for method, write in METHODS.items():
            value = f"{method}.{version.rsplit('/', 1)[-1]}"
            for operation in OPERATIONS:
                outcome = Outcome(target, version, method, operation)
                outcomes.append(outcome)
                has_finalizer = FINALIZER in (current["metadata"].get("finalizers") or [])
                if operation == "add finalizer" and has_finalizer:
                    outcome.error = f"{NOT_TRIED}: {FINALIZER} is still there"
                    continue
                if operation == "remove finalizer" and not has_finalizer:
                    outcome.error = f"{NOT_TRIED}: the finalizer was not added"
                    continue
                try:
                    answer = _write(kube, write, url, current, operation, value)
                except KubeError as exc:
                    outcome.error = f"{exc.status} {exc.reason}: {exc.message}"
                    continue
                current = answer
                outcome.error = check_answer(before, answer, operation, value)
    return outcomes


def _write_status(ctx: Context, claim: Claim) -> list[Outcome]:
    """``status.devices`` of the claim's device written by each status method, through v1, as
    its driver would; what became of each."""
    kube = ctx.kube
    url = path(V1, claim.resource, claim.name, namespace=ctx.namespace, subresource="status")
    outcomes = []
    for method, write in STATUS_METHODS.items():
        outcome = Outcome(claim, V1, method, STATUS_OPERATION)
        outcomes.append(outcome)
        before = _read(kube, V1, claim, ctx.namespace)
        value = f"{method} in {ctx.phase}"
        try:
            answer = _write(kube, write, url, before, STATUS_OPERATION, value)
        except KubeError as exc:
            outcome.error = f"{exc.status} {exc.reason}: {exc.message}"
            continue
        outcome.error = check_status_answer(before, answer, value)
    return outcomes


CONFLICT_ATTEMPTS = 3


def _write(kube: Kube, write: Write, url: str, current: dict, operation: str, value: str) -> dict:
    """``write``, retried on transient errors and, with the object read again, on conflicts."""
    for attempt in range(CONFLICT_ATTEMPTS):
        try:
            return retrying(write)(kube, url, current, operation, value)
        except Conflict:
            if attempt == CONFLICT_ATTEMPTS - 1:
                raise
            current = retrying(kube.get)(url)
    raise AssertionError("unreachable")


def _read(kube: Kube, version: str, target: Target, namespace: str) -> dict:
    return retrying(kube.get)(path(version, target.resource, target.name, namespace=namespace))


def _check_allocated(claim: dict, which: Claim) -> None:
    reserved = [r.get("name") for r in claim.get("status", {}).get("reservedFor") or []]
    if not is_allocated(claim) or which.pod not in reserved:
        raise AssertionError(
            f"claim {which.name} should be allocated and reserved for pod {which.pod} before "
            f"its metadata is updated; its status is {claim.get('status')}"
        )


def _read_back(kube: Kube, target: Target, namespace: str, first: dict) -> Outcome:
    """The claim or template as stored after all updates: at v1, as it was, without the test
    finalizer."""
    outcome = Outcome(target, V1, "read back", "final state")
    after = _read(kube, V1, target, namespace)
    problems = unchanged(first, after)
    if FINALIZER in (after["metadata"].get("finalizers") or []):
        problems.append(f"{FINALIZER} is still there")
    outcome.error = "; ".join(problems) or None
    return outcome


# Each phase's pod holds three devices until the end: three phases, nine devices.
SUBTEST = Subtest(
    name="claim-metadata",
    keps=(4381, 4817),
    initial=initial,
    resources=devices_per_node(9),
)
