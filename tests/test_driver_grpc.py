"""The driver's gRPC side, with a client acting as the kubelet over the real unix sockets.

Claims come from a ``get_claim`` function returning claim dicts shaped like the API's (test data;
the real lane in tests/real fetches them from a real API server).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from e2e_dra.driver import Driver, DriverError, _health, _rpc
from e2e_dra.driver._pb import (
    dra_v1_pb2,
    dra_v1beta1_pb2,
    health_v1_pb2,
    health_v1alpha1_pb2,
    pluginregistration_v1_pb2,
)
from e2e_dra.hostkit import poll
from e2e_dra.kube import NotFound

DRIVER = "test-driver.cdi.k8s.io"
NODE = "node-1"
VERSIONS = [dra_v1_pb2, dra_v1beta1_pb2]


def allocated_claim(
    name: str,
    uid: str,
    *,
    requests: tuple[str, ...] = ("my-request",),
    configs: list[dict] | None = None,
    driver: str = DRIVER,
) -> dict:
    """A ResourceClaim as the API returns it after the scheduler allocated it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"devices": {"requests": [{"name": r.split("/")[0]} for r in requests]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": r, "driver": driver, "pool": NODE, "device": f"device-{i:02d}"}
                        for i, r in enumerate(requests)
                    ],
                    "config": configs or [],
                }
            }
        },
    }


def opaque(parameters: object, source: str = "FromClaim", requests: list[str] | None = None):
    config = {"source": source, "opaque": {"driver": DRIVER, "parameters": parameters}}
    if requests is not None:
        config["requests"] = requests
    return config


class Claims(dict):
    """namespace/name -> claim dict, served by ``get``."""

    def get_claim(self, namespace: str, name: str) -> dict:
        try:
            return self[f"{namespace}/{name}"]
        except KeyError:
            raise NotFound(404, "NotFound", f'resourceclaims "{name}" not found') from None

    def add(self, claim: dict) -> dict:
        self[f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"] = claim
        return claim


@pytest.fixture
def root() -> Iterator[Path]:
    # unix socket paths are limited to 107 bytes: pytest's tmp_path can be too deep
    path = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def claims() -> Claims:
    return Claims()


def new_driver(root: Path, claims: Claims, **options: Any) -> Driver:
    """The test driver, unstarted, its sockets and CDI specs under ``root``."""
    return Driver(
        DRIVER,
        NODE,
        None,
        get_claim=claims.get_claim,
        kubelet_root=root / "kubelet",
        cdi_dir=root / "cdi",
        **options,
    )


@pytest.fixture
def driver(root: Path, claims: Claims) -> Iterator[Driver]:
    with new_driver(root, claims) as running:
        yield running


def channel(socket: Path) -> grpc.Channel:
    return grpc.insecure_channel(f"unix://{socket}")


def registration(driver: Driver):
    return _rpc.stub(channel(driver.registration_socket), pluginregistration_v1_pb2, "Registration")


def node_stub(driver: Driver, pb=dra_v1_pb2):
    return _rpc.stub(channel(driver.dra_socket), pb, "DRAPlugin")


def refs(pb, *claims: dict) -> list:
    return [
        pb.Claim(namespace=c["metadata"]["namespace"], name=c["metadata"]["name"], uid=uid)
        for c in claims
        for uid in [c["metadata"]["uid"]]
    ]


def cdi_env(path: Path) -> list[str]:
    spec = json.loads(path.read_text())
    return spec["devices"][0]["containerEdits"]["env"]


# --- registration -----------------------------------------------------------------------------


def test_get_info_names_the_dra_socket_and_the_short_service_names(driver: Driver):
    info = registration(driver).GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=5)

    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(driver.dra_socket)
    assert driver.registration_socket.name == f"{DRIVER}-reg.sock"
    assert driver.dra_socket.relative_to(driver.plugin_dir.parent) == Path(DRIVER, "dra.sock")
    assert list(info.supported_versions) == [
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1beta1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
    ]


def test_registration_accepted_is_recorded_and_awaited(driver: Driver):
    with pytest.raises(DriverError, match="did not register"):
        driver.wait_registered(timeout=0.1)

    registration(driver).NotifyRegistrationStatus(
        pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=True), timeout=5
    )

    driver.wait_registered(timeout=5)
    assert driver.calls.count("/NotifyRegistrationStatus") == 1
    (call,) = [c for c in driver.calls.records if c.method.endswith("NotifyRegistrationStatus")]
    assert call.method == "/pluginregistration.Registration/NotifyRegistrationStatus"
    assert call.error is None and call.request.plugin_registered


