"""The driver suite: each real DRA driver of ``E2E_DRA_DRIVERS`` (by default upstream's Go test
driver, built at the kubelet's release, and sigs.k8s.io/dra-example-driver) through upgrade,
downgrade and re-upgrade, judged by the same driver-agnostic rules (``e2e_dra.subtests.drivers``).
``-k drivers`` runs this suite alone.
"""

from e2e_dra._suite import DRIVERS
from e2e_dra._suite._items import pytestmark, test_cluster_step, test_phase

E2E_DRA_SUITE = DRIVERS
__all__ = ["pytestmark", "test_cluster_step", "test_phase"]
