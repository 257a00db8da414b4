"""The objects subtests create, as plain dicts under upstream's names: no client at all.

Names matter: upstream derives every object name from the namespace and the subtest name (the
"suffix"), so two subtests never collide in the shared ``default`` namespace and a failure
message names the subtest. Objects are plain dicts at explicit API versions, because the suite
talks to two releases that do not serve the same versions.

Building an object never talks to the server, so the factory holds names and counters only: the
shapes are checked without a cluster (``tests/test_subtests_shape.py``), and the counters carry on
across cluster restarts, so a pod made after an upgrade does not reuse a name from before it.
The predicates at the end read what the server answers for these objects; they need no client
either.
"""

from __future__ import annotations

import copy
from typing import Any

from e2e_dra.provision import TEST_IMAGE

RESOURCE_V1 = "resource.k8s.io/v1"
SCHEDULING_V1BETA1 = "scheduling.k8s.io/v1beta1"

DEFAULT_PARAMETERS: dict[str, str] = {"a": "b"}
"""Opaque config of the default claim; the test driver turns it into ``user_a=b`` in the pod."""
DEFAULT_ENV: tuple[str, ...] = ("user_a=b",)

IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"

# Upstream's pause-like command: exits at once on SIGTERM, so deleting a pod takes no grace period.
IDLE_COMMAND = ("/bin/sh", "-c", "trap exit TERM; while true; do sleep 1; done")
NON_ROOT_USER = 1000


class ObjectFactory:
    """One subtest's objects under upstream's names: device classes, claims, pods, templates,
    workloads, pod groups and taint rules."""

    def __init__(
        self, name_suffix: str, *, namespace: str = "default", image: str | None = None
    ) -> None:
        self.name_suffix = name_suffix
        self.namespace = namespace
        self.image = TEST_IMAGE if image is None else image
        self._pod_counter = 0
        self._claim_counter = 0
        self._workload_counter = 0
        self._pod_group_counter = 0

    # --- names --------------------------------------------------------------------------------

    @property
    def driver_name(self) -> str:
        return f"{self.namespace}{self.name_suffix}.k8s.io"

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
