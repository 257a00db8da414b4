"""A release as a checkout (``e2e-dra source``) and a changed checkout built as the version under
test: only the commands its change touches, the others from its base release.

The trees here are tiny Kubernetes look-alikes (six commands, one staging module, the version
packages) built by the real go command and committed by real git; the Go module proxy is the
loopback one of module_proxy.py, with module downloads taken from local directories (the go
command's own download is tested in tests/real).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from environment import Environ
from module_proxy import ProxyTree

from e2e_dra._cache import CacheEntry
from e2e_dra._gotool import GoToolchain
from e2e_dra._paths import cache_root
from e2e_dra.errors import E2EDRAError, InputError, ReleaseError, UnbuildableRelease
from e2e_dra.releases import BUILT_COMMANDS, Release, versions_under_test, write_checkout
from e2e_dra.releases._checkout import recorded_deviations
from e2e_dra.releases._checkout_build import (
    MANIFEST,
    build_checkout,
    build_dir,
    changed_packages,
    git,
)
from e2e_dra.releases._gobuild import GoBuildSource

VERSION = "v1.38.0-beta.0"
STAGING = ("k8s.io/api", "k8s.io/component-base", "k8s.io/sample-controller")
_REQUIRES = "".join(f"\t{m} v0.0.0\n" for m in STAGING)
_REPLACES = "".join(f"\t{m} => ./staging/src/{m}\n" for m in STAGING)
GO_MOD = (
    f"module k8s.io/kubernetes\n\ngo 1.22\n\nrequire (\n{_REQUIRES})\n\nreplace (\n{_REPLACES})\n"
)
# What the commands link: the scheduler the API types, the kubelet its own package; all of them
# the version package, which prints what the build stamped.
IMPORTS = {
    "kubelet": ["k8s.io/kubernetes/pkg/kubelet"],
    "kube-scheduler": ["k8s.io/api/resource"],
}
WORKSPACE_STATUS = r"""#!/bin/bash
# as upstream's: the version git describe gives, -dirty for a changed tree
version=$(git describe --tags --match 'v*' --abbrev=14 HEAD)
version=$(sed -E 's/-([0-9]+)-g([0-9a-f]{14})$/.\1+\2/' <<<"$version")
if [[ -n "$(git status --porcelain)" ]]; then state=dirty; version+=-dirty; else state=clean; fi
echo "gitCommit $(git rev-parse HEAD)"
echo "gitTreeState $state"
echo "gitVersion $version"
echo "gitMajor 1"
echo "gitMinor 38"
echo "buildDate $(date -u ${SOURCE_DATE_EPOCH:+--date=@$SOURCE_DATE_EPOCH} +%Y-%m-%dT%H:%M:%SZ)"
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _release_module(root: Path) -> Path:
    """k8s.io/kubernetes as the proxy serves it: no staging/."""
    _write(root / "go.mod", GO_MOD)
    _write(root / ".gitignore", "/_output\n")
    _write(root / "hack" / "local-up-cluster.sh", "#!/bin/bash\n")
    _write(root / "hack" / "print-workspace-status.sh", WORKSPACE_STATUS)
    _write(root / "pkg" / "kubelet" / "kubelet.go", "package kubelet\n\nconst Name = 1\n")
    _write(root / "pkg" / "kubelet" / "kubelet_test.go", "package kubelet\n")
    for command in BUILT_COMMANDS:
        imports = ["k8s.io/component-base/version", *IMPORTS.get(command, [])]
        lines = "".join(f'\t_ "{i}"\n' for i in imports[1:])
        _write(
            root / "cmd" / command / "main.go",
            f'package main\n\nimport (\n\t"k8s.io/component-base/version"\n{lines})\n\n'
            "func main() { println(version.Get()) }\n",
        )
    return root


def _staging_module(root: Path, module: str) -> Path:
    _write(root / "go.mod", f"module {module}\n\ngo 1.22\n")
    if module == "k8s.io/api":
        _write(root / "resource" / "types.go", "package resource\n\nconst Kind = 1\n")
    if module == "k8s.io/component-base":
        _write(
            root / "version" / "version.go",
            'package version\n\nvar gitVersion = "v0.0.0-master"\n\n'
            "func Get() string { return gitVersion }\n",
        )
    return root


