"""What several subtests share beyond the builder: the driver's device pools, the API versions
they name, a claim with the pod that uses it, and the check that a pod lived through a restart
untouched.

A subtest module imports this and the builder, never another subtest module: each reads on its
own, as upstream's do.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from e2e_dra.builder import (
    DEFAULT_ENV,
    POD_START_TIMEOUT,
    RESOURCE_V1,
    SCHEDULING_V1BETA1,
    Builder,
    NotFound,
    PodFailed,
    Written,
    event_time,
    is_unschedulable,
    object_path,
    request,
    resource_of,
    retrying,
)
from e2e_dra.driver import GRPCCall, Pool, claim_env_name, node_devices
from e2e_dra.subtest import PHASES, Context, IndependentPhase, Phase
from e2e_dra.waits import WaitTimeout, eventually

__all__ = [
    "CLAIMS_VERSIONS",
    "RESOURCE_V1",
    "RESOURCE_V1BETA1",
    "RESOURCE_V1BETA2",
    "SCHEDULING_V1BETA1",
    "TAINT_RULES_IGNORED",
    "TAINT_RULES_IGNORED_SIGN",
    "Running",
    "allocated",
    "checkpoint_entry",
    "checkpointed_devices",
    "claim_and_pod",
    "claim_env",
    "claim_where",
    "container_states",
    "devices_per_node",
    "every_phase",
    "fits_and_runs",
    "kubelet_version",
    "nudge",
    "older_writes_hold",
    "remove",
    "request_env",
    "running",
    "scheduler_found_no_fit",
    "scheduler_reported",
    "still_untouched",
]

TAINT_RULES_IGNORED = (
    "the scheduler's DeviceTaintRule informer reads v1beta2 and its handlers expect v1alpha3: "
    "rules are ignored, and a panic follows once a rule exists and a ResourceSlice changes "
    "(fixed in 1.36.3 by kubernetes#139681)"
)
TAINT_RULES_IGNORED_SIGN = (
    r"\*v1beta2\.DeviceTaintRule, not \*v1alpha3\.DeviceTaintRule"
    r"|should be Pending and unschedulable"
    r"|DeviceTaintRule \S+ taints the device"
)
"""kubernetes#139651 as the subtests that make DeviceTaintRules see it: the panic (the component
net quotes it), or a pod scheduled onto a device a rule taints (the allocation oracle's words
for it)."""

SCHEDULER = "kube-scheduler"
# An annotation nudge() changes so that the kubelet syncs the pod at once.
NUDGE = "e2e-dra/nudge"
# pkg/kubelet/cm/dra/manager.go: draManagerStateFileName, in the kubelet's root directory.
CHECKPOINT = "dra_manager_state"
# A checkpoint of a few thousand claims is far below this; a larger file is not read whole.
MAX_CHECKPOINT_BYTES = 16 << 20
CLAIM_GONE_TIMEOUT = 60.0
SCHEDULER_EVENT_TIMEOUT = 60.0
NO_FIT = '"Unable to schedule pod; no fit; waiting"'
"""What every kube-scheduler from 1.34 on logs (at -v=2; local-up-cluster runs it at 3) when it
tried a pod and found no node and devices for it, with ``pod="<namespace>/<name>"``."""
NO_DEVICES = "cannot allocate all claims"
"""The DRA plugin's reason in a no-fit (every release from 1.34 on): no devices for the claims."""
LOG_TAIL = 32 << 20
"""Bytes of the end of a component's log read for its decisions (a phase's worth is far less)."""
KLOG_TIME = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})")

RESOURCE_V1BETA1 = "resource.k8s.io/v1beta1"
RESOURCE_V1BETA2 = "resource.k8s.io/v1beta2"

CLAIMS_VERSIONS = {
    "<1.38.0-alpha.0": RESOURCE_V1BETA1,
    ">=1.38.0-alpha.0": RESOURCE_V1BETA2,
}
"""The oldest version of ResourceClaims a release serves, by release (for
``Builder.api_version_by_release``): upstream uses v1beta1, which 1.38 no longer serves."""


def devices_per_node(count: int) -> Callable[[Sequence[str]], list[Pool]]:
    """Upstream's DriverResourcesNow(nodes, count): on each node a pool named after the node
    with one slice of devices ``device-00`` .. ``device-<count-1>``."""

    def resources(nodes: Sequence[str]) -> list[Pool]:
        return [pool for node in nodes for pool in node_devices(node, count)]

    return resources


