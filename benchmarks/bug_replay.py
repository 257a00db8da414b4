"""What the suite catches: DRA bugs that shipped, replayed on the releases that had them.

Reads ``benchmarks/shipped_bugs.toml``: per bug, the entry that must fail (a subtest's phase, or
a cluster step its objects break), a buggy release pair and a fixed one. Every distinct pair
runs once (``./run.sh pytest e2e_dra -k "upgrade_downgrade and (<its bugs' subtests>)"``, with
``E2E_DRA_KUBERNETES_VERSION`` and ``E2E_DRA_PREVIOUS_VERSION`` naming the pair, ``$ARTIFACTS`` a
folder of its own), then each bug is judged from the pairs' ``summary.json``:

- on the buggy pair, **caught** when its entry failed as the expected failure naming the bug
  (``xfailed``: the subtest declares it, and the failure showed its sign); **failed without its
  sign** when the entry failed some other way (something broke, but not as this bug does: no
  proof of catching it); **missed** when it passed (the run then fails too: a declared bug that
  does not show is a failure);
- on the fixed pair, **clean** when the entry passed, **false alarm** when it failed.

Prints a table with the suite's own failure line for each, and writes ``bug_replay.json``
under ``--root``. Figures, not assertions: nothing fails when a bug is missed. Needs what the
main job needs (root, the node runtime); the releases are built when missing (7-10 minutes each
on 2 cores). Usage: ``python benchmarks/bug_replay.py [--root DIR] [--only 139651 ...]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak import run_job, summaries  # the same job runner and reading of summary.json

REPO = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).resolve().parent / "shipped_bugs.toml"
SUITE = "upgrade-downgrade"
MESSAGE = 160  # characters of the suite's failure line in the table


@dataclass(frozen=True)
class Pair:
    """The releases of one run: upgraded from, upgraded to, and (kubelet-last) the older
    kubelet."""

    previous: str
    current: str
    kubelet: str | None = None

    def __str__(self) -> str:
        return f"{self.previous} -> {self.current}" + (
            f", kubelet {self.kubelet}" if self.kubelet else ""
        )

    @property
    def folder(self) -> str:
        return "_".join(v for v in (self.previous, self.current, self.kubelet) if v)

    def env(self) -> dict[str, str]:
        names = {"E2E_DRA_KUBERNETES_VERSION": self.current}
        names["E2E_DRA_PREVIOUS_VERSION"] = self.previous
        if self.kubelet:
            names["E2E_DRA_KUBELET_VERSION"] = self.kubelet
        return names


@dataclass(frozen=True)
class Bug:
    issue: int
    component: str
    subtest: str
    entry: str  # the summary's id of what must fail: "subtest/phase", or a cluster step
    buggy: Pair
    fixed: Pair
    suite: str = SUITE  # kubelet-last for a kubelet bug of an older node


def load(path: Path = TABLE) -> list[Bug]:
    """The table's bugs; a malformed entry fails with its index and what is missing."""
    bugs = []
    for index, item in enumerate(tomllib.loads(path.read_text()).get("bug", [])):
        try:
            bugs.append(
                Bug(
                    issue=int(item["issue"]),
                    component=str(item["component"]),
                    subtest=str(item["subtest"]),
                    entry=str(item["entry"]),
                    buggy=Pair(**item["buggy"]),
                    fixed=Pair(**item["fixed"]),
                    suite=str(item.get("suite", SUITE)),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SystemExit(f"{path}: bug #{index + 1}: {type(exc).__name__}: {exc}") from None
    return bugs


def selection(suite: str, subtests: set[str]) -> str:
    """The ``-k`` expression for ``suite``'s phases of ``subtests``."""
    return f"{suite.replace('-', '_')} and ({' or '.join(sorted(subtests))})"


def run_pair(suite: str, pair: Pair, subtests: set[str], root: Path) -> dict[str, Any]:
    """One run of ``suite`` on ``pair`` over ``subtests``; its exit status, wall time and
    results by id."""
    artifacts = root / f"{suite}_{pair.folder}"
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = ["./run.sh", "pytest", "e2e_dra", "-p", "no:cacheprovider"]
    argv += ["-k", selection(suite, subtests)]
    os.environ.pop("E2E_DRA_KUBELET_VERSION", None)
    os.environ.update(pair.env())
    print(f"{suite}, {pair}: {' '.join(argv)} (log: {artifacts / 'pytest.log'})", flush=True)
    started = time.monotonic()
    status = run_job(argv, artifacts)
    results: dict[str, dict[str, Any]] = {}
    for summary in summaries(artifacts):
        if summary.get("suite") == suite:
            results = {r["id"]: r for r in summary.get("results", [])}
    wall = time.monotonic() - started
    print(f"{suite}, {pair}: exit {status} after {wall:.0f} s", flush=True)
    return {"status": status, "wall": wall, "results": results}


def verdict(result: dict[str, Any] | None, issue: int, *, buggy: bool) -> str:
    """caught / missed on the buggy pair, clean / false alarm on the fixed one; else why not.

    An expected failure counts for the bug it names: one of another known bug proves nothing
    about this one (``masked by``)."""
    outcome = (result or {}).get("outcome", "not run")
    if outcome not in ("passed", "failed", "xfailed"):
        return f"not run ({outcome})"
    message = (result or {}).get("message", "")
    other = re.search(r"known Kubernetes bug (kubernetes#\d+)", message)
    if outcome == "xfailed" and other and other.group(1) != f"kubernetes#{issue}":
        return f"masked by {other.group(1)}"
    if buggy:
        if outcome == "passed":
            return "missed"
        named = outcome == "xfailed" and other is not None
        return "caught" if named else "failed without its sign"
    return "clean" if outcome == "passed" else "false alarm"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/tmp/bug-replay"))
    parser.add_argument("--only", type=int, nargs="*", help="issue numbers to replay")
    args = parser.parse_args(argv)
    bugs = [b for b in load() if not args.only or b.issue in args.only]
    pairs: dict[tuple[str, Pair], set[str]] = {}
    for bug in bugs:
        for pair in (bug.buggy, bug.fixed):
            pairs.setdefault((bug.suite, pair), set()).add(bug.subtest)
    runs = {key: run_pair(*key, subtests, args.root) for key, subtests in pairs.items()}

    rows = []
    for bug in bugs:
        row: dict[str, Any] = {"issue": bug.issue, "component": bug.component}
        row["entry"] = bug.entry if bug.suite == SUITE else f"{bug.suite} {bug.entry}"
        for side, pair in (("buggy", bug.buggy), ("fixed", bug.fixed)):
            result = runs[bug.suite, pair]["results"].get(bug.entry)
            row[side] = {
                "pair": str(pair),
                "verdict": verdict(result, bug.issue, buggy=side == "buggy"),
                "outcome": (result or {}).get("outcome"),
                "message": (result or {}).get("message", ""),
            }
        rows.append(row)
    (args.root / "bug_replay.json").write_text(json.dumps({"bugs": rows, "runs": {
        f"{s}, {p}": {"status": r["status"], "wall": round(r["wall"], 1)}
        for (s, p), r in runs.items()
    }}, indent=2))  # fmt: skip

    columns = ("bug", "component", "entry", "buggy pair", "verdict", "fixed pair", "verdict")
    print("\n| " + " | ".join((*columns, "the suite said (buggy pair)")) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for row in rows:
        said = row["buggy"]["message"].replace("|", "/")[:MESSAGE]
        print(
            f"| kubernetes#{row['issue']} | {row['component']} | {row['entry']} "
            f"| {row['buggy']['pair']} | {row['buggy']['verdict']} "
            f"| {row['fixed']['pair']} | {row['fixed']['verdict']} | {said} |"
        )
    caught = sum(r["buggy"]["verdict"] == "caught" for r in rows)
    alarms = sum(r["fixed"]["verdict"] == "false alarm" for r in rows)
    print(f"\ncaught {caught} of {len(rows)}, false alarms {alarms} of {len(rows)}")
    for (suite, pair), run in runs.items():
        print(f"run {suite}, {pair}: exit {run['status']}, {run['wall']:.0f} s")
    print(f"details: {args.root / 'bug_replay.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
