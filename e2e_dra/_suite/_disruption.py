"""The disruption net: every subtest's running pod must live through a cluster step untouched.

Upgrading or downgrading a component must not stop, restart or replace the containers of pods
that already run. A subtest proves it for the pods it checks; this net proves it for every pod
of every subtest still running, in any namespace, after every cluster step that restarts
components. A container it cannot mark is a finding too: a net with a hole must say so.

Before the step it records each running pod (uid, and per container its id, restart count and
start time) and writes a marker into each container (a random token in a file). After the step
the pod must be the same: the same uid, each container with the same id, count and start, and
the marker still there. The marker is what the API cannot fake: a kubelet writes a pod's status
before it restarts its containers, so a container replaced during the step can pass a status
check for a while, but a new container has a new filesystem, without the marker.

A second look comes at the end of the phases that follow the step (as the next step starts, or
as the suite's cluster stops): a pod found untouched right after the step and still there must
still run the same containers, not restarted since. A kubelet that restarts a container a minute
after its own restart, once a re-prepare or a health report failed, passes the first look. A pod
its subtest deleted meanwhile is no finding.

A pod its subtest expects to be disrupted (a reboot, an eviction) carries the annotation
:data:`DISRUPTION_ANNOTATION` (the reason) and is not checked. A broken pod is a finding of the
subtest that owns it (its ``e2e-dra/subtest`` label): it fails that subtest's next phase,
naming the pod, the step and what changed.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from e2e_dra._suite._nets import Finding
from e2e_dra.builder import (
    DISRUPTION_ANNOTATION,
    SUBTEST_LABEL,
    KubeError,
    NotFound,
    Pods,
    label_selector,
)
from e2e_dra.kube import Kube, path, retrying
from e2e_dra.subtest_kit import container_states
from e2e_dra.waits import WaitTimeout, eventually

MARKER = "/tmp/e2e-dra-marker"
MARKER_TIMEOUT = 120.0
"""How long after a restart the kubelet may take to serve exec in a pod again."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Container:
    """What makes a container the same one later."""

    id: str
    restarts: int
    started: str
    marker: str | None  # None: the marker could not be written (said once, not checked)


@dataclass(frozen=True)
class PodRecord:
    namespace: str
    name: str
    uid: str
    owner: str
    containers: dict[str, Container]


def _running(pod: dict) -> bool:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    return (
        status.get("phase") == "Running"
        and not pod["metadata"].get("deletionTimestamp")
        and bool(containers)
        and all((c.get("state") or {}).get("running") for c in containers)
    )