def test_registration_rejected_carries_the_kubelet_reason(driver: Driver, caplog):
    with pytest.raises(grpc.RpcError) as rejected:
        registration(driver).NotifyRegistrationStatus(
            pluginregistration_v1_pb2.RegistrationStatus(
                plugin_registered=False, error="no supported DRA service"
            ),
            timeout=5,
        )

    assert "failed registration process: no supported DRA service" in rejected.value.details()
    assert "no supported DRA service" in caplog.text
    with pytest.raises(DriverError, match="no supported DRA service"):
        driver.wait_registered(timeout=0.1)
    assert driver.calls.records[-1].error.startswith("failed registration process")


def test_injected_get_info_failure_and_recovery(driver: Driver):
    driver.set_failure("GetInfo", "simulated GetInfo failure")
    with pytest.raises(grpc.RpcError) as failed:
        registration(driver).GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=5)
    assert failed.value.code() == grpc.StatusCode.UNKNOWN
    assert failed.value.details() == "simulated GetInfo failure"

    driver.set_failure("GetInfo", None)
    assert registration(driver).GetInfo(pluginregistration_v1_pb2.InfoRequest()).name == DRIVER
    assert driver.calls.count("/GetInfo") == 2
    assert [c.error for c in driver.calls.records] == ["simulated GetInfo failure", None]


def test_failure_of_an_unknown_method_is_refused(driver: Driver):
    with pytest.raises(ValueError, match="NodePrepare"):
        driver.set_failure("NodePrepare", "x")


# --- prepare / unprepare ----------------------------------------------------------------------


@pytest.mark.parametrize("pb", VERSIONS, ids=["v1", "v1beta1"])
def test_prepare_writes_cdi_spec_and_unprepare_removes_it(driver, claims, pb):
    claim = claims.add(
        allocated_claim(
            "external-claimcore-dra",
            "uid-1",
            configs=[opaque({"x": "from-class"}, source="FromClass"), opaque({"a": "b"})],
        )
    )
    stub = node_stub(driver, pb)

    response = stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=refs(pb, claim)))

    result = response.claims["uid-1"]
    assert result.error == ""
    (device,) = result.devices
    assert list(device.request_names) == ["my-request"]
    assert (device.pool_name, device.device_name) == (NODE, "device-00")
    assert list(device.cdi_device_ids) == [f"{DRIVER}/test=claim-uid-1-my-request"]
    spec_file = driver.cdi_dir / f"{DRIVER}-uid-1-my-request.json"
    assert json.loads(spec_file.read_text()) == {
        "cdiVersion": "0.3.0",
        "kind": f"{DRIVER}/test",
        "devices": [
            {
                "name": "claim-uid-1-my-request",
                "containerEdits": {
                    "env": [
                        "admin_x=from-class",
                        "claim_external_claimcore_dra_my_request=true",
                        "user_a=b",
                    ]
                },
            }
        ],
    }
    assert [c.uid for c in driver.prepared_claims()] == ["uid-1"]

    # idempotent: the same answer, the spec file untouched
    mtime = spec_file.stat().st_mtime_ns
    again = stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=refs(pb, claim)))
    assert again == response
    assert spec_file.stat().st_mtime_ns == mtime

    unprepared = stub.NodeUnprepareResources(
        pb.NodeUnprepareResourcesRequest(claims=refs(pb, claim))
    )
    assert unprepared.claims["uid-1"].error == ""
    assert not spec_file.exists()
    assert driver.prepared_claims() == []

    # idempotent too: the kubelet may unprepare twice after a restart
    twice = stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(claims=refs(pb, claim)))
    assert "uid-1" in twice.claims and twice.claims["uid-1"].error == ""
    assert driver.calls.count("/NodePrepareResources") == 2
    assert driver.calls.count("/NodeUnprepareResources") == 2


def test_a_forgetful_restart_prepares_afresh_and_writes_the_lost_spec_again(driver, claims):
    """A reboot wipes /var/run/cdi; a driver that still remembers the claim answers the next
    prepare from memory (as upstream's test driver) and the spec stays lost, one that restarted
    without a checkpoint prepares afresh and writes it again."""
    claim = claims.add(allocated_claim("external-claim", "uid-r"))
    stub = node_stub(driver)
    request = dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
    first = stub.NodePrepareResources(request)
    (spec_file,) = driver.cdi_spec_files("uid-r")
    assert spec_file == driver.cdi_dir / f"{DRIVER}-uid-r-my-request.json"
    spec = spec_file.read_text()

    spec_file.unlink()
    assert stub.NodePrepareResources(request) == first
    assert driver.cdi_spec_files("uid-r") == []

    assert [ref.uid for ref in driver.forget_prepared_claims()] == ["uid-r"]
    assert driver.prepared_claims() == []
    assert stub.NodePrepareResources(request) == first
    assert driver.cdi_spec_files("uid-r") == [spec_file]
    assert spec_file.read_text() == spec
    assert [ref.uid for ref in driver.prepared_claims()] == ["uid-r"]
    assert driver.forget_prepared_claims() != [] and driver.forget_prepared_claims() == []


