"""What a subtest is: a three-phase chain, declared by one module under ``e2e_dra.subtests``.

A subtest's initial phase runs on the previous release and returns the callable for the phase
after the upgrade, which returns the callable for the phase after the downgrade. A failing phase
ends only its own chain. Each subtest gets its own driver and its own objects, so order does not
matter (and is shuffled on purpose).
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from e2e_dra.report import (
    GATE_CYCLE_KIND,
    GATE_CYCLE_PHASES,
    KEPS,
    NOTHING_TO_PROVE,
    PROVED,
    STEP_FAILED,
    STEP_INTERRUPTED,
    STEP_PASSED,
    UPGRADE_KIND,
    UPGRADE_PHASES,
    SuiteKind,
)
from e2e_dra.versions import matches, release_specifier

if TYPE_CHECKING:
    from e2e_dra.builder import Builder
    from e2e_dra.driver import Driver, DriverKind, Pool, ProcessDriver
    from e2e_dra.kube import Kube

PHASES = UPGRADE_PHASES
"""A chain's phases (:data:`~e2e_dra.report.UPGRADE_PHASES`, named once where the summary's
schema is): upstream's three, and the re-upgrade leg of ``upgrade-downgrade``."""
THREE_PHASES = PHASES[:3]
CLUSTER_CHANGES = UPGRADE_KIND.changes
"""The cluster steps that restart components under the subtests' objects (``KnownBug.step``)."""


class Phase(Protocol):
    """A phase takes the context and returns the next phase (or None after the last one): the
    chain a subtest is, typed, so that a phase returning something else is a type error."""

    def __call__(self, ctx: Context, /) -> Phase | None: ...


KUBERNETES_ISSUES = "https://github.com/kubernetes/kubernetes/issues/"


@dataclass(frozen=True)
class IndependentPhase:
    """A phase that checks the components of its state anew and leaves nothing behind, so the
    next phase does not depend on how it ended (``subtest_kit.every_phase`` builds the chain).
    A known bug that breaks one such phase therefore does not end the chain: the next state may
    run a release without the bug, and it is checked there too."""

    check: Callable[[Context], None]
    index: int = 0
    phases: int = len(PHASES)

    def __call__(self, ctx: Context) -> Phase | None:
        self.check(ctx)
        return self.following

    @property
    def following(self) -> IndependentPhase | None:
        """The chain's next phase, or None after the last."""
        return replace(self, index=self.index + 1) if self.index + 1 < self.phases else None


@dataclass(frozen=True)
class OtherDriver:
    """A driver a subtest runs next to its own, for what takes two drivers on the node (claims
    of both in one pod, pools of the same name in both). It is named like the subtest's own
    with ``-<suffix>`` after the subtest's name, and is set up, waited for after each restart
    and stopped with it; a phase finds it in ``ctx.others[suffix]``."""

    suffix: str
    resources: Callable[[Sequence[str]], list[Pool]]


