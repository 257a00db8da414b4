"""Upstream's own Go ``test/e2e_dra`` and e2e-dra, side by side on one checkout and its binaries.

A developer who tests a change with upstream's suite asks two things of e2e-dra: is it as fast,
and does it catch at least what upstream's catches? This benchmark answers both on the same
checkout (``e2e-dra source``'s tree, or any Kubernetes checkout), in one invocation:

1. the checkout is built as e2e-dra builds it (only what the change touches; the rest is the base
   release's build), and upstream's test binary is compiled from the same tree (``go test -c
   ./test/e2e_dra``: a change in a staging module is in both);
2. **upstream**: ``TestUpgradeDowngrade`` runs, unmodified, on those binaries, upgrading from the
   previous release e2e-dra also uses, under e2e-dra's host lock (one cluster per host). Where the
   host cannot reach what it wants, stand-ins are used, each one printed as a deviation:
   - dl.k8s.io, which it always asks for ``stable-<minor>.txt``: a loopback stand-in answers that
     one file with the previous release e2e-dra chose (``download_host.py``); the previous
     release's binaries are in the cache directory it is given, so no tarball is asked for;
   - the image of its driver proxy pod (``hostpathplugin``, of which the pod only runs ``sh -c
     sleep``): e2e-dra's busybox test image, tagged with that name in the node's containerd;
   - ``run.sh``'s cleanup of the kubelet's directories is done here, as root without sudo;
3. **e2e-dra** runs the same subtests (``-k "upgrade_downgrade and (<upstream's subtests>)"``) on
   the same checkout, as a developer would (``KUBERNETES_SOURCE_DIR``);
4. it prints both wall times, their ratio, each suite's verdict, and per subtest and phase what
   each reported.

With ``--mutants``, each mutant of ``benchmarks/mutants/<version>`` (upgrade-downgrade ones:
upstream has no other suite) is applied, built, and run by upstream's suite; e2e-dra's verdict
is read from the mutants benchmark's ``mutants.json`` under ``--root`` (its full suite, the one
users run), or run here on upstream's subtests with ``--ours-too``. The table says which of the
two caught each. Results go to ``side-by-side.json`` under ``--root`` (``--resume`` keeps them).

Needs what the main job needs (root, the node runtime, Go). Usage: ``python
benchmarks/upstream_side_by_side.py [--version v1.38.0-beta.0] [--root DIR] [--mutants [NN ...]]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from download_host import DownloadHostStandIn
from mutants import apply, build, load, prepare_tree, restore
from soak import run_job, summaries

from e2e_dra._gotool import go_env, run_go
from e2e_dra.errors import E2EDRAError
from e2e_dra.localupcluster._hostlock import HostLock
from e2e_dra.provision import TEST_IMAGE, ensure_node_runtime
from e2e_dra.releases import release_source
from e2e_dra.releases._checkout_build import TREE_ENV, _toolchain, build_dir, git
from e2e_dra.releases._select import previous_release
from e2e_dra.settings import settings
from e2e_dra.supervise import Process, terminate
from e2e_dra.versions import parse_version, previous_minor

COMPONENTS = (
    "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
)  # fmt: skip
KUBELET_STATE = (
    "/var/run/kubernetes", "/var/run/cdi", "/var/lib/kubelet/plugins_registry",
    "/var/lib/kubelet/plugins", "/var/lib/kubelet/checkpoints",
)  # fmt: skip
UPSTREAM_TIMEOUT = "60m"
MESSAGE = 200


@dataclass(frozen=True)
class Suite:
    """One of e2e-dra's suites and upstream's Go test of the same name."""

    name: str  # e2e-dra's: "upgrade-downgrade"
    go_test: str  # upstream's: "TestUpgradeDowngrade"
    go_file: str  # where upstream's map of subtests is
    selector: str  # e2e-dra's -k for the suite
    phases: tuple[str, ...]  # upstream's phase names, in order


SUITES = (
    Suite(
        "upgrade-downgrade", "TestUpgradeDowngrade", "upgradedowngrade_test.go",
        "upgrade_downgrade",
        ("after-cluster-creation", "after-cluster-upgrade", "after-cluster-downgrade",
         "after-cluster-re-upgrade"),
    ),
    Suite(
        "feature-gate-cycle", "TestFeatureGateCycle", "featuregatecycle_test.go", "gate_cycle",
        ("phase-0-gate-on", "phase-1-gate-off", "phase-2-gate-on-again"),
    ),
)  # fmt: skip
_SUBTEST_KEY = re.compile(r'^\t\t"([a-z0-9-]+)":\s*(?:\{|\w+,)\s*$', re.M)
_GO_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(([\d.]+)s\)")
_HOSTPATH = re.compile(r"registry\.k8s\.io/sig-storage/hostpathplugin:(v[\d.]+)")
_GO_MESSAGE = re.compile(r"^\s+\S+\.go:\d+: (.*)")


def suites_of(tree: Path) -> list[Suite]:
    """The suites upstream has in this tree (1.38 added the feature-gate cycle)."""
    return [s for s in SUITES if (tree / "test" / "e2e_dra" / s.go_file).is_file()]


def upstream_subtests(tree: Path, suite: Suite) -> list[str]:
    """The subtests upstream's test runs in this tree (the keys of its map of subtests)."""
    source = (tree / "test" / "e2e_dra" / suite.go_file).read_text(errors="replace")
    found = _SUBTEST_KEY.findall(source)
    if not found:
        raise SystemExit(f"{tree}: no subtests found in test/e2e_dra/{suite.go_file}")
    return sorted(set(found))