def test_configs_apply_per_request_and_later_ones_win(driver, claims):
    claim = claims.add(
        allocated_claim(
            "multi",
            "uid-m",
            requests=("gpu/small", "nic"),
            configs=[
                opaque({"a": "class"}, source="FromClass"),
                opaque({"a": "first", "b": "1"}, requests=["gpu"]),
                opaque({"a": "second"}, requests=["gpu"]),
                opaque({"n": "nic-only"}, requests=["nic"]),
                {
                    "source": "FromClaim",
                    "opaque": {"driver": "other.k8s.io", "parameters": {"z": "1"}},
                },
            ],
        )
    )

    response = node_stub(driver).NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
    )

    devices = response.claims["uid-m"].devices
    assert [list(d.request_names) for d in devices] == [["gpu"], ["nic"]]
    assert cdi_env(driver.cdi_dir / f"{DRIVER}-uid-m-gpu.json") == [
        "admin_a=class",
        "claim_multi_gpu=true",
        "user_a=second",
        "user_b=1",
    ]
    assert cdi_env(driver.cdi_dir / f"{DRIVER}-uid-m-nic.json") == [
        "admin_a=class",
        "claim_multi_nic=true",
        "user_n=nic-only",
    ]


def test_a_config_naming_a_subrequest_reaches_only_the_device_of_that_subrequest(driver, claims):
    """Config may name one subrequest (``"gpu/small"``): it reaches the device allocated for
    ``gpu/small`` and no other; an entry naming another subrequest of the same request
    (``gpu/large``, which an allocation may carry when written by hand) reaches none, even when
    it comes last and would win; one naming a subrequest and another request reaches only that
    request's device. The kubelet still gets the base request's name."""
    claim = claims.add(
        allocated_claim(
            "sub",
            "uid-s",
            requests=("gpu/small", "nic"),
            configs=[
                opaque({"all": "yes"}),
                opaque({"request": "gpu"}, requests=["gpu"]),
                opaque({"sub": "small"}, requests=["gpu/small"]),
                opaque({"sub": "large", "large": "yes"}, requests=["gpu/large"]),
                opaque({"request": "nic"}, requests=["nic"]),
                opaque({"both": "nic"}, requests=["gpu/large", "nic"]),
            ],
        )
    )

    response = node_stub(driver).NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
    )

    assert response.claims["uid-s"].error == ""
    devices = response.claims["uid-s"].devices
    assert [list(d.request_names) for d in devices] == [["gpu"], ["nic"]]
    assert cdi_env(driver.cdi_dir / f"{DRIVER}-uid-s-gpu.json") == [
        "claim_sub_gpu=true",
        "user_all=yes",
        "user_request=gpu",
        "user_sub=small",
    ]
    assert cdi_env(driver.cdi_dir / f"{DRIVER}-uid-s-nic.json") == [
        "claim_sub_nic=true",
        "user_all=yes",
        "user_both=nic",
        "user_request=nic",
    ]


def test_shares_of_one_device_are_prepared_per_claim_and_named_in_v1(driver, claims):
    """Two claims hold shares of one device (allowMultipleAllocations): each gets its own CDI
    device, and the v1 answer names its share as upstream's driver does (v1beta1 cannot)."""
    shared = []
    for name, uid, share in [
        ("a", "uid-a", "11111111-1111-4111-8111-111111111111"),
        ("b", "uid-b", "22222222-2222-4222-8222-222222222222"),
    ]:
        claim = allocated_claim(name, uid, configs=[opaque({"a": "b"})])
        claim["status"]["allocation"]["devices"]["results"][0]["shareID"] = share
        shared.append(claims.add(claim))

    v1 = node_stub(driver, dra_v1_pb2).NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, *shared))
    )
    beta = node_stub(driver, dra_v1beta1_pb2).NodePrepareResources(
        dra_v1beta1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1beta1_pb2, *shared))
    )

    for uid, share in [("uid-a", "11111111"), ("uid-b", "22222222")]:
        (device,) = v1.claims[uid].devices
        assert device.HasField("share_id") and device.share_id.startswith(share)
        assert (device.pool_name, device.device_name) == (NODE, "device-00")
        assert list(device.cdi_device_ids) == [f"{DRIVER}/test=claim-{uid}-my-request"]
        (old,) = beta.claims[uid].devices
        assert old.device_name == "device-00"
    unshared = claims.add(allocated_claim("c", "uid-c"))
    answer = node_stub(driver).NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, unshared))
    )
    assert not answer.claims["uid-c"].devices[0].HasField("share_id")


