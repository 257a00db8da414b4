"""Who the driver is towards the API server.

Upstream's driver acts as its kubelet plugin's service account, bound to its node (the node-name
user-info extra), so that RBAC and admission treat it like a deployed plugin. We need no pod for
that: impersonation carries the same identity. What confines it is created here and removed at
stop, as upstream's ``plugin-permissions.yaml`` has it: RBAC (claims, their status, slices) and a
ValidatingAdmissionPolicy that lets this identity write only ResourceSlices of its own node. A
privileged driver (cluster-wide slices) uses the admin client as is.
"""

from __future__ import annotations

import contextlib
import re

from e2e_dra.kube import Conflict, Kube, path

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"


class PluginIdentity:
    """The service account of one driver plus the ClusterRole/-Binding that empower it."""

    def __init__(self, admin: Kube, driver: str, namespace: str):
        self.admin = admin
        self.namespace = namespace
        base = re.sub(r"[^a-z0-9-]+", "-", driver.lower()).strip("-")[:200]
        self.driver = driver
        self.service_account = f"{base}-kubelet-plugin"
        self.role = f"dra-kubelet-plugin-{base}"
        self.policy = f"resourceslices-policy-dra-kubelet-plugin-{base}"

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def client(self, node_name: str, admin: Kube | None = None) -> Kube:
        """``admin`` (or the one we were made with), acting as the plugin on ``node_name``."""
        return (admin or self.admin).impersonating(self.user, extra={NODE_NAME_EXTRA: node_name})

    def create(self) -> None:
        labels = {"app.kubernetes.io/part-of": "dra-test-driver"}
        objects: list[tuple[str, dict]] = [
            (
                path("v1", "serviceaccounts", namespace=self.namespace),
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": self.service_account, "labels": labels},
                },
            ),
            (
                path(RBAC, "clusterroles"),
                {
                    "apiVersion": RBAC,
                    "kind": "ClusterRole",
                    "metadata": {"name": self.role, "labels": labels},
                    "rules": [
                        {
                            "apiGroups": ["resource.k8s.io"],
                            "resources": ["resourceclaims"],
                            "verbs": ["get"],
                        },
                        {
                            "apiGroups": ["resource.k8s.io"],
                            "resources": ["resourceclaims/status"],
                            "verbs": ["patch", "update"],
                        },
                        {
                            "apiGroups": ["resource.k8s.io"],
                            "resources": ["resourceclaims/driver"],
                            "verbs": ["associated-node:patch", "associated-node:update"],
                            "resourceNames": [self.driver],
                        },
                        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                        {
                            "apiGroups": ["resource.k8s.io"],
                            "resources": ["resourceslices"],
                            "verbs": [
                                "get",
                                "list",
                                "watch",
                                "create",
                                "update",
                                "patch",
                                "delete",
                            ],
                        },
                    ],
                },
            ),
            (
                path(RBAC, "clusterrolebindings"),
                {
                    "apiVersion": RBAC,
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": self.role, "labels": labels},
                    "subjects": [
                        {
                            "kind": "ServiceAccount",
                            "name": self.service_account,
                            "namespace": self.namespace,
                        }
                    ],
                    "roleRef": {
                        "apiGroup": RBAC.split("/")[0],
                        "kind": "ClusterRole",
                        "name": self.role,
                    },
                },
            ),
            (path(ADMISSION, "validatingadmissionpolicies"), self._policy(labels)),
            (
                path(ADMISSION, "validatingadmissionpolicybindings"),
                {
                    "apiVersion": ADMISSION,
                    "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": self.policy, "labels": labels},
                    "spec": {"policyName": self.policy, "validationActions": ["Deny"]},
                },
            ),
        ]
        for collection, body in objects:
            # Conflict: left over from an earlier run, with the same content; keep it.
            with contextlib.suppress(Conflict):
                self.admin.create(collection, body)

    def _policy(self, labels: dict[str, str]) -> dict:
        """Upstream's policy: this identity may create, update and delete only ResourceSlices
        whose ``spec.nodeName`` is the node its credentials are bound to."""
        return {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": self.policy, "labels": labels},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["resource.k8s.io"],
                            "apiVersions": ["v1alpha3", "v1beta1", "v1beta2", "v1"],
                            "operations": ["CREATE", "UPDATE", "DELETE"],
                            "resources": ["resourceslices"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "isRestrictedUser",
                        "expression": f'request.userInfo.username == "{self.user}"',
                    }
                ],
                "variables": [
                    {
                        "name": "userNodeName",
                        "expression": (
                            f"request.userInfo.extra[?'{NODE_NAME_EXTRA}'][0].orValue('')"
                        ),
                    },
                    {
                        "name": "objectNodeName",
                        "expression": (
                            '(request.operation == "DELETE" ? oldObject : object)'
                            '.spec.?nodeName.orValue("")'
                        ),
                    },
                ],
                "validations": [
                    {
                        "expression": 'variables.userNodeName != ""',
                        "message": (
                            "no node association found for user, this user must run in a pod "
                            "on a node and ServiceAccountTokenPodNodeInfo must be enabled"
                        ),
                    },
                    {
                        "expression": "variables.userNodeName == variables.objectNodeName",
                        "messageExpression": (
                            '"this user running on node \'"+variables.userNodeName+"\' may not '
                            'modify " + (variables.objectNodeName == "" ? "cluster '
                            'resourceslices" : "resourceslices on node \'"+'
                            'variables.objectNodeName+"\'")'
                        ),
                    },
                ],
            },
        }

    def delete(self) -> None:
        self.admin.delete(
            path(ADMISSION, "validatingadmissionpolicybindings", self.policy), missing_ok=True
        )
        self.admin.delete(
            path(ADMISSION, "validatingadmissionpolicies", self.policy), missing_ok=True
        )
        self.admin.delete(path(RBAC, "clusterrolebindings", self.role), missing_ok=True)
        self.admin.delete(path(RBAC, "clusterroles", self.role), missing_ok=True)
        self.admin.delete(
            path("v1", "serviceaccounts", self.service_account, namespace=self.namespace),
            missing_ok=True,
        )
