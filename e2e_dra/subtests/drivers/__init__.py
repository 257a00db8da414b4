"""The real drivers' chain: what every real DRA driver must keep true across upgrade, downgrade
and re-upgrade, whoever wrote it.

One subtest per driver of ``E2E_DRA_DRIVERS`` (``driver-upstream``, ``driver-example-v0.4.0``).
Nothing here knows a driver's internals; each rule comes from what the kubelet and the API
promise a driver's users:

- its ResourceSlices are published, and after every step they are back with the same devices;
- a claim is allocated from those slices and prepared: the pod runs and sees its device (the
  environment the driver's CDI spec for that claim sets);
- a pod prepared before a step runs on untouched after it (same containers, nothing restarted,
  its claim still reserved, its device still seen);
- a new claim after the step works;
- a deleted pod's claim is unprepared: the kubelet's checkpoint lets go of it, and no CDI spec
  or file of the driver's own (its checkpoint) names it any more;
- a driver that follows the kubelet's release (``upstream``) is upgraded and downgraded with
  it, with prepared claims in place, and the rules above hold across that change too: after the
  upgrade on its own (the kubelet restarted beside the old build), at the downgrade and the
  re-upgrade together with the kubelet (replaced while the kubelet is down);
- a driver stopped past the kubelet's wipe delay loses nothing: the prepared pod runs on, a new
  pod waits, an unprepare asked meanwhile happens once it is back, the waiting pod then starts;
- a driver that can run two instances at once (it takes a pod UID) is updated as a DaemonSet
  with maxSurge does, and the kubelet restarts in the overlap: pods start while both are
  registered, before and after that restart; the old instance leaving loses nothing; a newer
  instance that crashes after registering leaves the kubelet on the one still serving.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from e2e_dra.builder import Builder
from e2e_dra.driver import (
    CLEANUP_AFTER_RESTART,
    DriverError,
    DriverKind,
    ProcessDriver,
    pools_complete,
)
from e2e_dra.kube import Kube, retrying
from e2e_dra.subtest import (
    DRIVER_SUBTEST_PREFIX,
    PHASES,
    Context,
    Phase,
    Subtest,
    WhileKubeletDown,
)
from e2e_dra.subtest_kit import (
    Running,
    checkpoint_entry,
    fits_and_runs,
    running,
    still_untouched,
)
from e2e_dra.waits import WaitTimeout, eventually

UNPREPARE_TIMEOUT = 150.0
"""From a pod's deletion to its claim unprepared: the kubelet's pod sync, then the DRA manager's
once-a-minute reconcile for a claim it missed, twice."""
CLEANUP_GRACE = 10.0
"""From the kubelet letting go of a claim to the driver's files for it gone: the kubelet drops a
claim from its checkpoint only once the driver's NodeUnprepareResources returned, so a driver
has cleaned up by then; the grace is for one that removes its files just after answering."""
WIPE_DELAY = 30.0
"""The kubelet wipes a driver's ResourceSlices this long after the driver went away
(kubernetes#141912); a driver's downtime in the suite lasts longer than that."""
DOWNTIME = WIPE_DELAY + 10.0
DEVICES_SETTLE = 60.0
DOWNTIME_PHASE = 1
"""The phase in which the driver goes away for :data:`DOWNTIME` (after the upgrade)."""
ROLLING_PHASE = 2
"""The phase in which a driver that can run two instances at once begins a rolling update, as a
DaemonSet with maxSurge does (after the downgrade); the re-upgrade restarts the kubelet with both
instances registered, and the next phase ends the update."""


def driver_subtests(kinds: Sequence[DriverKind]) -> list[Subtest]:
    """One subtest per real driver, named after it."""
    return [
        Subtest(name=f"{DRIVER_SUBTEST_PREFIX}{kind.label}", initial=_first, node_driver=kind)
        for kind in kinds
    ]


@dataclass(frozen=True)
class _Claimed:
    """A running pod with one claim, as the driver prepared it."""

    pod: dict  # as created
    claim: str  # the claim's name
    uid: str
    env: tuple[str, ...]  # what the driver's CDI spec for the claim sets
    instance: int  # which of the driver's instances prepared it

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


@dataclass(frozen=True)
class _Held:
    """What one phase leaves the next: the pod that must run on untouched through every step,
    the pod whose claim the next phase deletes and sees unprepared, the devices published, the
    kubelet releases met so far, and the driver's replacement asked of the next step."""

    kept: Running
    kept_claim: _Claimed
    passing: _Claimed
    devices: dict[str, list[str]]  # the driver's devices by pool
    kubelets: tuple[str, ...] = ()  # in the order the phases met them
    replaced: WhileKubeletDown | None = None

    def untouched(self, b: Builder) -> None:
        still_untouched(b, self.kept, [self.kept_claim.claim], self.kept_claim.env)


def _first(ctx: Context) -> Phase:
    driver = _driver(ctx)
    b = ctx.builder
    _note(ctx, driver)
    with ctx.step("a DeviceClass selects the driver's devices"):
        _select_driver(b, driver)
    with ctx.step("the driver's ResourceSlices are published"):
        devices = _devices(driver)
    with ctx.step("a pod whose claim the driver prepared runs and sees its device"):
        kept = _claimed_pod(ctx, b, driver, template=False)
    with ctx.step("a second pod with a claim from a template runs"):
        passing = _claimed_pod(ctx, b, driver)
    kubelets = (ctx.releases.get("kubelet", ""),)
    held = _Held(running(b, kept.name), kept, passing, devices, kubelets)
    following = _next(held, 1)
    assert following is not None  # a chain has more than one phase
    return following


def _next(held: _Held, index: int) -> Phase | None:
    if index >= len(PHASES):
        return None

    def after_step(ctx: Context) -> Phase | None:
        driver = _driver(ctx)
        b = ctx.builder
        with ctx.step("the driver's ResourceSlices are back with the same devices"):
            _same_devices(driver, held.devices)
        leaving = [held.passing]
        if driver.surging:  # a rolling update begun the phase before spans the step
            leaving += _rolling_update_ends(ctx, b, driver, held)
        if held.replaced is not None and held.replaced.happened():
            ctx.log(f"{ctx.phase}: {held.replaced.what}: done while the kubelet was down")
        _follow_kubelet(ctx, driver)
        _note(ctx, driver)
        with ctx.step("the pod prepared before the step runs on untouched"):
            held.untouched(b)
        if index == DOWNTIME_PHASE:
            passing = _driver_away(ctx, b, driver, held)
        else:
            with ctx.step("the pods of before deleted: their claims are unprepared"):
                for claimed in leaving:
                    _delete_and_unprepared(ctx, b, driver, claimed)
            if index == ROLLING_PHASE and driver.kind.rolls:
                passing = _rolling_update_begins(ctx, b, driver, held)
            else:
                with ctx.step("a new pod with a new claim runs and sees its device"):
                    passing = _claimed_pod(ctx, b, driver)
        kubelets = (*held.kubelets, ctx.releases.get("kubelet", ""))
        replaced = _replace_with_next_step(ctx, driver, kubelets)
        following = _Held(held.kept, held.kept_claim, passing, held.devices, kubelets, replaced)
        return _next(following, index + 1)

    return after_step


# --- the steps -----------------------------------------------------------------------------------


def _driver(ctx: Context) -> ProcessDriver:
    if ctx.real_driver is None:
        raise AssertionError("the real drivers' chain runs on a real driver, and has none")
    return ctx.real_driver


def _note(ctx: Context, driver: ProcessDriver) -> None:
    """What runs in this phase, kept in summary.json (``driver/<phase>``)."""
    ctx.facts[f"driver/{ctx.phase}"] = driver.describe()
    helper = driver.describe().get("k8s.io/dynamic-resource-allocation")
    ctx.log(f"{ctx.phase}: driver {driver.name}: {driver.kind.label}, helper library {helper}")


def _follow_kubelet(ctx: Context, driver: ProcessDriver) -> None:
    """A driver built for each kubelet release moves with the kubelet: stopped and started
    again as its new build while claims are prepared, as a DaemonSet update does (unless the
    step replaced it already)."""
    kubelet = ctx.releases.get("kubelet", "")
    with ctx.step(f"the driver runs the build for kubelet {kubelet}"):
        driver.switch(kubelet)


def _replace_with_next_step(
    ctx: Context, driver: ProcessDriver, kubelets: tuple[str, ...]
) -> WhileKubeletDown | None:
    """A driver whose build follows the kubelet is replaced during the next cluster step, while
    the kubelet is down, when the chain already met the kubelet release that step brings back
    (the one before this phase's): a node upgraded together with its driver, which the new
    kubelet meets at its start. The upgrade (a release not met yet) moves it after the step."""
    if len(kubelets) < 2 or driver.surging or not driver.changes_for(kubelets[-2]):
        return None
    following = kubelets[-2]

    def replace(kube: Kube) -> None:
        driver.switch(following, wait=False)  # it registers once the kubelet is back

    return ctx.while_kubelet_down(
        f"driver {driver.name} replaced by its build for kubelet {following}", replace
    )


def _select_driver(b: Builder, driver: ProcessDriver) -> None:
    """The subtest's default class selects the driver by the name it really serves under (a
    driver that takes no name has its own)."""
    if driver.name != b.driver_name:
        selector = {"cel": {"expression": f'device.driver == "{driver.name}"'}}
        b.patch("deviceclasses", b.class_name(), {"spec": {"selectors": [selector]}})


def _devices(driver: ProcessDriver) -> dict[str, list[str]]:
    """The driver's devices on its node by pool, from the newest generation of each pool."""
    slices = retrying(driver.slices)()
    assert pools_complete(slices), f"driver {driver.name}: no complete pool: {_names(slices)}"
    newest: dict[str, int] = {}
    for item in slices:
        pool = item["spec"]["pool"]
        newest[pool["name"]] = max(newest.get(pool["name"], 0), int(pool.get("generation", 0)))
    devices: dict[str, list[str]] = {}
    for item in slices:
        pool = item["spec"]["pool"]
        if int(pool.get("generation", 0)) == newest[pool["name"]]:
            names = [d["name"] for d in item["spec"].get("devices") or []]
            devices.setdefault(pool["name"], []).extend(names)
    return {pool: sorted(names) for pool, names in sorted(devices.items())}


def _names(slices: list[dict]) -> list[str]:
    return [s["metadata"]["name"] for s in slices]


def _same_devices(driver: ProcessDriver, before: dict[str, list[str]]) -> None:
    """After a restart, the slices are back (the harness waited) with the devices they had: a
    driver or kubelet that republishes less, more or other devices fails here. Two instances of
    a driver (a rolling update) that republish a pool the kubelet wiped may each write a slice
    of it (each device twice in one generation: a pool the scheduler calls invalid) until one
    sees the other's: they get :data:`DEVICES_SETTLE` seconds to agree."""
    try:
        eventually(lambda: _devices(driver), what="", timeout=DEVICES_SETTLE, until=before.__eq__)
    except WaitTimeout:
        raise AssertionError(
            f"driver {driver.name}: its devices changed across the step (by pool, before -> now, "
            f"{DEVICES_SETTLE:.0f}s later): {before} -> {_devices(driver)}"
        ) from None


def _claim_spec(b: Builder) -> dict:
    """One device of the subtest's class, with no config: a real driver defines its own
    configuration format, which a driver-agnostic check cannot know."""
    spec = b.claim_spec()
    spec["devices"].pop("config", None)
    return spec


def _claimed_pod(
    ctx: Context,
    b: Builder,
    driver: ProcessDriver,
    *,
    template: bool = True,
    refusals: int | None = None,
) -> _Claimed:
    """A pod with a claim (from a template, or its own), running and seeing its device; the
    kubelet failing ``refusals`` times to prepare it fails it (see :func:`_prepared_and_runs`)."""
    if template:
        pod, claim_template = b.pod_inline()
        claim_template["spec"]["spec"] = _claim_spec(b)
        b.create(claim_template, pod)
    else:
        claim = b.external_claim()
        claim["spec"] = _claim_spec(b)
        pod = b.pod_external(claim["metadata"]["name"])
        b.create(claim, pod)
    return _runs_with_device(ctx, b, driver, pod, refusals)


def _runs_with_device(
    ctx: Context, b: Builder, driver: ProcessDriver, pod: dict, refusals: int | None = None
) -> _Claimed:
    """``pod`` runs (an unschedulable verdict fails at once), its claim is allocated from the
    driver's devices, and its containers see what the driver's CDI spec for that claim sets
    (not what e2e-dra's plugin would set)."""
    _prepared_and_runs(ctx, b, driver, pod, refusals or REFUSALS)
    claim = _claim_of(b, pod)
    _allocated_from_driver(claim, driver)
    uid = claim["metadata"]["uid"]
    env = _device_env(ctx, driver, uid)
    for container in pod["spec"]["containers"]:
        b.check_container_env(pod["metadata"]["name"], container["name"], env)
    return _Claimed(pod, claim["metadata"]["name"], uid, env, driver.instance)


def _prepared_and_runs(
    ctx: Context, b: Builder, driver: ProcessDriver, pod: dict, refusals: int
) -> None:
    """``pod`` runs; a pod whose claim the kubelet keeps failing to prepare is said in the
    kubelet's words (``refusals`` failures, or the last one when the wait ends), not as a pod
    that never ran."""
    name = pod["metadata"]["name"]
    log = ctx.logs.get("kubelet")
    start = log.stat().st_size if log is not None and log.exists() else 0
    pod_ref = f'pod="{pod["metadata"].get("namespace", b.namespace)}/{name}"'

    def refused() -> list[str]:
        return _kubelet_said(log, start, _PREPARE_ERROR, pod_ref) if log is not None else []

    def said(failures: list[str]) -> DriverError:
        return DriverError(
            f"driver {driver.name} does not prepare the claim of pod {name}: the kubelet logged "
            f"{len(failures)} failure(s) since the pod was created, the last: {failures[-1]}"
        )

    def watched() -> None:
        if len(failures := refused()) >= refusals:
            raise said(failures)

    try:
        fits_and_runs(b, pod, env=(), watch=watched)
    except WaitTimeout:
        if failures := refused():
            raise said(failures) from None
        raise


def _claim_of(b: Builder, pod: dict) -> dict:
    """The ResourceClaim the pod's first claim resolved to."""
    name = pod["metadata"]["name"]
    now = b.read_pod(name)
    ref = pod["spec"]["resourceClaims"][0]
    claim_name = ref.get("resourceClaimName")
    if claim_name is None:
        statuses = now.get("status", {}).get("resourceClaimStatuses") or []
        claim_name = next((s.get("resourceClaimName") for s in statuses), None)
    assert claim_name, f"pod {name}: no ResourceClaim in its status"
    return b.get("resourceclaims", claim_name)


def _allocated_from_driver(claim: dict, driver: ProcessDriver) -> None:
    """The claim's allocation names devices the driver published, on its node."""
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {})
    results = results.get("results") or []
    name = claim["metadata"]["name"]
    assert results, f"ResourceClaim {name} runs a pod but has no allocated device"
    published = {(p, d) for p, names in _devices(driver).items() for d in names}
    for result in results:
        where = (result.get("pool"), result.get("device"))
        assert result.get("driver") == driver.name and where in published, (
            f"ResourceClaim {name} was allocated {result}, which driver {driver.name} does not "
            f"publish on node {driver.node_name}"
        )


