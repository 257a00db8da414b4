"""pytest plugin: turns a suite module into one reported test per cluster step and per
(subtest, phase), in the order the suite needs, and runs them against one cluster.

Loaded for every pytest run (entry point ``pytest11``), so it imports nothing heavy and does
nothing unless a module that declares ``E2E_DRA_SUITE`` is collected. Such a module defines
``test_cluster_step(e2e_dra_run, e2e_dra_step)`` and ``test_phase(e2e_dra_run, e2e_dra_phase)``;
this plugin parametrizes them from the suite's plan.

Progress shows live through pytest's own live logging: unless the user configured it, this plugin
turns ``log_cli`` on at INFO with ``[HH:MM:SS] message`` lines, and lets through only the progress
records (``e2e_dra``'s and the engine's, anyone's warnings) while a suite runs; a run without a
suite looks as it would without this plugin.

Selection: ``-k core-dra`` keeps that subtest's phases, and this plugin adds back what they need
(earlier phases of the same subtest, the cluster steps), so a selection never breaks a chain.

The cluster behind a suite comes from the hook ``pytest_e2e_dra_backend`` (first answer wins);
this plugin answers last, with the real cluster. Another plugin of the run (a conftest, ``-p``,
pytester's ``plugins=``) can answer first: that is how e2e-dra's own tests run the suite machinery
without a cluster, with nothing in this package that knows about them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import shutil
import signal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e_dra._console import LINE_FORMAT, PROGRESS_LOGGERS, TIME_FORMAT, is_progress
from e2e_dra._paths import artifacts_dir
from e2e_dra._suite._artifacts import Summary
from e2e_dra._suite._plan import (
    GATE_CYCLE,
    UPGRADE_SUITES,
    Entry,
    gate_cycle_plan,
    needed,
    upgrade_downgrade_plan,
)
from e2e_dra._suite._run import Backend, SuiteRun
from e2e_dra.errors import InputError
from e2e_dra.settings import Settings, use
from e2e_dra.subtest import GateCycleSubtest, Subtest, discover

SUITE_ATTR = "E2E_DRA_SUITE"
STEP_FIXTURE = "e2e_dra_step"
PHASE_FIXTURE = "e2e_dra_phase"
SUBTESTS_INI = "e2e_dra_subtests"
GATE_CYCLE_SUBTESTS_INI = "e2e_dra_gate_cycle_subtests"


@dataclass
class _State:
    seed: int
    live: bool
    """Whether this plugin turned pytest's live logging on (the user did not)."""
    suites_running: int = 0
    plans: dict[str, list[Entry]] = field(default_factory=dict)
    subtests: dict[str, dict[str, Any]] = field(default_factory=dict)
    selected: dict[str, set[str]] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)


_STATE = pytest.StashKey[_State]()
_SETTINGS_BEFORE = pytest.StashKey["Settings | None"]()
_LEVELS_BEFORE = pytest.StashKey[dict[str, int]]()


class _Hooks:
    """The hook this plugin adds to pytest's (registered by :func:`pytest_addhooks`)."""

    @pytest.hookspec(firstresult=True)
    def pytest_e2e_dra_backend(
        self,
        config: pytest.Config,
        suite: str,
        subtests: Mapping[str, Any],
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
    parser.addini(SUBTESTS_INI, "package of the upgrade/downgrade subtests", default="subtests")
    parser.addini(
        GATE_CYCLE_SUBTESTS_INI,
        "package of the feature-gate cycle subtests",
        default="subtests.gate_cycle",
    )


def pytest_configure(config: pytest.Config) -> None:
    # The edge of a pytest run: the environment is read here, once, for all the code below.
    try:
        config.stash[_SETTINGS_BEFORE] = use(Settings.from_environ(os.environ))
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line(
        "markers", "real: needs real Kubernetes components and a node runtime (see README)"
    )
    seed = config.getoption("e2e_dra_seed")
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2**31)
    config.stash[_STATE] = _State(seed=seed, live=_turn_on_live_logging(config))
    config.stash[_LEVELS_BEFORE] = _progress_at_info()


def _progress_at_info() -> dict[str, int]:
    """Our loggers record INFO in every run, so a failed test's report shows its progress lines
    ("Captured log"), live logging or not; their levels of before, to hand back."""
    before = {name: logging.getLogger(name).level for name in PROGRESS_LOGGERS}
    for name in PROGRESS_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    return before


