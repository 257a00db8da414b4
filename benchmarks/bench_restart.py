"""How much time does the restart engine add to a component restart?

Brings a real cluster up with the previous release and upgrades it to the current one (the whole
``modify`` is timed). Then, per component and round, it measures the component's own
start-to-ready time directly -- the same command line started by hand, its health endpoint polled
every 20 ms -- and restarts it through the engine again. Engine figures are the medians of the
engine's restart-to-ready times (upgrade and rounds), direct ones the medians of the direct runs.
Prints one row per component and the engine's overhead (target: < 10 %).

Needs root, the releases under test and the node runtime (``e2e-dra provision``); holds the host
lock while the cluster runs. Usage: ``python benchmarks/bench_restart.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from e2e_dra.localupcluster import (
    KUBE_CLUSTER_COMPONENTS,
    Cluster,
    Cmd,
    ModifyOptions,
    binary_index,
)
from e2e_dra.localupcluster import _readiness as readiness

DIRECT_POLL = 0.02


def direct_ready_seconds(cluster: Cluster, component: str, log_dir: Path) -> float:
    """Stop the engine's process, start the same command ourselves, time it to ready, hand back."""
    engine_cmd = cluster.running[component]
    argv = list(engine_cmd.argv)
    engine_cmd.stop("benchmark: measuring the component directly")
    direct = Cmd(f"{component}-direct", argv, log_file=log_dir / f"{component}-direct.log",
                 env=cluster._env)  # fmt: skip
    saved_poll, readiness.POLL_INTERVAL = readiness.POLL_INTERVAL, DIRECT_POLL
    try:
        direct.start()
        cluster._launcher.wait_ready(component, direct)
        return time.monotonic() - (direct.started_at or 0.0)
    finally:
        readiness.POLL_INTERVAL = saved_poll
        direct.stop("benchmark: measured")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="direct measurements per component")
    parser.add_argument(
        "--log-dir", type=Path, help="where component logs go (default: a temp dir)"
    )
    args = parser.parse_args()

    from e2e_dra.provision import ensure_node_runtime
    from e2e_dra.releases import versions_under_test

    versions = versions_under_test()
    env = ensure_node_runtime(versions.current.source_dir, check_only=True).env()
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-restart-"))
    with Cluster(versions.current.source_dir, log_dir) as cluster:
        started = time.monotonic()
        cluster.start("0-initial", versions.previous.bin_dir, env)
        start_seconds = time.monotonic() - started
        started = time.monotonic()
        cluster.modify("1-upgraded", ModifyOptions(bin_dir=versions.current.bin_dir))
        modify_seconds = time.monotonic() - started
        direct: dict[str, list[float]] = {c: [] for c in KUBE_CLUSTER_COMPONENTS}
        for round_number in range(args.repeat):
            for component in KUBE_CLUSTER_COMPONENTS:
                direct[component].append(direct_ready_seconds(cluster, component, log_dir))
                # Hand the component back to the engine: a restart with the same binary.
                argv = cluster.command_line(component)
                same = Path(argv[binary_index(argv, component)])
                cluster.modify(
                    f"2-bench-{round_number}-{component}",
                    ModifyOptions(file_by_component={component: same}),
                )
        engine = {
            c: statistics.median(
                t.seconds
                for t in cluster.ready_times
                if t.component == c and t.state != "0-initial"
            )
            for c in KUBE_CLUSTER_COMPONENTS
        }

    print(f"versions: {versions.previous.version} -> {versions.current.version}")
    print(f"cluster start (script + all components): {start_seconds:6.2f}s")
    print(f"modify (upgrade of all 5 components):    {modify_seconds:6.2f}s")
    print(f"{'component':<25}{'engine ready s':>16}{'direct ready s':>16}{'overhead':>10}")
    total_engine = total_direct = 0.0
    for component in KUBE_CLUSTER_COMPONENTS:
        own = statistics.median(direct[component])
        total_engine += engine[component]
        total_direct += own
        overhead = (engine[component] - own) / own * 100 if own else float("nan")
        print(f"{component:<25}{engine[component]:>16.2f}{own:>16.2f}{overhead:>9.1f}%")
    print(f"{'sum':<25}{total_engine:>16.2f}{total_direct:>16.2f}"
          f"{(total_engine - total_direct) / total_direct * 100:>9.1f}%")  # fmt: skip
    print(f"modify vs sum of direct ready times: {(modify_seconds / total_direct - 1) * 100:.1f}%")
    print(f"logs: {log_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