def _device_env(ctx: Context, driver: ProcessDriver, uid: str) -> tuple[str, ...]:
    """What the driver's CDI specs for claim ``uid`` put into a container's environment."""
    specs = [f for f in driver.files_naming(uid) if f.is_relative_to(driver.cdi_dir)]
    env = tuple(line for spec in specs for line in _cdi_env(spec))
    if not env:
        why = f"no CDI spec under {driver.cdi_dir} for claim {uid} sets an environment variable"
        if driver.kind.writes_cdi:
            raise AssertionError(f"driver {driver.name} prepared the claim, but {why}")
        ctx.nothing_to_prove(f"the pod's view of its device: {why}")
    return env


def _cdi_env(spec_file: Path) -> list[str]:
    text = spec_file.read_text()
    spec = json.loads(text) if spec_file.suffix == ".json" else yaml.safe_load(text)
    edits = [spec.get("containerEdits") or {}]
    edits += [d.get("containerEdits") or {} for d in spec.get("devices") or []]
    return [line for edit in edits for line in edit.get("env") or []]


def _delete_and_unprepared(
    ctx: Context, b: Builder, driver: ProcessDriver, claimed: _Claimed
) -> None:
    """Delete the pod; its claim must be unprepared, and then the pod goes (a driver that
    refuses the unprepare keeps it terminating: said in its own words, not waited out)."""
    b.delete("pods", claimed.name)
    _unprepared(ctx, driver, claimed)
    b.wait_pod_gone(claimed.name)


