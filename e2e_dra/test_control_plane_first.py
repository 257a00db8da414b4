"""A staged upgrade, control plane first: the subtests' first phase runs on the previous release,
the second after kube-apiserver, kube-controller-manager and kube-scheduler moved to the current
release (the kubelet and kube-proxy stay behind, as in a real cluster whose nodes are not rolled
yet), the third after they moved back. ``-k control_plane_first`` runs this variant alone.
"""

from e2e_dra._suite import CONTROL_PLANE_FIRST
from e2e_dra._suite._items import pytestmark, test_cluster_step, test_phase

E2E_DRA_SUITE = CONTROL_PLANE_FIRST
__all__ = ["pytestmark", "test_cluster_step", "test_phase"]
