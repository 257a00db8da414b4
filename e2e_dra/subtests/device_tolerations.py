"""device-tolerations: a claim's tolerations keep its pod on a device whose taint says NoExecute.

Two tolerations, each on a device of its own: one that names the taint's key, value and effect,
and one with no key and no effect (``operator: Exists``), which the API documents as tolerating
every taint and which tools that must reach any device write. The scheduler allocates each
device and copies the request's tolerations into the allocation; the device-taint eviction
controller reads them there and must leave both pods alone. Releases before 1.38.0-beta.0 ignore
the empty effect and evict that pod at once (kubernetes#143376), so an upgrade fixes the pod
and a downgrade breaks it again.

A third toleration, of the taint's key, value and effect, lasts :data:`TOLERATION_SECONDS`
(``tolerationSeconds``): its pod may stay that long, then the controller evicts it. The
controller counts from the taint's ``timeAdded`` (the API server sets it when the slice is
created), not from when it sees the pod or the claim: the eviction is due at ``timeAdded +
tolerationSeconds``, whenever the pod started. So the pod must still run, not being deleted, at
half that time, and be evicted once it is over (not before, by the time on its
``DisruptionTarget`` condition). The wait overlaps the other two pods' checks.

A fourth claim tolerates the taint for :data:`CANCELLED_SECONDS`, and its device's taint is
taken out of the slice as soon as its pod runs, while the toleration still runs: KEP-5055 has
that cancel the pending eviction, as a node taint removed does for a pod. Its pod must still
run, the same pod, :data:`CANCELLED_LOOK` seconds after the toleration would have ended.

Every phase checks the components of that state anew, with objects of its own: a cluster-wide
slice of four devices, all tainted NoExecute, four claims and four pods, two that must run and
stay, one that must run and go when its toleration ends and one whose eviction is called off.
No driver resources: the subtest publishes the slice itself (no kubelet serves a cluster-wide
pool, so it waits for nothing after a restart).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from e2e_dra.builder import Builder, NotFound, cluster_slice, event_time, request
from e2e_dra.errors import ComponentCrashed
from e2e_dra.subtest import Context, KnownBug, Subtest
from e2e_dra.subtest_kit import allocated, every_phase, remove
from e2e_dra.waits import WaitTimeout, consistently, eventually

KEY = "devicetolerations"
TAINT = {"key": KEY, "value": "maintenance", "effect": "NoExecute"}
TOLERATIONS = {
    # device name -> (the toleration its claim asks for, what the check is called)
    "by-key": (
        {"key": KEY, "operator": "Equal", "value": "maintenance", "effect": "NoExecute"},
        "a toleration of the taint's key, value and NoExecute effect",
    ),
    "every-taint": (
        {"operator": "Exists"},
        "a toleration with no key and an empty effect (every taint)",
    ),
}
STAYS = 5.0  # the eviction controller acts as the claim is allocated: a pod that runs this long
# after it started was let be

BOUNDED = "bounded"  # the device of the claim whose toleration ends
CANCELLED = "cancelled"  # the device whose taint goes before that claim's toleration ends
CANCELLED_SECONDS = 30
"""How long the toleration of the pod whose eviction is called off lasts: longer than the bounded
one's, for its pod must run, and its taint go, well before the end (pods start slowly right
after a restart)."""
CANCELLED_LOOK = 5.0
"""Seconds past the end of the toleration for which the pod whose eviction was called off must
still run: the controller would have evicted it at the end (it queues the eviction for then)."""
TOLERATION_SECONDS = 20
"""How long the bounded toleration lets its pod stay, from the taint's ``timeAdded``: short,
as every phase waits it out, and long enough that its pod runs before half of it is over."""
BOUNDED_TOLERATION = {**TOLERATIONS["by-key"][0], "tolerationSeconds": TOLERATION_SECONDS}
BOUNDED_WHAT = f"a toleration of the NoExecute taint for {TOLERATION_SECONDS}s"
CANCELLED_TOLERATION = {**BOUNDED_TOLERATION, "tolerationSeconds": CANCELLED_SECONDS}
CANCELLED_WHAT = f"a toleration of the NoExecute taint for {CANCELLED_SECONDS}s"
TOO_LATE = 5.0
"""A pod that runs only this close to the end of its toleration cannot show that it was let be:
its eviction may be due while it is looked at."""
EVICTED_WITHIN = 60.0
"""Seconds past the end of the toleration by which the eviction must have come (the controller
queues it for that very moment; the rest is slack for a busy host)."""
CLOCK_SLACK = 1.0  # timeAdded and condition times are whole seconds
EVICTION = "DeletionByDeviceTaintManager"  # the reason of the pod's DisruptionTarget condition
MARKED = "Marking for deletion"  # the controller's DeviceTaintManagerEviction event, when it evicts


def tainted_slice(driver: str, name: str) -> dict:
    """One cluster-wide slice (its own pool, ``name``) with a NoExecute-tainted device per
    toleration, each with the pool's name as an attribute: a claim must select its own phase's
    device. A phase that stopped early (a known bug) leaves its slice until the tear-down, and
    its devices' taints are older: a claim given one of them would be due for eviction at once."""
    devices = [
        {
            "name": device,
            "attributes": {
                "example.com/toleration": {"string": device},
                "example.com/pool": {"string": name},
            },
            "taints": [TAINT],
        }
        for device in [*TOLERATIONS, BOUNDED, CANCELLED]
    ]
    return cluster_slice(driver, name, devices)


