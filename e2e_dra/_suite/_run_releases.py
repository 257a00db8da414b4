"""The releases a run tests: one release source for all its suites, and the versions under test.

Resolving them asks the module proxy (or the builds), which is why every suite of a run shares
one source (:func:`run_release_source`); what a suite gets also needs the Kubernetes source tree
its clusters are started from (:func:`resolved_versions`).
"""

from __future__ import annotations

import functools
import logging

from e2e_dra.errors import E2EDRAError
from e2e_dra.releases import (
    BUILT_COMMANDS,
    ReleaseSource,
    VersionsUnderTest,
    release_source,
    versions_under_test,
)
from e2e_dra.settings import Settings, settings

logger = logging.getLogger(__name__)


@functools.cache
def run_release_source(run_settings: Settings) -> ReleaseSource:
    """One release source for every suite of a run (``run_settings``: the run's settings).

    It remembers what the module proxy said exists, so the proxy is asked once per run, not
    about fourteen times per suite, and every suite of a run tests the same releases even if
    one appears in the middle of it. Each suite still takes its binaries from the cache, which
    verifies them every time.
    """
    del run_settings  # the key: another run (other settings) gets a source of its own
    return release_source()


def resolved_versions(commands: tuple[str, ...] | None) -> VersionsUnderTest:
    """The releases of this run (of the current one only ``commands``, when given), with the
    Kubernetes source tree the cluster is started from."""
    source = run_release_source(settings())
    versions = versions_under_test(commands or BUILT_COMMANDS, source)
    if versions.current.source_dir is None:
        raise E2EDRAError(
            f"no Kubernetes source tree for {versions.current.version}: "
            "set KUBERNETES_SOURCE_DIR (hack/local-up-cluster.sh comes from there)"
        )
    for release in (versions.previous, versions.current):
        for deviation in release.deviations:
            logger.info(f"Kubernetes {release.version} deviates from its release: {deviation}")
    return versions
