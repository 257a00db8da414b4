"""What one phase of the chain leaves the next: the pods that must run on, the devices the driver
publishes, and the change of its devices still to be undone."""

from __future__ import annotations

from dataclasses import dataclass

from e2e_dra.builder import Builder
from e2e_dra.subtest import WhileKubeletDown
from e2e_dra.subtest_kit import Running, still_untouched
from e2e_dra.subtests.drivers._pods import Claimed
from e2e_dra.subtests.drivers._pools import Device, Devices


@dataclass(frozen=True)
class Grown:
    """The driver was restarted with one more device while claims were prepared: what it had
    before (``devices``, told ``num_devices``), and the device it added, which a later phase
    takes away again once no claim holds it; ``resync_due``: when its helper has synced the pool
    it updated once more, which the phase waits for before it ends (None: nothing to wait for)."""

    devices: Devices
    num_devices: int
    added: Device
    resync_due: float | None = None

    @property
    def with_added(self) -> Devices:
        """The devices by pool while the added one is there."""
        pool, name = self.added
        grown = {**self.devices, pool: sorted([*self.devices.get(pool, []), name])}
        return dict(sorted(grown.items()))


@dataclass(frozen=True)
class Held:
    """What one phase leaves the next: the pod that must run on untouched through every step,
    the pod whose claim the next phase deletes and sees unprepared, the devices published, the
    kubelet releases met so far, the driver's replacement asked of the next step, and the
    device the chain added until it is taken away."""

    kept: Running
    kept_claim: Claimed
    passing: Claimed
    devices: Devices  # the driver's devices by pool, as the last change left them
    kubelets: tuple[str, ...] = ()  # in the order the phases met them
    replaced: WhileKubeletDown | None = None
    grown: Grown | None = None

    def untouched(self, b: Builder) -> None:
        still_untouched(b, self.kept, [self.kept_claim.claim], self.kept_claim.env)
