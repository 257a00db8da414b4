"""Names, order and network endpoints of the long-running cluster components."""

from __future__ import annotations

KUBE_CLUSTER_COMPONENTS: tuple[str, ...] = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
)
"""In the order in which they need to be started and upgraded; stopped in reverse."""

ETCD = "etcd"
COMPONENTS: tuple[str, ...] = (ETCD, *KUBE_CLUSTER_COMPONENTS)
"""Every long-running process the engine starts itself (etcd only with newer scripts)."""

STARTED_TOGETHER: tuple[str, ...] = ("kube-controller-manager", "kube-scheduler", "kubelet")
"""Need nothing but the API server: they are started at once when the last of them is named (the
script waits for the kubelet's serving certificate request right after naming it), then waited for
together. Upstream waits for each before it starts the next. kube-proxy still waits for the
kubelet, as in the script's own order."""

FEATURE_GATED_COMPONENTS: tuple[str, ...] = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
)
"""kube-proxy takes gates from its config file only, so it is never restarted for a gate change."""

DEFAULT_SETTINGS: dict[str, str] = {
    "API_HOST_IP": "127.0.0.1",
    "API_SECURE_PORT": "6443",
    "KUBELET_HOST": "127.0.0.1",
    "KUBELET_PORT": "10250",
    "KCM_SECURE_PORT": "10257",
    "SCHEDULER_SECURE_PORT": "10259",
    "PROXY_HEALTHZ_PORT": "10256",
    "ETCD_HOST": "127.0.0.1",
    "ETCD_PORT": "2379",
    "CERT_DIR": "/var/run/kubernetes",
}
"""What hack/local-up-cluster.sh uses when it does not print an assignment."""

NODE_COMPONENTS: tuple[str, ...] = ("kubelet", "kube-proxy")
"""What :meth:`Cluster.start` holds back with ``hold_node``: they use the node's fixed ports and
directories, which another cluster's node may still hold."""

CONTROL_PLANE_SETTINGS: tuple[str, ...] = (
    "ETCD_PORT",
    "API_SECURE_PORT",
    "KCM_SECURE_PORT",
    "SCHEDULER_SECURE_PORT",
    "CERT_DIR",
)
"""What two control planes on one host must not share; a cluster started while another of this
process runs takes a second set of them (the script reads each from the environment)."""

PORT_SETTING: dict[str, str] = {
    ETCD: "ETCD_PORT",
    "kube-apiserver": "API_SECURE_PORT",
    "kube-controller-manager": "KCM_SECURE_PORT",
    "kube-scheduler": "SCHEDULER_SECURE_PORT",
    "kubelet": "KUBELET_PORT",
    "kube-proxy": "PROXY_HEALTHZ_PORT",
}
"""The setting naming the port each component listens on (checked for strangers before a start)."""