class _LocalModules(GoBuildSource):
    """Modules from directories instead of `go mod download`; the proxy's answers are real."""

    def __init__(self, modules: dict[str, Path], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.modules = modules

    def download(self, module_path: str, version: str, log: Path, toolchain: GoToolchain) -> Path:
        return self.modules[module_path]


@pytest.fixture
def release(proxy_tree: ProxyTree, tmp_path: Path) -> _LocalModules:
    proxy_tree.go_mod = GO_MOD
    proxy_tree.module_zips = {m: {"v0.38.0-beta.0": 200} for m in STAGING[:2]}
    modules = {m: _staging_module(tmp_path / "modules" / m, m) for m in STAGING}
    modules["k8s.io/kubernetes"] = _release_module(tmp_path / "modules" / "kubernetes")
    return _LocalModules(modules, proxy_url=proxy_tree.url, cache_dir=tmp_path / "cache")


@pytest.fixture
def checkout(release: _LocalModules, tmp_path: Path) -> Path:
    return write_checkout(release, VERSION, tmp_path / "tree").path


@pytest.fixture
def releases_cache(environ: Environ) -> Path:
    """The cache of built releases, as a run with ``E2E_DRA_RELEASE_SOURCE=build`` uses it."""
    for name in (
        "E2E_DRA_KUBERNETES_VERSION",
        "KUBERNETES_SERVER_BIN_DIR",
        "KUBE_GIT_VERSION_FILE",
    ):
        environ.unset(name)
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    return cache_root() / "kubernetes"


@pytest.fixture
def base_release(tmp_path: Path) -> tuple[Release, list[str]]:
    """The base release's own build, and who asked for it."""
    bin_dir = tmp_path / "base-bin"
    bin_dir.mkdir()
    for command in BUILT_COMMANDS:
        (bin_dir / command).write_text(f"#!/bin/sh\necho {command} {VERSION}\n")
        (bin_dir / command).chmod(0o755)
    asked: list[str] = []
    return Release(VERSION, bin_dir, None, "build", deviations=("a module swapped",)), asked


def _build(tree: Path, base: tuple[Release, list[str]]):
    release, asked = base

    def fetch(tag: str) -> Release:
        asked.append(tag)
        return release

    return build_checkout(tree, base_release=fetch)


def _stamped(binary: Path) -> str:
    done = subprocess.run([binary], capture_output=True, text=True, check=True)
    return done.stderr.strip()  # println writes to stderr


# --- e2e-dra source -------------------------------------------------------------------------


def test_a_release_is_written_as_one_tagged_commit_with_its_staging_modules(
    checkout: Path, release: _LocalModules
) -> None:
    assert (checkout / "staging/src/k8s.io/api/resource/types.go").is_file()
    assert (checkout / "staging/src/k8s.io/component-base/version/version.go").is_file()
    assert git(checkout, "status", "--porcelain") == ""  # go list changed nothing after it
    assert git(checkout, "describe", "--tags").strip() == VERSION
    assert git(checkout, "log", "--format=%an %aI").strip() == "e2e-dra 2026-09-23T17:07:00+00:00"
    # the one module the proxy refuses is no package of any command: a go.mod alone, said
    placeholder = checkout / "staging/src/k8s.io/sample-controller"
    assert [p.name for p in placeholder.iterdir()] == ["go.mod"]
    record = json.loads((checkout / ".e2e-dra/source.json").read_text())
    assert record["version"] == VERSION
    assert record["deviations"] == [
        "k8s.io/sample-controller v0.38.0-beta.0 (not served) => a go.mod without packages: "
        "no command links it (examples and test helpers)"
    ]
    assert recorded_deviations(checkout) == tuple(f"checkout: {d}" for d in record["deviations"])
    assert "k8s.io/sample-controller" in (checkout / ".e2e-dra/README.md").read_text()


def test_scripts_are_executable_as_in_a_checkout(checkout: Path) -> None:
    """Module zips keep no modes; upstream's test/e2e_dra runs hack/print-workspace-status.sh by
    path, and failed with "permission denied" on a tree written without them."""
    modes = {}
    for line in git(checkout, "ls-files", "-s").splitlines():
        meta, path = line.split("\t", 1)
        modes[path] = meta.split()[0]
    assert modes["hack/print-workspace-status.sh"] == "100755"
    assert modes["go.mod"] == "100644"
    assert os.access(checkout / "hack/print-workspace-status.sh", os.X_OK)


def test_the_same_release_makes_the_same_commit(
    release: _LocalModules, checkout: Path, tmp_path: Path
) -> None:
    again = write_checkout(release, VERSION, tmp_path / "again")
    assert again.commit == git(checkout, "rev-parse", "HEAD").strip()


def test_a_refused_staging_module_a_command_links_is_refused_and_nothing_is_left(
    release: _LocalModules, proxy_tree: ProxyTree, tmp_path: Path
) -> None:
    proxy_tree.module_zips["k8s.io/api"] = {"v0.38.0-beta.0": 403}
    with pytest.raises(
        UnbuildableRelease,
        match=r"no version of k8s\.io/api v0\.38\.0-beta\.0 \(imported by cmd/kube-scheduler\)",
    ):
        write_checkout(release, VERSION, tmp_path / "tree")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "modules"]


