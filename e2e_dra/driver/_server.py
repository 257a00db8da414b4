"""gRPC servers on unix sockets, the way the kubelet expects to find them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path

import grpc


def serve_unix(
    socket: Path,
    services: Sequence[grpc.GenericRpcHandler],
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    *,
    workers: int = 8,
    thread_name: str | None = None,
) -> grpc.Server:
    """A started server on ``socket``; a stale socket file from a crashed run is replaced."""
    socket.parent.mkdir(parents=True, exist_ok=True)
    remove_socket(socket)
    server = grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=thread_name or socket.stem
        ),
        interceptors=list(interceptors),
        options=[("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers(tuple(services))
    if server.add_insecure_port(f"unix://{socket}") == 0:
        raise OSError(f"cannot listen on {socket}")
    server.start()
    os.chmod(socket, 0o660)  # the kubelet runs as root; nobody else needs it
    return server


def stop_server(server: grpc.Server, socket: Path, grace: float = 1.0) -> None:
    server.stop(grace).wait()
    remove_socket(socket)


def remove_socket(socket: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        socket.unlink()