def test_every_claim_gets_its_own_answer(driver, claims):
    good = claims.add(allocated_claim("good", "uid-good", configs=[opaque({"a": "b"})]))
    unallocated = claims.add(allocated_claim("unallocated", "uid-unalloc"))
    unallocated["status"] = {}
    replaced = claims.add(allocated_claim("replaced", "uid-new"))
    bad_parameters = claims.add(allocated_claim("bad", "uid-bad", configs=[opaque(["a", "b"])]))
    foreign = claims.add(allocated_claim("foreign", "uid-foreign", driver="other.k8s.io"))
    request = dra_v1_pb2.NodePrepareResourcesRequest(
        claims=[
            *refs(dra_v1_pb2, good, unallocated, bad_parameters, foreign),
            dra_v1_pb2.Claim(namespace="default", name="replaced", uid="uid-old"),
            dra_v1_pb2.Claim(namespace="default", name="missing", uid="uid-missing"),
        ]
    )
    del replaced

    response = node_stub(driver).NodePrepareResources(request)

    errors = {uid: answer.error for uid, answer in response.claims.items()}
    assert errors["uid-good"] == ""
    assert errors["uid-unalloc"] == "claim default/unallocated not allocated"
    assert errors["uid-old"] == "claim default/replaced got replaced"
    assert errors["uid-missing"].startswith("retrieve claim default/missing:")
    assert "not found" in errors["uid-missing"]
    assert errors["uid-bad"].startswith("parameters in config #0: decoding user parameters")
    assert errors["uid-foreign"] == "" and not response.claims["uid-foreign"].devices
    assert len(response.claims["uid-good"].devices) == 1
    assert sorted(c.uid for c in driver.prepared_claims()) == ["uid-foreign", "uid-good"]


def test_malformed_claims_give_errors_not_a_crashed_server(driver, claims):
    broken = claims.add(allocated_claim("broken", "uid-broken"))
    broken["status"]["allocation"]["devices"]["results"] = [{"driver": DRIVER}]  # no request

    response = node_stub(driver).NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, broken))
    )

    assert "malformed" in response.claims["uid-broken"].error
    info = registration(driver).GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=5)
    assert info.name == DRIVER


def test_injected_prepare_failure_fails_the_whole_call(driver, claims):
    claim = claims.add(allocated_claim("c", "uid-c", configs=[opaque({"a": "b"})]))
    driver.set_failure("NodePrepareResources", "simulated PrepareResources failure")

    with pytest.raises(grpc.RpcError) as failed:
        node_stub(driver).NodePrepareResources(
            dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
        )

    assert failed.value.details() == "simulated PrepareResources failure"
    assert driver.prepared_claims() == []
    assert not list(driver.cdi_dir.glob("*.json"))
    assert driver.calls.records[-1].error == "simulated PrepareResources failure"


def test_a_claim_made_to_fail_fails_alone_until_let_through(driver, claims):
    failing = claims.add(allocated_claim("failing", "uid-failing"))
    other = claims.add(allocated_claim("other", "uid-other"))
    request = dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, failing, other))

    with driver.fail_prepare("failing"):
        first = node_stub(driver).NodePrepareResources(request)
    second = node_stub(driver).NodePrepareResources(request)

    assert first.claims["uid-failing"].error == (
        "claim default/failing: failure injected by the test"
    )
    assert not first.claims["uid-failing"].devices
    assert first.claims["uid-other"].error == "" and len(first.claims["uid-other"].devices) == 1
    assert {uid: answer.error for uid, answer in second.claims.items()} == {
        "uid-failing": "",
        "uid-other": "",
    }
    assert sorted(c.uid for c in driver.prepared_claims()) == ["uid-failing", "uid-other"]


def test_blocked_prepare_waits_until_released(driver, claims):
    claim = claims.add(allocated_claim("slow", "uid-slow", configs=[opaque({"a": "b"})]))
    answers: list = []

    with driver.block_prepare():
        caller = threading.Thread(
            target=lambda: answers.append(
                node_stub(driver).NodePrepareResources(
                    dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim)),
                    timeout=10,
                )
            )
        )
        caller.start()
        time.sleep(0.5)
        assert answers == [] and caller.is_alive()
        assert driver.calls.count("/NodePrepareResources") == 1
        assert driver.calls.records[-1].done is False
    caller.join(timeout=10)

    assert answers[0].claims["uid-slow"].error == ""
    assert [c.name for c in driver.prepared_claims()] == ["slow"]