def proxy_image(tree: Path) -> str:
    """The hostpathplugin image upstream's driver proxy pod runs (the newest tag among the CSI
    manifests the tree embeds, as upstream picks it)."""
    tags: set[str] = set()
    manifests = tree / "test" / "e2e" / "testing-manifests" / "storage-csi"
    for path in manifests.rglob("*.yaml"):
        tags.update(_HOSTPATH.findall(path.read_text(errors="replace")))
    if not tags:
        raise SystemExit(f"{manifests}: no hostpathplugin image named")
    newest = max(tags, key=lambda tag: tuple(int(p) for p in tag[1:].split(".")))
    return f"registry.k8s.io/sig-storage/hostpathplugin:{newest}"


def build_test_binary(tree: Path, output: Path) -> float:
    """``go test -c ./test/e2e_dra`` in the checkout, as its own go.mod says (the Go build cache
    the checkout's commands filled is shared: ``-trimpath``); seconds."""
    started = time.monotonic()
    run_go(
        ["test", "-c", "-vet=off", "-trimpath", "-o", str(output), "./test/e2e_dra"],
        cwd=tree,
        what=f"compiling upstream's test/e2e_dra of {tree}",
        log=output.with_suffix(".build.log"),
        env=go_env(**TREE_ENV),
        toolchain=_toolchain(tree),
    )
    return time.monotonic() - started


def previous_cache(root: Path, version: str) -> Path:
    """The cache directory upstream's suite reads (``<dir>/<version>/<component>``, unpacked),
    filled with e2e-dra's verified build or download of the previous release."""
    release = release_source().fetch(version)
    cache = root / "upstream-cache"
    target = cache / version
    target.mkdir(parents=True, exist_ok=True)
    for component in COMPONENTS:
        link = target / component
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(release.bin_dir / component)
    return cache


