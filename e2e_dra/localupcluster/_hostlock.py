"""One real cluster per host: ports, /var/run/kubernetes and the kubelet's dirs are shared.

``Cluster.start`` holds an exclusive ``flock`` on the lock file its caller names (default
``/tmp/e2e-dra-host.lock``; e2e-dra passes ``E2E_DRA_HOST_LOCK``) until ``stop``. When an ancestor
process already holds it (someone ran ``flock /tmp/e2e-dra-host.lock pytest ...``) we are inside
that reservation and go ahead.

A run that is killed (SIGKILL, OOM, a closed CI job) releases the lock with its death, but the
components it started live on in their own process groups, holding the ports and the kubelet's
directories, and the next cluster would fail on them. So every process a holder starts goes into a
ledger next to the lock (``<lock>.json``: the process's pid and start time, and its owner's);
whoever takes the lock next stops the recorded processes whose owner is dead, with what is left
of their process groups (checked by pid *and* start time, so a reused pid is never hit), and says
so. Records of an owner that is still alive are kept, even when it does not hold the lock (it ran
inside an ancestor's reservation that ended).

The clusters' temporary files (what the script makes with ``mktemp``: etcd's data, the components'
configuration; and its ``LOG_DIR``: the API server's audit log) go into a directory per cluster
next to the lock (``<lock>.d/cluster-<owner pid>-
<owner start>-*``), removed when the cluster stops; a successor removes those of dead owners.
Left in ``/tmp``, they were 51 GB after two days of runs, and the kubelet evicted pods for
DiskPressure.

Within one process the lock is one reservation: a second cluster started while the first still
runs (the next cluster's control plane, started while the first one's kubelet finishes its work)
shares it, the flock is released when the last of them stops, and each removes only its own
records from the ledger.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from e2e_dra.hostkit import atomic_write_text
from e2e_dra.localupcluster._errors import ClusterError
from e2e_dra.localupcluster._log import Log, engine_log
from e2e_dra.supervise import ProcessId, group_members, start_ticks, terminate

DEFAULT_PATH = "/tmp/e2e-dra-host.lock"
STOP_GRACE = 10.0
"""Seconds a dead run's process gets between SIGTERM and SIGKILL."""


def scratch_dir(lock: Path) -> Path:
    """Where the clusters under the host lock ``lock`` keep their temporary files, a directory
    each."""
    return lock.with_name(lock.name + ".d")


