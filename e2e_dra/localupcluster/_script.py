"""``hack/local-up-cluster.sh -d``: what it needs, running it, and reading what it prints.

The script keeps all knowledge of how components are configured; with ``-d`` it prints each
long-running component's command line (``RUN <name>: ...``) instead of starting it, and bash traces
its settings (``+ VAR=value``). It keeps running while the engine starts what it printed -- it
approves the kubelet's serving certificate request in that time -- so its output is read by a
thread (:meth:`Cmd.lines`), never blocking it, and reading it can stop (a held node) and go on.

Two generations of the script are supported: older ones start etcd themselves, print
"Local etcd is running..." and sleep, so the script is kept running (it owns etcd) until the cluster
stops; newer ones print etcd as a ``RUN`` line and exit, and their exit status must be 0.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from e2e_dra.localupcluster._components import KUBE_CLUSTER_COMPONENTS
from e2e_dra.localupcluster._environment import inherited
from e2e_dra.localupcluster._errors import ClusterError
from e2e_dra.localupcluster._hostlock import HostLock
from e2e_dra.localupcluster._log import LOG_TAIL_LINES, Log
from e2e_dra.localupcluster._parse import (
    OLD_SCRIPT_READY_LINE,
    RunLine,
    parse_run_line,
    parse_setting,
)
from e2e_dra.localupcluster.cmd import Cmd
from e2e_dra.supervise import describe_exit

SCRIPT_IDLE_TIMEOUT = 600.0
"""A local-up-cluster.sh that prints nothing for this long and does not end is hung."""
SCRIPT_TOOLS = ("cfssl", "cfssljson")
"""What hack/local-up-cluster.sh needs on PATH to write certificates without downloading it."""


def checked_script(source_dir: Path, bin_dir: Path, env: Mapping[str, object]) -> Path:
    """The script of ``source_dir``, once it and the inputs it is given are known to be usable:
    checked before the host lock is taken, so that a wrong input fails at once."""
    script = source_dir / "hack" / "local-up-cluster.sh"
    if not script.is_file():
        raise ClusterError(f"no hack/local-up-cluster.sh in source dir {source_dir}")
    missing = [c for c in KUBE_CLUSTER_COMPONENTS if not os.access(bin_dir / c, os.X_OK)]
    if missing:
        raise ClusterError(f"binary dir {bin_dir} lacks component binaries: {', '.join(missing)}")
    not_text = sorted(k for k, v in env.items() if not isinstance(v, str))
    if not_text:
        raise ClusterError(f"environment values must be strings: {', '.join(not_text)}")
    return script


class DryRun:
    """One run of the script with ``bin_dir``'s binaries, its log ``local-up-cluster-<state>.log``;
    refused at once when the tools the script needs are not on the ``PATH`` it gets.

    ``ended``: the script exited with status 0 (a newer one), nothing of it is left to stop.
    """

    def __init__(
        self,
        state: str,
        script: Path,
        bin_dir: Path,
        *,
        source_dir: Path,
        log_dir: Path,
        env: dict[str, str],
    ) -> None:
        path = inherited(env, "PATH")
        missing_tools = [tool for tool in SCRIPT_TOOLS if not shutil.which(tool, path=path)]
        if missing_tools:
            # The script would try to download them from GitHub, retrying for many minutes where
            # GitHub cannot be reached, before it prints a single command line.
            raise ClusterError(
                f"{' and '.join(missing_tools)} not found on PATH: hack/local-up-cluster.sh needs "
                "them to write the cluster's certificates (put them on PATH and run again)"
            )
        self.cmd = Cmd(
            f"local-up-cluster-{state}",
            ["bash", str(script), "-o", str(bin_dir), "-d"],
            log_file=log_dir / f"local-up-cluster-{state}.log",
            env=env,
            cwd=source_dir,
            capture=True,
        )
        self.ended = False

    def start(self, lock: HostLock, log: Log) -> None:
        """Start the script, noted in the host lock's ledger before it runs."""
        cmd = self.cmd
        log.info(f"running hack/local-up-cluster.sh -d (log: {cmd.log_file})")
        cmd.start(before_run=lambda who: lock.record(cmd.name, who.pid))

    def commands(self, settings: dict[str, str]) -> Iterator[RunLine]:
        """Each command line the script prints, in its order; its settings go into ``settings``
        as they come. Ends when an older script says etcd runs (it keeps running), or when a newer
        one has exited with status 0 (else: an error quoting its log)."""
        for line in self.cmd.lines(idle_timeout=SCRIPT_IDLE_TIMEOUT):
            if OLD_SCRIPT_READY_LINE in line:
                return  # older script: it keeps etcd running until we stop it
            run = parse_run_line(line)
            if run is not None:
                yield run
                continue
            setting = parse_setting(line)
            if setting is not None:
                settings[setting[0]] = setting[1]
        returncode = self.cmd.wait(timeout=SCRIPT_IDLE_TIMEOUT)
        if returncode != 0:
            raise ClusterError(
                f"hack/local-up-cluster.sh failed ({describe_exit(returncode)}); "
                f"log: {self.cmd.log_file}; last lines:\n"
                f"{self.cmd.tail(LOG_TAIL_LINES)}"
            )
        self.ended = True
