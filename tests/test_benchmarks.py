"""The benchmarks' own machinery (they time real clusters; here only how they run a job)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e_dra.hostkit import poll

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

JOB = """
import signal, sys, time
from pathlib import Path

def stop(signum, frame):
    Path(sys.argv[1]).write_text("stopped its cluster")
    sys.exit(3)

signal.signal(signal.SIGTERM, stop)
Path(sys.argv[2]).touch()
time.sleep(60)
"""

BENCHMARK = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from soak import run_job
run_job([sys.executable, sys.argv[2], sys.argv[3], sys.argv[4]], Path(sys.argv[5]))
"""


def test_a_sigterm_to_the_benchmark_is_passed_on_to_its_job_and_waited_for(tmp_path: Path):
    """A soak stopped with SIGTERM once left its main job running, with a cluster: the job
    must get the signal (so that it stops its cluster) and end before the benchmark does."""
    job, stopped, ready = tmp_path / "job.py", tmp_path / "stopped", tmp_path / "ready"
    job.write_text(JOB)
    argv = [sys.executable, "-c", BENCHMARK, str(BENCHMARKS), str(job), str(stopped), str(ready)]
    with subprocess.Popen(
        [*argv, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as benchmark:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), benchmark.communicate(timeout=30)
        benchmark.send_signal(signal.SIGTERM)
        _, err = benchmark.communicate(timeout=30)

    assert stopped.read_text() == "stopped its cluster"
    assert benchmark.returncode == 1
    assert err.strip().endswith("stopped by SIGTERM; the job ended with status 3")


def test_the_soak_counts_processes_by_their_whole_program_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel's ``comm`` cuts names at 15 characters: a leaked controller-manager or
    containerd shim would go uncounted by it."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from soak import PROCESSES, program_names

    program = tmp_path / "kube-controller-manager"
    shutil.copy("/bin/sleep", program)
    before = program_names().count("kube-controller-manager")
    with subprocess.Popen([str(program), "30"]) as leaked:
        counted = poll(
            lambda: program_names().count("kube-controller-manager"),
            timeout=10,
            interval=0.05,
            until=lambda count: count != before,
        )
        leaked.kill()
    assert counted.value == before + 1
    assert "kube-controller-manager" in PROCESSES


def _bug_replay():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bug_replay
    finally:
        sys.path.remove(str(BENCHMARKS))
    return bug_replay


def test_each_replayed_bug_is_declared_by_its_subtest_for_its_buggy_pair_only() -> None:
    """The replay table and the subtests' KnownBug declarations say the same: on the buggy pair
    the phase is expected to fail, on the fixed pair it must pass."""
    from e2e_dra.subtest import PHASES, discover

    bug_replay = _bug_replay()
    subtests = {s.name: s for s in discover()}
    bugs = bug_replay.load()
    assert len(bugs) >= 5
    for bug in bugs:
        declared = [b for b in subtests[bug.subtest].known_bugs if b.issue == bug.issue]
        assert declared, f"{bug.subtest} does not declare kubernetes#{bug.issue}"

        where = bug.entry.removeprefix(f"{bug.subtest}/")

        def runs(pair, where=where, suite=bug.suite):  # the releases running in ``where``
            upgraded = where in (PHASES[1], "upgrade")
            older = pair.kubelet if suite == "kubelet-last" else pair.previous
            control_plane = pair.current if upgraded or suite == "kubelet-last" else older
            releases = dict.fromkeys(("kube-scheduler", "kube-controller-manager"), control_plane)
            return releases | {"kubelet": pair.current if upgraded else older}

        known = subtests[bug.subtest].known_bug
        expected = known(where, runs(bug.buggy))
        assert expected is not None and expected.issue == bug.issue, f"{bug.issue} on {bug.buggy}"
        assert known(where, runs(bug.fixed)) is None, f"{bug.issue} on {bug.fixed}"


def test_the_replay_judges_a_phase_by_its_outcome_on_each_side() -> None:
    verdict = _bug_replay().verdict
    this = {"outcome": "xfailed", "message": "known Kubernetes bug kubernetes#7 (kubelet v1): x"}
    other = {"outcome": "xfailed", "message": "known Kubernetes bug kubernetes#8 (kubelet v1): y"}
    assert verdict(this, 7, buggy=True) == "caught"
    plain = {"outcome": "failed", "message": "AssertionError: z"}  # broken, not as the bug does
    assert verdict(plain, 7, buggy=True) == "failed without its sign"
    assert verdict({"outcome": "passed"}, 7, buggy=True) == "missed"
    assert verdict(other, 7, buggy=True) == "masked by kubernetes#8"
    assert verdict({"outcome": "passed"}, 7, buggy=False) == "clean"
    assert verdict({"outcome": "failed"}, 7, buggy=False) == "false alarm"
    assert verdict(this, 7, buggy=False) == "false alarm"
    assert verdict(other, 7, buggy=False) == "masked by kubernetes#8"
    assert verdict({"outcome": "skipped"}, 7, buggy=True) == "not run (skipped)"
    assert verdict(None, 7, buggy=False) == "not run (not run)"


def test_the_download_host_stand_in_answers_its_markers_over_tls_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upstream's suite asks https://dl.k8s.io for stable-<minor>.txt through HTTPS_PROXY: the
    stand-in must answer that over TLS trusted through the bundle it gives, 404 a tarball, refuse
    a tunnel to any other host, and record each request."""
    import http.client
    import ssl

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from download_host import DownloadHostStandIn

    with DownloadHostStandIn(tmp_path, {"stable-1.37.txt": "v1.37.2"}) as host:
        env = host.env()
        trust = ssl.create_default_context(cafile=env["SSL_CERT_FILE"])

        def get(path: str, *, to: str = "dl.k8s.io") -> tuple[int, bytes]:
            conn = http.client.HTTPSConnection("127.0.0.1", host.port, context=trust, timeout=10)
            conn.set_tunnel(to, 443)
            try:
                conn.request("GET", path)
                answer = conn.getresponse()
                return answer.status, answer.read()
            finally:
                conn.close()

        assert get("/release/stable-1.37.txt") == (200, b"v1.37.2")  # no newline, as dl.k8s.io
        tarball = "/release/v1.37.2/kubernetes-server-linux-amd64.tar.gz"
        assert get(tarball) == (404, b"")
        with pytest.raises(OSError, match="403"):
            get("/", to="proxy.golang.org")
        untrusted = http.client.HTTPSConnection(
            "127.0.0.1", host.port, context=ssl.create_default_context(), timeout=10
        )
        untrusted.set_tunnel("dl.k8s.io", 443)
        with pytest.raises(ssl.SSLCertVerificationError):
            untrusted.request("GET", "/release/stable-1.37.txt")
        untrusted.close()
    assert [(r.method, r.target, r.status) for r in host.requests][:3] == [
        ("GET", "/release/stable-1.37.txt", 200),
        ("GET", tarball, 404),
        ("CONNECT", "proxy.golang.org:443", 403),
    ]


GO_TEST_OUTPUT = """=== RUN   TestUpgradeDowngrade
=== RUN   TestUpgradeDowngrade/after-cluster-upgrade/core-dra
    coredra_test.go:45: FATAL ERROR: I1205 13:51:27.670199]
        \tUnexpected error: the server could not find the requested resource
