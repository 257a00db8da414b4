"""The builder and two subtests against a real cluster of the current release (no restarts).

Runs each phase chain back to back on one cluster: this proves the objects are accepted, the
pods run with the driver's env, the checks really look at the pod, and tear-down leaves the
namespace empty. The upgrade/downgrade itself is the main suite's job.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DRA_FEATURE_GATES, DRA_RUNTIME_CONFIG

from e2e_dra.builder import SUBTEST_LABEL, Builder, SubtestObjects
from e2e_dra.errors import E2EDRAError
from e2e_dra.kube import Kube, path
from e2e_dra.subtest import PHASES, Context, Subtest
from e2e_dra.waits import WaitTimeout, eventually

logger = logging.getLogger(__name__)

pytestmark = pytest.mark.real

NODE = "127.0.0.1"


@dataclass
class Live:
    kube: Kube
    artifacts: Path


@pytest.fixture(scope="module")
def live(start_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    artifacts = tmp_path_factory.mktemp("builder-real")
    extra_env = {"RUNTIME_CONFIG": DRA_RUNTIME_CONFIG, "FEATURE_GATES": DRA_FEATURE_GATES}
    with start_cluster(artifacts / "logs", state="0-builder", extra_env=extra_env) as running:
        kube = running.kube
        eventually(
            lambda: kube.get(path("v1", "nodes", NODE)),
            what=f"node {NODE} to be ready",
            timeout=300,
            until=lambda node: any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in node.get("status", {}).get("conditions", [])
            ),
        )
        yield Live(kube, artifacts)


def _run_chain(live: Live, subtest: Subtest) -> SubtestObjects:
    """Set up the subtest's driver and builder, run its three phases, tear down."""
    from e2e_dra.driver import Driver

    resources = subtest.resources([NODE]) if subtest.resources else None
    driver = Driver(
        f"default{subtest.name}.k8s.io",
        NODE,
        live.kube,
        resources=resources,
        privileged_client=subtest.privileged_client,
        reconcile_pool=subtest.reconcile_pool,
        log_dir=live.artifacts,
    )
    objects = SubtestObjects(subtest.name, suite="builder-real")
    driver.start()
    try:
        driver.wait_registered()
        if resources is not None:
            driver.wait_for_slices()
        objects.builder(live.kube).set_up()
        phase = subtest.initial
        for name in PHASES:  # the re-upgrade leg's too: the older writes read and accepted again
            logger.info(f"{subtest.name}: {name}")
            kube = live.kube.fresh()  # as after a restart: a new client, a new builder
            builder = objects.builder(kube, name)
            ctx = Context(kube, driver, builder, [NODE], name, live.artifacts)
            assert phase is not None, f"{subtest.name} ended before {name}"
            phase = phase(ctx)
        assert phase is None
        objects.builder(live.kube.fresh()).tear_down(driver.prepared_claims)
    finally:
        driver.stop()
    return objects


def test_core_dra_chain_runs_and_leaves_nothing(live: Live) -> None:
    from e2e_dra.subtests import core_dra

    objects = _run_chain(live, core_dra.SUBTEST)
    written = {(w.phase, w.obj["kind"]) for w in objects.leftovers.written}
    assert ("after-cluster-creation", "ResourceClaim") in written
    assert ("after-cluster-upgrade", "Pod") in written
    assert live.kube.list(path("v1", "pods", namespace="default")) == []
    assert live.kube.list(path("resource.k8s.io/v1", "resourceclaims", namespace="default")) == []
    classes = [
        c["metadata"]["name"] for c in live.kube.list(path("resource.k8s.io/v1", "deviceclasses"))
    ]
    assert "defaultcore-dra-class" not in classes


def test_resource_claim_device_status_chain(live: Live) -> None:
    from e2e_dra.subtests import resource_claim_device_status

    _run_chain(live, resource_claim_device_status.SUBTEST)
    with pytest.raises(E2EDRAError, match="NotFound"):
        live.kube.get(
            path(
                "resource.k8s.io/v1",
                "resourceclaims",
                "claim-with-device-status",
                namespace="default",
            )
        )


def test_env_check_looks_at_the_container(live: Live) -> None:
    """A pod without a claim runs, but the driver's env line is absent: the check must say so."""
    builder: Builder = SubtestObjects("env-check", suite="builder-real").builder(live.kube)
    pod = builder.pod()
    builder.create(pod)
    try:
        builder.wait_running(pod["metadata"]["name"])
        builder.check_container_env(
            pod["metadata"]["name"], "write-pod", ["KUBERNETES_PORT_443_TCP_PROTO=tcp"]
        )
        with pytest.raises(AssertionError, match="lacks env \\['user_a=b'\\]"):
            builder.test_pod(pod)
    finally:
        builder.delete_pod_and_wait(pod["metadata"]["name"])