def _ancestors() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents())}


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, as /proc/<pid>/stat has it (the
    ledger's format since the first version); None: no such process."""
    ticks = start_ticks(pid)
    return None if ticks is None else str(ticks)


def _identity(pid: int, started: str | None) -> ProcessId | None:
    return ProcessId(pid, int(started)) if started is not None and started.isdecimal() else None


def _alive(pid: int, started: str | None) -> bool:
    """The process that had this pid and start time still runs (a zombie has ended)."""
    who = _identity(pid, started)
    return who is not None and who.alive()


def _group_left(entry: dict[str, Any]) -> list[int]:
    """What still runs of a recorded process: itself and its process group's members.

    The recorded process leads its own group, and the members it started stay in that group
    when it ends (a test binary killed before the components it started, say). The kernel does
    not hand out a pid again while a group of that id has members, so members found under the
    recorded pid are that process's even when it has ended; but when another process has the pid
    now, the recorded one and its group are long gone.
    """
    pid, started = entry["pid"], entry.get("start")
    if _alive(pid, started):
        return [pid, *(p for p in group_members(pid) if p != pid)]
    if start_time(pid) is not None:  # the pid is another process's now
        return []
    return group_members(pid)


def _holders(path: Path) -> set[int]:
    """PIDs holding a flock on ``path`` according to /proc/locks."""
    try:
        inode = path.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return set()
    holders = set()
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
            with contextlib.suppress(ValueError):
                holders.add(int(fields[4]))
    return holders


@dataclass
class _Reservation:
    """This process's hold of one lock file, shared by its clusters."""

    fd: int | None  # None: an ancestor holds the lock for us
    users: int = 1


_RESERVATIONS: dict[Path, _Reservation] = {}
_RESERVATIONS_GUARD = threading.Lock()


class HostLock:
    def __init__(self, path: Path | None = None, *, log: Log | None = None) -> None:
        self.path = path or Path(DEFAULT_PATH)
        self._log = engine_log(log)
        self._using = False  # this holder counts among the users of the process's reservation
        self._recorded: set[int] = set()  # pids this holder put in the ledger

    @property
    def ledger(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    @property
    def scratch(self) -> Path:
        return scratch_dir(self.path)

    def new_scratch(self) -> Path:
        """A fresh directory for one cluster's temporary files, named after its owner (this
        process) so that a successor can tell whether it is still in use."""
        self.scratch.mkdir(exist_ok=True)
        me = self._me()
        prefix = f"cluster-{me['owner']}-{me['owner_start']}-"
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.scratch))

    @property
    def held(self) -> bool:
        """This holder is in the process's reservation, and the process holds the flock itself
        (not inside an ancestor's)."""
        reservation = _RESERVATIONS.get(self._key)
        return self._using and reservation is not None and reservation.fd is not None

    @property
    def _key(self) -> Path:
        return self.path.absolute()

    def acquire(self) -> None:
        if self._using:
            return
        with _RESERVATIONS_GUARD:
            reservation = _RESERVATIONS.get(self._key)
            if reservation is not None:  # another cluster of this process holds it: share it
                reservation.users += 1
                self._using = True
                return
            _RESERVATIONS[self._key] = _Reservation(self._lock_file())
            self._using = True
        self._take_over()

    def _lock_file(self) -> int | None:
        """Take the flock, waiting for another process that holds it; None: an ancestor holds it
        for us."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = _holders(self.path)
            if holders & _ancestors():
                os.close(fd)
                return None
            who = ", ".join(f"pid {pid}" for pid in sorted(holders)) or "another process"
            self._log.info(
                f"waiting for another e2e-dra cluster on this host ({who} holds {self.path}) ..."
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def release(self) -> None:
        if not self._using:
            return
        recorded, self._recorded = self._recorded, set()
        self._update(lambda entries: [e for e in entries if not self._ours(e, recorded)])
        self._using = False
        with _RESERVATIONS_GUARD:
            reservation = _RESERVATIONS.get(self._key)
            if reservation is None:
                return
            reservation.users -= 1
            if reservation.users > 0:
                return
            del _RESERVATIONS[self._key]
        if reservation.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(reservation.fd, fcntl.LOCK_UN)
            os.close(reservation.fd)

    def record(self, name: str, pid: int | None) -> None:
        """Note a process (its own process group) this holder started, for a successor to stop
        should this process die without stopping it."""
        if pid is None or not self._using:
            return
        entry = {"name": name, "pid": pid, "start": start_time(pid), **self._me()}
        self._recorded.add(pid)
        self._update(lambda entries: [*entries, entry])

    def _take_over(self) -> None:
        """Stop what dead holders left running; keep the records of live ones.

        Entries carry their owner's pid and start time: an owner that is alive although we hold
        the lock (it ran inside an ancestor's reservation that ended) keeps its records, so that
        whoever comes after it dies can still stop its processes.
        """
        entries = self._entries()
        orphaned = [e for e in entries if not _alive(e["owner"], e.get("owner_start"))]
        self.reap(orphaned)
        self._update(lambda current: [e for e in current if e not in orphaned])
        self._remove_dead_scratch()

    def _remove_dead_scratch(self) -> None:
        """Remove the temporary files of clusters whose owner died (their processes are gone:
        :meth:`reap` stopped them)."""
        if not self.scratch.is_dir():
            return
        for left in self.scratch.iterdir():
            _, owner, started, *_ = [*left.name.split("-"), "", "", ""]
            if owner.isdecimal() and _alive(int(owner), started):
                continue
            shutil.rmtree(left, ignore_errors=True)

    def reap(self, entries: list[dict[str, Any]]) -> list[str]:
        """Stop the recorded processes (of dead owners) that still run, with their process
        groups; return their names."""
        left = [e for e in entries if _group_left(e)]
        if not left:
            return []
        owners = ", ".join(sorted({f"pid {e['owner']}" for e in left}))
        names = ", ".join(f"{e['name']} (pid {e['pid']})" for e in left)
        self._log.info(f"a previous run ({owners}) died and left {names} running; stopping them")
        still = [
            e
            for e in reversed(left)
            if (who := _identity(e["pid"], e.get("start"))) is not None
            and not terminate(who, grace=STOP_GRACE)
        ]
        if still:
            pids = " ".join(str(pid) for e in still for pid in _group_left(e))
            raise ClusterError(
                f"processes of a dead run survive SIGKILL ({pids}); stop them "
                f"(sudo kill -9 {pids}) and run again"
            )
        return [str(e["name"]) for e in left]

    @staticmethod
    def _me() -> dict[str, Any]:
        return {"owner": os.getpid(), "owner_start": start_time(os.getpid())}

    def _ours(self, entry: dict[str, Any], recorded: set[int]) -> bool:
        """An entry this holder recorded (not another cluster of this process)."""
        return (
            entry.get("pid") in recorded
            and entry.get("owner") == os.getpid()
            and entry.get("owner_start") == self._me()["owner_start"]
        )

    def _entries(self) -> list[dict[str, Any]]:
        """The ledger's well-formed entries (an unreadable ledger is an empty one)."""
        try:
            record = json.loads(self.ledger.read_text())
        except (OSError, ValueError):
            return []
        entries = record.get("processes", []) if isinstance(record, dict) else []
        return [
            e
            for e in entries
            if isinstance(e, dict)
            and isinstance(e.get("pid"), int)
            and isinstance(e.get("owner"), int)
        ]

    def _update(self, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
        """Read, change and atomically replace the ledger (the last writer's pid on top)."""
        record = {**self._me(), "processes": change(self._entries())}
        record["pid"], record["start"] = record.pop("owner"), record.pop("owner_start")
        try:
            atomic_write_text(self.ledger, json.dumps(record) + "\n")
        except OSError as exc:  # a ledger we cannot write only loses the clean-up after a crash
            self._log.info(
                f"cannot write {self.ledger} ({exc.strerror}); a crash would leave processes"
            )