--- FAIL: TestUpgradeDowngrade (357.68s)
    --- FAIL: TestUpgradeDowngrade/after-cluster-upgrade (71.34s)
        --- FAIL: TestUpgradeDowngrade/after-cluster-upgrade/core-dra (0.00s)
        --- PASS: TestUpgradeDowngrade/after-cluster-upgrade/device-taints (32.02s)
    --- PASS: TestUpgradeDowngrade/after-cluster-downgrade (26.87s)
        --- PASS: TestUpgradeDowngrade/after-cluster-downgrade/device-taints (2.03s)
"""


def test_upstreams_verdict_on_a_mutant_is_what_differs_from_its_unpatched_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Upstream's own suite fails core-dra on v1.37.2 -> v1.38.0-beta.0 unpatched (it deletes a
    claim through resource.k8s.io/v1beta1, which 1.38 no longer serves): a mutant is caught by
    it only when another test fails, or a test that ran unpatched no longer runs."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from upstream_side_by_side import new_failures, parse_go_test

    baseline = parse_go_test(GO_TEST_OUTPUT) | {"status": 1}
    assert baseline["failures"] == [
        "TestUpgradeDowngrade/after-cluster-upgrade/core-dra (coredra_test.go): "
        "Unexpected error: the server could not find the requested resource"
    ]
    assert baseline["results"]["TestUpgradeDowngrade/after-cluster-downgrade"] == "PASS"
    assert new_failures(baseline, baseline) == []
    # A fatal error where none was, in a test that failed anyway (upstream's cleanup waiting for
    # claims a kubelet never unprepared): caught there.
    cleanup = GO_TEST_OUTPUT.replace(
        "--- FAIL: TestUpgradeDowngrade (357.68s)",
        "=== NAME  TestUpgradeDowngrade\n    builder.go:204: FATAL ERROR: I1205 14:33:02.436573]\n"
        "        \tTimed out after 60.000s.\n--- FAIL: TestUpgradeDowngrade (357.68s)",
    )
    assert new_failures(parse_go_test(cleanup) | {"status": 1}, baseline) == [
        "TestUpgradeDowngrade (builder.go): Timed out after 60.000s."
    ]

    taint_broken = GO_TEST_OUTPUT.replace("--- PASS: TestUpgradeDowngrade/after-cluster-upgrade/"
                                          "device-taints", "--- FAIL: TestUpgradeDowngrade/"
                                          "after-cluster-upgrade/device-taints")  # fmt: skip
    caught = parse_go_test(taint_broken) | {"status": 1}
    assert new_failures(caught, baseline) == [
        "TestUpgradeDowngrade/after-cluster-upgrade/device-taints failed"
    ]
    stopped = "\n".join(GO_TEST_OUTPUT.splitlines()[:8])  # the downgrade never ran
    assert new_failures(parse_go_test(stopped) | {"status": 1}, baseline) == [
        "TestUpgradeDowngrade/after-cluster-downgrade did not run",
        "TestUpgradeDowngrade/after-cluster-downgrade/device-taints did not run",
    ]
    assert new_failures({"results": {}, "status": 2}, baseline)[0].startswith("exit 2 before")
    clean = {"results": {"TestUpgradeDowngrade": "PASS"}, "status": 0}
    assert new_failures(caught, clean) == [
        "TestUpgradeDowngrade failed",
        "TestUpgradeDowngrade/after-cluster-upgrade failed",
        "TestUpgradeDowngrade/after-cluster-upgrade/core-dra failed",
        "TestUpgradeDowngrade/after-cluster-upgrade/device-taints failed",
        "TestUpgradeDowngrade/after-cluster-upgrade/core-dra (coredra_test.go): "
        "Unexpected error: the server could not find the requested resource",
    ]


MUTANT = "\n".join(
    [
        "Mutant: the greeting is dropped",
        "Component: kubelet",
        "",
        "--- a/greet.go",
        "+++ b/greet.go",
        "@@ -1,3 +1,3 @@",
        " package greet",
        " ",  # a blank line of context
        '-const Greeting = "hello"',
        '+const Greeting = ""',
        "",
    ]
)


def test_a_version_without_mutants_of_its_own_gets_the_nearest_set_and_a_moved_patch_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutants are written for one release; a developer's tree of a neighbouring one is tested
    with them, and a patch whose lines moved there is reported, not run."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import mutants

    sets = tmp_path / "mutants"
    for version in ("v1.35.0", "v1.38.0-beta.0"):
        (sets / version).mkdir(parents=True)
        (sets / version / "01-greeting-dropped.patch").write_text(MUTANT)
    (sets / "v1.36.5").mkdir()  # no patches: not a set
    monkeypatch.setattr(mutants, "MUTANTS", sets)
    assert mutants.written_for("v1.38.0-beta.0") == "v1.38.0-beta.0"
    assert mutants.written_for("v1.37.2") == "v1.38.0-beta.0"
    assert mutants.written_for("v1.36.5") == "v1.35.0"  # one minor older, not two newer
    assert mutants.written_for("v1.39.0-alpha.0") == "v1.38.0-beta.0"
    # A narrowed run is named apart: it is no false-alarm check of the whole suite.
    assert mutants.selection("upgrade-downgrade", None) == "upgrade-downgrade"
    assert mutants.selection("upgrade-downgrade", "core-dra") == "upgrade-downgrade -k core-dra"
    [mutant] = mutants.load("v1.37.2")
    assert mutant.patch == sets / "v1.38.0-beta.0" / "01-greeting-dropped.patch"

    tree = tmp_path / "tree"
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / "greet.go").write_text('package greet\n\nconst Greeting = "hello"\n')
    assert mutants.apply(tree, mutant) is None
    assert (tree / "greet.go").read_text().endswith('Greeting = ""\n')
    (tree / "greet.go").write_text('package greet\n\nconst Greeting = "hi"\n')  # the line moved
    refused = mutants.apply(tree, mutant)
    assert refused is not None and "git apply" in refused and "greet.go" in refused