def test_a_directory_in_use_is_refused_before_anything_is_fetched(
    release: _LocalModules, proxy_tree: ProxyTree, tmp_path: Path
) -> None:
    used = tmp_path / "used"
    _write(used / "notes.txt", "mine\n")
    with pytest.raises(InputError, match="exists and is not an empty directory"):
        write_checkout(release, VERSION, used)
    assert (used / "notes.txt").read_text() == "mine\n"
    assert proxy_tree.requests == []


def test_a_damaged_record_is_one_line_naming_it(checkout: Path) -> None:
    (checkout / ".e2e-dra/source.json").write_text('{"deviations": "x"}')
    with pytest.raises(InputError, match=r"source.json is not the record e2e-dra source writes"):
        recorded_deviations(checkout)


# --- which commands a change touches ----------------------------------------------------------


def test_a_change_names_the_packages_of_its_files() -> None:
    assert changed_packages(
        [
            "pkg/kubelet/cm/dra/manager.go",
            "staging/src/k8s.io/dynamic-resource-allocation/structured/allocator.go",
            ".e2e-dra/standins/sigs.k8s.io/iptables-wrappers/pkg/iptables/adapter.go",
            "pkg/kubelet/cm/dra/manager_test.go",
            "main.go",
        ]
    ) == {
        "k8s.io/kubernetes/pkg/kubelet/cm/dra",
        "k8s.io/dynamic-resource-allocation/structured",
        "sigs.k8s.io/iptables-wrappers/pkg/iptables",
        "k8s.io/kubernetes",
    }
    assert changed_packages(["staging/src/k8s.io/api/go.mod", "README.md"]) is None
    assert changed_packages(["pkg/kubelet/kubelet_test.go"]) == set()


def test_an_unchanged_checkout_is_its_base_release(
    checkout: Path, base_release: tuple[Release, list[str]]
) -> None:
    built = _build(checkout, base_release)

    assert (built.version, built.base, built.changed_files, built.built) == (
        VERSION,
        VERSION,
        0,
        {},
    )
    for command in BUILT_COMMANDS:
        assert (built.bin_dir / command).resolve() == base_release[0].bin_dir / command
    assert base_release[1] == [VERSION]
    assert built.deviations == (
        "a module swapped",
        f"{', '.join(BUILT_COMMANDS)}: {VERSION}'s build, as the change touches none of their "
        "packages",
    )


def test_a_kubelet_change_builds_the_kubelet_alone_stamped_as_upstream_would(
    checkout: Path, base_release: tuple[Release, list[str]]
) -> None:
    _write(checkout / "pkg/kubelet/kubelet.go", "package kubelet\n\nconst Name = 2\n")

    built = _build(checkout, base_release)

    assert list(built.built) == ["kubelet"]
    kubelet = build_dir(checkout) / "kubelet"
    assert not kubelet.is_symlink()
    assert _stamped(kubelet) == f"{VERSION}-dirty"
    assert set(built.reused) == set(BUILT_COMMANDS) - {"kubelet"}
    manifest = json.loads((build_dir(checkout) / MANIFEST).read_text())
    assert (manifest["version"], manifest["changed_files"]) == (f"{VERSION}-dirty", 1)

    # committed: the version upstream gives a commit on a tag, still only the kubelet built
    git(checkout, "commit", "-qam", "kubelet: a change", env=_committer())
    built = _build(checkout, base_release)
    assert list(built.built) == ["kubelet"]
    commit = git(checkout, "rev-parse", "--short=14", "HEAD").strip()
    assert _stamped(kubelet) == f"{VERSION}.1+{commit}"


def test_a_staging_change_builds_every_command_that_links_it(
    checkout: Path, base_release: tuple[Release, list[str]]
) -> None:
    _write(checkout / "staging/src/k8s.io/api/resource/types.go", "package resource\n\nconst K=2\n")
    assert list(_build(checkout, base_release).built) == ["kube-scheduler"]
    # the version package: every command links it
    version_go = checkout / "staging/src/k8s.io/component-base/version/version.go"
    version_go.write_text(version_go.read_text() + "\nconst Other = 1\n")
    assert sorted(_build(checkout, base_release).built) == sorted(BUILT_COMMANDS)


def test_a_new_file_and_a_module_change_are_changes_too(
    checkout: Path, base_release: tuple[Release, list[str]]
) -> None:
    _write(checkout / "pkg/kubelet/new.go", "package kubelet\n\nconst New = 1\n")
    assert list(_build(checkout, base_release).built) == ["kubelet"]
    (checkout / "pkg/kubelet/new.go").unlink()
    (checkout / "go.mod").write_text((checkout / "go.mod").read_text() + "// edited\n")
    assert sorted(_build(checkout, base_release).built) == sorted(BUILT_COMMANDS)
    # back to the base: every command is the base release's again, none written through
    git(checkout, "checkout", "-q", "--", "go.mod")
    built = _build(checkout, base_release)
    assert built.built == {}
    assert (build_dir(checkout) / "kubelet").resolve() == base_release[0].bin_dir / "kubelet"
    assert "#!/bin/sh" in (base_release[0].bin_dir / "kubelet").read_text()


