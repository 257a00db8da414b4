"""Real DRA drivers as values: which program, at which version, started with which command line.

``E2E_DRA_DRIVERS`` names them, comma-separated (``none``: no real driver):

- ``upstream``: Kubernetes' own ``test/e2e/dra/test-driver`` (the Go driver upstream's suite runs),
  built from ``k8s.io/kubernetes`` at the release the node's kubelet runs in each phase, so it is
  upgraded and downgraded with the cluster; ``upstream@v1.36.5`` pins one release throughout.
- ``example`` / ``example@v0.3.0``: ``sigs.k8s.io/dra-example-driver``'s kubelet plugin (default
  :data:`EXAMPLE_DEFAULT`).
- ``command:LINE``: your own driver, a command line with placeholders (:data:`PLACEHOLDERS`);
  the same values are in its environment (``E2E_DRA_NODE`` ...).

Every kind answers the same few questions, so the suite treats them alike: the program for a
release, its command line and environment at a :class:`Site` for a number of devices, its name,
whether it writes CDI specs (so that a pod without them is a failure, not a driver that does
something else), and how it is told how many devices to publish (the chain changes that while
claims are prepared, as a device hot-plugged or a driver update that publishes one more does).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from e2e_dra.errors import InputError
from e2e_dra.releases import Program, kubernetes_program, module_program
from e2e_dra.versions import is_minor, parse_version

DRIVERS_SETTING = "E2E_DRA_DRIVERS"
EXAMPLE_MODULE = "sigs.k8s.io/dra-example-driver"
EXAMPLE_VERSIONS = ("v0.2.1", "v0.3.0", "v0.4.0")
"""The releases of the example driver whose command lines we know (flags differ by release)."""
EXAMPLE_DEFAULT = "v0.4.0"
UPSTREAM_PACKAGE = "test/e2e/dra/test-driver"
DEFAULT_DEVICES = 4
"""How many devices a real driver is told to publish unless the chain changes it: upstream's test
driver's own default (its ``--num-devices``), and what the example driver was always started
with here (its own default is 8)."""
NUM_DEVICES_PLACEHOLDER = "{num_devices}"


CLEANUP_AFTER_RESTART = "cleanup after a restart"
"""The rule that a claim prepared before the driver restarted is still cleaned up when the
kubelet unprepares it after the restart (no CDI spec or file of the driver names it then)."""


@dataclass(frozen=True)
class DriverLimit:
    """What a driver does by design that one of the suite's rules (``rule``) would call a bug,
    with where its source shows it. Checked both ways, as a known Kubernetes bug is: where the
    rule applies, the limit must show (said in the phase, never a silent pass); where it no
    longer does, the phase fails until the declaration goes."""

    rule: str
    what: str
    source: str


@dataclass(frozen=True)
class Site:
    """Where a driver instance runs: its node, the API credentials it gets, and the directories
    the kubelet and the container runtime share with it."""

    node: str
    kubeconfig: Path
    log_dir: Path
    registry_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    plugins_dir: Path = Path("/var/lib/kubelet/plugins")
    cdi_dir: Path = Path("/var/run/cdi")

    def values(
        self, driver: str, pod_uid: str, num_devices: int = DEFAULT_DEVICES
    ) -> dict[str, str]:
        """The placeholders' values (:data:`PLACEHOLDERS`) for ``driver``'s instance ``pod_uid``
        told to publish ``num_devices`` devices."""
        return {
            "node": self.node,
            "kubeconfig": str(self.kubeconfig),
            "driver": driver,
            "registry_dir": str(self.registry_dir),
            "plugins_dir": str(self.plugins_dir),
            "plugin_dir": str(self.plugins_dir / driver),
            "cdi_dir": str(self.cdi_dir),
            "pod_uid": pod_uid,
            "num_devices": str(num_devices),
        }


PLACEHOLDERS = {
    "node": "the node's name",
    "kubeconfig": "a kubeconfig of the cluster (also in KUBECONFIG)",
    "driver": "the driver name to serve and publish under",
    "registry_dir": "the kubelet's plugin registration directory",
    "plugins_dir": "the kubelet's plugins directory (sockets go in <plugins_dir>/<driver>)",
    "plugin_dir": "<plugins_dir>/<driver>, the driver's own data directory",
    "cdi_dir": "where the container runtime reads CDI specs",
    "pod_uid": "this instance's identity: two instances with different ones may run at once",
    "num_devices": f"how many devices to publish ({DEFAULT_DEVICES}; the driver suite restarts the "
    "driver with one more, then with as many as before, while claims are prepared)",
}
"""``{name}`` in a ``command:`` driver's line; each is also ``E2E_DRA_<NAME>`` in its
environment (``E2E_DRA_NODE``, ..., and ``KUBECONFIG``)."""


def environment(values: Mapping[str, str]) -> dict[str, str]:
    """The placeholders as environment variables, for drivers that read them there."""
    env = {f"E2E_DRA_{key.upper()}": value for key, value in values.items()}
    env["KUBECONFIG"] = values["kubeconfig"]
    env["NODE_NAME"] = values["node"]  # what DaemonSets hand the example driver and most others
    return env


class DriverKind(Protocol):
    """One kind of real driver (see the module's docs)."""

    @property
    def label(self) -> str:
        """How ``E2E_DRA_DRIVERS`` names it, as a subtest name part: ``example-v0.4.0``."""
        ...

    @property
    def writes_cdi(self) -> bool:
        """Whether it hands containers their devices through CDI specs named by the claim."""
        ...

    @property
    def rolls(self) -> bool:
        """Whether two instances may run at once, each with its own sockets (a DaemonSet's
        rolling update with maxSurge: the helper's ``RollingUpdate`` option)."""
        ...

    def fixed_name(self) -> str | None:
        """The only driver name it can serve under, or None when it takes one."""
        ...

    def program(self, kubelet: str, upgraded: bool = False) -> Program | None:
        """The build it runs next to a kubelet of release ``kubelet`` (None: not ours to build);
        ``upgraded``: the cluster runs another release than the one it came up with."""
        ...

    @property
    def device_count_option(self) -> str | None:
        """How its command line tells it how many devices to publish (``--num-devices``), or
        None when it cannot be told: the chain's change of its devices is then said, not run."""
        ...

    @property
    def device_change_held_back(self) -> str | None:
        """Why the chain's change of its devices is not run on it although it can be told its
        count (said in the phase, with the evidence), or None."""
        ...

    def argv(
        self, program: Program | None, site: Site, name: str, pod_uid: str, num_devices: int
    ) -> list[str]:
        """Its command line, for an instance told to publish ``num_devices`` devices."""
        ...

    def describe(self) -> dict[str, Any]: ...

    def limit(self, rule: str) -> DriverLimit | None:
        """Its declared limit for ``rule``, if any."""
        ...


@dataclass(frozen=True)
class UpstreamTestDriver:
    """Kubernetes' ``test/e2e/dra/test-driver``, at ``release`` or at the kubelet's release."""

    release: str | None = None
    writes_cdi = True
    rolls = False  # its kubelet-plugin command does not take a pod UID
    limits = (
        DriverLimit(
            CLEANUP_AFTER_RESTART,
            "keeps its prepared claims in memory only: after a restart it answers the kubelet's "
            "NodeUnprepareResources for a claim its predecessor prepared as an idempotent no-op, "
            "so that claim's CDI spec stays on the node",
            "k8s.io/kubernetes test/e2e/dra/test-driver/app/kubeletplugin.go, "
            "nodeUnprepareResource (`ex.prepared[claimID]`, not found: return nil)",
        ),
    )

    def limit(self, rule: str) -> DriverLimit | None:
        return next((limit for limit in self.limits if limit.rule == rule), None)

    @property
    def label(self) -> str:
        return f"upstream-{self.release}" if self.release else "upstream"

    def fixed_name(self) -> str | None:
        return None

    def program(self, kubelet: str, upgraded: bool = False) -> Program:
        return kubernetes_program(self.release or kubelet, UPSTREAM_PACKAGE, "dra-test-driver")

    device_count_option = "--num-devices"  # every release since 1.33: device-00, device-01, ...
    device_change_held_back = None

    def argv(
        self, program: Program | None, site: Site, name: str, pod_uid: str, num_devices: int
    ) -> list[str]:
        assert program is not None
        return [
            str(program.binary),
            f"--kubeconfig={site.kubeconfig}",
            f"--drivername={name}",
            "-v=5",
            "kubelet-plugin",
            f"--node-name={site.node}",
            f"--plugin-registration-path={site.registry_dir}",
            f"--datadir={site.plugins_dir}",
            f"--cdi-dir={site.cdi_dir}",
            f"--num-devices={num_devices}",
        ]

    def describe(self) -> dict[str, Any]:
        return {"kind": "upstream", "release": self.release or "the kubelet's"}


@dataclass(frozen=True)
class ExampleDriver:
    """``sigs.k8s.io/dra-example-driver``'s kubelet plugin (gpu profile) at ``version``; with
    ``then``, upgraded to that release whenever the cluster runs its newer release, and back
    (``example@v0.2.1..v0.3.0``): a driver update combined with the cluster's, claims prepared."""

    version: str = EXAMPLE_DEFAULT
    then: str | None = None
    writes_cdi = True

    @property
    def rolls(self) -> bool:
        return _takes_name(self.version) and _takes_name(self.then or self.version)

    @property
    def label(self) -> str:
        return f"example-{self.version}" + (f"-to-{self.then}" if self.then else "")

    def fixed_name(self) -> str | None:
        """v0.2.1 serves only ``gpu.example.com``; a later release it is upgraded to is given
        that name, as one DaemonSet's next release serves the same driver."""
        return None if _takes_name(self.version) else "gpu.example.com"

    def program(self, kubelet: str, upgraded: bool = False) -> Program:
        version = self.then if upgraded and self.then else self.version
        return module_program(
            EXAMPLE_MODULE, version, "cmd/dra-example-kubeletplugin", "dra-example-kubeletplugin"
        )

    device_count_option = "--num-devices"  # every release: gpu-0, gpu-1, ... (gpu profile)
    device_change_held_back = None  # its helper's lost slice is kept clear of (_device_change)

    def argv(
        self, program: Program | None, site: Site, name: str, pod_uid: str, num_devices: int
    ) -> list[str]:
        assert program is not None
        argv = [
            str(program.binary),
            f"--kubeconfig={site.kubeconfig}",
            f"--node-name={site.node}",
            f"--cdi-root={site.cdi_dir}",
            f"--kubelet-registrar-directory-path={site.registry_dir}",
            f"--kubelet-plugins-directory-path={site.plugins_dir}",
            f"--num-devices={num_devices}",
        ]
        if _takes_name(program.version):
            argv += [f"--driver-name={name}", f"--pod-uid={pod_uid}"]
        return argv

    def describe(self) -> dict[str, Any]:
        releases = f"{self.version} -> {self.then}" if self.then else self.version
        return {"kind": "example", "module": EXAMPLE_MODULE, "release": releases}

    def limit(self, rule: str) -> DriverLimit | None:
        return None  # it checkpoints what it prepared


@dataclass(frozen=True)
class CommandDriver:
    """A user's driver: ``line`` with its placeholders filled in, run as it is."""

    line: str
    writes_cdi = False  # we cannot know: a pod without a CDI spec is said, not failed

    @property
    def rolls(self) -> bool:
        """A line that passes ``{pod_uid}`` gives each instance its own sockets (the env
        variable alone says nothing of what the driver does with it)."""
        return "{pod_uid}" in self.line

    device_change_held_back = None

    @property
    def device_count_option(self) -> str | None:
        """``{num_devices}`` when the line passes it (the env variable alone says nothing of
        whether the driver reads it)."""
        return NUM_DEVICES_PLACEHOLDER if NUM_DEVICES_PLACEHOLDER in self.line else None

    @property
    def label(self) -> str:
        program = Path(shlex.split(self.line)[0]).name
        return "command-" + re.sub(r"[^a-z0-9-]+", "-", program.lower()).strip("-")[:40]

    def fixed_name(self) -> str | None:
        return None

    def program(self, kubelet: str, upgraded: bool = False) -> Program | None:
        return None

    def argv(
        self, program: Program | None, site: Site, name: str, pod_uid: str, num_devices: int
    ) -> list[str]:
        return fill_placeholders(self.line, site.values(name, pod_uid, num_devices))

    def describe(self) -> dict[str, Any]:
        return {"kind": "command", "command": self.line}

    def limit(self, rule: str) -> DriverLimit | None:
        return None  # a driver of yours is held to every rule


NAME_SUFFIX = ".e2e.k8s.io"


def served_name(kind: DriverKind) -> str:
    """The driver name ``kind`` serves under: its own if it cannot take one, else one made from
    its label and kept short (``examplev040.e2e.k8s.io``): a registration socket is
    ``<registry dir>/<name>-<pod uid>-reg.sock``, and a unix socket's path has 107 bytes at most,
    of which the directory and a pod UID take 80."""
    return kind.fixed_name() or re.sub(r"[^a-z0-9]+", "", kind.label.lower())[:14] + NAME_SUFFIX


def fill_placeholders(line: str, values: Mapping[str, str]) -> list[str]:
    """``line`` split as a shell would, each ``{name}`` replaced (``{{`` is a brace)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise InputError(f"{DRIVERS_SETTING}: command {line!r} cannot be split: {exc}") from None
    filled = []
    for word in words:
        try:
            filled.append(word.format_map(values))
        except KeyError as exc:
            known = ", ".join("{" + k + "}" for k in PLACEHOLDERS)
            raise InputError(
                f"{DRIVERS_SETTING}: command {line!r} uses the unknown placeholder "
                f"{{{exc.args[0]}}} (known: {known})"
            ) from None
        except (ValueError, IndexError) as exc:
            raise InputError(
                f"{DRIVERS_SETTING}: command {line!r}: {exc} (write a literal brace doubled)"
            ) from None
    return filled


def _takes_name(version: str) -> bool:
    """Example driver v0.3.0 and later take a driver name and a pod UID (rolling updates)."""
    return EXAMPLE_VERSIONS.index(version) >= 1


def _example_kind(versions: str | None) -> ExampleDriver:
    """``v0.3.0``, or ``v0.2.1..v0.3.0`` for one upgraded with the cluster."""
    if not versions:
        return ExampleDriver()
    first, dots, then = versions.partition("..")
    return ExampleDriver(_example(first), _example(then) if dots else None)


_KINDS: dict[str, Callable[[str | None], DriverKind]] = {
    "upstream": lambda version: UpstreamTestDriver(_release(version) if version else None),
    "example": _example_kind,
}


def parse_drivers(text: str) -> tuple[DriverKind, ...]:
    """``E2E_DRA_DRIVERS``' value as driver kinds; a wrong entry is one line naming it."""
    kinds: list[DriverKind] = []
    if text.strip() == "none":
        return ()
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        if entry.startswith("command:"):
            line = entry.removeprefix("command:").strip()
            if not line:
                raise InputError(f"{DRIVERS_SETTING}: 'command:' needs a command line after it")
            fill_placeholders(line, Site("n", Path("k"), Path("l")).values("d", "u"))
            kinds.append(CommandDriver(line))
            continue
        kind, _, version = entry.partition("@")
        if kind not in _KINDS or (_ and not version):
            raise InputError(
                f"{DRIVERS_SETTING}: {entry!r} is not a driver; use upstream, upstream@v1.37.2, "
                f"example, example@{EXAMPLE_DEFAULT}, example@v0.2.1..v0.3.0 or command:PATH"
            )
        kinds.append(_KINDS[kind](version or None))
    for what in (lambda k: k.label, served_name):
        names = [what(k) for k in kinds]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise InputError(f"{DRIVERS_SETTING}: {', '.join(twice)} named twice")
    return tuple(kinds)


def _release(version: str) -> str:
    """An exact release (``v1.36.5``) or MAJOR.MINOR (its newest release, resolved at build)."""
    if is_minor(version):
        return version
    try:
        return parse_version(version).tag
    except ValueError as exc:
        raise InputError(f"{DRIVERS_SETTING}: upstream@{version}: {exc}") from None


def _example(version: str) -> str:
    tag = version if version.startswith("v") else f"v{version}"
    if tag not in EXAMPLE_VERSIONS:
        raise InputError(
            f"{DRIVERS_SETTING}: example@{version}: e2e-dra knows the command lines of "
            f"{', '.join(EXAMPLE_VERSIONS)}; for another release use command:PATH"
        )
    return tag