def test_a_pod_that_stopped_running_says_why(live: Live) -> None:
    """When a pod that ran before a restart no longer runs, the failure quotes what its status
    says (in a soak, a kubelet evicted pods for DiskPressure, and the failure only said that the
    containers had changed). Here the kubelet fails the pod for its active deadline."""
    from e2e_dra.subtest_kit import running, still_untouched

    builder: Builder = SubtestObjects("stopped-pod", suite="builder-real").builder(live.kube)
    pod = builder.pod()
    builder.create(pod)
    name = pod["metadata"]["name"]
    try:
        builder.wait_running(name)
        before = running(builder, name)
        builder.patch("pods", name, {"spec": {"activeDeadlineSeconds": 1}})
        eventually(
            lambda: builder.read_pod(name)["status"].get("phase"),
            what=f"pod {name} to fail for its deadline",
            timeout=60,
            until=lambda phase: phase == "Failed",
        )
        with pytest.raises(AssertionError, match="the pod is Failed: DeadlineExceeded: Pod was"):
            still_untouched(builder, before, claims=(), env=[])
    finally:
        builder.delete_pod_and_wait(name)


def test_a_pod_that_never_runs_says_where_it_stuck_in_a_line(live: Live) -> None:
    """A pod that never starts once failed after 300 s with its whole object as "last value"
    (a mutant's pod stuck on a claim the kubelet may not use): the failure must say where it
    stuck and why, from its status and events."""
    builder: Builder = SubtestObjects("never-runs", suite="builder-real").builder(live.kube)
    pod = builder.pod()
    pod["spec"]["containers"][0]["image"] = "registry.invalid/e2e-dra/none:1"
    builder.create(pod)
    name = pod["metadata"]["name"]
    try:
        with pytest.raises(WaitTimeout) as caught:
            builder.wait_running(name, timeout=20)
        said = str(caught.value)
        assert said.startswith(f"timed out after 20s waiting for pod default/{name} to run: ")
        assert re.search(
            r"Pending on \S+, container \S+ waiting \((ErrImagePull|ImagePullBackOff)\)", said
        )
        assert (
            "; its events: " in said and f"Scheduled: Successfully assigned default/{name}" in said
        )
        assert "last value" not in said and "'metadata'" not in said
    finally:
        builder.delete_pod_and_wait(name)


def _generated_claims(kube: Kube) -> dict[str, str]:
    """Claim name -> the subtest label it carries, for every claim in ``default``."""
    claims = kube.list(path("resource.k8s.io/v1", "resourceclaims", namespace="default"))
    return {
        c["metadata"]["name"]: (c["metadata"].get("labels") or {}).get(SUBTEST_LABEL, "")
        for c in claims
    }


def test_a_tear_down_keeps_to_its_own_objects(live: Live) -> None:
    """A chain a known bug ended is torn down while the others run, and every subtest's
    tear-down runs while the others' objects are still there: each removes what carries its
    labels, the claims the resourceclaim controller made from its templates included (they
    carry the template's labels), and leaves the others' pods and claims alone."""
    kube = live.kube.fresh()
    ended = SubtestObjects("ended-early", suite="builder-real").builder(kube)
    going_on = SubtestObjects("going-on", suite="builder-real").builder(kube)
    ended_pod, going_pod = ended.pod(), going_on.pod()
    (ended_inline, ended_template), (going_inline, going_template) = (
        ended.pod_inline(),
        going_on.pod_inline(),
    )
    ended.create(ended_pod, ended_template, ended_inline)
    going_on.create(going_pod, going_template, going_inline)
    going_on.wait_running(going_pod["metadata"]["name"])
    # No driver serves the default classes: the inline pods wait, their claims are made anyway.
    claims = eventually(
        lambda: _generated_claims(kube),
        what="the resourceclaim controller to make a claim for each inline pod",
        timeout=60,
        until=lambda claims: sorted(claims.values()) == ["ended-early", "going-on"],
    )

    ended.tear_down()

    names = [p["metadata"]["name"] for p in kube.list(path("v1", "pods", namespace="default"))]
    assert sorted(names) == sorted(
        [going_pod["metadata"]["name"], going_inline["metadata"]["name"]]
    )
    left = _generated_claims(kube)
    assert list(left.values()) == ["going-on"], left
    assert set(left) <= set(claims)
    going_on.tear_down()
    assert kube.list(path("v1", "pods", namespace="default")) == []
    assert _generated_claims(kube) == {}
