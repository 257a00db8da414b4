"""A real DRA driver run as a program of its own next to the kubelet (no container, no image).

What we can see of it from outside is what the kubelet and the API server see: its registration
socket answering ``GetInfo`` under its name, its ResourceSlices, the CDI specs it writes and the
files it keeps in its data directory. A driver that exits, never opens its socket or never
publishes is said in one line naming the driver, its log and what is missing, as soon as it is
clear (an exit ends the wait at once), never as a cascade of timeouts.

Its process is noted in the host lock's ledger before it runs (``before_run``), so a run that is
killed outright leaves no driver behind: the next run stops it with the cluster's components.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import signal
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from e2e_dra.driver._kinds import DEFAULT_DEVICES, DriverKind, Site, environment, served_name
from e2e_dra.driver._pb import pluginregistration_v1_pb2 as registration_pb
from e2e_dra.driver._plugin import DriverError
from e2e_dra.driver._rpc import stub
from e2e_dra.hostkit import poll
from e2e_dra.kube import Kube, path
from e2e_dra.releases import HELPER_MODULE, Program
from e2e_dra.supervise import Process, ProcessId, describe_exit

logger = logging.getLogger(__name__)

STOP_GRACE = 15.0
"""Seconds a driver gets after SIGTERM to remove its sockets, as a pod's termination grace."""
RESOURCE_API = "resource.k8s.io/v1"
_SUPERVISOR_NOTE = re.compile(r"^\d{4}-\d\d-\d\dT\S+: (starting|terminated|killing)")


