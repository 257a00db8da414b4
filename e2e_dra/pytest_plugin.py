"""pytest plugin: turns a suite module into one reported test per step of its plan, in the order
the suite needs, and runs them against one cluster.

Loaded for the suites' own directory only (``e2e_dra/conftest.py``), or with
``-p e2e_dra.pytest_plugin``; a pytest run elsewhere on the machine never sees it. The module's
hooks add the options and register one :class:`SuitePlugin`, which keeps all its state and
implements only public pytest hooks.

A suite module declares ``E2E_DRA_SUITE = <suite name>`` and defines
``test_cluster_step(e2e_dra_run, e2e_dra_step)`` and ``test_phase(e2e_dra_run, e2e_dra_phase)``;
the plugin parametrizes them from the suite's plan.

Selection: ``-k core-dra`` keeps that subtest's phases, and the plugin adds back what they need
(earlier phases of the same subtest, the cluster steps) in plan order, so a selection never breaks
a chain. It does so after pytest's own ``--lf``, ``--ff`` and ``--sw`` have chosen, so a rerun of a
failed phase brings its earlier phases and cluster steps along.
A module's suite may run as several cells (kubelet-last's skew matrix, ``_suite._skew``), one
after the other, each a suite whose items' ids start with it (``test_phase[kubelet-1.35-...]``:
``-k "kubelet_last and 1.35"`` keeps one); the module-scoped ``e2e_dra_suite`` fixture is the cell.

Progress shows live while a suite runs, unless the user chose pytest's live logging:
``[HH:MM:SS] message`` headlines (the suite, its cluster steps, its batches of phases with a
done/total count, failures, known bugs, a verdict) and anyone's warnings; ``-v`` or
``E2E_DRA_CONSOLE=detail`` shows every line of e2e-dra and the engine, as the suite's narrative
(``ARTIFACTS/<suite>/console.log``, ``_suite._narrative``) keeps them in any case.

The cluster behind a suite comes from the hook ``pytest_e2e_dra_backend`` (first answer wins);
the plugin answers last, with the real cluster. Another plugin of the run (a conftest, ``-p``,
pytester's ``plugins=``) can answer first: that is how e2e-dra's own tests run the suite machinery
without a cluster, with nothing in this package that knows about them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from e2e_dra._console import PROGRESS_LOGGERS
from e2e_dra._paths import artifacts_dir
from e2e_dra._suite import DRIVERS_MARK, SUITES, Entry, Plan, SubtestPackages, Suite, needed
from e2e_dra._suite._artifacts import Summary, set_aside
from e2e_dra._suite._live import LiveProgress
from e2e_dra._suite._narrative import Narrative, Narrator, versions_said
from e2e_dra._suite._run import Backend, SuiteRun
from e2e_dra._suite._skew import Cell, Cells, kubelet_values
from e2e_dra.driver import parse_drivers
from e2e_dra.errors import E2EDRAError, InputError
from e2e_dra.hostkit import atomic_write_text, handling_interrupts
from e2e_dra.report import (
    JUnitCase,
    JUnitSuite,
    SuiteRecord,
    case_name,
    expected_failure_case,
    junit_case,
    junit_file_name,
    junit_xml,
    junit_xml_all,
    load_summary,
    write_report,
)
from e2e_dra.settings import Settings, settings, use
from e2e_dra.subtest import Subtest

SUITE_ATTR = "E2E_DRA_SUITE"
STEP_FIXTURE = "e2e_dra_step"
SUITE_FIXTURE = "e2e_dra_suite"
PHASE_FIXTURE = "e2e_dra_phase"
SUBTESTS_INI = "e2e_dra_subtests"
GATE_CYCLE_SUBTESTS_INI = "e2e_dra_gate_cycle_subtests"
PLUGIN_NAME = "e2e-dra-suites"

logger = logging.getLogger(__name__)


class _Hooks:
    """The hook this plugin adds to pytest's (registered by :func:`pytest_addhooks`)."""

    @pytest.hookspec(firstresult=True)
    def pytest_e2e_dra_backend(
        self,
        config: pytest.Config,
        suite: Suite,
        subtests: Mapping[str, Subtest],
        artifacts: Path,
    ) -> Backend | None:
        """The backend that runs ``suite``'s cluster steps and gives its phases their context,
        for the selected ``subtests``; ``artifacts`` is the suite's directory. The first answer
        that is not None wins."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_Hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("e2e-dra", "e2e-dra suites (upgrade/downgrade, feature-gate cycle)")
    group.addoption(
        "--e2e-dra-seed",
        type=int,
        default=None,
        metavar="N",
        help="seed of the random subtest order (default: a new one, printed at start and end)",
    )
    group.addoption(
        "--e2e-dra-serial",
        action="store_true",
        default=False,
        help="run the subtests of a phase one after another, not at the same time (slower; "
        "to compare, or to tell an interference between subtests from a bug)",
    )
    parser.addini(
        SUBTESTS_INI, "package of the upgrade/downgrade subtests", default="e2e_dra.subtests"
    )
    parser.addini(
        GATE_CYCLE_SUBTESTS_INI,
        "package of the feature-gate cycle subtests",
        default="e2e_dra.subtests.gate_cycle",
    )


def pytest_configure(config: pytest.Config) -> None:
    # The edge of a pytest run: the environment is read here, once, for all the code below.
    try:
        settings = Settings.from_environ(os.environ)
        parse_drivers(settings.drivers)  # the driver suite's, checked before anything runs
        kubelet_values(settings.kubelet_version)  # kubelet-last's, in form; resolved later
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line(
        "markers", "real: needs real Kubernetes components and a node runtime (see README)"
    )
    config.addinivalue_line(
        "markers", f"{DRIVERS_MARK}: a real DRA driver's phase (E2E_DRA_DRIVERS; -k drivers)"
    )
    seed = config.getoption("e2e_dra_seed")
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2**31)
    config.pluginmanager.register(SuitePlugin(config, settings, seed), PLUGIN_NAME)


@pytest.hookimpl(trylast=True)
def pytest_e2e_dra_backend(
    suite: Suite, subtests: Mapping[str, Subtest], artifacts: Path
) -> Backend:
    """The real cluster: the answer when no other plugin of the run gives one."""
    from e2e_dra._suite._cluster import RealCluster  # the engine, releases, driver: heavy

    return RealCluster(suite, subtests, artifacts)


@pytest.fixture(scope="module")
def e2e_dra_suite(request: pytest.FixtureRequest) -> Suite[Any]:
    """The suite this module's tests run: its only cell; a module of several cells parametrizes
    this fixture with them (module-scoped: a new cell tears the last one's run down)."""
    suite = _suite_of(request.module)
    if suite is None:
        raise pytest.UsageError(f"{request.module.__name__} does not set {SUITE_ATTR}")
    return _plugin(request.config).cells(suite)[0].suite


@pytest.fixture(scope="module")
def e2e_dra_run(request: pytest.FixtureRequest, e2e_dra_suite: Suite[Any]) -> Iterator[SuiteRun]:
    """The running suite of this module (of this cell); its teardown stops the cluster."""
    yield from _plugin(request.config).running(e2e_dra_suite)


def _plugin(config: pytest.Config) -> SuitePlugin:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if not isinstance(plugin, SuitePlugin):  # pytest_configure registers it, always
        raise RuntimeError(f"the {PLUGIN_NAME} plugin is not registered (found {plugin!r})")
    return plugin


class SuitePlugin:
    """The suites of one pytest run: their plans, the selection fix-up, the running suite."""

    def __init__(self, config: pytest.Config, settings: Settings, seed: int) -> None:
        self.config = config
        self.seed = seed
        self.settings_before = use(settings)
        self.plans: dict[str, Plan] = {}
        self.cells = Cells()  # the suites each module's suite runs as (kubelet-last's matrix)
        self.subtests: dict[str, dict[str, Subtest]] = {}
        self.selected: dict[str, set[str]] = {}
        self.kept: dict[str, list[Entry]] = {}  # what runs of each suite, in order
        self.summaries: dict[str, str] = {}
        self.report_line = ""  # where the report is, or why it is not
        self.report: Path | None = None  # the report, once written
        self.suite_order: list[str] = []  # the suites that run, in the order they run
        xmlpath = _junit_path(config)
        self.junit = _JUnit(xmlpath) if settings.ci or xmlpath else None
        self._collected: list[pytest.Item] = []
        self._deselected: set[int] = set()  # ids of every item deselected so far
        self._rescued: dict[int, pytest.Item] = {}  # deselected, but needed: they run
        self.progress = LiveProgress(config)
        self.levels_before = {name: logging.getLogger(name).level for name in PROGRESS_LOGGERS}
        # Our loggers record INFO in every run, so a failed test's report shows its progress
        # lines ("Captured log"); the root keeps its WARNING for every other library.
        for name in PROGRESS_LOGGERS:
            logging.getLogger(name).setLevel(logging.INFO)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Hand back the settings and levels of before (a run inside a run ends here)."""
        use(self.settings_before)
        for name, level in self.levels_before.items():
            logging.getLogger(name).setLevel(level)

    # --- collection ---------------------------------------------------------------------------

    def plan(self, suite: Suite[Any]) -> Plan:
        """The suite's plan (discovering its subtests the first time)."""
        if suite.name not in self.plans:
            packages = SubtestPackages(
                self.config.getini(SUBTESTS_INI), self.config.getini(GATE_CYCLE_SUBTESTS_INI)
            )
            found = suite.find_subtests(packages)
            self.subtests[suite.name] = {s.name: s for s in found}
            self.plans[suite.name] = suite.plan(sorted(self.subtests[suite.name]), self.seed)
        return self.plans[suite.name]

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        suite = _suite_of(metafunc.module)
        if suite is None:
            return
        cells = self.cells(suite)
        matrix = any(cell.id is not None for cell in cells)  # each item names its cell's suite
        for fixture, phases in ((STEP_FIXTURE, False), (PHASE_FIXTURE, True)):
            if fixture in metafunc.fixturenames:
                params = [
                    self._param(cell, step)
                    for cell in cells
                    for step in self.plan(cell.suite)
                    if (step.chain_position is not None) == phases
                ]
                names = [SUITE_FIXTURE, fixture] if matrix else fixture
                metafunc.parametrize(names, params, scope="module" if matrix else None)

    def _param(self, cell: Cell, step: Entry) -> Any:
        """A step (and its cell's suite, in a matrix) as a test's parameter; a real driver's
        phases carry the drivers mark."""
        subtest = self.subtests[cell.suite.name].get(step.subtest or "")
        real = subtest is not None and subtest.node_driver is not None
        marks = [getattr(pytest.mark, DRIVERS_MARK)] if real else []
        if cell.id is None:
            return pytest.param(step, id=step.id, marks=marks)
        return pytest.param(cell.suite, step, id=f"{cell.id}-{step.id}", marks=marks)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Iterator[None]:
        """Once everyone chose (-k, -m, --lf, --ff, --sw: registered after pytest's cache
        plugins, this wrapper ends last), put back what the chosen phases need, in plan order."""
        if self.cells.error is not None:  # a matrix that cannot be resolved: one line
            raise pytest.UsageError(self.cells.error)
        self._collected = list(items)
        result = yield
        step_of = self._steps_of(self._collected)
        if not step_of:
            return result
        keep = self._needed(step_of, [item for item in items if id(item) in step_of])
        for suite, block in keep.items():
            self.kept[suite] = [step_of[id(item)] for item in block]
            self.selected[suite] = {
                step.subtest
                for item in block
                if (step := step_of[id(item)]).chain_position is not None and step.subtest
            }
        ordered: list[pytest.Item] = []
        for item in items:  # the others keep the order pytest's plugins gave them
            found = step_of.get(id(item))
            if found is None:
                ordered.append(item)
            elif found.suite in keep:
                ordered += keep.pop(found.suite)
        for block in keep.values():  # a suite none of whose items was chosen as such
            ordered += block
        self.suite_order = list(dict.fromkeys(s.suite for i in ordered if (s := _step_of(i))))
        if self.junit is not None:
            self.junit.steps.update((i.nodeid, s) for i in ordered if (s := _step_of(i)))
        kept = {id(item) for item in ordered}
        unneeded = [item for key, item in self._rescued.items() if key not in kept]
        if unneeded:  # kept back from an early deselection, and no later choice needs them
            config.hook.pytest_deselected(items=unneeded)
        items[:] = ordered
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Keep what the still selected phases need out of a deselection, before anyone counts
        it: those items run, so pytest's "N deselected" must not count them."""
        step_of = self._steps_of(self._collected)
        if not step_of:
            return
        self._deselected.update(id(item) for item in items)
        remaining = [
            i for i in self._collected if id(i) in step_of and id(i) not in self._deselected
        ]
        needed_now = {
            id(item) for block in self._needed(step_of, remaining).values() for item in block
        }
        rescued = [item for item in items if id(item) in needed_now]
        self._rescued.update((id(item), item) for item in rescued)
        items[:] = [item for item in items if id(item) not in needed_now]

    def _steps_of(self, items: list[pytest.Item]) -> dict[int, Entry]:
        return {id(item): step for item in items if (step := _step_of(item)) is not None}

    def _needed(
        self, step_of: dict[int, Entry], chosen: list[pytest.Item]
    ) -> dict[str, list[pytest.Item]]:
        """Per suite, the items ``chosen`` need, in plan order."""
        chosen_ids = {id(item) for item in chosen}
        blocks: dict[str, list[pytest.Item]] = {}
        for suite, plan in self.plans.items():
            item_of = {step_of[id(i)]: i for i in self._collected if step_of.get(id(i)) in plan}
            picked = [step for step, item in item_of.items() if id(item) in chosen_ids]
            blocks[suite] = [item_of[step] for step in needed(plan, picked)]
        return blocks

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        return [_seed_line(self.seed)] if any(self.selected.values()) else []

    # --- running ------------------------------------------------------------------------------

    def running(self, suite: Suite[Any]) -> Iterator[SuiteRun]:
        """``suite`` running; it ends with the cluster stopped (also on -x, Ctrl-C, SIGTERM)."""
        plan = self.plan(suite)
        names = self.selected.get(suite.name, set())
        subtests = {n: s for n, s in self.subtests[suite.name].items() if n in names}
        artifacts = artifacts_dir() / suite.name
        earlier = set_aside(artifacts, settings().keep_runs)
        artifacts.mkdir(parents=True, exist_ok=True)
        backend = self.config.hook.pytest_e2e_dra_backend(
            config=self.config, suite=suite, subtests=subtests, artifacts=artifacts
        )
        ids = [e.id for e in plan if e.chain_position is None or e.subtest in names]
        keps = {name: subtest.keps for name, subtest in subtests.items()}
        narrative = Narrative(artifacts)
        summary = Summary(
            artifacts, suite.name, self.seed, ids, backend.describe, keps=keps,
            console=narrative.files,
        )  # fmt: skip
        self.summaries[suite.name] = str(summary.path)
        together = not self.config.getoption("e2e_dra_serial")
        kept = self.kept.get(suite.name, [])
        order = self.suite_order or [suite.name]
        narrator = Narrator(
            suite.name,
            position=order.index(suite.name) + 1 if suite.name in order else len(order) + 1,
            suites=max(len(order), 1),
            total=len(kept or ids),
            subtests=len(subtests),
            versions=lambda: versions_said(backend.describe()),
            narrative=narrative,
        )
        run = SuiteRun(suite.name, subtests, backend, summary, plan, kept, together=together,
                       narrator=narrator)  # fmt: skip
        with self.progress.shown(), narrative.attached():
            if earlier is not None:
                logger.info(f"the last run of {suite.name} is kept in {earlier}")
            try:
                # The edge of a suite run: SIGTERM (a CI job cancelled, ``kill``) ends it as
                # Ctrl-C does, the cluster's processes stopped at once (the engine registered
                # that), the phase reported interrupted, the cleanup run and summary.json done.
                with handling_interrupts(terminated=Terminated):
                    yield run
            finally:
                # The cleanup has an edge of its own: after a failure under -x it runs here, as
                # this fixture's teardown, and a SIGTERM then must stop the cluster too, not kill
                # the job on the spot. Not one block with the one above: leaving that one first
                # waits until an interrupt's stops are done, so the cleanup never takes a
                # cluster that is being stopped for a live one.
                with handling_interrupts(terminated=Terminated):
                    try:
                        run.close()
                    finally:
                        self.write_outputs()  # a job cancelled in the next suite leaves these
                        narrator.verdict(summary.results, summary.path, self.report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.junit is not None:
            self.junit.add(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Once more, with every report (a suite's last teardown comes after its end); last,
        so that ``--junitxml``'s file is ours: pytest's own writer wrote it just before."""
        self.write_outputs()

    def write_outputs(self) -> None:
        """``report.html`` and ``trace.json`` of this run's suites, and their JUnit (the
        ``--junitxml`` file, or in CI one file per suite under ARTIFACTS). What cannot be
        written is said (in the terminal summary too); it never fails a test."""
        if not self.summaries:
            return
        root = artifacts_dir()
        try:
            if self.junit is not None:
                records = {suite: _summary_of(path) for suite, path in self.summaries.items()}
                self.junit.write(root, records, {"e2e_dra_seed": str(self.seed)})
            summaries = [Path(p) for p in self.summaries.values() if Path(p).is_file()]
            base = settings().report_link_base  # for a page Prow's Spyglass inlines
            written = write_report(summaries, root, lenient=True, link_base=base)
            self.report_line = f"e2e-dra: report: {written.html}"
            self.report = written.html
            return
        except (E2EDRAError, OSError) as exc:
            self.report_line = f"e2e-dra: cannot write the run's report under {root}: {exc}"
        except Exception as exc:  # a bug of the report must not hide how the tests went
            self.report_line = (
                f"e2e-dra: writing the run's report failed (a bug): {type(exc).__name__}: {exc}"
            )
        logger.warning(self.report_line)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.summaries:
            return
        terminalreporter.write_sep("-", "e2e-dra")
        terminalreporter.write_line(_seed_line(self.seed))
        for suite, path in self.summaries.items():
            terminalreporter.write_line(f"e2e-dra: {suite} summary (timings, versions): {path}")
        if self.report_line:
            terminalreporter.write_line(self.report_line)


class _JUnit:
    """The run's one JUnit writer: a case per item of a suite, named ``<suite> <subtest>
    <phase>`` (``<suite> <step>``) as testgrid shows them, whose time, outcome and message come
    from the suite's summary.json. pytest's times are wrong for phases that ran at the same time
    (the first test of a batch runs it all, the others replay how theirs ended), so its reports
    give only what the summary does not hold: a failure's text (traceback and notes), an error
    of a test's setup or teardown, and a case of a test that never reached the suite.

    With ``--junitxml=PATH`` (``xmlpath``) PATH gets one document of every suite of the run and
    of its other tests (as pytest names them), written over pytest's own; without it (in CI)
    each suite gets ``junit_e2e-dra_<suite>.xml`` under ARTIFACTS."""

    def __init__(self, xmlpath: Path | None) -> None:
        self.xmlpath = xmlpath
        self.steps: dict[str, Entry] = {}  # nodeid -> the entry of a suite's item
        self._reported: dict[str, JUnitCase] = {}  # nodeid -> its case, as pytest reported it

    def add(self, report: pytest.TestReport) -> None:
        """Fold one phase (setup, call, teardown) of a test into its case: times add up, the
        first phase that did not pass says how it ended."""
        step = self.steps.get(report.nodeid)
        if step is None and self.xmlpath is None:
            return  # a test outside the suites has no file of its own in CI
        before = self._reported.get(report.nodeid)
        seconds = report.duration + (before.seconds if before else 0.0)
        if step is not None:
            name, classname = case_name(step.suite, step.id), ""
        else:
            name, classname = _pytest_names(report.nodeid)
        outcome, message, text = _junit_outcome(report)
        case = JUnitCase(name, outcome, seconds, message, text, classname)
        if hasattr(report, "wasxfail") and step is not None:
            # A suite's expected failure is always a known Kubernetes bug, marked as the
            # summary's is (also when there is no summary to read: the suite failed before it).
            case = expected_failure_case(name, seconds, message, text, classname)
        if before is not None and (before.outcome != "passed" or outcome == "passed"):
            case = dataclasses.replace(before, seconds=seconds)
        self._reported[report.nodeid] = case

    def cases(self, suite: str, record: SuiteRecord | None) -> list[JUnitCase]:
        """``suite``'s cases: its summary's results in the order they ran, then the items of
        the suite it has none for (an error before the suite ran them)."""
        nodeids = {s.id: n for n, s in self.steps.items() if s.suite == suite}
        found, done = [], set()
        for result in record.results if record is not None else ():
            nodeid = nodeids.get(result.id)
            reported = self._reported.get(nodeid) if nodeid else None
            case = junit_case(suite, result, reported.text if reported else "")
            if reported is not None and case.outcome == "passed" and reported.outcome != "passed":
                # an error of the test's setup or teardown, after the suite recorded it
                case = dataclasses.replace(reported, name=case.name, seconds=case.seconds)
            found.append(case)
            done.add(nodeid)
        found += [
            case
            for nodeid, case in self._reported.items()
            if nodeid in nodeids.values() and nodeid not in done
        ]
        return found

    def write(
        self, artifacts: Path, records: dict[str, SuiteRecord | None], properties: dict[str, str]
    ) -> None:
        suites = [
            JUnitSuite(
                suite,
                self.cases(suite, record),
                record.wall_seconds if record is not None else None,
                {**properties, **dict(record.drivers if record is not None else ())},
            )
            for suite, record in records.items()
        ]
        if self.xmlpath is None:
            for one in suites:
                xml = junit_xml(one.suite, one.cases, artifacts, seconds=one.seconds,
                                properties=one.properties)  # fmt: skip
                atomic_write_text(artifacts / junit_file_name(one.suite), xml)
            return
        others = [case for n, case in self._reported.items() if n not in self.steps]
        if others:
            suites.append(JUnitSuite("pytest", others, title="pytest"))
        self.xmlpath.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.xmlpath, junit_xml_all(suites, artifacts))


def _junit_path(config: pytest.Config) -> Path | None:
    """``--junitxml``'s file, resolved as pytest resolves it; None when not asked for."""
    given = config.getoption("xmlpath", None)
    if not given:
        return None
    path = Path(os.path.expandvars(str(given))).expanduser()
    return Path(os.path.normpath(config.invocation_params.dir / path))


def _summary_of(path: str) -> SuiteRecord | None:
    """The suite's summary as the report reads it; None (its cases then timed by pytest) when
    it cannot be read, which is said."""
    try:
        return load_summary(Path(path))
    except E2EDRAError as exc:
        logger.warning(f"e2e-dra: JUnit times from pytest, not from {path}: {exc}")
        return None


def _pytest_names(nodeid: str) -> tuple[str, str]:
    """(name, classname) of a test outside the suites, as pytest's own JUnit names it:
    ``dir/test_x.py::TestA::test_b`` is ``test_b`` of ``dir.test_x.TestA``."""
    path, *names = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    if not names:
        return module, ""
    return names[-1], ".".join([module, *names[:-1]])


def _junit_outcome(report: pytest.TestReport) -> tuple[str, str, str]:
    """(outcome, message, text) of one phase (setup, call, teardown) of a test."""
    if report.passed:
        return "passed", "", ""
    if hasattr(report, "wasxfail"):  # a phase a known Kubernetes bug broke, as declared
        return "skipped", report.wasxfail, report.longreprtext
    if report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return "skipped", reason.removeprefix("Skipped: "), ""
    text = report.longreprtext
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", "") or (text.strip().splitlines() or [""])[-1]
    return ("failed" if report.when == "call" else "error"), message, text


class Terminated(KeyboardInterrupt):
    """SIGTERM during a suite: unwinds as Ctrl-C does, and says which signal it was."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"{signal_name} received")


def _suite_of(module: Any) -> Suite | None:
    name = getattr(module, SUITE_ATTR, None)
    if name is None:
        return None
    if name not in SUITES:
        raise pytest.UsageError(f"{SUITE_ATTR} = {name!r} is not a known e2e-dra suite")
    return SUITES[name]


def _step_of(item: pytest.Item) -> Entry | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for fixture in (STEP_FIXTURE, PHASE_FIXTURE):
        step = callspec.params.get(fixture)
        if step is not None:
            return step
    return None


def _seed_line(seed: int) -> str:
    return f"e2e-dra: subtest order seed {seed} (repeat this order with --e2e-dra-seed={seed})"
