"""The main job (upstream's TestUpgradeDowngrade): every subtest under ``e2e_dra.subtests`` runs its
first phase on the previous release, its second after the upgrade to the current release, its
third after the downgrade back.

The e2e_dra pytest plugin makes one test per cluster step (``test_cluster_step[upgrade]``) and
one per subtest and phase (``test_phase[core-dra/after-cluster-upgrade]``), in that order;
``-k core-dra`` runs one subtest through all three phases.
"""

from e2e_dra._suite import UPGRADE_DOWNGRADE
from e2e_dra._suite._items import pytestmark, test_cluster_step, test_phase

E2E_DRA_SUITE = UPGRADE_DOWNGRADE
__all__ = ["pytestmark", "test_cluster_step", "test_phase"]
