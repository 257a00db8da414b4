"""The kubelet plugin registration service: how the kubelet learns the driver exists.

The kubelet's plugin watcher sees ``<driver>-reg.sock`` appear in its registry directory, calls
GetInfo, checks the answer (type, name, the short names of the services the driver serves), and
reports the verdict through NotifyRegistrationStatus. A verdict of "rejected" carries the
kubelet's reason, which is the only place that reason ever shows up, so we log it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from e2e_dra.driver._calls import GRPCFailure
from e2e_dra.driver._pb import pluginregistration_v1_pb2 as registration_pb

log = logging.getLogger(__name__)

PLUGIN_TYPE = "DRAPlugin"


class RegistrationServicer:
    def __init__(self, driver_name: str, endpoint: str, supported_versions: list[str]):
        self._info = registration_pb.PluginInfo(
            type=PLUGIN_TYPE,
            name=driver_name,
            endpoint=endpoint,
            supported_versions=supported_versions,
        )
        self._lock = threading.Condition()
        self._status: registration_pb.RegistrationStatus | None = None

    @property
    def status(self) -> registration_pb.RegistrationStatus | None:
        """The kubelet's last verdict, None before the first one."""
        with self._lock:
            return self._status

    def forget(self) -> None:
        """Drop the kubelet's last verdict: it was on a registration that ended (the driver
        stopped serving), and the next one is what a wait must see."""
        with self._lock:
            self._status = None

    def wait_registered(self, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(
                lambda: self._status is not None and self._status.plugin_registered, timeout
            )

    def GetInfo(self, request: Any, context: Any) -> registration_pb.PluginInfo:
        return self._info

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        with self._lock:
            self._status = request
            self._lock.notify_all()
        if not request.plugin_registered:
            log.warning("kubelet rejected driver %s: %s", self._info.name, request.error)
            raise GRPCFailure(f"failed registration process: {request.error}")
        log.info("kubelet registered driver %s", self._info.name)
        return registration_pb.RegistrationStatusResponse()
