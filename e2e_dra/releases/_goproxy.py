"""Which Kubernetes releases the Go module proxy has, as dl.k8s.io's version markers would say.

The proxy's ``@v/list`` is not authoritative: it can lag behind by several patch releases (it has
been seen listing v1.36.3 while v1.36.5 was served), and ``@latest`` may answer "not available".
So "newest of X.Y" starts from the list and then asks for the ``.info`` of the next versions
upward until one is missing, which the proxy answers with 403, 404 or 410.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import cached_property

import httpx

from e2e_dra.errors import ReleaseError, VersionError
from e2e_dra.releases._http import get_small, new_client, status_error
from e2e_dra.versions import KubeVersion, Minor, parse_minor, parse_version

_MISSING = {403, 404, 410}
_PROBE_LIMIT = 100  # no minor has had this many patches or pre-releases
_PRE_RELEASES = ("rc", "beta", "alpha")  # newest first


def _release(major: int, minor: int, patch: int, pre: str | None = None, n: int = 0) -> KubeVersion:
    suffix = f"-{pre}.{n}" if pre else ""
    return parse_version(f"v{major}.{minor}.{patch}{suffix}")


def _release_tag(line: str) -> KubeVersion | None:
    """A published release tag from a ``@v/list`` line; pseudo-versions and the like are None."""
    try:
        version = parse_version(line)
    except VersionError:
        return None
    return version if version.is_release and line.strip().startswith("v") else None


def proxy_url() -> str:
    """The first proxy of ``GOPROXY`` (environment, else ``go env``), as Go itself would ask."""
    setting = os.environ.get("GOPROXY") or _go_env_goproxy()
    for entry in re.split(r"[,|]", setting):
        entry = entry.strip()
        if entry.startswith(("http://", "https://")):
            return entry.rstrip("/")
        if entry == "off":
            break
    raise ReleaseError(
        f"GOPROXY={setting!r} names no module proxy URL; set GOPROXY=https://proxy.golang.org "
        "(or your mirror) to build Kubernetes from the Go module proxy"
    )


def _go_env_goproxy() -> str:
    from e2e_dra._gotool import go_binary

    try:
        out = subprocess.run(
            [go_binary(), "env", "GOPROXY"], capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ReleaseError(f"could not read GOPROXY from `go env`: {exc}") from exc
    return out.stdout.strip()


def escape_module_path(path: str) -> str:
    """The proxy protocol's case encoding: an upper-case letter becomes ``!`` + lower-case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)


class ModuleProxy:
    """Read-only view of one module on one Go module proxy."""

    def __init__(
        self,
        module: str = "k8s.io/kubernetes",
        base_url: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.module = module
        self.base_url = (base_url or proxy_url()).rstrip("/")
        self._client = new_client(transport)
        self._exists: dict[str, bool] = {}

    def url(self, name: str) -> str:
        return f"{self.base_url}/{escape_module_path(self.module)}/@v/{name}"

    def _ok(self, name: str) -> str | None:
        """The body of ``@v/<name>``, or None when the proxy does not have it."""
        url = self.url(name)
        response = get_small(self._client, url)
        if response.status_code in _MISSING:
            return None
        if response.status_code != 200:
            raise status_error(url, response)
        return response.text

    @cached_property
    def listed(self) -> list[KubeVersion]:
        """Release tags of ``@v/list`` (possibly incomplete), oldest first."""
        body = self._ok("list") or ""
        return sorted({tag for line in body.splitlines() if (tag := _release_tag(line))})

    def has(self, version: str) -> bool:
        if version not in self._exists:
            self._exists[version] = self._ok(f"{version}.info") is not None
        return self._exists[version]

    def info(self, version: str) -> dict:
        """The ``.info`` of ``version`` (``Version``, ``Time``, maybe ``Origin``)."""
        body = self._ok(f"{version}.info")
        if body is None:
            raise ReleaseError(
                f"Kubernetes {version} is not on the Go module proxy {self.base_url} "
                f"({self.url(version + '.info')} is missing)"
            )
        self._exists[version] = True
        return json.loads(body)

    def go_mod(self, version: str) -> str:
        body = self._ok(f"{version}.mod")
        if body is None:
            raise ReleaseError(f"{self.url(version + '.mod')} is missing on the Go module proxy")
        return body

    # --- markers: what stable-X.Y.txt / latest-X.Y.txt / stable.txt would say -----------------

    def newest_stable_of(self, line: Minor) -> KubeVersion | None:
        listed = [v for v in self.listed if v.release_line == line and v.is_stable]
        newest = listed[-1] if listed else None
        start = newest.patch + 1 if newest else 0
        for patch in range(start, start + _PROBE_LIMIT):
            candidate = _release(line.major, line.minor, patch)
            if not self.has(candidate.tag):
                break
            newest = candidate
        return newest

    def newest_pre_release_of(self, line: Minor) -> KubeVersion | None:
        """The newest ``X.Y.0-{rc,beta,alpha}.N``: a minor's pre-releases all precede its .0."""
        listed = [v for v in self.listed if v.release_line == line and v.pre and v.patch == 0]
        for pre in _PRE_RELEASES:
            of_kind = [v for v in listed if v.pre == pre]
            newest = of_kind[-1] if of_kind else None
            start = newest.pre_number + 1 if newest and newest.pre_number is not None else 0
            for number in range(start, start + _PROBE_LIMIT):
                candidate = _release(line.major, line.minor, 0, pre, number)
                if not self.has(candidate.tag):
                    break
                newest = candidate
            if newest is not None:
                return newest
        return None

    def resolve(self, minor: str) -> str:
        """Newest stable release of ``minor``, else its newest pre-release (stable -> latest)."""
        line = parse_minor(minor)
        found = self.newest_stable_of(line) or self.newest_pre_release_of(line)
        if found is None:
            raise ReleaseError(
                f"no release of Kubernetes {line} on the Go module proxy {self.base_url}"
            )
        return found.tag

    def latest_stable(self) -> str:
        """The newest stable release; the list may miss whole minors, so probe ``X.(Y+1).0``."""
        stable = [v for v in self.listed if v.is_stable]
        if not stable:
            raise ReleaseError(
                f"the Go module proxy {self.base_url} lists no stable release of {self.module}"
            )
        line = stable[-1].release_line
        while self.has(_release(line.major, line.minor + 1, 0).tag):
            line = Minor(line.major, line.minor + 1)
        newest = self.newest_stable_of(line)
        if newest is None:  # cannot happen: the list or the probe above found one of this line
            raise ReleaseError(f"no stable release of Kubernetes {line} on {self.base_url}")
        return newest.tag

    def close(self) -> None:
        self._client.close()
