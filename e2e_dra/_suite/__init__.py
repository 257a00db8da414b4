"""The suites behind ``pytest e2e_dra``: plans, the run state machine, backends, reporting.

Private: the pytest plugin (``e2e_dra.pytest_plugin``) is the only user. A suite module marks
itself with ``E2E_DRA_SUITE = <suite name>`` and imports ``test_cluster_step`` and ``test_phase``
from ``_items``; the plugin generates one item per plan entry.
"""

from e2e_dra._suite._plan import (
    CONTROL_PLANE_FIRST,
    GATE_CYCLE,
    GATE_CYCLE_PHASES,
    KUBELET_LAST,
    UPGRADE_DOWNGRADE,
    UPGRADE_PHASES,
    Entry,
)

__all__ = [
    "CONTROL_PLANE_FIRST",
    "GATE_CYCLE",
    "GATE_CYCLE_PHASES",
    "KUBELET_LAST",
    "UPGRADE_DOWNGRADE",
    "UPGRADE_PHASES",
    "Entry",
]
