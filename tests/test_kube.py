"""The pure parts of the API client: paths and which errors a restart explains."""

from __future__ import annotations

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from e2e_dra.errors import ExecError
from e2e_dra.kube import Conflict, KubeError, NotFound, path, transient


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (("v1", "pods", "p"), {"namespace": "default"}, "/api/v1/namespaces/default/pods/p"),
        (("v1", "nodes"), {}, "/api/v1/nodes"),
        (("resource.k8s.io/v1", "resourceslices"), {}, "/apis/resource.k8s.io/v1/resourceslices"),
        (
            ("resource.k8s.io/v1beta2", "resourceclaims", "c"),
            {"namespace": "ns", "subresource": "status"},
            "/apis/resource.k8s.io/v1beta2/namespaces/ns/resourceclaims/c/status",
        ),
    ],
)
def test_paths(args: tuple, kwargs: dict, expected: str) -> None:
    assert path(*args, **kwargs) == expected


@pytest.mark.parametrize(
    "exc",
    [
        KubeError(0, "ProtocolError", "('Connection aborted.', RemoteDisconnected())"),
        KubeError(
            503, "ServiceUnavailable", "the server is currently unable to handle the request"
        ),
        KubeError(403, "Forbidden", 'User "kubernetes-admin" cannot get resource "pods"'),
        KubeError(429, "TooManyRequests", "slow down"),
        ConnectionResetError(104, "Connection reset by peer"),
        urllib3.exceptions.ProtocolError("Connection aborted."),
        ApiException(status=0, reason="Handshake status 500 Internal Server Error"),
        ApiException(status=400, reason="unable to upgrade connection: pod does not exist"),
    ],
)
def test_what_a_restart_explains_is_retried(exc: BaseException) -> None:
    assert transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        NotFound(404, "NotFound", 'pods "p" not found'),
        Conflict(409, "AlreadyExists", 'pods "p" already exists'),
        KubeError(422, "Invalid", "spec.devices.requests[0].name: Required value"),
        AssertionError("timed out after 60s waiting for pod p to be Running"),
        TimeoutError("timed out waiting for claims to be deleted"),
        KeyError("kind"),
        ExecError("default/p/c: ['env'] exited with 1: "),
    ],
)
def test_real_failures_are_not_retried(exc: BaseException) -> None:
    assert not transient(exc)
