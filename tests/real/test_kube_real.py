"""e2e_dra.kube against a real API server: the behaviour the suite and the driver rely on.

One cluster of the current release for the module; the apiserver-restart test runs last because
it leaves the module's first client with connections to a server that is gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from conftest import LiveCluster, restart_component

from e2e_dra.kube import Conflict, Kube, KubeError, NotFound, path, retrying

pytestmark = pytest.mark.real

NAMESPACE = "e2e-dra-kube"
CONFIG_MAPS = path("v1", "configmaps", namespace=NAMESPACE)
SELF_REVIEWS = path("authentication.k8s.io/v1", "selfsubjectreviews")
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


@pytest.fixture(scope="module")
def live(start_cluster, tmp_path_factory) -> Iterator[LiveCluster]:
    with start_cluster(tmp_path_factory.mktemp("kube-real-logs"), state="kube-real") as running:
        running.kube.create(
            path("v1", "namespaces"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        yield running


@pytest.fixture
def kube(live: LiveCluster) -> Kube:
    return live.kube


def config_map(name: str, data: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def who_am_i(kube: Kube) -> dict:
    """The identity the server sees for ``kube``'s requests."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    return kube.create(SELF_REVIEWS, review)["status"]["userInfo"]


def test_list_items_carry_kind_and_api_version(kube: Kube) -> None:
    raw = kube.get(path("v1", "nodes"))
    assert raw["items"] and "kind" not in raw["items"][0]  # what the server leaves out
    nodes = kube.list(path("v1", "nodes"))
    assert nodes and {(n["kind"], n["apiVersion"]) for n in nodes} == {("Node", "v1")}
    roles = kube.list(path("rbac.authorization.k8s.io/v1", "clusterroles"))
    assert roles
    assert {(r["kind"], r["apiVersion"]) for r in roles} == {
        ("ClusterRole", "rbac.authorization.k8s.io/v1")
    }


def test_get_of_a_missing_object_raises_not_found(kube: Kube) -> None:
    with pytest.raises(NotFound) as raised:
        kube.get(f"{CONFIG_MAPS}/absent")
    assert (raised.value.status, raised.value.reason) == (404, "NotFound")
    assert "absent" in raised.value.message


def test_delete_of_a_missing_object_fails_unless_missing_is_ok(kube: Kube) -> None:
    with pytest.raises(NotFound):
        kube.delete(f"{CONFIG_MAPS}/absent")
    assert kube.delete(f"{CONFIG_MAPS}/absent", missing_ok=True) is None
    kube.create(CONFIG_MAPS, config_map("short-lived", {"a": "1"}))
    assert kube.delete(f"{CONFIG_MAPS}/short-lived") is not None
    with pytest.raises(NotFound):
        kube.get(f"{CONFIG_MAPS}/short-lived")


def test_create_of_an_existing_object_and_a_stale_update_raise_conflict(kube: Kube) -> None:
    created = kube.create(CONFIG_MAPS, config_map("twice", {"a": "1"}))
    with pytest.raises(Conflict) as raised:
        kube.create(CONFIG_MAPS, config_map("twice", {"a": "2"}))
    assert (raised.value.status, raised.value.reason) == (409, "AlreadyExists")

    kube.update(f"{CONFIG_MAPS}/twice", {**created, "data": {"a": "3"}})
    with pytest.raises(Conflict) as raised:  # still carries the first resourceVersion
        kube.update(f"{CONFIG_MAPS}/twice", {**created, "data": {"a": "4"}})
    assert (raised.value.status, raised.value.reason) == (409, "Conflict")
    assert kube.get(f"{CONFIG_MAPS}/twice")["data"] == {"a": "3"}


def test_merge_and_json_patches(kube: Kube) -> None:
    kube.create(CONFIG_MAPS, config_map("patched", {"a": "1", "b": "2"}))
    merged = kube.patch(f"{CONFIG_MAPS}/patched", {"data": {"b": None, "c": "3"}})
    assert merged["data"] == {"a": "1", "c": "3"}
    operations = [{"op": "replace", "path": "/data/a", "value": "9"}]
    patched = kube.patch(f"{CONFIG_MAPS}/patched", operations, kind="json")
    assert patched["data"] == {"a": "9", "c": "3"}


