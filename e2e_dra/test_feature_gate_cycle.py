"""Feature gates switched on, off and on again (upstream's TestFeatureGateCycle): every subtest
under ``subtests/gate_cycle/`` gets its own cluster of the current release and runs one phase per
gate state. Run it alone with ``pytest e2e_dra -k gate_cycle``.
"""

import pytest

from e2e_dra._suite import GATE_CYCLE

E2E_DRA_SUITE = GATE_CYCLE
pytestmark = pytest.mark.real


def test_cluster_step(e2e_dra_run, e2e_dra_step):
    e2e_dra_run.execute(e2e_dra_step)


def test_phase(e2e_dra_run, e2e_dra_phase):
    e2e_dra_run.execute(e2e_dra_phase)
