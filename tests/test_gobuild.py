"""Building Kubernetes from the Go module proxy: everything short of the Go build itself.

The proxy is a plain file tree over HTTP, so a loopback server with the files of a few releases
stands in for it (as a loopback release tree stands in for dl.k8s.io). The real build is tested in
tests/real/test_gobuild_real.py.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

import pytest
from environment import Environ
from module_proxy import KUBERNETES_GO_MOD, ProxyTree

from e2e_dra._cache import CacheEntry
from e2e_dra._gotool import (
    BUILDINFO_MAGIC,
    BuildProgress,
    GoToolchain,
    binary_go_version,
    duration,
    go_binary,
    go_build,
    go_env,
    go_version,
    run_go,
    toolchain_for,
)
from e2e_dra.errors import E2EDRAError, InputError, ProvisionError, ReleaseError, VersionError
from e2e_dra.releases import release_source, versions_under_test
from e2e_dra.releases._gobuild import BUILT_COMMANDS, CONTROL_PLANE_COMMANDS, GoBuildSource
from e2e_dra.releases._gomodule import (
    Substitute,
    build_go_mod,
    go_directive,
    parse_replaces,
    parse_requires,
    staging_version,
)
from e2e_dra.releases._goproxy import (
    ModuleProxy,
    escape_module_path,
    proxy_url,
    served_substitutes,
)
from e2e_dra.releases._stamp import VERSION_DEFS_FILE, copy_source_tree, version_ldflags


def _fill_fake_release(cache_dir: Path, key: str) -> Path:
    """A complete cache entry as a finished build leaves it (file contents do not matter here)."""

    def populate(out: Path) -> dict[str, str]:
        (out / "bin").mkdir()
        for command in BUILT_COMMANDS:
            (out / "bin" / command).write_text("#!/bin/sh\n")
        (out / "src" / "hack").mkdir(parents=True)
        (out / "src" / "hack" / "local-up-cluster.sh").write_text("#!/bin/bash\n")
        return {"version": key}

    return CacheEntry(cache_dir, key).fill(populate)


# --- the build module ------------------------------------------------------------------------


def test_build_go_mod_requires_kubernetes_and_pins_staging_modules_to_v0():
    go_mod = build_go_mod(KUBERNETES_GO_MOD, "v1.36.5")

    assert "require k8s.io/kubernetes v1.36.5" in go_mod
    assert "\tk8s.io/api => k8s.io/api v0.36.5" in go_mod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.36.5" in go_mod
    assert (
        "\tk8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.36.5"
        in go_mod
    )
    assert "./staging" not in go_mod
    # a replace that points at another module is kept as it is: the build must see the same code
    assert "\tgithub.com/example/forked v1.2.3 => github.com/example/fork v1.2.4" in go_mod
    assert "go 1.26.0" in go_mod.splitlines()
    assert "godebug default=go1.26" in go_mod.splitlines()
    assert "cel-go" not in go_mod  # the dependency list comes from k8s.io/kubernetes itself
    assert go_mod.startswith("module ")


def test_build_go_mod_keeps_godebug_blocks_and_pre_release_staging_tags():
    text = KUBERNETES_GO_MOD.replace(
        "godebug default=go1.26",
        "godebug (\n\tdefault=go1.25\n\twinsymlink=0\n)\ntoolchain go1.25.3",
    )
    go_mod = build_go_mod(text, "v1.38.0-rc.0")

    assert "godebug (\n\tdefault=go1.25\n\twinsymlink=0\n)" in go_mod
    assert "toolchain go1.25.3" in go_mod
    assert "\tk8s.io/api => k8s.io/api v0.38.0-rc.0" in go_mod


def test_parse_replaces_reads_blocks_single_lines_and_ignores_comments():
    replaces = parse_replaces(KUBERNETES_GO_MOD)

    assert [r.old for r in replaces] == [
        "k8s.io/api",
        "k8s.io/client-go",
        "k8s.io/dynamic-resource-allocation",
        "github.com/example/forked v1.2.3",
    ]
    assert [r.is_local for r in replaces] == [True, True, True, False]
    assert replaces[1].new == "./staging/src/k8s.io/client-go"


def test_staging_version_and_a_go_mod_without_go_line_are_errors():
    assert staging_version("v1.37.2") == "v0.37.2"
    with pytest.raises(ReleaseError, match=r"v2\.0\.0"):
        staging_version("v2.0.0")
    with pytest.raises(ReleaseError, match="no `go` line"):
        build_go_mod("module k8s.io/kubernetes\n", "v1.37.2")


def test_version_ldflags_stamp_both_version_packages():
    flags = version_ldflags("v1.36.5", {"Time": "2026-09-23T17:07:00Z"})
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {package}.gitVersion=v1.36.5" in flags
        assert f"-X {package}.gitMajor=1" in flags
        assert f"-X {package}.gitMinor=36" in flags
        assert f"-X {package}.gitTreeState=clean" in flags
        assert f"-X {package}.buildDate=2026-09-23T17:07:00Z" in flags
    assert "gitCommit" not in flags  # unknown: better unset than wrong

    with_origin = version_ldflags("v1.36.5", {"Origin": {"Hash": "abc123"}})
    assert "-X k8s.io/component-base/version.gitCommit=abc123" in with_origin


# --- which versions the proxy has --------------------------------------------------------------


def test_resolve_probes_past_an_incomplete_list(proxy_tree: ProxyTree):
    proxy = ModuleProxy(base_url=proxy_tree.url)

    assert proxy.resolve("1.36") == "v1.36.5"
    assert "/k8s.io/kubernetes/@v/v1.36.7.info" in proxy_tree.requests  # two misses stop it
    assert "/k8s.io/kubernetes/@v/v1.36.8.info" not in proxy_tree.requests
    assert proxy.resolve("v1.35") == "v1.35.4"


def test_resolve_steps_over_one_refused_release(proxy_tree: ProxyTree):
    proxy_tree.served |= {"v1.36.7"}  # v1.36.6 refused, as a mirror here refuses v1.35.7

    assert ModuleProxy(base_url=proxy_tree.url).resolve("1.36") == "v1.36.7"


def test_resolve_falls_back_to_the_newest_pre_release(proxy_tree: ProxyTree):
    proxy = ModuleProxy(base_url=proxy_tree.url)

    assert proxy.resolve("1.38") == "v1.38.0-rc.0"  # rc beats the listed and probed betas
    assert proxy.resolve("1.39") == "v1.39.0-alpha.1"  # found by probing alone


def test_a_403_is_a_miss_too(proxy_tree: ProxyTree):
    proxy_tree.status_for_missing = 403  # what proxy.golang.org answers for some missing tags

    assert ModuleProxy(base_url=proxy_tree.url).resolve("1.36") == "v1.36.5"


def test_latest_stable_finds_an_unlisted_minor(proxy_tree: ProxyTree):
    assert ModuleProxy(base_url=proxy_tree.url).latest_stable() == "v1.37.2"

    proxy_tree.served |= {"v1.38.0", "v1.38.1"}
    assert ModuleProxy(base_url=proxy_tree.url).latest_stable() == "v1.38.1"


def test_a_minor_with_no_release_is_an_error_naming_it(proxy_tree: ProxyTree):
    with pytest.raises(ReleaseError, match=r"Kubernetes 1\.40 on the Go module proxy http://"):
        ModuleProxy(base_url=proxy_tree.url).resolve("1.40")
    with pytest.raises(VersionError, match=r"'1\.x'"):
        ModuleProxy(base_url=proxy_tree.url).resolve("1.x")


def test_an_unexpected_status_is_an_error_naming_the_url(proxy_tree: ProxyTree):
    proxy_tree.overrides["/k8s.io/kubernetes/@v/v1.36.4.info"] = 418

    with pytest.raises(ReleaseError, match=r"v1\.36\.4\.info failed: HTTP 418"):
        ModuleProxy(base_url=proxy_tree.url).resolve("1.36")


def test_proxy_url_is_the_first_proxy_of_goproxy(environ: Environ):
    environ.set("GOPROXY", "https://mirror.example/go/,https://proxy.golang.org,direct")
    assert proxy_url() == "https://mirror.example/go"
    environ.set("GOPROXY", "direct|https://late.example")
    assert proxy_url() == "https://late.example"
    for setting in ("direct", "off,https://never.example"):
        environ.set("GOPROXY", setting)
        with pytest.raises(InputError, match="GOPROXY="):  # bad input, not a failing server
            proxy_url()
    environ.set("GOPROXY", "http://a b/go,direct")
    with pytest.raises(InputError, match=r"GOPROXY='http://a b/go,direct'.* must be percent-enc"):
        proxy_url()


def test_module_paths_are_case_encoded():
    assert escape_module_path("github.com/Azure/go-AutoRest") == "github.com/!azure/go-!auto!rest"


# --- fetching: the cache and the errors ------------------------------------------------------


def test_fetch_of_a_version_the_proxy_lacks_names_it_and_leaves_no_entry(
    proxy_tree: ProxyTree, tmp_path: Path
):
    source = GoBuildSource(proxy_url=proxy_tree.url, cache_dir=tmp_path)

    with pytest.raises(
        ReleaseError, match=rf"v1\.99\.0 is not on the Go module proxy {proxy_tree.url}"
    ):
        source.fetch("1.99.0")
    assert not CacheEntry(tmp_path, "v1.99.0").path.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []


def test_fetch_rejects_builds_between_releases(tmp_path: Path):
    source = GoBuildSource(proxy_url="http://127.0.0.1:9", cache_dir=tmp_path)

    with pytest.raises(ReleaseError, match=r"v1\.37\.0-alpha\.0\.812\+0123abcd is a build between"):
        source.fetch("v1.37.0-alpha.0.812+0123abcd")
    with pytest.raises(VersionError, match="'latest'"):
        source.fetch("latest")


def test_a_cached_release_is_returned_without_asking_the_proxy(
    proxy_tree: ProxyTree, tmp_path: Path
):
    _fill_fake_release(tmp_path, "v1.36.5")
    proxy_tree.stop()  # any request would now fail
    source = GoBuildSource(proxy_url=proxy_tree.url, cache_dir=tmp_path)

    release = source.fetch("1.36.5")

    assert release.version == "v1.36.5"
    assert release.origin == "build"
    assert release.bin_dir == tmp_path / "v1.36.5" / "bin"
    assert release.source_dir == tmp_path / "v1.36.5" / "src"
    assert source.source_tree("v1.36.5") == release.source_dir
    assert proxy_tree.requests == []


def test_fetch_of_a_minor_builds_its_newest_release(proxy_tree: ProxyTree, tmp_path: Path):
    _fill_fake_release(tmp_path, "v1.36.5")

    release = GoBuildSource(proxy_url=proxy_tree.url, cache_dir=tmp_path).fetch("1.36")

    assert release.version == "v1.36.5"


def test_the_source_copy_is_writable_and_finds_its_binaries(tmp_path: Path):
    module = tmp_path / "mod" / "k8s.io" / "kubernetes@v1.36.5"
    (module / "hack" / "lib").mkdir(parents=True)
    (module / "hack" / "local-up-cluster.sh").write_text("#!/bin/bash\n")
    (module / "hack" / "lib" / "util.sh").write_text("# util\n")
    for path in (module / "hack" / "lib", module / "hack", module):  # as in the module cache
        for child in path.iterdir():
            child.chmod(0o555 if child.is_dir() else 0o444)
    module.chmod(0o555)
    entry = tmp_path / "entry"
    (entry / "bin").mkdir(parents=True)
    (entry / "bin" / "kubectl").write_text("kubectl")

    copy_source_tree(module, entry / "src", "v1.36.5", {}, link_bin=True)

    script = entry / "src" / "hack" / "local-up-cluster.sh"
    assert script.read_text() == "#!/bin/bash\n"
    assert os.stat(script).st_mode & stat.S_IWUSR
    (entry / "src" / "hack" / "lib" / "new-file").write_text("writable")  # dirs are writable too
    linked = next((entry / "src" / "_output" / "local" / "bin" / "linux").iterdir())
    assert (linked / "kubectl").read_text() == "kubectl"
    defs = (entry / "src" / VERSION_DEFS_FILE).read_text()
    assert "KUBE_GIT_VERSION='v1.36.5'" in defs
    assert "KUBE_GIT_MINOR='36'" in defs
    module.chmod(0o755)  # let tmp_path be cleaned up


# --- choosing a source and the versions under test ---------------------------------------------


@pytest.fixture
def isolated_env(environ: Environ, tmp_path: Path) -> Path:
    for name in (
        "E2E_DRA_RELEASE_SOURCE",
        "E2E_DRA_KUBERNETES_VERSION",
        "KUBERNETES_SOURCE_DIR",
        "KUBERNETES_SERVER_BIN_DIR",
    ):
        environ.unset(name)
    environ.set("E2E_DRA_CACHE_DIR", str(tmp_path / "cache"))
    environ.set("KUBERNETES_SERVER_CACHE_DIR", str(tmp_path / "downloads"))
    return tmp_path / "cache" / "kubernetes"


def test_release_source_is_forced_by_argument_or_environment(isolated_env: Path, environ: Environ):
    assert release_source("build").name == "build"
    assert release_source("download").name == "download"
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    assert release_source().name == "build"
    with pytest.raises(
        InputError, match=r"^E2E_DRA_RELEASE_SOURCE='mirror' is not one of download, build$"
    ):
        environ.set("E2E_DRA_RELEASE_SOURCE", "mirror")
    with pytest.raises(ReleaseError, match="release source='mirror'"):
        release_source("mirror")


def test_release_source_downloads_when_the_release_tree_answers(
    isolated_env: Path, environ: Environ
):
    tree = ProxyTree(listed=[], served=[])
    tree.overrides["/release/stable.txt"] = 200
    try:
        environ.set("KUBERNETES_RELEASE_URL", f"{tree.url}/release")
        assert release_source().name == "download"
        assert tree.requests == ["/release/stable.txt"]
    finally:
        tree.stop()
    environ.set("KUBERNETES_RELEASE_URL", f"{tree.url}/gone")  # a stopped server
    assert release_source().name == "build"


def test_versions_under_test_default_to_latest_and_its_previous_minor(
    isolated_env: Path, proxy_tree: ProxyTree, environ: Environ
):
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("GOPROXY", proxy_tree.url)
    _fill_fake_release(isolated_env, "v1.39.0-alpha.1")
    _fill_fake_release(isolated_env, "v1.38.0-rc.0")

    versions = versions_under_test()

    # the newest of all (1.39's alpha after 1.38's rc), and 1.38's newest pre-release before it
    assert versions.current.version == "v1.39.0-alpha.1"
    assert versions.previous.version == "v1.38.0-rc.0"
    assert versions.previous_minor == "1.38"


def test_the_suites_of_a_run_test_the_same_releases_and_ask_the_proxy_once(
    isolated_env: Path, proxy_tree: ProxyTree, environ: Environ
):
    from e2e_dra._suite._run_releases import run_release_source

    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("GOPROXY", proxy_tree.url)
    for key in ("v1.39.0-alpha.1", "v1.39.0-alpha.2", "v1.38.0-rc.0"):
        _fill_fake_release(isolated_env, key)
    run = environ.apply()

    first = versions_under_test(source=run_release_source(run))
    asked = len(proxy_tree.requests)
    proxy_tree.served.add("v1.39.0-alpha.2")  # released while the run goes on
    second = versions_under_test(source=run_release_source(run))

    assert first.current.version == second.current.version == "v1.39.0-alpha.1"
    assert len(proxy_tree.requests) == asked
    environ.set("E2E_DRA_KUBERNETES_VERSION", "latest")  # another run: it asks anew
    later = versions_under_test(source=run_release_source(environ.apply()))
    assert later.current.version == "v1.39.0-alpha.2"


def test_stable_pins_the_newest_stable_release_and_its_previous_minor(
    isolated_env: Path, proxy_tree: ProxyTree, environ: Environ
):
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("GOPROXY", proxy_tree.url)
    environ.set("E2E_DRA_KUBERNETES_VERSION", "stable")
    _fill_fake_release(isolated_env, "v1.37.2")
    _fill_fake_release(isolated_env, "v1.36.5")

    versions = versions_under_test()

    assert versions.current.version == "v1.37.2"
    assert versions.current.source_dir == isolated_env / "v1.37.2" / "src"
    assert versions.previous.version == "v1.36.5"
    assert versions.previous_minor == "1.36"
    assert versions.source == "build"


def test_a_pinned_version_replaces_the_newest_stable(
    isolated_env: Path, proxy_tree: ProxyTree, environ: Environ
):
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("GOPROXY", proxy_tree.url)
    environ.set("E2E_DRA_KUBERNETES_VERSION", "1.36")
    _fill_fake_release(isolated_env, "v1.36.5")
    _fill_fake_release(isolated_env, "v1.35.4")

    versions = versions_under_test()

    assert (versions.current.version, versions.previous.version) == ("v1.36.5", "v1.35.4")
    environ.set("E2E_DRA_KUBERNETES_VERSION", "newest")
    with pytest.raises(VersionError, match="E2E_DRA_KUBERNETES_VERSION 'newest' is not"):
        versions_under_test()


def test_a_source_checkout_overrides_current(
    isolated_env: Path, proxy_tree: ProxyTree, environ: Environ, tmp_path: Path
):
    checkout = _fill_fake_release(tmp_path / "checkout", "v1.37.2") / "src"
    bin_dir = checkout.parent / "bin"
    version_file = tmp_path / "version-defs"
    version_file.write_text("KUBE_GIT_VERSION='v1.37.0-alpha.0.812+0123abcd'\n")
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("GOPROXY", proxy_tree.url)
    environ.set("KUBERNETES_SOURCE_DIR", str(checkout))
    environ.set("KUBERNETES_SERVER_BIN_DIR", str(bin_dir))
    environ.set("KUBE_GIT_VERSION_FILE", str(version_file))
    _fill_fake_release(isolated_env, "v1.35.4")

    versions = versions_under_test()

    assert versions.current.origin == "local"
    assert versions.current.version == "v1.37.0-alpha.0.812+0123abcd"
    assert versions.current.bin_dir == bin_dir
    assert versions.current.source_dir == checkout
    # upstream's alpha.0 rule: master right after a branch cut is tested against minor - 2
    assert (versions.previous_minor, versions.previous.version) == ("1.35", "v1.35.4")

    environ.set("E2E_DRA_KUBERNETES_VERSION", "v1.36.5")
    with pytest.raises(E2EDRAError, match="contradicts KUBERNETES_SOURCE_DIR"):
        versions_under_test()


def test_local_directories_that_are_not_what_they_claim_are_named(
    isolated_env: Path, environ: Environ, tmp_path: Path
):
    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("KUBERNETES_SERVER_BIN_DIR", str(tmp_path / "missing"))
    with pytest.raises(
        E2EDRAError, match=r"KUBERNETES_SERVER_BIN_DIR=.*missing is not a directory"
    ):
        versions_under_test()
    environ.set("KUBERNETES_SERVER_BIN_DIR", str(tmp_path))
    with pytest.raises(E2EDRAError, match="holds no kube-apiserver"):
        versions_under_test()
    environ.unset("KUBERNETES_SERVER_BIN_DIR")
    environ.set("KUBERNETES_SOURCE_DIR", str(tmp_path))
    with pytest.raises(E2EDRAError, match="not a Kubernetes source tree"):
        versions_under_test()


# --- the release being built: latest, toolchains, refused modules -----------------------------


def test_latest_is_the_newest_release_pre_releases_included(proxy_tree: ProxyTree):
    proxy = ModuleProxy(base_url=proxy_tree.url)
    assert proxy.latest_stable() == "v1.37.2"
    # 1.38 is at rc.0 and master already tagged 1.39's alpha.1 (after the 1.38 branch cut)
    assert proxy.latest() == "v1.39.0-alpha.1"


def test_latest_without_pre_releases_is_the_newest_stable():
    tree = ProxyTree(listed=["v1.36.5", "v1.37.2"], served=[])
    try:
        assert ModuleProxy(base_url=tree.url).latest() == "v1.37.2"
    finally:
        tree.stop()


def test_a_refused_pinned_module_is_built_at_the_newest_older_served_version(
    proxy_tree: ProxyTree,
):
    smd = "sigs.k8s.io/structured-merge-diff/v7"
    proxy_tree.module_zips = {
        smd: {"v7.0.0-rc.1": 200, "v7.0.0": 200, "v7.0.1": 403},
        "github.com/blang/semver/v4": {"v4.0.0": 200},
        "example.com/gone": {"v1.0.0": 403},  # nothing older: left for the build to report
    }
    requires = [(smd, "v7.0.1"), ("github.com/blang/semver/v4", "v4.0.0")]
    requires.append(("example.com/gone", "v1.0.0"))

    substitutes, unserved = served_substitutes(proxy_tree.url, requires)

    assert substitutes == [Substitute(smd, "v7.0.1", "v7.0.0")]
    assert unserved == [("example.com/gone", "v1.0.0")]
    assert str(substitutes[0]) == f"{smd} v7.0.1 (not served) => v7.0.0"
    go_mod = build_go_mod(KUBERNETES_GO_MOD, "v1.38.0-beta.0", tuple(substitutes))
    assert f"\t{smd} v7.0.1 => {smd} v7.0.0" in go_mod
    assert "\tk8s.io/api => k8s.io/api v0.38.0-beta.0" in go_mod


def test_requires_and_go_version_are_read_from_the_release_go_mod():
    assert go_directive(KUBERNETES_GO_MOD) == "1.26.0"
    assert parse_requires(KUBERNETES_GO_MOD) == [
        ("github.com/blang/semver/v4", "v4.0.0"),
        ("k8s.io/api", "v0.0.0"),
        ("k8s.io/client-go", "v0.0.0"),
        ("github.com/google/cel-go", "v0.29.2"),
    ]


def test_the_installed_go_builds_what_it_is_new_enough_for(environ: Environ):
    environ.unset("GOTOOLCHAIN")
    chosen = toolchain_for("1.20.0", preferred="1.99.0")
    assert chosen.name == go_version()
    assert not chosen.fetched


@pytest.mark.parametrize(
    ("setting", "sumdb", "message"),
    [
        ("local", "", "GOTOOLCHAIN=local forbids fetching one"),
        ("", "off", "needs the checksum database, which GOSUMDB=off turns off"),
        ("go1.99.0", "off", "fetching Go toolchain go1.99.0 needs the checksum database"),
        ("gone", "", "GOTOOLCHAIN='gone' is not a Go toolchain"),
        ("local+path", "", "GOTOOLCHAIN=local\\+path forbids fetching one"),
    ],
)
def test_a_toolchain_that_cannot_be_had_is_one_clear_error(
    isolated_env: Path, environ: Environ, setting: str, sumdb: str, message: str
):
    with pytest.raises(E2EDRAError, match=message):
        environ.set("GOSUMDB", sumdb)
        environ.set("GOTOOLCHAIN", setting)  # a malformed one is refused as it is read
        toolchain_for("1.99.0")


def test_a_split_staging_module_is_assembled_from_the_packages_it_was_cut_from(tmp_path: Path):
    from e2e_dra.releases._standins import KNOWN_SPLITS, assemble

    split = KNOWN_SPLITS["k8s.io/apiextensions-api"]
    origin = tmp_path / "origin"
    v1 = origin / "pkg" / "apis" / "apiextensions" / "v1"
    v1.mkdir(parents=True)
    (v1 / "types.go").write_text(
        "package v1\n\nimport (\n"
        '\t_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"\n'
        '\t_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"\n'
        '\t_ "sigs.k8s.io/structured-merge-diff/v6/typed"\n)\n'
    )
    (v1 / "conversion.go").write_text("package v1\n")  # stayed in the origin module
    (v1 / "types_test.go").write_text("package v1\n")
    for package in split.packages[1:]:
        (origin / package).mkdir(parents=True)
        (origin / package / "doc.go").write_text("package x\n")
    dest = tmp_path / "standin"

    assemble(split, origin, dest, "1.27.0", "sigs.k8s.io/structured-merge-diff/v7")

    types = (dest / "pkg" / "apis" / "apiextensions" / "v1" / "types.go").read_text()
    assert '"k8s.io/apiextensions-api/pkg/apis/apiextensions/v1beta1"' in types
    # the internal package did not move: it stays an import of the origin module
    assert '"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"' in types
    assert '"sigs.k8s.io/structured-merge-diff/v7/typed"' in types
    assert not (dest / "pkg" / "apis" / "apiextensions" / "v1" / "conversion.go").exists()
    assert not (dest / "pkg" / "apis" / "apiextensions" / "v1" / "types_test.go").exists()
    shim = dest / "pkg" / "apis" / "apiextensions" / "v1" / "zz_standin.go"
    assert "var nullLiteral" in shim.read_text()
    assert (dest / "go.mod").read_text() == "module k8s.io/apiextensions-api\n\ngo 1.27.0\n"


def test_a_refused_module_the_release_imports_makes_it_unbuildable_at_once(
    proxy_tree: ProxyTree, tmp_path: Path
):
    proxy_tree.module_zips = {
        "github.com/blang/semver/v4": {"v4.0.0": 200},
        "github.com/google/cel-go": {"v0.29.2": 403},  # and nothing older
    }
    module_src = tmp_path / "src"
    (module_src / "pkg" / "kubelet").mkdir(parents=True)
    (module_src / "pkg" / "kubelet" / "a.go").write_text('import "github.com/google/cel-go/cel"\n')
    source = GoBuildSource(proxy_url=proxy_tree.url, cache_dir=tmp_path / "cache")

    with pytest.raises(ReleaseError) as raised:
        source._substitutes("v1.38.0-beta.0", module_src)

    assert str(raised.value) == (
        f"Kubernetes v1.38.0-beta.0 cannot be built from the Go module proxy {proxy_tree.url}: "
        "it serves no version of github.com/google/cel-go v0.29.2 (imported by pkg/kubelet). "
        "Build a checkout (KUBERNETES_SOURCE_DIR, see README: Testing your Kubernetes change), "
        "or use a release mirror or a module proxy that serves it"
    )
    # a control-plane build does not link the kubelet's own package
    assert source._substitutes("v1.38.0-beta.0", module_src, CONTROL_PLANE_COMMANDS) == []
    # imported by tests only: not a reason to give up
    (module_src / "pkg" / "kubelet" / "a.go").rename(module_src / "pkg" / "kubelet" / "a_test.go")
    assert source._substitutes("v1.38.0-beta.0", module_src) == []


class _Releases:
    """A release source whose latest release cannot be had (the protocol, nothing more)."""

    name = "fake"

    def __init__(self, unobtainable: str | None) -> None:
        self.why = unobtainable

    def latest(self) -> str:
        return "v1.38.0-beta.0"

    def latest_stable(self) -> str:
        return "v1.37.2"

    def resolve(self, minor: str) -> str:
        return {"1.38": "v1.38.0-beta.0", "1.37": "v1.37.2", "1.36": "v1.36.5"}[minor]

    def unobtainable(self, version: str, commands: tuple[str, ...]) -> str | None:
        if version != "v1.38.0-beta.0" or commands == CONTROL_PLANE_COMMANDS:
            return None  # its control plane can be built
        return self.why


def test_the_default_falls_back_to_stable_only_when_latest_cannot_be_had(
    isolated_env: Path, environ: Environ
):
    from e2e_dra.releases._select import chosen_release

    assert chosen_release(_Releases(None)) == ("v1.38.0-beta.0", "latest")
    assert chosen_release(_Releases("it refuses x")) == (
        "v1.37.2",
        "stable, as latest v1.38.0-beta.0 cannot be had here",
    )
    # control plane first needs only what can be built
    assert chosen_release(_Releases("it refuses x"), CONTROL_PLANE_COMMANDS)[0] == "v1.38.0-beta.0"
    for pin in ("latest", "1.38", "v1.38.0-beta.0"):  # a pin never falls back
        environ.set("E2E_DRA_KUBERNETES_VERSION", pin)
        assert chosen_release(_Releases("it refuses x")) == ("v1.38.0-beta.0", pin)


def test_run_go_logs_the_build_and_a_failure_names_its_last_lines(tmp_path: Path) -> None:
    """Builds run under the process supervisor: output to the log, the tail in the error."""
    go = tmp_path / "go"
    go.write_text('#!/bin/sh\necho "compiling $*"\necho "undefined: x" >&2\nexit "$EXIT"\n')
    go.chmod(0o755)
    toolchain = GoToolchain(name="go1.99.0", go=str(go))
    log = tmp_path / "logs" / "build.log"
    ok_env = dict(os.environ, EXIT="0")
    run_go(
        ["build", "./..."],
        cwd=tmp_path,
        what="building x",
        log=log,
        env=ok_env,
        toolchain=toolchain,
    )
    with pytest.raises(
        ProvisionError, match=r"building x failed \(go exited 2\); last lines of"
    ) as e:
        run_go(
            ["vet"],
            cwd=tmp_path,
            what="building x",
            log=log,
            env=dict(os.environ, EXIT="2"),
            toolchain=toolchain,
        )
    assert str(e.value).endswith("\n  compiling vet\n  undefined: x")
    text = log.read_text()
    assert "compiling build ./...\nundefined: x\n" in text and "exit status 2" in text


_FAKE_GO = """#!/bin/sh
# A stand-in for the go command: `go list -deps` names four packages, `go build -v` compiles
# three of them (one is in the build cache), with a quiet spell and an error line in between.
case "$1" in
list)
    [ -n "$LIST_FAILS" ] && { echo "go: cannot find main module" >&2; exit 1; }
    printf 'unsafe\\nexample.com/a\\nexample.com/b\\nexample.com/cmd\\n'
    ;;