def _unprepared(ctx: Context, driver: ProcessDriver, claimed: _Claimed) -> None:
    """The kubelet lets go of the claim (its checkpoint), and then no CDI spec or file of the
    driver names it. A driver restarted since it prepared the claim is held to that too, unless
    it declares it cannot be (:data:`CLEANUP_AFTER_RESTART`): then what it left is said."""
    _kubelet_lets_go(ctx, driver, claimed)
    restarted = driver.instance != claimed.instance
    limit = driver.kind.limit(CLEANUP_AFTER_RESTART) if restarted else None
    try:
        eventually(
            lambda: driver.files_naming(claimed.uid),
            what=f"driver {driver.name} to remove every CDI spec and file naming claim "
            f"{claimed.uid}" + (" (it restarted since it prepared the claim)" if restarted else ""),
            timeout=CLEANUP_GRACE,
            until=lambda files: not files,
            retry_on=(),
        )
    except WaitTimeout:
        if limit is None:
            raise
        left = [str(f) for f in driver.files_naming(claimed.uid)]
        ctx.facts[f"driver_limit/{ctx.phase}"] = {"limit": limit.what, "left": left}
        ctx.nothing_to_prove(
            f"{CLEANUP_AFTER_RESTART}: driver {driver.name} {limit.what} ({limit.source}); "
            f"left: {', '.join(left)}"
        )
        return
    if limit is not None:
        raise AssertionError(
            f"driver {driver.name} cleaned up claim {claimed.uid} after a restart, though its "
            f"kind declares it cannot ({limit.what}; {limit.source}): remove the declaration"
        )


