"""The container images a test node needs, made here because no registry can be reached.

Both images are one layer: Debian's static busybox with a link per applet. The pause image runs a
shell that sleeps until it is told to stop; the test image is a plain busybox for pods that run
``sh -c``. They are imported into containerd's ``k8s.io`` namespace under the exact names the
kubelet (via containerd's sandbox image) and the subtests ask for. Archives are byte-for-byte
reproducible, so a digest comparison tells whether the imported image is ours and current.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from e2e_dra._platform import host_platform
from e2e_dra.errors import ProvisionError

PAUSE_IMAGE = "registry.k8s.io/pause:3.10.2"
TEST_IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
BUSYBOX = Path("/bin/busybox")

_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Exits on TERM/INT like the real pause binary; `wait` keeps the shell responsive to signals.
_PAUSE_SCRIPT = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
_LAYER_MEDIA = "application/vnd.oci.image.layer.v1.tar"
_CONFIG_MEDIA = "application/vnd.oci.image.config.v1+json"
_MANIFEST_MEDIA = "application/vnd.oci.image.manifest.v1+json"
_INDEX_MEDIA = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class ImageArchive:
    name: str
    manifest_digest: str  # "sha256:..."
    data: bytes  # an OCI image layout as a tar archive


def busybox_layer(busybox: bytes, applets: list[str]) -> bytes:
    """A reproducible layer: /bin/busybox, a link per applet, the usual top-level dirs."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mode in (
            ("bin", 0o755),
            ("dev", 0o755),
            ("etc", 0o755),
            ("proc", 0o755),
            ("sys", 0o755),
            ("tmp", 0o1777),
            ("usr", 0o755),
            ("usr/bin", 0o755),
            ("var", 0o755),
        ):
            tar.addfile(_entry(name, tarfile.DIRTYPE, mode))
        _add_file(tar, "bin/busybox", busybox, 0o755)
        for applet in sorted(set(applets) - {"busybox"}):
            link = _entry(f"bin/{applet}", tarfile.SYMTYPE, 0o777)
            link.linkname = "busybox"
            tar.addfile(link)
        env = _entry("usr/bin/env", tarfile.SYMTYPE, 0o777)
        env.linkname = "/bin/env"
        tar.addfile(env)
        _add_file(
            tar,
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
            0o644,
        )
        _add_file(tar, "etc/group", b"root:x:0:\nnogroup:x:65534:\n", 0o644)
    return out.getvalue()


def image_archive(
    name: str,
    layer: bytes,
    *,
    entrypoint: list[str] | None,
    cmd: list[str] | None,
    arch: str | None = None,
) -> ImageArchive:
    """An OCI image layout tar holding one image named ``name``."""
    layer_digest = _digest(layer)
    config = _json(
        {
            "architecture": arch or go_arch(),
            "os": "linux",
            "config": {"Env": [_PATH_ENV], "Entrypoint": entrypoint, "Cmd": cmd, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "history": [{"created_by": "e2e-dra: Debian busybox-static", "created": _EPOCH}],
            "created": _EPOCH,
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MANIFEST_MEDIA,
            "config": {"mediaType": _CONFIG_MEDIA, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": _LAYER_MEDIA, "digest": layer_digest, "size": len(layer)}],
        }
    )
    manifest_digest = _digest(manifest)
    index = _json(
        {
            "schemaVersion": 2,
            "mediaType": _INDEX_MEDIA,
            "manifests": [
                {
                    "mediaType": _MANIFEST_MEDIA,
                    "digest": manifest_digest,
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
    )
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_file(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}), 0o644)
        _add_file(tar, "index.json", index, 0o644)
        tar.addfile(_entry("blobs", tarfile.DIRTYPE, 0o755))
        tar.addfile(_entry("blobs/sha256", tarfile.DIRTYPE, 0o755))
        for blob in sorted((layer, config, manifest), key=_digest):
            _add_file(tar, "blobs/sha256/" + _digest(blob).split(":", 1)[1], blob, 0o644)
    return ImageArchive(name=name, manifest_digest=manifest_digest, data=out.getvalue())


def node_images(busybox: Path = BUSYBOX) -> list[ImageArchive]:
    """The pause and the test image, from the host's static busybox."""
    try:
        binary = busybox.read_bytes()
    except OSError as exc:
        raise ProvisionError(
            f"cannot read {busybox} (Debian package busybox-static): {exc}"
        ) from exc
    listed = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=False)
    applets = listed.stdout.split()
    if listed.returncode != 0 or "sh" not in applets:
        raise ProvisionError(f"{busybox} --list names no `sh` applet: is it busybox-static?")
    layer = busybox_layer(binary, applets)
    return [
        image_archive(PAUSE_IMAGE, layer, entrypoint=["/bin/sh", "-c", _PAUSE_SCRIPT], cmd=None),
        image_archive(TEST_IMAGE, layer, entrypoint=None, cmd=["sh"]),
    ]


def imported_digests(ctr: list[str]) -> dict[str, str]:
    """name -> manifest digest of the images in containerd's k8s.io namespace."""
    proc = subprocess.run(
        [*ctr, "-n", "k8s.io", "images", "ls"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise ProvisionError(f"`ctr images ls` failed: {proc.stderr.strip()}")
    found = {}
    for line in proc.stdout.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[2].startswith("sha256:"):
            found[fields[0]] = fields[2]
    return found


def import_image(ctr: list[str], image: ImageArchive) -> None:
    with tempfile.NamedTemporaryFile(suffix=".tar") as archive:
        archive.write(image.data)
        archive.flush()
        proc = subprocess.run(
            [
                *ctr,
                "-n",
                "k8s.io",
                "images",
                "import",
                "--platform",
                f"linux/{go_arch()}",
                archive.name,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        raise ProvisionError(
            f"importing {image.name} into containerd failed: {(proc.stderr or proc.stdout).strip()}"
        )


def go_arch() -> str:
    return host_platform()[1]


_EPOCH = "1970-01-01T00:00:00Z"


def _entry(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = _entry(name, tarfile.REGTYPE, mode)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