@dataclass(frozen=True)
class KnownBug:
    """A Kubernetes bug that breaks a subtest's phases on the releases that have it.

    Such a phase still runs there and must fail: a strict expected failure, never a skip, so a
    user on a buggy release sees the bug named, and a release that fixed it (or a suite that
    stopped seeing it) fails the run until the declaration is narrowed. Such a phase runs by
    itself, so that what the bug does (a component it crashes, devices it taints) fails no other
    subtest's phase; afterwards the subtest's objects are removed and a component the bug
    crashed is started again, so the suite goes on.

    A bug that acts only on the subtest's own objects (``confined``: it evicts the subtest's
    pod, refuses its claim) cannot fail another subtest's phase: that phase runs with the others
    and nothing is contained after it.

    A bug that what the subtest left behind triggers while the cluster changes (a component
    restarted by the downgrade panics on the subtest's objects) names that cluster step
    (``step="downgrade"``); the releases are those the step starts.
    A sign that another step of the phase could show too (a pod found unschedulable) names the
    phase's step the bug breaks (``during``: part of that ``ctx.step``'s name): the same words in
    a failure of another step are a failure of their own.
    """

    issue: int  # kubernetes/kubernetes issue (or fix) number: 139651
    component: str  # whose release has the bug: "kube-scheduler"
    releases: str  # the releases that have it, a specifier: ">=1.36.0,<1.36.3"
    what: str  # what goes wrong, in one line
    # How its failure looks: a regular expression searched in the failure's text and notes (the
    # component net's quote of a panic is among them). Another failure on those releases is a
    # failure, not this bug: an expected failure must be the expected one. A safety net that
    # finds the same defect says it in its own words (the allocation oracle names its rule):
    # those words belong in the sign too, or the net's finding fails the phase beside the bug.
    sign: str
    phase: str | None = None  # the one phase it breaks; None: every phase run on those releases
    step: str | None = None  # instead of a phase: the cluster step it breaks ("downgrade")
    # The bug acts only on the declaring subtest's own objects (it evicts that subtest's pod):
    # its phase runs with the others, and nothing is contained after it.
    confined: bool = False
    during: str | None = None  # part of the name of the phase's step it breaks; None: any

    def breaks_step(self, failed_step: str | None) -> bool:
        """Whether a failure in the phase's step ``failed_step`` can be this bug's."""
        return self.during is None or (failed_step is not None and self.during in failed_step)

    def __post_init__(self) -> None:
        release_specifier(self.releases)
        re.compile(self.sign)
        if self.phase is not None and self.phase not in PHASES + GATE_CYCLE_PHASES:
            raise ValueError(f"{self.name}: phase {self.phase!r} is not a phase of a suite")
        if self.step is not None and (self.step not in CLUSTER_CHANGES or self.phase):
            raise ValueError(
                f"{self.name}: step {self.step!r} is not one of {CLUSTER_CHANGES}, or a phase is "
                "named too"
            )
        if self.step is not None and self.confined:
            raise ValueError(f"{self.name}: a bug that breaks a cluster step is not confined")
        if self.step is not None and self.during is not None:
            raise ValueError(f"{self.name}: a cluster step has no steps of a phase (during)")

    @property
    def name(self) -> str:
        return f"kubernetes#{self.issue}"

    @property
    def url(self) -> str:
        return f"{KUBERNETES_ISSUES}{self.issue}"

    def applies(self, entry: str, releases: Mapping[str, str]) -> bool:
        """Whether the bug breaks ``entry`` (a phase, or a cluster step's name) when the
        components run ``releases``."""
        version = releases.get(self.component)
        if self.step is not None:
            where = entry == self.step
        else:
            where = entry in PHASES + GATE_CYCLE_PHASES and self.phase in (None, entry)
        return where and version is not None and matches(self.releases, version)

    def seen_in(self, failure: str) -> str | None:
        """The line of ``failure`` (an error's text with its notes) that shows this bug's sign,
        cut to 300 characters; None when none does."""
        found = re.search(self.sign, failure)
        if found is None:
            return None
        start = failure.rfind("\n", 0, found.start()) + 1
        end = failure.find("\n", found.end())
        return failure[start : end if end >= 0 else len(failure)].strip()[:300]

    def describe(self, releases: Mapping[str, str]) -> str:
        return (
            f"known Kubernetes bug {self.name} ({self.component} "
            f"{releases.get(self.component)}): {self.what} ({self.url})"
        )


