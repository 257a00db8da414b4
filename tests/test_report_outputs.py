"""The report's outputs for CI: ``metadata.json`` for Prow beside the page, and ``--link-base``
links that are right wherever ``-o`` writes the report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from synthetic_run import CURRENT, PREVIOUS, STABLE, upgrade_downgrade

from e2e_dra.cli import main
from e2e_dra.errors import EXIT_BAD_INPUT, InputError
from e2e_dra.report import summaries_of, write_report
from e2e_dra.report._links import under

BASE = "https://gcsweb.example/gcs/bucket/logs/job/123/artifacts"


def _hrefs(html: str) -> list[str]:
    return [h for h in re.findall(r'href="([^"]+)"', html) if not h.startswith("#")]


def test_metadata_json_says_pair_seed_verdict_and_commit_for_prow(tmp_path: Path) -> None:
    upgrade_downgrade(tmp_path / "default")
    upgrade_downgrade(tmp_path / "stable", *STABLE, failing=False)

    written = write_report(summaries_of([tmp_path / "default", tmp_path / "stable"]), tmp_path)

    assert written.metadata == tmp_path / "metadata.json"
    assert json.loads(written.metadata.read_text()) == {
        "e2e-dra-verdict": "failed",
        "e2e-dra-runs": "2",
        "e2e-dra-pair": f"{PREVIOUS} → {CURRENT}; {STABLE[0]} → {STABLE[1]}",
        "e2e-dra-seed": "7, 8",
        "e2e-dra-commit": "7405df1a2b3c",
    }


def test_metadata_json_keeps_the_jobs_own_keys_and_leaves_out_an_unknown_commit(
    tmp_path: Path,
) -> None:
    upgrade_downgrade(tmp_path)
    summary = tmp_path / "upgrade-downgrade" / "summary.json"
    doc = json.loads(summary.read_text())
    del doc["environment"]["e2e_dra"]  # an e2e-dra installed from a wheel: no commit
    summary.write_text(json.dumps(doc))
    (tmp_path / "metadata.json").write_text('{"job-version": "v1", "e2e-dra-commit": "old"}')

    write_report(summaries_of([tmp_path]), tmp_path)

    facts = json.loads((tmp_path / "metadata.json").read_text())
    assert facts["job-version"] == "v1" and "e2e-dra-commit" not in facts
    assert facts["e2e-dra-verdict"] == "failed" and all(isinstance(v, str) for v in facts.values())
    (tmp_path / "metadata.json").write_text("[not an object")
    write_report(summaries_of([tmp_path]), tmp_path)
    assert json.loads((tmp_path / "metadata.json").read_text())["e2e-dra-seed"] == "7"


@pytest.mark.parametrize(
    ("relative", "url"),
    [
        ("run/x.log", f"{BASE}/run/x.log"),
        ("../run/x.log", "https://gcsweb.example/gcs/bucket/logs/job/123/run/x.log"),
        ("../../a/./b/", "https://gcsweb.example/gcs/bucket/logs/job/a/b/"),
        ("../" * 7 + "x", None),  # above the host's root: no URL
    ],
)
def test_a_link_under_the_base_has_its_dot_segments_resolved(relative: str, url: str) -> None:
    assert under(BASE, relative) == url


def test_the_command_links_right_when_out_is_beside_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``artifacts/default`` and ``artifacts/stable`` reported into ``artifacts/report``,
    served at BASE/report: every link is BASE/<the file's path under artifacts>."""
    artifacts = tmp_path / "artifacts"
    upgrade_downgrade(artifacts / "default")
    upgrade_downgrade(artifacts / "stable", *STABLE, failing=False)
    out = artifacts / "report"
    args = ["report", str(artifacts / "default"), str(artifacts / "stable"), "-o", str(out)]

    assert main([*args, "--link-base", f"{BASE}/report"]) == 0

    printed = capsys.readouterr().out.splitlines()
    assert printed[-2:] == [str(out / "metadata.json"), str(out / "report.html")]
    links = _hrefs((out / "report.html").read_text())
    assert links and not any("/../" in link or "/./" in link for link in links)
    assert f"{BASE}/report/prr-evidence.md" in links
    into = [link for link in links if not link.endswith("prr-evidence.md")]
    assert any(link.startswith(f"{BASE}/default/upgrade-downgrade/") for link in into)
    for link in into:
        assert link.startswith(f"{BASE}/"), link
        target = artifacts / unquote(link.removeprefix(f"{BASE}/"))
        assert target.is_dir() if link.endswith("/") else target.is_file(), link


def test_a_link_base_the_runs_cannot_be_reached_under_is_refused_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade_downgrade(tmp_path / "logs" / "artifacts")
    out = tmp_path / "elsewhere" / "deep" / "out"

    runs = tmp_path / "logs" / "artifacts"

    with pytest.raises(InputError, match=r"is 1 folder\(s\) deep, but .* is 3 folder\(s\) above"):
        write_report(summaries_of([runs]), out, link_base="https://host/report")
    assert not out.exists()
    code = main(["report", str(runs), "-o", str(out), "--link-base", "https://h/r"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1 and "above the output folder" in err
