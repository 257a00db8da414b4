"""Objects to the API server and back: their REST paths, the API versions it serves, create,
and get, list, patch, update and delete by name.

A subtest's object carries its own apiVersion and kind, so its path follows from the dict: no
typed client per version, which two releases would not serve alike anyway. An object that is
already there is addressed by its resource (the plural, as in its REST path) and its name, at
the resource's usual version unless the subtest names another one: ``("resourceclaims", name,
version="resource.k8s.io/v1beta1")``. One :class:`ObjectClient` talks through one client, for
one phase: after a cluster restart the suite makes a new builder, with a new client.

:class:`ObjectClient` is the base of the builder's parts that reach the server (the pod checks,
the tear-down) and, through them, of the :class:`~e2e_dra.builder.Builder` itself: what it
defines here is what a subtest calls, ``b.get(...)``, ``b.create(...)``, with nothing between.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from e2e_dra.builder._objects import RESOURCE_V1, SCHEDULING_V1BETA1, labeled
from e2e_dra.errors import E2EDRAError
from e2e_dra.kube import Kube, NotFound, path, retrying
from e2e_dra.versions import matches
from e2e_dra.waits import eventually

# kind -> plural
_KINDS: dict[str, str] = {
    "DeviceClass": "deviceclasses",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "ResourceSlice": "resourceslices",
    "DeviceTaintRule": "devicetaintrules",
    "Pod": "pods",
    "Workload": "workloads",
    "PodGroup": "podgroups",
    "Namespace": "namespaces",
}

RESOURCES: dict[str, tuple[str, bool]] = {
    "deviceclasses": (RESOURCE_V1, False),
    "resourceclaims": (RESOURCE_V1, True),
    "resourceclaimtemplates": (RESOURCE_V1, True),
    "resourceslices": (RESOURCE_V1, False),
    "devicetaintrules": ("resource.k8s.io/v1alpha3", False),
    "pods": ("v1", True),
    "workloads": (SCHEDULING_V1BETA1, True),
    "podgroups": (SCHEDULING_V1BETA1, True),
    "namespaces": ("v1", False),
    "nodes": ("v1", False),
    "serviceaccounts": ("v1", True),
    "events": ("v1", True),
}
"""The resources a subtest addresses by name: (the version used unless it names one,
namespaced)."""
_KIND_OF = {plural: kind for kind, plural in _KINDS.items()}


def resource_of(obj: dict) -> str:
    """The resource (plural) of an object dict, by its kind: "ResourceClaim" -> "resourceclaims"."""
    kind = obj.get("kind", "")
    if kind not in _KINDS:
        raise E2EDRAError(f"the builder does not know kind {kind!r}; known: {sorted(_KINDS)}")
    return _KINDS[kind]


def resource_path(
    resource: str,
    name: str | None = None,
    *,
    version: str | None = None,
    namespace: str = "default",
    subresource: str | None = None,
) -> str:
    """The REST path of ``resource`` ``name`` (or, without a name, of the collection), at
    ``version`` or the resource's usual one; ``namespace`` counts for namespaced resources."""
    if resource not in RESOURCES:
        raise E2EDRAError(
            f"the builder does not know resource {resource!r}; known: {sorted(RESOURCES)}"
        )
    default_version, namespaced = RESOURCES[resource]
    return path(
        version or default_version,
        resource,
        name,
        namespace=namespace if namespaced else None,
        subresource=subresource,
    )


def object_path(obj: dict, *, collection: bool = False) -> str:
    """The REST path of ``obj`` (or of its collection), from its apiVersion, kind and metadata."""
    kind = obj.get("kind", "")
    if kind not in _KINDS:
        raise E2EDRAError(f"the builder does not know kind {kind!r}; known: {sorted(_KINDS)}")
    plural = _KINDS[kind]
    metadata = obj.get("metadata", {})
    return path(
        obj["apiVersion"],
        plural,
        None if collection else metadata["name"],
        namespace=metadata.get("namespace") if RESOURCES[plural][1] else None,
    )


def compact_json(obj: dict) -> str:
    """``obj`` as compact JSON (``{"a":"b"}``), as kubectl and the Go clients send it, where this
    client's ``json.dumps`` sends ``{"a": "b"}``.

    The API server keeps a ResourceClaim's opaque parameters (a RawExtension) as the bytes the
    creating client sent, and copies them into the allocation; later writes that re-encode them
    compact (server-side apply, JSON and merge patches) are refused as changing an immutable
    field unless those bytes were compact to begin with (docs/kubernetes-findings.md, findings 1
    and 4).
    """
    return json.dumps(obj, separators=(",", ":"))


