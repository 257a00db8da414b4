"""A DRA-ready node runtime on this host: containerd with CDI, CNI, etcd, cfssl, local images.

``ensure_node_runtime()`` finds what is there and builds, installs or starts the rest;
``NodeRuntime.env()`` is what hack/local-up-cluster.sh must be given to use it.
"""

from e2e_dra.provision._images import PAUSE_IMAGE, TEST_IMAGE
from e2e_dra.provision._kubelet import KUBELET_ROOT
from e2e_dra.provision._runtime import (
    NodeRuntime,
    NodeRuntimeIncomplete,
    PieceResult,
    ensure_node_runtime,
    node_dir,
    running_ctr,
    stop_node_runtime,
)

__all__ = [
    "KUBELET_ROOT",
    "PAUSE_IMAGE",
    "TEST_IMAGE",
    "NodeRuntime",
    "NodeRuntimeIncomplete",
    "PieceResult",
    "ensure_node_runtime",
    "node_dir",
    "running_ctr",
    "stop_node_runtime",
]
