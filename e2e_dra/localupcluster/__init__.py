"""Start a local Kubernetes cluster with hack/local-up-cluster.sh and restart its components with
other binaries or feature gates: the engine of an upgrade/downgrade test (a port of upstream's
test/utils/localupcluster).
"""

from e2e_dra.localupcluster._commandline import binary_index
from e2e_dra.localupcluster._components import (
    COMPONENTS,
    FEATURE_GATED_COMPONENTS,
    KUBE_CLUSTER_COMPONENTS,
    STARTED_TOGETHER,
)
from e2e_dra.localupcluster._errors import ClusterError
from e2e_dra.localupcluster._gates import (
    PROBED_BINARY,
    culprit,
    filter_locked_gates,
    format_feature_gates,
    merge_feature_gates,
    parse_feature_gates,
    refusal,
    refused_gates,
)
from e2e_dra.localupcluster._hostlock import scratch_dir
from e2e_dra.localupcluster._launch import ReadyTime
from e2e_dra.localupcluster._log import Log
from e2e_dra.localupcluster._modify import ModifyOptions
from e2e_dra.localupcluster._parse import RunLine, parse_run_line, parse_setting, split_command_line
from e2e_dra.localupcluster.cluster import Cluster, log_dir_for_test
from e2e_dra.localupcluster.cmd import Cmd

__all__ = [
    "COMPONENTS",
    "FEATURE_GATED_COMPONENTS",
    "KUBE_CLUSTER_COMPONENTS",
    "PROBED_BINARY",
    "STARTED_TOGETHER",
    "Cluster",
    "ClusterError",
    "Cmd",
    "Log",
    "ModifyOptions",
    "ReadyTime",
    "RunLine",
    "binary_index",
    "culprit",
    "filter_locked_gates",
    "format_feature_gates",
    "log_dir_for_test",
    "merge_feature_gates",
    "parse_feature_gates",
    "parse_run_line",
    "parse_setting",
    "refusal",
    "refused_gates",
    "scratch_dir",
    "split_command_line",
]