def _turn_on_live_logging(config: pytest.Config) -> bool:
    """``log_cli`` at INFO as ``[HH:MM:SS] message``, unless the user chose live logging.

    Runs before pytest's logging plugin reads these options (it configures last)."""
    if config.getoption("log_cli_level", None) is not None or config.getini("log_cli"):
        return False
    config.option.log_cli_level = "INFO"
    if config.getoption("log_cli_format", None) is None:
        config.option.log_cli_format = LINE_FORMAT
    if config.getoption("log_cli_date_format", None) is None:
        config.option.log_cli_date_format = TIME_FORMAT
    return True


def pytest_sessionstart(session: pytest.Session) -> None:
    """Our live logging shows progress records, and only while a suite runs. While a suite runs,
    a failed test's report ("Captured log") keeps to progress records and warnings too: the
    engine's readiness probes alone log some 20 httpx requests a second."""
    state = session.config.stash[_STATE]
    logging_plugin = session.config.pluginmanager.get_plugin("logging-plugin")
    if logging_plugin is None:
        return

    def reported(record: logging.LogRecord) -> bool:
        return state.suites_running == 0 or is_progress(record)

    logging_plugin.report_handler.addFilter(reported)
    if not state.live:
        return

    def shown(record: logging.LogRecord) -> bool:
        return state.suites_running > 0 and is_progress(record)

    logging_plugin.log_cli_handler.addFilter(shown)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Hand back the settings of before (a run inside a run, as pytester makes, ends here)."""
    if _SETTINGS_BEFORE in config.stash:
        use(config.stash[_SETTINGS_BEFORE])
    for name, level in config.stash.get(_LEVELS_BEFORE, {}).items():
        logging.getLogger(name).setLevel(level)


def _suite_of(module: Any) -> str | None:
    return getattr(module, SUITE_ATTR, None)


def _load(config: pytest.Config, suite: str) -> list[Entry]:
    """The suite's plan (discovering its subtests the first time)."""
    state = config.stash[_STATE]
    if suite not in state.plans:
        if suite in UPGRADE_SUITES:
            found = discover(config.getini(SUBTESTS_INI), Subtest)
            make_plan = functools.partial(upgrade_downgrade_plan, suite=suite)
        elif suite == GATE_CYCLE:
            found = discover(config.getini(GATE_CYCLE_SUBTESTS_INI), GateCycleSubtest)
            make_plan = gate_cycle_plan
        else:
            raise pytest.UsageError(f"{SUITE_ATTR} = {suite!r} is not a known e2e-dra suite")
        state.subtests[suite] = {s.name: s for s in found}
        state.plans[suite] = make_plan(sorted(state.subtests[suite]), state.seed)
    return state.plans[suite]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    suite = _suite_of(metafunc.module)
    if suite is None:
        return
    plan = _load(metafunc.config, suite)
    for fixture, steps in ((STEP_FIXTURE, True), (PHASE_FIXTURE, False)):
        if fixture in metafunc.fixturenames:
            entries = [entry for entry in plan if entry.is_step == steps]
            metafunc.parametrize(fixture, entries, ids=[entry.id for entry in entries])


def _entry_of(item: pytest.Item) -> Entry | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for fixture in (STEP_FIXTURE, PHASE_FIXTURE):
        entry = callspec.params.get(fixture)
        if isinstance(entry, Entry):
            return entry
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """After -k/-m deselection: put back what the selected phases need, in plan order."""
    collected = list(items)
    result = yield
    entries = {id(item): entry for item in collected if (entry := _entry_of(item)) is not None}
    if not entries:
        _quiet_live_logging(config)
        return result
    state = config.stash[_STATE]
    selected = {id(item) for item in items}
    blocks: dict[str, list[pytest.Item]] = {}
    restored: list[pytest.Item] = []
    for suite, plan in state.plans.items():
        item_of = {entries[id(i)]: i for i in collected if entries.get(id(i)) in plan}
        chosen = [entry for entry, item in item_of.items() if id(item) in selected]
        keep = needed(plan, chosen)
        blocks[suite] = [item_of[entry] for entry in keep]
        restored += [item for item in blocks[suite] if id(item) not in selected]
        state.selected[suite] = {entry.subtest for entry in keep if not entry.is_step}
    ordered: list[pytest.Item] = []
    for item in collected:
        entry = entries.get(id(item))
        if entry is None:
            if id(item) in selected:
                ordered.append(item)
        elif entry.suite in blocks:
            ordered += blocks.pop(entry.suite)
    items[:] = ordered
    _undo_deselection(config, restored)
    if any(state.selected.values()):
        _write_line(config, _seed_line(state.seed))
    return result