def parse_go_test(output: str) -> dict[str, Any]:
    """Each ``--- PASS/FAIL/SKIP`` of ``go test -v`` (name -> outcome), and each fatal error a
    test logged (ktesting's ``FATAL ERROR:`` line and the message on the line after it)."""
    results: dict[str, str] = {}
    failures: list[str] = []
    lines = output.splitlines()
    current = ""
    for index, line in enumerate(lines):
        match = _GO_RESULT.match(line)
        if match:
            results[match.group(2)] = match.group(1)
        elif line.startswith("=== RUN") or line.startswith("=== NAME"):
            current = line.split()[-1]
        elif "FATAL ERROR:" in line:
            where = _GO_MESSAGE.match(line)
            said = next((n.strip() for n in lines[index + 1 : index + 3] if n.strip()), "")
            file = where.group(0).split(":")[0].strip() if where else ""
            failures.append(f"{current} ({file}): {said}")
    return {"results": results, "failures": failures}


def new_failures(run: dict[str, Any], baseline: dict[str, Any] | None) -> list[str]:
    """What fails in ``run`` and did not unpatched: a test that fails, a fatal error logged where
    none was (a cleanup's, in a test that failed anyway), a test that ran unpatched and no longer
    ran (one stopped early by a failure). On a pair where upstream's own suite fails unpatched,
    only such differences are its verdict."""
    before = baseline["results"] if baseline else {}
    after = run["results"]
    new = [f"{n} failed" for n, o in after.items() if o == "FAIL" and before.get(n) != "FAIL"]
    known = {_where(f) for f in (baseline or {}).get("failures", [])}
    new += [f for f in run.get("failures", []) if _where(f) not in known]
    lost = [f"{n} did not run" for n, o in before.items() if o != "FAIL" and n not in after]
    if run["status"] != 0 and not after:
        new.append(f"exit {run['status']} before any test ended")
    return new + lost


def _where(failure: str) -> str:
    """``"TestX/phase/subtest (file.go)"`` of a failure line: the same failure in another run
    (its message names other objects)."""
    return failure.split("): ", 1)[0]


def run_upstream(
    tree: Path, test_binary: Path, suite: Suite, previous: str, minor: str, root: Path
) -> dict[str, Any]:
    """Upstream's test of ``suite`` on the checkout's build (the upgrade from ``previous``)."""
    runtime = ensure_node_runtime(tree)
    out = root / f"upstream-{suite.name}"
    shutil.rmtree(out, ignore_errors=True)
    artifacts = out / "artifacts"
    (artifacts / "tmp").mkdir(parents=True)
    (artifacts / "logs").mkdir()
    image = proxy_image(tree)
    tagged = _run_quiet(
        [*runtime.ctr(), "-n", "k8s.io", "images", "tag", "--force", TEST_IMAGE, image]
    )
    if tagged:
        raise SystemExit(f"tagging {TEST_IMAGE} as {image} failed: {tagged}")
    deviations = [
        f"{image}: e2e-dra's busybox test image under that name (the pod runs sh -c sleep)",
        "run.sh's cleanup of the kubelet's state done by the benchmark, as root, no sudo",
    ]
    answers = {}
    if suite.name == "upgrade-downgrade":
        answers[f"stable-{minor}.txt"] = previous
        deviations.insert(0, f"dl.k8s.io: a loopback stand-in answered stable-{minor}.txt")
    lock = HostLock(settings().host_lock)
    lock.acquire()
    try:
        for path in KUBELET_STATE:
            shutil.rmtree(path, ignore_errors=True)
            Path(path).mkdir(parents=True, exist_ok=True)
        for state in Path("/var/lib/kubelet").glob("*_state"):
            state.unlink(missing_ok=True)
        with DownloadHostStandIn(out / "dl-standin", answers) as host:
            bin_dir = build_dir(tree)
            env = {
                **runtime.env(),
                **host.env(),
                "ARTIFACTS": str(artifacts),
                "TMP_DIR": str(artifacts / "tmp"),
                "TMPDIR": str(artifacts / "tmp"),
                "LOG_DIR": str(artifacts / "logs"),
                "KUBERNETES_SERVER_BIN_DIR": str(bin_dir),
                "KUBERNETES_SERVER_CACHE_DIR": str(previous_cache(root, previous)),
                "KUBELET_SUDO": "",
                "PROXY_SUDO": "",
            }
            env["PATH"] = f"{bin_dir}:{env['PATH']}"
            process = Process(
                f"upstream {suite.go_test}",
                [str(test_binary), "-test.v", "-test.count=1", f"-test.timeout={UPSTREAM_TIMEOUT}",
                 "-test.run", f"^{suite.go_test}$"],
                log_file=out / "go-test.log",
                env=env,
                cwd=tree / "test" / "e2e_dra",
                capture=True,
                new_session=True,
            )  # fmt: skip
            print(f"  upstream {suite.go_test} (log: {out / 'go-test.log'})", flush=True)
            started = time.monotonic()
            process.start(before_run=lambda who: lock.record(process.name, who.pid))
            try:
                status = process.wait()
            finally:
                if process.identity is not None:
                    terminate(process.identity, grace=10.0)  # what it left in its group
            wall = time.monotonic() - started
            asked = [f"{r.method} {r.target} -> {r.status}" for r in host.requests]
    finally:
        lock.release()
    parsed = parse_go_test(process.output())
    if any(".tar.gz" in a for a in asked):
        deviations.append("it asked the stand-in for a tarball")
    return {
        "status": status,
        "wall": round(wall, 1),
        "verdict": "passed" if status == 0 else "failed",
        "results": parsed["results"],
        "failures": parsed["failures"],
        "asked": asked,
        "deviations": deviations,
    }