def test_server_side_apply_records_the_manager_and_force_takes_over(kube: Kube) -> None:
    name = f"{CONFIG_MAPS}/applied"
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied", "namespace": NAMESPACE},
        "data": {"owned": "first"},
    }
    applied = kube.patch(name, body, kind="apply", fieldManager="e2e-dra-first")
    assert applied["data"] == {"owned": "first"}
    managers = {(m["manager"], m["operation"]) for m in applied["metadata"]["managedFields"]}
    assert managers == {("e2e-dra-first", "Apply")}

    taking = {**body, "data": {"owned": "second"}}
    with pytest.raises(Conflict) as raised:
        kube.patch(name, taking, kind="apply", fieldManager="e2e-dra-second")
    assert "e2e-dra-first" in raised.value.message
    forced = kube.patch(name, taking, kind="apply", fieldManager="e2e-dra-second", force=True)
    assert forced["data"] == {"owned": "second"}
    assert [m["manager"] for m in forced["metadata"]["managedFields"]] == ["e2e-dra-second"]


def test_watch_yields_added_modified_deleted(kube: Kube) -> None:
    since = kube.get(CONFIG_MAPS)["metadata"]["resourceVersion"]
    kube.create(CONFIG_MAPS, config_map("watched", {"n": "1"}))
    kube.patch(f"{CONFIG_MAPS}/watched", {"data": {"n": "2"}})
    seen: list[tuple[str, dict | None]] = []
    stream = kube.watch(
        CONFIG_MAPS,
        resource_version=since,
        timeout_seconds=30,
        fieldSelector="metadata.name=watched",
    )
    with contextlib.closing(stream):
        for event in stream:
            if event["type"] == "BOOKMARK":
                continue
            seen.append((event["type"], event["object"].get("data")))
            if event["type"] == "MODIFIED":  # delete while the watch is open: a live event
                kube.delete(f"{CONFIG_MAPS}/watched")
            if event["type"] == "DELETED":
                break
    assert seen == [("ADDED", {"n": "1"}), ("MODIFIED", {"n": "2"}), ("DELETED", {"n": "2"})]


def test_served_answers_for_real_and_made_up_group_versions(kube: Kube) -> None:
    assert kube.served("resource.k8s.io/v1") is True
    assert kube.served("v1") is True
    assert kube.served("made-up.e2e-dra.k8s.io/v1") is False
    assert kube.served("resource.k8s.io/v0alpha0") is False


def test_impersonation_is_what_the_server_sees_and_authorizes(kube: Kube) -> None:
    assert who_am_i(kube)["username"] != "system:node:127.0.0.1"

    node = kube.impersonating(
        "system:node:127.0.0.1", group="system:nodes", extra={NODE_NAME_EXTRA: "127.0.0.1"}
    )
    seen = who_am_i(node)
    assert seen["username"] == "system:node:127.0.0.1"
    assert "system:nodes" in seen["groups"]
    assert seen["extra"] == {NODE_NAME_EXTRA: ["127.0.0.1"]}
    with pytest.raises(KubeError) as raised:  # the Node authorizer keeps nodes out of secrets
        node.list(path("v1", "secrets", namespace=NAMESPACE))
    assert raised.value.status == 403

    account = kube.impersonating(f"system:serviceaccount:{NAMESPACE}:driver")
    seen = who_am_i(account)
    assert seen["username"] == f"system:serviceaccount:{NAMESPACE}:driver"
    assert {"system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"} <= set(seen["groups"])
    with pytest.raises(KubeError) as raised:  # no RBAC binding for it
        account.list(CONFIG_MAPS)
    assert raised.value.status == 403


def test_fresh_clients_work_after_the_apiserver_restarted(live: LiveCluster, kube: Kube) -> None:
    kube.create(CONFIG_MAPS, config_map("survivor", {"kept": "yes"}))
    node = kube.impersonating("system:node:127.0.0.1", group="system:nodes")
    restart_component(live, "kube-apiserver", "kube-real-apiserver-restart")

    fresh = kube.fresh()
    survivor = retrying(fresh.get)(f"{CONFIG_MAPS}/survivor")
    assert survivor["data"] == {"kept": "yes"}
    assert retrying(who_am_i)(node.fresh())["username"] == "system:node:127.0.0.1"
