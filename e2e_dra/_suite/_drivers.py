"""Real DRA drivers in an upgrade suite: every driver of ``E2E_DRA_DRIVERS`` goes through the
suite's upgrade -> downgrade -> re-upgrade as one more subtest (``driver-<label>``, the
driver-agnostic chain of ``e2e_dra.subtests.drivers``), on the same cluster as the suite's own
subtests: a driver costs its phases, not a cluster of its own. ``-k drivers`` runs them alone
(their items carry the ``drivers`` mark).

Before the cluster comes up, one step builds every selected driver for every kubelet release the
suite runs (a driver that follows the kubelet moves to its other build after the upgrade, and
with the kubelet at the downgrade and the re-upgrade), so a build's minutes are a step of their
own, said with progress, never a phase that seems to hang. ``summary.json`` records each
driver's builds: version, Go, and the ``k8s.io/dynamic-resource-allocation`` it links
(``drivers``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from e2e_dra._suite._steps import ClusterOps, ClusterStep, Step, SubtestPackages
from e2e_dra._suite._upgrade import UpgradeState, UpgradeSuite
from e2e_dra.driver import parse_drivers
from e2e_dra.settings import settings
from e2e_dra.subtest import DRIVER_SUBTEST_PREFIX, Subtest
from e2e_dra.subtests.drivers import driver_subtests

logger = logging.getLogger(__name__)

DRIVERS_MARK = "drivers"
"""The mark of every real driver's items: ``-k drivers`` selects them."""


@dataclass
class DriverState(UpgradeState):
    """An upgrade suite's state, and each driver's builds by kubelet release."""

    drivers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["drivers"] = self.drivers
        return info


@dataclass(frozen=True, kw_only=True)
class DriverBuilds(ClusterStep[DriverState]):
    """Every driver built (or taken from the cache) for every kubelet release of the suite."""

    name: ClassVar[str] = "driver-builds"

    def run(self, cluster: ClusterOps[DriverState]) -> None:
        releases = cluster.state.releases
        if releases is None:
            raise AssertionError("the versions step has not run")
        for subtest in cluster.subtests.values():
            kind = subtest.node_driver
            if kind is None:
                continue
            builds = {}
            first, *_ = kubelets = releases.runs("kubelet")
            for kubelet in kubelets:
                logger.info(f"driver {kind.label} for kubelet {kubelet}")
                program = kind.program(kubelet, upgraded=kubelet != first)
                builds[kubelet] = {**kind.describe(), **(program.describe() if program else {})}
            cluster.state.drivers[kind.label] = builds


@dataclass(frozen=True)
class WithRealDrivers(UpgradeSuite):
    """An upgrade suite whose subtests include one per real driver."""

    def find_subtests(self, packages: SubtestPackages) -> list[Subtest]:
        """The package's modules, and one subtest per driver ``E2E_DRA_DRIVERS`` names."""
        drivers = driver_subtests(parse_drivers(settings().drivers))
        return [*super().find_subtests(packages), *drivers]

    def before_bring_up(self, subtests: Sequence[str]) -> list[Step]:
        """The releases, the node runtime, and, with a real driver among ``subtests``, every
        driver's builds."""
        real = any(name.startswith(DRIVER_SUBTEST_PREFIX) for name in subtests)
        builds: list[Step] = [DriverBuilds()] if real else []
        return [*super().before_bring_up(subtests), *builds]

    def new_state(self) -> DriverState:
        return DriverState()
