"""Device health, streamed to the kubelet, which shows it in pod status.

Subtests flip a device to Unhealthy and watch the pod status follow, so a change is sent at once;
between changes the full list is re-sent every 2 s (upstream's period) so the kubelet's
per-device timeout never marks a device Unknown on its own.

A subtest can also make the driver fall silent about one device (``HealthState.silence``): the
stream stays open and keeps sending its list, but without that device, as a plugin that stopped
watching it would. Each stream reports the device once more first, carrying the health check
timeout the subtest names, so that the kubelet knows how long to wait before it gives up on the
device and marks it Unknown. The next ``set`` reports the device again.

The driver can also end every open stream and keep what it knows (``HealthState.end_streams``):
as a plugin whose process stops does, while the devices it reported stay as they were, for the
streams the kubelet opens once the plugin serves again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")
RESEND_PERIOD = 2.0


@dataclass(frozen=True)
class DeviceReport:
    """What the driver says about one device. ``timeout`` is the health check timeout sent with
    it (seconds; 0: the kubelet's default). ``silent_since`` is the state version at which the
    driver stopped reporting the device, None while it reports it."""

    pool: str
    device: str
    health: str
    message: str = ""
    timeout: int = 0
    silent_since: int | None = None


class HealthState:
    """Pool/device -> what the driver reports about it; every change wakes the streams."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._devices: dict[tuple[str, str], DeviceReport] = {}
        self._version = 0
        self._closed = False
        # Bumped by end_streams: a stream opened before the bump ends.
        self._epoch = 0

    def set(self, pool: str, device: str, health: str, message: str = "") -> None:
        """Report ``health`` for the device from now on (with the kubelet's default timeout),
        also after ``silence``."""
        if health not in HEALTH_VALUES:
            raise ValueError(f"device health {health!r} is not one of {HEALTH_VALUES}")
        with self._changed:
            self._devices[(pool, device)] = DeviceReport(pool, device, health, message)
            self._bump()

    def silence(self, pool: str, device: str, timeout: int) -> None:
        """Stop reporting the device: each stream sends it once more, as it is, with a health
        check timeout of ``timeout`` seconds (0: the kubelet's default), then leaves it out of
        every list until the next ``set``. The stream itself stays open."""
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
            raise ValueError(f"health check timeout {timeout!r} is not a whole number of seconds")
        with self._changed:
            known = self._devices.get((pool, device))
            if known is None:
                raise ValueError(f"device {pool}/{device}: the driver never reported its health")
            self._devices[(pool, device)] = DeviceReport(
                pool, device, known.health, known.message, timeout, self._version + 1
            )
            self._bump()

    def close(self) -> None:
        """End every stream (the driver stops)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def end_streams(self) -> None:
        """End every stream open now; streams opened later go on, with the same devices (the
        plugin stops serving for a while, and what it knows of its devices outlives that)."""
        with self._changed:
            self._epoch += 1
            self._changed.notify_all()

    @property
    def epoch(self) -> int:
        """What a stream opened now hands ``wait_change``: ``end_streams`` changes it."""
        with self._changed:
            return self._epoch

    def snapshot(self) -> tuple[int, list[DeviceReport]]:
        with self._changed:
            devices = sorted(self._devices.values(), key=lambda d: (d.pool, d.device))
            return self._version, devices

    def wait_change(self, seen: int, epoch: int, timeout: float) -> bool:
        """Until a change after version ``seen`` or ``timeout``; False once closed, and once
        the streams opened in ``epoch`` were ended."""

        def over() -> bool:
            return self._closed or self._epoch != epoch

        with self._changed:
            self._changed.wait_for(lambda: over() or self._version != seen, timeout)
            return not over()

    def _bump(self) -> None:
        """Called with the lock held, after a change."""
        self._version += 1
        self._changed.notify_all()


class HealthServicer:
    """``DRAResourceHealth`` for one API version (``pb`` = that version's _pb2 module)."""

    def __init__(self, state: HealthState, pb: ModuleType):
        self._state = state
        self._pb = pb

    def NodeWatchResources(self, request: Any, context: Any) -> Iterator[Any]:
        epoch = self._state.epoch
        # Silenced devices this stream has sent their last report of: (pool, device, since).
        said_last: set[tuple[str, str, int | None]] = set()
        while True:
            version, devices = self._state.snapshot()
            sent = [d for d in devices if (d.pool, d.device, d.silent_since) not in said_last]
            yield self._response(sent)
            # Past the yield, gRPC has sent that response: the kubelet got the timeout.
            said_last.update(
                (d.pool, d.device, d.silent_since) for d in sent if d.silent_since is not None
            )
            going_on = self._state.wait_change(version, epoch, RESEND_PERIOD)
            if not going_on or not context.is_active():
                return

    def _response(self, devices: list[DeviceReport]) -> Any:
        pb = self._pb
        enum = {"Healthy": pb.HEALTHY, "Unhealthy": pb.UNHEALTHY}
        now = int(time.time())
        return pb.NodeWatchResourcesResponse(
            devices=[
                pb.DeviceHealth(
                    device=pb.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                    health=enum.get(d.health, pb.UNKNOWN),
                    last_updated_time=now,
                    health_check_timeout_seconds=d.timeout,
                    message=d.message,
                )
                for d in devices
            ]
        )
