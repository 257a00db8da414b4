"""Each safety net of the suite, broken on purpose on a real cluster, must fail the run and say why.

A net that cannot fail proves nothing. Every test here runs the real suite (the e2e_dra pytest
plugin, the upgrade/downgrade module, the real cluster backend) in a pytest subprocess, on a
package of tiny subtests that each break one rule, and reads the suite's own report: the failed
test names the phase and the subtest, and its message names the cause. Two cluster runs cover all
nets: one that never leaves the first phase, and one that needs the upgrade.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

import e2e_dra
from e2e_dra._suite import SUITES, UPGRADE_DOWNGRADE, SubtestPhase
from e2e_dra.releases import VersionsUnderTest

pytestmark = pytest.mark.real
pytest_plugins = ("pytester",)

SUITE_MODULE = Path(e2e_dra.__file__).parent / "test_upgrade_downgrade.py"
HOME = Path.home()  # pytester gives its runs another HOME; the release caches live under ours
RUN_TIMEOUT = 900

COMMON = """
from e2e_dra.driver import Pool, node_devices
from e2e_dra.kube import KubeError, path
from e2e_dra.subtest import Subtest
from e2e_dra.waits import eventually

V1 = "resource.k8s.io/v1"


def one_device(nodes):
    return node_devices(nodes[0], 1)


def done(ctx):
    return None


def running_pod_with_claim(ctx):
    b = ctx.builder
    claim = b.external_claim()
    # No opaque config: an update of a claim whose parameters the server re-encodes is refused
    # as a change of the immutable spec, and strip-finalizer must be able to update it.
    del claim["spec"]["devices"]["config"]
    pod = b.pod_external(claim["metadata"]["name"])
    b.create(claim, pod)
    return claim["metadata"]["name"], pod["metadata"]["name"], pod
"""

# The claim watch: an allocated claim loses its finalizer (nobody may delete it in use).
STRIP_FINALIZER = """
from brokennets._common import *


def initial(ctx):
    claim, _, pod = running_pod_with_claim(ctx)
    ctx.builder.test_pod(pod, env=())  # no config, so no env from the driver
    url = path(V1, "resourceclaims", claim, namespace=ctx.namespace)
    ctx.kube.patch(url, {"metadata": {"finalizers": None}})
    return done


SUBTEST = Subtest(name="strip-finalizer", initial=initial, resources=one_device)
"""

# Dropped fields: the driver publishes a device field this API server does not keep.
DROPPED_FIELD = """
from brokennets._common import *


def resources(nodes):
    device = {"name": "device-00", "e2eDraUnknownField": "dropped by the server"}
    return [Pool(nodes[0], [{"devices": [device]}], node_name=nodes[0])]


SUBTEST = Subtest(name="dropped-field", initial=lambda ctx: done, resources=resources)
"""

# Publish errors: the driver re-publishes its slice with a device name the API server refuses
# (no DNS label), for good; the phase ends once the publisher saw the refusal.
REFUSED_SLICE = """
from brokennets._common import *


def initial(ctx):
    bad = {"name": "Not_A_DNS_Label"}
    ctx.driver.publish([Pool(ctx.nodes[0], [{"devices": [bad]}], node_name=ctx.nodes[0])])
    eventually(
        lambda: [e for e in ctx.driver.publish_errors if "422 Invalid" in e],
        what="the API server's refusal",
        timeout=30,
    )
    return done


SUBTEST = Subtest(name="refused-slice", initial=initial, resources=one_device)
"""

# The admission policy: the plugin writes a ResourceSlice of another node.
FOREIGN_SLICE = """
from brokennets._common import *


def initial(ctx):
    name = "foreign-slice-of-another-node"
    body = {
        "apiVersion": V1,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": ctx.driver.name,
            "pool": {"name": "foreign", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "some-other-node",
            "devices": [],
        },
    }

    def refused():
        try:
            ctx.driver.client.create(path(V1, "resourceslices"), body)
        except KubeError as exc:
            return exc
        ctx.kube.delete(path(V1, "resourceslices", name), missing_ok=True)
        return None  # the policy may need a moment to be in force: try again

    raise eventually(refused, what="the plugin's write to be refused", timeout=30, until=bool)


SUBTEST = Subtest(name="foreign-slice", initial=initial, resources=one_device)
"""

# wait_unschedulable: a pod that runs fails at once, not after the 5-minute timeout.
RUNS_ANYWAY = """
from brokennets._common import *


