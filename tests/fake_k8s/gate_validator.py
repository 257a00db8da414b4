"""A tiny stand-in *program* for one flag check of a release's kube-apiserver binary: it validates
``--feature-gates`` and exits, as the real binary does before it serves anything. Enough to
exercise the code that asks a release which gates it accepts; it serves no API (the real binaries
are asked in the real lane)."""

from __future__ import annotations

import os
from pathlib import Path

FAKE_APISERVER = r"""#!/bin/sh
gates="${1#--feature-gates=}"
for pair in $(echo "$gates" | tr ',' ' '); do
  name="${pair%%=*}"; value="${pair#*=}"
  case " $KNOWN " in *" $name "*) ;; *)
    echo "E1129 err=\"unrecognized feature gate: $name\"" >&2; exit 1;;
  esac
  case " $LOCKED " in *" $name "*)
    if [ "$value" = false ]; then
      echo "err=\"cannot set feature gate $name to false, feature is locked to true\"" >&2; exit 1
    fi;;
  esac
done
echo "Kubernetes $VERSION"
"""


def fake_release(tmp_path: Path, name: str, known: str, locked: str = "") -> Path:
    bin_dir = tmp_path / name / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "kube-apiserver"
    script.write_text(
        FAKE_APISERVER.replace("$KNOWN", known).replace("$LOCKED", locked).replace("$VERSION", name)
    )
    os.chmod(script, 0o755)
    return bin_dir
