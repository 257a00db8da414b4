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

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from e2e_dra.hostkit import Attempts, join_all, on_interrupt, poll
from e2e_dra.supervise import describe_exit
from localupcluster._components import (
    COMPONENTS,
    CONTROL_PLANE_SETTINGS,
    DEFAULT_SETTINGS,
    ETCD,
    FEATURE_GATED_COMPONENTS,
    KUBE_CLUSTER_COMPONENTS,
    NODE_COMPONENTS,
    PORT_SETTING,
    STARTED_TOGETHER,
)
from localupcluster._errors import ClusterError
from localupcluster._gates import filter_locked_gates, merge_feature_gates
from localupcluster._hostlock import HostLock
from localupcluster._log import Log, engine_log
from localupcluster._parse import OLD_SCRIPT_READY_LINE, parse_run_line, parse_setting
from localupcluster._ports import listener, process_group_of
from localupcluster._readiness import (
    ComponentExited,
    ComponentNotReady,
    probe_for,
    wait_http_ready,
    wait_nodes_ready,
)
from localupcluster._tls import AdminTLS, admin_tls
from localupcluster.cmd import Cmd

MAX_RETRIES = 10
"""Restarts of a component that exits before it is ready (e.g. its port not yet released)."""
RETRY_DELAY = 1.0
HELPER_TIMEOUT = 300.0
LOG_TAIL_LINES = 25
SCRIPT_IDLE_TIMEOUT = 600.0
"""A local-up-cluster.sh that prints nothing for this long and does not end is hung."""
PORT_RELEASE_GRACE = 5.0
SCRIPT_TOOLS = ("cfssl", "cfssljson")
"""What hack/local-up-cluster.sh needs on PATH to write certificates without downloading it."""
SLOT_PORT_STEP = 10
"""Control-plane slot ``n`` listens on the script's default ports + ``n`` * this."""

_slots_in_use: set[int] = set()
_slots_guard = threading.Lock()


def _take_slot() -> int:
    """The lowest control-plane slot no running cluster of this process uses, now taken."""
    with _slots_guard:
        slot = next(n for n in range(len(_slots_in_use) + 1) if n not in _slots_in_use)
        _slots_in_use.add(slot)
        return slot


def _give_back(slot: int) -> None:
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


@dataclass(frozen=True)
class _HeldNode:
    """Where :meth:`Cluster.start` stopped with ``hold_node``: the first node component named."""

    state: str
    component: str
    feature_gates: str


@dataclass
class ModifyOptions:
    """What :meth:`Cluster.modify` changes; the result of a modify undoes its binary changes."""

    bin_dir: Path | None = None
    file_by_component: dict[str, Path] = field(default_factory=dict)
    feature_gates_by_component: dict[str, str] = field(default_factory=dict)

    def component_file(self, component: str) -> Path | None:
        if component in self.file_by_component:
            return Path(self.file_by_component[component])
        if self.bin_dir is not None:
            return Path(self.bin_dir) / component
        return None


@dataclass(frozen=True)
class ReadyTime:
    """How long one component took from its (last) start to ready, for the benchmark; ``at`` is
    the wall-clock time (``time.time()``) it was ready, so a timeline can place it."""

    component: str
    state: str
    seconds: float
    attempts: int
    at: float = 0.0


def binary_index(argv: list[str], component: str) -> int:
    """Index of the first word whose basename is ``component`` (skips ``sudo -E`` wrappers)."""
    for index, word in enumerate(argv):
        if word and os.path.basename(word) == component:
            return index
    raise ClusterError(f"binary filename of {component} not found in {' '.join(argv)!r}")


def log_dir_for_test(artifacts: Path, test_name: str) -> Path:
    """``<artifacts>/<test name>`` with tags and path-hostile characters removed (as upstream)."""
    name = re.sub(r"\s*\[[^\]]*\]", "", test_name)
    name = re.sub(r"[\s/:()\\]+", "-", name).strip("-") or "cluster"
    return Path(artifacts) / name


