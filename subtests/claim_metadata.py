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
  claim is (read from the source, not yet seen on a cluster).

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
and ``from-python-template`` (read from the source, not yet seen on a cluster). Templates have
no status.

The subtest pins all of it down instead of failing on it: ``KNOWN_REFUSALS`` (claims) and
``KNOWN_TEMPLATE_REFUSALS`` list, per way the parameters were stored, the write methods the bug
makes every release (or the releases named) refuse. Those must be refused exactly so (``field
is immutable`` on the spec; 422 on ``status.allocation`` for a status write); any other refusal
or mishandled answer fails the phase, and so does a known refusal that no longer happens (the
bug is fixed in that release: narrow the table), so the subtest notices the fix as surely as a
regression. What each way of storing got from each status write is kept in the facts
(``status_writes/<phase>``), and what it got from each metadata-only write method, by kind
(``metadata_writes/<phase>``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from e2e_dra.builder import RESOURCE_V1 as V1
from e2e_dra.builder import Builder, compact_json, is_allocated
from e2e_dra.kube import Conflict, Kube, KubeError, NotFound, path, retrying
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    RESOURCE_V1BETA1,
    RESOURCE_V1BETA2,
    Running,
    devices_per_node,
    running,
    still_untouched,
)
from e2e_dra.versions import matches

FINALIZER = "test.example.com/claim-metadata"
LABEL = "claim-metadata.example.com/step"
ANNOTATION = "claim-metadata.example.com/step"
FIELD_MANAGER = "e2e-dra-claim-metadata"

# The versions to write through, and the releases that serve each (v1beta1 is gone in 1.38).
VERSIONS = {
    V1: None,
    RESOURCE_V1BETA2: None,
    RESOURCE_V1BETA1: "<1.38.0-alpha.0",
}
OPERATIONS = ("label", "annotation", "add finalizer", "remove finalizer")

CLAIM = "ResourceClaim"
TEMPLATE = "ResourceClaimTemplate"

# How each object's parameters were written on create, by the object's role.
PYTHON = "python"
COMPACT = "compact"
FROM_PYTHON_TEMPLATE = "from-python-template"
WRITTEN_AS = {
    PYTHON: 'parameters sent as {"a": "b"} (Python json.dumps)',
    COMPACT: 'parameters sent as {"a":"b"} (YAML, as kubectl and Go clients)',
    FROM_PYTHON_TEMPLATE: (
        "made by the resourceclaim controller from a template whose parameters were sent as "
        '{"a": "b"} (copied over protobuf, bytes and all)'
    ),
}
# The pod's name for its claim from the phase's ``python`` template.
POD_CLAIM_FROM_TEMPLATE = FROM_PYTHON_TEMPLATE

