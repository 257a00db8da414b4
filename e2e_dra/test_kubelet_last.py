"""A staged upgrade, kubelet last: the control plane runs the current release throughout; the
subtests' first phase runs with the kubelet and kube-proxy of an older release
(``E2E_DRA_KUBELET_VERSION``, by default the previous minor), the second after they moved to the
current release, the third after they moved back. ``-k kubelet_last`` runs this variant alone.

Several kubelets (``E2E_DRA_KUBELET_VERSION=1.35,1.36`` or ``skew``) make a matrix: a cell per
kubelet, one after the other, its items named by it (``test_phase[kubelet-1.35-...]``), so
``-k "kubelet_last and 1.35"`` runs one cell (``e2e_dra._suite._skew``).
"""

from e2e_dra._suite import KUBELET_LAST
from e2e_dra._suite._items import pytestmark, test_cluster_step, test_phase

E2E_DRA_SUITE = KUBELET_LAST
__all__ = ["pytestmark", "test_cluster_step", "test_phase"]
