"""actionlint on the GitHub Actions example: it finds nothing in ``examples/ci/github-actions.yml``
and does find what a broken copy gets wrong (so that "nothing" means something).

In the real lane because it needs the network: actionlint is built from the Go module proxy
(``go install``, as ``e2e-dra provision`` builds its Go tools) with this host's Go and
``GOPROXY``, once per cache (``<e2e-dra cache>/runtime/actionlint-<version>/bin``), and reused
after that. Like every real-lane test it uses this host's caches: building it anew for every run
would cost each run the download and the build. Without Go or the proxy it is skipped, and fails
in CI (``CI=true``), saying how to get them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import missing

from e2e_dra._gotool import go_binary
from e2e_dra.errors import E2EDRAError
from e2e_dra.provision._gobuilds import GoTool, build

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
ACTIONLINT = GoTool(
    name="actionlint",
    version="v1.7.12",
    module="github.com/rhysd/actionlint",
    packages=("github.com/rhysd/actionlint/cmd/actionlint",),
    binaries=("actionlint",),
)
HOW_TO_INSTALL_GO = "install Go >= 1.26.6 (https://go.dev/doc/install) and put `go` on PATH"


@pytest.fixture(scope="session")
def actionlint() -> Path:
    try:
        go_binary()
    except E2EDRAError:
        missing(f"no Go to build actionlint {ACTIONLINT.version} with", HOW_TO_INSTALL_GO)
    try:
        bin_dir = build(ACTIONLINT)
    except E2EDRAError as exc:
        missing(
            f"cannot build actionlint {ACTIONLINT.version} ({exc})",
            f"it needs the Go module proxy (GOPROXY); {HOW_TO_INSTALL_GO}",
        )
    return bin_dir / "actionlint"


def _lint(actionlint: Path, workflow: Path) -> subprocess.CompletedProcess[str]:
    # shellcheck and pyflakes are left out on purpose: actionlint runs them when they are on
    # PATH, so a machine that has them would judge the file by more than one that has not.
    return subprocess.run(
        [str(actionlint), "-no-color", "-oneline", "-shellcheck=", "-pyflakes=", workflow.name],
        cwd=workflow.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actionlint_is_the_version_asked_for(actionlint: Path) -> None:
    done = subprocess.run(
        [str(actionlint), "-version"], capture_output=True, text=True, timeout=60, check=True
    )

    assert done.stdout.splitlines()[0] == ACTIONLINT.version


def test_actionlint_finds_nothing_in_the_workflow(actionlint: Path) -> None:
    done = _lint(actionlint, WORKFLOW)

    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize(
    ("good", "bad", "broken", "rule"),
    [
        ("    needs: suite\n", "    needs: suites\n", '"suites"', "job-needs"),
        ("SUITE: ${{ matrix.suite }}", "SUITE: ${{ matrix.suit }}", '"suit"', "expression"),
    ],
    ids=["needs-an-unknown-job", "reads-an-undefined-matrix-property"],
)
def test_actionlint_reports_a_broken_copy_of_the_workflow(
    actionlint: Path, tmp_path: Path, good: str, bad: str, broken: str, rule: str
) -> None:
    text = WORKFLOW.read_text()
    assert text.count(good) == 1  # the example still has what this test breaks
    copy = tmp_path / WORKFLOW.name
    copy.write_text(text.replace(good, bad))

    done = _lint(actionlint, copy)

    findings = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert len(findings) == 1, findings
    assert findings[0].startswith(f"{copy.name}:")
    assert broken in findings[0] and findings[0].endswith(f"[{rule}]")
