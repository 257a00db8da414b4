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
    VARIANTS,
    UpgradeSuite,
    Variant,
)


def suite_of(variant: Variant) -> UpgradeSuite:
    """The suite that runs ``variant``: with a subtest per real driver if it asks for them."""
    return WithRealDrivers(variant) if variant.real_drivers else UpgradeSuite(variant)


SUITES: dict[str, Suite[Any]] = {
    **{name: suite_of(variant) for name, variant in VARIANTS.items()},
    GATE_CYCLE: GateCycleSuite(),
}
"""Every suite by the name a suite module declares: one per upgrade variant, and the gate
cycle."""

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
    "suite_of",
]
