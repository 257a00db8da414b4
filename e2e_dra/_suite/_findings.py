"""Which reported test a safety net's finding fails, and the claim watch that feeds them.

``_nets`` only finds; this module decides. A finding of the subtest whose phase just ended fails
that phase. One that belongs to another subtest (its claim changed during a cluster step or
during someone else's phase) waits for its own subtest's next phase: failing the entry that
happened to be running would blame the wrong test. A finding that belongs to nobody fails the
entry at hand, and what is still waiting when the cluster goes fails the cleanup, so no finding
is ever lost.

The claim watch runs in its own thread from bring-up to cleanup, over the claims of every
namespace, on a client of its own that learns a restarted server by itself; the ResourceSlices
and DeviceTaintRules are watched the same way, for the quiescence net (``_quiescence``), which
follows every version of all three. A watch that cannot list is itself a finding of nobody's: a
blind net must not pass for one that found nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from e2e_dra._suite._evictions import EvictionNet
from e2e_dra._suite._lifecycle import ClaimLifecycle, live
from e2e_dra._suite._nets import (
    ClaimWatch,
    Finding,
    VersionWatch,
    claim_owner,
    pod_collection,
    slice_collection,
    slice_removal_timeout,
    taint_rule_collection,
    wait_slices_removed,
)
from e2e_dra._suite._prepared import PreparedNet
from e2e_dra._suite._quiescence import Quiescence, dra_owner
from e2e_dra._suite._steps import Entry
from e2e_dra.hostkit import Attempts
from e2e_dra.kube import Kube
from e2e_dra.provision import KUBELET_ROOT
from e2e_dra.subtest_kit import CHECKPOINT

AT_CLEANUP = "the cleanup"


class Findings:
    """The safety nets' findings of one cluster, each routed to the test it fails.

    ``more``: the findings of the other nets (the drivers' dropped fields and the slice writes
    the API server still refuses), taken after the claim watch's at the end of every entry.
    """

    def __init__(self, more: Callable[[], list[Finding]]) -> None:
        self._more = more
        self.claim_watch: ClaimWatch | None = None
        self.lifecycle: ClaimLifecycle | None = None
        self.quiescence: Quiescence | None = None
        self.prepared: PreparedNet | None = None
        self.evictions: EvictionNet | None = None
        self._version_watches: list[tuple[VersionWatch, Kube]] = []  # each on a client of its own
        self._watch_kube: Kube | None = None
        # Findings that belong to a subtest other than the test that saw them: they fail that
        # subtest's next phase (or the cleanup, when it has none left). By subtest; "" for
        # nobody's (only at the cleanup).
        self.pending: dict[str, list[str]] = {}

    # --- the claim watch ----------------------------------------------------------------------

    def watch_claims(self, kube: Kube, drivers: Mapping[str, str]) -> None:
        """Watch the claims of every namespace (on a client of its own), owned by ``drivers``'
        subtests (subtest -> driver name)."""
        self._watch_kube = kube.fresh()
        self.lifecycle = ClaimLifecycle(lambda claim: claim_owner(claim, drivers))
        self.quiescence = Quiescence(
            lambda obj: dra_owner(obj, drivers), asked=self._watch_kube.field_managers
        )
        self.prepared = PreparedNet(
            KUBELET_ROOT / CHECKPOINT, lambda claim: claim_owner(claim, drivers)
        )
        self.evictions = evictions = EvictionNet(lambda claim: claim_owner(claim, drivers))
        quiescence = self.quiescence

        def followed(event: str, obj: dict) -> None:  # by both nets that follow versions
            quiescence.seen(event, obj)
            evictions.seen(event, obj)

        self.claim_watch = ClaimWatch(
            self._watch_kube,
            lambda claim: claim_owner(claim, drivers),
            also=self.lifecycle.seen,
            versions=followed,
        )
        self.claim_watch.start()
        for kind, collection, versions in (
            ("ResourceSlice", slice_collection, followed),
            ("DeviceTaintRule", taint_rule_collection, followed),
            ("Pod", pod_collection, evictions.seen),
        ):
            client = kube.fresh()
            watch = VersionWatch(client, kind, collection, versions)
            self._version_watches.append((watch, client))
            watch.start()

    def stop_watch(self) -> None:
        if self.claim_watch is not None:
            self.claim_watch.stop()
            self.claim_watch = None
        self.lifecycle = None
        self.prepared = None
        self.evictions = None
        for watch, client in self._version_watches:
            watch.stop()
            client.close()
        self._version_watches = []
        self.quiescence = None
        if self._watch_kube is not None:
            self._watch_kube.close()
            self._watch_kube = None

    # --- routing ------------------------------------------------------------------------------

    def checks(self, entry: Entry) -> list[str]:
        """What the safety nets found that fails ``entry``, which just ended.

        A finding of the subtest whose phase this is fails that phase; a finding seen during a
        cluster step or another subtest's phase waits for its own subtest's next phase. The
        cleanup (and so the end of the run) reports what is still waiting.
        """
        found: list[Finding] = []
        if self.claim_watch is not None:
            try:
                self.claim_watch.sweep()
            except Exception as exc:
                found.append(Finding(None, f"could not list ResourceClaims to check them: {exc}"))
            found += self.claim_watch.take()
        if self.lifecycle is not None and self._watch_kube is not None:
            try:
                found += self.lifecycle.judge(live(self._watch_kube))
            except Exception as exc:
                found.append(Finding(None, f"could not judge the claims' lifecycle: {exc}"))
        if self.prepared is not None and self._watch_kube is not None:
            try:
                found += self.prepared.look(self._watch_kube)
            except Exception as exc:
                found.append(Finding(None, f"could not hold the prepared devices to claims: {exc}"))
        if self.evictions is not None and self._watch_kube is not None:
            try:
                found += self.evictions.look(self._watch_kube)
            except Exception as exc:
                found.append(Finding(None, f"could not judge the pods' evictions: {exc}"))
        found += self._quiescence_findings()
        found += self._more()
        return self.route(entry, found)

    def route(self, entry: Entry, found: Iterable[Finding]) -> list[str]:
        """Of ``found`` (seen during ``entry``) and what waited for it: what fails ``entry``;
        the rest waits for its own subtest."""
        own = entry.subtest if entry.chain_position is not None else None
        where = entry.where
        now: list[str] = []
        for finding in found:
            text = _described(finding, where)
            if finding.owner is None or finding.owner == own:
                now.append(text)
            else:
                self.pending.setdefault(finding.owner, []).append(text)
        if own is not None:
            now += self.pending.pop(own, [])
        if entry.always:  # the cleanup: nothing comes after it
            for name in sorted(self.pending):
                now += self.pending.pop(name)
        return now

    def hold(self, found: Iterable[Finding]) -> None:
        """Findings of the cleanup: they wait with the rest for :meth:`still_waiting`."""
        for finding in found:
            self.pending.setdefault(finding.owner or "", []).append(_described(finding, AT_CLEANUP))

    def last_look(self, attempts: Attempts, kube: Kube, stopped: Mapping[str, str]) -> None:
        """The cleanup's checks while the cluster still answers: the ResourceSlices of every
        stopped driver (driver -> subtest) gone, and every claim looked at once more."""
        attempts("ResourceSlice removal", lambda: expect_slices_removed(kube, stopped))
        if self.claim_watch is not None:
            attempts("check ResourceClaims", self.claim_watch.sweep)
            self.hold(self.claim_watch.take())
        self.hold(self._quiescence_findings())

    def _quiescence_findings(self) -> list[Finding]:
        """What the quiescence net found, and what its slice and rule watches could not see."""
        found = self.quiescence.take() if self.quiescence is not None else []
        for watch, _ in self._version_watches:
            found += watch.take()
        return found

    def still_waiting(self) -> AssertionError | None:
        """What no later test took, as one failure (of the cleanup); None if nothing waits."""
        if not self.pending:
            return None
        lines = [text for _, texts in sorted(self.pending.items()) for text in texts]
        self.pending.clear()
        return AssertionError("safety net:\n" + "\n".join(lines))


def expect_slices_removed(kube: Kube, stopped: Mapping[str, str]) -> None:
    """Upstream's ExpectResourceSliceRemoval, for every stopped driver (driver -> subtest) at
    once (upstream: ``IsGone`` per driver)."""
    left = wait_slices_removed(kube, stopped)
    if left:
        raise AssertionError(
            "safety net: ResourceSlices left after their driver stopped (the kubelet "
            f"removes a plugin's slices within {slice_removal_timeout():g} s after it "
            "unregisters): "
            + "; ".join(
                f"driver {driver} of subtest {stopped[driver]!r}: {', '.join(names)}"
                for driver, names in left.items()
            )
        )


def _described(finding: Finding, where: str) -> str:
    owner = f"subtest {finding.owner!r}" if finding.owner else "no known subtest"
    return f"{finding.message} [{owner}; seen during {where}]"
