"""Release binaries from dl.k8s.io (or a mirror of it), verified, resumable and cached once.

Upstream trusts whatever bytes arrive and calls a cache complete when kube-apiserver exists. Here a
tarball is checked against the digest published next to it before anything is unpacked, a dropped
transfer continues where it stopped (in this run or the next), and the cache entry appears only
when it is whole (:class:`e2e_dra._cache.CacheEntry`). A tarball that passed verification is kept
(with a stamp of what was verified) until it has been unpacked, so an unpack that fails (disk full,
interrupted) costs a re-unpack, not a re-download. One whose contents fail their checks (a binary
missing, a member that is no file) is removed at once: a later run must fetch what the mirror
serves then, not resume from bytes known to be wrong. A version with neither a tarball nor a
checksum is reported as "not found", not as a checksum problem.

**Nothing is unpacked that was not verified in this run.** The partial file and its stamp live in
the cache, where anyone may have changed them since: a resumed download is judged by the digest of
the whole file (the old bytes and the new), and when that fails the partial file is discarded and
the tarball downloaded afresh, once, in the same run; a stamp only saves the download, never the
hashing (:func:`_verified_before` hashes the file again). The unpacked binaries are checked too
(:func:`~e2e_dra.releases._extract.check_binaries`: not empty, executable, the right ``--version``
where that is cheap) before the entry counts as complete. Waiting for another process that fills
the same entry counts against the deadline (``--deadline``).

Markers (``stable-1.36.txt``, ``latest.txt``) name releases, or, in a CI tree such as
``dl.k8s.io/ci``, builds between tags (``v1.38.0-alpha.0.812+0123abcd``); a marker's version is
used as it is written, never cut down to the tag before it, which would be another build.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import stat
import time
from pathlib import Path

import httpx

from e2e_dra._cache import CacheEntry, open_nofollow, real_dir
from e2e_dra._paths import server_cache_dir
from e2e_dra._platform import host_platform
from e2e_dra.errors import InputError, NotFoundError, ReleaseError, VersionError
from e2e_dra.hostkit import atomic_write_text, redact
from e2e_dra.releases._extract import check_binaries, extract_binaries
from e2e_dra.releases._http import (
    HEADERS_WAIT,
    RELEASE_URL_SETTING,
    Budget,
    check_base_url,
    deadline,
    get_small,
    new_client,
    status_error,
    text_of,
    url_under,
    with_retries,
)
from e2e_dra.releases._release import SERVER_COMPONENTS, Release
from e2e_dra.releases._transfer import download
from e2e_dra.settings import DEFAULT_RELEASE_URL as DEFAULT_BASE_URL
from e2e_dra.settings import settings
from e2e_dra.versions import Minor, parse_minor, parse_version

logger = logging.getLogger(__name__)

__all__ = ["BASE_URL_ENV", "DEFAULT_BASE_URL", "DownloadSource", "host_platform"]

BASE_URL_ENV = "KUBERNETES_RELEASE_URL"
OPTIONAL_BINARIES = ("kubectl",)
CHECKSUM_ALGORITHMS = ("sha512", "sha256")  # in order of preference
_CHUNK = 1 << 20
_GO_NAME = re.compile(r"[a-z0-9]{1,32}")
VERIFIED_SUFFIX = ".verified.json"


class DownloadSource:
    """Releases from ``<base>/<version>/kubernetes-server-<os>-<arch>.tar.gz``."""

    name = "download"

    def __init__(
        self,
        base_url: str | None = None,
        cache_dir: Path | None = None,
        os_: str | None = None,
        arch: str | None = None,
        transport: httpx.BaseTransport | None = None,
        budget: Budget | None = None,
    ) -> None:
        given = check_base_url(base_url, "--base-url") if base_url else settings().release_url
        self.base_url = url_under(given)  # without a trailing slash, its query kept
        self.cache_dir = Path(cache_dir) if cache_dir is not None else server_cache_dir()
        native_os, native_arch = host_platform()
        # None: not given. An empty flag is refused, not read as "this machine".
        self.os = _go_name(os_, "--os", "linux") if os_ is not None else native_os
        self.arch = _go_name(arch, "--arch", "amd64") if arch is not None else native_arch
        self.tarball_name = f"kubernetes-server-{self.os}-{self.arch}.tar.gz"
        self._native = (self.os, self.arch) == (native_os, native_arch)
        self._transport = transport
        self._budget = budget

    @property
    def budget(self) -> Budget:
        """Made when first needed, so that its deadline counts from the first request."""
        if self._budget is None:
            self._budget = Budget.from_env()
        return self._budget

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, minor: str) -> str:
        """Newest stable release of ``minor`` (``stable-X.Y.txt``), else ``latest-X.Y.txt``."""
        line = parse_minor(minor)
        with new_client(self._transport) as client:
            stable_url = url_under(self.base_url, f"stable-{line}.txt")
            response = get_small(client, stable_url, self.budget)
            if response.status_code == 404:
                logger.info(
                    redact(
                        f"{stable_url} does not exist (no stable {line} yet): trying "
                        f"latest-{line}.txt"
                    )
                )
                latest_url = url_under(self.base_url, f"latest-{line}.txt")
                latest = get_small(client, latest_url, self.budget)
                if latest.status_code == 404:
                    raise NotFoundError(
                        redact(
                            f"no Kubernetes {line} release: neither {stable_url} nor {latest_url} "
                            f"exists (HTTP 404); check the version or {RELEASE_URL_SETTING}"
                        )
                    )
                return self._marker_version(latest_url, latest, line)
            return self._marker_version(stable_url, response, line)

    def latest_stable(self) -> str:
        return self._top_marker("stable.txt")

    def latest(self) -> str:
        """The newest release including pre-releases (``latest.txt``)."""
        return self._top_marker("latest.txt")

    def unobtainable(self, version: str, commands: tuple[str, ...] = ()) -> str | None:
        """Every published release is downloadable; a missing one fails with its own error."""
        return None

    def _top_marker(self, name: str) -> str:
        url = url_under(self.base_url, name)
        with new_client(self._transport) as client:
            return self._marker_version(url, get_small(client, url, self.budget), None)

    @staticmethod
    def _marker_version(url: str, response: httpx.Response, line: Minor | None) -> str:
        if response.status_code != 200:
            raise status_error(url, response)
        text = text_of(url, response).strip()
        try:
            version = parse_version(text)
        except VersionError:
            raise ReleaseError(
                redact(
                    f"{url} holds {text[:80]!r}, not a Kubernetes version; check "
                    f"{RELEASE_URL_SETTING}"
                )
            ) from None
        if not (version.is_release or version.is_ci_build):
            raise ReleaseError(
                redact(
                    f"{url} names {text}, a local build that no release tree publishes; check "
                    f"{RELEASE_URL_SETTING}"
                )
            )
        if line is not None and version.release_line != line:
            raise ReleaseError(
                redact(
                    f"{url} names {text}, which is not a {line} release; check "
                    f"{RELEASE_URL_SETTING}"
                )
            )
        return version.published_name

    # -- fetching -----------------------------------------------------------------------------

    def tarball_url(self, version: str) -> str:
        return url_under(self.base_url, _release_tag(version), self.tarball_name)

    def cache_entry(self, version: str) -> CacheEntry:
        tag = _release_tag(version)
        key = tag if self._native else f"{tag}-{self.os}-{self.arch}"
        left = self.budget.remaining()  # waiting for another filler counts against the deadline
        return CacheEntry(self.cache_dir, key, lock_wait=None if math.isinf(left) else left)

    def fetch(
        self, version: str, commands: tuple[str, ...] = (), *, verify: bool = False
    ) -> Release:
        """The binaries of ``version``; a cache hit touches neither the network nor the files.

        ``verify`` re-reads every cached file against the digests recorded when it was written
        (seconds for a release) instead of trusting sizes and times.
        """
        tag = _release_tag(version)
        entry = self.cache_entry(tag)
        if not entry.is_complete(deep=verify):
            entry.fill(lambda tmp: self._populate(tag, entry, tmp), deep=verify)
        return Release(version=tag, bin_dir=entry.path, source_dir=None, origin="download")

    def _populate(self, tag: str, entry: CacheEntry, target: Path) -> dict[str, object]:
        url = self.tarball_url(tag)
        partial_dir = real_dir(self.cache_dir, ".partial", entry.key)  # no planted link entered
        part = partial_dir / (self.tarball_name + ".part")
        stamp = part.with_name(part.name + VERIFIED_SUFFIX)
        started = time.monotonic()
        with new_client(self._transport) as client:
            algorithm, expected = self._published_digest(client, tag)
            digests = _verified_before(part, stamp, algorithm, expected)
            if digests is None:
                digests = self._download_verified(client, url, part, algorithm, expected)
                _write_stamp(part, stamp, digests)
                logger.info(
                    f"verified {algorithm} of {self.tarball_name}; unpacking the server binaries"
                )
            else:
                logger.info(
                    f"{part.name} was verified by an earlier run and still matches; unpacking it "
                    "(no download)"
                )
        try:
            binaries = extract_binaries(
                part, target, required=SERVER_COMPONENTS, optional=OPTIONAL_BINARIES
            )
            check_binaries(
                target,
                binaries,
                version=tag,
                runnable=self._native,
                timeout=self.budget.remaining(),
            )
        except ReleaseError as exc:  # its contents are wrong: resuming from it would be too
            shutil.rmtree(partial_dir, ignore_errors=True)
            raise ReleaseError(
                redact(
                    f"{url}: {exc}, though it matches its published {algorithm}; it was removed. "
                    f"The mirror serves a broken release: fix it or use another, "
                    f"{RELEASE_URL_SETTING}"
                )
            ) from None
        size = os.lstat(part).st_size
        shutil.rmtree(partial_dir, ignore_errors=True)
        logger.info(f"{tag}: {len(binaries)} binaries in {time.monotonic() - started:.1f}s")
        return {
            "version": tag,
            "url": redact(url),  # the marker is read by people too: no token in it
            "size": size,
            "sha512": digests["sha512"],
            "verified_with": algorithm,
            "os": self.os,
            "arch": self.arch,
            "binaries": sorted(binaries),
        }

    def _download_verified(
        self, client: httpx.Client, url: str, part: Path, algorithm: str, expected: str
    ) -> dict[str, str]:
        """Download ``url`` into ``part`` (continuing what is there) and return the digests of
        the whole file; a resumed file that fails is discarded and downloaded afresh, once."""
        resumed = download(client, url, part, self.budget)
        digests = _file_digests(part, {"sha512", algorithm})
        if digests[algorithm] != expected and resumed:
            logger.warning(
                f"{part.name}: the resumed download does not match its published {algorithm} "
                "(the partial file was damaged); downloading it afresh"
            )
            part.unlink()
            download(client, url, part, self.budget)
            digests = _file_digests(part, {"sha512", algorithm})
        if digests[algorithm] != expected:
            part.unlink()
            raise ReleaseError(
                redact(
                    f"{url}: {algorithm} mismatch (published {expected}, downloaded "
                    f"{digests[algorithm]}); the download was removed: run again, and if it "
                    f"fails again fix the mirror or use another, {RELEASE_URL_SETTING}"
                )
            )
        return digests

    def _published_digest(self, client: httpx.Client, tag: str) -> tuple[str, str]:
        """The digest published next to the tarball: ``.sha512``, else ``.sha256``."""
        url = self.tarball_url(tag)
        for algorithm in CHECKSUM_ALGORITHMS:
            sidecar = url_under(self.base_url, tag, f"{self.tarball_name}.{algorithm}")
            response = get_small(client, sidecar, self.budget)
            if response.status_code == 404:
                continue
            if response.status_code != 200:
                raise status_error(sidecar, response)
            return algorithm, _parse_digest(sidecar, text_of(sidecar, response), algorithm)
        if self._tarball_status(client, url) == 404:
            raise NotFoundError(
                redact(
                    f"Kubernetes {tag} not found: {url} does not exist (HTTP 404); check the "
                    f"version (`e2e-dra resolve MAJOR.MINOR` prints a minor's newest release)"
                )
            )
        raise ReleaseError(
            redact(
                f"no checksum is published for {url} (.sha512 and .sha256 are both missing); "
                f"refusing to use an unverified release: publish one or use another mirror, "
                f"{RELEASE_URL_SETTING}"
            )
        )

    def _tarball_status(self, client: httpx.Client, url: str) -> int:
        """The status a GET of the tarball starts with; its body is not read."""

        def attempt() -> int:
            self.budget.check(url)
            with (
                deadline(min(HEADERS_WAIT, self.budget.remaining())),
                client.stream("GET", url, timeout=self.budget.timeout()) as response,
            ):
                return response.status_code

        return with_retries(url, attempt, self.budget)


def _go_name(value: str, flag: str, example: str) -> str:
    if not _GO_NAME.fullmatch(value):
        raise InputError(f"{flag} {value!r} is not a Go {flag[2:]} name (e.g. {example})")
    return value


def _verified_before(
    part: Path, stamp: Path, algorithm: str, expected: str
) -> dict[str, str] | None:
    """The digests of ``part`` if an earlier run verified this file and it still hashes to them,
    else None. A stamp is only a hint that the download can be skipped: the file is hashed again
    (a byte changed since, with its size and time kept, is found), and one that no longer matches
    is removed with its stamp, so that it is downloaded afresh, not resumed."""
    try:
        fd = open_nofollow(stamp, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            recorded = json.loads(handle.read(1 << 16))
        info = os.lstat(part)
        if not isinstance(recorded, dict) or not stat.S_ISREG(info.st_mode):
            return None
        same_file = (recorded.get("size"), recorded.get("mtime_ns")) == (
            info.st_size,
            info.st_mtime_ns,
        )
        digests = recorded.get("digests")
        if not (same_file and isinstance(digests, dict) and digests.get(algorithm) == expected):
            return None
        now = _file_digests(part, {"sha512", algorithm})
    except (OSError, ValueError, RecursionError):
        return None
    if now[algorithm] == expected:
        return now
    logger.warning(
        f"{part} no longer holds what an earlier run verified (changed since); it is removed and "
        "downloaded afresh"
    )
    for path in (part, stamp):
        path.unlink(missing_ok=True)
    return None


def _write_stamp(part: Path, stamp: Path, digests: dict[str, str]) -> None:
    info = os.lstat(part)
    record = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "digests": digests}
    atomic_write_text(stamp, json.dumps(record) + "\n")  # replaces a planted link, never follows


def _release_tag(version: str) -> str:
    """The name ``version`` is published under: a release's tag, or a CI build as written."""
    parsed = parse_version(version)
    if not (parsed.is_release or parsed.is_ci_build):
        raise InputError(
            f"{version!r} is a local build; only releases and CI builds (as a marker names "
            "them) can be downloaded"
        )
    return parsed.published_name


def _parse_digest(url: str, text: str, algorithm: str) -> str:
    """Sidecars hold the bare hex digest or ``<digest>  <file name>``."""
    words = text.split()
    length = hashlib.new(algorithm).digest_size * 2
    digest = words[0].lower() if words else ""
    if len(digest) != length or not all(c in "0123456789abcdef" for c in digest):
        raise ReleaseError(
            redact(
                f"{url} holds no {algorithm} digest: {text.strip()[:80]!r}; the mirror serves a "
                f"broken checksum file: fix it or use another, {RELEASE_URL_SETTING}"
            )
        )
    return digest


def _file_digests(path: Path, algorithms: set[str]) -> dict[str, str]:
    hashers = {name: hashlib.new(name) for name in algorithms}
    with os.fdopen(open_nofollow(path, os.O_RDONLY), "rb") as handle:
        while chunk := handle.read(_CHUNK):
            for hasher in hashers.values():
                hasher.update(chunk)
    return {name: hasher.hexdigest() for name, hasher in hashers.items()}
