"""The settings: parsed once from the environment, one line per bad value, read nowhere else, and
documented by the README's environment table, which must list exactly them."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e_dra.errors import InputError
from e2e_dra.localupcluster._hostlock import DEFAULT_PATH
from e2e_dra.settings import Settings, seconds, settings, use

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {f.metadata["env"]: f for f in dataclasses.fields(Settings)}

READS_ALLOWED = {
    "e2e_dra/settings.py": "the one reader",
    "e2e_dra/pytest_plugin.py": "the edge of a pytest run: hands the environment to the reader",
    "e2e_dra/_gotool.py": "the go command's environment: ours, passed on",
    "e2e_dra/versions.py": "the workspace script's environment: ours, passed on",
    "e2e_dra/releases/_checkout_build.py": "git's environment: ours, passed on",
    "e2e_dra/provision/_apt.py": "apt-get's environment: ours, passed on",
    "e2e_dra/provision/_containerd.py": "containerd's environment: ours, passed on",
    "e2e_dra/provision/_kubelet.py": "local-up-cluster.sh's PATH and KUBELET_FLAGS, added to",
    "e2e_dra/supervise/_process.py": "every process we start inherits ours",
    "e2e_dra/localupcluster/_environment.py": "what those processes will see (KUBE_VERBOSE, PATH)",
}
"""Modules that may touch ``os.environ``, and why: none of them to decide a setting of ours."""


def readme_table() -> dict[str, tuple[str, str]]:
    """``{variable: (default, meaning)}`` from the README's environment table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Environment\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if not line.startswith("| `") or len(cells) != 3:
            continue
        names = re.findall(r"`([A-Z0-9_]+)`", cells[0])
        assert len(names) == 1, f"one variable per row: {line}"
        assert names[0] not in rows, f"{names[0]} is listed twice"
        rows[names[0]] = (cells[1], cells[2])
    return rows


def test_the_readme_lists_exactly_the_settings() -> None:
    assert sorted(readme_table()) == sorted(FIELDS)


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_the_readme_states_each_default_and_meaning_as_the_settings_do(name: str) -> None:
    default, meaning = readme_table()[name]
    field = FIELDS[name]
    assert meaning == field.metadata["meaning"]
    shown = field.metadata["shown"]
    if shown is not None:  # decided elsewhere: the README says where, in the settings' words
        assert default == shown
    else:  # a value: the README's reads back as the field's default
        assert re.fullmatch(r"`[^`]+`", default), f"{name}: a value, in backticks: {default}"
        assert field.metadata["parse"](default.strip("`")) == field.default


def test_every_field_has_a_default_or_says_where_it_comes_from() -> None:
    for name, field in FIELDS.items():
        assert (field.default is None) == (field.metadata["shown"] is not None) or isinstance(
            field.default, bool
        ), name
    assert Settings.from_environ({}) == Settings()


def test_values_are_parsed_and_blank_ones_keep_the_default(tmp_path: Path) -> None:
    given = Settings.from_environ(
        {
            "E2E_DRA_DOWNLOAD_DEADLINE": "30m",
            "E2E_DRA_DOWNLOAD_MIN_SPEED": "1M",
            "E2E_DRA_CACHE_DIR": str(tmp_path / "x" / ".." / "cache"),
            "E2E_DRA_KUBERNETES_VERSION": "  1.37 ",
            "CI": "TRUE",
            "ARTIFACTS": "   ",
            "E2E_DRA_RELEASE_SOURCE": "",
            "UNRELATED": "ignored",
        }
    )
    assert given.download_deadline == 1800.0
    assert given.download_min_speed == 1_000_000.0
    assert given.cache_dir == tmp_path / "cache"
    assert given.kubernetes_version == "1.37"
    assert given.ci is True
    assert given.artifacts == Path("/tmp/artifacts")
    assert given.release_source is None