class Cluster:
    """Drives ``<source_dir>/hack/local-up-cluster.sh``; logs go to ``log_dir``.

    Log files: ``<component>-<state>.log`` per start (retries append to it below a ``starting:``
    line), ``local-up-cluster-<state>.log`` for the script, ``kubectl-<state>.log`` for the
    commands it asks us to run. ``wait_for_nodes=False`` skips waiting for node Ready after the
    kubelet is healthy (for engines tested without a real apiserver). Progress lines are INFO
    records on ``log`` (default: the ``localupcluster`` logger). ``host_lock`` is
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
        self._argv: dict[str, list[str]] = {}
        self._env: dict[str, str] = {}
        self._script: Cmd | None = None
        self._helpers: list[Cmd] = []
        self._tls_cache: AdminTLS | None = None
        self._versions: dict[str, str] = {}
        self._log = engine_log(log)
        self._lock = HostLock(host_lock, log=self._log)
        self._cancel_stop_on_interrupt: Callable[[], None] | None = None
        self._stopping = False
        self._stop_lock = threading.RLock()
        self._dropped_sudo_said = False
        self._scratch: Path | None = None  # this cluster's temporary files (TMPDIR of the script)
        self._slot: int | None = None  # its control-plane ports (slot_settings)
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
        script = self.source_dir / "hack" / "local-up-cluster.sh"
        if not script.is_file():
            raise ClusterError(f"no hack/local-up-cluster.sh in source dir {self.source_dir}")
        missing = [c for c in KUBE_CLUSTER_COMPONENTS if not os.access(Path(bin_dir) / c, os.X_OK)]
        if missing:
            raise ClusterError(
                f"binary dir {bin_dir} lacks component binaries: {', '.join(missing)}"
            )
        not_text = sorted(k for k, v in env.items() if not isinstance(v, str))
        if not_text:
            raise ClusterError(f"environment values must be strings: {', '.join(not_text)}")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.settings, self.running, self._argv, self._helpers = {}, {}, {}, []
        self._tls_cache = None
        self._env = dict(env)
        verbose = self._inherited("KUBE_VERBOSE") or ""
        if not verbose.isdigit() or int(verbose) < 2:
            self._env["KUBE_VERBOSE"] = "2"  # makes bash trace the "+ VAR=value" assignments
        self._lock.acquire()
        self._slot = _take_slot()
        for name, value in slot_settings(self._slot).items():
            if self._inherited(name) is None:  # the caller's choice wins
                self._env[name] = value
        # Everything the script makes with mktemp (etcd's data, the components' configuration)
        # and writes to its LOG_DIR (the API server's audit log, 100 MB a file, never rotated
        # away) goes there, and goes when the cluster stops; by default both are /tmp.
        self._scratch = self._lock.new_scratch()
        self._env["TMPDIR"] = str(self._scratch)
        if self._inherited("LOG_DIR") is None:
            self._env["LOG_DIR"] = str(self._scratch)
        if self._cancel_stop_on_interrupt is None:  # the program's edge handles the signals
            self._cancel_stop_on_interrupt = on_interrupt(self._interrupted)
        try:
            self._run_script(state, script, Path(bin_dir), feature_gates, hold_node=hold_node)
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
            together = self._start_in_order(
                held.state, [], held.component, self._argv[held.component]
            )
            self._follow_script(held.state, held.feature_gates, together, hold_node=False)
        except BaseException as exc:
            why = f"start of the node in state {held.state} failed: {type(exc).__name__}"
            self.stop(reason=why)
            raise
        self._log.info(f"cluster is running, use KUBECONFIG={self.kubeconfig} to access it")

    def modify(self, state: str, options: ModifyOptions) -> ModifyOptions:
        """Restart the components ``options`` touches; return options that undo binary swaps."""
        affected = [
            c
            for c in KUBE_CLUSTER_COMPONENTS
            if options.component_file(c) or options.feature_gates_by_component.get(c)
        ]
        for component in affected:
            if component not in self.running:
                raise ClusterError(f"cannot modify {component}: it is not running")
            new_file = options.component_file(component)
            if new_file is not None:
                if not os.access(new_file, os.X_OK):
                    raise ClusterError(f"component binary {new_file} for {component} is missing")
                binary_index(self._argv[component], component)  # fails before anything stops
        restore = ModifyOptions()
        try:
            for component in reversed(affected):
                cmd = self.running.pop(component)
                self._log.info(f"stopping {cmd.name} (pid {cmd.pid}) before replacing it")
                cmd.stop(f"replacing it for state {state}")
                new_file = options.component_file(component)
                if new_file is not None:
                    argv = self._argv[component]
                    index = binary_index(argv, component)
                    restore.file_by_component[component] = Path(argv[index])
                    argv[index] = str(new_file)
            together: list[tuple[str, list[str]]] = []
            for component in affected:
                gates = options.feature_gates_by_component.get(component)
                if gates:
                    self._argv[component] = merge_feature_gates(self._argv[component], gates)
                together = self._start_in_order(state, together, component, self._argv[component])
            self._run_components(state, together)
        except KeyboardInterrupt:
            self.stop(reason=f"modify to state {state} interrupted")
            raise
        return restore

    def restart_ended(self, state: str) -> list[str]:
        """Start again, with the same binaries and flags, the components that ended by
        themselves (their logs are kept; the new processes log as ``state``); their names."""
        ended = [c for c, cmd in self.running.items() if not cmd.running()]
        if ended:
            files = {c: Path(self._argv[c][binary_index(self._argv[c], c)]) for c in ended}
            self.modify(state, ModifyOptions(file_by_component=files))
        return ended

    def toggle_feature_gates(self, state: str, gates: str) -> None:
        """Restart apiserver, controller-manager, scheduler and kubelet with ``gates`` merged in.

        Gates the kubelet's release refuses (asked of the kube-apiserver beside it) are dropped for
        the kubelet, which has no ``--emulated-version`` to make them settable; the control plane
        keeps them all.
        """
        options = ModifyOptions()
        for component in FEATURE_GATED_COMPONENTS:
            if component == "kubelet":
                kubelet = self._argv[component][binary_index(self._argv[component], component)]
                options.feature_gates_by_component[component] = filter_locked_gates(
                    gates, Path(kubelet).parent
                )
            else:
                options.feature_gates_by_component[component] = gates
        self.modify(state, options)

    def component_version(self, component: str) -> str:
        """``<binary> --version`` of the binary the component runs (e.g. "v1.37.2")."""
        argv = self._argv.get(component)
        if argv is None:
            raise ClusterError(f"{component} is not part of this cluster")
        binary = argv[binary_index(argv, component)]
        if binary not in self._versions:
            try:
                output = subprocess.run(
                    [binary, "--version"], capture_output=True, text=True, timeout=30, check=True
                ).stdout
            except (OSError, subprocess.SubprocessError) as exc:
                raise ClusterError(f"cannot run {binary} --version: {exc}") from exc
            match = re.search(r"v\d+\.\d+\.\d+\S*", output)
            if match is None:
                raise ClusterError(f"{binary} --version printed no version: {output.strip()!r}")
            self._versions[binary] = match.group(0)
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

    def _stop(self, reason: str) -> list[str]:
        if self._stopping:
            return []
        self._stopping = True
        stopped: list[str] = []
        # One process that will not die must not keep us from stopping the others.
        attempts = Attempts("cluster stop", self._log.warning)
        errors = attempts.errors
        done = False

        def attempt(cmd: Cmd) -> None:
            attempts(f"stop {cmd.name}", lambda: cmd.stop(reason))

        try:
            for helper in self._helpers:
                if helper.running():
                    attempt(helper)
            for component in reversed(COMPONENTS):
                cmd = self.running.pop(component, None)
                if cmd is not None:
                    if cmd.running():
                        self._log.info(f"stopping {cmd.name} (pid {cmd.pid})")
                        stopped.append(cmd.name)
                    attempt(cmd)
            if self._script is not None:
                if self._script.running():
                    stopped.append(self._script.name)
                attempt(self._script)
                self._script = None
            done = True
        finally:
            if self._cancel_stop_on_interrupt is not None:
                self._cancel_stop_on_interrupt()
                self._cancel_stop_on_interrupt = None
            # With a survivor, the next cluster must not start on top of it: the lock (and its
            # ledger, which a successor uses to stop what is left) stays until this process ends.
            self._held = None
            if done and not errors:
                if self._slot is not None:
                    _give_back(self._slot)
                    self._slot = None
                if self._scratch is not None:
                    shutil.rmtree(self._scratch, ignore_errors=True)
                    self._scratch = None
                self._lock.release()
            self._stopping = False
        if errors:
            raise ClusterError(
                "could not stop every process of the cluster: "
                + "; ".join(str(e) for e in errors)
                + f" (the host lock {self._lock.path} stays held until this process exits)"
            )
        return stopped

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------------

    def _interrupted(self, why: str) -> None:
        if self._stopping or not (self.running or self._script):
            return
        stopped = self.stop(reason=f"interrupted ({why})")
        names = ", ".join(stopped) or "nothing"
        self._log.info(f"interrupted ({why}): stopped {names}; no cluster process left")

    def _run_script(
        self, state: str, script: Path, bin_dir: Path, feature_gates: str, *, hold_node: bool
    ) -> None:
        path = self._env.get("PATH", os.environ.get("PATH"))
        missing_tools = [tool for tool in SCRIPT_TOOLS if not shutil.which(tool, path=path)]
        if missing_tools:
            # The script would try to download them from GitHub, retrying for many minutes where
            # GitHub cannot be reached, before it prints a single command line.
            raise ClusterError(
                f"{' and '.join(missing_tools)} not found on PATH: hack/local-up-cluster.sh needs "
                "them to write the cluster's certificates (put them on PATH and run again)"
            )
        self._script = cmd = Cmd(
            f"local-up-cluster-{state}",
            ["bash", str(script), "-o", str(bin_dir), "-d"],
            log_file=self.log_dir / f"local-up-cluster-{state}.log",
            env=self._env,
            cwd=self.source_dir,
            capture=True,
        )
        self._log.info(f"running hack/local-up-cluster.sh -d (log: {self._script.log_file})")
        cmd.start(before_run=lambda who: self._lock.record(cmd.name, who.pid))
        self._follow_script(state, feature_gates, [], hold_node=hold_node)

    def _follow_script(
        self,
        state: str,
        feature_gates: str,
        together: list[tuple[str, list[str]]],
        *,
        hold_node: bool,
    ) -> None:
        """Start each component the script names, in its order, until it ends (or, with
        ``hold_node``, until it names the first node component: that one is held back)."""
        assert self._script is not None
        for line in self._script.lines(idle_timeout=SCRIPT_IDLE_TIMEOUT):
            if OLD_SCRIPT_READY_LINE in line:
                break  # older script: it keeps etcd running until we stop it
            run = parse_run_line(line)
            if run is not None:
                if run.name in COMPONENTS:
                    argv = run.argv
                    if feature_gates and run.name in FEATURE_GATED_COMPONENTS:
                        argv = merge_feature_gates(argv, feature_gates)
                    self._argv[run.name] = argv
                    if hold_node and run.name in NODE_COMPONENTS:
                        self._run_components(state, together)  # what needs only the API server
                        self._held = _HeldNode(state, run.name, feature_gates)
                        return
                    together = self._start_in_order(state, together, run.name, argv)
                else:
                    self._run_components(state, together)  # a helper sees what came before it
                    together = []
                    self._run_helper(state, run.name, run.argv)
                continue
            setting = parse_setting(line)
            if setting is not None:
                self.settings[setting[0]] = setting[1]
        else:
            returncode = self._script.wait(timeout=SCRIPT_IDLE_TIMEOUT)
            if returncode != 0:
                raise ClusterError(
                    f"hack/local-up-cluster.sh failed ({describe_exit(returncode)}); "
                    f"log: {self._script.log_file}; last lines:\n"
                    f"{self._script.tail(LOG_TAIL_LINES)}"
                )
            self._script = None
        self._run_components(state, together)  # the last ones the script named
        if "START_MODE" not in self._env:
            missing = [c for c in KUBE_CLUSTER_COMPONENTS if c not in self.running]
            if missing:
                raise ClusterError(
                    f"hack/local-up-cluster.sh finished without starting {', '.join(missing)}; "
                    f"log: {self.log_dir / f'local-up-cluster-{state}.log'}"
                )

    def _inherited(self, name: str) -> str | None:
        """What the processes we start see as ``name``: the caller's ``env``, else what they
        inherit from us (:class:`Cmd` passes our environment on). Not configuration of ours: the
        engine reads none, its callers pass values in."""
        return self._env.get(name, os.environ.get(name))

    def _exec_argv(self, argv: list[str]) -> list[str]:
        words = list(argv)
        while words and not words[0]:
            words.pop(0)
        path = self._inherited("PATH")
        sudo_missing = os.geteuid() == 0 and not shutil.which("sudo", path=path)
        if words and words[0] == "sudo" and sudo_missing:
            words.pop(0)
            while words and words[0].startswith("-"):
                words.pop(0)
            if not self._dropped_sudo_said:
                self._log.info(
                    "running as root without sudo installed: starting commands without 'sudo'"
                )
                self._dropped_sudo_said = True
        return words

    def _run_helper(self, state: str, name: str, argv: list[str]) -> None:
        cmd = Cmd(
            name,
            self._exec_argv(argv),
            log_file=self.log_dir / f"{name}-{state}.log",
            env=self._env,
            cwd=self.source_dir,
            capture=True,
        )
        self._helpers.append(cmd)
        cmd.start(before_run=lambda who: self._lock.record(cmd.name, who.pid))
        returncode = cmd.wait(timeout=HELPER_TIMEOUT)
        if returncode != 0:
            raise ClusterError(
                f"{name} command failed ({describe_exit(returncode)}): {' '.join(argv)}\n"
                f"{cmd.tail(LOG_TAIL_LINES)}"
            )

    def _tls(self) -> AdminTLS:
        if self._tls_cache is None:
            self._tls_cache = admin_tls(self.kubeconfig)
        return self._tls_cache

    def _check_port(self, component: str) -> None:
        port = self.setting(PORT_SETTING[component])
        if not port.isdigit() or int(port) == 0:
            return
        holder = poll(  # a socket without a visible owner is usually being released
            lambda: listener(int(port)),
            timeout=PORT_RELEASE_GRACE,
            interval=0.1,
            until=lambda found: found is None or found.pid is not None,
        ).value
        if holder is None:
            return
        ours = {cmd.pid for cmd in self.running.values()} | {
            self._script.pid if self._script else None
        }
        if holder.pid is not None and process_group_of(holder.pid) in ours:
            return
        raise ClusterError(
            f"cannot start {component}: {holder.describe()}; stop it first (another cluster?)"
        )

    def _start_in_order(
        self, state: str, together: list[tuple[str, list[str]]], component: str, argv: list[str]
    ) -> list[tuple[str, list[str]]]:
        """``component`` is next in the start order: it joins the components to be started
        together with it (all of them start once the last is named), or they start (and are
        ready) before it does. Returns those still waiting."""
        if component in STARTED_TOGETHER:
            together = [*together, (component, argv)]
            if component != STARTED_TOGETHER[-1]:
                return together
        else:
            self._run_components(state, together)
            together = [(component, argv)]
        self._run_components(state, together)
        return []

    def _run_components(self, state: str, batch: Sequence[tuple[str, list[str]]]) -> None:
        """Start every component of ``batch``, then wait until all are ready, restarting one
        while it dies early (its port not yet released, say). Processes are started and stopped
        by this thread alone; only the waits for readiness run side by side."""
        pending = {component: (argv, 1) for component, argv in batch}
        while pending:
            started = {
                c: self._launch(state, c, argv, check_port=attempt == 1)
                for c, (argv, attempt) in pending.items()
            }
            outcomes = self._wait_all(started)
            again: dict[str, tuple[list[str], int]] = {}
            for component, cmd in started.items():
                argv, attempt = pending[component]
                outcome = outcomes[component]
                if isinstance(outcome, float):
                    seconds = outcome - (cmd.started_at or outcome)
                    at = time.time() - (time.monotonic() - outcome)  # the wall clock then
                    self.ready_times.append(ReadyTime(component, state, seconds, attempt, at))
                    self._log.info(
                        f"started {cmd.name} with pid {cmd.pid}, ready after {seconds:.1f}s"
                    )
                elif isinstance(outcome, ComponentExited) and attempt <= MAX_RETRIES:
                    ended = describe_exit(cmd.returncode)
                    self._log.info(
                        f"{cmd.name} exited ({ended}); retrying ({attempt}/{MAX_RETRIES})"
                    )
                    cmd.stop("exited before it was ready")
                    again[component] = (argv, attempt + 1)
                elif isinstance(outcome, ComponentExited):
                    raise self._not_ready(cmd, f"{outcome} ({attempt} attempts)")
                elif isinstance(outcome, ComponentNotReady):
                    raise self._not_ready(cmd, str(outcome))
                else:
                    raise outcome
            if again:
                time.sleep(self.retry_delay)
            pending = again

    def _launch(self, state: str, component: str, argv: list[str], *, check_port: bool) -> Cmd:
        """Start ``component`` (not waiting for it); the first attempt checks that its binary is
        there and that no stranger holds its port."""
        name = f"{component}-{state}"
        log_file = self.log_dir / f"{name}.log"
        if check_port:
            binary = argv[binary_index(argv, component)] if component != ETCD else None
            if binary is not None and not os.access(binary, os.X_OK):
                raise ClusterError(f"component binary {binary} for {component} is missing")
            self._check_port(component)
            self._log.info(f"starting {name} (log: {log_file})")
        cmd = Cmd(name, self._exec_argv(argv), log_file=log_file, env=self._env)
        # Noted in the host lock's ledger before it runs: a SIGKILL of ours in between would
        # otherwise leave a component that no successor knows to stop.
        cmd.start(before_run=lambda who: self._lock.record(name, who.pid))
        self.running[component] = cmd
        return cmd

    def _wait_all(self, started: Mapping[str, Cmd]) -> dict[str, float | BaseException]:
        """Wait for every started component at the same time; per component, when it was ready
        (``time.monotonic()``) or why not. A wait ends by itself once its process is stopped."""
        outcomes: dict[str, float | BaseException] = {}

        def wait(component: str, cmd: Cmd) -> None:
            try:
                self._wait_ready(component, cmd)
                outcomes[component] = time.monotonic()
            except Exception as exc:  # said by the caller, in the caller's thread
                outcomes[component] = exc

        if len(started) == 1:
            for component, cmd in started.items():
                wait(component, cmd)
            return outcomes
        threads = [
            threading.Thread(target=wait, args=(c, cmd), name=f"ready:{c}", daemon=True)
            for c, cmd in started.items()
        ]
        for thread in threads:
            thread.start()
        join_all(threads)
        return outcomes

    def _wait_ready(self, component: str, cmd: Cmd) -> None:
        probe = probe_for(component, self._settings_view(), self._tls)
        wait_http_ready(cmd, probe, self.ready_timeout)
        if component == "kubelet" and self.wait_for_nodes:
            api = f"https://{self.setting('API_HOST_IP')}:{self.setting('API_SECURE_PORT')}"
            wait_nodes_ready(cmd, api, self._tls(), self.node_ready_timeout)

    def _settings_view(self) -> dict[str, str]:
        return {name: self.setting(name) for name in {*DEFAULT_SETTINGS, *self.settings}}

    def _not_ready(self, cmd: Cmd, why: str) -> ClusterError:
        return ClusterError(
            f"{cmd.name} did not get ready: {why}; log: {cmd.log_file}; last lines:\n"
            f"{cmd.tail(LOG_TAIL_LINES)}"
        )
