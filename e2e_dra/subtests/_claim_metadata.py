"""What claim-metadata writes and how it judges the answers: its metadata-only writes of claims
and templates (every method a client has), its driver's status writes, the tables of what the
known RawExtension bug makes each release refuse (``KNOWN_REFUSALS``,
``KNOWN_TEMPLATE_REFUSALS``), the checks of each answer, the facts and the failure's report.
Why the bug refuses what it refuses is told in the docstring of
:mod:`e2e_dra.subtests.claim_metadata`, which runs these writes phase by phase.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from e2e_dra.builder import Builder, compact_json
from e2e_dra.kube import Kube, KubeError, NotFound
from e2e_dra.versions import matches

FINALIZER = "test.example.com/claim-metadata"
LABEL = "claim-metadata.example.com/step"
ANNOTATION = "claim-metadata.example.com/step"
FIELD_MANAGER = "e2e-dra-claim-metadata"


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
# that refuse (None: every release tested, v1.36.5 to v1.38.0-beta.0). Every entry here and below
# was seen as written on v1.36.5, v1.37.2 and v1.38.0-beta.0: the subtest fails on a refusal not
# listed and on a listed one that does not happen, in every phase of every upgrade variant (what
# each method got is in summary.json, facts, metadata_writes/<phase> and status_writes/<phase>).
SPACED_CLAIM_REFUSALS: dict[str, str | None] = {
    "json-patch": None,
    "merge-patch": None,
    # 1.38 copies the fields a strategic merge patch does not touch, bytes included
    "strategic-merge-patch": "<1.38.0-alpha.0",
    "apply": None,
    "put-compact": None,
    # The driver's status writes (binding-conditions saw the apply refused first, before its
    # claims were sent compact): the same check (pkg/apis/resource/validation) on
    # status.allocation, which the scheduler copied from the spec, bytes included.
    "status-apply": None,
    "status-merge-patch": None,
}
# Write methods the bug makes the server refuse, by how the claim's parameters are stored.
KNOWN_REFUSALS: dict[str, dict[str, str | None]] = {
    PYTHON: SPACED_CLAIM_REFUSALS,
    COMPACT: {
        "put": None,
        # As "put": this client's PUT spells the copied parameters with spaces.
        "status-put": None,
    },
    # Stored with the template creator's spaces (see the module docstring): refused as a python
    # claim is. Were the controller to send JSON, Go's encoder
    # would compact the bytes and this would be COMPACT's entry.
    FROM_PYTHON_TEMPLATE: SPACED_CLAIM_REFUSALS,
}
# The same for ResourceClaimTemplates (no status), first read from the source of v1.36.5, v1.37.2
# and v1.38.0-beta.0 and since seen as written: the patches, the apply and the PUTs handle a
# template as they handle a claim, and ValidateResourceClaimTemplateUpdate compares the spec as
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
            f"it: fixed in {release}? Narrow {table} in e2e_dra/subtests/_claim_metadata.py"
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


NOT_TRIED = "not tried"


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
    return "; ".join(problems + unchanged(before, answer)) or None


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
    return "; ".join(problems + unchanged(before, answer)) or None


def unchanged(before: dict, after: dict) -> list[str]:
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
            "claim or template was created with (see the docstring of "
            "e2e_dra.subtests.claim_metadata)"
        )
    if any(ALLOCATION in (o.error or "") for o in failed if o.method in STATUS_METHODS):
        lines.append(
            f"  {ALLOCATION} refused for a status write that leaves it as it was: the server "
            "compares the raw bytes of the opaque parameters the scheduler copied into the "
            "allocation (docs/kubernetes-findings.md, finding 4)"
        )
    return "\n".join(lines)


# --- clean-up -----------------------------------------------------------------------------------


def remove_finalizers(b: Builder) -> None:
    """Take this subtest's finalizer off every claim and template of the subtest (``b``'s
    labels, claims made from its templates included) that has it, whichever write works."""
    kube = b.kube
    for resource in (Claim.resource, Template.resource):
        for obj in b.list(resource, mine=True):
            if FINALIZER not in (obj["metadata"].get("finalizers") or []):
                continue
            url = b.url(resource, obj["metadata"]["name"])
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