def tolerated(ctx: Context) -> None:
    """Each toleration's pod gets its tainted device, runs and is not evicted; the bounded
    one's pod is evicted when its toleration ends."""
    b = ctx.builder
    name = f"{KEY}-{ctx.phase}"
    (created,) = b.create(tainted_slice(b.driver_name, name))
    b.defer(lambda b: b.delete("resourceslices", name, missing_ok=True))

    wanted: dict[str, Mapping[str, object]] = {d: t for d, (t, _) in TOLERATIONS.items()}
    wanted[BOUNDED] = BOUNDED_TOLERATION
    wanted[CANCELLED] = CANCELLED_TOLERATION
    claims, pods = {}, {}
    for device, toleration in wanted.items():
        selector = (
            f'device.attributes["example.com"].toleration == "{device}" && '
            f'device.attributes["example.com"].pool == "{name}"'
        )
        claims[device] = b.external_claim(
            requests=[request(selectors=[selector], tolerations=[toleration])]
        )
        pod = b.pod_external(claims[device]["metadata"]["name"])
        _, pods[device] = b.create(claims[device], pod)
    bounded = Bounded(pods[BOUNDED], claims[BOUNDED], taint_added(created, BOUNDED))
    # First the bounded one: half of its toleration is over soon after the pods start. Then the
    # one to call off, whose longer toleration leaves time for that.
    with ctx.step(f"{BOUNDED_WHAT}: its pod runs, not evicted at half of it"):
        bounded.stays_until_half(ctx, b)
    cancelled = Bounded(
        pods[CANCELLED], claims[CANCELLED], taint_added(created, CANCELLED), CANCELLED_TOLERATION
    )
    with ctx.step(f"{CANCELLED_WHAT}, its device's taint removed before that is over"):
        called_off = cancelled.taint_removed_in_time(ctx, b, name)
    for device, (toleration, what) in TOLERATIONS.items():
        with ctx.step(stays_step(what)):
            _runs(b, pods[device])
            _stays(b, pods[device]["metadata"]["name"])
        with ctx.step(f"{what}: the allocation carries it, for the eviction controller"):
            _carries(b, claims[device]["metadata"]["name"], toleration)
    with ctx.step(f"{BOUNDED_WHAT}: its pod is evicted once that is over"):
        bounded.evicted_when_due(b)
    if called_off:
        with ctx.step(f"{CANCELLED_WHAT}, its device's taint removed: its pod stays past its end"):
            cancelled.stays_past_due(b)
    remove(b, [pods[device] for device in TOLERATIONS], [])
    if called_off:
        remove(b, [cancelled.pod], [])
    else:  # its taint stayed: it is evicted as the bounded one is
        b.wait_pod_gone(cancelled.name)
    b.wait_pod_gone(bounded.name)
    remove(b, [], list(claims.values()))
    b.delete("resourceslices", name)


def taint_added(created: dict, device: str) -> datetime:
    """When the taint of ``device`` in the slice ``created`` (as the server answered) was added:
    the server's ``timeAdded``, the moment the eviction controller counts from."""
    (found,) = [d for d in created["spec"]["devices"] if d["name"] == device]
    (taint,) = found["taints"]
    assert taint.get("timeAdded"), f"the server set no timeAdded on {device}'s taint: {taint}"
    return datetime.fromisoformat(taint["timeAdded"])


