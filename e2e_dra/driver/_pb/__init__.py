"""Generated gRPC stubs; do not edit. Regenerate with ``python e2e_dra/driver/proto/generate.py``."""
