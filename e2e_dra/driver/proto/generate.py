"""Regenerate the committed protobuf modules in ``e2e_dra/driver/_pb`` from the .proto files here.

Only messages and service descriptors are generated; ``e2e_dra/driver/_rpc.py`` builds the gRPC
servers and clients from those descriptors, so there is no per-service gRPC glue to keep.

Run ``python e2e_dra/driver/proto/generate.py`` (needs ``grpcio-tools``) after changing a .proto
file; ``tests/test_driver_protos.py`` fails while the committed stubs differ from fresh output. It
runs as a file, not as ``-m e2e_dra.driver...``: that would import the driver package, and with
it the stubs, which may be the very thing that is broken (say, after a protobuf upgrade).

protoc writes top-level imports (``import dra_v1_pb2``) that only work when the output directory
is on ``sys.path``; we rewrite them to package-relative imports, so the stubs live in our package.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
STUB_DIR = PROTO_DIR.parent / "_pb"
COMMAND = "python e2e_dra/driver/proto/generate.py"

_INIT = f'"""Generated gRPC stubs; do not edit. Regenerate with ``{COMMAND}``."""\n'
_TOP_LEVEL_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def proto_files() -> list[Path]:
    return sorted(PROTO_DIR.glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Write the stubs of every .proto file into ``out_dir``; returns the files written."""
    from grpc_tools import protoc  # only needed by whoever regenerates

    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(path.name for path in proto_files()),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    for stub in out_dir.glob("*_pb2*.py*"):
        text = stub.read_text()
        stub.write_text(_TOP_LEVEL_IMPORT.sub(r"from . import \1 as \2", text))
    (out_dir / "__init__.py").write_text(_INIT)
    return sorted(out_dir.iterdir())


def main() -> int:
    """Generate into a temp dir, then swap it in, so a failed run leaves the old stubs intact."""
    with tempfile.TemporaryDirectory(dir=STUB_DIR.parent, prefix=".pb-") as scratch:
        fresh = Path(scratch) / "_pb"
        written = generate(fresh)
        old = Path(scratch) / "old"
        if STUB_DIR.exists():
            STUB_DIR.rename(old)
        fresh.rename(STUB_DIR)
        shutil.rmtree(old, ignore_errors=True)
    print(f"wrote {len(written)} files to {STUB_DIR}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
