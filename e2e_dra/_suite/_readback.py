"""The read-back net: what exists across a cluster step reads back the same after it, whichever
release wrote it and whichever release reads it.

A step replaces the API server by another release (the upgrade: the newer reads what the older
wrote; the downgrade: the older reads what the newer wrote) or restarts it with other feature
gates. Either way the objects stored in etcd stay as they were: the same bytes, decoded by
another program. So every DRA object of every namespace is listed as the step starts and again
once it is over, and:

- an object that nobody wrote during the step (its ``resourceVersion`` is the same) must read
  back with every field it had, at the value it had: ``spec``, ``status`` and ``metadata``
  (``managedFields`` aside). Fields the reading server added are fine (defaults); a field that is
  gone is fine only where the reading server's own OpenAPI schema does not have it (a field newer
  than that release: its documented way to treat it). A field it has and reads otherwise, or
  drops, is a finding: a conversion, a decoding or a read path that loses what was stored;
- an object written during the step (the components restarted and went on working) keeps what
  the API makes immutable: a ResourceClaim's ``spec``, and its ``status.allocation`` while it
  has one (an allocation is only ever removed whole, never changed);
- a resource that was served before the step and is not served after it cannot be read back:
  that is said in the log with the number of objects not read, never passed over in silence,
  and it is no finding (the serving of a version is what the release decides).

A finding belongs to the subtest whose label the object carries (else to nobody) and fails that
subtest's next phase, naming the object, the step and the field.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from e2e_dra._suite._nets import RESOURCE_V1, Finding
from e2e_dra._suite._taint_rules import RULE_VERSIONS
from e2e_dra.builder import SUBTEST_LABEL
from e2e_dra.kube import Kube, KubeError, path, retrying

logger = logging.getLogger(__name__)

READ_BACK = (
    ((RESOURCE_V1,), "resourceclaims", "ResourceClaim"),
    ((RESOURCE_V1,), "resourceclaimtemplates", "ResourceClaimTemplate"),
    ((RESOURCE_V1,), "deviceclasses", "DeviceClass"),
    ((RESOURCE_V1,), "resourceslices", "ResourceSlice"),
    (RULE_VERSIONS, "devicetaintrules", "DeviceTaintRule"),
)
"""What is read back: (the group/versions it may be served at, newest first; plural; kind). Each
is listed at the newest one served before the step, and read back at that same one."""
IMMUTABLE = ("spec", "status.allocation")
"""What a ResourceClaim written during the step keeps (while it has it)."""
SHOWN = 160  # characters of a value in a finding

Schema = Mapping[str, Any]


@dataclass(frozen=True)
class Listed:
    """One resource as listed at one version: its objects by uid."""

    group_version: str
    plural: str
    kind: str
    objects: dict[str, dict]


class ReadBackNet:
    """Lists the DRA objects as a step starts, and after it says which ones read back otherwise."""

    def __init__(self) -> None:
        self._before: list[Listed] = []
        self._step = ""
        self._found: list[Finding] = []

    def before(self, kube: Kube, step: str) -> None:
        self._step = step
        self._before = []
        for versions, plural, kind in READ_BACK:
            version = next((v for v in versions if kube.served(v, plural)), None)
            if version is not None:
                listed = _by_uid(retrying(kube.list)(path(version, plural)))
                self._before.append(Listed(version, plural, kind, listed))
        logger.info(
            f"read-back net: {sum(len(r.objects) for r in self._before)} objects listed "
            f"before the {step}"
        )

    def after(self, kube: Kube) -> None:
        """Read back what was listed before the step; what reads otherwise becomes a finding."""
        fresh = kube.fresh()  # the restarted server's discovery, not the one cached before
        schemas: dict[str, Mapping[str, Schema] | None] = {}
        for listed in self._before:
            if not fresh.served(listed.group_version, listed.plural):
                if listed.objects:
                    logger.warning(
                        f"read-back net: {listed.group_version} {listed.plural} is not served "
                        f"after the {self._step}: {len(listed.objects)} objects not read back"
                    )
                continue
            try:
                now = _by_uid(retrying(fresh.list)(path(listed.group_version, listed.plural)))
            except KubeError as exc:
                self._found.append(
                    Finding(
                        None,
                        f"{listed.group_version} {listed.plural} cannot be listed after the "
                        f"{self._step}, although it is served: {exc}",
                    )
                )
                continue
            if listed.group_version not in schemas:
                schemas[listed.group_version] = _schemas(fresh, listed.group_version)
            schema = _schema_of(schemas[listed.group_version], listed.group_version, listed.kind)
            for uid, was in listed.objects.items():
                if uid in now:
                    self._judge(listed, was, now[uid], schema)
        self._before = []

    def take(self) -> list[Finding]:
        found, self._found = self._found, []
        return found

    def _judge(self, listed: Listed, was: dict, now: dict, schema: Schema | None) -> None:
        lost = read_back_problems(listed.kind, was, now, schema)
        if lost:
            meta = was["metadata"]
            where = f"/{meta['namespace']}" if meta.get("namespace") else ""
            owner = (meta.get("labels") or {}).get(SUBTEST_LABEL)
            self._found.append(
                Finding(
                    owner,
                    f"{listed.kind}{where}/{meta['name']} ({listed.group_version}) existed "
                    f"before the {self._step} and " + "; ".join(lost),
                )
            )


def read_back_problems(kind: str, was: dict, now: dict, schema: Schema | None) -> list[str]:
    """What is wrong with ``now``, the object ``was`` (of ``kind``) as read after the step by a
    server whose schema for it is ``schema``: nothing (an empty list), or what it lost."""
    if was["metadata"].get("resourceVersion") == now["metadata"].get("resourceVersion"):
        lost = unread(_without_bookkeeping(was), _without_bookkeeping(now), schema)
        return (
            ["was not written during it, but reads back otherwise: " + "; ".join(lost)]
            if lost
            else []
        )
    if kind != "ResourceClaim":
        return []
    lost = [
        problem
        for field in IMMUTABLE
        if (kept := _at(was, field)) is not None and _at(now, field) is not None
        for problem in unread(kept, _at(now, field), _sub(schema, field), field)
    ]
    return ["changed what the API makes immutable: " + "; ".join(lost)] if lost else []


def unread(was: Any, now: Any, schema: Schema | None, where: str = "") -> list[str]:
    """Where ``now`` lost or changed what ``was`` had. A field ``now`` lacks is lost unless
    ``schema`` (the reading server's, None: unknown) has no such field; fields ``now`` added are
    fine. Lists are compared item by item (a list that changed length is changed)."""
    if isinstance(was, dict) and isinstance(now, dict):
        problems = []
        for key, value in was.items():
            at = f"{where}.{key}" if where else key
            if key not in now:
                if value in (None, {}, []) or not _has_field(schema, key):
                    continue
                problems.append(f"{at} is gone (was {_shown(value)})")
                continue
            problems += unread(value, now[key], _field(schema, key), at)
        return problems
    if isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
        items = _items(schema)
        return [
            p
            for i, (a, b) in enumerate(zip(was, now, strict=True))
            for p in unread(a, b, items, f"{where}[{i}]")
        ]
    if was != now:
        return [f"{where or 'the object'} was {_shown(was)}, reads {_shown(now)}"]
    return []


# --- the reading server's schema -----------------------------------------------------------------


def _schemas(kube: Kube, group_version: str) -> Mapping[str, Schema] | None:
    """The OpenAPI v3 schemas the server publishes for ``group_version``; None when it does not
    (every field then counts as known: a field gone is a finding)."""
    try:
        index = kube.get("/openapi/v3")
        entry = (index.get("paths") or {}).get(f"apis/{group_version}") or {}
        url = entry.get("serverRelativeURL")
        if not url:
            return None
        document = kube.get(url.split("?", 1)[0])
    except KubeError as exc:
        logger.warning(f"read-back net: no OpenAPI schema for {group_version}: {exc}")
        return None
    return (document.get("components") or {}).get("schemas") or None


def _schema_of(
    schemas: Mapping[str, Schema] | None, group_version: str, kind: str
) -> Schema | None:
    if schemas is None:
        return None
    group, version = group_version.split("/")
    for schema in schemas.values():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if (gvk.get("group"), gvk.get("version"), gvk.get("kind")) == (group, version, kind):
                return _Resolved(schemas, schema)
    return None


class _Resolved(dict):
    """A schema with its ``$ref``s (direct or in ``allOf``) followed, lazily, in ``schemas``."""

    def __init__(self, schemas: Mapping[str, Schema], schema: Schema) -> None:
        super().__init__(schema)
        self.schemas = schemas

    def follow(self, sub: Schema | None) -> Schema | None:
        if sub is None:
            return None
        seen = 0
        while seen < 20:  # a cycle of refs is no schema
            ref = sub.get("$ref") or next(
                (part.get("$ref") for part in sub.get("allOf") or [] if "$ref" in part), None
            )
            if not ref:
                return _Resolved(self.schemas, sub)
            target = self.schemas.get(ref.rsplit("/", 1)[-1])
            if target is None:
                return None
            sub, seen = target, seen + 1
        return None


def _open(schema: Schema | None) -> bool:
    """Whether any field may be under ``schema``: unknown, a map, or preserving unknown fields."""
    return (
        schema is None
        or bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        or "additionalProperties" in schema
        or "properties" not in schema
    )


def _has_field(schema: Schema | None, key: str) -> bool:
    return _open(schema) or key in (schema or {}).get("properties", {})


def _field(schema: Schema | None, key: str) -> Schema | None:
    if schema is None or not isinstance(schema, _Resolved):
        return None
    properties = schema.get("properties") or {}
    if key in properties:
        return schema.follow(properties[key])
    extra = schema.get("additionalProperties")
    return schema.follow(extra) if isinstance(extra, dict) else None


def _sub(schema: Schema | None, dotted: str) -> Schema | None:
    for key in dotted.split("."):
        schema = _field(schema, key)
    return schema


def _items(schema: Schema | None) -> Schema | None:
    if schema is None or not isinstance(schema, _Resolved):
        return None
    return schema.follow(schema.get("items"))


# --- small helpers -------------------------------------------------------------------------------


def _by_uid(objects: Iterable[dict]) -> dict[str, dict]:
    return {o["metadata"]["uid"]: o for o in objects}


def _without_bookkeeping(obj: dict) -> dict:
    """The object as compared: without ``managedFields``, which the server keeps for itself."""
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _at(obj: Mapping[str, Any], dotted: str) -> Any:
    value: Any = obj
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