@dataclass(frozen=True)
class Subtest:
    """One scenario; the module that defines it names it ``SUBTEST``.

    The same type serves both suites: under ``e2e_dra.subtests`` a three-phase upgrade/downgrade
    chain, under ``e2e_dra.subtests.gate_cycle`` a gate cycle (gates on, off, on again) in a
    cluster of its own, which must name the gates it toggles.
    """

    name: str
    initial: Phase
    # Driver resources for the given node names; None means the subtest publishes nothing through
    # its driver and waits for its own objects itself.
    resources: Callable[[Sequence[str]], list[Pool]] | None = None
    # Drivers besides the subtest's own, each with its resources.
    other_drivers: tuple[OtherDriver, ...] = ()
    # A real driver (upstream's Go test driver, the example driver, a user's command) that the
    # subtest runs instead of e2e-dra's own plugin; its phases find it in ``ctx.real_driver``.
    node_driver: DriverKind | None = None
    # Use the admin client for the driver (cluster-wide slices are refused to a node identity).
    privileged_client: bool = False
    # The DRAResourceHealth versions the driver offers the kubelet, newest first; None: every
    # one it can serve (v1, v1beta1, v1alpha1). Fewer: a driver built on an older library.
    driver_health: tuple[str, ...] | None = None
    # Let the driver's ResourceSlice controller reconcile only this pool.
    reconcile_pool: str | None = None
    # API group/versions the cluster must serve, e.g. "scheduling.k8s.io/v1beta1": added to
    # RUNTIME_CONFIG, and the subtest is skipped with the reason where a release does not serve
    # one of them.
    requires: tuple[str, ...] = ()
    # Feature gates on in every phase (merged into FEATURE_GATES); where a release refuses one,
    # the subtest is skipped with the reason.
    feature_gates: tuple[str, ...] = ()
    # The control-plane releases that have everything this subtest needs, as a PEP 440
    # specifier on Kubernetes versions (">=1.37", ">=1.36.3", ">=1.38.0-beta.0"; v1.38.0-beta.0
    # is 1.38.0b0, so ">=1.38" excludes it). Every release the control plane runs in the suite
    # must match; otherwise the subtest is skipped with the reason and its gates and runtime
    # config stay off (an older release may know a gate but not the API it guards).
    releases: str | None = None
    # The same for every release the kubelet runs (kubelet-last's E2E_DRA_KUBELET_VERSION may be
    # three minors behind); None: ``releases`` holds for the kubelet too.
    kubelet_releases: str | None = None
    # Kubernetes bugs that break a phase of this subtest on some releases: there the phase must
    # fail (reported as an expected failure naming the bug), elsewhere it must pass.
    known_bugs: tuple[KnownBug, ...] = ()
    # Runs by itself, not at the same time as the other subtests' phases: for a subtest that
    # disturbs what the others share (stops a component, kills or removes what is not its own,
    # times the whole node).
    alone: bool = False
    # Gate cycle: the gates switched off in the middle phase and on again in the last.
    toggled_gates: tuple[str, ...] = ()
    # Gate cycle: gates that depend on a toggled one (a release refuses them on while it is off),
    # switched with the toggled gates where the release has them.
    dependent_gates: tuple[str, ...] = ()
    # Gate cycle: the control plane emulates this version ("1.36") so that gates locked in newer
    # releases can still be toggled; None runs the binaries as they are.
    emulated_version: str | None = None
    # The Kubernetes Enhancement Proposals whose feature this subtest exercises, by number
    # (kubernetes/enhancements: keps/<sig>/<number>-<name>), each in ``e2e_dra.report.KEPS``.
    # summary.json records them (``keps_by_subtest``), and the report sorts its
    # production-readiness evidence by them: the upgrade, downgrade and re-upgrade (or gate
    # off and on again) a KEP's review asks about, as this subtest checked them. A gate-cycle
    # subtest names the KEPs of the gates it toggles (its evidence is that those switch off and
    # on again), not those of features it merely uses.
    keps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _check_releases(self.name, self.releases)
        _check_releases(self.name, self.kubelet_releases)
        _check_keps(self.name, self.keps)

    def known_bug(self, phase: str, releases: Mapping[str, str]) -> KnownBug | None:
        """The known bug that breaks ``phase`` with the components on ``releases``, if any."""
        return next((bug for bug in self.known_bugs if bug.applies(phase, releases)), None)

    def unmet_release(self, control_plane: Sequence[str], kubelet: Sequence[str]) -> str | None:
        """Why the releases a suite runs exclude this subtest, or None."""
        return _unmet_release(self.releases, self.kubelet_releases, control_plane, kubelet)


def _check_releases(name: str, releases: str | None) -> None:
    """A malformed specifier fails when the subtest module is imported, not mid-run."""
    if releases is not None:
        release_specifier(releases)


def _check_keps(name: str, keps: tuple[int, ...]) -> None:
    """A KEP number that is not in the report's table (a typo, or a KEP the table lacks) fails
    when the subtest module is imported: evidence filed under the wrong KEP misleads its
    review."""
    for number in keps:
        if isinstance(number, bool) or not isinstance(number, int) or number not in KEPS:
            raise ValueError(
                f"{name}: KEP {number!r} is not in e2e_dra.report.KEPS (add it there with its "
                "title from kubernetes/enhancements, or fix the number)"
            )
    if len(set(keps)) != len(keps):
        raise ValueError(f"{name}: a KEP is named twice in {keps}")


