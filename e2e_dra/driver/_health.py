"""Device health, streamed to the kubelet, which shows it in pod status.

Subtests flip a device to Unhealthy and watch the pod status follow, so a change is sent at once;
between changes the full list is re-sent every 2 s (upstream's period) so the kubelet's
per-device timeout never marks a device Unknown on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")
RESEND_PERIOD = 2.0


class HealthState:
    """Pool/device -> (health, message); every change wakes the streams."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._devices: dict[tuple[str, str], tuple[str, str]] = {}
        self._version = 0
        self._closed = False

    def set(self, pool: str, device: str, health: str, message: str = "") -> None:
        if health not in HEALTH_VALUES:
            raise ValueError(f"device health {health!r} is not one of {HEALTH_VALUES}")
        with self._changed:
            self._devices[(pool, device)] = (health, message)
            self._version += 1
            self._changed.notify_all()

    def close(self) -> None:
        """End every stream (the driver stops)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def snapshot(self) -> tuple[int, list[tuple[str, str, str, str]]]:
        with self._changed:
            devices = sorted((p, d, h, m) for (p, d), (h, m) in self._devices.items())
            return self._version, devices

    def wait_change(self, seen: int, timeout: float) -> bool:
        """Until a change after version ``seen`` or ``timeout``; False once closed."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or self._version != seen, timeout)
            return not self._closed


class HealthServicer:
    """``DRAResourceHealth`` for one API version (``pb`` = that version's _pb2 module)."""

    def __init__(self, state: HealthState, pb: ModuleType):
        self._state = state
        self._pb = pb

    def NodeWatchResources(self, request: Any, context: Any) -> Iterator[Any]:
        while True:
            version, devices = self._state.snapshot()
            yield self._response(devices)
            if not self._state.wait_change(version, RESEND_PERIOD) or not context.is_active():
                return

    def _response(self, devices: list[tuple[str, str, str, str]]) -> Any:
        pb = self._pb
        enum = {"Healthy": pb.HEALTHY, "Unhealthy": pb.UNHEALTHY}
        now = int(time.time())
        return pb.NodeWatchResourcesResponse(
            devices=[
                pb.DeviceHealth(
                    device=pb.DeviceIdentifier(pool_name=pool, device_name=device),
                    health=enum.get(health, pb.UNKNOWN),
                    last_updated_time=now,
                    message=message,
                )
                for pool, device, health, message in devices
            ]
        )
