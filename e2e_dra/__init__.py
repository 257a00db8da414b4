"""e2e-dra: proves Kubernetes Dynamic Resource Allocation survives an upgrade and a downgrade."""

from e2e_dra.errors import E2EDRAError, ReleaseError, VersionError

__all__ = ["E2EDRAError", "ReleaseError", "VersionError"]
__version__ = "0.1.0"
