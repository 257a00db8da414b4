"""Where Kubernetes server binaries come from: a release download, or a build from source."""

from e2e_dra.releases._checkout import Checkout, write_checkout
from e2e_dra.releases._download import DownloadSource
from e2e_dra.releases._gobuild import (
    BUILT_COMMANDS,
    CONTROL_PLANE_COMMANDS,
    NODE_COMMANDS,
    GoBuildSource,
)
from e2e_dra.releases._http import Budget
from e2e_dra.releases._programs import HELPER_MODULE, Program, kubernetes_program, module_program
from e2e_dra.releases._release import SERVER_COMPONENTS, Release, ReleaseSource
from e2e_dra.releases._select import (
    VersionsUnderTest,
    current_release,
    plan_versions,
    previous_release,
    release_source,
    resolve_release,
    versions_under_test,
)

__all__ = [
    "BUILT_COMMANDS",
    "CONTROL_PLANE_COMMANDS",
    "HELPER_MODULE",
    "NODE_COMMANDS",
    "SERVER_COMPONENTS",
    "Budget",
    "Checkout",
    "DownloadSource",
    "GoBuildSource",
    "Program",
    "Release",
    "ReleaseSource",
    "VersionsUnderTest",
    "current_release",
    "kubernetes_program",
    "module_program",
    "plan_versions",
    "previous_release",
    "release_source",
    "resolve_release",
    "versions_under_test",
    "write_checkout",
]
