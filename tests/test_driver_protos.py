"""The committed gRPC stubs are what the committed .proto files generate, and wire-exact."""

from __future__ import annotations

from e2e_dra.driver import _pb
from e2e_dra.driver.proto import generate


def test_committed_stubs_are_up_to_date(tmp_path):
    fresh_dir = tmp_path / "_pb"
    generate.generate(fresh_dir)

    fresh = {p.name: p.read_text() for p in fresh_dir.iterdir()}
    committed = {p.name: p.read_text() for p in generate.STUB_DIR.iterdir() if p.is_file()}
    stale = sorted(
        name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name)
    )
    assert not stale, f"stubs out of date: {stale}; run `{generate.COMMAND}`"


def test_services_have_the_upstream_method_paths():
    def methods(module, service):
        descriptor = module.DESCRIPTOR.services_by_name[service]
        return sorted(f"/{descriptor.full_name}/{m.name}" for m in descriptor.methods)

    assert methods(_pb.dra_v1_pb2, "DRAPlugin") == [
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
    ]
    assert methods(_pb.dra_v1beta1_pb2, "DRAPlugin") == [
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
    ]
    assert methods(_pb.pluginregistration_v1_pb2, "Registration") == [
        "/pluginregistration.Registration/GetInfo",
        "/pluginregistration.Registration/NotifyRegistrationStatus",
    ]
    for module, package in [
        (_pb.health_v1_pb2, "v1"),
        (_pb.health_v1beta1_pb2, "v1beta1"),
        (_pb.health_v1alpha1_pb2, "v1alpha1"),
    ]:
        assert methods(module, "DRAResourceHealth") == [
            f"/{package}.DRAResourceHealth/NodeWatchResources"
        ]


def test_field_numbers_match_upstream():
    from e2e_dra.driver._pb import dra_v1_pb2, health_v1_pb2, pluginregistration_v1_pb2

    def numbers(message):
        return {f.name: f.number for f in message.DESCRIPTOR.fields}

    assert numbers(dra_v1_pb2.Claim) == {"namespace": 1, "uid": 2, "name": 3}
    assert numbers(dra_v1_pb2.Device) == {
        "request_names": 1,
        "pool_name": 2,
        "device_name": 3,
        "cdi_device_ids": 4,
        "share_id": 5,  # upstream: optional string share_id = 5 (1.35 has it already)
    }
    assert numbers(dra_v1_pb2.NodePrepareResourceResponse) == {"devices": 1, "error": 2}
    assert numbers(pluginregistration_v1_pb2.PluginInfo) == {
        "type": 1,
        "name": 2,
        "endpoint": 3,
        "supported_versions": 4,
    }
    assert numbers(health_v1_pb2.DeviceHealth) == {
        "device": 1,
        "health": 2,
        "last_updated_time": 3,
        "health_check_timeout_seconds": 4,
        "message": 5,
    }
    # A known upstream encoding: Claim{namespace:"ns", uid:"u", name:"n"}.
    assert dra_v1_pb2.Claim(namespace="ns", uid="u", name="n").SerializeToString() == (
        b"\n\x02ns\x12\x01u\x1a\x01n"
    )