def _unmet_release(
    releases: str | None,
    kubelet_releases: str | None,
    control_plane: Sequence[str],
    kubelet: Sequence[str],
) -> str | None:
    if excluded := unsupported_release(releases, *control_plane):
        return f"needs Kubernetes {releases}; {excluded} is not"
    spec = kubelet_releases or releases
    if excluded := unsupported_release(spec, *kubelet):
        return f"needs a kubelet of Kubernetes {spec}; the kubelet's {excluded} is not"
    return None


def unsupported_release(releases: str | None, *versions: str) -> str | None:
    """The first of ``versions`` (``v1.36.5``) that ``releases`` excludes, or None."""
    if releases is None:
        return None
    return next((v for v in versions if not matches(releases, v)), None)


@dataclass(frozen=True)
class StepTime:
    """How one ``ctx.step`` went: when it started (time.time()), how long it took, and whether
    it passed, so a slow or red phase shows which of its parts took the time or broke."""

    name: str
    start: float
    seconds: float
    outcome: str  # STEP_PASSED, STEP_FAILED or STEP_INTERRUPTED


_FAILING_STEP = "e2e_dra_failing_step"
"""The attribute ``Context.step`` sets on the exception that ends a step: the innermost step."""


def failing_step(exc: BaseException) -> str | None:
    """The name of the innermost step ``exc`` ended, or None when it was raised outside every
    step: the suite names it in the failure's message (summary, JUnit, report)."""
    name = getattr(exc, _FAILING_STEP, None)
    return name if isinstance(name, str) else None


@dataclass
class WhileKubeletDown:
    """What a phase asked the next cluster step to do while the kubelet is down
    (:meth:`Context.while_kubelet_down`), and, once that step ran, how it went."""

    what: str  # "delete pod tester-1": said in the log and in a failure
    action: Callable[[Kube], None]  # given a client of the cluster
    done_in: str | None = None  # the state the step brought the cluster to, once it was done
    not_done: str | None = None  # why it was not done: the step did not stop the kubelet
    error: BaseException | None = None

    def happened(self) -> bool:
        """For the phase after the step: True when it was done, False when the step gave it no
        chance (:attr:`not_done` says why); when it failed, that error, raised."""
        if self.error is not None:
            raise AssertionError(
                f"{self.what}, while the kubelet was down, failed: {self.error}"
            ) from self.error
        return self.done_in is not None


