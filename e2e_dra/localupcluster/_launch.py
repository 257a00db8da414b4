"""Starting the cluster's components and the helper commands the script asks for, and waiting
until the components are ready.

Each component runs in its own process group with its own log (``<component>-<state>.log``). One
that exits before it is ready (its port not yet released, say) is started again, up to
:data:`MAX_RETRIES` times. Components that need nothing but the API server are started at once and
waited for together (:data:`STARTED_TOGETHER`); processes are started and stopped by the caller's
thread alone, only the waits for readiness run side by side.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from e2e_dra.hostkit import join_all, poll
from e2e_dra.localupcluster._commandline import component_binary, require_executable
from e2e_dra.localupcluster._components import (
    DEFAULT_SETTINGS,
    ETCD,
    PORT_SETTING,
    STARTED_TOGETHER,
)
from e2e_dra.localupcluster._environment import runnable
from e2e_dra.localupcluster._errors import ClusterError
from e2e_dra.localupcluster._hostlock import HostLock
from e2e_dra.localupcluster._log import LOG_TAIL_LINES, Log
from e2e_dra.localupcluster._ports import listener, process_group_of
from e2e_dra.localupcluster._readiness import (
    ComponentExited,
    ComponentNotReady,
    probe_for,
    wait_http_ready,
    wait_nodes_ready,
)
from e2e_dra.localupcluster._tls import AdminTLS, admin_tls
from e2e_dra.localupcluster.cmd import Cmd
from e2e_dra.supervise import describe_exit

MAX_RETRIES = 10
"""Restarts of a component that exits before it is ready (e.g. its port not yet released)."""
RETRY_DELAY = 1.0
HELPER_TIMEOUT = 300.0
PORT_RELEASE_GRACE = 5.0

Batch = list[tuple[str, list[str]]]
"""Components (with their command lines) started at once, then waited for together."""


@dataclass(frozen=True)
class ReadyTime:
    """How long one component took from its (last) start to ready, for the benchmark; ``at`` is
    the wall-clock time (``time.time()``) it was ready, so a timeline can place it."""

    component: str
    state: str
    seconds: float
    attempts: int
    at: float = 0.0


class ClusterView(Protocol):
    """What the launcher reads of its cluster, at each use: the cluster's public attributes,
    which a new start replaces (``settings``, ``running``) and a caller may change after
    constructing it (``retry_delay``, as tests do)."""

    source_dir: Path
    log_dir: Path
    wait_for_nodes: bool
    ready_timeout: float
    node_ready_timeout: float
    retry_delay: float
    settings: dict[str, str]
    running: dict[str, Cmd]
    ready_times: list[ReadyTime]

    @property
    def kubeconfig(self) -> Path: ...

    def setting(self, name: str) -> str: ...


class Launcher:
    """Starts what the script names for ``cluster``: components go into its ``running`` (and
    their ready times into its ``ready_times``), helpers into :attr:`helpers`; each process is
    noted in the host lock's ledger before it runs. ``script_pid``: the script's process, which
    may hold a component's port (an older script's etcd)."""

    def __init__(
        self,
        cluster: ClusterView,
        *,
        lock: HostLock,
        log: Log,
        script_pid: Callable[[], int | None],
    ) -> None:
        self._cluster = cluster
        self._lock = lock
        self._log = log
        self._script_pid = script_pid
        self._env: dict[str, str] = {}
        self.helpers: list[Cmd] = []
        self._tls_cache: AdminTLS | None = None
        self._dropped_sudo_said = False

    def begin(self, env: dict[str, str]) -> None:
        """A new start: ``env`` is what its processes get (the caller may still add to it), no
        helper has run, and the TLS material is to be read from its (new) kubeconfig."""
        self._env = env
        self.helpers = []
        self._tls_cache = None

    def start_in_order(self, state: str, together: Batch, component: str, argv: list[str]) -> Batch:
        """``component`` is next in the start order: it joins the components to be started
        together with it (all of them start once the last is named), or they start (and are
        ready) before it does. Returns those still waiting."""
        if component in STARTED_TOGETHER:
            together = [*together, (component, argv)]
            if component != STARTED_TOGETHER[-1]:
                return together
        else:
            self.run_batch(state, together)
            together = [(component, argv)]
        self.run_batch(state, together)
        return []

    def run_batch(self, state: str, batch: Sequence[tuple[str, list[str]]]) -> None:
        """Start every component of ``batch``, then wait until all are ready, restarting one
        while it dies early (its port not yet released, say). Processes are started and stopped
        by this thread alone; only the waits for readiness run side by side."""
        cluster = self._cluster
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
                    cluster.ready_times.append(ReadyTime(component, state, seconds, attempt, at))
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
                time.sleep(cluster.retry_delay)
            pending = again

    def run_helper(self, state: str, name: str, argv: list[str]) -> None:
        """Run a command the script asks for (kubectl, say) to its end; fail when it fails."""
        cmd = Cmd(
            name,
            self._exec_argv(argv),
            log_file=self._cluster.log_dir / f"{name}-{state}.log",
            env=self._env,
            cwd=self._cluster.source_dir,
            capture=True,
        )
        self.helpers.append(cmd)
        cmd.start(before_run=lambda who: self._lock.record(cmd.name, who.pid))
        returncode = cmd.wait(timeout=HELPER_TIMEOUT)
        if returncode != 0:
            raise ClusterError(
                f"{name} command failed ({describe_exit(returncode)}): {' '.join(argv)}\n"
                f"{cmd.tail(LOG_TAIL_LINES)}"
            )

    def wait_ready(self, component: str, cmd: Cmd) -> None:
        """Until ``component`` (run by ``cmd``) answers on its health endpoint, and for the
        kubelet (unless the cluster does not wait for nodes) until every node is Ready."""
        cluster = self._cluster
        settings = {name: cluster.setting(name) for name in {*DEFAULT_SETTINGS, *cluster.settings}}
        probe = probe_for(component, settings, self._tls)
        wait_http_ready(cmd, probe, cluster.ready_timeout)
        if component == "kubelet" and cluster.wait_for_nodes:
            api = f"https://{cluster.setting('API_HOST_IP')}:{cluster.setting('API_SECURE_PORT')}"
            wait_nodes_ready(cmd, api, self._tls(), cluster.node_ready_timeout)

    # -- internals -----------------------------------------------------------------------------

    def _launch(self, state: str, component: str, argv: list[str], *, check_port: bool) -> Cmd:
        """Start ``component`` (not waiting for it); the first attempt checks that its binary is
        there and that no stranger holds its port."""
        name = f"{component}-{state}"
        log_file = self._cluster.log_dir / f"{name}.log"
        if check_port:
            if component != ETCD:
                require_executable(component_binary(argv, component), component)
            self._check_port(component)
            self._log.info(f"starting {name} (log: {log_file})")
        cmd = Cmd(name, self._exec_argv(argv), log_file=log_file, env=self._env)
        # Noted in the host lock's ledger before it runs: a SIGKILL of ours in between would
        # otherwise leave a component that no successor knows to stop.
        cmd.start(before_run=lambda who: self._lock.record(name, who.pid))
        self._cluster.running[component] = cmd
        return cmd

    def _check_port(self, component: str) -> None:
        """Fail when a process that is not ours listens on ``component``'s port: a stranger there
        makes the component fail in confusing ways."""
        port = self._cluster.setting(PORT_SETTING[component])
        if not port.isdecimal() or int(port) == 0:
            return
        holder = poll(  # a socket without a visible owner is usually being released
            lambda: listener(int(port)),
            timeout=PORT_RELEASE_GRACE,
            interval=0.1,
            until=lambda found: found is None or found.pid is not None,
        ).value
        if holder is None:
            return
        ours = {cmd.pid for cmd in self._cluster.running.values()} | {self._script_pid()}
        if holder.pid is not None and process_group_of(holder.pid) in ours:
            return
        raise ClusterError(
            f"cannot start {component}: {holder.describe()}; stop it first (another cluster?)"
        )

    def _wait_all(self, started: Mapping[str, Cmd]) -> dict[str, float | BaseException]:
        """Wait for every started component at the same time; per component, when it was ready
        (``time.monotonic()``) or why not. A wait ends by itself once its process is stopped."""
        outcomes: dict[str, float | BaseException] = {}

        def wait(component: str, cmd: Cmd) -> None:
            try:
                self.wait_ready(component, cmd)
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

    def _tls(self) -> AdminTLS:
        """The admin kubeconfig's TLS material, read once per start (once the script wrote it)."""
        if self._tls_cache is None:
            self._tls_cache = admin_tls(self._cluster.kubeconfig)
        return self._tls_cache

    def _exec_argv(self, argv: list[str]) -> list[str]:
        words, dropped_sudo = runnable(argv, self._env)
        if dropped_sudo and not self._dropped_sudo_said:
            self._log.info(
                "running as root without sudo installed: starting commands without 'sudo'"
            )
            self._dropped_sudo_said = True
        return words

    def _not_ready(self, cmd: Cmd, why: str) -> ClusterError:
        return ClusterError(
            f"{cmd.name} did not get ready: {why}; log: {cmd.log_file}; last lines:\n"
            f"{cmd.tail(LOG_TAIL_LINES)}"
        )
