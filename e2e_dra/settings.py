"""Every environment variable e2e-dra reads, read in one place, once.

Scattered ``os.environ.get`` calls hide what a run depends on, parse the same kind of value in
several ways and fail late, in the middle of a run, on a value that was wrong from the start. Here
each variable is one field of :class:`Settings` with its type, its default and a line saying what it
does (the README's environment table is checked against these fields, ``tests/test_settings.py``).
:meth:`Settings.from_environ` parses them all; a value that cannot be used is one line naming the
variable (:class:`~e2e_dra.errors.InputError`, exit status 3).

The edges read the environment: the pytest plugin when a session starts, a library user or the
command line when first asked (:func:`settings`). Tests hand in their own (:func:`use`), so no code
below the edge looks at ``os.environ`` to decide anything.

Not fields: the variables we only pass on to the processes we start (``PATH``, ``HOME``, the rest
of the environment), also where we add to one (``KUBELET_FLAGS``, ``KUBE_VERBOSE``) or fill one the
user left unset for the child (``CGO_ENABLED``). The engine (``localupcluster``) reads none of
these: it is given the values (the host lock's path) by its callers.

The value parsers live here too, because the command line takes the same values as flags
(``--deadline`` and ``E2E_DRA_DOWNLOAD_DEADLINE``): one grammar, one wording of the error.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e_dra._urls import release_tree_url, report_link_base
from e2e_dra.errors import InputError

# --- value parsers: text -> value, or ValueError saying what is wrong (without the name) --------

_SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}
RELEASE_SOURCES = ("download", "build")
_TRUE = frozenset({"1", "true", "yes"})


def _scaled(text: str, units: Mapping[str, float], limit: float) -> float | None:
    """``<number><unit>`` -> number x units[unit] (no unit: units[""]); None when malformed."""
    value = text.strip().lower()
    unit = value[-1:] if value[-1:].isalpha() else ""
    try:
        number = float(value.removesuffix(unit)) * units[unit]
    except (KeyError, ValueError):
        return None
    return number if 0 <= number < limit else None


_GO_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign, as Go writes it
    "\u03bcs": 1e-6,  # Greek mu, as Go also accepts it
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)", re.ASCII)
MAX_DURATION = 1e9
"""Seconds (about 31 years). Longer waits overflow the timeouts of threads and sleeps (Python's
``threading.TIMEOUT_MAX`` is about 9.2e9 s) instead of waiting: they are refused, not clamped."""


def _go_duration(text: str) -> float | None:
    """Go's ``time.ParseDuration`` grammar (``1h2m3.5s``, ``500ms``, a leading sign) -> seconds;
    None when ``text`` is not one. Letters are taken in any case, as ``15M`` always was."""
    value = text.lower()
    sign = -1.0 if value.startswith("-") else 1.0
    value = value.removeprefix("-").removeprefix("+")
    parts = _GO_DURATION_PART.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        return None
    return sign * sum(float(number) * _GO_DURATION_UNITS[unit] for number, unit in parts)


def seconds(text: str) -> float:
    """A duration in seconds: a plain number (``90``, ``1e3``) or Go's form (``90s``, ``1m30s``,
    ``1h``, ``500ms``). Every duration we read takes both, so a value copied from a Go tool's flag
    works here too; one that cannot be waited for (negative, NaN, infinite, centuries) is refused
    instead of turning into a wait that never ends or ends at once."""
    value = text.strip()
    try:
        number: float | None = float(value)  # also "nan", "inf" and "1_000": judged below
    except ValueError:
        number = _go_duration(value)
    if number is None:
        raise ValueError("is not a duration (e.g. 1800, 90s, 1m30s or 1h)")
    if not math.isfinite(number):
        raise ValueError("is not a finite duration (e.g. 1800, 90s, 1m30s or 1h)")
    if number < 0:
        raise ValueError("is negative; a duration is 0 or more: give one such as 1800 or 90s")
    if number > MAX_DURATION:
        raise ValueError(
            f"is longer than {MAX_DURATION:.0f} seconds (about 31 years); give a shorter one "
            "(0: none)"
        )
    return number


def count(text: str) -> int:
    """A whole number from 0 to 1000 (``3``)."""
    value = text.strip()
    if not value.isdecimal() or len(value) > 4:
        raise ValueError("is not a whole number from 0 to 1000 (e.g. 3)")
    number = int(value)
    if number > 1000:
        raise ValueError("is more than 1000; give a number from 0 to 1000 (e.g. 3)")
    return number


def seed(text: str) -> int:
    """A seed: a whole number of up to 18 digits (``42``)."""
    value = text.strip()
    if not value.isdecimal() or len(value) > 18:
        raise ValueError("is not a whole number of up to 18 digits (e.g. 42)")
    return int(value)


def rate(text: str) -> float:
    """``50000`` or ``50k`` or ``1M`` (bytes per second) -> bytes per second; ``0`` means none."""
    value = _scaled(text.strip().lower().removesuffix("/s").removesuffix("b"), _SUFFIXES, 1e12)
    if value is None:
        raise ValueError("is not a rate in bytes/s (e.g. 50k or 1M; 0: none)")
    return value


PATH_MAX = 4096  # bytes, Linux's: no longer path can be opened
NAME_MAX = 255  # bytes of one component


def _too_long(candidate: Path) -> str | None:
    """Why no file system can hold ``candidate`` (a value pasted by mistake), or None."""
    encoded = os.fsencode(candidate)
    if len(encoded) >= PATH_MAX:
        return f"is {len(encoded)} bytes long, longer than any path ({PATH_MAX - 1})"
    longest = max((len(os.fsencode(part)) for part in candidate.parts), default=0)
    if longest > NAME_MAX:
        return f"has a component of {longest} bytes, longer than any file name ({NAME_MAX})"
    return None


def path(text: str) -> Path:
    """A path, ``~`` expanded; one that no file system can hold is refused."""
    if not text:
        raise ValueError("is empty; give a path")
    try:
        expanded = Path(text).expanduser()
    except RuntimeError as exc:  # ~nosuchuser
        raise ValueError(f"is not a usable path ({exc}); give an absolute path") from None
    if why := _too_long(expanded):
        raise ValueError(f"{why}; give a shorter path")
    return expanded


def directory(text: str) -> Path:
    """A directory of ours, as an absolute path (it need not exist yet).

    Empty is refused rather than read as the current directory (caches would land wherever the
    command was started), and so is a control character: ``download`` and ``build`` print the
    directory as their last line of stdout, which a newline would break.
    """
    if not text:
        raise ValueError("is empty; give a directory (e.g. ~/.cache/e2e-dra)")
    if any(ord(char) < 0x20 or char == "\x7f" for char in text):
        raise ValueError(
            "holds a control character such as a newline, which the directory printed as a "
            "line of stdout cannot carry; choose another directory"
        )
    try:
        expanded = Path(text).expanduser()
    except RuntimeError as exc:  # ~nosuchuser
        raise ValueError(f"is not a usable directory ({exc}); give an absolute path") from None
    if why := _too_long(expanded):
        raise ValueError(f"{why}; give a shorter directory")
    try:
        return expanded.resolve()
    except (RuntimeError, OSError, ValueError) as exc:
        raise ValueError(f"is not a usable directory ({exc}); give an absolute path") from None


_GO_TOOLCHAIN = re.compile(
    r"(?:auto|path|(?:local|go1(?:\.(?:0|[1-9]\d*)){1,2}(?:(?:rc|beta)[1-9]\d*)?(?:-[\w.]+)?)"
    r"(?:\+(?:auto|path))?)",
    re.ASCII,
)


def go_toolchain(text: str) -> str:
    """A ``GOTOOLCHAIN`` as the go command reads it: ``local``, ``auto``, ``path``, or a
    toolchain name (``go1.27.3``, ``go1.27rc1``), each maybe with ``+auto`` or ``+path``.

    Checked here because it is read in several places (the toolchain a build uses, ``go env``
    for GOPROXY): a value the go command refuses would otherwise fail as whatever each of them
    was doing, or be ignored where the installed Go happens to be new enough.
    """
    if not _GO_TOOLCHAIN.fullmatch(text):
        raise ValueError(
            "is not a Go toolchain (e.g. go1.27.3, local or auto, maybe with +auto or +path)"
        )
    return text


def a_release_source(text: str) -> str:
    if text not in RELEASE_SOURCES:
        raise ValueError(f"is not one of {', '.join(RELEASE_SOURCES)}")
    return text


CONSOLE_MODES = ("progress", "detail")


def console_mode(text: str) -> str:
    """What a suite's console shows: ``progress`` (headlines) or ``detail`` (every line)."""
    value = text.lower()
    if value not in CONSOLE_MODES:
        raise ValueError(f"is not one of {', '.join(CONSOLE_MODES)}")
    return value