build)
    echo "$*" > "$ARGS"
    echo "go: downloading example.com/a v1.0.0"
    echo example.com/a
    sleep 0.5
    echo example.com/b
    echo "# example.com/b"
    sleep 0.3
    echo example.com/cmd
    ;;
esac
"""


def _fake_go(tmp_path: Path) -> GoToolchain:
    go = tmp_path / "go"
    go.write_text(_FAKE_GO)
    go.chmod(0o755)
    return GoToolchain(name="go1.99.0", go=str(go))


def test_go_build_counts_its_packages_and_says_how_far_it_is_while_quiet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cold build of kube-apiserver once printed nothing for 11 minutes: now each package
    compiled reaches the progress bar, and a heartbeat line comes even when none appeared."""
    caplog.set_level(logging.INFO, logger="e2e_dra")
    args = tmp_path / "args"
    seen: list[BuildProgress] = []
    ended = go_build(
        ["./cmd"],
        output=tmp_path / "out" / "cmd",
        flags=["-ldflags", "-s -w"],
        cwd=tmp_path,
        what="building cmd",
        log=tmp_path / "build.log",
        env=dict(os.environ, ARGS=str(args)),
        toolchain=_fake_go(tmp_path),
        heartbeat=0.1,
        on_progress=seen.append,
    )

    output = str(tmp_path / "out" / "cmd")
    assert args.read_text().split() == [
        "build",
        "-v",
        "-ldflags",
        "-s",
        "-w",
        "-o",
        output,
        "./cmd",
    ]
    assert [(p.compiled, p.total, p.package) for p in seen] == [
        (1, 4, "example.com/a"),
        (2, 4, "example.com/b"),
        (3, 4, "example.com/cmd"),
    ]
    assert (ended.compiled, ended.total) == (3, 4)
    messages = [r.getMessage() for r in caplog.records]
    assert "building cmd: 4 packages to compile or take from the build cache" in messages
    heartbeats = [m for m in messages if m.startswith("still building cmd: ")]
    # during the quiet half second after the first package, with nothing new to say
    quiet = [m for m in heartbeats if m.startswith("still building cmd: 1/4 packages compiled")]
    assert len(quiet) >= 2, heartbeats
    assert quiet[0] == "still building cmd: 1/4 packages compiled, 0s, now example.com/a"
    assert "building cmd: 3 of 4 packages compiled, 1 from the build cache" in messages
    assert "example.com/b\n# example.com/b\n" in (tmp_path / "build.log").read_text()