def _quiet_live_logging(config: pytest.Config) -> None:
    """No suite in this run: give back pytest's output (no -v forced by live logging) and the
    root logger's level (WARNING, not INFO), as if this plugin had not turned live logging on."""
    if not config.stash[_STATE].live:
        return
    config.option.log_cli_level = None
    logging_plugin = config.pluginmanager.get_plugin("logging-plugin")
    if logging_plugin is not None:
        logging_plugin.log_cli_level = None


def _undo_deselection(config: pytest.Config, restored: list[pytest.Item]) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not restored:
        return
    back = {id(item) for item in restored}
    deselected = reporter.stats.get("deselected", [])
    deselected[:] = [item for item in deselected if id(item) not in back]


def _seed_line(seed: int) -> str:
    return f"e2e-dra: subtest order seed {seed} (repeat this order with --e2e-dra-seed={seed})"


def _write_line(config: pytest.Config, line: str) -> None:
    """A line on the terminal now, also in the middle of a test (capture suspended)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    capman = config.pluginmanager.get_plugin("capturemanager")
    suspended = capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()
    with suspended:
        reporter.write_line(line)


@pytest.fixture(scope="module")
def e2e_dra_run(request: pytest.FixtureRequest) -> Iterator[SuiteRun]:
    """The running suite of this module; its teardown stops the cluster (also on -x, Ctrl-C)."""
    config = request.config
    suite = _suite_of(request.module)
    if suite is None:
        raise pytest.UsageError(f"{request.module.__name__} does not set {SUITE_ATTR}")
    state = config.stash[_STATE]
    plan = _load(config, suite)
    names = state.selected.get(suite, set())
    subtests = {name: s for name, s in state.subtests[suite].items() if name in names}
    artifacts = artifacts_dir() / suite
    shutil.rmtree(artifacts, ignore_errors=True)  # ours alone: the last run of this suite
    artifacts.mkdir(parents=True, exist_ok=True)
    backend = config.hook.pytest_e2e_dra_backend(
        config=config, suite=suite, subtests=subtests, artifacts=artifacts
    )
    ids = [entry.id for entry in plan if entry.is_step or entry.subtest in names]
    summary = Summary(artifacts, suite, state.seed, ids, backend.describe)
    state.summaries[suite] = str(summary.path)
    request.getfixturevalue("record_testsuite_property")("e2e_dra_seed", str(state.seed))
    run = SuiteRun(suite, subtests, backend, summary)
    state.suites_running += 1
    try:
        with _sigterm_as_ctrl_c():
            yield run
    finally:
        try:
            run.close()
        finally:
            state.suites_running -= 1


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM (a CI job cancelled, ``kill``) ends the run as Ctrl-C does: the phase is reported
    interrupted, the cluster is stopped and summary.json is finished -- instead of the default,
    an instant death that leaves all of that undone."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield  # someone else decided what SIGTERM does
        return
    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.hookimpl(trylast=True)
def pytest_e2e_dra_backend(suite: str, subtests: Mapping[str, Any], artifacts: Path) -> Backend:
    """The real cluster: the answer when no other plugin of the run gives one."""
    # The real backends load the engine, the releases (httpx) and the driver (grpc): heavy, and
    # this plugin loads in every pytest run, so they are imported when one is asked for.
    if suite == GATE_CYCLE:
        from e2e_dra._suite._gate_cycle import GateCycleBackend

        return GateCycleBackend(suite, subtests, artifacts)
    from e2e_dra._suite._upgrade import UpgradeDowngradeBackend

    return UpgradeDowngradeBackend(suite, subtests, artifacts)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.summaries:
        return
    terminalreporter.write_sep("-", "e2e-dra")
    terminalreporter.write_line(_seed_line(state.seed))
    for suite, path in state.summaries.items():
        terminalreporter.write_line(f"e2e-dra: {suite} summary (timings, versions): {path}")
