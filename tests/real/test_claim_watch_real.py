"""The claim watch against a real API server: claims of every namespace, and a restart it outlives.

The suite's own namespace is covered by the strip-finalizer subtest of ``test_nets_real.py``; here
a claim lives in a namespace of its own, as the admin-access subtest's do, and is allocated the
way a careless allocator would: its status written through the status subresource, with no
finalizer. No driver or scheduler is needed for that, so one cluster of the current release
serves the module; the apiserver-restart test runs last.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import DRA_FEATURE_GATES, DRA_RUNTIME_CONFIG, LiveCluster, restart_component

from e2e_dra._suite._nets import ClaimWatch, Finding, claim_owner
from e2e_dra.builder import SUBTEST_LABEL
from e2e_dra.kube import Kube, NotFound, path, retrying
from e2e_dra.waits import eventually

pytestmark = pytest.mark.real

V1 = "resource.k8s.io/v1"
OTHER = "e2e-dra-claim-watch-other"
DRIVER = "claim-watch.e2e-dra.k8s.io"
DRIVERS = {"someone": DRIVER}
KEEP = "e2e-dra.k8s.io/keep"


@pytest.fixture(scope="module")
def live(start_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    extra_env = {"RUNTIME_CONFIG": DRA_RUNTIME_CONFIG, "FEATURE_GATES": DRA_FEATURE_GATES}
    logs = tmp_path_factory.mktemp("claim-watch-real")
    with start_cluster(logs, state="claim-watch-real", extra_env=extra_env) as running:
        retrying(running.kube.create)(
            path("v1", "namespaces"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER}},
        )
        yield running


@pytest.fixture
def watch(live: LiveCluster) -> Iterator[ClaimWatch]:
    """The suite's claim watch, on a client of its own, owned as the suite owns claims."""
    kube = live.kube.fresh()
    watch = ClaimWatch(kube, lambda claim: claim_owner(claim, DRIVERS))
    watch.start()
    try:
        yield watch
    finally:
        watch.stop()
        kube.close()


def allocate(kube: Kube, name: str, labels: dict[str, str], finalizers: list[str]) -> None:
    """Create claim ``name`` in the other namespace and write an allocation by ``DRIVER`` into its
    status, as an allocator that forgot (or did not forget) the finalizer would."""
    metadata = {"name": name, "namespace": OTHER, "labels": labels, "finalizers": finalizers}
    request = {"name": "req-0", "exactly": {"deviceClassName": "claim-watch-class"}}
    retrying(kube.create)(
        path(V1, "resourceclaims", namespace=OTHER),
        {
            "apiVersion": V1,
            "kind": "ResourceClaim",
            "metadata": metadata,
            "spec": {"devices": {"requests": [request]}},
        },
    )
    result = {"request": "req-0", "driver": DRIVER, "pool": "pool", "device": "device-00"}
    retrying(kube.patch)(
        path(V1, "resourceclaims", name, namespace=OTHER, subresource="status"),
        {"status": {"allocation": {"devices": {"results": [result]}}}},
    )


def remove(kube: Kube, *names: str) -> None:
    """Delete the claims that are there (a finalizer of ours taken off first)."""
    for name in names:
        claim = path(V1, "resourceclaims", name, namespace=OTHER)
        try:
            retrying(kube.patch)(claim, {"metadata": {"finalizers": None}})
        except NotFound:
            continue
        retrying(kube.delete)(claim, missing_ok=True)


def found(watch: ClaimWatch, what: str) -> list[tuple[str | None, str]]:
    """What the watch finds next (waited for), as (owner, message up to its details)."""
    findings: list[Finding] = eventually(watch.take, what=what, timeout=60, until=bool)
    return [(f.owner, f.message.split(" (")[0]) for f in findings]


def test_a_claim_of_another_namespace_allocated_without_finalizer_is_found_with_its_namespace(
    live: LiveCluster, watch: ClaimWatch
) -> None:
    assert watch.take() == []  # it lists (within its grace), and nothing is wrong yet
    try:
        # The protected claim goes first: by the time the other is found, it was seen too.
        allocate(live.kube, "protected", {SUBTEST_LABEL: "someone"}, [KEEP])
        allocate(live.kube, "unprotected", {SUBTEST_LABEL: "someone"}, [])
        assert found(watch, "the unprotected claim to be found") == [
            ("someone", f"ResourceClaim {OTHER}/unprotected allocated without any finalizer")
        ]
        watch.sweep()  # the sweep sees it too, but it is reported once
        assert watch.take() == []
    finally:
        remove(live.kube, "protected", "unprotected")


def test_the_watch_outlives_an_api_server_restart_without_a_finding(
    live: LiveCluster, watch: ClaimWatch
) -> None:
    assert watch.take() == []
    restart_component(live, "kube-apiserver", "claim-watch-real-apiserver-restart")
    live.kube.server_restarted()
    watch.sweep()  # the server answers again
    assert watch.take() == []  # the watch failed meanwhile, and recovered: no finding

    try:
        allocate(live.kube, "after-restart", {}, [])  # no label: owned by its driver
        assert found(watch, "the claim made after the restart to be found") == [
            ("someone", f"ResourceClaim {OTHER}/after-restart allocated without any finalizer")
        ]
    finally:
        remove(live.kube, "after-restart")
