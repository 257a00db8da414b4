"""The test DRA driver: a real kubelet plugin that runs inside the test process.

The kubelet registers it through ``<kubelet root>/plugins_registry/<driver>-reg.sock``, prepares
claims through ``<kubelet root>/plugins/<driver>/dra.sock`` (DRA gRPC v1 and v1beta1), and the
container runtime injects the env vars it writes as CDI specs; its ResourceSlices are kept in the
API by a watch. ``e2e-dra driver kubelet-plugin`` runs the same driver standalone.

The gRPC stubs in ``_pb`` come from ``proto/``: ``python e2e_dra/driver/proto/generate.py``.
"""

from e2e_dra.driver._calls import CLIENT_GONE, FAULTABLE_METHODS, CallLog, GRPCCall
from e2e_dra.driver._node_service import ClaimRef, claim_env_name
from e2e_dra.driver._plugin import HEALTH_VERSIONS, Driver, DriverError
from e2e_dra.driver._slices import RESYNC_GRACE, DroppedFieldsError, Pool, node_devices

__all__ = [
    "CLIENT_GONE",
    "FAULTABLE_METHODS",
    "HEALTH_VERSIONS",
    "RESYNC_GRACE",
    "CallLog",
    "ClaimRef",
    "Driver",
    "DriverError",
    "DroppedFieldsError",
    "GRPCCall",
    "Pool",
    "claim_env_name",
    "node_devices",
]
