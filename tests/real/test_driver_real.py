"""The driver against real Kubernetes: a real kubelet registers it, prepares a claim for a pod, the
runtime injects what the CDI spec says, the slices survive a kubelet restart, and a slice the API
server refuses is reported.

Runs the current release with hack/local-up-cluster.sh through localupcluster (which holds the host
lock) on the provisioned node runtime.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LiveCluster

from e2e_dra.driver import Driver, Pool, node_devices
from e2e_dra.kube import path

logger = logging.getLogger(__name__)

pytestmark = pytest.mark.real

DRIVER = "real-driver.e2e-dra.k8s.io"
NAMESPACE = "default"
RESOURCE = "resource.k8s.io/v1"


@pytest.fixture(scope="module")
def cluster(start_cluster, tmp_path_factory) -> Iterator[LiveCluster]:
    with start_cluster(tmp_path_factory.mktemp("driver-real-logs"), state="driver-real") as live:
        yield live


@pytest.fixture
def driver(cluster, tmp_path: Path) -> Iterator[Driver]:
    kube = cluster.kube
    node = kube.list(path("v1", "nodes"))[0]["metadata"]["name"]
    with Driver(
        DRIVER, node, kube, resources=node_devices(node, 2), log_dir=tmp_path / "driver"
    ) as running:
        running.wait_registered(timeout=60)
        running.wait_for_slices(timeout=60)
        yield running


def _wait(what: str, condition, timeout: float, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"no {what} within {timeout:.0f}s")


def test_a_pod_gets_the_claim_parameters_and_the_cdi_spec_goes_away(cluster, driver):
    from e2e_dra.provision import TEST_IMAGE

    kube = cluster.kube
    kube.create(
        path(RESOURCE, "deviceclasses"),
        {
            "apiVersion": RESOURCE,
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    try:
        claim = kube.create(
            path(RESOURCE, "resourceclaims", namespace=NAMESPACE),
            {
                "apiVersion": RESOURCE,
                "kind": "ResourceClaim",
                "metadata": {"name": "external-claim"},
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "my-request", "exactly": {"deviceClassName": DRIVER}}
                        ],
                        "config": [
                            {"opaque": {"driver": DRIVER, "parameters": {"a": "b"}}},
                        ],
                    }
                },
            },
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "tester"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "with-resource",
                        "image": TEST_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", "env"],
                        "resources": {"claims": [{"name": "resource-claim"}]},
                    }
                ],
                "resourceClaims": [
                    {"name": "resource-claim", "resourceClaimName": "external-claim"}
                ],
            },
        }
        kube.create(path("v1", "pods", namespace=NAMESPACE), pod)
        pods = path("v1", "pods", namespace=NAMESPACE)
        pod_path = f"{pods}/tester"
        phase = _wait(
            "finished pod",
            lambda: (
                kube.get(pod_path).get("status", {}).get("phase") in ("Succeeded", "Failed")
                and kube.get(pod_path)["status"]["phase"]
            ),
            timeout=180,
        )
        logs = kube.request("GET", f"{pod_path}/log", stream=True).read().decode()
        assert phase == "Succeeded", logs
        assert "user_a=b\n" in logs
        assert "claim_external_claim_my_request=true\n" in logs
        prepares = [c for c in driver.calls.records if c.method.endswith("/NodePrepareResources")]
        assert prepares and prepares[0].error is None
        uid = claim["metadata"]["uid"]
        assert uid in prepares[0].response.claims

        kube.delete(pod_path)
        _wait("pod gone", lambda: not kube.list(pods, fieldSelector="metadata.name=tester"), 120)
        spec_file = driver.cdi_dir / f"{DRIVER}-{uid}-my-request.json"
        _wait("CDI spec removed", lambda: not spec_file.exists(), timeout=120)
        assert driver.prepared_claims() == []
    finally:
        pod = path("v1", "pods", "tester", namespace=NAMESPACE)
        kube.delete(pod, missing_ok=True, gracePeriodSeconds=0)
        claim = path(RESOURCE, "resourceclaims", "external-claim", namespace=NAMESPACE)
        kube.delete(claim, missing_ok=True)
        kube.delete(path(RESOURCE, "deviceclasses", DRIVER), missing_ok=True)


def test_slices_come_back_after_a_kubelet_restart(cluster, driver):
    from e2e_dra.localupcluster import ModifyOptions

    running, kube, bin_dir = cluster.cluster, cluster.kube, cluster.release.bin_dir
    before = {s["metadata"]["uid"] for s in driver.slices()}
    registrations = driver.calls.count("/NotifyRegistrationStatus")

    started = time.monotonic()
    running.modify(
        "kubelet-restart", ModifyOptions(file_by_component={"kubelet": bin_dir / "kubelet"})
    )
    _wait(
        "re-registration",
        lambda: driver.calls.count("/NotifyRegistrationStatus") > registrations,
        timeout=120,
    )
    kube.server_restarted()  # the owner of the cluster says so; the driver's client learns it
    driver.wait_for_slices(timeout=120)

    after = {s["metadata"]["uid"] for s in driver.slices()}
    logger.info(
        f"kubelet restart: slices back after {time.monotonic() - started:.1f}s "
        f"({'re-created' if before != after else 'kept'}); "
        f"{driver.publish_errors or 'no publish errors'}"
    )
    assert len(after) == driver.expected_slice_count() == 1
    # Whatever the restart made the server refuse for a moment, a later pass resolved.
    assert driver.take_publish_errors() == []


def test_a_slice_the_api_server_refuses_is_reported_once_until_it_is_fixed(cluster, driver):
    """A device name that is no DNS label: the server refuses the update with 422 Invalid, every
    retry. The error stands, names the driver, the slice and what the server said, and is
    reported once; a good publish resolves it, and the same refusal later is reported again."""
    node = driver.node_name
    (slice_name,) = [s["metadata"]["name"] for s in driver.slices()]
    bad = [Pool(node, [{"devices": [{"name": "Not_A_DNS_Label"}]}], node_name=node)]
    # What the server refused while the driver's RBAC was new (a 403) was resolved since.
    assert driver.take_publish_errors() == []

    def refused() -> list[str]:
        def refusals() -> int:
            return sum("422 Invalid" in e for e in driver.publish_errors)

        before = refusals()
        driver.publish(bad)
        _wait("the refusal", lambda: refusals() > before, 30)
        return driver.take_publish_errors(grace=5)  # a fresh try fails the same way

    (error,) = refused()
    assert error.startswith(f"driver {DRIVER}: publishing ResourceSlices failed: ")
    assert f"ResourceSlice {slice_name}: PUT /apis/{RESOURCE}/resourceslices/{slice_name}" in error
    assert "422 Invalid" in error and '"Not_A_DNS_Label"' in error
    assert driver.take_publish_errors(grace=5) == []  # once, though the publisher retries

    driver.publish(node_devices(node, 3))  # a good publish, stored: the refusal is resolved
    _wait("three devices", lambda: [len(s["spec"]["devices"]) for s in driver.slices()] == [3], 30)
    (again,) = refused()
    assert "422 Invalid" in again and slice_name in again

    driver.publish(node_devices(node, 2))
    _wait("two devices", lambda: [len(s["spec"]["devices"]) for s in driver.slices()] == [2], 30)