def run_ours(tree: Path, suite: Suite, subtests: list[str], artifacts: Path) -> dict[str, Any]:
    """e2e-dra's ``suite`` on the checkout, only upstream's subtests of it."""
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    argv = ["./run.sh", "pytest", "e2e_dra", "-p", "no:cacheprovider"]
    argv += ["-k", f"{suite.selector} and ({' or '.join(subtests)})"]
    os.environ["KUBERNETES_SOURCE_DIR"] = str(tree)
    print(f"  e2e-dra: {' '.join(argv)} (log: {artifacts / 'pytest.log'})", flush=True)
    started = time.monotonic()
    status = run_job(argv, artifacts)
    wall = time.monotonic() - started
    results: dict[str, str] = {}
    failures = []
    for summary in summaries(artifacts):
        for result in summary.get("results", []):
            results[result["id"]] = result.get("outcome", "?")
            if result.get("outcome") in ("failed", "error"):
                failures.append(f"{result['id']}: {result.get('message', '')}")
    return {
        "status": status,
        "wall": round(wall, 1),
        "verdict": "passed" if status == 0 and not failures else "failed",
        "results": results,
        "failures": failures[:5],
    }


def _run_quiet(argv: list[str]) -> str | None:
    """Run a short command; None when it worked, else its last line."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]


def counts(results: dict[str, str]) -> str:
    tally: dict[str, int] = {}
    for outcome in results.values():
        tally[outcome.lower()] = tally.get(outcome.lower(), 0) + 1
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(tally.items()))


def per_subtest(
    suite: Suite, subtests: list[str], upstream: dict[str, Any], ours: dict[str, Any]
) -> None:
    """Per subtest and phase: what each suite reported (``-``: it has no such phase)."""
    print(f"\n| {suite.name} subtest | phase | upstream | e2e-dra |")
    print("|---|---|---|---|")
    for subtest in subtests:
        for phase in suite.phases:
            names = (f"{suite.go_test}/{phase}/{subtest}", f"{suite.go_test}/{subtest}/{phase}")
            theirs = next((upstream["results"][n] for n in names if n in upstream["results"]), "-")
            mine = ours["results"].get(f"{subtest}/{phase}", "-")
            if theirs != "-" or mine != "-":
                print(f"| {subtest} | {phase} | {theirs.lower()} | {mine} |")


def base_version(tree: Path) -> tuple[str, str, str]:
    """The checkout's release, the previous one e2e-dra upgrades from, and its minor."""
    version = git(tree, "describe", "--tags", "--abbrev=0", "HEAD").strip()
    previous, minor = previous_release(version, release_source())
    return version, previous, minor


