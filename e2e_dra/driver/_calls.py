"""Every gRPC call the kubelet makes to the driver, recorded, and failures injected on demand.

Subtests assert on what the kubelet did (was the driver registered? how often was a claim
prepared?) and provoke failures the kubelet must survive; both happen here, in one server
interceptor, so the services themselves stay free of test plumbing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

log = logging.getLogger(__name__)

# The short method names a failure can be injected for.
FAULTABLE_METHODS = (
    "NodePrepareResources",
    "NodeUnprepareResources",
    "GetInfo",
    "NotifyRegistrationStatus",
)


CLIENT_GONE = "the client went away before the answer"


class GRPCFailure(Exception):
    """Raised by a service to answer with a gRPC error status instead of a response."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN):
        super().__init__(message)
        self.code = code


@dataclass
class GRPCCall:
    """One call: ``method`` is the full path, e.g. ``/pluginregistration.Registration/GetInfo``.

    ``response`` is None while the call runs and for streams; ``error`` is None on success. A
    call whose client went away before the answer (the kubelet's deadline passed, or it
    restarted) has ``error`` CLIENT_GONE: the kubelet never saw it succeed.
    """

    method: str
    request: Any
    response: Any = None
    error: str | None = None
    done: bool = False


class CallLog:
    """Recorded calls and failures to inject; thread-safe, shared by all servers of a driver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[GRPCCall] = []
        self._failures: dict[str, str] = {}

    @property
    def records(self) -> list[GRPCCall]:
        """A snapshot, oldest first."""
        with self._lock:
            return list(self._records)

    def count(self, method_suffix: str) -> int:
        return sum(1 for call in self.records if call.method.endswith(method_suffix))

    def succeeded(self, method_suffix: str) -> bool:
        return any(
            call.method.endswith(method_suffix) and call.done and call.error is None
            for call in self.records
        )

    def set_failure(self, method: str, error: str | None) -> None:
        """Make ``method`` (a short name from FAULTABLE_METHODS) fail with ``error``; None heals."""
        if method not in FAULTABLE_METHODS:
            raise ValueError(
                f"cannot inject a failure into {method!r}; use one of {FAULTABLE_METHODS}"
            )
        with self._lock:
            if error is None:
                self._failures.pop(method, None)
            else:
                self._failures[method] = error

    def interceptor(self) -> grpc.ServerInterceptor:
        return _Recorder(self)

    # --- used by the interceptor ----------------------------------------------------------------

    def _begin(self, method: str, request: Any) -> GRPCCall:
        call = GRPCCall(method, request)
        with self._lock:
            self._records.append(call)
        return call

    def _raise_injected(self, method: str) -> None:
        with self._lock:
            failure = self._failures.get(method.rsplit("/", 1)[-1])
        if failure is not None:
            raise GRPCFailure(failure)

    def _end(self, call: GRPCCall, response: Any = None, error: str | None = None) -> None:
        with self._lock:
            call.response, call.error, call.done = response, error, True

    def _end_once(self, call: GRPCCall, error: str | None = None) -> None:
        """End ``call`` unless it ended already (a stream: by its handler, or by the RPC's end)."""
        with self._lock:
            if not call.done:
                call.error, call.done = error, True


class _Recorder(grpc.ServerInterceptor):
    def __init__(self, log_: CallLog):
        self._log = log_

    def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # we serve no client-streaming methods

    def _unary(self, method: str, behaviour: Callable) -> Callable:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            call = self._log._begin(method, request)
            try:
                self._log._raise_injected(method)
                response = behaviour(request, context)
            except GRPCFailure as failure:
                self._log._end(call, error=str(failure))
                context.abort(failure.code, str(failure))
            except Exception as exc:  # a bug of ours must not take the server down
                log.exception("%s failed", method)
                self._log._end(call, error=f"internal error: {exc}")
                context.abort(grpc.StatusCode.INTERNAL, f"internal error: {exc}")
            if _client_waits(context):
                self._log._end(call, response=response)
            else:
                self._log._end(call, response=response, error=CLIENT_GONE)
            return response

        return handle

    def _stream(self, method: str, behaviour: Callable) -> Callable:
        def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            call = self._log._begin(method, request)
            # When the client goes away (a kubelet stopped for an upgrade) gRPC may stop pulling
            # responses while the handler waits at its yield, and never resume it: the stream
            # ends when the RPC does, or a dead kubelet's stream would count as open for ever.
            context.add_callback(lambda: self._log._end_once(call, error=CLIENT_GONE))
            try:
                yield from behaviour(request, context)
            except Exception as exc:
                self._log._end_once(call, error=str(exc))
                raise
            self._log._end_once(call)

        return handle


def _client_waits(context: grpc.ServicerContext) -> bool:
    """Whether the caller can still get the answer: its deadline has not passed (known here at
    once; the cancellation that follows it reaches the context a moment later) and it has not
    gone away."""
    remaining = context.time_remaining()
    return context.is_active() and (remaining is None or remaining > 0)