def test_an_empty_gosumdb_is_a_value_as_go_reads_it() -> None:
    assert Settings.from_environ({"GOSUMDB": ""}).gosumdb == ""
    assert Settings.from_environ({}).gosumdb is None


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("E2E_DRA_DOWNLOAD_DEADLINE", "soon", "is not a duration"),
        ("E2E_DRA_DOWNLOAD_MIN_SPEED", "-5k", "is not a rate in bytes/s"),
        ("E2E_DRA_PROGRESS_EVERY", "10x", "is not a duration"),
        ("E2E_DRA_SLICE_REMOVAL_TIMEOUT", "two minutes", "is not a duration"),
        ("E2E_DRA_SLICE_REMOVAL_TIMEOUT", "-5", "is negative"),
        ("E2E_DRA_SLICE_REMOVAL_TIMEOUT", "nan", "is not a finite duration"),
        ("E2E_DRA_KEEP_RUNS", "three", "is not a whole number"),
        ("E2E_DRA_KEEP_RUNS", "-1", "is not a whole number"),
        ("E2E_DRA_KEEP_RUNS", "5000", "is more than 1000"),
        ("E2E_DRA_KEEP_RUNS", "²", "is not a whole number"),  # a digit to isdigit(), not to int()
        ("E2E_DRA_WORLD_SEED", "4²", "is not a whole number of up to 18 digits"),
        ("E2E_DRA_DOWNLOAD_DEADLINE", "1e10", "is longer than 1000000000 seconds"),
        ("GOTOOLCHAIN", "gofoo", "is not a Go toolchain"),
        ("KUBERNETES_SERVER_CACHE_DIR", "/tmp/a\nb", "holds a control character"),
        ("E2E_DRA_RELEASE_SOURCE", "mirror", "is not one of download, build"),
        ("KUBERNETES_RELEASE_URL", "ftp://x", "is not an http(s) URL of a release tree"),
        ("E2E_DRA_CACHE_DIR", "~nosuchuser/x", "is not a usable directory"),
        ("KUBECONFIG", "~nosuchuser/config", "is not a usable path"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(name: str, value: str, why: str) -> None:
    with pytest.raises(InputError) as caught:
        Settings.from_environ({name: value})
    message = str(caught.value)
    assert message.startswith(f"{name}={value!r} {why}")
    assert "\n" not in message


# -- issue 20: one grammar of durations, Go's forms as well as plain seconds -----------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("90", 90.0),
        ("1e9", 1e9),
        ("0", 0.0),
        ("90s", 90.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("1h2m3.5s", 3723.5),
        ("500ms", 0.5),
        ("1500us", 0.0015),
        ("15M", 900.0),
        (".5s", 0.5),
    ],
)
def test_a_duration_is_seconds_or_go_form(text: str, value: float) -> None:
    assert seconds(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["-5", "-1s", "nan", "inf", "-inf", "1h-5m", "1d", "", "s"])
def test_a_duration_that_cannot_be_waited_for_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        seconds(text)


def test_the_process_reads_its_environment_once(monkeypatch: pytest.MonkeyPatch) -> None:
    before = use(None)
    try:
        monkeypatch.setenv("ARTIFACTS", "/first")
        assert settings().artifacts == Path("/first")
        monkeypatch.setenv("ARTIFACTS", "/second")
        assert settings().artifacts == Path("/first")
        mine = dataclasses.replace(Settings(), artifacts=Path("/mine"))
        assert use(mine) is not None
        assert settings() is mine
    finally:
        use(before)


def test_the_engine_defaults_to_the_same_host_lock() -> None:
    """The engine reads no variable: its default and ours must be the same file."""
    assert Path(DEFAULT_PATH) == Settings().host_lock


def _environ_reads(path: Path) -> list[int]:
    """Lines that touch ``os.environ`` or call ``os.getenv``, or import either from ``os``."""
    names = {"environ", "environb", "getenv", "getenvb"}
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        as_attribute = (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in names
        )
        as_import = (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in names for a in node.names)
        )
        if as_attribute or as_import:
            lines.append(node.lineno)
    return lines


def test_no_module_reads_the_environment_but_the_settings() -> None:
    found: dict[str, list[int]] = {}
    for package in ("e2e_dra",):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = _environ_reads(path)
            if lines:
                found[str(path.relative_to(ROOT))] = lines
    unexpected = {module: lines for module, lines in found.items() if module not in READS_ALLOWED}
    assert unexpected == {}, "read the variable through e2e_dra.settings instead"
    assert set(READS_ALLOWED) <= set(found), "an allowance nobody uses: remove it"


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base: dict[str, Any] = {
        k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "E2E_DRA"))
    }
    return subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=60,
        check=False,
    )


def test_the_command_line_stops_on_a_bad_variable_with_one_line() -> None:
    proc = _cli("previous-minor", "v1.37.0", E2E_DRA_DOWNLOAD_DEADLINE="soon")
    assert proc.stdout.strip() == "1.36"  # a command that reads no setting is not stopped
    proc = _cli("versions", E2E_DRA_DOWNLOAD_DEADLINE="soon", E2E_DRA_RELEASE_SOURCE="download")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == [
        "e2e-dra: error: E2E_DRA_DOWNLOAD_DEADLINE='soon' is not a duration "
        "(e.g. 1800, 90s, 1m30s or 1h)"
    ]


def test_a_suite_run_reads_the_environment_at_its_start(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        "from e2e_dra.settings import settings\n"
        "def test_sees_it():\n"
        "    assert str(settings().artifacts) == '/from/the/run'\n"
    )
    before = settings()
    monkeypatch.setenv("ARTIFACTS", "/from/the/run")
    plugin = ("-p", "e2e_dra.pytest_plugin")  # as e2e_dra/conftest.py loads it for the suites
    pytester.runpytest(*plugin, "-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert settings() is before  # handed back when that run ended

    monkeypatch.setenv("E2E_DRA_PROGRESS_EVERY", "often")
    result = pytester.runpytest(*plugin, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "E2E_DRA_PROGRESS_EVERY='often' is not a duration" in result.stderr.str()
