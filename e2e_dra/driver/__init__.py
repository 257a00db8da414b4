"""The drivers a subtest runs: e2e-dra's own kubelet plugin, which runs inside the test process,
and real drivers, each a program of its own (``ProcessDriver``: upstream's Go test driver,
sigs.k8s.io/dra-example-driver, or a user's command).

The kubelet registers our plugin through ``<kubelet root>/plugins_registry/<driver>-reg.sock``,
prepares claims through ``<kubelet root>/plugins/<driver>/dra.sock`` (DRA gRPC v1 and v1beta1),
and the container runtime injects the env vars it writes as CDI specs; its ResourceSlices are
kept in the API by a watch. ``e2e-dra driver kubelet-plugin`` runs the same driver standalone.

The gRPC stubs in ``_pb`` come from ``proto/``: ``python e2e_dra/driver/proto/generate.py``.
"""

from e2e_dra.driver._calls import CLIENT_GONE, FAULTABLE_METHODS, CallLog, GRPCCall
from e2e_dra.driver._kinds import (
    CLEANUP_AFTER_RESTART,
    DRIVERS_SETTING,
    PLACEHOLDERS,
    CommandDriver,
    DriverKind,
    DriverLimit,
    ExampleDriver,
    Site,
    UpstreamTestDriver,
    parse_drivers,
)
from e2e_dra.driver._node_driver import NodeDriver
from e2e_dra.driver._node_service import ClaimRef, claim_env_name
from e2e_dra.driver._plugin import HEALTH_VERSIONS, Driver, DriverError
from e2e_dra.driver._process_driver import ProcessDriver, pools_complete
from e2e_dra.driver._slices import RESYNC_GRACE, DroppedFieldsError, Pool, node_devices

__all__ = [
    "CLEANUP_AFTER_RESTART",
    "CLIENT_GONE",
    "DRIVERS_SETTING",
    "FAULTABLE_METHODS",
    "HEALTH_VERSIONS",
    "PLACEHOLDERS",
    "RESYNC_GRACE",
    "CallLog",
    "ClaimRef",
    "CommandDriver",
    "Driver",
    "DriverError",
    "DriverKind",
    "DriverLimit",
    "DroppedFieldsError",
    "ExampleDriver",
    "GRPCCall",
    "NodeDriver",
    "Pool",
    "ProcessDriver",
    "Site",
    "UpstreamTestDriver",
    "claim_env_name",
    "node_devices",
    "parse_drivers",
    "pools_complete",
]