def flag(text: str) -> bool:
    return text.lower() in _TRUE


def parsed(parse: Callable[[str], Any], text: str, what: str) -> Any:
    """``parse(text)``, or one line naming ``what`` (a flag or a variable) and the value."""
    try:
        return parse(text)
    except ValueError as exc:
        raise InputError(f"{what} {text!r} {exc}") from None


# --- the settings -------------------------------------------------------------------------------

DEFAULT_RELEASE_URL = "https://dl.k8s.io/release"


def _about(
    name: str,
    meaning: str,
    parse: Callable[[str], Any] = str,
    *,
    shown: str | None = None,
    keep_empty: bool = False,
) -> dict[str, Any]:
    """A field's metadata: read from the variable ``name`` with ``parse``; ``meaning`` is its line
    in the README.

    ``shown`` is how the README states a default that is not a value of the field (the field's
    default is None and the default is decided elsewhere: "unset", "from the source tree");
    ``keep_empty``: an empty value is a value, not "unset" (Go's ``GOSUMDB=`` means its default).
    """
    return {
        "env": name,
        "meaning": meaning,
        "parse": parse,
        "shown": shown,
        "keep_empty": keep_empty,
    }


@dataclass(frozen=True)
class Settings:
    """What the environment says, parsed; a field's ``metadata`` names its variable."""

    server_bin_dir: Path | None = field(
        default=None,
        metadata=_about(
            "KUBERNETES_SERVER_BIN_DIR",
            "binaries under test; unset: the default version, fetched or built",
            path,
            shown="unset",
        ),
    )
    source_dir: Path | None = field(
        default=None,
        metadata=_about(
            "KUBERNETES_SOURCE_DIR",
            "a Kubernetes checkout: its version and its `hack/local-up-cluster.sh`",
            path,
            shown="unset",
        ),
    )
    kubelet_version: str | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_KUBELET_VERSION",
            "the kubelet's release in the `kubelet-last` variant (`1.35`, `v1.35.4`); a list "
            "(`1.35,1.36`) or `skew` (each minor the skew policy allows) runs a cell per kubelet",
            shown="previous release",
        ),
    )
    drivers: str = field(
        default="upstream,example",
        metadata=_about(
            "E2E_DRA_DRIVERS",
            "the real drivers `upgrade-downgrade` runs (`none`: none), comma-separated: "
            "`upstream`, `upstream@v1.36.5`, `example`, `example@v0.3.0`, `command:LINE`",
        ),
    )
    kubernetes_version: str | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_KUBERNETES_VERSION",
            "version under test: `v1.38.0-beta.0`, `1.37`, `stable` or `latest`",
            shown="`latest`",
        ),
    )
    previous_version: str | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_PREVIOUS_VERSION",
            "the release upgraded from (`v1.36.2`, `1.36`): same minor and older, or one minor "
            "behind the version under test (two for an `-alpha.0`)",
            shown="newest of the previous minor",
        ),
    )
    release_source: str | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_RELEASE_SOURCE",
            "`download` (dl.k8s.io or mirror) or `build` (Go module proxy)",
            a_release_source,
            shown="auto",
        ),
    )
    release_url: str = field(
        default=DEFAULT_RELEASE_URL,
        metadata=_about(
            "KUBERNETES_RELEASE_URL",
            "release tree or mirror (`--base-url` on the CLI); a query is sent with every file",
            release_tree_url,
        ),
    )
    download_deadline: float = field(
        default=1800.0,  # 600 MB at 1/3 MB/s
        metadata=_about(
            "E2E_DRA_DOWNLOAD_DEADLINE",
            "how long one release's download may take in all (a duration), `0`: none "
            "(`--deadline`)",
            seconds,
        ),
    )
    download_min_speed: float = field(
        default=50_000.0,
        metadata=_about(
            "E2E_DRA_DOWNLOAD_MIN_SPEED",
            "bytes/s a transfer must keep over 30 s, else it stops (the bytes are kept for the "
            "next run), `0`: none (`--min-speed`)",
            rate,
        ),
    )
    progress_every: float = field(
        default=10.0,
        metadata=_about(
            "E2E_DRA_PROGRESS_EVERY",
            "time between plain progress lines of a download when stderr is not a terminal",
            seconds,
        ),
    )
    server_cache_dir: Path | None = field(
        default=None,
        metadata=_about(
            "KUBERNETES_SERVER_CACHE_DIR",
            "downloaded release binaries, `<dir>/<version>/`",
            directory,
            shown="`~/.cache/e2e-dra/releases`",
        ),
    )
    cache_dir: Path | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_CACHE_DIR",
            "everything else we build or cache (Kubernetes builds, Go caches, runtime)",
            directory,
            shown="`~/.cache/e2e-dra`",
        ),
    )
    xdg_cache_home: Path | None = field(
        default=None,
        metadata=_about(
            "XDG_CACHE_HOME",
            "the user cache directory, under which `E2E_DRA_CACHE_DIR` defaults to `e2e-dra`",
            directory,
            shown="`~/.cache`",
        ),
    )
    report_link_base: str | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_REPORT_LINK_BASE",
            "the http(s) URL the report's folder is served at: every link of `report.html` "
            "becomes that URL and the artifact's path, for Prow's Spyglass, which breaks relative "
            "links (`--link-base` of `e2e-dra report`)",
            report_link_base,
            shown="unset: relative links",
        ),
    )
    artifacts: Path = field(
        default=Path("/tmp/artifacts"),
        metadata=_about(
            "ARTIFACTS", "component logs, driver call logs, failure dumps, `summary.json`", path
        ),
    )
    keep_runs: int = field(
        default=3,
        metadata=_about(
            "E2E_DRA_KEEP_RUNS",
            "earlier runs of a suite kept under `$ARTIFACTS/earlier/<suite>/` (0: none)",
            count,
        ),
    )
    version_file: Path | None = field(
        default=None,
        metadata=_about(
            "KUBE_GIT_VERSION_FILE",
            "version file of a source tree, as `hack/lib/version.sh` reads it",
            path,
            shown="unset",
        ),
    )
    host_lock: Path = field(
        default=Path("/tmp/e2e-dra-host.lock"),
        metadata=_about(
            "E2E_DRA_HOST_LOCK", "one local cluster per host: later runs wait for it", path
        ),
    )
    world_seed: int | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_WORLD_SEED",
            "seed of `random-worlds`' DRA worlds (printed and kept in `summary.json` facts)",
            seed,
            shown="drawn per run",
        ),
    )
    world_budget: float = field(
        default=20.0,
        metadata=_about(
            "E2E_DRA_WORLD_BUDGET",
            "seconds per phase `random-worlds` draws new worlds for (at least one each phase)",
            seconds,
        ),
    )
    slice_removal_timeout: float = field(
        default=120.0,  # upstream's IsGone: 2 minutes
        metadata=_about(
            "E2E_DRA_SLICE_REMOVAL_TIMEOUT",
            "time the kubelet gets to remove the ResourceSlices of stopped drivers",
            seconds,
        ),
    )
    # hack/local-up-cluster.sh's default evicts every pod once the disk is 85 % full
    # (imagefs.available<15%): a build host with 36 GB free of 252 GB is "under pressure" and the
    # subtests' pods are evicted mid-phase. A test node needs floors in bytes, not disk shares.
    eviction_hard: str = field(
        default="memory.available<100Mi,nodefs.available<2Gi,imagefs.available<2Gi,nodefs.inodesFree<5%",
        metadata=_about(
            "EVICTION_HARD",
            "the kubelet's hard eviction thresholds; floors in bytes, so a host whose disk is 85 % "
            "full does not evict the subtests' pods",
            str,
        ),
    )
    node_dir: Path = field(
        default=Path("/var/lib/e2e-dra"),
        metadata=_about(
            "E2E_DRA_NODE_DIR", "state of our containerd (socket, PID file, log)", directory
        ),
    )
    # containerd 2.x enables CDI by default; v2.4.2 needs Go >= 1.26.6 to build.
    containerd_version: str = field(
        default="v2.4.2",
        metadata=_about(
            "E2E_DRA_CONTAINERD_VERSION", "the containerd `e2e-dra provision` builds", str
        ),
    )
    etcd_version: str | None = field(
        default=None,
        metadata=_about(
            "E2E_DRA_ETCD_VERSION",
            "the etcd `e2e-dra provision` builds",
            shown="the source tree's (`hack/lib/etcd.sh`)",
        ),
    )
    # the newest cfssl whose go.mod the Go 1.26 toolchain accepts (v1.7.x asks for Go 1.27).
    cfssl_version: str = field(
        default="v1.6.5",
        metadata=_about("E2E_DRA_CFSSL_VERSION", "the cfssl `e2e-dra provision` builds", str),
    )
    goproxy: str | None = field(
        default=None,
        metadata=_about(
            "GOPROXY",
            "where Kubernetes and the runtime are built from (first entry)",
            shown="Go's: `https://proxy.golang.org`",
        ),
    )
    gotoolchain: str | None = field(
        default=None,
        metadata=_about(
            "GOTOOLCHAIN",
            "the Go toolchain for every Kubernetes build (`go1.27.3`, fetched through `GOPROXY`); "
            "unset: the installed Go, or the release's `.go-version` where the installed Go is too "
            "old",
            go_toolchain,
            shown="unset",
        ),
    )
    gosumdb: str | None = field(
        default=None,
        metadata=_about(
            "GOSUMDB",
            "checksum database: our module builds take go.sum from the proxy's zips; fetching a Go "
            "toolchain needs one (`sum.golang.org` when unset or empty)",
            shown="`off` for builds",
            keep_empty=True,
        ),
    )
    ci: bool = field(
        default=False,
        metadata=_about(
            "CI",
            "`true`: plain progress lines, and a missing real part fails instead of skipping",
            flag,
            shown="unset",
        ),
    )
    console: str = field(
        default="progress",
        metadata=_about(
            "E2E_DRA_CONSOLE",
            "what a suite shows on the console: `progress` (suites, cluster steps, batches of "
            "phases with a done/total count, failures, known bugs, verdicts) or `detail` (every "
            "line, as `-v`: object traffic, drivers, dumps); `$ARTIFACTS/<suite>/console.log` "
            "always has every line",
            console_mode,
        ),
    )
    kubeconfig: Path | None = field(
        default=None,
        metadata=_about(
            "KUBECONFIG",
            "the cluster `e2e-dra driver` serves (`--kubeconfig` wins)",
            path,
            shown="`/var/run/kubernetes/admin.kubeconfig`",
        ),
    )
    runtime_config: str | None = field(
        default=None,
        metadata=_about(
            "RUNTIME_CONFIG",
            "the API server's `--runtime-config` in `e2e-dra cluster up`",
            shown="the DRA API versions",
        ),
    )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Every field from ``environ``; an unset or blank variable keeps its default."""
        values = {}
        for each in dataclasses.fields(cls):
            name, meta = each.metadata["env"], each.metadata
            raw = environ.get(name)
            if raw is None or not (raw.strip() or meta["keep_empty"]):
                continue
            text = raw if meta["keep_empty"] else raw.strip()
            try:
                values[each.name] = meta["parse"](text)
            except ValueError as exc:
                raise InputError(f"{name}={text!r} {exc}") from None
        return cls(**values)


_current: Settings | None = None


def settings() -> Settings:
    """This process's settings: the environment as it was when first asked, unless an edge (the
    pytest plugin, a test) handed in others with :func:`use`."""
    global _current
    if _current is None:
        _current = Settings.from_environ(os.environ)
    return _current


def use(new: Settings | None) -> Settings | None:
    """Make ``new`` this process's settings (None: read the environment when next asked); returns
    the ones in use before, to hand back when done."""
    global _current
    previous, _current = _current, new
    return previous