def label_selector(labels: Mapping[str, str]) -> str:
    """The ``labelSelector`` that matches objects with all of ``labels``: ``k=v,k2=v2``."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


class NotServed(E2EDRAError):
    """The API server does not serve the API version a subtest names."""


def served_version(kube: Kube, group_version: str, resource: str | None = None) -> str:
    """``group_version`` itself, once the server's discovery says it serves it (and
    ``resource`` in it); else :class:`NotServed`, naming what the server serves instead.

    Upstream names API versions explicitly (core-dra deletes through v1beta1, device-taints
    creates its rule through v1alpha3): that version is what the subtest tests. Falling back to
    another one would turn a check of v1beta1 into a check of v1 without anyone noticing, so
    there is no fallback. A subtest that cannot run without a version declares it in
    ``requires``, and the suite skips it, with the reason, where a release lacks it.
    """
    if retrying(kube.served)(group_version, resource):
        return group_version
    what = f"{resource} at {group_version}" if resource else group_version
    group = group_version.rpartition("/")[0]
    candidates = [f"{group}/{v}" for v in ("v1", "v1beta2", "v1beta1", "v1alpha3")] if group else []
    served = retrying(kube.served)
    others = [gv for gv in candidates if gv != group_version and served(gv, resource)]
    version = retrying(kube.server_version)()
    raise NotServed(
        f"the API server ({version}) does not serve {what}, which this subtest uses"
        + (f"; it serves it at {', '.join(others)}" if others else "")
    )


class ObjectClient:
    """Creates one subtest's object dicts at their own apiVersion, with its labels, and reads,
    changes and deletes objects of one namespace by name, through one client."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        *,
        labels: Mapping[str, str],
        log: Callable[[str], None],
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.labels = dict(labels)  # on everything created; what marks the subtest's objects
        self.log = log

    def url(
        self,
        resource: str,
        name: str | None = None,
        *,
        version: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The REST path of ``resource`` ``name`` in this namespace (see :func:`resource_path`),
        for the unusual request the other methods do not make."""
        return resource_path(
            resource, name, version=version, namespace=self.namespace, subresource=subresource
        )

    def create(self, *objs: dict, compact: bool = False) -> list[dict]:
        """Create each object at its own apiVersion, with the subtest's labels (see
        :func:`~e2e_dra.builder.labeled`); the server's answers, in order. ``compact``: sent as
        compact JSON, as Go clients send it (see :func:`compact_json`)."""
        return [self._create(labeled(obj, self.labels), compact) for obj in objs]

    def _create(self, obj: dict, compact: bool) -> dict:
        url = object_path(obj, collection=True)
        if not compact:
            self.log(f"Creating {obj['kind']} {obj['metadata']['name']}")
            return self.kube.create(url, obj)
        self.log(f"Creating {obj['kind']} {obj['metadata']['name']} (compact JSON)")
        # The client library re-encodes a JSON body with json.dumps, even a string; a YAML body
        # (JSON is YAML) goes out as it is, and the server turns YAML into compact JSON.
        return self.kube.request(
            "POST", url, body=compact_json(obj), content_type="application/yaml"
        )

    def get(self, resource: str, name: str, *, version: str | None = None) -> dict:
        """``resource`` ``name`` as the server has it now."""
        return self.kube.get(self.url(resource, name, version=version))

    def list(
        self, resource: str, *, version: str | None = None, mine: bool = False, **query: object
    ) -> list[dict]:
        """Every ``resource`` in the namespace (cluster-wide ones: in the cluster); ``mine``:
        only those labelled as this subtest's, selected by the server (``labelSelector``);
        ``query``: more parameters of the list (``fieldSelector=...``)."""
        if mine:
            query["labelSelector"] = label_selector(self.labels)
        return self.kube.list(self.url(resource, version=version), **query)

    def patch(
        self,
        resource: str,
        name: str,
        body: object,
        *,
        version: str | None = None,
        kind: str = "merge",
        subresource: str | None = None,
        **query: object,
    ) -> dict:
        """Patch ``resource`` ``name`` (``kind``: merge, json, strategic or apply)."""
        url = self.url(resource, name, version=version, subresource=subresource)
        return self.kube.patch(url, body, kind=kind, **query)

    def update(
        self,
        resource: str,
        name: str,
        body: dict,
        *,
        version: str | None = None,
        subresource: str | None = None,
    ) -> dict:
        """Replace ``resource`` ``name`` (or its ``subresource``, e.g. "status") by ``body``."""
        url = self.url(resource, name, version=version, subresource=subresource)
        return self.kube.update(url, body)

    def delete(
        self, resource: str, name: str, *, version: str | None = None, missing_ok: bool = False
    ) -> None:
        """Delete ``resource`` ``name``; that it is gone already fails (NotFound) unless
        ``missing_ok``: a subtest that deletes what it made proves that way it survived."""
        at = f" through {version}" if version else ""
        where = (
            f"{self.namespace}/" if self.namespace != "default" and RESOURCES[resource][1] else ""
        )
        self.log(f"Deleting {_KIND_OF.get(resource, resource)} {where}{name}{at}")
        self.kube.delete(self.url(resource, name, version=version), missing_ok=missing_ok)

    def wait_gone(
        self, resource: str, name: str, *, timeout: float, version: str | None = None
    ) -> None:
        """Until reading ``resource`` ``name`` answers NotFound."""
        url = self.url(resource, name, version=version)

        def gone() -> bool:
            try:
                self.kube.get(url)
            except NotFound:
                return True
            return False

        what = f"{_KIND_OF.get(resource, resource)} {name} to be deleted"
        eventually(gone, what=what, timeout=timeout)

    def api_version(self, group_version: str, resource: str | None = None) -> str:
        """``group_version``, checked to be served now (see :func:`served_version`)."""
        return served_version(self.kube, group_version, resource)

    def api_version_by_release(
        self, by_release: Mapping[str, str], resource: str | None = None
    ) -> str:
        """The group/version named for the API server's release (``{">=1.38": "g/v1beta2",
        "<1.38": "g/v1beta1"}``, release specifiers as in ``Subtest.releases``), checked to be
        served: for a version that a newer release stops serving, the subtest says which one it
        uses instead, release by release, rather than falling back."""
        release = retrying(self.kube.server_version)()
        for specifier, group_version in by_release.items():
            if matches(specifier, release):
                return self.api_version(group_version, resource)
        raise NotServed(f"no API version is named for the API server's release {release}")
