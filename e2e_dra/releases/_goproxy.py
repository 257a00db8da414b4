"""Which Kubernetes releases the Go module proxy has, as dl.k8s.io's version markers would say.

The proxy's ``@v/list`` is not authoritative: it can lag behind by several patch releases (it has
been seen listing v1.36.3 while v1.36.5 was served), and ``@latest`` may answer "not available".
So "newest of X.Y" starts from the list and then asks for the ``.info`` of the next versions
upward until two in a row are missing, which the proxy answers with 403, 404 or 410. One gap is
stepped over: a mirror may refuse a single release (one here refuses v1.35.7 and serves v1.35.8).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from e2e_dra._gotool import go_binary, go_env, go_version_key
from e2e_dra._urls import module_proxy_url
from e2e_dra.errors import InputError, NotFoundError, ProvisionError, ReleaseError, VersionError
from e2e_dra.releases import _gosemver as gosemver
from e2e_dra.releases._gomodule import Substitute, go_directive
from e2e_dra.releases._http import (
    GOPROXY_SETTING,
    SMALL_FILE_WAIT,
    deadline,
    get_small,
    new_client,
    status_error,
    with_retries,
)
from e2e_dra.settings import parsed, settings
from e2e_dra.versions import KubeVersion, Minor, parse_minor, parse_version

_MISSING = {403, 404, 410}
_PROBE_LIMIT = 100  # no minor has had this many patches or pre-releases
_GAP = 1  # missing versions stepped over before the probe stops
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
    """The first proxy of ``GOPROXY`` (environment, else ``go env``), as Go itself would ask.

    ``off`` and ``direct`` name no proxy: that is the setting's fault (bad input), not a
    failing server's.
    """
    setting = settings().goproxy or _go_env_goproxy()
    for entry in re.split(r"[,|]", setting):
        entry = entry.strip()
        if entry.startswith(("http://", "https://")):
            return parsed(module_proxy_url, entry, f"GOPROXY={setting!r}: its entry").rstrip("/")
        if entry == "off":
            break
    raise InputError(
        f"GOPROXY={setting!r} names no module proxy URL; set GOPROXY=https://proxy.golang.org "
        "(or your mirror) to build Kubernetes from the Go module proxy"
    )


def _go_env_goproxy() -> str:
    """``go env GOPROXY``: the user's ``go env -w`` setting or Go's default. Asked in our Go
    environment, which has ``GOTOOLCHAIN=local``: reading a setting must not fetch a toolchain."""
    try:
        out = subprocess.run(
            [go_binary(), "env", "GOPROXY"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
            env=go_env(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ReleaseError(f"could not read GOPROXY from `go env`: {exc}") from exc
    return out.stdout.strip()


def _module_info(body: str) -> dict[str, Any] | None:
    """A ``.info`` answer as the go command reads it (a JSON object: ``Version`` a string,
    ``Time`` a string and ``Origin`` an object where present); None for anything else."""
    try:
        info = json.loads(body)
    except ValueError:
        return None
    if not isinstance(info, dict) or not isinstance(info.get("Version"), str):
        return None
    if not isinstance(info.get("Time", ""), str) or not isinstance(info.get("Origin", {}), dict):
        return None
    return info


def escape_module_path(path: str) -> str:
    """The proxy protocol's case encoding: an upper-case letter becomes ``!`` + lower-case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)


def served_substitutes(
    base_url: str,
    requires: list[tuple[str, str]],
    *,
    transport: httpx.BaseTransport | None = None,
    allow_older: bool = True,
) -> tuple[list[Substitute], list[tuple[str, str]]]:
    """For each required ``(module, version)`` the proxy refuses, the nearest older one it serves;
    and the refused ones it serves no older version of.

    A release's go.mod pins exact versions and a proxy may refuse one of them (seen: 403 "not
    available" for the zip of ``sigs.k8s.io/structured-merge-diff/v7@v7.0.1``, whose .info and
    .mod it serves). The check is one HEAD request per module over one pooled client, made
    concurrently, and only when a release is built. ``allow_older=False`` only sorts out the
    refused ones (staging modules must match their release: an older one is no substitute).
    """
    with new_client(transport) as client:
        proxies = {module: ModuleProxy(module, base_url, client=client) for module, _ in requires}
        with ThreadPoolExecutor(max_workers=16) as pool:
            served = list(pool.map(lambda req: proxies[req[0]].serves(req[1]), requires))
        substitutes, unserved = [], []
        for (module, version), ok in zip(requires, served, strict=True):
            if ok:
                continue
            if allow_older and (older := proxies[module].newest_served_below(version)):
                substitutes.append(Substitute(module=module, pinned=version, used=older))
            else:
                unserved.append((module, version))
    return substitutes, unserved