REFUSALS = 3
"""Failed unprepares of one claim the kubelet logs before the driver counts as refusing it (the
kubelet retries every 10 to 15 s; one failure may be a driver still starting)."""


def _kubelet_lets_go(ctx: Context, driver: ProcessDriver, claimed: _Claimed) -> None:
    """Until the kubelet took the claim out of its checkpoint (it does once the driver's
    NodeUnprepareResources succeeded). A driver that keeps refusing is said at once, in its own
    words as the kubelet logged them, with the claim it keeps prepared: a change the driver
    does not support (a checkpoint it cannot read) is no timeout."""
    log = ctx.logs.get("kubelet")
    start = log.stat().st_size if log is not None and log.exists() else 0

    def unprepared() -> dict | None:
        """The claim's checkpoint entry; a refusing driver fails the wait."""
        said = (
            _kubelet_said(log, start, _UNPREPARE_ERROR, claimed.claim, claimed.uid)
            if log is not None
            else []
        )
        if len(said) >= REFUSALS:  # not an AssertionError: a wait retries those
            raise DriverError(
                f"driver {driver.name} refuses to unprepare ResourceClaim {claimed.claim} "
                f"({claimed.uid}), which stays prepared on the node and its pod terminating; "
                f"the kubelet logged {len(said)} failures since the pod was deleted, the last: "
                f"{said[-1]}"
            )
        return checkpoint_entry(ctx, claimed.uid)

    eventually(
        unprepared,
        what=f"claim {claimed.uid} to leave the kubelet's checkpoint",
        timeout=UNPREPARE_TIMEOUT,
        poll=1.0,
        until=lambda entry: entry is None,
    )