def test_a_call_waiting_on_a_block_ends_when_the_driver_stops(root: Path, claims: Claims):
    """A subtest stopped halfway never lifts its block; the handler thread must not wait on, or
    the process cannot exit (the gRPC pool's threads are joined at exit)."""
    claim = claims.add(allocated_claim("stuck", "uid-stuck"))
    driver = new_driver(root, claims)
    driver.start()
    blocked = driver.block_prepare()
    blocked.__enter__()  # never left: as a run stopped by SIGTERM leaves it
    request = dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
    errors: list[grpc.StatusCode] = []

    def call() -> None:
        try:
            node_stub(driver).NodePrepareResources(request, timeout=30)
        except grpc.RpcError as exc:
            errors.append(exc.code())

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    try:
        poll(lambda: driver.calls.count("/NodePrepareResources") == 1, timeout=10, interval=0.05)
    finally:
        started = time.monotonic()
        driver.stop()
    poll(lambda: driver.calls.records[-1].done, timeout=5, interval=0.05)
    assert time.monotonic() - started < 5
    assert "stopped while NodePrepareResources waited" in str(driver.calls.records[-1].error)
    caller.join(timeout=5)
    assert errors and errors[0] != grpc.StatusCode.DEADLINE_EXCEEDED


def test_an_answer_nobody_waits_for_any_more_is_recorded_as_not_seen(driver, claims):
    """A kubelet whose deadline passed (or that restarted) never saw the prepare succeed."""
    from e2e_dra.driver._calls import CLIENT_GONE

    claim = claims.add(allocated_claim("late", "uid-late"))
    request = dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
    with driver.block_prepare(), pytest.raises(grpc.RpcError) as late:
        node_stub(driver).NodePrepareResources(request, timeout=0.5)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    poll(lambda: driver.calls.records[-1].done, timeout=5, interval=0.05)
    assert driver.calls.records[-1].error == CLIENT_GONE
    # The driver did prepare it: the retry gets the same answer, and this one is seen.
    answer = node_stub(driver).NodePrepareResources(request, timeout=10)
    assert answer.claims["uid-late"].error == ""
    assert [(c.done, c.error) for c in driver.calls.records] == [(True, CLIENT_GONE), (True, None)]


def test_blocked_unprepare_waits_until_released_and_keeps_the_claim_meanwhile(driver, claims):
    claim = claims.add(allocated_claim("held", "uid-held", configs=[opaque({"a": "b"})]))
    stub = node_stub(driver)
    stub.NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim)), timeout=10
    )
    (spec_file,) = driver.cdi_spec_files("uid-held")
    answers: list = []

    with driver.block_unprepare():
        caller = threading.Thread(
            target=lambda: answers.append(
                stub.NodeUnprepareResources(
                    dra_v1_pb2.NodeUnprepareResourcesRequest(claims=refs(dra_v1_pb2, claim)),
                    timeout=10,
                )
            )
        )
        caller.start()
        time.sleep(0.5)
        assert answers == [] and caller.is_alive()
        assert driver.calls.count("/NodeUnprepareResources") == 1
        assert driver.calls.records[-1].done is False
        # Nothing is removed while the call waits.
        assert [c.uid for c in driver.prepared_claims()] == ["uid-held"]
        assert driver.cdi_spec_files("uid-held") == [spec_file]
    caller.join(timeout=10)

    assert answers[0].claims["uid-held"].error == ""
    assert driver.prepared_claims() == [] and driver.cdi_spec_files("uid-held") == []
    assert driver.calls.records[-1].done and driver.calls.records[-1].error is None


def test_block_unprepare_leaves_prepare_alone(driver, claims):
    """The two blocks are apart: with no unprepare waiting, a prepare goes through."""
    claim = claims.add(allocated_claim("free", "uid-free"))
    with driver.block_unprepare():
        answer = node_stub(driver).NodePrepareResources(
            dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim)), timeout=5
        )
    assert answer.claims["uid-free"].error == ""