@dataclass
class Context:
    """What a phase works with, built for it: its own API client (closed when it ends), a
    builder over that client, the subtest's driver, and where to keep artifacts and facts."""

    kube: Kube
    plugin: Driver | None  # e2e-dra's own kubelet plugin; None when a real driver serves
    builder: Builder
    nodes: list[str]
    phase: str
    artifacts: Path
    namespace: str = "default"
    log: Callable[[str], None] = field(default=print)
    # The subtest's other drivers (``Subtest.other_drivers``), by suffix.
    others: Mapping[str, Driver] = field(default_factory=dict)
    # What the subtest observed about the cluster that is worth keeping with the run, by key
    # (e.g. which service version a kubelet chose); the real suites put it in summary.json.
    facts: dict[str, Any] = field(default_factory=dict)
    # When the process of each running component started (time.time()), so that a check can
    # tell what a component said since it restarted from what the one before it said.
    started: Mapping[str, float] = field(default_factory=dict)
    # The log file of each running component (its current process writes there), for a check
    # that needs what a component decided and logged only (``scheduler_found_no_fit``).
    logs: Mapping[str, Path] = field(default_factory=dict)
    # Every step of this phase as it ended (``step``), in the order they ended; the suite puts
    # them into the phase's result in summary.json.
    steps: list[StepTime] = field(default_factory=list)
    # What this phase asked the next cluster step to do while the kubelet is down, in order.
    kubelet_down: list[WhileKubeletDown] = field(default_factory=list)
    # The release each component runs in this phase (``kubelet`` -> ``v1.37.2``).
    releases: Mapping[str, str] = field(default_factory=dict)
    # The real driver of a subtest that runs one (``Subtest.node_driver``), else None.
    real_driver: ProcessDriver | None = None

    @property
    def driver(self) -> Driver:
        """The subtest's own e2e-dra plugin (every gRPC call it answered can be seen)."""
        if self.plugin is None:
            raise AssertionError(
                "this subtest runs a real driver (ctx.real_driver), not e2e-dra's plugin"
            )
        return self.plugin

    def while_kubelet_down(self, what: str, action: Callable[[Kube], None]) -> WhileKubeletDown:
        """Have the next cluster step run ``action`` while the kubelet is stopped and the
        control plane answers: what a node must cope with when it comes back (a pod deleted
        while it was down). Only if this phase passes; the returned record tells the next phase
        whether it was done (:meth:`WhileKubeletDown.happened`: a step that does not restart the
        kubelet, or that ends the chain, does not do it)."""
        asked = WhileKubeletDown(what, action)
        self.kubelet_down.append(asked)
        return asked

    def nothing_to_prove(self, why: str) -> None:
        """Say that this phase passes without having exercised what the subtest exists for
        (e.g. a fallback this release never needs), so that a green phase that proved nothing
        shows as such: logged, and kept as the fact ``nothing_to_prove/<phase>`` that the
        report lists (a phase with two such reasons keeps both)."""
        self.log(f"{self.phase}: nothing to prove: {why}")
        key = f"{NOTHING_TO_PROVE}/{self.phase}"
        said = self.facts.get(key)
        self.facts[key] = f"{said}; {why}" if said else why

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """A named part of a phase (upstream's ``tCtx.Run``): said when it starts, and named in
        the failure, so a red phase tells which of its checks broke. Each step's start, duration
        and outcome are kept (``steps``) for the summary, the trace and the report; a step that
        passes is kept in the facts too (``proved/<phase>``, in order), so a run says what each
        phase proved."""
        self.log(f"{self.phase}: {name}")
        start, clock = time.time(), time.monotonic()

        def ended(outcome: str) -> None:
            self.steps.append(StepTime(name, start, time.monotonic() - clock, outcome))

        try:
            yield
        except Exception as exc:
            ended(STEP_FAILED)
            if failing_step(exc) is None:  # an enclosing step keeps the innermost one's name
                with contextlib.suppress(AttributeError):  # a type that refuses attributes
                    setattr(exc, _FAILING_STEP, name)
            exc.add_note(f"e2e-dra: in step {name!r} of phase {self.phase!r}")
            raise
        except BaseException:  # Ctrl-C, SIGTERM: the step did not end by itself
            ended(STEP_INTERRUPTED)
            raise
        ended(STEP_PASSED)
        self.facts.setdefault(f"{PROVED}/{self.phase}", []).append(name)


DRIVER_SUBTEST_PREFIX = "driver-"
"""A real driver's subtest is ``driver-<its label>`` (``e2e_dra.subtests.drivers``): no module's
subtest may be named so."""


def discover(
    package: str = "e2e_dra.subtests", *, gate_cycle: bool = False, kind: SuiteKind | None = None
) -> list[Subtest]:
    """Every ``SUBTEST`` defined by a module of ``package``, by name.

    Adding a subtest is adding a module; nothing else needs to know about it. The suite ``kind``
    (by default the gate cycle's if ``gate_cycle``, else the upgrade's) says which it takes: a gate
    cycle's subtests must name the gates they toggle; an upgrade chain's must not.
    """
    if kind is None:
        kind = GATE_CYCLE_KIND if gate_cycle else UPGRADE_KIND
    found: dict[str, Subtest] = {}
    for module in _modules(importlib.import_module(package)):
        subtest = getattr(module, "SUBTEST", None)
        if subtest is None:
            continue
        if not isinstance(subtest, Subtest):
            raise TypeError(f"{module.__name__}.SUBTEST is not an e2e_dra.subtest.Subtest")
        if not kind.takes(subtest.toggled_gates):
            wanted = (
                "must name" if kind.cycles_gates else "is not in a gate cycle and must not name"
            )
            raise TypeError(f"{module.__name__}.SUBTEST {wanted} toggled_gates")
        if subtest.name in found:
            raise ValueError(f"two subtests are named {subtest.name!r}")
        if subtest.name.startswith(DRIVER_SUBTEST_PREFIX):
            raise ValueError(
                f"{module.__name__}.SUBTEST: {subtest.name!r} starts with "
                f"{DRIVER_SUBTEST_PREFIX!r}, which names the real drivers' subtests"
            )
        found[subtest.name] = subtest
    return [found[name] for name in sorted(found)]


def _modules(package: ModuleType) -> list[ModuleType]:
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
        if not info.ispkg and not info.name.startswith("_")
    ]