def claim_and_pod(b: Builder, claim: dict | None = None) -> tuple[dict, dict]:
    """``claim`` (by default: the next external claim) and a pod that uses it, not created."""
    claim = b.external_claim() if claim is None else claim
    return claim, b.pod_external(claim["metadata"]["name"])


@dataclass(frozen=True)
class Running:
    """What makes a running pod the same pod later: its uid, and each container's id, restart
    count and start time."""

    name: str
    uid: str
    containers: dict[str, tuple[str, int, str]]  # name -> (containerID, restartCount, startedAt)


def request_env(claim_name: str, request_name: str) -> str:
    """The env line the test driver gives a container for request ``request_name`` of claim
    ``claim_name``: ``claim_<claim>_<request>=true`` (upstream's naming, as the driver spells
    it)."""
    return f"{claim_env_name(claim_name, request_name)}=true"


def claim_env(*claims: dict) -> list[str]:
    """The env lines the test driver gives a container that uses all requests of ``claims``:
    :func:`request_env` for each request, and the lines of the builder's default opaque config
    (``user_a=b``)."""
    lines = [
        request_env(claim["metadata"]["name"], each["name"])
        for claim in claims
        for each in claim["spec"]["devices"]["requests"]
    ]
    return [*lines, *DEFAULT_ENV]


def claim_where(b: Builder, attribute: str, value: str) -> dict:
    """A claim for one device of this driver whose string ``attribute`` is ``value`` (not
    created): for a check that must name the device a claim may get."""
    selector = f'device.attributes["{b.driver_name}"].{attribute} == "{value}"'
    return b.external_claim(requests=[request(selectors=[selector])])


def allocated(b: Builder, claim: str) -> list[dict]:
    """The allocation results of claim ``claim`` as the API has them now (empty: none)."""
    allocation = (retrying(b.get)("resourceclaims", claim).get("status") or {}).get("allocation")
    return list(((allocation or {}).get("devices") or {}).get("results") or [])


def every_phase(check: Callable[[Context], None], phases: int = len(PHASES)) -> Phase:
    """The initial phase of a chain that runs ``check`` in each of its ``phases`` phases: for a
    subtest whose every phase checks the components of that state anew, with nothing that
    spans a restart. The last phase returns None, as a chain's last phase does; a phase that a
    known bug broke does not end the chain (see :class:`~e2e_dra.subtest.IndependentPhase`)."""
    return IndependentPhase(check, 0, phases)


def remove(b: Builder, pods: Sequence[dict], claims: Sequence[dict]) -> None:
    """Delete ``pods``, then ``claims`` (which their pods released), each waited for until gone:
    for a check whose next step needs the devices they held."""
    for pod in pods:
        b.delete_pod_and_wait(pod["metadata"]["name"])
    for claim in claims:
        b.delete("resourceclaims", claim["metadata"]["name"])
        b.wait_gone("resourceclaims", claim["metadata"]["name"], timeout=CLAIM_GONE_TIMEOUT)


WAITS_FOR_A_POOL = "is currently being updated"
"""The allocator's verdict while a resource pool is incomplete (its slices being replaced); for a
request of all devices, a pool of *any* driver blocks it. The scheduler tries again once the pool
is whole, so this verdict is no answer yet (seen when another subtest's driver republished)."""


def fits_and_runs(
    b: Builder,
    pod: dict,
    timeout: float = POD_START_TIMEOUT,
    env: Sequence[str] = DEFAULT_ENV,
    watch: Callable[[], None] | None = None,
) -> None:
    """``pod`` runs and sees its devices (``b.test_pod``); for a pod whose devices are free now,
    one the scheduler finds unschedulable fails at once with the scheduler's reason, instead of
    waiting out the timeout for something that cannot come, unless the reason is a pool being
    updated (:data:`WAITS_FOR_A_POOL`), which passes. ``watch`` runs before each look and may
    raise to end the wait with a cause of its own."""
    name = pod["metadata"]["name"]

    def probe() -> str | None:
        if watch is not None:
            watch()
        now = b.read_pod(name)
        if is_unschedulable(now):
            scheduled = [
                c for c in now["status"].get("conditions", []) if c.get("type") == "PodScheduled"
            ]
            said = scheduled[0].get("message", "") if scheduled else ""
            if WAITS_FOR_A_POOL not in said:
                raise PodFailed(f"pod {name} is unschedulable, though its devices are free: {said}")
        if cdi := cdi_refused(now):
            raise PodFailed(f"pod {name} cannot start: {cdi}")
        return now.get("status", {}).get("phase")

    eventually(probe, what=f"pod {name} to run", timeout=timeout, until=lambda p: p == "Running")
    b.test_pod(pod, env, timeout=timeout)