def test_an_unprepare_its_kubelet_left_still_unprepares_and_the_retry_is_seen(driver, claims):
    """A kubelet that restarts under a waiting unprepare never sees it end: the call is recorded
    as not seen, the driver unprepares all the same, and the next kubelet's call succeeds."""
    from e2e_dra.driver._calls import CLIENT_GONE

    claim = claims.add(allocated_claim("left", "uid-left"))
    stub = node_stub(driver)
    stub.NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim)), timeout=10
    )
    request = dra_v1_pb2.NodeUnprepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
    with driver.block_unprepare(), pytest.raises(grpc.RpcError) as late:
        stub.NodeUnprepareResources(request, timeout=0.5)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    poll(lambda: driver.calls.records[-1].done, timeout=5, interval=0.05)
    assert driver.calls.records[-1].error == CLIENT_GONE
    assert driver.prepared_claims() == [] and driver.cdi_spec_files("uid-left") == []

    answer = stub.NodeUnprepareResources(request, timeout=10)
    assert answer.claims["uid-left"].error == ""
    unprepares = [c for c in driver.calls.records if c.method.endswith("NodeUnprepareResources")]
    assert [(c.done, c.error) for c in unprepares] == [(True, CLIENT_GONE), (True, None)]


# --- health -----------------------------------------------------------------------------------


def test_a_driver_offers_only_the_health_versions_it_is_given(root: Path, claims: Claims):
    """As one built on an older kubelet-plugin library: v1alpha1 health alone, said at
    registration and served, the newer versions unknown to its socket."""
    with new_driver(root, claims, health=("v1alpha1",)) as older:
        info = registration(older).GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=5)
        assert list(info.supported_versions) == [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1alpha1.DRAResourceHealth",
        ]
        older.set_health(NODE, "device-01", "Healthy")
        request = health_v1alpha1_pb2.NodeWatchResourcesRequest()
        served = _rpc.stub(channel(older.dra_socket), health_v1alpha1_pb2, "DRAResourceHealth")
        assert next(iter(served.NodeWatchResources(request, timeout=10))).devices
        newer = _rpc.stub(channel(older.dra_socket), health_v1_pb2, "DRAResourceHealth")
        with pytest.raises(grpc.RpcError) as refused:
            next(
                iter(newer.NodeWatchResources(health_v1_pb2.NodeWatchResourcesRequest(), timeout=5))
            )
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(DriverError, match="no DRAResourceHealth"):
        new_driver(root, claims, health=("v2",))


@pytest.mark.parametrize("pb", [health_v1_pb2, health_v1alpha1_pb2], ids=["v1", "v1alpha1"])
def test_health_stream_sends_changes_at_once(driver, pb):
    driver.set_health(NODE, "device-01", "Healthy")
    health = _rpc.stub(channel(driver.dra_socket), pb, "DRAResourceHealth")
    stream = health.NodeWatchResources(pb.NodeWatchResourcesRequest(), timeout=10)

    first = next(stream)
    assert [(d.device.device_name, d.health) for d in first.devices] == [("device-01", pb.HEALTHY)]

    started = time.monotonic()
    driver.set_health(NODE, "device-00", "Unhealthy", "fan stuck")
    second = next(stream)
    assert time.monotonic() - started < 1.5  # not the 2 s resend
    assert [(d.device.device_name, d.health, d.message) for d in second.devices] == [
        ("device-00", pb.UNHEALTHY, "fan stuck"),
        ("device-01", pb.HEALTHY, ""),
    ]
    assert abs(second.devices[0].last_updated_time - time.time()) < 5
    stream.cancel()


@pytest.mark.parametrize("pb", [health_v1_pb2, health_v1alpha1_pb2], ids=["v1", "v1alpha1"])
def test_silenced_device_is_sent_once_with_its_timeout_then_left_out(driver, pb, monkeypatch):
    # What resource-health relies on: the kubelet learns the device's timeout from one last
    # report, then the stream goes on without the device until the driver reports it again.
    monkeypatch.setattr(_health, "RESEND_PERIOD", 0.1)
    driver.set_health(NODE, "device-00", "Healthy")
    driver.set_health(NODE, "device-01", "Unhealthy", "fan stuck")
    health = _rpc.stub(channel(driver.dra_socket), pb, "DRAResourceHealth")
    stream = health.NodeWatchResources(pb.NodeWatchResourcesRequest(), timeout=10)
    healthy = ("device-00", pb.HEALTHY, "", 0)

    seen = _reports(stream)
    assert seen == [healthy, ("device-01", pb.UNHEALTHY, "fan stuck", 0)]
    driver.silence_health(NODE, "device-01", 5)
    last = _reports(stream, after=seen)
    assert last == [healthy, ("device-01", pb.UNHEALTHY, "fan stuck", 5)]
    # Silent from then on, re-sends included; the stream itself goes on.
    assert [_reports(stream) for _ in range(5)] == [[healthy]] * 5
    # A stream opened during the silence learns the timeout too, once.
    late = health.NodeWatchResources(pb.NodeWatchResourcesRequest(), timeout=10)
    assert [_reports(late) for _ in range(3)] == [last, [healthy], [healthy]]
    late.cancel()

    driver.set_health(NODE, "device-01", "Healthy")
    back = _reports(stream, after=[healthy])
    assert back == [healthy, ("device-01", pb.HEALTHY, "", 0)]
    # Silenced again: one more last report, with the new timeout.
    driver.silence_health(NODE, "device-01", 3)
    assert _reports(stream, after=back) == [healthy, ("device-01", pb.HEALTHY, "", 3)]
    assert _reports(stream) == [healthy]
    stream.cancel()