def initial(ctx):
    _, pod, _ = running_pod_with_claim(ctx)
    ctx.builder.wait_unschedulable(pod)
    return done


SUBTEST = Subtest(name="runs-anyway", initial=initial, resources=one_device)
"""

# wait_running: a pod deleted while it starts (as an eviction does) fails at once, saying so.
DELETED_WHILE_STARTING = """
from brokennets._common import *


def initial(ctx):
    _, pod, _ = running_pod_with_claim(ctx)
    ctx.builder.delete("pods", pod)
    ctx.builder.wait_running(pod)
    return done


SUBTEST = Subtest(name="deleted-while-starting", initial=initial, resources=one_device)
"""

# Slice removal: a driver publishes for a node whose kubelet does not exist, so nobody wipes it.
LEAK_SLICE = """
from brokennets._common import *


def resources(nodes):
    return [Pool("leak", [{"devices": [{"name": "device-00"}]}], node_name="ghost-node")]


SUBTEST = Subtest(
    name="leak-slice", initial=lambda ctx: done, resources=resources, privileged_client=True
)
"""

# Strict deletes: the pod of the first phase is gone when core-dra's after-upgrade deletes it.
VANISHING_POD = """
from brokennets._common import *
from e2e_dra.subtests import core_dra


def initial(ctx):
    after_upgrade = core_dra.initial(ctx)
    ctx.builder.delete_pod_and_wait(f"tester{ctx.builder.name_suffix}-1")
    return after_upgrade


SUBTEST = Subtest(name="vanishing-pod", initial=initial, resources=core_dra.SUBTEST.resources)
"""


def _suite(pytester: pytest.Pytester, subtests: dict[str, str]) -> None:
    package = pytester.mkpydir("brokennets")
    (package / "_common.py").write_text(COMMON)
    for module, text in subtests.items():
        (package / f"{module}.py").write_text(text)
    pytester.makeini("[pytest]\ne2e_dra_subtests = brokennets\n")
    (pytester.path / "test_suite.py").write_text(SUITE_MODULE.read_text())


def _run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str, **env: str
) -> tuple[str, dict]:
    artifacts = pytester.path / "artifacts"
    monkeypatch.setenv("ARTIFACTS", str(artifacts))
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("HOME", str(HOME))
    monkeypatch.setenv("COLUMNS", "10000")  # pytest's short summary keeps whole messages
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = pytester.runpytest_subprocess(
        "test_suite.py",
        "-p",
        "e2e_dra.pytest_plugin",
        "-p",
        "no:cacheprovider",
        "--tb=short",
        *args,
        timeout=RUN_TIMEOUT,
    )
    output = result.stdout.str()
    summary = json.loads((artifacts / "upgrade-downgrade" / "summary.json").read_text())
    return output, summary


def _result(summary: dict, entry: str) -> dict:
    return next(r for r in summary["results"] if r["id"] == entry)


def _failed_line(output: str, entry: str) -> str:
    """The line of pytest's short summary for ``entry`` (FAILED or ERROR)."""
    pattern = re.compile(
        rf"^(FAILED|ERROR) test_suite\.py::test_phase\[{re.escape(entry)}\].*$", re.M
    )
    found = pattern.search(output)
    assert found, f"no FAILED/ERROR line for {entry} in:\n{output[-6000:]}"
    return found.group(0)


def _seed_with_first(names: list[str], first: str) -> int:
    """A seed whose random order runs ``first`` before the other first phases."""
    for seed in range(1, 1000):
        plan = SUITES[UPGRADE_DOWNGRADE].plan(sorted(names), seed)
        phases = [e.subtest for e in plan if isinstance(e, SubtestPhase) and e.index == 0]
        if phases[0] == first:
            return seed
    raise AssertionError(f"no seed puts {first} first")


@pytest.fixture
def cluster_ready(versions: VersionsUnderTest, node_env: dict[str, str]) -> None:
    """Both releases and the node runtime are there (the run in the subprocess needs them)."""