def test_go_build_without_a_count_still_counts_what_it_compiles(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="e2e_dra")
    ended = go_build(
        ["."],
        output=tmp_path / "cmd",
        cwd=tmp_path,
        what="building cmd",
        env=dict(os.environ, ARGS=str(tmp_path / "args"), LIST_FAILS="1"),
        toolchain=_fake_go(tmp_path),
        heartbeat=0.1,
    )

    assert (ended.compiled, ended.total) == (3, None)  # "# example.com/b" is no package
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "building cmd: go list cannot count its packages (go: cannot find main module); "
        "building without a total" in messages
    )
    assert "still building cmd: 1 packages compiled, 0s, now example.com/a" in messages


def test_a_quiet_go_command_says_it_is_still_running(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="e2e_dra")
    go = tmp_path / "go"
    go.write_text("#!/bin/sh\nsleep 0.5\n")
    go.chmod(0o755)
    run_go(
        ["mod", "download", "example.com/a@v1.0.0"],
        cwd=tmp_path,
        what="downloading example.com/a@v1.0.0",
        toolchain=GoToolchain(name="go1.99.0", go=str(go)),
        heartbeat=0.1,
    )
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("still downloading example.com/a@v1.0.0: 0s") >= 2


def test_durations_read_as_go_prints_them() -> None:
    assert [duration(s) for s in (0, 42.9, 330, 3723)] == ["0s", "42s", "5m30s", "1h02m03s"]


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain")
def test_go_build_with_real_go_compiles_what_go_list_counts(tmp_path: Path) -> None:
    """The counting rests on two facts about the go command: `go list -deps` names what a build
    needs, and `go build -v` names each package it compiles, never one from the build cache."""
    module = tmp_path / "hello"
    module.mkdir()
    (module / "go.mod").write_text("module example.com/hello\n\ngo 1.22\n")
    (module / "main.go").write_text("package main\n\nfunc main() {}\n")
    env = go_env()  # its build cache is this test's own: cold
    cold = go_build(["."], output=tmp_path / "hello-bin", cwd=module, what="hello", env=env)
    warm = go_build(["."], output=tmp_path / "hello-bin", cwd=module, what="hello", env=env)

    assert cold.total is not None and cold.total > 10  # the runtime's packages
    assert cold.total - 1 <= cold.compiled <= cold.total  # "unsafe" is never compiled
    assert (warm.compiled, warm.total) == (0, cold.total)
    assert (tmp_path / "hello-bin").is_file()