def _reports(stream, after: list[tuple] | None = None) -> list[tuple]:
    """(device, health, message, timeout) of the stream's next list that differs from ``after``
    (re-sends of it may be waiting in the stream)."""
    for response in stream:
        reports = [
            (d.device.device_name, d.health, d.message, d.health_check_timeout_seconds)
            for d in response.devices
        ]
        if reports != after:
            return reports
    raise AssertionError("the health stream ended")


def test_unknown_health_value_is_refused(driver):
    with pytest.raises(ValueError, match="Sick"):
        driver.set_health(NODE, "device-00", "Sick")


def test_silence_needs_a_reported_device_and_a_whole_timeout(driver):
    with pytest.raises(ValueError, match="never reported"):
        driver.silence_health(NODE, "device-00", 5)
    driver.set_health(NODE, "device-00", "Healthy")
    for timeout in (-1, 2.5, True):
        with pytest.raises(ValueError, match="whole number"):
            driver.silence_health(NODE, "device-00", timeout)


# --- lifecycle --------------------------------------------------------------------------------


def test_stop_removes_the_sockets_and_replaces_stale_ones(root, claims):
    kubelet = root / "kubelet"
    stale = kubelet / "plugins_registry" / f"{DRIVER}-reg.sock"
    stale.parent.mkdir(parents=True)
    stale.write_text("left over by a crashed run")
    driver = Driver(
        DRIVER, NODE, None, get_claim=claims.get_claim, kubelet_root=kubelet, cdi_dir=root / "cdi"
    )

    driver.start()
    assert stale.is_socket() and driver.dra_socket.is_socket()
    assert registration(driver).GetInfo(pluginregistration_v1_pb2.InfoRequest()).name == DRIVER
    driver.stop()

    assert not stale.exists() and not driver.dra_socket.exists()


def _register(driver: Driver) -> None:
    """What the kubelet's plugin watcher does once the registration socket appears."""
    info = registration(driver).GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=5)
    assert info.endpoint == str(driver.dra_socket)
    registration(driver).NotifyRegistrationStatus(
        pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=True), timeout=5
    )


@pytest.mark.parametrize("pb", [health_v1_pb2, health_v1alpha1_pb2], ids=["v1", "v1alpha1"])
def test_an_unregistered_driver_ends_its_health_streams_and_serves_again_as_it_was(
    driver, claims, pb
):
    """What resource-health's stopped plugin relies on: the kubelet's stream ends (so the
    kubelet forgets the health it reported) and both sockets go (so it unregisters the driver);
    served again, the driver waits for a new registration, and a new stream reports the devices
    as the driver last knew them. What the test process keeps stays: prepared claims, calls."""
    claim = claims.add(allocated_claim("kept", "uid-kept"))
    request = dra_v1_pb2.NodePrepareResourcesRequest(claims=refs(dra_v1_pb2, claim))
    assert node_stub(driver).NodePrepareResources(request, timeout=10).claims["uid-kept"]
    _register(driver)
    driver.wait_registered(timeout=5)
    driver.set_health(NODE, "device-00", "Unhealthy", "fan stuck")
    health = _rpc.stub(channel(driver.dra_socket), pb, "DRAResourceHealth")
    stream = health.NodeWatchResources(pb.NodeWatchResourcesRequest(), timeout=30)
    unhealthy = [("device-00", pb.UNHEALTHY, "fan stuck", 0)]
    assert _reports(stream) == unhealthy

    started = time.monotonic()
    driver.unregister()
    list(stream)  # what was on its way, then the end (not the call's 30 s deadline)
    assert time.monotonic() - started < 5
    assert not driver.serving
    assert not driver.registration_socket.exists() and not driver.dra_socket.exists()
    watches = [c for c in driver.calls.records if c.method.endswith("NodeWatchResources")]
    assert [(c.done, c.error) for c in watches] == [(True, None)]
    with pytest.raises(DriverError, match="did not register"):
        driver.wait_registered(timeout=0.1)  # that registration ended with the sockets
    with pytest.raises(DriverError, match="not serving"):
        driver.unregister()

    driver.register()
    assert driver.serving and driver.registration_socket.is_socket()
    with pytest.raises(DriverError, match="already serving"):
        driver.register()
    with pytest.raises(DriverError, match="did not register"):
        driver.wait_registered(timeout=0.1)
    _register(driver)
    driver.wait_registered(timeout=5)
    health = _rpc.stub(channel(driver.dra_socket), pb, "DRAResourceHealth")
    again = health.NodeWatchResources(pb.NodeWatchResourcesRequest(), timeout=30)
    assert _reports(again) == unhealthy
    driver.set_health(NODE, "device-00", "Healthy")
    assert _reports(again, after=unhealthy) == [("device-00", pb.HEALTHY, "", 0)]
    assert [c.name for c in driver.prepared_claims()] == ["kept"]
    methods = [c.method.rsplit("/", 1)[-1] for c in driver.calls.records]
    assert methods == [
        "NodePrepareResources",
        *("GetInfo", "NotifyRegistrationStatus", "NodeWatchResources"),
        *("GetInfo", "NotifyRegistrationStatus", "NodeWatchResources"),
    ]
    again.cancel()


