"""What a failed test's report lists: where to look next, as notes of its failure.

A failure on a real cluster is rarely explained by its assertion alone. Its report names a dump
of the DRA objects, pods and events as the server saw them right then, the failing subtest's
driver (every gRPC call it answered, and its log), and the cluster components: which one ended
(with the tail of its log) and where each one's log is. Collecting never hides the failure it
reports: what cannot be collected is said in its place.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from e2e_dra._suite._artifacts import dump_cluster
from e2e_dra._suite._harnesses import Harnesses
from e2e_dra._suite._steps import Entry
from e2e_dra.kube import Kube
from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS

if TYPE_CHECKING:
    from e2e_dra.localupcluster import Cluster


def failure_report(
    entry: Entry,
    *,
    kube: Kube | None,
    harnesses: Harnesses,
    cluster: Cluster | None,
    dumps: Path,
    namespace: str,
) -> list[str]:
    """The report's lines for ``entry``, which failed."""
    lines = []
    if kube is not None:
        lines.append(_dump(kube, dumps, entry.id, namespace))
    name = str(entry.subtest)
    if entry.subtest is not None and harnesses.get(name) is not None:
        calls = harnesses.save_calls(name) or "not seen (a real driver; the kubelet calls it)"
        lines.append(f"e2e-dra: driver {harnesses.driver_name(name)} gRPC calls: {calls}")
        lines.append(f"e2e-dra: driver log: {harnesses.driver_log(name)}")
    lines += component_logs(cluster)
    return lines


def component_logs(cluster: Cluster | None) -> list[str]:
    """Which component ended (with its log's tail), and where every component's log is."""
    if cluster is None:
        return []
    lines = [f"e2e-dra: {line}" for line in cluster.exited()]
    for component in KUBE_CLUSTER_COMPONENTS:
        log = cluster.log_path(component)
        if log is not None:
            lines.append(f"e2e-dra: {component} log: {log}")
    lines.append(f"e2e-dra: all cluster logs: {cluster.log_dir}")
    return lines


def crash_reason(cluster: Cluster | None) -> str | None:
    """Which component ended during the run, named with the tail of its log; None if none."""
    exited = cluster.exited() if cluster is not None else []
    return "component crashed: " + "\n".join(exited) if exited else None


def _dump(kube: Kube, directory: Path, label: str, namespace: str) -> str:
    kube = kube.fresh()  # the run's client may hold connections to a server that restarted
    try:
        dump = dump_cluster(kube, directory, label, namespace)
        return f"e2e-dra: DRA objects, pods and events: {dump}"
    except Exception as exc:  # never let the report hide the failure it reports
        return f"e2e-dra: no dump of the cluster: {exc}"
    finally:
        kube.close()