def test_first_phase_nets_fail_their_phase(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cluster_ready: None
) -> None:
    """One cluster, first phase only: six nets fail the first phase of their subtest, and the
    seventh (slice removal) fails the cleanup that ends the run."""
    broken = {
        "strip_finalizer": STRIP_FINALIZER,
        "dropped_field": DROPPED_FIELD,
        "refused_slice": REFUSED_SLICE,
        "foreign_slice": FOREIGN_SLICE,
        "runs_anyway": RUNS_ANYWAY,
        "deleted_while_starting": DELETED_WHILE_STARTING,
        "leak_slice": LEAK_SLICE,
    }
    _suite(pytester, broken)
    names = [re.findall(r'Subtest\(\s*name="([^"]+)"', text)[0] for text in broken.values()]
    seed = _seed_with_first(names, "leak-slice")  # its driver must be up when the run stops
    # Six failures stop the run before the upgrade; the normal slices go within ~30 s.
    output, summary = _run(
        pytester,
        monkeypatch,
        f"--e2e-dra-seed={seed}",
        "--maxfail=6",
        E2E_DRA_SLICE_REMOVAL_TIMEOUT="60",
    )
    first = "after-cluster-creation"

    line = _failed_line(output, f"strip-finalizer/{first}")
    assert (
        "SafetyNetFailure: safety net: ResourceClaim default/external-claimstrip-finalizer" in line
    )
    assert "allocated without any finalizer" in line and "subtest 'strip-finalizer'" in line
    assert f"phase '{first}'" in line

    line = _failed_line(output, f"dropped-field/{first}")
    assert "SafetyNetFailure: safety net: driver defaultdropped-field.k8s.io" in line
    assert "dropped fields of the driver's spec: spec.devices[0].e2eDraUnknownField" in line
    assert "subtest 'dropped-field'" in line

    line = _failed_line(output, f"refused-slice/{first}")
    assert (
        "SafetyNetFailure: safety net: driver defaultrefused-slice.k8s.io: "
        "publishing ResourceSlices failed: ResourceSlice defaultrefused-slice.k8s.io-" in line
    )
    assert re.search(r"PUT /apis/resource\.k8s\.io/v1\w*/resourceslices/\S+: 422 Invalid", line)
    assert '"Not_A_DNS_Label"' in line and "subtest 'refused-slice'" in line
    assert f"phase '{first}'" in line

    line = _failed_line(output, f"foreign-slice/{first}")
    assert "resourceslices-policy-dra-kubelet-plugin-defaultforeign-slice-k8s-io" in line
    assert "may not modify resourceslices on node 'some-other-node'" in line

    line = _failed_line(output, f"runs-anyway/{first}")
    # Bound is enough: it fails before the pod even runs, saying what its claim was given.
    assert re.search(
        r"should be Pending and unschedulable, but it is \w+, scheduled to 127\.0\.0\.1", line
    )
    assert _result(summary, f"runs-anyway/{first}")["seconds"] < 120  # not the 300 s timeout

    line = _failed_line(output, f"deleted-while-starting/{first}")
    assert "PodFailed: pod default/testerdeleted-while-starting-1 is gone while we waited" in line
    assert _result(summary, f"deleted-while-starting/{first}")["seconds"] < 120

    assert _result(summary, f"leak-slice/{first}")["outcome"] == "passed"
    assert "ERROR test_suite.py::" in output
    assert re.search(
        r"safety net: ResourceSlices left after their driver stopped .*"
        r"driver defaultleak-slice\.k8s\.io of subtest 'leak-slice': "
        r"defaultleak-slice\.k8s\.io-leak-0",
        output,
    ), output[-6000:]
    # The drivers that behaved had their slices removed by the kubelet: only the leak is named.
    assert "defaultstrip-finalizer.k8s.io of subtest" not in output
    for phase in (f"{n}/{first}" for n in names):
        assert _result(summary, phase)["outcome"] in ("passed", "failed")
    assert "upgrade" not in [r["id"] for r in summary["results"]]


def test_strict_delete_fails_the_phase_after_the_upgrade(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cluster_ready: None
) -> None:
    """core-dra's own after-upgrade phase, with the first phase's pod gone: NotFound fails it."""
    _suite(pytester, {"vanishing_pod": VANISHING_POD})
    output, summary = _run(pytester, monkeypatch, "-x", f"--e2e-dra-seed={random.randrange(9)}")
    line = _failed_line(output, "vanishing-pod/after-cluster-upgrade")
    assert "NotFound: DELETE /api/v1/namespaces/default/pods/testervanishing-pod-1: 404" in line
    assert (
        "e2e-dra: upgrade-downgrade: phase 'after-cluster-upgrade' of subtest 'vanishing-pod'"
        in output
    )
    assert _result(summary, "vanishing-pod/after-cluster-creation")["outcome"] == "passed"
    assert _result(summary, "upgrade")["outcome"] == "passed"