class ProcessDriver:
    """One real driver on one node: started, switched to another build, stopped (see module)."""

    calls = None  # its gRPC calls go from the kubelet to it directly: we see none of them

    def __init__(
        self,
        kind: DriverKind,
        site: Site,
        kube: Kube,
        *,
        before_run: Callable[[str, ProcessId], None] | None = None,
    ) -> None:
        self.kind = kind
        self.name = served_name(kind)
        self.node_name = site.node
        self.site = site
        self.cdi_dir = site.cdi_dir
        self.data_dir = site.plugins_dir / self.name
        self.log_file = site.log_dir / f"driver-{self.name}.log"
        self._kube = kube
        self._before_run = before_run
        self._process: Process | None = None
        self._pod_uid = ""  # the running instance's
        self._older: list[tuple[Process, str, Program | None]] = []  # a rolling update's others
        self._crashed: list[str] = []  # pod UIDs of instances made to crash (:meth:`crash`)
        self._first_kubelet = ""  # the kubelet release it first ran beside
        self.instance = 0  # how many instances were started: tells a restart since a prepare
        self.program: Program | None = None
        self.num_devices = DEFAULT_DEVICES  # what every instance from now on is told to publish

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self, kubelet: str = "", *, num_devices: int | None = None) -> None:
        """Start the build for a kubelet of release ``kubelet`` (built first if need be); with
        ``num_devices``, told to publish that many devices, as this instance and every later one
        (a switch, a surge) are: the driver's configuration changed, not one instance's."""
        if num_devices is not None:
            if self.kind.device_count_option is None:
                raise DriverError(
                    f"driver {self.name} ({self.kind.label}) cannot be told how many devices to "
                    "publish"
                )
            self.num_devices = num_devices
        self._launch(self._program(kubelet))

    def _program(self, kubelet: str) -> Program | None:
        """The kind's build beside ``kubelet``; the first kubelet it runs beside is the one the
        cluster came up with, any other one an upgrade."""
        self._first_kubelet = self._first_kubelet or kubelet
        return self.kind.program(kubelet, upgraded=kubelet != self._first_kubelet)

    def changes_for(self, kubelet: str) -> bool:
        """Whether beside a kubelet of release ``kubelet`` another build runs than now."""
        return _binary(self._program(kubelet)) != _binary(self.program)

    def switch(self, kubelet: str, *, wait: bool = True) -> bool:
        """Move to the build for a kubelet of release ``kubelet``, as a driver upgrade or
        downgrade does (stop the old instance, start the new one), and until it registered and
        published (``wait``; not while the kubelet is down); False when it runs already."""
        if not self.changes_for(kubelet) and self.exit_status() is None:
            return False  # the same build (or the same command line) runs already
        self.stop()
        self._launch(self._program(kubelet))
        if wait:
            self.wait_registered(60)
            self.wait_for_slices(120)
        return True

    def surge(self, kubelet: str) -> None:
        """A rolling update with maxSurge begins: the build for ``kubelet`` starts as one more
        instance (its own pod UID, so its own sockets) and registers while the others still
        serve. :meth:`retire` ends it, :meth:`crash` fails the new instance instead."""
        self._launch(self._program(kubelet), surge=True)
        self.wait_registered(60)

    @property
    def surging(self) -> bool:
        """A rolling update is under way: more than one instance runs."""
        return bool(self._older)

    @property
    def pod_uid(self) -> str:
        """The pod UID the newest instance runs with: it names that instance's sockets."""
        return self._pod_uid

    @contextlib.contextmanager
    def older_frozen(self) -> Iterator[None]:
        """Meanwhile the older instances of a rolling update are frozen (SIGSTOP): still
        registered, their sockets open, but a call to them is never answered. What is prepared
        meanwhile was prepared by the newest instance, the one the kubelet must use."""
        frozen = [older[0] for older in self._older]
        for process in frozen:
            process.signal_group(signal.SIGSTOP)
        try:
            yield
        finally:
            for process in frozen:
                process.signal_group(signal.SIGCONT)

    def retire(self) -> None:
        """Every instance but the newest leaves, as the old pods of a rolling update do."""
        leaving, self._older = self._older, []
        for process, _, _ in leaving:
            process.stop(f"driver {self.name}: the rolling update replaced it", grace=STOP_GRACE)

    def crash(self) -> None:
        """The newest instance dies at once (SIGKILL: its sockets stay behind, as after a crash)
        and the one before it is the driver again, as when a rolling update's new pod fails."""
        if not self._older:
            raise DriverError(f"driver {self.name}: no older instance to fall back to")
        if self._process is not None:
            self._process.stop(f"driver {self.name}: made to crash", grace=0.0)
        self._crashed.append(self._pod_uid)
        self._process, self._pod_uid, self.program = self._older.pop()

    def _launch(self, program: Program | None, *, surge: bool = False) -> None:
        """Start an instance of ``program``: beside the running one if ``surge``, else as the
        only one (the caller stopped the last). Its directories exist first, as a DaemonSet's
        hostPath volumes (``DirectoryOrCreate``) make them; upstream's driver expects that.

        The first instance on this cluster starts with an empty data directory, as on a fresh
        node: what a driver of an earlier cluster left there (a checkpoint naming claims this
        cluster never had, after a run that stopped before its claims were unprepared) would
        make this run's verdict depend on the last one's. Later instances keep it: that a
        driver's state outlives its restarts is what the suite checks."""
        if self.instance == 0 and self.data_dir.is_dir():
            shutil.rmtree(self.data_dir)
        for directory in (self.site.log_dir, self.data_dir, self.site.registry_dir, self.cdi_dir):
            directory.mkdir(parents=True, exist_ok=True)
        pod_uid = str(uuid.uuid4())
        self.instance += 1
        argv = self.kind.argv(program, self.site, self.name, pod_uid, self.num_devices)
        env = environment(self.site.values(self.name, pod_uid, self.num_devices))
        what = program.version if program else argv[0]
        logger.info(
            f"starting driver {self.name} ({self.kind.label}, {what}; log: {self.log_file})"
        )
        process = Process(
            f"driver-{self.name}", argv, log_file=self.log_file, env=env, new_session=True
        )
        before = self._before_run
        try:
            process.start(before_run=(lambda who: before(process.name, who)) if before else None)
        except Exception as exc:
            raise DriverError(f"driver {self.name} ({self.kind.label}): {exc}") from None
        if surge and self._process is not None:
            self._older.append((self._process, self._pod_uid, self.program))
        self._process, self.program, self._pod_uid = process, program, pod_uid

    def stop(self) -> None:
        """Every instance: SIGTERM, then SIGKILL after :data:`STOP_GRACE` (a driver removes its
        sockets on SIGTERM, as in a pod)."""
        for process in [*(older[0] for older in self._older), self._process]:
            if process is not None:
                process.stop(f"driver {self.name} stopped", grace=STOP_GRACE)
        self._older = []
        for uid in self._crashed:  # what a crashed instance left: a kubelet would dial it
            for leftover in self.site.registry_dir.glob(f"*{uid}*"):
                leftover.unlink(missing_ok=True)
            for leftover in self.data_dir.glob(f"*{uid}*"):
                leftover.unlink(missing_ok=True)
        self._crashed = []

    def exit_status(self) -> int | None:
        """Its exit status once it ended by itself, else None."""
        return None if self._process is None else self._process.returncode

    # --- what the kubelet and the API server see ----------------------------------------------

    def wait_registered(self, timeout: float = 60) -> None:
        """Until its registration socket answers ``GetInfo`` with its name."""
        self._wait(
            self._registration_info,
            timeout,
            "registered",
            f"did not open a registration socket answering GetInfo as {self.name} in "
            f"{self.site.registry_dir}",
        )

    def _registration_info(self) -> str:
        """The registration socket of the running instance that answers as the driver. A
        driver that rolls names its sockets by its pod UID: only the running instance's count
        (another instance may serve its own meanwhile)."""
        sockets = sorted(self.site.registry_dir.glob(f"{self.name}*reg.sock"))
        if self.kind.rolls:
            sockets = [socket for socket in sockets if self._pod_uid in socket.name]
        for socket in sockets:
            with (
                contextlib.suppress(grpc.RpcError),
                grpc.insecure_channel(f"unix://{socket}") as ch,
            ):
                info = stub(ch, registration_pb, "Registration").GetInfo(
                    registration_pb.InfoRequest(), timeout=2
                )
                if info.name == self.name:
                    return str(socket)
        return ""

    def slices(self) -> list[dict]:
        """Its ResourceSlices on its node, as the API server has them."""
        return self._kube.list(
            path(RESOURCE_API, "resourceslices"),
            fieldSelector=f"spec.driver={self.name},spec.nodeName={self.node_name}",
        )

    def wait_for_slices(self, timeout: float = 300) -> None:
        """Until it published at least one slice and every pool of its is complete (the API
        server may be restarting: an error is "not yet")."""
        self._wait(
            lambda: pools_complete(self.slices()),
            timeout,
            "published",
            f"published no complete pool of ResourceSlices for node {self.node_name}",
            retry_on=(Exception,),
        )

    def _wait(
        self,
        probe: Callable[[], object],
        timeout: float,
        doing: str,
        missing: str,
        retry_on: tuple[type[BaseException], ...] = (),
    ) -> None:
        """Until ``probe`` answers; a driver that exits meanwhile ends the wait at once."""
        seen = poll(
            probe,
            timeout=timeout,
            interval=0.5,
            retry_on=retry_on,
            before_each=lambda: self._check_alive(doing),
        )
        if not seen.done:
            raise DriverError(
                f"driver {self.name} ({self.kind.label}) {missing} within {timeout:.0f}s; "
                f"log: {self.log_file}{self._tail()}"
            )

    def _check_alive(self, doing: str) -> None:
        status = self.exit_status()
        if status is not None:
            raise DriverError(
                f"driver {self.name} ({self.kind.label}) {describe_exit(status)} before it "
                f"{doing}; log: {self.log_file}{self._tail()}"
            )

    def _tail(self) -> str:
        """The last line the driver wrote (not the supervisor's own notes around it)."""
        if self._process is None:
            return ""
        lines = self._process.tail(20).splitlines()
        said = [line for line in lines if line.strip() and not _SUPERVISOR_NOTE.match(line)]
        return f"; its last line: {said[-1][:300]}" if said else ""

    def files_naming(self, claim_uid: str) -> list[Path]:
        """Its CDI specs and data files that name ``claim_uid`` (in their name or content): what
        it keeps of a prepared claim."""
        found = []
        for directory in (self.cdi_dir, self.data_dir):
            for file in sorted(directory.rglob("*")) if directory.is_dir() else []:
                with contextlib.suppress(OSError):
                    if (
                        file.is_file()
                        and not file.is_socket()
                        and (
                            claim_uid in file.name or claim_uid in file.read_text(errors="replace")
                        )
                    ):
                        found.append(file)
        return found

    # --- what the harness asks of every driver ------------------------------------------------

    def prepared_claims(self) -> list[Any]:
        return []  # not visible from outside; its files say it (files_naming)

    def take_dropped_fields(self) -> list[str]:
        return []

    def take_publish_errors(self, grace: float = 0.0) -> list[str]:
        return []

    def take_protocol_findings(self) -> list[str]:
        """Nothing: a real driver's calls are not seen from outside it."""
        return []

    def describe(self) -> dict[str, Any]:
        """What runs: the kind, its build, the DRA helper library it links and how many devices
        it is told to publish."""
        info = {
            "name": self.name,
            **self.kind.describe(),
            "num_devices": self.num_devices,
            "log": str(self.log_file),
        }
        if self.program is not None:
            info.update(self.program.describe())
        else:
            info[HELPER_MODULE] = None
        return info


def _binary(program: Program | None) -> Path | None:
    return program.binary if program is not None else None


def pools_complete(slices: Sequence[Mapping[str, Any]]) -> bool:
    """At least one slice, and for each pool the newest generation's slices all published."""
    newest: dict[str, tuple[int, int, int]] = {}  # pool -> generation, count, seen
    for item in slices:
        pool = item.get("spec", {}).get("pool", {})
        name, generation = pool.get("name", ""), int(pool.get("generation", 0))
        count = int(pool.get("resourceSliceCount", 1))
        have = newest.get(name)
        if have is None or generation > have[0]:
            newest[name] = (generation, count, 1)
        elif generation == have[0]:
            newest[name] = (generation, count, have[2] + 1)
    return bool(newest) and all(seen >= count for _, count, seen in newest.values())
