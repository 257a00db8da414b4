"""The objects subtests create, as plain dicts under upstream's names: no client at all.

Names matter: upstream derives every object name from the namespace and the subtest name (the
"suffix"), so two subtests never collide in the shared ``default`` namespace and a failure
message names the subtest. Objects are plain dicts at explicit API versions, because the suite
talks to two releases that do not serve the same versions.

Building an object never talks to the server, so the factory holds names and counters only: the
shapes are checked without a cluster (``tests/test_subtests_shape.py``). The counters are the
subtest's (:class:`~e2e_dra.builder.SubtestObjects` hands the same ones to every phase's builder),
so a pod made after an upgrade does not reuse a name from before it.

Every object carries the labels :data:`SUBTEST_LABEL` and :data:`SUITE_LABEL` (a claim template
passes them on to the claims made from it), so whatever a run leaves behind names its owner.
The predicates at the end read what the server answers for these objects; they need no client
either.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from e2e_dra.builder._requests import Request, request
from e2e_dra.provision import TEST_IMAGE

RESOURCE_V1 = "resource.k8s.io/v1"
SCHEDULING_V1BETA1 = "scheduling.k8s.io/v1beta1"

SUBTEST_LABEL = "e2e-dra/subtest"
DISRUPTION_ANNOTATION = "e2e-dra/disruption-expected"
"""On a pod: why its subtest expects the next cluster step to disrupt it (a reboot, an eviction,
a deletion while the kubelet is down); the suite's disruption net leaves it alone."""
"""On every object a builder creates: the subtest it belongs to."""
SUITE_LABEL = "e2e-dra/suite"
"""On every object a builder creates: the suite that ran the subtest."""

DEFAULT_PARAMETERS: dict[str, str] = {"a": "b"}
"""Opaque config of the default claim; the test driver turns it into ``user_a=b`` in the pod."""
DEFAULT_ENV: tuple[str, ...] = ("user_a=b",)

IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"

# Upstream's pause-like command: exits at once on SIGTERM, so deleting a pod takes no grace period.
IDLE_COMMAND = ("/bin/sh", "-c", "trap exit TERM; while true; do sleep 1; done")
NON_ROOT_USER = 1000


def labeled(obj: dict, labels: Mapping[str, str]) -> dict:
    """A copy of ``obj`` with ``labels`` (its own win), also on a claim template's claims: the
    resourceclaim controller gives a claim it makes from a template the template's
    ``spec.metadata.labels``, so the claims made for a subtest's pods are its own too."""
    obj = copy.deepcopy(obj)
    metadata = obj.setdefault("metadata", {})
    metadata["labels"] = {**labels, **(metadata.get("labels") or {})}
    if obj.get("kind") == "ResourceClaimTemplate":
        spec_metadata = obj.setdefault("spec", {}).setdefault("metadata", {})
        spec_metadata["labels"] = {**labels, **(spec_metadata.get("labels") or {})}
    return obj


def driver_name(namespace: str, subtest: str) -> str:
    """The name of ``subtest``'s driver in ``namespace``: the one formula both the harness that
    starts the driver and the objects that select its devices use."""
    return f"{namespace}{subtest}.k8s.io"