_UNPREPARE_ERROR = re.compile(r'err="unprepare dynamic resources: (?P<said>(?:[^"\\]|\\.)*)"')
_PREPARE_ERROR = re.compile(
    r'"Failed to prepare dynamic resources" err="(?:prepare dynamic resources: )?'
    r'(?P<said>(?:[^"\\]|\\.)*)"'
)


_REGISTERED = re.compile(r'"Regist(?:ered|er new) DRA plugin"')  # 1.34 on, and 1.33


def _kubelet_said(log: Path, start: int, pattern: re.Pattern[str], *names: str) -> list[str]:
    """What the kubelet said in its ``pattern`` lines that name any of ``names``, logged after
    byte ``start``: the pattern's ``said`` group, else its whole match."""
    try:
        with log.open("rb") as file:
            file.seek(start)
            text = file.read(16 << 20).decode(errors="replace")
    except OSError:
        return []
    return [
        (found.groupdict().get("said") or found.group(0))[:400]
        for line in text.splitlines()
        if (found := pattern.search(line)) and any(name in line for name in names)
    ]


def _rolling_update_begins(
    ctx: Context, b: Builder, driver: ProcessDriver, held: _Held
) -> _Claimed:
    """A second instance starts and registers while the first still serves, as a DaemonSet with
    maxSurge does; both stay registered through the next cluster step. A pod started in the
    overlap runs, and the slices stay. While both are registered the kubelet uses the newer
    one, the one it registered last (kubernetes#128964): the older one is frozen meanwhile, so a
    kubelet that calls it fails at its first prepare, in the kubelet's words."""
    return _newer_instance_serves(ctx, b, driver, held)


