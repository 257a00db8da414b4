"""Generated gRPC stubs; do not edit. Regenerate with ``python -m e2e_dra.driver.proto.generate``."""