# --- a package moved out of k8s.io/kubernetes (1.38's iptables client) ------------------------

IPTABLES_WRAPPERS = "sigs.k8s.io/iptables-wrappers"


def _previous_release_tree(root: Path) -> Path:
    """The previous release's k8s.io/kubernetes as far as the move needs it."""
    package = root / "pkg" / "util" / "iptables"
    (package / "testing").mkdir(parents=True)
    (package / "iptables.go").write_text("package iptables\n\nfunc New() {}\n")
    (package / "save_restore.go").write_text("package iptables\n")
    (package / "iptables_test.go").write_text("package iptables\n")
    (package / "testing" / "fake.go").write_text("package testing\n")
    return root


def _release_importing_the_moved_package(root: Path) -> Path:
    (root / "pkg" / "kubelet").mkdir(parents=True)
    (root / "pkg" / "kubelet" / "kubelet_network_linux.go").write_text(
        f'package kubelet\n\nimport utiliptables "{IPTABLES_WRAPPERS}/pkg/iptables"\n'
    )
    return root


def test_a_moved_package_is_assembled_from_the_previous_release_and_our_adapter(tmp_path: Path):
    from e2e_dra.releases._standins import KNOWN_MOVES, LEGACY_DIR, assemble_move

    move = KNOWN_MOVES[IPTABLES_WRAPPERS]
    dest = tmp_path / "standin"

    assemble_move(move, _previous_release_tree(tmp_path / "k8s"), dest, "1.27.0")

    legacy = dest / "pkg" / "iptables" / LEGACY_DIR
    assert sorted(p.name for p in legacy.iterdir()) == ["iptables.go", "save_restore.go"]
    assert (legacy / "iptables.go").read_text() == "package iptables\n\nfunc New() {}\n"
    adapter = (dest / "pkg" / "iptables" / "iptables_wrappers.go").read_text()
    assert f'legacy "{IPTABLES_WRAPPERS}/pkg/iptables/{LEGACY_DIR}"' in adapter
    assert "func NewBestEffort(_ context.Context, _ Mode) map[Protocol]Interface" in adapter
    assert (dest / "go.mod").read_text() == f"module {IPTABLES_WRAPPERS}\n\ngo 1.27.0\n"
    with pytest.raises(FileNotFoundError, match="pkg/util/iptables holds no Go package"):
        assemble_move(move, tmp_path / "empty", tmp_path / "other", "1.27.0")


