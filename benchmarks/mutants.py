"""What the suite catches in a Kubernetes developer's change: deliberate regressions of DRA code.

Each ``benchmarks/mutants/<version>/NN-*.patch`` is one small regression a developer could write
(a reversed check, a dropped field, a skipped step) in the kubelet, the scheduler and allocator,
the controller manager or the API server, with a header saying what it breaks and which suite
should see it (``Suite:``; upgrade-downgrade unless it says otherwise). A version without patches
of its own gets those of the nearest version that has some; a patch whose lines moved there is
reported as **does not apply**. The benchmark:

1. writes ``<version>`` as a checkout once (``e2e-dra source``, into ``--root/tree``);
2. runs each suite the mutants name on the unpatched checkout (the false-alarm check);
3. for each mutant: applies it, builds what it touches (the checkout build: only the commands
   whose packages the patch changes, the rest are the release's own build; ``rebuild`` is that
   time), runs the suite as a developer would (``KUBERNETES_SOURCE_DIR=<tree> ./run.sh pytest -x
   e2e_dra -k <suite>``, ``$ARTIFACTS`` its own folder), and puts the tree back.

A mutant is **caught** when its run fails (the table shows the suite's first failure: which entry,
and its message), **missed** when it passes, **not built** when it does not compile. The unpatched
runs are **clean** or a **false alarm**. Figures, not assertions: a miss fails nothing here; a miss
becomes a scenario of the suite. Writes ``mutants.json`` under ``--root``.

Needs what the main job needs (root, the node runtime) and Go; the first build of a checkout
compiles every package once (about 15 minutes on 2 cores, shared by every later checkout of that
release through the Go build cache). Usage:
``python benchmarks/mutants.py [--version v1.38.0-beta.0] [--root DIR] [--only 01 07 ...]
[--select "<subtest> or ..."]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak import run_job, summaries  # the same job runner and reading of summary.json

from e2e_dra.errors import E2EDRAError, ReleaseError
from e2e_dra.releases import GoBuildSource, release_source, write_checkout
from e2e_dra.releases._checkout_build import build_checkout, git
from e2e_dra.versions import parse_version

REPO = Path(__file__).resolve().parents[1]
MUTANTS = Path(__file__).resolve().parent / "mutants"
SUITES = ("upgrade-downgrade", "kubelet-last", "control-plane-first", "feature-gate-cycle")
DEFAULT_SUITE = "upgrade-downgrade"
MESSAGE = 200  # characters of the suite's failure line in the table


@dataclass(frozen=True)
class Mutant:
    number: str  # "07"
    patch: Path
    what: str
    component: str
    suite: str

    @property
    def name(self) -> str:
        return self.patch.stem


def written_for(version: str) -> str:
    """The version whose patches are the mutants of ``version``: its own, or, when none were
    written for it, those of the nearest version that has some (a patch of a neighbouring release
    applies to most of a tree's DRA code; :func:`apply` names the ones that do not)."""
    sets = [d.name for d in MUTANTS.iterdir() if d.is_dir() and any(d.glob("*.patch"))]
    if version in sets or not sets:
        return version
    target = parse_version(version)

    def distance(name: str) -> tuple[int, int, bool]:
        other = parse_version(name)
        minors = abs((other.major - target.major) * 100 + other.minor - target.minor)
        return minors, abs(other.patch - target.patch), other < target  # then the newer one

    return min(sets, key=distance)


def load(version: str) -> list[Mutant]:
    """The mutants of ``version`` (see :func:`written_for`), in order; a patch without its header
    is refused by name."""
    found = []
    source = written_for(version)
    if source != version:
        print(f"no mutants written for {version}: those of {source}", flush=True)
    for patch in sorted((MUTANTS / source).glob("*.patch")):
        header: dict[str, str] = {}
        for line in patch.read_text().splitlines():
            if not line.strip() or line.startswith(("---", "diff ")):
                break
            key, _, value = line.partition(":")
            header[key.strip().lower()] = value.strip()
        suite = header.get("suite", DEFAULT_SUITE).split()[0]
        if "mutant" not in header or "component" not in header or suite not in SUITES:
            raise SystemExit(f"{patch}: needs Mutant:, Component: and a Suite: of {SUITES}")
        found.append(Mutant(patch.name[:2], patch, header["mutant"], header["component"], suite))
    if not found:
        raise SystemExit(f"no mutants for {version} in {MUTANTS / version}")
    return found


def apply(tree: Path, mutant: Mutant) -> str | None:
    """Apply ``mutant`` to the checkout; why it does not apply (a patch of another release whose
    lines moved), or None."""
    try:
        git(tree, "apply", str(mutant.patch))
    except ReleaseError as exc:
        return str(exc)
    return None


def prepare_tree(version: str, tree: Path) -> None:
    """The checkout of ``version``, written once, put back to its release commit."""
    if not tree.exists():
        write_checkout(GoBuildSource(), version, tree)
    restore(tree, version)
    git(tree, "status", "--porcelain")  # a tree git cannot read fails here, not mid-run


def restore(tree: Path, version: str) -> None:
    git(tree, "checkout", "-q", "--force", version)
    git(tree, "clean", "-fdq")  # _output (git-ignored) and its builds stay


def build(tree: Path) -> tuple[float, list[str], str | None]:
    """The checkout built as a run builds it: seconds, the commands built, or why it failed."""
    started = time.monotonic()
    try:
        done = build_checkout(tree, base_release=lambda tag: release_source().fetch(tag))
    except E2EDRAError as exc:
        return time.monotonic() - started, [], str(exc)
    return time.monotonic() - started, list(done.built), None


def run_suite(suite: str, tree: Path, artifacts: Path, select: str | None = None) -> dict[str, Any]:
    """``suite`` on the checkout (only its subtests that ``select``, a ``-k`` expression, picks);
    its exit status, wall time and first failure."""
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = ["./run.sh", "pytest", "-x", "e2e_dra", "-p", "no:cacheprovider"]
    chosen = suite.replace("-", "_")
    argv += ["-k", f"{chosen} and ({select})" if select else chosen]
    os.environ["KUBERNETES_SOURCE_DIR"] = str(tree)
    print(f"  {suite}: {' '.join(argv)} (log: {artifacts / 'pytest.log'})", flush=True)
    started = time.monotonic()
    status = run_job(argv, artifacts)
    failure = None
    for summary in summaries(artifacts):
        for result in summary.get("results", []):
            if result.get("outcome") in ("failed", "error") and failure is None:
                failure = f"{result['id']}: {result.get('message', '')}"
    return {"status": status, "wall": round(time.monotonic() - started, 1), "failure": failure}


def selection(suite: str, select: str | None) -> str:
    """How a run is named in the report: its suite, and the ``-k`` expression that narrowed it."""
    return f"{suite} -k {select}" if select else suite


def verdict(run: dict[str, Any], *, mutated: bool) -> str:
    """From what the suite reported: an entry that failed is a catch (or, unpatched, a false
    alarm) whatever the exit status (a run stopped after its failure still caught it)."""
    if run["failure"]:
        return "caught" if mutated else "false alarm"
    if run["status"] == 0:
        return "missed" if mutated else "clean"
    return f"error (exit {run['status']})"


DONE = ("caught", "missed", "not built", "does not apply", "clean", "false alarm")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="v1.38.0-beta.0")
    parser.add_argument("--root", type=Path, default=Path("/tmp/mutants"))
    parser.add_argument("--only", nargs="*", help="mutant numbers (07) to run")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unpatched runs")
    parser.add_argument(
        "--select",
        help="a -k expression: only the subtests it picks (a mutant's proof on the subtest "
        "written for it; its row keeps the expression)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the verdicts in ROOT/mutants.json and run only what has none",
    )
    args = parser.parse_args(argv)
    mutants = [m for m in load(args.version) if not args.only or m.number in args.only]
    root = args.root.absolute()
    tree = root / "tree"
    root.mkdir(parents=True, exist_ok=True)
    prepare_tree(args.version, tree)
    report: dict[str, Any] = {"version": args.version, "baseline": {}, "mutants": []}
    if args.resume and (root / "mutants.json").is_file():
        report = json.loads((root / "mutants.json").read_text())
        report["baseline"] = {
            k: v for k, v in report["baseline"].items() if v.get("verdict") in DONE
        }
        report["mutants"] = [r for r in report["mutants"] if r.get("verdict") in DONE]
    done = {row["mutant"] for row in report["mutants"]}

    def save() -> None:
        (root / "mutants.json").write_text(json.dumps(report, indent=2) + "\n")

    if not args.no_baseline:
        # A baseline is the run of a selection: a narrowed one is no false-alarm check of the
        # whole suite, so each is kept (and resumed) under its own name.
        chosen = {selection(m.suite, args.select): m.suite for m in mutants}
        for name, suite in sorted(chosen.items()):
            if name in report["baseline"]:
                continue
            print(f"unpatched {args.version}: {name}", flush=True)
            build(tree)
            run = run_suite(suite, tree, root / f"unpatched-{suite}", args.select)
            report["baseline"][name] = run | {"verdict": verdict(run, mutated=False)}
            save()
    for mutant in (m for m in mutants if m.name not in done):
        print(f"{mutant.name}: {mutant.what}", flush=True)
        row: dict[str, Any] = {"mutant": mutant.name, "component": mutant.component}
        row |= {"suite": mutant.suite, "what": mutant.what}
        row |= {"rebuild": 0.0, "built": []}
        try:
            if unapplied := apply(tree, mutant):
                row |= {"verdict": "does not apply", "failure": unapplied}
            else:
                seconds, built, failed = build(tree)
                row |= {"rebuild": round(seconds, 1), "built": built}
                if failed:
                    row |= {"verdict": "not built", "failure": failed}
                else:
                    run = run_suite(mutant.suite, tree, root / mutant.name, args.select)
                    row |= run | {"verdict": verdict(run, mutated=True), "select": args.select}
        finally:
            restore(tree, args.version)
        print(
            f"  {row['verdict']} (rebuild {row['rebuild']:.0f} s, built {row['built']})",
            flush=True,
        )
        report["mutants"].append(row)
        save()

    report["mutants"].sort(key=lambda row: row["mutant"])
    print("\n| mutant | component | suite | rebuild | run | verdict | the suite said |")
    print("|---|---|---|---|---|---|---|")
    for row in report["mutants"]:
        said = (row.get("failure") or "").replace("|", "/").replace("\n", " ")[:MESSAGE]
        ran = selection(row["suite"], row.get("select"))
        print(
            f"| {row['mutant']} | {row['component']} | {ran} | {row['rebuild']:.0f} s "
            f"| {row.get('wall', 0):.0f} s | {row['verdict']} | {said} |"
        )
    rows = [r for r in report["mutants"] if r["verdict"] in ("caught", "missed")]
    caught = sum(r["verdict"] == "caught" for r in rows)
    print(f"\ncaught {caught} of {len(rows)} mutants that built ({len(report['mutants'])} in all)")
    for name, run in report["baseline"].items():
        print(f"unpatched {name}: {run['verdict']} in {run['wall']:.0f} s")
    print(f"details: {root / 'mutants.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