class ObjectFactory:
    """One subtest's objects under upstream's names: device classes, claims, pods, templates,
    workloads, pod groups and taint rules."""

    def __init__(
        self,
        name_suffix: str,
        *,
        namespace: str = "default",
        image: str | None = None,
        labels: dict[str, str] | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        self.name_suffix = name_suffix
        self.namespace = namespace
        self.image = TEST_IMAGE if image is None else image
        # Put on every object; the default names the subtest (a suite adds its own name).
        self.labels = dict(labels) if labels is not None else {SUBTEST_LABEL: name_suffix}
        # How many of each kind were made: shared by every factory of the same subtest.
        self.counters: Counter[str] = Counter() if counters is None else counters

    def _count(self, kind: str) -> int:
        """The number of ``kind`` objects made so far, this one included."""
        self.counters[kind] += 1
        return self.counters[kind]

    def _metadata(self, name: str, *, namespaced: bool = True) -> dict:
        metadata: dict[str, Any] = {"name": name}
        if namespaced:
            metadata["namespace"] = self.namespace
        metadata["labels"] = dict(self.labels)
        return metadata

    # --- names --------------------------------------------------------------------------------

    @property
    def driver_name(self) -> str:
        return driver_name(self.namespace, self.name_suffix)

    def class_name(self) -> str:
        return f"{self.namespace}{self.name_suffix}-class"

    def extended_resource_name(self, suffix: str) -> str:
        return f"{self.driver_name}/resource-{suffix}"

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
            "metadata": self._metadata(name or self.class_name(), namespaced=False),
            "spec": spec,
        }

    def class_with_extended_resource(self, resource: str) -> dict:
        """A class named after the last path segment of ``resource`` that maps it explicitly."""
        last = resource.rsplit("/", 1)[-1]
        return self.device_class(f"{self.class_name()}-{last}", extended_resource_name=resource)

    def claim_spec(self, requests: Sequence[Request] | None = None) -> dict:
        """A claim spec (v1 and v1beta2 shape) with the default opaque config: ``requests``
        (see :func:`~e2e_dra.builder.request`; classes default to the default class), or the
        default one, ``my-request`` for one device of the default class."""
        wanted = [request()] if requests is None else requests
        return {
            "devices": {
                "requests": [r.spec(self.class_name()) for r in wanted],
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

    def external_claim(self, requests: Sequence[Request] | None = None) -> dict:
        """A ResourceClaim for pods to reference: ``external-claim<suffix>``, then ``-2``, ...;
        for ``requests`` (the default request if None), see :meth:`claim_spec`."""
        count = self._count("claim")
        name = f"external-claim{self.name_suffix}"
        if count > 1:
            name += f"-{count}"
        return {
            "apiVersion": RESOURCE_V1,
            "kind": "ResourceClaim",
            "metadata": self._metadata(name),
            "spec": self.claim_spec(requests),
        }

    def pod(self) -> dict:
        """A restricted-PSA pod that idles until deleted: ``tester<suffix>-<n>``."""
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self._metadata(f"tester{self.name_suffix}-{self._count('pod')}"),
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

    def pod_inline(self, requests: Sequence[Request] | None = None) -> tuple[dict, dict]:
        """A pod with a claim from a template named like the pod, and that template, whose
        claims have ``requests`` (see :meth:`claim_spec`)."""
        pod = self.pod()
        name = pod["metadata"]["name"]
        pod["spec"]["resourceClaims"] = [
            {"name": "my-inline-claim", "resourceClaimTemplateName": name}
        ]
        container = pod["spec"]["containers"][0]
        container["name"] = "with-resource"
        container["resources"]["claims"] = [{"name": "my-inline-claim"}]
        return pod, self._claim_template(name, requests)

    def _claim_template(self, name: str, requests: Sequence[Request] | None) -> dict:
        return {
            "apiVersion": RESOURCE_V1,
            "kind": "ResourceClaimTemplate",
            "metadata": self._metadata(name),
            # The claims made from it carry the labels too.
            "spec": {"metadata": {"labels": dict(self.labels)}, "spec": self.claim_spec(requests)},
        }

    def workload(self) -> dict:
        """A Workload with one pod group template ``group`` (basic scheduling, no claims)."""
        name = f"tester{self.name_suffix}-{self._count('workload') - 1}"
        return {
            "apiVersion": SCHEDULING_V1BETA1,
            "kind": "Workload",
            "metadata": self._metadata(name),
            "spec": {"podGroupTemplates": [{"name": "group", "schedulingPolicy": {"basic": {}}}]},
        }

    def workload_inline(self, requests: Sequence[Request] | None = None) -> tuple[dict, dict]:
        """A Workload whose template claims from a ResourceClaimTemplate named like it, whose
        claims have ``requests`` (see :meth:`claim_spec`)."""
        workload = self.workload()
        name = workload["metadata"]["name"]
        workload["spec"]["podGroupTemplates"][0]["resourceClaims"] = [
            {"name": "my-inline-claim", "resourceClaimTemplateName": name}
        ]
        return workload, self._claim_template(name, requests)

    def pod_group(self, workload: dict, template: dict) -> dict:
        """A PodGroup made from ``template`` of ``workload``: ``<workload>-<template>-<n>``."""
        workload_name = workload["metadata"]["name"]
        name = f"{workload_name}-{template['name']}-{self._count('pod group') - 1}"
        spec: dict[str, Any] = {
            "workloadRef": {"workloadName": workload_name, "templateName": template["name"]},
            "schedulingPolicy": copy.deepcopy(template["schedulingPolicy"]),
        }
        if template.get("resourceClaims"):
            spec["resourceClaims"] = copy.deepcopy(template["resourceClaims"])
        return {
            "apiVersion": SCHEDULING_V1BETA1,
            "kind": "PodGroup",
            "metadata": self._metadata(name),
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
        pool: str | None = None,
        device: str | None = None,
        taint: dict,
        api_version: str = "resource.k8s.io/v1alpha3",
    ) -> dict:
        """A DeviceTaintRule that taints devices of this subtest's driver: those of ``pool``, and
        of them ``device`` (each left out of the selector when None: all pools, all devices)."""
        selector = {"driver": self.driver_name, "pool": pool, "device": device}
        return {
            "apiVersion": api_version,
            "kind": "DeviceTaintRule",
            "metadata": self._metadata(name, namespaced=False),
            "spec": {
                "deviceSelector": {k: v for k, v in selector.items() if v is not None},
                "taint": dict(taint),
            },
        }


# --- what the server answers ------------------------------------------------------------------


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


def event_time(event: dict) -> datetime:
    """When ``event`` was last reported, in UTC (a repeated one keeps its object, with a
    series); the earliest time there is when it says none."""
    series = event.get("series") or {}
    times = [
        event.get("eventTime"),
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("firstTimestamp"),
    ]
    parsed = [datetime.fromisoformat(t) for t in times if isinstance(t, str) and t]
    return max(parsed, default=datetime.min.replace(tzinfo=UTC))


def cluster_slice(
    driver: str, name: str, devices: Sequence[dict], *, pool: str | None = None, generation: int = 0
) -> dict:
    """A ResourceSlice of ``driver`` for every node (``allNodes``), the only slice of its pool
    (``pool``, by default named as the slice): what a subtest publishes itself, with no kubelet
    to wipe it."""
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool or name, "generation": generation, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": copy.deepcopy(list(devices)),
        },
    }