def eviction_time(pod: dict) -> datetime | None:
    """When the eviction controller marked ``pod`` (as read) for deletion: its DisruptionTarget
    condition's time, with the controller's reason; None when it has none."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("reason") == EVICTION:
            return datetime.fromisoformat(condition["lastTransitionTime"])
    return None


def _clock(when: datetime) -> str:
    return f"{when.astimezone(UTC):%H:%M:%S} UTC"


class Bounded:
    """The pod (as created) of ``claim``, whose toleration lasts :data:`TOLERATION_SECONDS`
    from its device's taint's ``timeAdded`` (``tainted_at``), and what its failures say."""

    def __init__(
        self, pod: dict, claim: dict, tainted_at: datetime, toleration: dict = BOUNDED_TOLERATION
    ) -> None:
        self.pod, self.tainted_at = pod, tainted_at
        self.name, self.uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        self.claim = claim["metadata"]["name"]
        self.toleration = toleration
        self.due = tainted_at + timedelta(seconds=toleration["tolerationSeconds"])
        self.called_off = tainted_at  # when its taint was removed, if it was

    def stays_until_half(self, ctx: Context, b: Builder) -> None:
        """The pod runs with the toleration in its allocation, and still runs, not being
        deleted, until half of the toleration is over (one look if it started later)."""
        try:
            b.test_pod(self.pod)
            _carries(b, self.claim, BOUNDED_TOLERATION)
            now = datetime.now(UTC)
            if now > self.due - timedelta(seconds=TOO_LATE):
                ctx.nothing_to_prove(
                    f"pod {self.name} ran only at {_clock(now)}, too close to the end of its "
                    f"toleration ({_clock(self.due)}) to show that it was let be until then"
                )
                return
            self._runs_until(b, self.tainted_at + timedelta(seconds=TOLERATION_SECONDS / 2))
        except ComponentCrashed:
            raise  # the run stops on it: it stays what it is
        except Exception as exc:
            # A pod gone while we waited for it to run says its events already.
            events = "" if "; its events: " in str(exc) else b.events_of(self.name)
            problem = "did not run until half of its toleration was over"
            raise AssertionError(f"{self._said(b, problem)}{events}: {exc}") from exc

    def taint_removed_in_time(self, ctx: Context, b: Builder, slice_name: str) -> bool:
        """The pod runs, then its device's taint is taken out of the slice while its toleration
        still runs; False (nothing to prove) when the pod ran too late for that."""
        _runs(b, self.pod)
        if datetime.now(UTC) > self.due - timedelta(seconds=TOO_LATE):
            ctx.nothing_to_prove(
                f"pod {self.name} ran only at {_clock(datetime.now(UTC))}, too close to the end "
                f"of its toleration ({_clock(self.due)}) to call its eviction off before then"
            )
            return False
        current = b.get("resourceslices", slice_name)
        for device in current["spec"]["devices"]:
            if device["name"] == CANCELLED:
                device.pop("taints", None)
        b.update("resourceslices", slice_name, current)
        self.called_off = datetime.now(UTC)
        return True

    def stays_past_due(self, b: Builder) -> None:
        """The pod whose device's taint went before its toleration ended still runs, the same
        pod and not being deleted, :data:`CANCELLED_LOOK` seconds past that end."""
        try:
            self._runs_until(b, self.due + timedelta(seconds=CANCELLED_LOOK))
        except (AssertionError, NotFound) as exc:
            problem = (
                f"was evicted though its device's taint was removed at "
                f"{_clock(self.called_off)}, before its toleration ended"
            )
            raise AssertionError(
                f"{self._said(b, problem)}{b.events_of(self.name)}: {exc}"
            ) from exc

    def _runs_until(self, b: Builder, until: datetime) -> None:
        """The pod is still this pod, running and not being deleted, at every look until
        ``until``."""

        def seen() -> tuple[str, str | None, str | None]:
            pod = b.read_pod(self.name)
            phase = (pod.get("status") or {}).get("phase")
            return pod["metadata"]["uid"], phase, pod["metadata"].get("deletionTimestamp")

        consistently(
            seen,
            what=f"pod {self.name} running, not being deleted (uid, phase, deletionTimestamp)",
            duration=max((until - datetime.now(UTC)).total_seconds(), 0.0),
            holds=lambda pod: pod == (self.uid, "Running", None),
        )

    def evicted_when_due(self, b: Builder) -> None:
        """The controller evicts the pod once its toleration is over: not before (by the time it
        marked the pod), and within :data:`EVICTED_WITHIN` seconds after."""

        def marked() -> datetime:
            when = self._evicted(b)
            if when is None:
                raise AssertionError(f"pod {self.name} is not marked for deletion")
            return when

        left = (self.due - datetime.now(UTC)).total_seconds() + EVICTED_WITHIN
        try:
            when = eventually(
                marked, what=f"the eviction of pod {self.name}", timeout=max(left, 0.0)
            )
        except WaitTimeout as exc:
            problem = f"was not evicted within {EVICTED_WITHIN:g}s after its toleration ended"
            events = b.events_of(self.name)
            raise AssertionError(f"{self._said(b, problem)}{events}: {exc}") from None
        early = (self.due - when).total_seconds()
        problem = f"was evicted {early:.0f}s before its toleration ended"
        assert early <= CLOCK_SLACK, f"{self._said(b, problem, when)}{b.events_of(self.name)}"

    def _evicted(self, b: Builder) -> datetime | None:
        """When the controller marked the pod for deletion (its condition, or once the pod is
        gone its event); None: it has not."""
        try:
            pod = b.read_pod(self.name)
        except NotFound:
            pod = None
        if pod is not None and pod["metadata"]["uid"] == self.uid:
            return eviction_time(pod)
        selector = f"involvedObject.name={self.name},reason=DeviceTaintManagerEviction"
        marked = [
            event_time(e)
            for e in b.list("events", fieldSelector=selector)
            if e.get("involvedObject", {}).get("uid") == self.uid
            and e.get("message", "").startswith(MARKED)
        ]
        return min(marked, default=None)

    def _said(self, b: Builder, problem: str, evicted: datetime | None = None) -> str:
        """The pod, its claim and its toleration, its ``problem``, when it was evicted (looked up
        unless given) and when its device was tainted."""
        evicted = evicted or self._evicted(b)
        if evicted is None:
            when = "not evicted"
        else:
            after = (evicted - self.tainted_at).total_seconds()
            when = f"evicted at {_clock(evicted)}, {after:.0f}s after the taint was added"
        return (
            f"pod {self.name} (claim {self.claim}, toleration {self.toleration}) {problem} "
            f"({when}; its device's taint was added at {_clock(self.tainted_at)}, so the "
            f"toleration ends at {_clock(self.due)})"
        )


def stays_step(what: str) -> str:
    """The step that proves the pod of a claim with toleration ``what`` runs and stays."""
    return f"{what}: its pod runs on the NoExecute-tainted device and stays"


def _runs(b: Builder, pod: dict) -> None:
    """The pod runs and answers; if not, the failure says its events: a pod the eviction
    controller deleted as it started fails its exec, not its wait, and only its events say
    why (the controller's ``DeviceTaintManagerEviction``)."""
    name = pod["metadata"]["name"]
    try:
        b.test_pod(pod)
    except ComponentCrashed:
        raise  # the run stops on it: it stays what it is
    except Exception as exc:
        events = "" if "; its events: " in str(exc) else b.events_of(name)
        raise AssertionError(f"pod {name} did not run{events}: {exc}") from exc


def _stays(b: Builder, pod_name: str) -> None:
    """The running pod ``pod_name`` is still that pod, running, :data:`STAYS` seconds on."""
    uid = b.read_pod(pod_name)["metadata"]["uid"]

    def now() -> tuple[str, str | None]:
        pod = b.read_pod(pod_name)
        return pod["metadata"]["uid"], pod.get("status", {}).get("phase")

    try:
        consistently(
            now,
            what=f"pod {pod_name} running",
            duration=STAYS,
            holds=lambda seen: seen == (uid, "Running"),
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}{b.events_of(pod_name)}") from exc


def _carries(b: Builder, claim_name: str, toleration: dict) -> None:
    results = allocated(b, claim_name)
    given = [r.get("tolerations") or [] for r in results]
    wanted = [[toleration]]
    # The server may add fields (tolerationSeconds: null is left out); compare what we set.
    seen = [[{k: t.get(k) for k in toleration} for t in each] for each in given]
    assert seen == wanted, (
        f"claim {claim_name}'s allocation carries tolerations {given}, but its request asked "
        f"for {[toleration]}: the eviction controller reads them from the allocation"
    )


SUBTEST = Subtest(
    name="device-tolerations",
    keps=(5055,),
    initial=every_phase(tolerated),
    # Device taints in slices are served (DRADeviceTaints on) from 1.36, as in device-taints.
    releases=">=1.36",
    known_bugs=(
        KnownBug(
            issue=143376,
            component="kube-controller-manager",
            releases="<1.38.0-beta.0",
            what=(
                "device-taint eviction ignores a toleration with an empty effect, though the API "
                "says it matches every effect, and evicts its pod at once (fixed in "
                "1.38.0-beta.0 by kubernetes#143376)"
            ),
            # The subtest's step, or the eviction net, which holds the eviction to the
            # allocation's tolerations and finds nothing there that makes it due.
            sign=(
                r"(?s)DeviceTaintManagerEviction.*in step 'a toleration with no key and an empty"
                r"|eviction net, rule 'due': .* tolerating \[\{'operator': 'Exists'\}\]"
            ),
            confined=True,  # it evicts this subtest's pod, on this subtest's own slice
        ),
    ),
    # Taints are the scheduler's and the controller-manager's business; any kubelet with DRA v1
    # (GA in 1.34) serves the pods.
    kubelet_releases=">=1.34",
)