def side_by_side(root: Path, tree: Path) -> dict[str, Any]:
    """Both suites on the unchanged checkout: wall times, ratio, verdicts, per suite."""
    version, previous, minor = base_version(tree)
    build(tree)
    compiled = build_test_binary(tree, root / "e2e_dra.test")
    print(f"{tree} ({version}, from {previous}): upstream's test binary compiled in "
          f"{compiled:.0f} s", flush=True)  # fmt: skip
    found: dict[str, Any] = {"version": version, "previous": previous,
                             "test_binary_seconds": round(compiled, 1)}  # fmt: skip
    for suite in suites_of(tree):
        subtests = upstream_subtests(tree, suite)
        print(f"{suite.name}: upstream's subtests {', '.join(subtests)}", flush=True)
        upstream = run_upstream(tree, root / "e2e_dra.test", suite, previous, minor, root)
        ours = run_ours(tree, suite, subtests, root / f"e2e-dra-{suite.name}")
        ratio = upstream["wall"] / ours["wall"] if ours["wall"] else 0.0
        found[suite.name] = {"subtests": subtests, "upstream": upstream, "ours": ours,
                             "ratio": round(ratio, 2)}  # fmt: skip
    print("\n| suite | subtests | upstream (Go) | e2e-dra | upstream / e2e-dra |")
    print("|---|---|---|---|---|")
    for suite in suites_of(tree):
        row = found[suite.name]
        up, ours = row["upstream"], row["ours"]
        print(
            f"| {suite.name} | {len(row['subtests'])} | {up['wall']:.0f} s, {up['verdict']} "
            f"({counts(up['results'])}) | {ours['wall']:.0f} s, {ours['verdict']} "
            f"({counts(ours['results'])}) | {row['ratio']:.2f} |"
        )
    for suite in suites_of(tree):
        row = found[suite.name]
        per_subtest(suite, row["subtests"], row["upstream"], row["ours"])
        for line in row["upstream"]["deviations"]:
            print(f"deviation ({suite.name}): {line}")
        print(f"upstream {suite.go_test} asked the dl.k8s.io stand-in: {row['upstream']['asked']}")
        for failure in row["upstream"]["failures"] + row["ours"]["failures"]:
            print(f"failure ({suite.name}): {failure[:MESSAGE]}")
    return found


