"""The objects subtests create, as plain dicts with upstream's names, and the checks on them.

Names matter: upstream derives every object name from the namespace and the subtest name (the
"suffix"), so two subtests never collide in the shared ``default`` namespace and a failure
message names the subtest. Objects are plain dicts at explicit API versions, because the suite
talks to two releases that do not serve the same versions.

A Builder outlives the cluster restarts: after each restart the suite hands it a fresh client
with :meth:`Builder.use_client`; it keeps only names and counters, never a connection.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from e2e_dra.errors import E2EDRAError, ExecError
from e2e_dra.kube import Kube, KubeError, NotFound, path, retrying
from e2e_dra.provision import TEST_IMAGE
from e2e_dra.versions import matches
from e2e_dra.waits import eventually

logger = logging.getLogger(__name__)

RESOURCE_V1 = "resource.k8s.io/v1"
SCHEDULING_V1BETA1 = "scheduling.k8s.io/v1beta1"

DEFAULT_PARAMETERS: dict[str, str] = {"a": "b"}
"""Opaque config of the default claim; the test driver turns it into ``user_a=b`` in the pod."""
DEFAULT_ENV: tuple[str, ...] = ("user_a=b",)

IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
DRIVER_POD_LABEL = ("app.kubernetes.io/part-of", "dra-test-driver")

POD_START_TIMEOUT = 300.0  # upstream's framework.PodStartTimeout
POD_DELETE_TIMEOUT = 300.0
TEARDOWN_TIMEOUT = 60.0

# Upstream's pause-like command: exits at once on SIGTERM, so deleting a pod takes no grace period.
IDLE_COMMAND = ("/bin/sh", "-c", "trap exit TERM; while true; do sleep 1; done")
NON_ROOT_USER = 1000

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


class PodFailed(E2EDRAError):
    """A pod reached a terminal phase while we waited for it to run."""


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


class Builder:
    """Creates one subtest's objects under upstream's names and checks the pods that use them."""

    def __init__(
        self,
        kube: Kube,
        name_suffix: str,
        *,
        namespace: str = "default",
        image: str | None = None,
        log: Callable[[str], None] = logger.info,
    ) -> None:
        self.kube = kube
        self.name_suffix = name_suffix
        self.namespace = namespace
        self.image = TEST_IMAGE if image is None else image
        self.log = log
        self._pod_counter = 0
        self._claim_counter = 0
        self._workload_counter = 0
        self._pod_group_counter = 0
        self._classes: list[str] = []
        self._cleanups: list[Callable[[Kube], None]] = []

    # --- identity -----------------------------------------------------------------------------

    @property
    def driver_name(self) -> str:
        return f"{self.namespace}{self.name_suffix}.k8s.io"

    def class_name(self) -> str:
        return f"{self.namespace}{self.name_suffix}-class"

    def extended_resource_name(self, suffix: str) -> str:
        return f"{self.driver_name}/resource-{suffix}"

    def use_client(self, kube: Kube) -> None:
        """Talk through ``kube`` from now on (a fresh client after a cluster restart)."""
        self.kube = kube

    # --- objects ------------------------------------------------------------------------------

    def device_class(
        self, name: str | None = None, *, extended_resource_name: str | None = None
    ) -> dict:
        """A DeviceClass selecting this subtest's driver (the default class unless renamed)."""
        spec: dict[str, Any] = {
            "selectors": [{"cel": {"expression": f'device.driver == "{self.driver_name}"'}}]
        }
        if extended_resource_name is not None:
            spec["extendedResourceName"] = extended_resource_name
        return {
            "apiVersion": RESOURCE_V1,
            "kind": "DeviceClass",
            "metadata": {"name": name or self.class_name()},
            "spec": spec,
        }

    def class_with_extended_resource(self, resource: str) -> dict:
        """A class named after the last path segment of ``resource`` that maps it explicitly."""
        last = resource.rsplit("/", 1)[-1]
        return self.device_class(f"{self.class_name()}-{last}", extended_resource_name=resource)

    def claim_spec(self) -> dict:
        """The default claim spec (v1 and v1beta2 shape): one device of the default class."""
        return {
            "devices": {
                "requests": [
                    {"name": "my-request", "exactly": {"deviceClassName": self.class_name()}}
                ],
                "config": [self._opaque_config()],
            }
        }

    def claim_spec_v1beta1(self) -> dict:
        """The default claim spec in v1beta1 shape (no ``exactly`` level)."""
        return {
            "devices": {
                "requests": [{"name": "my-request", "deviceClassName": self.class_name()}],
                "config": [self._opaque_config()],
            }
        }

    def _opaque_config(self) -> dict:
        return {"opaque": {"driver": self.driver_name, "parameters": dict(DEFAULT_PARAMETERS)}}

    def external_claim(self) -> dict:
        """A ResourceClaim for pods to reference: ``external-claim<suffix>``, then ``-2``, ..."""
        self._claim_counter += 1
        name = f"external-claim{self.name_suffix}"
        if self._claim_counter > 1:
            name += f"-{self._claim_counter}"
        return {
            "apiVersion": RESOURCE_V1,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": self.claim_spec(),
        }

    def pod(self) -> dict:
        """A restricted-PSA pod that idles until deleted: ``tester<suffix>-<n>``."""
        self._pod_counter += 1
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"tester{self.name_suffix}-{self._pod_counter}",
                "namespace": self.namespace,
                "labels": {},
            },
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": NON_ROOT_USER,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "write-pod",
                        "image": self.image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": list(IDLE_COMMAND),
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "resources": {},
                    }
                ],
            },
        }

    def pod_external(self, claim_name: str) -> dict:
        """A pod whose container uses the existing claim ``claim_name``."""
        pod = self.pod()
        pod["spec"]["resourceClaims"] = [
            {"name": "resource-claim", "resourceClaimName": claim_name}
        ]
        container = pod["spec"]["containers"][0]
        container["name"] = "with-resource"
        container["resources"]["claims"] = [{"name": "resource-claim"}]
        return pod

    def pod_inline(self) -> tuple[dict, dict]:
        """A pod with a claim from a template named like the pod, and that template."""
        pod = self.pod()
        name = pod["metadata"]["name"]
        pod["spec"]["resourceClaims"] = [
            {"name": "my-inline-claim", "resourceClaimTemplateName": name}
        ]
        container = pod["spec"]["containers"][0]
        container["name"] = "with-resource"
        container["resources"]["claims"] = [{"name": "my-inline-claim"}]
        return pod, self._claim_template(name)

    def _claim_template(self, name: str) -> dict:
        return {
            "apiVersion": RESOURCE_V1,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"spec": self.claim_spec()},
        }

    def workload(self) -> dict:
        """A Workload with one pod group template ``group`` (basic scheduling, no claims)."""
        name = f"tester{self.name_suffix}-{self._workload_counter}"
        self._workload_counter += 1
        return {
            "apiVersion": SCHEDULING_V1BETA1,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"podGroupTemplates": [{"name": "group", "schedulingPolicy": {"basic": {}}}]},
        }

    def workload_inline(self) -> tuple[dict, dict]:
        """A Workload whose template claims from a ResourceClaimTemplate named like it."""
        workload = self.workload()
        name = workload["metadata"]["name"]
        workload["spec"]["podGroupTemplates"][0]["resourceClaims"] = [
            {"name": "my-inline-claim", "resourceClaimTemplateName": name}
        ]
        return workload, self._claim_template(name)

    def pod_group(self, workload: dict, template: dict) -> dict:
        """A PodGroup made from ``template`` of ``workload``: ``<workload>-<template>-<n>``."""
        workload_name = workload["metadata"]["name"]
        name = f"{workload_name}-{template['name']}-{self._pod_group_counter}"
        self._pod_group_counter += 1
        spec: dict[str, Any] = {
            "workloadRef": {"workloadName": workload_name, "templateName": template["name"]},
            "schedulingPolicy": copy.deepcopy(template["schedulingPolicy"]),
        }
        if template.get("resourceClaims"):
            spec["resourceClaims"] = copy.deepcopy(template["resourceClaims"])
        return {
            "apiVersion": SCHEDULING_V1BETA1,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": spec,
        }

    def grouped_pod_with_claims(self, pod_group: dict) -> dict:
        """A pod in ``pod_group`` that shares each of the group's claims."""
        pod = self.pod()
        pod["spec"]["schedulingGroup"] = {"podGroupName": pod_group["metadata"]["name"]}
        container = pod["spec"]["containers"][0]
        for claim in pod_group["spec"].get("resourceClaims", []):
            pod["spec"].setdefault("resourceClaims", []).append(dict(claim))
            container["resources"].setdefault("claims", []).append({"name": claim["name"]})
        return pod

    def device_taint_rule(
        self,
        name: str,
        *,
        pool: str,
        device: str,
        taint: dict,
        api_version: str = "resource.k8s.io/v1alpha3",
    ) -> dict:
        """A DeviceTaintRule that taints one device of this subtest's driver."""
        return {
            "apiVersion": api_version,
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {
                "deviceSelector": {"driver": self.driver_name, "pool": pool, "device": device},
                "taint": dict(taint),
            },
        }

    # --- API ----------------------------------------------------------------------------------

    def set_up(self) -> dict:
        """Create the default DeviceClass (upstream's NewBuilderNow does the same)."""
        return self.create(self.device_class())[0]

    def create(self, *objs: dict) -> list[dict]:
        """Create each object at its own apiVersion; the server's answers, in order."""
        created = []
        for obj in objs:
            self.log(f"Creating {obj['kind']} {obj['metadata']['name']}")
            answer = self.kube.create(object_path(obj, collection=True), obj)
            if obj["kind"] == "DeviceClass":
                self._classes.append(obj["metadata"]["name"])
            created.append(answer)
        return created

    def get(self, obj: dict) -> dict:
        return self.kube.get(object_path(obj))

    def delete(self, obj: dict, *, missing_ok: bool = False) -> None:
        """Delete ``obj``; that it is gone already fails (NotFound) unless ``missing_ok``."""
        self.log(f"Deleting {obj['kind']} {obj['metadata']['name']}")
        self.kube.delete(object_path(obj), missing_ok=missing_ok)

    def defer(self, cleanup: Callable[[Kube], None]) -> None:
        """Run ``cleanup(kube)`` at :meth:`tear_down`, before pods and claims are removed.

        For objects that the generic tear-down cannot remove by itself (a claim held by a
        test finalizer, a cluster-wide slice). ``cleanup`` gets the client current at that time.
        """
        self._cleanups.append(cleanup)

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

    # --- pod checks ---------------------------------------------------------------------------

    def read_pod(self, name: str) -> dict:
        return self.kube.get(path("v1", "pods", name, namespace=self.namespace))

    def wait_running(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        """Until the pod runs; fails early if it ended instead."""

        def probe() -> dict:
            pod = self.read_pod(name)
            phase = pod.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                raise PodFailed(f"pod {self.namespace}/{name} ended with phase {phase}")
            return pod

        return eventually(
            probe,
            what=f"pod {self.namespace}/{name} to run",
            timeout=timeout,
            until=lambda pod: pod.get("status", {}).get("phase") == "Running",
        )

    def wait_unschedulable(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        """Until the scheduler reports the pod as Unschedulable (and it is still Pending).

        As upstream's WaitForPodNameUnschedulableInNamespace, a pod that runs or ended fails at
        once: it was scheduled, and waiting longer cannot make it unschedulable again. So does a
        pod that is gone.
        """

        def probe() -> dict:
            try:
                pod = self.read_pod(name)
            except NotFound as exc:
                raise PodFailed(f"pod {self.namespace}/{name} is gone: {exc}") from exc
            phase = pod.get("status", {}).get("phase")
            if phase in ("Running", "Succeeded", "Failed"):
                node = pod.get("spec", {}).get("nodeName")
                raise PodFailed(
                    f"pod {self.namespace}/{name} should be Pending and unschedulable, "
                    f"but it is {phase} (scheduled to {node})"
                )
            return pod

        return eventually(
            probe,
            what=f"pod {self.namespace}/{name} to be unschedulable",
            timeout=timeout,
            until=is_unschedulable,
        )

    def wait_pod_gone(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        self.wait_gone(path("v1", "pods", name, namespace=self.namespace), f"pod {name}", timeout)

    def wait_gone(self, url_path: str, what: str, timeout: float) -> None:
        """Until GET ``url_path`` answers NotFound."""

        def gone() -> bool:
            try:
                self.kube.get(url_path)
            except NotFound:
                return True
            return False

        eventually(gone, what=f"{what} to be deleted", timeout=timeout)

    def delete_pod_and_wait(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        """Delete a pod the subtest expects to exist (NotFound fails), then wait until gone."""
        self.log(f"Deleting Pod {name}")
        self.kube.delete(path("v1", "pods", name, namespace=self.namespace))
        self.wait_pod_gone(name, timeout)

    def test_pod(
        self, pod: dict, env: Sequence[str] = DEFAULT_ENV, timeout: float = POD_START_TIMEOUT
    ) -> None:
        """The pod runs and every container's environment holds each ``k=v`` line of ``env``."""
        name = pod["metadata"]["name"]
        self.wait_running(name, timeout)
        for container in pod["spec"]["containers"]:
            self.check_container_env(name, container["name"], env)

    def check_container_env(self, pod_name: str, container: str, env: Iterable[str]) -> None:
        """``env`` in the container prints each ``k=v`` line (as a substring, like upstream)."""
        # Right after a kubelet restart, exec answers "pod does not exist" for a pod the API
        # shows as Running until the kubelet has synced it again: retry that, as upstream does.
        stdout, stderr = retrying(self.exec)(pod_name, container, ["env"])
        if stderr:
            raise AssertionError(f"env in {pod_name}/{container} wrote to stderr: {stderr!r}")
        missing = [line for line in env if f"{line}\n" not in stdout]
        if missing:
            raise AssertionError(
                f"container {pod_name}/{container} lacks env {missing}; env output:\n{stdout}"
            )

    def exec(self, pod_name: str, container: str, command: list[str]) -> tuple[str, str]:
        """Run ``command`` in a container; (stdout, stderr).

        An exec the server could not set up is a KubeError (a restarted kubelet explains it); a
        command that ran and failed is an :class:`ExecError` (nothing explains it away).
        """
        from kubernetes import client, stream
        from kubernetes.client.exceptions import ApiException

        where = f"{self.namespace}/{pod_name}/{container}"
        api = client.CoreV1Api(self.kube.api_client)
        try:
            session = stream.stream(
                api.connect_get_namespaced_pod_exec,
                pod_name,
                self.namespace,
                command=command,
                container=container,
                stdin=False,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            )
        except ApiException as exc:
            raise KubeError(exc.status or 0, "ExecFailed", str(exc.reason), path=where) from exc
        try:
            session.run_forever(timeout=60)
            stdout = session.read_stdout(timeout=0)
            stderr = session.read_stderr(timeout=0)
            if session.is_open():
                raise ExecError(f"{where}: {command} did not finish in 60s")
            code = session.returncode
        finally:
            session.close()
        if code != 0:
            raise ExecError(f"{where}: {command} exited with {code}: {stderr}")
        return stdout, stderr

    # --- tear-down ----------------------------------------------------------------------------

    def tear_down(self, prepared_claims: Callable[[], list] | None = None) -> None:
        """Remove what the subtests left: deferred objects, test pods, pod groups, claims, classes.

        Like upstream, this sweeps the whole namespace (pods of the driver proxy excepted), and
        waits until the driver (``prepared_claims``) has nothing prepared any more, so the
        driver can be stopped without stranding claims. Tries every step; raises the first
        error at the end.
        """
        errors: list[BaseException] = []

        def attempt(step: str, fn: Callable[[], object]) -> None:
            try:
                retrying(fn)()
            except Exception as exc:
                self.log(f"tear-down: {step} failed: {exc}")
                errors.append(exc)

        while self._cleanups:
            cleanup = self._cleanups.pop()
            attempt("deferred cleanup", lambda cleanup=cleanup: cleanup(self.kube))
        attempt("delete test pods", self._delete_test_pods)
        if retrying(self.kube.served)(SCHEDULING_V1BETA1):
            attempt("delete pod groups", self._delete_pod_groups)
        claims = path(RESOURCE_V1, "resourceclaims", namespace=self.namespace)
        attempt("delete claims", lambda: self._delete_all(claims))
        if prepared_claims is not None:
            attempt(
                "wait for unprepare",
                lambda: eventually(
                    prepared_claims,
                    what=f"driver {self.driver_name} to unprepare all claims",
                    timeout=TEARDOWN_TIMEOUT,
                    until=lambda prepared: not prepared,
                ),
            )
        attempt(
            "wait for claims",
            lambda: eventually(
                lambda: self.kube.list(claims),
                what=f"all ResourceClaims in {self.namespace} to be deleted",
                timeout=TEARDOWN_TIMEOUT,
                until=lambda items: not items,
            ),
        )
        for name in reversed(self._classes):
            attempt(
                f"delete DeviceClass {name}",
                lambda name=name: self.kube.delete(
                    path(RESOURCE_V1, "deviceclasses", name), missing_ok=True
                ),
            )
        self._classes.clear()
        if errors:
            raise errors[0]

    def _test_pods(self) -> list[dict]:
        key, value = DRIVER_POD_LABEL
        pods = self.kube.list(path("v1", "pods", namespace=self.namespace))
        return [p for p in pods if p["metadata"].get("labels", {}).get(key) != value]

    def _delete_test_pods(self) -> None:
        for pod in self._test_pods():
            if not pod["metadata"].get("deletionTimestamp"):
                self.delete(pod, missing_ok=True)
        eventually(
            self._test_pods,
            what=f"test pods in {self.namespace} to be deleted",
            timeout=TEARDOWN_TIMEOUT,
            until=lambda pods: not pods,
        )

    def _delete_pod_groups(self) -> None:
        self._delete_all(path(SCHEDULING_V1BETA1, "podgroups", namespace=self.namespace))
        eventually(
            lambda: self.kube.list(path(SCHEDULING_V1BETA1, "podgroups", namespace=self.namespace)),
            what=f"pod groups in {self.namespace} to be deleted",
            timeout=TEARDOWN_TIMEOUT,
            until=lambda items: not items,
        )

    def _delete_all(self, collection: str) -> None:
        for item in self.kube.list(collection):
            if not item["metadata"].get("deletionTimestamp"):
                self.log(f"Deleting {collection.rsplit('/', 1)[-1]} {item['metadata']['name']}")
                self.kube.delete(f"{collection}/{item['metadata']['name']}", missing_ok=True)


def is_unschedulable(pod: dict) -> bool:
    """Pending, with PodScheduled=False for reason Unschedulable (upstream's definition)."""
    status = pod.get("status", {})
    if status.get("phase") != "Pending":
        return False
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in status.get("conditions", [])
    )


def is_allocated(claim: dict) -> bool:
    return bool(claim.get("status", {}).get("allocation"))
