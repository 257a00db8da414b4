"""Version logic: every form Kubernetes produces, the previous-minor rule, the version of a tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2e_dra.errors import E2EDRAError, VersionError
from e2e_dra.versions import (
    Minor,
    matches,
    parse_minor,
    parse_version,
    previous_minor,
    release_specifier,
    source_version,
)

PARSE_TABLE = [
    # text, (major, minor, patch, pre, pre_number, commits, commit, dirty), tag
    ("v1.36.3", (1, 36, 3, None, None, None, None, False), "v1.36.3"),
    ("1.36.3", (1, 36, 3, None, None, None, None, False), "v1.36.3"),
    (" v1.36.3\n", (1, 36, 3, None, None, None, None, False), "v1.36.3"),
    ("v1.37.0-alpha.0", (1, 37, 0, "alpha", 0, None, None, False), "v1.37.0-alpha.0"),
    ("v1.37.0-alpha.3", (1, 37, 0, "alpha", 3, None, None, False), "v1.37.0-alpha.3"),
    ("v1.37.0-beta.1", (1, 37, 0, "beta", 1, None, None, False), "v1.37.0-beta.1"),
    ("v1.37.0-rc.0", (1, 37, 0, "rc", 0, None, None, False), "v1.37.0-rc.0"),
    (
        "v1.37.0-alpha.0.812+0123abcd",
        (1, 37, 0, "alpha", 0, 812, "0123abcd", False),
        "v1.37.0-alpha.0",
    ),
    (
        "v1.37.0-alpha.0.812+0123abcdef0123-dirty",
        (1, 37, 0, "alpha", 0, 812, "0123abcdef0123", True),
        "v1.37.0-alpha.0",
    ),
    ("v1.37.0-rc.1.5+0123abcd", (1, 37, 0, "rc", 1, 5, "0123abcd", False), "v1.37.0-rc.1"),
    ("v1.36.3-7+0123abcdef0123", (1, 36, 3, None, None, 7, "0123abcdef0123", False), "v1.36.3"),
    ("v1.36.3-dirty", (1, 36, 3, None, None, None, None, True), "v1.36.3"),
    ("v1.36.3-beta.2-dirty", (1, 36, 3, "beta", 2, None, None, True), "v1.36.3-beta.2"),
    # raw `git describe` output, before hack/lib/version.sh rewrites it
    (
        "v1.37.0-alpha.0-812-g0123abcdef0123",
        (1, 37, 0, "alpha", 0, 812, "0123abcdef0123", False),
        "v1.37.0-alpha.0",
    ),
]


@pytest.mark.parametrize(("text", "fields", "tag"), PARSE_TABLE, ids=[r[0] for r in PARSE_TABLE])
def test_parse_version_reads_every_kubernetes_form(text: str, fields: tuple, tag: str) -> None:
    parsed = parse_version(text)
    got = (
        parsed.major,
        parsed.minor,
        parsed.patch,
        parsed.pre,
        parsed.pre_number,
        parsed.commits,
        parsed.commit,
        parsed.dirty,
    )
    assert got == fields
    assert parsed.tag == tag
    assert str(parsed) == text.strip()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "v1.36",
        "1",
        "latest",
        "v1.36.3.4",
        "v1.36.x",
        "v1.37.0-gamma.1",
        "v1.37.0-alpha",
        "v1.37.0-alpha.0.812",
        "v1.37.0-alpha.0.812+XYZ",
        "vv1.36.3",
        "v1.36.3 extra",
    ],
)
def test_parse_version_rejects_what_kubernetes_never_produces(text: str) -> None:
    with pytest.raises(VersionError) as caught:
        parse_version(text)
    assert repr(text) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_version_is_also_an_e2e_dra_error_and_a_value_error() -> None:
    with pytest.raises(E2EDRAError):
        parse_version("nope")
    with pytest.raises(ValueError):
        parse_version("nope")


def test_versions_order_like_releases() -> None:
    ordered = [
        "v1.35.9",
        "v1.36.0-alpha.0",
        "v1.36.0-alpha.0.5+0123abcd",
        "v1.36.0-alpha.2",
        "v1.36.0-beta.0",
        "v1.36.0-rc.0",
        "v1.36.0-rc.1",
        "v1.36.0",
        "v1.36.1",
        "v1.36.10",
    ]
    shuffled = list(reversed(ordered))
    assert [str(v) for v in sorted(parse_version(v) for v in shuffled)] == ordered
    assert parse_version("1.36.3") == parse_version("v1.36.3")
    assert parse_version("v1.36.3").is_stable
    assert not parse_version("v1.36.3-dirty").is_stable
    assert not parse_version("v1.36.0-rc.1").is_stable
    assert parse_version("v1.36.0-rc.1").is_release


PREVIOUS_TABLE = [
    ("v1.36.3", "1.35"),
    ("1.36.0", "1.35"),
    ("v1.36.0-rc.0", "1.35"),
    ("v1.37.0-beta.2", "1.36"),
    ("v1.37.0-alpha.1", "1.36"),
    ("v1.37.0-alpha.1.40+0123abcd", "1.36"),
    ("v1.37.0-alpha.10", "1.36"),
    # the alpha.0 rule, with every git-describe suffix after it
    ("v1.37.0-alpha.0", "1.35"),
    ("v1.37.0-alpha.0.812+0123abcd", "1.35"),
    ("v1.37.0-alpha.0.812+0123abcd-dirty", "1.35"),
    ("v1.37.0-alpha.0-dirty", "1.35"),
    ("v1.37.0-alpha.0-812-g0123abcdef0123", "1.35"),
    ("v1.1.0", "1.0"),
    ("v1.2.0-alpha.0", "1.0"),
    # a bare release line goes back one
    ("1.36", "1.35"),
    ("v1.36", "1.35"),
]


@pytest.mark.parametrize(
    ("version", "expected"), PREVIOUS_TABLE, ids=[r[0] for r in PREVIOUS_TABLE]
)
def test_previous_minor(version: str, expected: str) -> None:
    assert str(previous_minor(version)) == expected
    if version.count(".") == 2 or "-" in version:
        assert str(previous_minor(parse_version(version))) == expected


@pytest.mark.parametrize("version", ["v1.0.0", "v1.0.5-rc.1", "v1.1.0-alpha.0", "1.0"])
def test_previous_minor_refuses_when_there_is_none(version: str) -> None:
    with pytest.raises(VersionError, match="no previous minor") as caught:
        previous_minor(version)
    assert repr(version) in str(caught.value)


def test_previous_minor_names_a_malformed_input() -> None:
    with pytest.raises(VersionError) as caught:
        previous_minor("v1.x")
    assert "'v1.x'" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"), [("1.36", Minor(1, 36)), ("v1.36", Minor(1, 36)), (" 1.9 ", Minor(1, 9))]
)
def test_parse_minor(text: str, expected: Minor) -> None:
    assert parse_minor(text) == expected
    assert str(parse_minor(text)) == f"{expected.major}.{expected.minor}"


@pytest.mark.parametrize("text", ["1", "1.36.3", "one.two", "", "1.36."])
def test_parse_minor_rejects(text: str) -> None:
    with pytest.raises(VersionError, match=r"MAJOR\.MINOR"):
        parse_minor(text)


# -- the version of the tree under test ----------------------------------------------------------


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _git_tree(root: Path, git_version: str) -> Path:
    """A source tree whose workspace-status script reports ``git_version`` like the real one."""
    (root / ".git").mkdir(parents=True)
    _executable(
        root / "hack" / "print-workspace-status.sh",
        "#!/bin/sh\n"
        "echo STABLE_BUILD_GIT_COMMIT 0123abcd\n"
        f"echo STABLE_DOCKER_TAG {git_version.replace('+', '_')}\n"
        f"echo gitVersion {git_version}\n"
        "echo gitMajor 1\n",
    )
    return root


def _apiserver(bin_dir: Path, output: str) -> Path:
    _executable(bin_dir / "kube-apiserver", f"#!/bin/sh\necho '{output}'\n")
    return bin_dir


def test_source_version_from_the_workspace_status_of_a_git_tree(tmp_path: Path) -> None:
    tree = _git_tree(tmp_path / "k8s", "v1.37.0-alpha.0.812+0123abcdef0123")
    bin_dir = _apiserver(tmp_path / "bin", "Kubernetes v1.30.0")
    got = source_version(tree, bin_dir)
    assert got.text == "v1.37.0-alpha.0.812+0123abcdef0123"


def test_source_version_from_kube_git_version_file(tmp_path: Path) -> None:
    version_file = tmp_path / "version.env"
    version_file.write_text(
        "KUBE_GIT_COMMIT='0123abcd'\nKUBE_GIT_TREE_STATE='clean'\n"
        "KUBE_GIT_VERSION='v1.36.3'\nKUBE_GIT_MAJOR='1'\nKUBE_GIT_MINOR='36'\n"
    )
    tree_without_git = tmp_path / "module-zip"
    (tree_without_git / "hack").mkdir(parents=True)
    bin_dir = _apiserver(tmp_path / "bin", "Kubernetes v1.30.0")
    got = source_version(tree_without_git, bin_dir, version_file=version_file)
    assert got.text == "v1.36.3"


def test_source_version_from_the_apiserver_binary(tmp_path: Path) -> None:
    bin_dir = _apiserver(tmp_path / "bin", "Kubernetes v1.36.3-7+0123abcdef0123")
    assert source_version(None, bin_dir).text == "v1.36.3-7+0123abcdef0123"


def test_source_version_names_what_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(VersionError) as caught:
        source_version(tmp_path / "src", tmp_path / "bin")
    message = str(caught.value)
    assert "print-workspace-status.sh" in message
    assert "KUBE_GIT_VERSION_FILE" in message
    assert str(tmp_path / "bin" / "kube-apiserver") in message


def test_source_version_reports_a_binary_that_prints_something_else(tmp_path: Path) -> None:
    bin_dir = _apiserver(tmp_path / "bin", "hello")
    with pytest.raises(VersionError, match="'hello'"):
        source_version(None, bin_dir)


def test_source_version_reports_a_failing_workspace_script(tmp_path: Path) -> None:
    tree = tmp_path / "k8s"
    (tree / ".git").mkdir(parents=True)
    _executable(
        tree / "hack" / "print-workspace-status.sh",
        "#!/bin/sh\necho 'fatal: no tags' >&2\nexit 3\n",
    )
    with pytest.raises(VersionError, match=r"exit 3\): fatal: no tags"):
        source_version(tree, None)


def test_a_bad_version_a_checkout_prints_is_said_as_its_scripts(tmp_path: Path) -> None:
    tree = _git_tree(tmp_path / "k8s", "vnext")
    with pytest.raises(VersionError) as caught:
        source_version(tree, None)
    message = str(caught.value)
    assert message.startswith(
        f"{tree}/hack/print-workspace-status.sh printed gitVersion 'vnext', "
        "which is no version we can use: "
    )
    assert "git describe" in message


def test_source_version_file_without_the_variable(tmp_path: Path) -> None:
    version_file = tmp_path / "version.env"
    version_file.write_text("KUBE_GIT_MAJOR='1'\n")
    with pytest.raises(VersionError, match="sets no KUBE_GIT_VERSION"):
        source_version(None, None, version_file=version_file)


def test_the_workspace_script_is_handed_the_same_version_file(tmp_path: Path) -> None:
    """hack/lib/version.sh reads KUBE_GIT_VERSION_FILE itself: it sees the one we were given."""
    tree = tmp_path / "k8s"
    (tree / ".git").mkdir(parents=True)
    _executable(
        tree / "hack" / "print-workspace-status.sh",
        '#!/bin/sh\n. "$KUBE_GIT_VERSION_FILE"\necho gitVersion "$KUBE_GIT_VERSION"\n',
    )
    version_file = tmp_path / "version.env"
    version_file.write_text("KUBE_GIT_VERSION='v1.37.1-rc.0.5+0123abcd'\n")
    assert source_version(tree, None, version_file=version_file).text == "v1.37.1-rc.0.5+0123abcd"


# -- issue 20: no number is read other than as written; a CI build keeps its name ------------------


@pytest.mark.parametrize(
    "text", ["v01.37.2", "v1.037.2", "v1.37.02", "v1.37.0-rc.01", "v1.37.0-rc.1.012+abcdef0"]
)
def test_a_leading_zero_is_refused_and_said(text: str) -> None:
    with pytest.raises(VersionError, match="leading zero"):
        parse_version(text)


@pytest.mark.parametrize("text", ["01.36", "1.036", "v1.00"])
def test_a_minor_with_a_leading_zero_is_refused_and_said(text: str) -> None:
    with pytest.raises(VersionError, match="leading zero"):
        parse_minor(text)


@pytest.mark.parametrize(
    "text", ["v0.1.0", "v1.0.0", "v1.36.10", "v1.37.0-rc.0", "v1.7.0-0+abcdef0", "1.0", "v0.30"]
)
def test_zero_itself_is_no_leading_zero(text: str) -> None:
    parse = parse_minor if text.count(".") == 1 else parse_version
    assert parse(text)


@pytest.mark.parametrize(
    ("text", "name", "ci"),
    [
        ("v1.38.0-alpha.0.812+0123abcd", "v1.38.0-alpha.0.812+0123abcd", True),
        ("1.36.5-3+abcdef0", "v1.36.5-3+abcdef0", True),
        ("v1.36.5", "v1.36.5", False),
        ("1.36.5", "v1.36.5", False),
        ("v1.36.5-3-gabcdef0", "v1.36.5-3-gabcdef0", False),
        ("v1.36.5-3+abcdef0-dirty", "v1.36.5-3+abcdef0-dirty", False),
    ],
)
def test_a_ci_build_is_published_under_its_whole_version(text: str, name: str, ci: bool) -> None:
    version = parse_version(text)
    assert version.is_ci_build is ci
    assert version.published_name == name


def test_a_specifier_may_name_alternatives_for_a_fix_picked_into_several_release_lines() -> None:
    fixed_later = "<1.34.12 || >=1.35.0,<1.35.10 || >=1.36.0,<1.36.4"
    assert all(matches(fixed_later, v) for v in ("v1.33.13", "v1.34.11", "v1.35.8", "v1.36.3"))
    assert not any(matches(fixed_later, v) for v in ("v1.34.12", "v1.35.10", "v1.36.4", "v1.37.2"))
    assert matches("", "v1.38.0-beta.0")
    with pytest.raises(VersionError, match=re.escape("not a release specifier: '>=1.34 || '")):
        release_specifier(">=1.34 || ")
