"""gRPC services and client stubs built from the service descriptors of our .proto files.

protoc's ``*_pb2_grpc.py`` output repeats the same registration and stub code for every service
and version; the ``*_pb2`` modules already describe each service (package, name, methods, message
types, streaming). Building handlers and stubs from those descriptors keeps the wire names exactly
as the .proto files say, in one place.
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message_factory import GetMessageClass


def service(module: ModuleType, name: str) -> ServiceDescriptor:
    return module.DESCRIPTOR.services_by_name[name]


def short_name(module: ModuleType, name: str) -> str:
    """What the kubelet's registration expects: ``v1.DRAPlugin``, ``v1alpha1.DRAResourceHealth``
    (the last part of the proto package, then the service)."""
    descriptor = service(module, name)
    return f"{descriptor.file.package.rsplit('.', 1)[-1]}.{descriptor.name}"


def handler(module: ModuleType, name: str, servicer: Any) -> grpc.GenericRpcHandler:
    """Serve service ``name`` of ``module`` with ``servicer``'s methods of the same names."""
    descriptor = service(module, name)
    methods = {}
    for method in descriptor.methods:
        request = GetMessageClass(method.input_type)
        response = GetMessageClass(method.output_type)
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        methods[method.name] = make(
            getattr(servicer, method.name),
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(descriptor.full_name, methods)


def stub(channel: grpc.Channel, module: ModuleType, name: str) -> SimpleNamespace:
    """A client of service ``name``: one callable per method, as protoc's stubs have."""
    descriptor = service(module, name)
    calls = {}
    for method in descriptor.methods:
        call = channel.unary_stream if method.server_streaming else channel.unary_unary
        calls[method.name] = call(
            f"/{descriptor.full_name}/{method.name}",
            request_serializer=GetMessageClass(method.input_type).SerializeToString,
            response_deserializer=GetMessageClass(method.output_type).FromString,
        )
    return SimpleNamespace(**calls)
