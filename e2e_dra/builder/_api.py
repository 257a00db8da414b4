"""Objects to the API server and back: their REST paths, the API versions it serves, create, get
and delete.

A subtest's object carries its own apiVersion and kind, so its path follows from the dict: no
typed client per version, which two releases would not serve alike anyway. One class holds the
connection, so the client that a cluster restart replaces is swapped in one place
(:meth:`ObjectClient.use_client`); the pod checks and the tear-down reach the server through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from e2e_dra.errors import E2EDRAError
from e2e_dra.kube import Kube, NotFound, path, retrying
from e2e_dra.versions import matches
from e2e_dra.waits import eventually

# kind -> (plural, namespaced)
_KINDS: dict[str, tuple[str, bool]] = {
    "DeviceClass": ("deviceclasses", False),
    "ResourceClaim": ("resourceclaims", True),
    "ResourceClaimTemplate": ("resourceclaimtemplates", True),
    "ResourceSlice": ("resourceslices", False),
    "DeviceTaintRule": ("devicetaintrules", False),
    "Pod": ("pods", True),
    "Workload": ("workloads", True),
    "PodGroup": ("podgroups", True),
}


def object_path(obj: dict, *, collection: bool = False) -> str:
    """The REST path of ``obj`` (or of its collection), from its apiVersion, kind and metadata."""
    kind = obj.get("kind", "")
    if kind not in _KINDS:
        raise E2EDRAError(f"the builder does not know kind {kind!r}; known: {sorted(_KINDS)}")
    plural, namespaced = _KINDS[kind]
    metadata = obj.get("metadata", {})
    return path(
        obj["apiVersion"],
        plural,
        None if collection else metadata["name"],
        namespace=metadata.get("namespace") if namespaced else None,
    )


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
    """Creates, reads and deletes object dicts at their own apiVersion, through the client of
    the cluster as it is now."""

    def __init__(self, kube: Kube, *, log: Callable[[str], None]) -> None:
        self.kube = kube
        self.log = log

    def use_client(self, kube: Kube) -> None:
        """Talk through ``kube`` from now on (a fresh client after a cluster restart)."""
        self.kube = kube

    def create(self, *objs: dict) -> list[dict]:
        """Create each object at its own apiVersion; the server's answers, in order."""
        created = []
        for obj in objs:
            self.log(f"Creating {obj['kind']} {obj['metadata']['name']}")
            created.append(self.kube.create(object_path(obj, collection=True), obj))
        return created

    def get(self, obj: dict) -> dict:
        return self.kube.get(object_path(obj))

    def delete(self, obj: dict, *, missing_ok: bool = False) -> None:
        """Delete ``obj``; that it is gone already fails (NotFound) unless ``missing_ok``."""
        self.log(f"Deleting {obj['kind']} {obj['metadata']['name']}")
        self.kube.delete(object_path(obj), missing_ok=missing_ok)

    def wait_gone(self, url_path: str, what: str, timeout: float) -> None:
        """Until GET ``url_path`` answers NotFound."""

        def gone() -> bool:
            try:
                self.kube.get(url_path)
            except NotFound:
                return True
            return False

        eventually(gone, what=f"{what} to be deleted", timeout=timeout)

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
