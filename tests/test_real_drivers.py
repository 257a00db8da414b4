"""Real drivers as values: E2E_DRA_DRIVERS' grammar, command lines, and a driver run as a program
of its own (tiny programs stand in for drivers here; the driver suite runs the real ones)."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from environment import Environ

from e2e_dra._gotool import BUILDINFO_MAGIC, binary_modules
from e2e_dra.driver import (
    PLACEHOLDERS,
    CommandDriver,
    DriverError,
    ExampleDriver,
    ProcessDriver,
    Site,
    UpstreamTestDriver,
    parse_drivers,
    pools_complete,
)
from e2e_dra.driver._kinds import environment, fill_placeholders, served_name
from e2e_dra.errors import InputError
from e2e_dra.releases import Program
from e2e_dra.report import load_summary
from e2e_dra.report._drivers import driver_builds
from e2e_dra.subtest_kit import cdi_refused

# --- E2E_DRA_DRIVERS ------------------------------------------------------------------------------


def test_the_default_drivers_are_upstreams_following_the_kubelet_and_the_newest_example() -> None:
    assert parse_drivers("upstream,example") == (UpstreamTestDriver(None), ExampleDriver("v0.4.0"))


def test_none_runs_no_real_driver() -> None:
    assert parse_drivers("none") == () and parse_drivers(" none ") == ()
    with pytest.raises(InputError, match="'none' is not a driver"):
        parse_drivers("upstream,none")


def test_versions_pin_a_driver() -> None:
    kinds = parse_drivers(" upstream@v1.36.5 , example@0.3.0, upstream@1.35 ")
    assert kinds == (
        UpstreamTestDriver("v1.36.5"),
        ExampleDriver("v0.3.0"),
        UpstreamTestDriver("1.35"),
    )
    assert [k.label for k in kinds] == ["upstream-v1.36.5", "example-v0.3.0", "upstream-1.35"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("nvidia", "'nvidia' is not a driver"),
        ("upstream@", "'upstream@' is not a driver"),
        ("example@v0.9.0", "knows the command lines of v0.2.1, v0.3.0, v0.4.0"),
        ("upstream@banana", "upstream@banana: not a Kubernetes version"),
        ("command:", "needs a command line"),
        ("command:/bin/drv --x {nodes}", "unknown placeholder {nodes}"),
        ("command:/bin/drv 'open", "cannot be split"),
        ("example,example@v0.4.0", "example-v0.4.0 named twice"),
        ("command:/a/drv --a,command:/b/drv --b", "command-drv named twice"),
    ],
)
def test_a_wrong_entry_is_one_line_naming_the_setting_and_the_entry(value: str, says: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_drivers(value)
    assert str(raised.value).startswith("E2E_DRA_DRIVERS: ")
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_served_names_leave_room_for_a_pod_uid_in_a_unix_socket_path() -> None:
    kinds = parse_drivers(
        "upstream@v1.36.15,example@v0.3.0,example@v0.2.1,command:/x/a-very-long-name"
    )
    sockets = [
        Path("/var/lib/kubelet/plugins_registry") / f"{served_name(k)}-{'u' * 36}-reg.sock"
        for k in kinds
    ]
    assert max(len(str(s)) for s in sockets) <= 107  # sun_path: 108 bytes with its NUL
    assert [served_name(k) for k in kinds][1:3] == ["examplev030.e2e.k8s.io", "gpu.example.com"]


# --- command lines --------------------------------------------------------------------------------

SITE = Site("node-1", Path("/k/admin.kubeconfig"), Path("/logs"))


def test_a_command_gets_every_placeholder_and_the_same_values_in_its_environment() -> None:
    line = "/opt/drv --node={node} --name {driver} --reg={registry_dir} --data {plugin_dir} {{x}}"
    argv = CommandDriver(line).argv(None, SITE, "d.example.com", "uid-1", 4)
    assert argv == [
        "/opt/drv",
        "--node=node-1",
        "--name",
        "d.example.com",
        "--reg=/var/lib/kubelet/plugins_registry",
        "--data",
        "/var/lib/kubelet/plugins/d.example.com",
        "{x}",
    ]
    env = environment(SITE.values("d.example.com", "uid-1"))
    assert env["E2E_DRA_NODE"] == "node-1" and env["NODE_NAME"] == "node-1"
    assert env["KUBECONFIG"] == "/k/admin.kubeconfig" == env["E2E_DRA_KUBECONFIG"]
    assert env["E2E_DRA_POD_UID"] == "uid-1" and env["E2E_DRA_CDI_DIR"] == "/var/run/cdi"


def test_the_example_driver_before_v0_3_takes_neither_a_name_nor_a_pod_uid() -> None:
    old = ExampleDriver("v0.2.1").argv(
        Program("p", "v0.2.1", Path("/p")), SITE, "mine.k8s.io", "u", 4
    )
    new = ExampleDriver("v0.3.0").argv(
        Program("p", "v0.3.0", Path("/p")), SITE, "mine.k8s.io", "u", 4
    )
    assert not any(a.startswith(("--driver-name", "--pod-uid")) for a in old)
    assert ExampleDriver("v0.2.1").fixed_name() == "gpu.example.com"
    assert "--driver-name=mine.k8s.io" in new and "--pod-uid=u" in new
    assert ExampleDriver("v0.3.0").fixed_name() is None


def test_an_example_driver_upgraded_with_the_cluster_keeps_its_first_releases_name() -> None:
    (kind,) = parse_drivers("example@v0.2.1..v0.3.0")
    assert kind == ExampleDriver("v0.2.1", "v0.3.0") and kind.label == "example-v0.2.1-to-v0.3.0"
    assert served_name(kind) == "gpu.example.com" and not kind.rolls
    upgraded = kind.argv(Program("p", "v0.3.0", Path("/p")), SITE, served_name(kind), "u", 4)
    assert "--driver-name=gpu.example.com" in upgraded  # the same driver, its next release
    assert parse_drivers("example@v0.3.0..v0.4.0")[0].rolls


def test_upstreams_test_driver_is_started_as_its_readme_starts_it_beside_local_up_cluster() -> None:
    program = Program("dra-test-driver", "v1.37.2", Path("/bin/dra-test-driver"))
    argv = UpstreamTestDriver().argv(program, SITE, "d.k8s.io", "u", 4)
    assert argv[argv.index("kubelet-plugin") + 1 :] == [
        "--node-name=node-1",
        "--plugin-registration-path=/var/lib/kubelet/plugins_registry",
        "--datadir=/var/lib/kubelet/plugins",
        "--cdi-dir=/var/run/cdi",
        "--num-devices=4",  # its own default, said: the chain changes it
    ]
    assert "--drivername=d.k8s.io" in argv[: argv.index("kubelet-plugin")]


def test_each_kind_turns_a_device_count_into_its_own_flag_or_placeholder() -> None:
    """Upstream's test driver and the example driver are told ``--num-devices=N``; a command
    line through ``{num_devices}`` (and E2E_DRA_NUM_DEVICES); a line without the placeholder
    cannot be told, which the chain says instead of changing its devices."""
    upstream = UpstreamTestDriver().argv(Program("t", "v1.37.2", Path("/t")), SITE, "d", "u", 5)
    assert argv_after(upstream, "kubelet-plugin")[-1] == "--num-devices=5"
    for version in ("v0.2.1", "v0.3.0", "v0.4.0"):
        example = ExampleDriver(version).argv(Program("p", version, Path("/p")), SITE, "d", "u", 5)
        assert [a for a in example if a.startswith("--num-devices")] == ["--num-devices=5"]
    line = "/opt/drv --devices={num_devices} --node {node}"
    assert CommandDriver(line).argv(None, SITE, "d", "u", 5) == [
        "/opt/drv",
        "--devices=5",
        "--node",
        "node-1",
    ]
    assert environment(SITE.values("d", "u", 5))["E2E_DRA_NUM_DEVICES"] == "5"
    assert environment(SITE.values("d", "u"))["E2E_DRA_NUM_DEVICES"] == "4"
    assert UpstreamTestDriver().device_count_option == "--num-devices"
    assert ExampleDriver("v0.2.1").device_count_option == "--num-devices"
    assert CommandDriver(line).device_count_option == "{num_devices}"
    assert CommandDriver("/opt/drv --node {node}").device_count_option is None


def argv_after(argv: list[str], word: str) -> list[str]:
    return argv[argv.index(word) + 1 :]


def test_every_placeholder_is_in_the_readmes_table_for_your_driver() -> None:
    """The README's "Testing your driver" table is what a driver's author reads: a placeholder
    the suite fills but the table leaves out is one nobody can use."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    table = readme.split("| placeholder | value |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`\{([a-z_]+)\}`", table))
    assert documented == set(PLACEHOLDERS)
    assert set(Site("n", Path("k"), Path("l")).values("d", "u")) == set(PLACEHOLDERS)


