"""Feature gates switched on, off and on again (upstream's TestFeatureGateCycle): every
subtest under ``e2e_dra.subtests.gate_cycle`` gets its own cluster of the current release and runs
one phase per gate state. Run it alone with ``pytest e2e_dra -k gate_cycle``.
"""

from e2e_dra._suite import GATE_CYCLE
from e2e_dra._suite._items import pytestmark, test_cluster_step, test_phase

E2E_DRA_SUITE = GATE_CYCLE
__all__ = ["pytestmark", "test_cluster_step", "test_phase"]