IMMUTABLE = "field is immutable"
# How the status.allocation check refuses: the handwritten check (up to 1.36, and wherever the
# declarative one is not enforced), the declarative +k8s:update=NoModify (beta, enforced from 1.37
# with DeclarativeValidationBeta, on by default).
ALLOCATION = "status.allocation"
ALLOCATION_IMMUTABLE = (IMMUTABLE, "field cannot be modified once set")
KNOWN_BUG = (
    "the spec immutability check compares the opaque parameters' raw bytes "
    "(Semantic.DeepEqual on runtime.RawExtension)"
)
KNOWN_STATUS_BUG = (
    "the status.allocation immutability check compares the opaque parameters' raw bytes, "
    "which the scheduler copied from the spec (Semantic.DeepEqual on runtime.RawExtension)"
)
KNOWN_TEMPLATE_BUG = (
    "the template's spec immutability check compares the opaque parameters' raw bytes "
    "(Semantic.DeepEqual on runtime.RawExtension)"
)
# Write methods the bug makes the server refuse on a claim stored with spaces, with the releases
# that refuse (None: every release tested, v1.36.5 to v1.38.0-beta.0).
SPACED_CLAIM_REFUSALS: dict[str, str | None] = {
    "json-patch": None,
    "merge-patch": None,
    # 1.38 copies the fields a strategic merge patch does not touch, bytes included
    "strategic-merge-patch": "<1.38.0-alpha.0",
    "apply": None,
    "put-compact": None,
    # The driver's status writes. The apply was seen refused with 1.36.5 and 1.37.2
    # (binding-conditions, before its claims were sent compact); the merge patch, and
    # 1.38.0-beta.0, follow from the same check (pkg/apis/resource/validation), not yet seen.
    "status-apply": None,
    "status-merge-patch": None,
}
# Write methods the bug makes the server refuse, by how the claim's parameters are stored.
KNOWN_REFUSALS: dict[str, dict[str, str | None]] = {
    PYTHON: SPACED_CLAIM_REFUSALS,
    COMPACT: {
        "put": None,
        # As "put": this client's PUT spells the copied parameters with spaces (from the source,
        # not yet seen).
        "status-put": None,
    },
    # Stored with the template creator's spaces (see the module docstring; from the source, not
    # yet seen): refused as a python claim is. Were the controller to send JSON, Go's encoder
    # would compact the bytes and this would be COMPACT's entry.
    FROM_PYTHON_TEMPLATE: SPACED_CLAIM_REFUSALS,
}
# The same for ResourceClaimTemplates (no status), read from the source of v1.36.5, v1.37.2 and
# v1.38.0-beta.0, not yet seen: the patches, the apply and the PUTs handle a template as they
# handle a claim, and ValidateResourceClaimTemplateUpdate compares the spec as
# ValidateResourceClaimUpdate does.
KNOWN_TEMPLATE_REFUSALS: dict[str, dict[str, str | None]] = {
    PYTHON: {
        "json-patch": None,
        "merge-patch": None,
        "strategic-merge-patch": "<1.38.0-alpha.0",
        "apply": None,
        "put-compact": None,
    },
    COMPACT: {"put": None},
}
# How the template check refuses: always the handwritten message, with the new spec as the value
# (``spec: Invalid value: {...}: field is immutable``), alone or in a list of errors; never a
# declarative check's ``Invalid value: null``, as a claim's from 1.37.
TEMPLATE_SPEC_REFUSED = re.compile(r"(?:: |\[)spec: Invalid value: (?!null: )")


@dataclass(frozen=True)
class Claim:
    """A claim of this subtest: its name, how its parameters were written, and the pod it is
    allocated and reserved for."""

    name: str
    written_as: str
    pod: str
    kind: ClassVar[str] = CLAIM
    resource: ClassVar[str] = "resourceclaims"


@dataclass(frozen=True)
class Template:
    """A ResourceClaimTemplate of this subtest: its name and how its parameters were written."""

    name: str
    written_as: str
    kind: ClassVar[str] = TEMPLATE
    resource: ClassVar[str] = "resourceclaimtemplates"


Target = Claim | Template


@dataclass
class Outcome:
    target: Target
    version: str
    method: str
    operation: str
    error: str | None = None  # None: accepted and checked


def initial(ctx: Context) -> Phase:
    claims, templates = _new_objects(ctx)
    pods = [_started(ctx, claims)]
    ctx.builder.defer(lambda b: remove_finalizers(b.kube, b.namespace))
    _update_all(ctx, claims, templates)

    def after_upgrade(ctx: Context) -> Phase:
        _still_untouched(ctx, pods)
        new_claims, new_templates = _new_objects(ctx)
        claims.extend(new_claims)
        templates.extend(new_templates)
        pods.append(_started(ctx, new_claims))
        _update_all(ctx, claims, templates)

        def after_downgrade(ctx: Context) -> None:
            _still_untouched(ctx, pods)
            new_claims, new_templates = _new_objects(ctx)
            claims.extend(new_claims)
            templates.extend(new_templates)
            _update_all(ctx, claims, templates)

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


# --- the writes ---------------------------------------------------------------------------------


def _escape(key: str) -> str:
    """A map key as a JSON pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _desired_metadata(current: dict, operation: str, value: str) -> dict:
    """``current``'s metadata after ``operation`` (a copy)."""
    metadata = json.loads(json.dumps(current["metadata"]))
    finalizers = metadata.get("finalizers") or []
    if operation == "label":
        metadata.setdefault("labels", {})[LABEL] = value
    elif operation == "annotation":
        metadata.setdefault("annotations", {})[ANNOTATION] = value
    elif operation == "add finalizer":
        metadata["finalizers"] = [*finalizers, FINALIZER]
    elif operation == "remove finalizer":
        metadata["finalizers"] = [f for f in finalizers if f != FINALIZER]
    else:
        raise ValueError(f"unknown operation {operation!r}")
    return metadata