def test_an_unregistered_driver_is_served_again_when_what_it_waited_for_fails(
    driver: Driver, root: Path, claims: Claims
):
    """A subtest whose check fails while the driver is away must not leave it away: its pod's
    claim can only be unprepared, and the pod torn down, through a registered driver."""
    with pytest.raises(AssertionError, match="never Unknown") as failed, driver.unregistered():
        assert not driver.serving
        raise AssertionError("never Unknown")
    assert driver.serving and driver.dra_socket.is_socket()
    assert not getattr(failed.value, "__notes__", None)

    # A driver stopped meanwhile is not served again: said along with what failed, if anything.
    with pytest.raises(AssertionError, match="never Unknown") as failed, driver.unregistered():
        driver.stop()
        raise AssertionError("never Unknown")
    assert failed.value.__notes__ == [
        f"e2e-dra: serving driver {DRIVER} again also failed: driver {DRIVER}: stopped; "
        "a stopped driver is not served again"
    ]
    # Nothing failed inside: then the failure to serve again is the error.
    other = new_driver(root, claims)  # the same sockets: the first driver is stopped
    other.start()
    with pytest.raises(DriverError, match="stopped"), other.unregistered():
        other.stop()


def test_a_stopped_driver_is_not_served_again(root: Path, claims: Claims):
    driver = new_driver(root, claims)
    driver.start()
    driver.stop()
    with pytest.raises(DriverError, match="not serving"):
        driver.unregister()
    with pytest.raises(DriverError, match="stopped"):
        driver.register()
    assert not driver.dra_socket.exists()


def test_a_driver_without_api_client_needs_a_claim_source(root):
    with pytest.raises(DriverError, match="get_claim"):
        Driver(DRIVER, NODE, None, kubelet_root=root)


def test_an_interrupted_start_raises_the_interrupt_not_the_failed_stop(root: Path, claims: Claims):
    """A SIGTERM that stops the cluster while a driver starts: the start's cleanup then fails too
    (the API server is gone), and the interrupt must still be what the caller sees, so the run is
    reported interrupted rather than failed."""

    class Interrupted(Driver):
        def _start_api_side(self) -> None:
            raise KeyboardInterrupt

        def stop(self) -> None:
            super().stop()
            raise RuntimeError("DELETE ...: connection refused")

    driver = Interrupted(
        DRIVER, NODE, None, get_claim=claims.get_claim, kubelet_root=root / "k", cdi_dir=root / "c"
    )
    with pytest.raises(KeyboardInterrupt) as raised:
        driver.start()
    assert raised.value.__notes__ == [
        "e2e-dra: stopping the half-started driver also failed: DELETE ...: connection refused"
    ]


@pytest.mark.parametrize("pb", [health_v1_pb2, health_v1alpha1_pb2], ids=["v1", "v1alpha1"])
def test_a_stream_whose_client_went_away_is_recorded_as_ended(driver, pb):
    """What tells resource-health which kubelet's stream is open: a stream ends in the call log
    when its client goes away, whether or not gRPC resumes its handler."""
    from e2e_dra.driver._calls import CLIENT_GONE

    driver.set_health(NODE, "device-00", "Healthy")
    health = _rpc.stub(channel(driver.dra_socket), pb, "DRAResourceHealth")
    stream = health.NodeWatchResources(pb.NodeWatchResourcesRequest(), timeout=30)
    next(stream)
    (call,) = [c for c in driver.calls.records if c.method.endswith("NodeWatchResources")]
    assert not call.done
    stream.cancel()
    poll(lambda: call.done, timeout=5, interval=0.05)
    assert call.error == CLIENT_GONE
