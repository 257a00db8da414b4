"""What one cluster takes of the host while it runs: the host lock (with its ledger), a set of
control-plane ports and a scratch directory; given back once nothing of the cluster is left.

A cluster started while another one of this process still runs (its kubelet finishing some work)
takes the next control-plane *slot*: the script's default ports moved by :data:`SLOT_PORT_STEP`
and its own certificate directory, so the two control planes run side by side. Slots are counted
per process: within one process the host lock is one reservation shared by its clusters.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from e2e_dra.localupcluster._components import CONTROL_PLANE_SETTINGS, DEFAULT_SETTINGS
from e2e_dra.localupcluster._hostlock import HostLock

SLOT_PORT_STEP = 10
"""Control-plane slot ``n`` listens on the script's default ports + ``n`` * this."""

_slots_in_use: set[int] = set()
_slots_guard = threading.Lock()


def take_slot() -> int:
    """The lowest control-plane slot no running cluster of this process uses, now taken."""
    with _slots_guard:
        slot = next(n for n in range(len(_slots_in_use) + 1) if n not in _slots_in_use)
        _slots_in_use.add(slot)
        return slot


def give_back_slot(slot: int) -> None:
    with _slots_guard:
        _slots_in_use.discard(slot)


def slot_settings(slot: int) -> dict[str, str]:
    """The control-plane settings of ``slot``: none for slot 0 (the script's defaults)."""
    if slot == 0:
        return {}
    values = {name: DEFAULT_SETTINGS[name] for name in CONTROL_PLANE_SETTINGS}
    return {
        name: f"{value}-{slot}" if name == "CERT_DIR" else str(int(value) + slot * SLOT_PORT_STEP)
        for name, value in values.items()
    }


class HostClaim:
    """The host lock, slot and scratch directory of one cluster, taken at its start."""

    def __init__(self, lock: HostLock) -> None:
        self.lock = lock
        self.slot: int | None = None
        self.scratch: Path | None = None  # the script's TMPDIR

    def take(self) -> tuple[int, Path]:
        """Take the host lock, then a slot and a scratch directory; returns the slot and the
        directory. The lock comes first: without it neither is ours to take."""
        self.lock.acquire()
        self.slot = take_slot()
        self.scratch = self.lock.new_scratch()
        return self.slot, self.scratch

    def give_back(self) -> None:
        """Give back all of it (also when nothing was taken). Only once every process of the
        cluster is gone: with a survivor the next cluster must not start on top of it, so the
        lock (and its ledger, which a successor uses to stop what is left) stays until this
        process ends."""
        if self.slot is not None:
            give_back_slot(self.slot)
            self.slot = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        self.lock.release()