def cdi_refused(pod: dict) -> str | None:
    """The runtime's refusal of a container's CDI devices, if one is waiting on it. A driver
    writes a claim's CDI spec before NodePrepareResources returns, so a device the runtime cannot
    resolve then is the driver's error, which retrying does not mend in time."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        message = str(waiting.get("message", ""))
        if waiting.get("reason") == "CreateContainerError" and "CDI" in message:
            return f"{waiting['reason']}: {message[:400]}"
    return None


def kubelet_version(b: Builder, node: str) -> str:
    """The version of the kubelet that runs on ``node`` now, as the kubelet reports it."""
    status = retrying(b.get)("nodes", node).get("status", {})
    return str(status.get("nodeInfo", {}).get("kubeletVersion"))


def running(b: Builder, pod_name: str) -> Running:
    """The pod ``pod_name`` as it runs now, to compare with after a restart; a container that
    does not run counts as started at ``""``."""
    now = retrying(b.read_pod)(pod_name)
    return Running(now["metadata"]["name"], now["metadata"]["uid"], container_states(now))


def container_states(pod: dict) -> dict[str, tuple[str, int, str]]:
    """Each container of ``pod`` (a pod as read) as what makes it the same container later:
    name -> (containerID, restartCount, running since; "" when it does not run)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return {
        c["name"]: (
            c.get("containerID", ""),
            c.get("restartCount", 0),
            ((c.get("state") or {}).get("running") or {}).get("startedAt", ""),
        )
        for c in statuses
    }


def still_untouched(
    b: Builder, before: Running, claims: Sequence[str], env: Sequence[str] = DEFAULT_ENV
) -> None:
    """The pod ``before`` describes still runs untouched after a restart: the same pod (uid), the
    same containers, running since the same moment and none restarted, each claim in ``claims``
    still reserved for it, and its containers still see their devices (``env``). A kubelet
    upgrade that restarts or stops running containers, or loses a claim's reservation, fails
    here."""
    where = f"pod {before.name}"
    # The containers answer first: right after a restart the pod's status may still be the one
    # the previous kubelet wrote; once the new one execs in the pod, it has synced the status.
    try:
        for container in before.containers:
            b.check_container_env(before.name, container, env)
    except Exception as exc:
        _same_containers(b, before, where)  # the likelier cause, said plainly
        exc.add_note(f"e2e-dra: {where} now: {running(b, before.name)}")
        raise
    _same_containers(b, before, where)
    for claim_name in claims:
        claim = retrying(b.get)("resourceclaims", claim_name)
        reserved = [r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []]
        assert before.uid in reserved, (
            f"ResourceClaim {claim_name} is no longer reserved for {where} "
            f"(reservedFor: {reserved})"
        )


def _same_containers(b: Builder, before: Running, where: str) -> None:
    now = running(b, before.name)
    assert now.uid == before.uid, f"{where} was replaced: uid {before.uid} is now {now.uid}"
    changed = {
        name: (was, now.containers.get(name))
        for name, was in before.containers.items()
        if now.containers.get(name) != was
    }
    assert not changed, (
        f"{where}: containers stopped, restarted or replaced since the last phase "
        f"((containerID, restartCount, running since) before -> now): {changed}"
        f"{_why_not_running(b, before.name)}"
    )


def _why_not_running(b: Builder, pod_name: str) -> str:
    """What the pod's status says when it no longer runs, such as a kubelet's eviction ("the pod
    is Failed: Evicted: ... DiskPressure"), to follow a failure's message; else nothing."""
    status = retrying(b.read_pod)(pod_name).get("status") or {}
    phase, reason = status.get("phase"), status.get("reason")
    if phase == "Running" and not reason:
        return ""
    said = f": {reason}: {str(status.get('message') or '').strip()}" if reason else ""
    return f"; the pod is {phase}{said}"