def json_patch_ops(current: dict, operation: str, value: str) -> list[dict]:
    """RFC 6902 operations for ``operation`` on ``current`` (a removal tests what it removes)."""
    metadata = current["metadata"]
    if operation in ("label", "annotation"):
        field = "labels" if operation == "label" else "annotations"
        key = LABEL if operation == "label" else ANNOTATION
        if field not in metadata:
            return [{"op": "add", "path": f"/metadata/{field}", "value": {key: value}}]
        return [{"op": "add", "path": f"/metadata/{field}/{_escape(key)}", "value": value}]
    finalizers = metadata.get("finalizers") or []
    if operation == "add finalizer":
        if not finalizers:
            return [{"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}]
        return [{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}]
    where = f"/metadata/finalizers/{finalizers.index(FINALIZER)}"
    return [{"op": "test", "path": where, "value": FINALIZER}, {"op": "remove", "path": where}]


def _json_patch(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    return kube.patch(url, json_patch_ops(current, operation, value), kind="json")


def _merge_patch(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    return kube.patch(url, _merge_patch_body(current, operation, value), kind="merge")


def _merge_patch_body(current: dict, operation: str, value: str) -> dict:
    """A patch of the metadata only, guarded by the resourceVersion it was computed from."""
    metadata = _desired_metadata(current, operation, value)
    patch: dict[str, Any] = {"resourceVersion": current["metadata"]["resourceVersion"]}
    if operation == "label":
        patch["labels"] = {LABEL: value}
    elif operation == "annotation":
        patch["annotations"] = {ANNOTATION: value}
    else:  # a list is replaced as a whole
        patch["finalizers"] = metadata.get("finalizers") or None
    return {"metadata": patch}


def strategic_merge_patch_body(current: dict, operation: str, value: str) -> dict:
    """Finalizers have patchStrategy=merge: added as a one-item list, removed by directive."""
    patch: dict[str, Any] = {"resourceVersion": current["metadata"]["resourceVersion"]}
    if operation == "label":
        patch["labels"] = {LABEL: value}
    elif operation == "annotation":
        patch["annotations"] = {ANNOTATION: value}
    elif operation == "add finalizer":
        patch["finalizers"] = [FINALIZER]
    else:
        patch["$deleteFromPrimitiveList/finalizers"] = [FINALIZER]
    return {"metadata": patch}


def _strategic_merge_patch(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    body = strategic_merge_patch_body(current, operation, value)
    return kube.patch(url, body, kind="strategic")


def apply_body(current: dict, operation: str, value: str) -> dict:
    """What this subtest's field manager owns after ``operation``: the metadata it set (of a
    claim or a template, as ``current`` is)."""
    metadata = _desired_metadata(current, operation, value)
    owned: dict[str, Any] = {"name": metadata["name"], "namespace": metadata["namespace"]}
    for field, key in (("labels", LABEL), ("annotations", ANNOTATION)):
        if key in (metadata.get(field) or {}):
            owned[field] = {key: metadata[field][key]}
    if FINALIZER in (metadata.get("finalizers") or []):
        owned["finalizers"] = [FINALIZER]
    return {"apiVersion": current["apiVersion"], "kind": current["kind"], "metadata": owned}


def _apply(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    body = apply_body(current, operation, value)
    return kube.patch(url, body, kind="apply", fieldManager=FIELD_MANAGER, force=True)


def _put(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    return kube.update(url, {**current, "metadata": _desired_metadata(current, operation, value)})


def _put_compact(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    body = {**current, "metadata": _desired_metadata(current, operation, value)}
    return kube.request("PUT", url, body=compact_json(body), content_type="application/yaml")


Write = Callable[[Kube, str, dict, str, str], dict]
METHODS: dict[str, Write] = {
    "json-patch": _json_patch,
    "merge-patch": _merge_patch,
    "strategic-merge-patch": _strategic_merge_patch,
    "apply": _apply,
    "put": _put,  # the object as read, re-encoded by json.dumps
    "put-compact": _put_compact,  # the object as read, compact (as kubectl replace, Go clients)
}


# --- the driver's status writes -----------------------------------------------------------------

STATUS_OPERATION = "status.devices"
CONDITION = "Ready"


def _driver(current: dict) -> str:
    """The driver of the claim's allocated device: its controller is the one to report status."""
    return str(current["status"]["allocation"]["devices"]["results"][0]["driver"])


def status_entries(current: dict, value: str) -> list[dict]:
    """``status.devices`` as the driver reports it for the allocated claim ``current``: per
    allocated device, ``Ready`` true, with ``value`` as the message (what makes a write seen)."""
    generation = current["metadata"].get("generation")  # 1.36 sets none on a claim
    observed = {} if generation is None else {"observedGeneration": generation}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return [
        {
            "driver": result["driver"],
            "pool": result["pool"],
            "device": result["device"],
            **({"shareID": result["shareID"]} if result.get("shareID") else {}),
            "conditions": [
                {
                    "type": CONDITION,
                    "status": "True",
                    "reason": "E2EDRA",
                    "message": value,
                    "lastTransitionTime": now,
                    **observed,
                }
            ],
        }
        for result in current["status"]["allocation"]["devices"]["results"]
    ]


def status_apply_body(current: dict, value: str) -> dict:
    """What the driver's field manager owns in the status: its devices' entries, nothing else."""
    return {
        "apiVersion": current["apiVersion"],
        "kind": "ResourceClaim",
        "metadata": {
            "name": current["metadata"]["name"],
            "namespace": current["metadata"]["namespace"],
        },
        "status": {"devices": status_entries(current, value)},
    }


def _status_apply(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    body = status_apply_body(current, value)
    return kube.patch(url, body, kind="apply", fieldManager=_driver(current), force=True)


def status_merge_patch_body(current: dict, value: str) -> dict:
    """``status.devices`` replaced as a whole (a merge patch replaces lists)."""
    return {"status": {"devices": status_entries(current, value)}}


def _status_merge_patch(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    body = status_merge_patch_body(current, value)
    return kube.patch(url, body, kind="merge", fieldManager=_driver(current))


def status_put_body(current: dict, value: str) -> dict:
    """The claim as read, with the driver's ``status.devices`` (the rest of the status kept)."""
    return {**current, "status": {**current["status"], "devices": status_entries(current, value)}}


def _status_put(kube: Kube, url: str, current: dict, operation: str, value: str) -> dict:
    body = status_put_body(current, value)
    return kube.update(url, body, fieldManager=_driver(current))


STATUS_METHODS: dict[str, Write] = {
    "status-apply": _status_apply,  # as a driver's controller does (client-go ApplyStatus)
    "status-merge-patch": _status_merge_patch,
    "status-put": _status_put,  # the claim as read, re-encoded by json.dumps
}


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


def known_refusals(target: Target) -> tuple[str, dict[str, str | None]]:
    """The table that lists the known bug's refusals for ``target`` (its name, and its entry
    for the way ``target``'s parameters were stored)."""
    if isinstance(target, Template):
        return "KNOWN_TEMPLATE_REFUSALS", KNOWN_TEMPLATE_REFUSALS[target.written_as]
    return "KNOWN_REFUSALS", KNOWN_REFUSALS[target.written_as]


def expected_refusal(outcome: Outcome, release: str) -> bool:
    """Whether the known bug makes ``release`` refuse ``outcome``'s write."""
    _, refused_on = known_refusals(outcome.target)
    if outcome.method not in refused_on:
        return False
    releases = refused_on[outcome.method]
    return releases is None or matches(releases, release)


def judged(outcome: Outcome, release: str) -> str | None:
    """What is wrong with ``outcome`` once the known bug is accounted for, or None."""
    if not expected_refusal(outcome, release):
        return outcome.error
    if outcome.error is None:
        table, _ = known_refusals(outcome.target)
        if isinstance(outcome.target, Template):
            bug = KNOWN_TEMPLATE_BUG
        else:
            bug = KNOWN_STATUS_BUG if outcome.method in STATUS_METHODS else KNOWN_BUG
        return (
            f"accepted, although {table} says the known bug ({bug}) makes {release} refuse "
            f"it: fixed in {release}? Narrow {table} in subtests/claim_metadata.py"
        )
    if refused_as_known(outcome):
        return None
    return outcome.error


def refused_as_known(outcome: Outcome) -> bool:
    """Whether ``outcome``'s error is the known bug's refusal: "field is immutable" for the
    spec (a template's: on ``spec``, quoting the new spec); for a status write 422, on
    ``status.allocation``, as immutable. An operation not tried (its finalizer could not be
    added) is the known bug's too."""
    error = outcome.error or ""
    if error.startswith(NOT_TRIED):
        return outcome.method in METHODS
    if outcome.method in STATUS_METHODS:
        return (
            error.startswith("422 ")
            and f"{ALLOCATION}:" in error
            and any(refusal in error for refusal in ALLOCATION_IMMUTABLE)
        )
    if isinstance(outcome.target, Template):
        return IMMUTABLE in error and TEMPLATE_SPEC_REFUSED.search(error) is not None
    return IMMUTABLE in error


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


NOT_TRIED = "not tried"
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


def check_answer(before: dict, answer: dict, operation: str, value: str) -> str | None:
    """What is wrong with the server's answer to an accepted ``operation``, or None.

    ``before`` is the claim or template as read at the same API version before any update."""
    metadata = answer["metadata"]
    finalizers = metadata.get("finalizers") or []
    problems = []
    if answer.get("apiVersion") != before["apiVersion"]:
        problems.append(f"answered as {answer.get('apiVersion')}, not {before['apiVersion']}")
    if operation == "label" and (metadata.get("labels") or {}).get(LABEL) != value:
        problems.append(f"labels are {metadata.get('labels')}, without {LABEL}={value}")
    if operation == "annotation" and (metadata.get("annotations") or {}).get(ANNOTATION) != value:
        problems.append(f"annotations are {metadata.get('annotations')}, without {value!r}")
    if operation == "add finalizer" and FINALIZER not in finalizers:
        problems.append(f"finalizers are {finalizers}, without {FINALIZER}")
    if operation == "remove finalizer" and FINALIZER in finalizers:
        problems.append(f"finalizers are {finalizers}, still with {FINALIZER}")
    return "; ".join(problems + _unchanged(before, answer)) or None


def check_status_answer(before: dict, answer: dict, value: str) -> str | None:
    """What is wrong with the server's answer to an accepted status write, or None: each
    allocated device has the driver's ``Ready`` condition of this write (message ``value``), and
    nothing else a status write must keep changed."""
    problems = []
    if answer.get("apiVersion") != before["apiVersion"]:
        problems.append(f"answered as {answer.get('apiVersion')}, not {before['apiVersion']}")
    devices = (answer.get("status") or {}).get("devices") or []
    reported = {
        (device.get("driver"), device.get("pool"), device.get("device"))
        for device in devices
        for condition in device.get("conditions") or []
        if (condition.get("type"), condition.get("message")) == (CONDITION, value)
    }
    wanted = {(e["driver"], e["pool"], e["device"]) for e in status_entries(before, value)}
    if missing := sorted(wanted - reported):
        problems.append(
            f"status.devices is {devices}, without {CONDITION} ({value!r}) for {missing}"
        )
    return "; ".join(problems + _unchanged(before, answer)) or None


def _unchanged(before: dict, after: dict) -> list[str]:
    """What changed that a metadata-only update or a driver's status write must keep: spec,
    allocation, reservations (a template has none), other finalizers."""
    problems = []
    kept = [f for f in before["metadata"].get("finalizers") or [] if f != FINALIZER]
    now = [f for f in after["metadata"].get("finalizers") or [] if f != FINALIZER]
    if now != kept:
        problems.append(f"the other finalizers changed: {kept} -> {now}")
    if after["spec"] != before["spec"]:
        problems.append(f"the spec changed: {before['spec']} -> {after['spec']}")
    for field in ("allocation", "reservedFor"):
        if (after.get("status") or {}).get(field) != (before.get("status") or {}).get(field):
            problems.append(f"status.{field} changed")
    return problems


def _read_back(kube: Kube, target: Target, namespace: str, first: dict) -> Outcome:
    """The claim or template as stored after all updates: at v1, as it was, without the test
    finalizer."""
    outcome = Outcome(target, V1, "read back", "final state")
    after = _read(kube, V1, target, namespace)
    problems = _unchanged(first, after)
    if FINALIZER in (after["metadata"].get("finalizers") or []):
        problems.append(f"{FINALIZER} is still there")
    outcome.error = "; ".join(problems) or None
    return outcome


def status_facts(outcomes: list[Outcome]) -> dict[str, dict[str, list[str]]]:
    """What the status writes got, by how the claim's parameters were stored and by method:
    ``accepted`` or the refusal (shortened), each answer once (before the known bug is judged)."""
    facts: dict[str, dict[str, list[str]]] = {}
    for outcome in outcomes:
        if outcome.method not in STATUS_METHODS:
            continue
        got = "accepted" if outcome.error is None else _shortened(outcome.error)
        seen = facts.setdefault(outcome.target.written_as, {}).setdefault(outcome.method, [])
        if got not in seen:
            seen.append(got)
    return facts


def metadata_facts(outcomes: list[Outcome]) -> dict[str, dict[str, dict[str, list[str]]]]:
    """What the metadata-only updates got, by kind, by how the parameters were stored and by
    method, over every version and operation: ``accepted`` or the answer (shortened, the
    object's name as ``<name>``), each once, before the known bug is judged. Operations not
    tried are left out: they wrote nothing."""
    facts: dict[str, dict[str, dict[str, list[str]]]] = {}
    for outcome in outcomes:
        error = outcome.error
        if outcome.method not in METHODS or (error or "").startswith(NOT_TRIED):
            continue
        got = (
            "accepted"
            if error is None
            else _shortened(error.replace(outcome.target.name, "<name>"))
        )
        by_form = facts.setdefault(outcome.target.kind, {})
        seen = by_form.setdefault(outcome.target.written_as, {}).setdefault(outcome.method, [])
        if got not in seen:
            seen.append(got)
    return facts


def _shortened(error: str, keep: int = 160) -> str:
    """``error`` cut in the middle (a refusal quotes the whole allocation up to 1.36)."""
    return error if len(error) <= 2 * keep else f"{error[:keep]} ... {error[-keep:]}"


def report(release: str, outcomes: list[Outcome]) -> str:
    """The failure: per claim or template and method, which versions and operations failed and
    why."""
    failed = [o for o in outcomes if o.error is not None]
    lines = [
        f"the API server ({release}) refused or mishandled {len(failed)} of {len(outcomes)} "
        "writes of allocated ResourceClaims and of ResourceClaimTemplates (metadata-only "
        "updates: a label, an annotation, a finalizer added and removed, the spec sent back as "
        "read; the driver's status.devices):"
    ]
    for target in dict.fromkeys(o.target for o in outcomes):
        lines.append(f"  {target.kind} {target.name} ({WRITTEN_AS[target.written_as]}):")
        mine = [o for o in outcomes if o.target == target]
        for method in dict.fromkeys(o.method for o in mine):
            done = [o for o in mine if o.method == method]
            bad = [o for o in done if o.error is not None]
            if not bad:
                lines.append(f"    {method}: ok ({len(done)})")
                continue
            tried = [o for o in bad if not (o.error or "").startswith(NOT_TRIED)]
            where = ", ".join(f"{o.version.rsplit('/', 1)[-1]} {o.operation}" for o in tried)
            lines.append(f"    {method}: FAILED {len(bad)} of {len(done)}: {where}")
            lines += [f"      {error}" for error in dict.fromkeys(o.error for o in tried)]
    if any(IMMUTABLE in (o.error or "") for o in failed if o.method not in STATUS_METHODS):
        lines.append(
            "  'field is immutable' for a spec sent back as read: the server compares the raw "
            "bytes of the opaque parameters, which differ in whitespace from the bytes the "
            "claim or template was created with (see the docstring of subtests/claim_metadata.py)"
        )
    if any(ALLOCATION in (o.error or "") for o in failed if o.method in STATUS_METHODS):
        lines.append(
            f"  {ALLOCATION} refused for a status write that leaves it as it was: the server "
            "compares the raw bytes of the opaque parameters the scheduler copied into the "
            "allocation (docs/kubernetes-findings.md, finding 4)"
        )
    return "\n".join(lines)


# --- clean-up -----------------------------------------------------------------------------------


def remove_finalizers(kube: Kube, namespace: str) -> None:
    """Take this subtest's finalizer off every claim and template that has it, whichever write
    works."""
    for resource in (Claim.resource, Template.resource):
        collection = path(V1, resource, namespace=namespace)
        for obj in kube.list(collection):
            if FINALIZER not in (obj["metadata"].get("finalizers") or []):
                continue
            url = f"{collection}/{obj['metadata']['name']}"
            errors = []
            for method in ("json-patch", "put", "put-compact"):
                try:
                    METHODS[method](kube, url, kube.get(url), "remove finalizer", "")
                    break
                except NotFound:
                    break
                except KubeError as exc:
                    errors.append(f"{method}: {exc}")
            else:
                raise AssertionError(
                    f"cannot remove {FINALIZER} from {obj['kind']} {obj['metadata']['name']}: "
                    f"{errors}"
                )


# Each phase's pod holds three devices until the end: three phases, nine devices.
SUBTEST = Subtest(
    name="claim-metadata",
    initial=initial,
    resources=devices_per_node(9),
)