def test_a_test_change_builds_nothing(
    checkout: Path, base_release: tuple[Release, list[str]]
) -> None:
    _write(checkout / "pkg/kubelet/kubelet_test.go", "package kubelet\n\n// more\n")
    assert _build(checkout, base_release).built == {}


def test_without_its_base_release_every_command_is_built(
    checkout: Path, base_release: tuple[Release, list[str]]
) -> None:
    _write(checkout / "pkg/kubelet/kubelet.go", "package kubelet\n\nconst Name = 2\n")

    def unobtainable(tag: str) -> Release:
        raise ReleaseError(f"{tag} is not served")

    built = build_checkout(checkout, base_release=unobtainable)
    assert sorted(built.built) == sorted(BUILT_COMMANDS)
    assert built.deviations == ()


def test_a_change_that_does_not_compile_names_the_command_and_the_log(
    checkout: Path, base_release: tuple[Release, list[str]]
) -> None:
    _write(checkout / "pkg/kubelet/kubelet.go", "package kubelet\n\nconst Name = \n")
    with pytest.raises(E2EDRAError, match=r"building kubelet .*e2e-dra-build.log"):
        _build(checkout, base_release)


# --- the checkout as the version under test ---------------------------------------------------


def test_a_checkout_without_a_build_is_built_as_the_version_under_test(
    checkout: Path,
    proxy_tree: ProxyTree,
    environ: Environ,
    releases_cache: Path,
) -> None:
    for version in ("v1.37.2", VERSION):
        _fill_fake_release(releases_cache, version)
    environ.set("GOPROXY", proxy_tree.url)
    environ.set("KUBERNETES_SOURCE_DIR", str(checkout))
    _write(checkout / "pkg/kubelet/kubelet.go", "package kubelet\n\nconst Name = 2\n")

    versions = versions_under_test()

    current = versions.current
    assert (current.version, current.origin, versions.previous.version) == (
        f"{VERSION}-dirty",
        "local",
        "v1.37.2",
    )
    assert current.bin_dir == build_dir(checkout)
    assert _stamped(current.bin_dir / "kubelet") == f"{VERSION}-dirty"
    assert current.deviations[-1].startswith("kube-apiserver, kube-controller-manager, ")
    assert current.deviations[0].startswith("checkout: k8s.io/sample-controller")


def test_a_checkout_that_holds_a_build_of_its_own_is_used_as_it_is(
    checkout: Path, environ: Environ, proxy_tree: ProxyTree, releases_cache: Path
) -> None:
    made = build_dir(checkout)
    made.mkdir(parents=True)
    for command in BUILT_COMMANDS:
        (made / command).write_text("#!/bin/sh\necho 'Kubernetes v1.38.0-beta.0'\n")
        (made / command).chmod(0o755)
    _fill_fake_release(releases_cache, "v1.37.2")
    environ.set("GOPROXY", proxy_tree.url)
    environ.set("KUBERNETES_SOURCE_DIR", str(checkout))

    current = versions_under_test().current

    assert current.deviations == ()
    assert not (made / MANIFEST).exists()
    assert "echo" in (made / "kubelet").read_text()


def _fill_fake_release(cache_dir: Path, key: str) -> None:
    def populate(out: Path) -> dict[str, str]:
        (out / "bin").mkdir()
        for command in BUILT_COMMANDS:
            (out / "bin" / command).write_text("#!/bin/sh\n")
        _write(out / "src" / "hack" / "local-up-cluster.sh", "#!/bin/bash\n")
        return {"version": key}

    CacheEntry(cache_dir, key).fill(populate)


def _committer() -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": "dev",
        "GIT_AUTHOR_EMAIL": "dev@localhost",
        "GIT_COMMITTER_NAME": "dev",
        "GIT_COMMITTER_EMAIL": "dev@localhost",
    }


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("", "DIR is empty; name a new directory"),
        ("{used}", "exists and is not an empty directory; name a new directory"),
        ("{tmp}/missing/tree", "missing is not a directory; create it or name another DIR"),
    ],
)
def test_the_source_command_refuses_a_directory_it_must_not_write_in_one_line(
    given: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from e2e_dra.commands._main import main

    used = tmp_path / "used"
    _write(used / "notes.txt", "mine\n")
    status = main(["source", VERSION, given.format(used=used, tmp=tmp_path)])

    assert status == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0]
    assert (used / "notes.txt").read_text() == "mine\n"
