"""The suites behind ``pytest e2e_dra``: plans of steps, the run that executes them, the cluster.

Private: the pytest plugin (``e2e_dra.pytest_plugin``) is the only user. A suite module marks
itself with ``E2E_DRA_SUITE = <suite name>`` (a key of :data:`SUITES`) and imports
``test_cluster_step`` and ``test_phase`` from ``_items``; the plugin makes one item per step.
"""

from typing import Any

from e2e_dra._suite._drivers import DRIVERS_MARK, WithRealDrivers
from e2e_dra._suite._gate_cycle import GATE_CYCLE, GateCycleSuite
from e2e_dra._suite._steps import (
    ClusterStep,
    Entry,
    Phases,
    Plan,
    SubtestPackages,
    SubtestPhase,
    Suite,
    needed,
)
from e2e_dra._suite._upgrade import (
    CONTROL_PLANE_FIRST,
    KUBELET_LAST,
    UPGRADE_DOWNGRADE,
    UPGRADE_SUITES,
    VARIANTS,
)

SUITES: dict[str, Suite[Any]] = {
    **UPGRADE_SUITES,
    UPGRADE_DOWNGRADE: WithRealDrivers(VARIANTS[UPGRADE_DOWNGRADE]),
    GATE_CYCLE: GateCycleSuite(),
}
"""Every suite by the name a suite module declares."""

__all__ = [
    "CONTROL_PLANE_FIRST",
    "DRIVERS_MARK",
    "GATE_CYCLE",
    "KUBELET_LAST",
    "SUITES",
    "UPGRADE_DOWNGRADE",
    "ClusterStep",
    "Entry",
    "Phases",
    "Plan",
    "SubtestPackages",
    "SubtestPhase",
    "Suite",
    "needed",
]