def mutant_rows(args: argparse.Namespace, root: Path, tree: Path, report: dict[str, Any]) -> None:
    """Each mutant by upstream's test of its suite (and e2e-dra's on the same subtests with
    ``--ours-too``); e2e-dra's full-suite verdict from the mutants benchmark."""
    _, previous, minor = base_version(tree)
    suites = {s.name: s for s in suites_of(tree)}
    full: dict[str, str] = {}
    if (root / "mutants.json").is_file():
        for entry in json.loads((root / "mutants.json").read_text()).get("mutants", []):
            full[entry["mutant"]] = entry.get("verdict", "?")
    done = {row["mutant"] for row in report["mutants"]}
    chosen = [m for m in load(args.version) if not args.mutants or m.number in args.mutants]
    for mutant in (m for m in chosen if m.name not in done):
        print(f"{mutant.name}: {mutant.what}", flush=True)
        row: dict[str, Any] = {"mutant": mutant.name, "suite": mutant.suite}
        row["e2e-dra full suite"] = full.get(mutant.name, "not run")
        suite = suites.get(mutant.suite)
        if suite is None:
            row["upstream"] = f"upstream has no {mutant.suite} test"
        else:
            try:
                unapplied = apply(tree, mutant)
                seconds, built, failed = (0.0, [], None) if unapplied else build(tree)
                row |= {"rebuild": round(seconds, 1), "built": built}
                if unapplied:
                    row["upstream"] = f"does not apply: {unapplied}"
                elif failed:
                    row["upstream"] = "not built"
                else:
                    build_test_binary(tree, root / "e2e_dra.test")
                    run = run_upstream(tree, root / "e2e_dra.test", suite, previous, minor, root)
                    baseline = (report.get("unchanged") or {}).get(suite.name, {}).get("upstream")
                    differences = new_failures(run, baseline)
                    row["upstream"] = "caught" if differences else "missed"
                    row["upstream run"] = run | {"differences": differences}
                    if args.ours_too:
                        subtests = upstream_subtests(tree, suite)
                        artifacts = root / f"e2e-dra-{mutant.number}"
                        ours = run_ours(tree, suite, subtests, artifacts)
                        row["e2e-dra same subtests"] = (
                            "caught" if ours["verdict"] == "failed" else "missed"
                        )
                        row["ours run"] = ours
            finally:
                restore(tree, args.version)
        print(f"  upstream: {row['upstream']}; e2e-dra: {row['e2e-dra full suite']}", flush=True)
        report["mutants"].append(row)
        (root / "side-by-side.json").write_text(json.dumps(report, indent=2) + "\n")
    baselines = {
        name: (report.get("unchanged") or {}).get(name, {}).get("upstream") for name in suites
    }
    for row in report["mutants"]:  # judged again from what the run said, as judged today
        if "upstream run" in row:
            differences = new_failures(row["upstream run"], baselines.get(row["suite"]))
            row["upstream run"]["differences"] = differences
            row["upstream"] = "caught" if differences else "missed"
    (root / "side-by-side.json").write_text(json.dumps(report, indent=2) + "\n")
    print("\n| mutant | upstream test/e2e_dra | wall | e2e-dra | upstream's failure |")
    print("|---|---|---|---|---|")
    for row in sorted(report["mutants"], key=lambda r: r["mutant"]):
        run = row.get("upstream run", {})
        said = "; ".join(run.get("differences", []) + run.get("failures", []))
        said = said[:MESSAGE].replace("|", "/")
        ours = row["e2e-dra full suite"]
        if "e2e-dra same subtests" in row:
            ours += f" (same subtests: {row['e2e-dra same subtests']})"
        wall = f"{run['wall']:.0f} s" if run else "-"
        print(f"| {row['mutant']} | {row['upstream']} | {wall} | {ours} | {said} |")
    judged = [r for r in report["mutants"] if r["upstream"] in ("caught", "missed")]
    for who, key in (("upstream", "upstream"), ("e2e-dra", "e2e-dra full suite")):
        caught = sum(r[key] == "caught" for r in judged)
        print(f"{who} caught {caught} of the {len(judged)} mutants upstream could run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="v1.38.0-beta.0")
    parser.add_argument("--root", type=Path, default=Path("/tmp/mutants"))
    parser.add_argument("--mutants", nargs="*", help="run the mutants (all, or these numbers)")
    parser.add_argument("--ours-too", action="store_true", help="and e2e-dra per mutant")
    parser.add_argument("--resume", action="store_true", help="keep ROOT/side-by-side.json")
    args = parser.parse_args(argv)
    parse_version(args.version), previous_minor(args.version)  # a bad version fails here
    # A SIGTERM must end the run through its ``finally``s: upstream's test binary and the
    # components it started in its process group are stopped there, never left running.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    root = args.root.absolute()
    tree = root / "tree"
    root.mkdir(parents=True, exist_ok=True)
    prepare_tree(args.version, tree)
    saved = root / "side-by-side.json"
    report: dict[str, Any] = {"unchanged": None, "mutants": []}
    if args.resume and saved.is_file():
        report = json.loads(saved.read_text())
    try:
        if report.get("unchanged") is None:
            report["unchanged"] = side_by_side(root, tree)
            saved.write_text(json.dumps(report, indent=2) + "\n")
        if args.mutants is not None:
            mutant_rows(args, root, tree, report)
    except E2EDRAError as exc:
        raise SystemExit(f"side by side: {exc}") from None
    print(f"details: {saved}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
