"""A local cluster whose components can be restarted one by one with other binaries or gates.

``hack/local-up-cluster.sh -d`` keeps all knowledge of how components are configured: it prepares
certificates, kubeconfigs and config files and prints each long-running component's command line
instead of starting it. We start those commands ourselves, each in its own process group with its
own log, so that :meth:`Cluster.modify` can later stop some of them and start them again with a
different binary (upgrade/downgrade) or different feature gates.

Two generations of the script are supported: older ones start etcd themselves, print
"Local etcd is running..." and sleep, so the script is kept running (it owns etcd) until
:meth:`Cluster.stop`; newer ones print etcd as a ``RUN`` line and exit, and their exit status must
be 0. The script keeps running while we start components -- it approves the kubelet's serving
certificate request in that time -- so its output is read by a thread, never blocking it.

``start(..., hold_node=True)`` starts the control plane only and keeps the script waiting at the
kubelet; :meth:`Cluster.start_node` starts the rest later. A cluster started while another one of
this process still runs (its kubelet finishing some work) takes a second set of control-plane
ports and its own certificate directory, so the two control planes can run side by side; the
node's ports and directories stay one per host, so the held node must wait until the other
cluster's node has stopped.

Running as root without ``sudo`` installed, a leading ``sudo``/``sudo -E`` in a printed command
line is dropped when starting it (it would change nothing) and kept in the saved command line.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.hostkit import on_interrupt
from e2e_dra.localupcluster._claim import HostClaim, slot_settings
from e2e_dra.localupcluster._commandline import binary_version, component_binary
from e2e_dra.localupcluster._components import (
    COMPONENTS,
    DEFAULT_SETTINGS,
    FEATURE_GATED_COMPONENTS,
    KUBE_CLUSTER_COMPONENTS,
    NODE_COMPONENTS,
)
from e2e_dra.localupcluster._environment import confine, trace_assignments
from e2e_dra.localupcluster._errors import ClusterError
from e2e_dra.localupcluster._gates import gates_to_toggle, merge_feature_gates
from e2e_dra.localupcluster._hostlock import HostLock
from e2e_dra.localupcluster._launch import RETRY_DELAY, Batch, Launcher, ReadyTime
from e2e_dra.localupcluster._log import LOG_TAIL_LINES, Log, engine_log
from e2e_dra.localupcluster._modify import ModifyOptions, RestartPlan
from e2e_dra.localupcluster._script import DryRun, checked_script
from e2e_dra.localupcluster._teardown import stop_processes
from e2e_dra.localupcluster.cmd import Cmd
from e2e_dra.supervise import ProcessId, describe_exit


def log_dir_for_test(artifacts: Path, test_name: str) -> Path:
    """``<artifacts>/<test name>`` with tags and path-hostile characters removed (as upstream)."""
    name = re.sub(r"\s*\[[^\]]*\]", "", test_name)
    name = re.sub(r"[\s/:()\\]+", "-", name).strip("-") or "cluster"
    return Path(artifacts) / name


@dataclass(frozen=True)
class _HeldNode:
    """Where :meth:`Cluster.start` stopped with ``hold_node``: the first node component named."""

    state: str
    component: str
    feature_gates: str


class Cluster:
    """Drives ``<source_dir>/hack/local-up-cluster.sh``; logs go to ``log_dir``.

    Log files: ``<component>-<state>.log`` per start (retries append to it below a ``starting:``
    line), ``local-up-cluster-<state>.log`` for the script, ``kubectl-<state>.log`` for the
    commands it asks us to run. ``wait_for_nodes=False`` skips waiting for node Ready after the
    kubelet is healthy (for engines tested without a real apiserver). Progress lines are INFO
    records on ``log`` (default: the ``e2e_dra.localupcluster`` logger). ``host_lock`` is
    the file that allows one cluster per host (default ``/tmp/e2e-dra-host.lock``): every user of
    the engine on a host must name the same one.
    """

    def __init__(
        self,
        source_dir: Path,
        log_dir: Path,
        *,
        wait_for_nodes: bool = True,
        ready_timeout: float = 180.0,
        node_ready_timeout: float = 300.0,
        retry_delay: float = RETRY_DELAY,
        log: Log | None = None,
        host_lock: Path | None = None,
    ) -> None:
        self.source_dir = Path(source_dir)
        self.log_dir = Path(log_dir)
        self.wait_for_nodes = wait_for_nodes
        self.ready_timeout = ready_timeout
        self.node_ready_timeout = node_ready_timeout
        self.retry_delay = retry_delay
        self.settings: dict[str, str] = {}
        self.running: dict[str, Cmd] = {}
        self.ready_times: list[ReadyTime] = []
        self._argv: dict[str, list[str]] = {}  # the saved command lines (what a restart runs)
        self._env: dict[str, str] = {}
        self._script: DryRun | None = None
        self._versions: dict[str, str] = {}
        self._log = engine_log(log)
        self._lock = HostLock(host_lock, log=self._log)
        self._claim = HostClaim(self._lock)
        self._launcher = Launcher(self, lock=self._lock, log=self._log, script_pid=self._script_pid)
        self._cancel_stop_on_interrupt: Callable[[], None] | None = None
        self._stopping = False
        self._stop_lock = threading.RLock()
        self._held: _HeldNode | None = None  # start(hold_node=True) stopped there

    # -- public API ----------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return Path(self.setting("CERT_DIR")) / "admin.kubeconfig"

    def setting(self, name: str) -> str:
        """A ``+ VAR=value`` value (bash's single quotes removed), else the script's default."""
        value = self.settings.get(name, DEFAULT_SETTINGS.get(name, ""))
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        return value

    def note_process(self, name: str, who: ProcessId) -> None:
        """Note a process that runs beside the cluster (a DRA driver) in the host lock's ledger,
        before it runs (``Process.start(before_run=...)``): a run killed outright then leaves
        nothing that the next holder of the lock does not stop."""
        self._lock.record(name, who.pid)

    def log_path(self, component: str) -> Path | None:
        cmd = self.running.get(component)
        return cmd.log_file if cmd else None

    def command_line(self, component: str) -> list[str]:
        """The saved command line of ``component`` (what a restart re-executes)."""
        return list(self._argv[component])

    def start(
        self,
        state: str,
        bin_dir: Path,
        env: Mapping[str, str],
        feature_gates: str = "",
        *,
        hold_node: bool = False,
    ) -> None:
        """Run the script with ``bin_dir``'s binaries; return once every component is ready.

        ``hold_node``: return once the control plane is ready, the kubelet and what follows it
        held back until :meth:`start_node` (the script waits for the kubelet meanwhile)."""
        self.stop()
        script = checked_script(self.source_dir, Path(bin_dir), env)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.settings, self.running, self._argv = {}, {}, {}
        self._env = dict(env)
        self._launcher.begin(self._env)
        trace_assignments(self._env)
        slot, scratch = self._claim.take()
        confine(self._env, slot_settings(slot), scratch)
        if self._cancel_stop_on_interrupt is None:  # the program's edge handles the signals
            self._cancel_stop_on_interrupt = on_interrupt(self._interrupted)
        try:
            self._script = DryRun(
                state,
                script,
                Path(bin_dir),
                source_dir=self.source_dir,
                log_dir=self.log_dir,
                env=self._env,
            )
            self._script.start(self._lock, self._log)
            self._follow_script(state, feature_gates, [], hold_node=hold_node)
        except BaseException as exc:
            self.stop(reason=f"start of state {state} failed: {type(exc).__name__}")
            raise
        if self._held is not None:
            self._log.info(
                f"control plane is running (KUBECONFIG={self.kubeconfig}); "
                f"{self._held.component} held back until the node is free"
            )
        else:
            self._log.info(f"cluster is running, use KUBECONFIG={self.kubeconfig} to access it")

    @property
    def node_held(self) -> bool:
        """:meth:`start` returned with the node held back; :meth:`start_node` starts it."""
        return self._held is not None

    def start_node(self) -> None:
        """Start what ``start(hold_node=True)`` held back, then the rest the script names;
        return once every component is ready."""
        held, self._held = self._held, None
        if held is None:
            raise ClusterError("no node is held back: start(..., hold_node=True) first")
        try:
            ended = self.exited()
            if ended:  # a kubelet would wait minutes for a control plane that is gone
                raise ClusterError(
                    "the control plane started earlier did not last: " + "; ".join(ended)
                )
            together = self._launcher.start_in_order(
                held.state, [], held.component, self._argv[held.component]
            )
            self._follow_script(held.state, held.feature_gates, together, hold_node=False)
        except BaseException as exc:
            why = f"start of the node in state {held.state} failed: {type(exc).__name__}"
            self.stop(reason=why)
            raise
        self._log.info(f"cluster is running, use KUBECONFIG={self.kubeconfig} to access it")

    def modify(
        self,
        state: str,
        options: ModifyOptions,
        *,
        before_kubelet_starts: Callable[[], None] | None = None,
    ) -> ModifyOptions:
        """Restart the components ``options`` touches; return options that undo binary swaps.

        ``before_kubelet_starts`` is called while the kubelet is stopped and every component
        that restarts before it runs again (the control plane, when it restarted too; the
        controller manager and the scheduler, otherwise started together with the kubelet,
        start before it then): what a node must cope with when it comes back, done while it is
        down (a pod deleted). It is not called when the kubelet does not restart. Should it
        fail, the components are started all the same and its error is raised afterwards."""
        plan = RestartPlan(options, self.running, self._argv)  # fails before anything stops
        failed: Exception | None = None
        try:
            for component in reversed(plan.components):
                cmd = self.running.pop(component)
                self._log.info(f"stopping {cmd.name} (pid {cmd.pid}) before replacing it")
                cmd.stop(f"replacing it for state {state}")
                plan.swap_binary(component)
            together: Batch = []
            for component in plan.components:
                if component == "kubelet" and before_kubelet_starts is not None:
                    self._launcher.run_batch(state, together)  # the control plane: up first
                    together = []
                    try:
                        before_kubelet_starts()
                    except Exception as exc:  # the cluster must come back whatever it did
                        failed = exc
                argv = plan.restart_argv(component)
                together = self._launcher.start_in_order(state, together, component, argv)
            self._launcher.run_batch(state, together)
        except KeyboardInterrupt:
            self.stop(reason=f"modify to state {state} interrupted")
            raise
        if failed is not None:
            raise failed
        return plan.undo

    def restart_ended(self, state: str) -> list[str]:
        """Start again, with the same binaries and flags, the components that ended by
        themselves (their logs are kept; the new processes log as ``state``); their names."""
        ended = [c for c, cmd in self.running.items() if not cmd.running()]
        if ended:
            files = {c: Path(component_binary(self._argv[c], c)) for c in ended}
            self.modify(state, ModifyOptions(file_by_component=files))
        return ended

    def toggle_feature_gates(self, state: str, gates: str) -> None:
        """Restart apiserver, controller-manager, scheduler and kubelet with ``gates`` merged in.

        Gates the kubelet's release refuses (asked of the kube-apiserver beside it) are dropped for
        the kubelet, which has no ``--emulated-version`` to make them settable; the control plane
        keeps them all.
        """
        kubelet = Path(component_binary(self._argv["kubelet"], "kubelet"))
        by_component = gates_to_toggle(gates, kubelet.parent)
        self.modify(state, ModifyOptions(feature_gates_by_component=by_component))

    def component_version(self, component: str) -> str:
        """``<binary> --version`` of the binary the component runs (e.g. "v1.37.2")."""
        argv = self._argv.get(component)
        if argv is None:
            raise ClusterError(f"{component} is not part of this cluster")
        binary = component_binary(argv, component)
        if binary not in self._versions:
            self._versions[binary] = binary_version(binary)
        return self._versions[binary]

    def exited(self) -> list[str]:
        """Components that ended by themselves while the cluster runs (killed, crashed): each
        named, with how it ended, its log and the log's last lines."""
        if self._stopping:
            return []
        return [
            f"{cmd.name} (pid {cmd.pid}) ended ({describe_exit(cmd.returncode)}); "
            f"log: {cmd.log_file}; last lines:\n{cmd.tail(LOG_TAIL_LINES)}"
            for cmd in list(self.running.values())
            if not cmd.running()
        ]

    def stop(self, reason: str = "cluster stopped") -> list[str]:
        """Stop everything in reverse start order; returns the names of what was stopped.

        One stop at a time: an interrupt's stop runs in a thread of its own, and the program's
        own stop (its teardown) then waits for it and finds nothing left to stop.
        """
        with self._stop_lock:
            return self._stop(reason)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------------

    def _follow_script(
        self, state: str, feature_gates: str, together: Batch, *, hold_node: bool
    ) -> None:
        """Start each component the script names, in its order, until it ends (or, with
        ``hold_node``, until it names the first node component: that one is held back)."""
        script = self._script
        assert script is not None
        for run in script.commands(self.settings):
            if run.name not in COMPONENTS:
                self._launcher.run_batch(state, together)  # a helper sees what came before it
                together = []
                self._launcher.run_helper(state, run.name, run.argv)
                continue
            argv = run.argv
            if feature_gates and run.name in FEATURE_GATED_COMPONENTS:
                argv = merge_feature_gates(argv, feature_gates)
            self._argv[run.name] = argv
            if hold_node and run.name in NODE_COMPONENTS:
                self._launcher.run_batch(state, together)  # what needs only the API server
                self._held = _HeldNode(state, run.name, feature_gates)
                return
            together = self._launcher.start_in_order(state, together, run.name, argv)
        if script.ended:
            self._script = None
        self._launcher.run_batch(state, together)  # the last ones the script named
        if "START_MODE" not in self._env:
            missing = [c for c in KUBE_CLUSTER_COMPONENTS if c not in self.running]
            if missing:
                raise ClusterError(
                    f"hack/local-up-cluster.sh finished without starting {', '.join(missing)}; "
                    f"log: {self.log_dir / f'local-up-cluster-{state}.log'}"
                )

    def _stop(self, reason: str) -> list[str]:
        if self._stopping:
            return []
        self._stopping = True
        stopped: list[str] = []
        errors: list[BaseException] = []
        done = False
        try:
            script = self._script.cmd if self._script is not None else None
            stopped, errors = stop_processes(
                self._launcher.helpers, self.running, script, reason=reason, log=self._log
            )
            self._script = None
            done = True
        finally:
            if self._cancel_stop_on_interrupt is not None:
                self._cancel_stop_on_interrupt()
                self._cancel_stop_on_interrupt = None
            self._held = None
            if done and not errors:  # with a survivor, the host stays claimed
                self._claim.give_back()
            self._stopping = False
        if errors:
            raise ClusterError(
                "could not stop every process of the cluster: "
                + "; ".join(str(e) for e in errors)
                + f" (the host lock {self._lock.path} stays held until this process exits)"
            )
        return stopped

    def _interrupted(self, why: str) -> None:
        if self._stopping or not (self.running or self._script):
            return
        stopped = self.stop(reason=f"interrupted ({why})")
        names = ", ".join(stopped) or "nothing"
        self._log.info(f"interrupted ({why}): stopped {names}; no cluster process left")

    def _script_pid(self) -> int | None:
        """The script's process while it runs: it may hold a port (an older script's etcd)."""
        return self._script.cmd.pid if self._script is not None else None