def test_a_stand_in_for_a_required_module_replaces_every_version_of_it():
    text = KUBERNETES_GO_MOD.replace(
        "require github.com/google/cel-go", f"require {IPTABLES_WRAPPERS} v1.0.0\nrequire x"
    )
    go_mod = build_go_mod(text, "v1.38.0-beta.0", standins={IPTABLES_WRAPPERS: "../standins/x"})

    assert f"\t{IPTABLES_WRAPPERS} => ../standins/x" in go_mod.splitlines()
    assert "\tk8s.io/api => k8s.io/api v0.38.0-beta.0" in go_mod  # staging modules as before


class _SourceWithLocalModules(GoBuildSource):
    """Takes modules from a directory instead of `go mod download` (the go command is tested in
    tests/real); everything else, the proxy's answers included, is the real code."""

    def __init__(self, modules: dict[str, Path], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.modules = modules
        self.downloaded: list[str] = []

    def download(self, module_path: str, version: str, log: Path, toolchain: GoToolchain) -> Path:
        self.downloaded.append(f"{module_path}@{version}")
        return self.modules[module_path]


def _move_standins(source: GoBuildSource, module_src: Path, commands: tuple[str, ...], out: Path):
    go_mod = KUBERNETES_GO_MOD.replace(
        "go 1.26.0", f"go 1.27.0\n\nrequire {IPTABLES_WRAPPERS} v1.0.0"
    )
    toolchain = GoToolchain(name="go1.27.3", go="go")
    return source._move_standins(
        "v1.38.0-beta.0", go_mod, module_src, commands, out, out / "log", toolchain
    )


def test_a_refused_moved_module_gets_a_stand_in_reported_as_a_deviation(
    proxy_tree: ProxyTree, tmp_path: Path
):
    proxy_tree.module_zips = {IPTABLES_WRAPPERS: {"v1.0.0": 403}}
    module_src = _release_importing_the_moved_package(tmp_path / "src")
    source = _SourceWithLocalModules(
        {"k8s.io/kubernetes": _previous_release_tree(tmp_path / "k8s")},
        proxy_url=proxy_tree.url,
        cache_dir=tmp_path / "cache",
    )

    found = _move_standins(source, module_src, BUILT_COMMANDS, tmp_path / "standins")

    substitute, path = found[IPTABLES_WRAPPERS]
    assert source.downloaded == ["k8s.io/kubernetes@v1.37.2"]
    assert path == tmp_path / "standins" / IPTABLES_WRAPPERS
    assert (path / "go.mod").is_file()
    assert str(substitute) == (
        f"{IPTABLES_WRAPPERS} v1.0.0 (not served) => assembled from k8s.io/kubernetes v1.37.2 "
        "pkg/util/iptables, the package it was moved from, with e2e-dra's adapter to its API "
        "(both modes run the installed iptables, as 1.37 did)"
    )
    # and the release no longer counts as unbuildable for it
    assert source._substitutes("v1.38.0-beta.0", module_src) == []


def test_a_moved_module_the_proxy_serves_is_built_as_published(
    proxy_tree: ProxyTree, tmp_path: Path
):
    proxy_tree.module_zips = {IPTABLES_WRAPPERS: {"v1.0.0": 200}}
    module_src = _release_importing_the_moved_package(tmp_path / "src")
    source = _SourceWithLocalModules({}, proxy_url=proxy_tree.url, cache_dir=tmp_path / "cache")

    assert _move_standins(source, module_src, BUILT_COMMANDS, tmp_path / "standins") == {}
    assert source.downloaded == []
    assert f"HEAD /{IPTABLES_WRAPPERS}/@v/v1.0.0.zip" in proxy_tree.requests


def test_a_control_plane_build_assembles_no_stand_in_it_would_not_link(
    proxy_tree: ProxyTree, tmp_path: Path
):
    proxy_tree.module_zips = {IPTABLES_WRAPPERS: {"v1.0.0": 403}}
    module_src = _release_importing_the_moved_package(tmp_path / "src")
    source = _SourceWithLocalModules({}, proxy_url=proxy_tree.url, cache_dir=tmp_path / "cache")

    found = _move_standins(source, module_src, CONTROL_PLANE_COMMANDS, tmp_path / "standins")

    assert found == {}
    assert not any(IPTABLES_WRAPPERS in request for request in proxy_tree.requests)


# --- one resolver: `e2e-dra versions` says what the run will do ---------------------------------


def _apiserver_saying(bin_dir: Path, version: str) -> Path:
    bin_dir.mkdir(parents=True)
    apiserver = bin_dir / "kube-apiserver"
    apiserver.write_text(f"#!/bin/sh\necho 'Kubernetes {version}'\n")
    apiserver.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize(
    ("given", "current", "previous"),
    [
        ({}, "v1.39.0-alpha.1", "v1.38.0-rc.0"),
        ({"E2E_DRA_KUBERNETES_VERSION": "latest"}, "v1.39.0-alpha.1", "v1.38.0-rc.0"),
        ({"E2E_DRA_KUBERNETES_VERSION": "stable"}, "v1.37.2", "v1.36.5"),
        ({"E2E_DRA_KUBERNETES_VERSION": "1.37"}, "v1.37.2", "v1.36.5"),
        ({"E2E_DRA_KUBERNETES_VERSION": "v1.36.5"}, "v1.36.5", "v1.35.4"),
        ({"KUBE_GIT_VERSION_FILE": "v1.37.2"}, "v1.37.2", "v1.36.5"),
        ({"bin": "v1.37.2"}, "v1.37.2", "v1.36.5"),
        ({"bin": "v1.37.2", "E2E_DRA_KUBERNETES_VERSION": "1.37"}, "v1.37.2", "v1.36.5"),
        ({"bin": "v1.37.2", "E2E_DRA_KUBERNETES_VERSION": "latest"}, "v1.37.2", "v1.36.5"),
        ({"bin": "v1.37.2", "E2E_DRA_KUBERNETES_VERSION": "v1.37.2"}, "v1.37.2", "v1.36.5"),
        ({"bin": "v1.37.2", "KUBE_GIT_VERSION_FILE": "v1.38.0-rc.0"}, "v1.38.0-rc.0", "v1.37.2"),
        ({"source": "v1.37.2"}, "v1.37.2", "v1.36.5"),
        ({"source": "v1.37.2", "KUBE_GIT_VERSION_FILE": "v1.36.5"}, "v1.36.5", "v1.35.4"),
        ({"bin": "v1.37.2", "E2E_DRA_KUBERNETES_VERSION": "1.36"}, "contradicts", ""),
        ({"bin": "v1.37.2", "E2E_DRA_KUBERNETES_VERSION": "v1.37.1"}, "contradicts", ""),
        ({"KUBE_GIT_VERSION_FILE": "v1.38.0-alpha.0.812+0123abcd"}, "between releases", ""),
    ],
)
def test_versions_and_a_run_resolve_every_input_alike(
    isolated_env: Path,
    proxy_tree: ProxyTree,
    environ: Environ,
    tmp_path: Path,
    given: dict[str, str],
    current: str,
    previous: str,
):
    from e2e_dra.releases import plan_versions

    environ.set("E2E_DRA_RELEASE_SOURCE", "build")
    environ.set("GOPROXY", proxy_tree.url)
    for version in ("v1.39.0-alpha.1", "v1.38.0-rc.0", "v1.37.2", "v1.36.5", "v1.35.4"):
        _fill_fake_release(isolated_env, version)
    for name, value in given.items():
        if name == "bin":
            environ.set("KUBERNETES_SERVER_BIN_DIR", str(_apiserver_saying(tmp_path / "b", value)))
        elif name == "source":  # an unpacked tree with a build, no git: kube-apiserver tells
            tree = _fill_fake_release(tmp_path / "checkout", value) / "src"
            _apiserver_saying(tree / "_output" / "local" / "bin" / "linux" / "amd64", value)
            environ.set("KUBERNETES_SOURCE_DIR", str(tree))
        elif name == "KUBE_GIT_VERSION_FILE":
            (tmp_path / "version-defs").write_text(f"KUBE_GIT_VERSION='{value}'\n")
            environ.set(name, str(tmp_path / "version-defs"))
        else:
            environ.set(name, value)

    if not previous:  # both refuse it, with the same words
        with pytest.raises(E2EDRAError, match=current) as planned:
            plan_versions()
        with pytest.raises(E2EDRAError) as ran:
            versions_under_test()
        assert str(ran.value) == str(planned.value)
        return
    plan = plan_versions()
    run = versions_under_test()

    assert (plan.current, plan.previous) == (current, previous)
    assert (run.current.version, run.previous.version) == (current, previous)
    assert plan.current_origin.startswith(run.choice)


def test_whether_a_release_can_be_built_is_asked_of_the_proxy_before_any_download(
    proxy_tree: ProxyTree, tmp_path: Path
):
    module_src = _release_importing_the_moved_package(tmp_path / "src")
    (module_src / "hack").mkdir()
    (module_src / "hack" / "local-up-cluster.sh").write_text("#!/bin/bash\n")
    (module_src / "pkg" / "kubelet" / "cel.go").write_text(
        'import "github.com/google/cel-go/cel"\n'
    )
    proxy_tree.module_zips = {
        "github.com/blang/semver/v4": {"v4.0.0": 200},
        "github.com/google/cel-go": {"v0.29.2": 200},
        IPTABLES_WRAPPERS: {"v1.0.0": 403},  # refused, but it gets a stand-in
        **{m: {"v0.37.2": 200} for m in ("k8s.io/api", "k8s.io/client-go")},
        "k8s.io/dynamic-resource-allocation": {"v0.37.2": 200},
    }
    source = _SourceWithLocalModules(
        {"k8s.io/kubernetes": module_src}, proxy_url=proxy_tree.url, cache_dir=tmp_path / "cache"
    )

    assert source.unobtainable("v1.37.2") is None
    assert source.downloaded == []
    # a refused staging module that only tests and examples use needs no look at the source
    proxy_tree.go_mod = proxy_tree.go_mod.replace(
        "replace (\n", "replace (\n\tk8s.io/ktesting => ./staging/src/k8s.io/ktesting\n"
    )
    assert source.unobtainable("v1.37.2") is None
    assert "HEAD /k8s.io/ktesting/@v/v0.37.2.zip" in proxy_tree.requests
    assert source.downloaded == []

    proxy_tree.module_zips["github.com/google/cel-go"] = {"v0.29.2": 403}
    why = source.unobtainable("v1.37.2")

    assert source.downloaded == ["k8s.io/kubernetes@v1.37.2"]
    assert why is not None and "github.com/google/cel-go v0.29.2 (imported by pkg/kubelet)" in why


# --- the Go that built a binary ---------------------------------------------------------------


def _buildinfo(version: bytes, flags: int = 2) -> bytes:
    """A build-info header as Go >= 1.18 links it: magic, pointer size, flags, padding to 32
    bytes, then the version as a varint-prefixed string."""
    header = BUILDINFO_MAGIC + bytes([8, flags])
    return header.ljust(32, b"\0") + bytes([len(version)]) + version + b"\x00modinfo"


def test_the_go_of_a_binary_is_read_from_its_build_info(tmp_path: Path) -> None:
    binary = tmp_path / "kube-apiserver"
    binary.write_bytes(b"\x7fELF" + b"\0" * 5000 + _buildinfo(b"go1.27.3") + b"\0" * 100)
    assert binary_go_version(binary) == "go1.27.3"


@pytest.mark.parametrize(
    "content",
    [
        b"",  # empty: nothing to map
        b"#!/bin/sh\nexit 0\n",  # no build info
        b"\0" * 64 + _buildinfo(b"go1.17", flags=0),  # the old layout: version behind a pointer
        b"\0" * 64 + _buildinfo(b"not a go version"),
        b"\0" * 64 + BUILDINFO_MAGIC + bytes([8, 2]),  # cut short
    ],
    ids=["empty", "script", "pre-1.18", "garbage", "truncated"],
)
def test_a_binary_without_readable_build_info_has_no_go(tmp_path: Path, content: bytes) -> None:
    binary = tmp_path / "binary"
    binary.write_bytes(content)
    assert binary_go_version(binary) is None
    assert binary_go_version(tmp_path) is None  # a directory
    assert binary_go_version(tmp_path / "missing") is None


def test_the_installed_go_says_what_it_was_built_with() -> None:
    """A real Go binary: the go command itself, built by its own release."""
    assert binary_go_version(Path(go_binary()).resolve()) == go_version()