def scheduler_reported(
    ctx: Context,
    pod_name: str,
    reason: str,
    b: Builder | None = None,
    timeout: float = SCHEDULER_EVENT_TIMEOUT,
) -> dict:
    """Until the scheduler that runs now reports event ``reason`` about pod ``pod_name`` (in
    ``b``'s namespace; the phase's builder by default); the event. Proof that this scheduler
    looked at the pod itself: a pod's status after a restart may still be what the scheduler
    before it wrote. "Now" is when the running scheduler's process started (``ctx.started``).
    """
    b = b or ctx.builder
    if SCHEDULER not in ctx.started:
        raise AssertionError(f"{ctx.phase}: when the {SCHEDULER} started is not known")
    since = datetime.fromtimestamp(ctx.started[SCHEDULER], UTC)
    selector = f"involvedObject.name={pod_name},reason={reason}"
    found = eventually(
        lambda: [e for e in b.list("events", fieldSelector=selector) if event_time(e) >= since],
        what=(
            f"the {SCHEDULER} started at {since:%H:%M:%S.%f} (UTC) to report {reason} about "
            f"pod {pod_name}"
        ),
        timeout=timeout,
    )
    return found[-1]


def scheduler_found_no_fit(
    ctx: Context,
    pod_name: str,
    namespace: str | None = None,
    timeout: float = SCHEDULER_EVENT_TIMEOUT,
    reason: str = NO_DEVICES,
) -> str:
    """Until the scheduler that runs now has tried pod ``pod_name`` (in ``namespace``; the
    phase's by default) with the devices as the drivers publish them now, and found no fit; the
    line it logged. Proof that the verdict is this scheduler's own, on today's devices: the
    pod's status may still be what the scheduler before it wrote, and a FailedScheduling event
    may come from the moments a restarted kubelet had wiped the devices (the scheduler tries
    again once they are back, but a repeated event only counts up a series in its memory). So
    the scheduler's log is read: a decision counts when it was logged after the scheduler
    started and after the drivers' last write of their ResourceSlices returned, and only for
    ``reason`` (by default the allocator's: no devices for the pod's claims): a pod that fits
    nowhere for another reason (a node not ready yet) proves nothing about its devices.
    """
    log = ctx.logs.get(SCHEDULER)
    if SCHEDULER not in ctx.started or log is None:
        raise AssertionError(
            f"{ctx.phase}: the running {SCHEDULER} (its start, its log) is not known"
        )
    drivers = [d for d in (ctx.driver, *ctx.others.values()) if d is not None]
    since = max([ctx.started[SCHEDULER], *(d.slices_written_at for d in drivers)])
    needle = f'pod="{namespace or ctx.builder.namespace}/{pod_name}"'

    def decided() -> list[str]:
        return [line for line, at in _logged(log, NO_FIT, needle) if at >= since]

    try:
        found = eventually(
            decided,
            what=(
                f"the {SCHEDULER} to try pod {pod_name} after "
                f"{datetime.fromtimestamp(since, UTC):%H:%M:%S.%f} (UTC; its start, or the "
                f"drivers' last slice write) and find no fit because it {reason!r}, in {log.name}"
            ),
            timeout=timeout,
            until=lambda lines: any(reason in line for line in lines),
        )
    except WaitTimeout as exc:
        if lines := decided():
            raise AssertionError(
                f"{exc}; the last no-fit was for another reason: {lines[-1]}"
            ) from None
        raise
    return [line for line in found if reason in line][-1]


def _logged(log: Path, *needles: str) -> list[tuple[str, float]]:
    """The klog lines of ``log`` (its last :data:`LOG_TAIL` bytes) that hold every one of
    ``needles``, each with when it was logged (``time.time()``; klog writes local time)."""
    with log.open("rb") as f:
        f.seek(max(0, f.seek(0, 2) - LOG_TAIL))
        text = f.read(LOG_TAIL).decode("utf-8", "replace")
    now = time.time()
    found = []
    for line in text.splitlines():
        if not all(n in line for n in needles):
            continue
        stamp = KLOG_TIME.match(line)
        if stamp is None:
            continue
        found.append((line.strip()[:600], _klog_time(stamp, now)))
    return found


