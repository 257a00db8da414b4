"""Go module versions compare as the go command compares them, not as PEP 440 would.

The expected answers are golang.org/x/mod/semver's (v0.43.0: ``semver.Compare`` run on every pair
of these versions agreed with ours on all 1089 pairs when this was written).
"""

from __future__ import annotations

import pytest
from module_proxy import ProxyTree

from e2e_dra.releases._gomodule import Substitute
from e2e_dra.releases._goproxy import ModuleProxy, served_substitutes
from e2e_dra.releases._gosemver import GoVersion, compare, parse

ASCENDING = [
    "v0.0.0-20230101000000-abcdef123456",  # pseudo-versions: pre-releases of v0.0.0, by time
    "v0.0.0-20240101000000-abcdef123456",
    "v0.0.0",
    "v1",  # v1.0.0
    "v1.2.0-rc.1",
    "v1.2",  # v1.2.0
    "v1.2.3-0.20240101000000-abcdef123456",  # a pseudo-version before any tag of v1.2.3
    "v1.2.3-1",
    "v1.2.3-1a",  # numeric identifiers sort below alphanumeric ones
    "v1.2.3-alpha",
    "v1.2.3-alpha.1",  # more identifiers sort after fewer
    "v1.2.3-alpha.beta",  # PEP 440 cannot even parse this one
    "v1.2.3-beta.2",
    "v1.2.3-pre.0.20240101000000-abcdef123456",  # PEP 440 reads "pre" as "rc"
    "v1.2.3-rc",
    "v1.2.3-rc.1",
    "v1.2.3-rc.2",
    "v1.2.3-rc.10",  # numerically, not as text
    "v1.2.3-x-y.1",
    "v1.2.3",
    "v1.2.4-0.20240101000000-abcdef123456",  # the pseudo-version after v1.2.3
    "v1.9.9",
    "v1.10.0",
    "v2.0.0",
    "v2.0.1+incompatible",
]


def v(text: str) -> GoVersion:
    parsed = parse(text)
    assert parsed is not None, text
    return parsed


@pytest.mark.parametrize("index", range(len(ASCENDING) - 1))
def test_versions_sort_as_go_sorts_them(index: int) -> None:
    lower, higher = ASCENDING[index], ASCENDING[index + 1]
    assert compare(lower, higher) == -1
    assert compare(higher, lower) == 1
    assert v(lower) < v(higher)


def test_build_metadata_takes_no_part_in_the_order() -> None:
    assert compare("v2.0.0+incompatible", "v2.0.0") == 0
    assert compare("v1.2.3+meta.1", "v1.2.3") == 0
    assert v("v2.0.0+incompatible") == v("v2.0.0")
    assert str(v("v2.0.0+incompatible")) == "v2.0.0+incompatible"  # the text is kept
    assert compare("v1", "v1.0.0") == 0 and compare("v1.2", "v1.2.0") == 0


@pytest.mark.parametrize(
    "text",
    ["1.2.3", "v01.2.3", "v1.2.3-01", "v1.2.3-", "v1.2-rc.1", "v", "", "v1.2.3.4", "latest"],
)
def test_what_go_does_not_take_for_a_version_sorts_below_every_version(text: str) -> None:
    assert parse(text) is None
    assert compare(text, "v0.0.0-20230101000000-abcdef123456") == -1
    assert compare("v0.0.0", text) == 1
    assert compare(text, "not-a-version") == 0


def test_pseudo_versions_are_told_from_tags() -> None:
    pseudo = [text for text in ASCENDING if v(text).is_pseudo]
    assert pseudo == [
        "v0.0.0-20230101000000-abcdef123456",
        "v0.0.0-20240101000000-abcdef123456",
        "v1.2.3-0.20240101000000-abcdef123456",
        "v1.2.3-pre.0.20240101000000-abcdef123456",
        "v1.2.4-0.20240101000000-abcdef123456",
    ]
    assert v("v1.2.3-rc.1").is_prerelease
    assert not v("v2.0.1+incompatible").is_prerelease


def test_the_substitute_for_a_refused_pseudo_version_is_the_newest_older_tag(
    proxy_tree: ProxyTree,
) -> None:
    """A pinned pseudo-version is a pre-release of the version after the last tag: v0.31.0-rc.0
    is not older than it (a pre-release that starts with a number sorts below "rc"), v0.30.2 is.
    PEP 440 could not read the pin at all, so such a module had no substitute."""
    module = "k8s.io/kube-openapi"
    pin = "v0.31.0-0.20250101000000-abcdef123456"
    proxy_tree.module_zips = {
        module: {pin: 403, "v0.31.0-rc.0": 200, "v0.30.2": 200, "v0.30.10-rc.1": 200},
    }

    substitutes, unserved = served_substitutes(proxy_tree.url, [(module, pin)])

    assert substitutes == [Substitute(module, pin, "v0.30.10-rc.1")]  # 10 > 2, as numbers
    assert unserved == []


def test_the_newest_served_older_version_skips_refused_ones_and_keeps_incompatible(
    proxy_tree: ProxyTree,
) -> None:
    module = "github.com/example/old"
    proxy_tree.module_zips = {
        module: {
            "v2.1.0+incompatible": 403,
            "v2.0.1+incompatible": 403,
            "v2.0.0+incompatible": 200,
            "v2.0.0-rc.10": 200,
            "v1.9.0": 200,
        }
    }
    proxy = ModuleProxy(module, proxy_tree.url)

    assert proxy.newest_served_below("v2.1.0+incompatible") == "v2.0.0+incompatible"
    assert proxy.newest_served_below("v2.0.0") == "v2.0.0-rc.10"  # +incompatible is the same
    assert proxy.newest_served_below("v1.9.0") is None
    assert proxy.newest_served_below("master") is None  # not a version: nothing is older