def _newer_instance_serves(
    ctx: Context, b: Builder, driver: ProcessDriver, held: _Held | None = None
) -> _Claimed:
    """One more instance starts and registers (counted once the kubelet says so); with the older
    ones frozen, a new pod starts: the kubelet uses the instance it registered last."""
    with ctx.step("a new instance registers beside the one serving; the slices stay"):
        log = ctx.logs.get("kubelet")
        start = log.stat().st_size if log is not None and log.exists() else 0
        driver.surge(ctx.releases.get("kubelet", ""))
        if log is not None:
            _kubelet_registered(log, start, driver)
        if held is not None:
            _same_devices(driver, held.devices)
    with (
        ctx.step("the older instance frozen, a new pod starts: the kubelet uses the newer one"),
        driver.older_frozen(),
    ):
        return _claimed_pod(ctx, b, driver, refusals=1)


def _kubelet_registered(log: Path, start: int, driver: ProcessDriver) -> None:
    """Until the kubelet logged that it registered the newest instance (the endpoint it names
    holds that instance's pod UID): a socket that answers is not yet one the kubelet uses."""
    eventually(
        lambda: _kubelet_said(log, start, _REGISTERED, driver.pod_uid),
        what=f"the kubelet to register the new instance of driver {driver.name} "
        f"(pod UID {driver.pod_uid}; its log: {log})",
        timeout=60,
        poll=0.5,
        until=bool,
    )


def _rolling_update_ends(
    ctx: Context, b: Builder, driver: ProcessDriver, held: _Held
) -> list[_Claimed]:
    """The kubelet restarted (the cluster step) while both instances were registered, and
    registered them again in an order of its own: a new pod starts. Then the old instance
    leaves and nothing it prepared is lost; then a newer instance registers, and the kubelet
    under test uses it (the older frozen meanwhile); then it crashes, and the kubelet falls back
    to the one still serving (kubernetes#128964). The pod of the overlap is deleted and
    unprepared once the old instance left (the driver has four devices); returns the two pods
    started after, whose claims the phase unprepares."""
    with ctx.step("the kubelet restarted with both instances registered: a new pod starts"):
        overlap = _claimed_pod(ctx, b, driver)
    with ctx.step("the old instance left: the slices stay and the prepared pods run on"):
        driver.retire()
        driver.wait_for_slices(120)
        _same_devices(driver, held.devices)
        held.untouched(b)
    with ctx.step("the pod started in the overlap deleted: its claim is unprepared"):
        _delete_and_unprepared(ctx, b, driver, overlap)  # its device for the pods below
    newer = _newer_instance_serves(ctx, b, driver)
    with ctx.step("the new instance crashes: a new pod starts on the one serving"):
        driver.crash()
        fallback = _claimed_pod(ctx, b, driver)
    return [newer, fallback]


def _driver_away(ctx: Context, b: Builder, driver: ProcessDriver, held: _Held) -> _Claimed:
    """The driver stops for longer than the kubelet's wipe delay. Meanwhile the prepared pod
    runs on, a pod deleted asks for an unprepare, and a new pod waits; once it is back its
    slices return, the unprepare happens, and the waiting pod starts."""
    with ctx.step(f"the driver stops for {DOWNTIME:.0f}s, past the kubelet's wipe delay"):
        driver.stop()
        started = time.monotonic()
        b.delete("pods", held.passing.name)
        pod, claim_template = b.pod_inline()
        claim_template["spec"]["spec"] = _claim_spec(b)
        b.create(claim_template, pod)
        time.sleep(max(0.0, DOWNTIME - (time.monotonic() - started)))
    with ctx.step("while the driver is away the prepared pod runs on and the new pod waits"):
        held.untouched(b)
        phase = b.read_pod(pod["metadata"]["name"]).get("status", {}).get("phase")
        assert phase != "Running", (
            f"pod {pod['metadata']['name']} runs although driver {driver.name} is stopped"
        )
    with ctx.step("the driver is back: its slices return with the same devices"):
        driver.start(ctx.releases.get("kubelet", ""))
        driver.wait_registered(60)
        driver.wait_for_slices(120)
        _same_devices(driver, held.devices)
    with ctx.step("the unprepare asked while the driver was away happens"):
        _unprepared(ctx, driver, held.passing)
        b.wait_pod_gone(held.passing.name)
    with ctx.step("the pod that waited for the driver runs and sees its device"):
        return _runs_with_device(ctx, b, driver, pod)