def test_a_driver_told_another_device_count_keeps_it_for_its_later_instances(
    tmp_path: Path,
) -> None:
    """The count is the driver's configuration, not one instance's: an instance started after
    a restart (a switch, the outage, a surge) publishes as many devices as the last one was told.
    A driver whose command line cannot be told is refused, not started with the old count."""
    seen = tmp_path / "seen"
    line = f"sh -c 'echo \"$1 $E2E_DRA_NUM_DEVICES\" >>{seen}; sleep 30' sh {{num_devices}}"
    driver = _driver(tmp_path, line)
    try:
        driver.start(num_devices=5)
        _until(lambda: seen.exists() and seen.read_text().count("\n") == 1)
        driver.stop()
        driver.start()
        _until(lambda: seen.read_text().count("\n") == 2)
    finally:
        driver.stop()
    assert seen.read_text().splitlines() == ["5 5", "5 5"]
    assert driver.describe()["num_devices"] == 5
    fixed = _driver(tmp_path, "sleep 30")
    with pytest.raises(DriverError, match="cannot be told how many devices to publish"):
        fixed.start(num_devices=5)
    assert fixed.exit_status() is None and fixed.instance == 0  # nothing was started


def _until(done: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_placeholders_are_filled_word_by_word_after_splitting() -> None:
    assert fill_placeholders("a '{node} b'", {"node": "x y"}) == ["a", "x y b"]


# --- a driver that is a program -------------------------------------------------------------------

REGISTERING = """
import sys, time
from pathlib import Path
from e2e_dra.driver._pb import pluginregistration_v1_pb2 as pb
from e2e_dra.driver._registration import RegistrationServicer
from e2e_dra.driver._rpc import handler
from e2e_dra.driver._server import serve_unix
name, registry = sys.argv[1], Path(sys.argv[2])
uid = f"-{sys.argv[3]}" if len(sys.argv) > 3 else ""  # one socket per instance, as with --pod-uid
servicer = RegistrationServicer(name, "/nowhere/dra.sock", ["v1.DRAPlugin"])
server = serve_unix(registry / f"{name}{uid}-reg.sock", [handler(pb, "Registration", servicer)])
print("serving", flush=True)
time.sleep(600)
"""


def _registering(tmp_path: Path) -> str:
    """The command line of a driver (:data:`REGISTERING`) that serves its registration socket."""
    script = tmp_path / "driver.py"
    script.write_text(REGISTERING)
    return f"{shlex.quote(sys.executable)} {script} {{driver}} {{registry_dir}}"


def _driver(tmp_path: Path, line: str, registry: Path | None = None) -> ProcessDriver:
    site = Site(
        "node-1",
        tmp_path / "kubeconfig",
        tmp_path / "logs",
        registry_dir=registry or tmp_path / "registry",
        plugins_dir=tmp_path / "plugins",
        cdi_dir=tmp_path / "cdi",
    )
    noted: list[str] = []
    driver = ProcessDriver(
        CommandDriver(line),
        site,
        kube=None,  # type: ignore[arg-type]
        before_run=lambda name, who: noted.append(name),
    )
    driver.noted = noted  # type: ignore[attr-defined]
    return driver


def test_a_driver_that_exits_is_said_at_once_with_its_status_its_log_and_its_last_line(
    tmp_path: Path,
) -> None:
    driver = _driver(tmp_path, "sh -c 'echo no such device >&2; exit 3'")
    driver.start()
    began = time.monotonic()
    with pytest.raises(DriverError) as raised:
        driver.wait_registered(60)
    said = str(raised.value)
    assert time.monotonic() - began < 10
    assert driver.name == "commandsh.e2e.k8s.io"
    assert f"driver {driver.name} (command-sh) exit status 3 before it registered" in said
    assert str(tmp_path / "logs" / f"driver-{driver.name}.log") in said
    assert "its last line: no such device" in said
    assert driver.noted == [f"driver-{driver.name}"]  # type: ignore[attr-defined]


def test_a_driver_that_never_opens_its_socket_is_said_when_the_wait_ends(tmp_path: Path) -> None:
    driver = _driver(tmp_path, "sleep 60")
    driver.start()
    try:
        with pytest.raises(DriverError, match="did not open a registration socket answering"):
            driver.wait_registered(1)
    finally:
        driver.stop()
    assert driver.exit_status() is not None


def test_a_driver_that_serves_its_registration_socket_under_its_name_is_registered(
    tmp_path: Path,
) -> None:
    driver = _driver(tmp_path, _registering(tmp_path))
    driver.start()
    try:
        driver.wait_registered(30)
        assert driver.describe()["kind"] == "command"
    finally:
        driver.stop()
    assert driver.exit_status() is not None  # stopped: its whole process group is gone


def test_a_rolling_update_runs_two_instances_then_the_newest_or_falls_back_after_a_crash(
    tmp_path: Path,
) -> None:
    registry = Path(tempfile.mkdtemp(prefix="reg", dir="/tmp"))  # a socket path has 107 bytes
    driver = _driver(tmp_path, _registering(tmp_path) + " {pod_uid}", registry)
    assert driver.kind.rolls and not CommandDriver("my-driver {node}").rolls
    driver.start()
    try:
        driver.wait_registered(30)
        driver.surge("")  # waits until the new instance answers under its own pod UID
        assert driver.surging and len(list(registry.glob("*-reg.sock"))) == 2
        first_two = driver.instance
        driver.retire()
        assert not driver.surging and driver.exit_status() is None
        driver.wait_registered(5)
        driver.surge("")
        driver.crash()  # the newest dies; the one before it is the driver again
        assert not driver.surging and driver.exit_status() is None
        assert driver.instance == first_two + 1
        driver.wait_registered(5)
        with pytest.raises(DriverError, match="no older instance to fall back to"):
            driver.crash()
    finally:
        driver.stop()
    assert driver.exit_status() is not None
    left = [s.name for s in registry.glob("*-reg.sock")]
    shutil.rmtree(registry)
    assert len(left) <= 2, left  # what the crashed instance left is gone; the others may stay


def test_files_naming_a_claim_are_its_cdi_specs_and_its_own_data(tmp_path: Path) -> None:
    driver = _driver(tmp_path, "true")
    (tmp_path / "cdi").mkdir()
    (tmp_path / "plugins" / driver.name).mkdir(parents=True)
    spec = tmp_path / "cdi" / f"{driver.name}-uid-7-req.json"
    spec.write_text("{}")
    checkpoint = tmp_path / "plugins" / driver.name / "checkpoint.json"
    checkpoint.write_text('{"claims": {"uid-7": {}}}')
    (tmp_path / "cdi" / "other.json").write_text('{"uid": "uid-8"}')
    assert driver.files_naming("uid-7") == [spec, checkpoint]
    assert driver.files_naming("uid-9") == []


# --- slices ---------------------------------------------------------------------------------


def _slice(pool: str, generation: int, count: int) -> dict:
    return {"spec": {"pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}}


def test_a_pool_is_complete_when_its_newest_generation_has_all_its_slices() -> None:
    assert not pools_complete([])
    assert pools_complete([_slice("a", 1, 1)])
    assert not pools_complete([_slice("a", 1, 2)])
    assert pools_complete([_slice("a", 1, 2), _slice("a", 1, 2)])
    assert not pools_complete([_slice("a", 2, 2), _slice("a", 1, 2), _slice("a", 1, 2)])
    assert not pools_complete([_slice("a", 1, 1), _slice("b", 1, 2)])


# --- what a binary links ----------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def test_the_modules_a_go_binary_links_are_read_from_its_build_info(tmp_path: Path) -> None:
    sentinel = b"0" * 16
    info = (
        b"path\tsigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin\n"
        b"mod\tsigs.k8s.io/dra-example-driver\tv0.4.0\th1:x\n"
        b"dep\tk8s.io/dynamic-resource-allocation\tv0.36.2\th1:y\n"
        b"dep\tk8s.io/api\tv0.0.0\n"
        b"=>\tk8s.io/api\tv0.38.0-beta.0\th1:z\n"
    )
    header = BUILDINFO_MAGIC + bytes([8, 2]) + b"\0" * 16
    version = b"go1.26.8"
    payload = _uvarint(len(version)) + version + _uvarint(len(info) + 32) + sentinel + info
    binary = tmp_path / "driver"
    binary.write_bytes(b"\x7fELF" + b"\0" * 100 + header + payload + sentinel)
    modules = binary_modules(binary)
    assert modules["k8s.io/dynamic-resource-allocation"] == "v0.36.2"
    assert modules["k8s.io/api"] == "v0.38.0-beta.0"  # replaced: the replacement's version
    assert modules["main"] == "sigs.k8s.io/dra-example-driver v0.4.0"
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert binary_modules(tmp_path / "script") == {}


def test_a_container_whose_cdi_devices_the_runtime_cannot_resolve_is_said_at_once() -> None:
    message = (
        "failed to create containerd container: CDI device injection failed: unresolvable CDI "
        "devices k8s.d.e2e.k8s.io/gpu=uid-gpu-0"
    )
    waiting = {"state": {"waiting": {"reason": "CreateContainerError", "message": message}}}
    pod = {"status": {"containerStatuses": [{"state": {"running": {}}}, waiting]}}
    assert cdi_refused(pod) == f"CreateContainerError: {message}"
    other = {"state": {"waiting": {"reason": "CreateContainerError", "message": "no such image"}}}
    assert cdi_refused({"status": {"containerStatuses": [other]}}) is None
    assert cdi_refused({"status": {}}) is None


def test_a_drivers_summary_names_each_build_and_the_dra_library_it_links() -> None:
    record = load_summary(Path(__file__).parent / "data" / "summaries" / "upgrade-downgrade.json")
    builds = dict(record.drivers)
    upstream = builds["driver upstream beside kubelet v1.37.2"]
    assert upstream.startswith("v1.37.2, k8s.io/dynamic-resource-allocation v0.37.2")
    example = builds["driver example-v0.4.0 beside kubelet v1.38.0-beta.0"]
    assert "k8s.io/dynamic-resource-allocation v0.36.2" in example
    said = driver_builds({"x": {"v1": {"command": "/bin/drv"}, "v2": "not a build"}}, _said)
    assert said == (("driver x beside kubelet v1", "/bin/drv"),)
    assert driver_builds(["not", "a", "map"], _said) == ()


def _said(value: object, where: str) -> str:
    return str(value)


def test_the_kubelets_unprepare_errors_for_a_claim_are_read_after_a_point(tmp_path: Path) -> None:
    from e2e_dra.subtests.drivers._kubelet import UNPREPARE_ERROR, kubelet_said
    from e2e_dra.subtests.drivers._pods import Claimed

    line = (
        'E1206 19:34:50.145699    1184 pod_workers.go:1338] "Error syncing pod, skipping" '
        'err="unprepare dynamic resources: NodeUnprepareResources failed for ResourceClaim '
        "{claim}: error unpreparing devices for claim {uid}: unable to sync from checkpoint: "
        'checkpoint is corrupted" pod="default/p-3"\n'
    )
    log = tmp_path / "kubelet.log"
    before = line.format(claim="c-1", uid="u-1")
    log.write_text(
        before + line.format(claim="c-1", uid="u-1") + line.format(claim="c-2", uid="u-2")
    )
    claimed = Claimed({}, "c-1", "u-1", (), 1)
    said = kubelet_said(log, len(before), UNPREPARE_ERROR, claimed.claim, claimed.uid)
    assert said == [
        "NodeUnprepareResources failed for ResourceClaim c-1: error unpreparing devices for claim "
        "u-1: unable to sync from checkpoint: checkpoint is corrupted"
    ]
    assert kubelet_said(tmp_path / "none.log", 0, UNPREPARE_ERROR, claimed.claim) == []


def test_the_kubelets_registration_of_one_instance_is_told_by_the_pod_uid_in_its_endpoint(
    tmp_path: Path,
) -> None:
    """A rolling update's new instance counts as registered once the kubelet says so for the
    endpoint holding its pod UID, in 1.34's words and in 1.33's; another instance's line or an
    older line does not count."""
    from e2e_dra.subtests.drivers._kubelet import REGISTERED, kubelet_said

    now = (
        'I1207 01:58:13.730554    1129 dra_plugin_manager.go:459] "Registered DRA plugin" '
        'logger="DRA registration handler" driverName="d.example.com" '
        'endpoint="/var/lib/kubelet/plugins/d.example.com/dra-{uid}.sock" numPlugins=2\n'
    )
    old = (
        'I0501 10:00:00.000000    1129 registration.go:203] "Register new DRA plugin" '
        'pluginName="d.example.com" '
        'endpoint="/var/lib/kubelet/plugins/d.example.com/dra-{uid}.sock"\n'
    )
    log = tmp_path / "kubelet.log"
    before = now.format(uid="new-1")
    log.write_text(before + now.format(uid="old-0") + old.format(uid="new-2"))

    assert kubelet_said(log, len(before), REGISTERED, "new-1") == []
    assert kubelet_said(log, 0, REGISTERED, "new-1") == ['"Registered DRA plugin"']
    assert kubelet_said(log, len(before), REGISTERED, "new-2") == ['"Register new DRA plugin"']


def test_the_kubelets_prepare_errors_for_a_pod_are_its_own_words() -> None:
    from e2e_dra.subtests.drivers._kubelet import PREPARE_ERROR

    line = (  # a kubelet v1.38.0-beta.0 dialling a driver instance that crashed
        'E1206 22:31:44.430966    8969 kuberuntime_manager.go:1755] "Failed to prepare dynamic '
        'resources" err="prepare dynamic resources: NodePrepareResources: rpc error: code = '
        'Unavailable desc = connection error: desc = \\"transport: Error while dialing: dial unix '
        '/var/lib/kubelet/plugins/d/dra-1.sock: connect: connection refused\\"" pod="default/p-6"'
    )
    found = PREPARE_ERROR.search(line)
    assert found is not None and found["said"].startswith(
        "NodePrepareResources: rpc error: code = Unavailable desc = connection error"
    )
    assert found["said"].endswith('connect: connection refused\\"')
    assert PREPARE_ERROR.search(line.replace("Failed to prepare", "Prepared")) is None


def test_a_driver_following_the_kubelet_is_replaced_during_a_step_back_to_a_met_release(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from e2e_dra.subtest import Context
    from e2e_dra.subtests.drivers._lifecycle import replace_with_next_step

    switched: list[tuple[str, bool]] = []
    driver = SimpleNamespace(
        name="d.k8s.io",
        surging=False,
        changes_for=lambda kubelet: kubelet != "v2",
        switch=lambda kubelet, wait=True: switched.append((kubelet, wait)),
    )
    ctx = Context(
        kube=None,  # type: ignore[arg-type]
        plugin=None,
        builder=None,  # type: ignore[arg-type]
        nodes=["n"],
        phase="after-cluster-upgrade",
        artifacts=tmp_path,
    )
    assert replace_with_next_step(ctx, driver, ("v1",)) is None  # type: ignore[arg-type]
    asked = replace_with_next_step(ctx, driver, ("v1", "v2"))  # type: ignore[arg-type]
    assert asked is not None and ctx.kubelet_down == [asked]
    assert asked.what == "driver d.k8s.io replaced by its build for kubelet v1"
    asked.action(None)  # type: ignore[arg-type]
    assert switched == [("v1", False)]  # the kubelet is down: nothing to wait for
    driver.surging = True
    assert replace_with_next_step(ctx, driver, ("v1", "v2")) is None  # type: ignore[arg-type]


def test_a_build_between_releases_without_its_checkout_runs_its_releases_driver_said_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, environ: Environ
) -> None:
    """KUBERNETES_SERVER_BIN_DIR's binaries of a build between releases, no checkout of it: the
    test driver of the release the build is on stands in, and the run says so."""
    from e2e_dra.releases import _programs

    between = "v1.38.0-beta.0.3+abcdef0123"
    asked: list[str] = []

    def release_build(version: str, package: str, name: str, source: object = None) -> Program:
        asked.append(version)
        return Program(name, version, tmp_path / name)

    build_between = _programs.kubernetes_program
    monkeypatch.setattr(_programs, "kubernetes_program", release_build)
    environ.unset("KUBERNETES_SOURCE_DIR")

    program = build_between(between, "test/e2e/dra/test-driver", "dra-test-driver")

    assert asked == ["v1.38.0-beta.0"]
    assert program.version == "v1.38.0-beta.0"
    assert program.deviations == (
        f"dra-test-driver: v1.38.0-beta.0's build, as Kubernetes {between} is a build between "
        "releases and KUBERNETES_SOURCE_DIR names no checkout of it",
    )


def test_a_checkouts_test_driver_is_built_once_per_run_however_many_start_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, environ: Environ
) -> None:
    """A checkout under test: its test driver starts in every phase, from concurrent subtests;
    its version is read and the driver built once, and every start gets that build."""
    from concurrent.futures import ThreadPoolExecutor

    from e2e_dra.releases import _programs

    tree = tmp_path / "kubernetes"
    (tree / ".git").mkdir(parents=True)
    version = "v1.38.0-beta.0-dirty"
    read: list[Path] = []
    built: list[tuple[Path, str, str]] = []

    def checkout_version(at: Path) -> str:
        read.append(at)
        return version

    def build_package(at: Path, package: str, name: str) -> tuple[Path, str]:
        built.append((at, package, name))
        return at / "_output" / name, version

    monkeypatch.setattr(_programs, "checkout_version", checkout_version)
    monkeypatch.setattr(_programs, "build_package", build_package)
    monkeypatch.setattr(_programs, "binary_modules", lambda binary: {})
    _programs._checkout_version.cache_clear()
    _programs._checkout_program.cache_clear()
    environ.set("KUBERNETES_SOURCE_DIR", str(tree))

    def start(_: int) -> Program:
        return _programs.kubernetes_program(version, "test/e2e/dra/test-driver", "dra-test-driver")

    with ThreadPoolExecutor(4) as pool:
        programs = list(pool.map(start, range(8)))

    assert read == [tree]
    assert built == [(tree, "test/e2e/dra/test-driver", "dra-test-driver")]
    assert {p.binary for p in programs} == {tree / "_output" / "dra-test-driver"}
    assert {p.version for p in programs} == {version}


def test_the_first_instance_on_a_cluster_starts_without_what_an_earlier_cluster_left(
    tmp_path: Path,
) -> None:
    """A checkpoint left by a driver of an earlier cluster (a run stopped before its claims were
    unprepared) is gone when the first instance starts; a restart keeps the driver's state."""
    driver = _driver(tmp_path, "sleep 60")
    stale = driver.data_dir / "checkpoint.json"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"preparedClaims": [{"uid": "of-another-cluster"}]}')
    driver.start()
    try:
        assert driver.data_dir.is_dir() and not stale.exists()
        kept = driver.data_dir / "checkpoint.json"
        kept.write_text('{"preparedClaims": [{"uid": "of-this-cluster"}]}')
        driver.stop()
        driver.start()
        assert kept.read_text() == '{"preparedClaims": [{"uid": "of-this-cluster"}]}'
    finally:
        driver.stop()