class DisruptionNet:
    """Records the subtests' running pods before a cluster step, and says after it which ones
    the step touched."""

    def __init__(self, suite_labels: dict[str, str]) -> None:
        self.selector = label_selector(suite_labels)  # the suite's pods: every subtest's
        self._before: list[PodRecord] = []
        self._untouched: list[PodRecord] = []  # found untouched after the last step
        self._step = ""
        self._found: list[Finding] = []

    def before(self, kube: Kube, step: str, owners: Collection[str]) -> None:
        """Take the second look at the pods of the step before, then record the running pods
        of ``owners`` (the subtests still running) and mark their containers, as ``step``
        starts."""
        self.second_look(kube)
        self._step, self._before = step, []
        # Every namespace: a subtest may run pods in namespaces of its own (admin access).
        listed = retrying(kube.list)(path("v1", "pods"), labelSelector=self.selector)
        for pod in listed:
            owner = (pod["metadata"].get("labels") or {}).get(SUBTEST_LABEL, "")
            annotations = pod["metadata"].get("annotations") or {}
            if owner not in owners or DISRUPTION_ANNOTATION in annotations or not _running(pod):
                continue
            namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            pods = Pods(kube, namespace, labels={}, log=logger.info)
            containers = {}
            for container, (cid, restarts, started) in container_states(pod).items():
                marker = _write_marker(pods, name, container)
                if marker is None:  # a net with a hole must say so
                    self._found.append(
                        Finding(
                            owner,
                            f"the disruption net could not mark container {container} of pod "
                            f"{namespace}/{name} before the {step}: a restart of it during the "
                            "step cannot be told from its status alone",
                        )
                    )
                containers[container] = Container(cid, restarts, started, marker)
            self._before.append(
                PodRecord(namespace, name, pod["metadata"]["uid"], owner, containers)
            )
        logger.info(f"disruption net: {len(self._before)} running pods recorded before {step}")

    def after(self, kube: Kube) -> None:
        """Compare every recorded pod with what runs now; what changed becomes a finding of
        the pod's subtest."""
        for record in self._before:
            pods = Pods(kube, record.namespace, labels={}, log=logger.info)
            problem = self._changed(pods, record)
            if problem is not None:
                where = f"pod {record.namespace}/{record.name} of {record.owner}"
                self._found.append(
                    Finding(record.owner, f"{where} was disrupted by the {self._step}: {problem}")
                )
            else:
                self._untouched.append(record)
        self._before = []

    def second_look(self, kube: Kube) -> None:
        """The pods found untouched after the last step, once the phases after it ran
        (:func:`restarted_since`)."""
        records, self._untouched = self._untouched, []
        if records:
            listed = retrying(kube.list)(path("v1", "pods"), labelSelector=self.selector)
            self._found += restarted_since(records, listed, self._step)

    def take(self) -> list[Finding]:
        found, self._found = self._found, []
        return found

    def _changed(self, pods: Pods, record: PodRecord) -> str | None:
        """What changed in the pod ``record`` describes; None if nothing did. Until the
        kubelet serves exec in the pod again (right after its restart it answers "pod does not
        exist" for a while) the pod's status is read again each time: a container that is gone
        shows there once the kubelet has synced the pod."""
        try:
            return eventually(
                lambda: self._compare(pods, record),
                what=f"pod {record.name} to answer exec",
                timeout=MARKER_TIMEOUT,
                retry_on=(KubeError,),
                until=lambda _: True,
            )
        except WaitTimeout as exc:
            return f"its containers did not answer for {MARKER_TIMEOUT:.0f}s ({exc})"

    def _compare(self, pods: Pods, record: PodRecord) -> str | None:
        """One look: the pod, its containers' statuses, then their markers (an exec the kubelet
        cannot serve yet raises KubeError: look again)."""
        try:
            now = retrying(pods.read_pod)(record.name)
        except NotFound:
            return "it is gone"
        if now["metadata"]["uid"] != record.uid:
            return f"it was replaced (uid {record.uid} is now {now['metadata']['uid']})"
        if now["metadata"].get("deletionTimestamp"):
            return "it is being deleted"
        changed = _changed_containers(record, now)
        if changed:
            return (
                "containers stopped, restarted or replaced ((containerID, restartCount, running "
                f"since) before -> now): {changed}"
            )
        for container, kept in record.containers.items():
            if kept.marker is None:
                continue
            read = _read_marker(pods, record.name, container)
            if read != kept.marker:
                return (
                    f"container {container} is not the one that ran before the step: the marker "
                    f"written into it is {'gone' if read is None else 'different'}, although its "
                    "status is unchanged"
                )
        return None


def _changed_containers(record: PodRecord, pod: dict) -> dict[str, tuple[Any, Any]]:
    """The containers of ``record`` that ``pod`` (as read) no longer runs as they were:
    name -> ((containerID, restartCount, running since) then, the same now)."""
    was = {c: (k.id, k.restarts, k.started) for c, k in record.containers.items()}
    pairs = {c: (w, container_states(pod).get(c)) for c, w in was.items()}
    return {c: pair for c, pair in pairs.items() if pair[0] != pair[1]}


def restarted_since(records: list[PodRecord], listed: list[dict], step: str) -> list[Finding]:
    """Of ``records`` (pods found untouched right after ``step``), those that, as ``listed`` now,
    run other containers or restarted them; a pod deleted (or made again) by its subtest, being
    deleted, or now expected by its subtest to be disrupted is none of them."""
    now = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in listed}
    found = []
    for record in records:
        pod = now.get((record.namespace, record.name))
        if pod is None or pod["metadata"]["uid"] != record.uid:
            continue
        annotations = pod["metadata"].get("annotations") or {}
        if pod["metadata"].get("deletionTimestamp") or DISRUPTION_ANNOTATION in annotations:
            continue
        changed = _changed_containers(record, pod)
        if changed:
            where = f"pod {record.namespace}/{record.name} of {record.owner}"
            found.append(
                Finding(
                    record.owner,
                    f"{where}, untouched right after the {step}, had its containers stopped, "
                    "restarted or replaced in the phases after it ((containerID, restartCount, "
                    f"running since) after the step -> now): {changed}",
                )
            )
    return found


def _write_marker(pods: Pods, pod: str, container: str) -> str | None:
    token = secrets.token_hex(8)
    try:
        retrying(pods.exec, timeout=30)(pod, container, ["sh", "-c", f"echo {token} > {MARKER}"])
    except Exception as exc:  # an image without sh or a writable /tmp: status checks only
        logger.warning(f"disruption net: no marker in {pod}/{container} ({exc})")
        return None
    return token


def _read_marker(pods: Pods, pod: str, container: str) -> str | None:
    """The marker in the container; None when there is none (a new container)."""
    stdout, _ = pods.exec(pod, container, ["sh", "-c", f"cat {MARKER} 2>/dev/null || :"])
    return stdout.strip() or None
