"""Cold and warm times of the node runtime's Go builds, and the disk they use.

Usage: python benchmarks/provision_builds.py [CACHE_DIR]

Builds containerd, etcd and cfssl into CACHE_DIR (default: a new temporary dir, i.e. a cold Go
module and build cache), then asks for each again (warm), and prints seconds and sizes. It does not
touch the running node runtime: nothing is started, only built.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _du(path: Path) -> str:
    if not path.exists():
        return "0"
    return subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout.split()[
        0
    ]


def main() -> int:
    cache = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="e2e-dra-bench-"))
    )
    os.environ["E2E_DRA_CACHE_DIR"] = str(cache)
    from e2e_dra.provision import _gobuilds, _images

    tools = [
        _gobuilds.containerd_tool(),
        _gobuilds.etcd_tool(_gobuilds.DEFAULT_ETCD_VERSION),
        _gobuilds.cfssl_tool(),
    ]
    print(f"cache: {cache}")
    for tool in tools:
        for phase in ("cold", "warm"):
            started = time.monotonic()
            bin_dir = _gobuilds.build(tool)
            print(
                f"{tool.name} {tool.version} {phase}: {time.monotonic() - started:.1f}s "
                f"({_du(bin_dir)} binaries)",
                flush=True,
            )
    started = time.monotonic()
    images = _images.node_images()
    print(
        f"images: built {len(images)} archives in {time.monotonic() - started:.2f}s, "
        f"{sum(len(i.data) for i in images) / 1e6:.1f} MB"
    )
    for part in ("go/mod", "go/build", "runtime"):
        print(f"disk {part}: {_du(cache / part)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