class ModuleProxy:
    """Read-only view of one module on one Go module proxy."""

    def __init__(
        self,
        module: str = "k8s.io/kubernetes",
        base_url: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.module = module
        given = parsed(module_proxy_url, base_url, "--proxy") if base_url else proxy_url()
        self.base_url = given.rstrip("/")
        self._client = client or new_client(transport)
        self._exists: dict[str, bool] = {}

    def url(self, name: str) -> str:
        return f"{self.base_url}/{escape_module_path(self.module)}/@v/{name}"

    def _ok(self, name: str) -> str | None:
        """The body of ``@v/<name>``, or None when the proxy does not have it."""
        url = self.url(name)
        response = get_small(self._client, url, setting=GOPROXY_SETTING)
        if response.status_code in _MISSING:
            return None
        if response.status_code != 200:
            raise status_error(url, response, GOPROXY_SETTING)
        # UTF-8 whatever charset the proxy names (a codec it names could crash the decoding);
        # undecodable bytes are kept as U+FFFD: a listing's garbage lines are skipped one by one
        return response.content.decode("utf-8", errors="replace")

    @functools.cached_property
    def listed(self) -> list[KubeVersion]:
        """Release tags of ``@v/list`` (possibly incomplete), oldest first."""
        body = self._ok("list") or ""
        return sorted({tag for line in body.splitlines() if (tag := _release_tag(line))})

    def has(self, version: str) -> bool:
        if version not in self._exists:
            self._exists[version] = self._ok(f"{version}.info") is not None
        return self._exists[version]

    def serves(self, version: str) -> bool:
        """Whether the proxy hands out ``version``'s module zip (its .mod alone is not enough)."""
        url = self.url(f"{version}.zip")

        def ask() -> httpx.Response:
            with deadline(SMALL_FILE_WAIT):  # a wall-clock deadline, as every request has
                return self._client.head(url)

        response = with_retries(url, ask, setting=GOPROXY_SETTING)
        if response.status_code in _MISSING:
            return False
        if response.status_code not in {200, 405}:  # 405: no HEAD here; let the build tell
            raise status_error(url, response, GOPROXY_SETTING)
        return True

    def newest_served_below(self, version: str) -> str | None:
        """The newest listed version of this module older than ``version`` that is served
        (compared as Go compares module versions); the five newest are asked."""
        limit = gosemver.parse(version)
        if limit is None:
            return None
        listed = [
            parsed
            for text in (self._ok("list") or "").split()
            if (parsed := gosemver.parse(text)) is not None and parsed < limit
        ]
        for candidate in sorted(listed, reverse=True)[:5]:
            if self.serves(candidate.text):
                return candidate.text
        return None

    def info(self, version: str) -> dict[str, Any]:
        """The ``.info`` of ``version`` (``Version``, ``Time``, maybe ``Origin``)."""
        url = self.url(f"{version}.info")
        body = self._ok(f"{version}.info")
        if body is None:
            raise NotFoundError(
                f"Kubernetes {version} is not on the Go module proxy {self.base_url} ({url} is "
                f"missing); check the version (`e2e-dra resolve MAJOR.MINOR` prints a minor's "
                f"newest release) or {GOPROXY_SETTING}"
            )
        info = _module_info(body)
        if info is None:
            shown = " ".join(body.split())[:60]
            raise ReleaseError(
                f"{url} answered {shown!r}, not a Go module proxy's JSON version info; check "
                f"{GOPROXY_SETTING}: it must name a Go module proxy (a login page or a web "
                "server's index is not one)"
            )
        self._exists[version] = True
        return info

    def go_mod(self, version: str) -> str:
        """The ``.mod`` of ``version``: a go.mod with a ``go`` line, or the proxy is at fault."""
        url = self.url(f"{version}.mod")
        body = self._ok(f"{version}.mod")
        if body is None:
            raise ReleaseError(f"{url} is missing on the Go module proxy; check {GOPROXY_SETTING}")
        try:
            go_version_key(go_directive(body))
        except (ReleaseError, ProvisionError) as exc:
            shown = " ".join(body.split())[:60]
            raise ReleaseError(
                f"{url} answered {shown!r}, not a go.mod ({exc}); check {GOPROXY_SETTING}: it "
                "must name a Go module proxy"
            ) from None
        return body

    # --- markers: what stable-X.Y.txt / latest-X.Y.txt / stable.txt would say -----------------

    def newest_stable_of(self, line: Minor) -> KubeVersion | None:
        listed = [v for v in self.listed if v.release_line == line and v.is_stable]
        newest = listed[-1] if listed else None
        start = newest.patch + 1 if newest else 0
        found = self._probe_upward(lambda n: _release(line.major, line.minor, n), start)
        return found or newest

    def newest_pre_release_of(self, line: Minor) -> KubeVersion | None:
        """The newest ``X.Y.0-{rc,beta,alpha}.N``: a minor's pre-releases all precede its .0."""
        listed = [v for v in self.listed if v.release_line == line and v.pre and v.patch == 0]
        for pre in _PRE_RELEASES:
            of_kind = [v for v in listed if v.pre == pre]
            newest = of_kind[-1] if of_kind else None
            start = newest.pre_number + 1 if newest and newest.pre_number is not None else 0
            found = self._probe_upward(
                functools.partial(_release, line.major, line.minor, 0, pre), start
            )
            newest = found or newest
            if newest is not None:
                return newest
        return None

    def _probe_upward(
        self, version_at: Callable[[int], KubeVersion], start: int
    ) -> KubeVersion | None:
        """The newest ``version_at(n)`` served for n from ``start`` up, stepping over ``_GAP``
        missing numbers; None when none is."""
        newest, missing = None, 0
        for number in range(start, start + _PROBE_LIMIT):
            candidate = version_at(number)
            if self.has(candidate.tag):
                newest, missing = candidate, 0
            elif (missing := missing + 1) > _GAP:
                break
        return newest

    def resolve(self, minor: str) -> str:
        """Newest stable release of ``minor``, else its newest pre-release (stable -> latest)."""
        line = parse_minor(minor)
        found = self.newest_stable_of(line) or self.newest_pre_release_of(line)
        if found is None:
            raise NotFoundError(
                f"no release of Kubernetes {line} on the Go module proxy {self.base_url}; check "
                f"the version or {GOPROXY_SETTING}"
            )
        return found.tag

    def latest_stable(self) -> str:
        """The newest stable release; the list may miss whole minors, so probe ``X.(Y+1).0``."""
        stable = [v for v in self.listed if v.is_stable]
        if not stable:
            raise ReleaseError(
                f"the Go module proxy {self.base_url} lists no stable release of {self.module}; "
                f"check {GOPROXY_SETTING}"
            )
        line = stable[-1].release_line
        while self.has(_release(line.major, line.minor + 1, 0).tag):
            line = Minor(line.major, line.minor + 1)
        newest = self.newest_stable_of(line)
        if newest is None:  # cannot happen: the list or the probe above found one of this line
            raise ReleaseError(f"no stable release of Kubernetes {line} on {self.base_url}")
        return newest.tag

    def latest(self) -> str:
        """The newest release including pre-releases, as ``latest.txt`` would say.

        Pre-releases of the next minor follow the newest stable release; once the next minor's
        release branch is cut, the one after it has an ``alpha.0`` too, so both are asked for.
        """
        stable = parse_version(self.latest_stable())
        found = [stable]
        for ahead in (1, 2):
            pre = self.newest_pre_release_of(Minor(stable.major, stable.minor + ahead))
            if pre is None:
                break
            found.append(pre)
        return max(found).tag

    def close(self) -> None:
        self._client.close()