def _klog_time(stamp: re.Match[str], now: float) -> float:
    """When a klog line was written (``time.time()``): klog writes local time without a year,
    so the year is the latest that does not put the line in the future (a line from 31 December
    read on 1 January is last year's)."""
    month, day, hour, minute, second, micro = (int(v) for v in stamp.groups())
    year = time.localtime(now).tm_year
    at = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    if at > now + 86400:  # more than a day ahead: the clock's zone cannot explain that
        at = time.mktime((year - 1, month, day, hour, minute, second, 0, 0, -1))
    return at + micro / 1e6


def nudge(b: Builder, pod_name: str, mark: str) -> None:
    """Have the kubelet sync the pod now rather than at its back-off.

    A kubelet whose sync of a pod failed (a prepare call that failed or ran past its deadline)
    tries again only when its back-off says so, 60 to 90 s later (measured). What a subtest
    proves is what the next sync does, not how long the kubelet backs off; a changed annotation
    is a pod update, which the kubelet handles at once. ``mark`` is the annotation's value: the
    same value again changes nothing, so nothing happens then.
    """
    retrying(b.patch)("pods", pod_name, {"metadata": {"annotations": {NUDGE: mark}}})


def kubelet_checkpoint(ctx: Context) -> dict[str, Any]:
    """The kubelet's DRA checkpoint (``{"Data": "<JSON>", "Checksum": n}``), Data decoded: what
    the kubelet recorded of each claim it prepares, which it hands the runtime and reads back
    after a restart."""
    registry = ctx.real_driver.site.registry_dir if ctx.real_driver else ctx.driver.registry_dir
    return checkpoint_data(registry.parent / CHECKPOINT)


def checkpoint_data(path: Path) -> dict[str, Any]:
    """The kubelet's DRA checkpoint at ``path``, ``Data`` decoded (too big: AssertionError)."""
    with path.open("rb") as file:
        raw = file.read(MAX_CHECKPOINT_BYTES + 1)
    if len(raw) > MAX_CHECKPOINT_BYTES:
        raise AssertionError(f"{path} is over {MAX_CHECKPOINT_BYTES} bytes; not read")
    return json.loads(json.loads(raw)["Data"])


PREPARE = "/NodePrepareResources"
UNPREPARE = "/NodeUnprepareResources"
REGISTRATION = "/NotifyRegistrationStatus"
"""How :func:`driver_calls` names the kubelet's calls of a driver (the ends of their methods)."""


def driver_calls(ctx: Context, method: str, uid: str | None = None) -> list[tuple[int, GRPCCall]]:
    """The calls of ``method`` (``/NodeUnprepareResources``) the kubelet made to the subtest's
    driver, for claim ``uid`` when given, each with its place in the driver's call log (which
    tells calls before a kubelet's restart from those after it)."""
    return [
        (index, call)
        for index, call in enumerate(ctx.driver.calls.records)
        if call.method.endswith(method)
        and (uid is None or any(claim.uid == uid for claim in call.request.claims))
    ]


def checkpoint_entry(ctx: Context, uid: str) -> dict | None:
    """The checkpoint's entry for claim ``uid``; None: there is none."""
    entries = [
        entry
        for entry in kubelet_checkpoint(ctx).get("ClaimInfoStateList") or []
        if entry.get("ClaimUID") == uid
    ]
    assert len(entries) <= 1, f"the checkpoint holds claim {uid} {len(entries)} times"
    return entries[0] if entries else None


def wait_out_of_checkpoint(ctx: Context, uid: str, timeout: float) -> None:
    """Until the kubelet took claim ``uid`` out of its checkpoint (it does once it unprepared
    the claim for its last pod)."""
    eventually(
        lambda: checkpoint_entry(ctx, uid),
        what=f"claim {uid} to leave the kubelet's checkpoint",
        timeout=timeout,
        poll=0.5,
        until=lambda entry: entry is None,
    )


def checkpointed_devices(ctx: Context, uid: str) -> list[dict] | None:
    """The devices the checkpoint holds for claim ``uid`` from our driver; None: no entry."""
    entry = checkpoint_entry(ctx, uid)
    if entry is None:
        return None
    state = (entry.get("DriverState") or {}).get(ctx.builder.driver_name) or {}
    return list(state.get("Devices") or [])


# --- the re-upgrade leg ------------------------------------------------------------------------

OLDER_RELEASE_PHASES = (PHASES[0], PHASES[2])
"""The phases that run on the older release in ``upgrade-downgrade``: before the upgrade and
after the downgrade."""
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def older_writes_hold(ctx: Context) -> None:
    """On the re-upgraded cluster, what the subtest wrote while the older release served:
    each object that still exists reads back with the spec it was sent with, and a write of it
    as read (an update that changes nothing) is accepted; and every such object, also those
    deleted since, is accepted again if sent anew (a server-side dry run, under a generated
    name). What the older release stored and accepted, the newer must read and accept too: a
    field the newer one validates more strictly without ratcheting, or reads back otherwise,
    fails here, naming the object and the phase that wrote it. A chain with nothing else to check
    after the re-upgrade returns this from its after-downgrade phase, as its fourth."""
    b = ctx.builder
    older = [w for w in b.leftovers.written if w.phase in OLDER_RELEASE_PHASES]
    unread = []
    for written in older:
        kind, name = written.obj["kind"], written.obj["metadata"]["name"]
        with ctx.step(f"{kind} {name} written {written.phase}"):
            if why := _still_reads_and_updates(b, written):
                unread.append(f"{kind} {name}: {why}")
            _accepted_again(b, written)
    if unread:  # said, not passed over: the PRR view's "yes" must not rest on reads not made
        ctx.facts[f"older_writes_unread/{ctx.phase}"] = unread
        if len(unread) == len(older):
            ctx.nothing_to_prove(f"no object the older release wrote could be read: {unread}")


def _still_reads_and_updates(b: Builder, written: Written) -> str | None:
    """None when the object read back as sent (and took an update); else why it was not read."""
    sent = {**written.obj, "metadata": {"namespace": b.namespace, **written.obj["metadata"]}}
    resource, name = resource_of(sent), sent["metadata"]["name"]
    group_version = sent["apiVersion"]
    if not b.kube.served(group_version, resource):
        return f"{group_version} is not served any more"
    try:
        now = retrying(b.kube.get)(object_path(sent))
    except NotFound:
        # Deleted since (only sent anew), unless the object is there and only its version's
        # path fails: a skip must not hide a read the check never made.
        assert not _exists(b, resource, name), (
            f"{sent['kind']} {name}, written {written.phase} through {group_version}, exists "
            f"but reads as NotFound through {group_version} on the re-upgraded cluster"
        )
        return "deleted since"
    lost = _not_kept(sent.get("spec"), now.get("spec"), "spec")
    assert not lost, (
        f"{sent['kind']} {name}, written {written.phase} through {group_version}, reads back "
        f"otherwise on the re-upgraded cluster: {lost}"
    )
    # A pod's status moves on; a claim sent as compact JSON would be written back in another
    # spelling, which docs/kubernetes-findings.md finding 1 covers (claim-metadata pins it).
    if sent["kind"] != "Pod" and not written.compact:
        retrying(b.kube.update)(object_path(sent), now)
    return None


def _accepted_again(b: Builder, written: Written) -> None:
    sent = written.obj
    if not b.kube.served(sent["apiVersion"], resource_of(sent)):
        return
    namespace = sent["metadata"].get("namespace")
    if namespace and not _exists(b, "namespaces", namespace):
        return  # the subtest removed the namespace it made: there is nowhere to send it
    again = {k: v for k, v in sent.items() if k != "status"}
    metadata = {k: v for k, v in sent["metadata"].items() if k not in (*SERVER_FIELDS, "name")}
    again["metadata"] = {**metadata, "generateName": sent["metadata"]["name"][:50] + "-"}
    retrying(b.kube.create)(object_path(again, collection=True), again, dryRun="All")


def _exists(b: Builder, resource: str, name: str) -> bool:
    try:
        retrying(b.get)(resource, name)
    except NotFound:
        return False
    return True


def _not_kept(sent: Any, now: Any, where: str) -> list[str]:
    """Where ``now`` lost or changed what ``sent`` said (fields the server added are fine)."""
    if isinstance(sent, dict) and isinstance(now, dict):
        lost = []
        for key, value in sent.items():
            lost += _not_kept(value, now.get(key), f"{where}.{key}")
        return lost
    if isinstance(sent, list) and isinstance(now, list) and len(sent) == len(now):
        pairs = enumerate(zip(sent, now, strict=True))
        return [x for i, (s, n) in pairs for x in _not_kept(s, n, f"{where}[{i}]")]
    return [] if sent == now else [f"{where}: sent {sent!r}, reads {now!r}"]
