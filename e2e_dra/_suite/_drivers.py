"""The driver suite: every real DRA driver of ``E2E_DRA_DRIVERS`` through upgrade -> downgrade ->
re-upgrade, each as one subtest of the driver-agnostic chain (``e2e_dra.subtests.drivers``).

The cluster moves as in ``upgrade-downgrade`` (every component at once). Before the cluster comes
up, one step builds every driver for every kubelet release the suite runs (a driver that follows
the kubelet is switched to its other build in the phase after each step), so a build's minutes
are a step of their own, said with progress, never a phase that seems to hang.
``summary.json`` records each driver's builds: version, Go, and the
``k8s.io/dynamic-resource-allocation`` it links (``drivers``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

from e2e_dra._suite._steps import ClusterOps, ClusterStep, Step, SubtestPackages
from e2e_dra._suite._upgrade import AllAtOnce, UpgradeState, UpgradeSuite
from e2e_dra.driver import parse_drivers
from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS
from e2e_dra.settings import settings
from e2e_dra.subtest import Subtest
from e2e_dra.subtests.drivers import driver_subtests

logger = logging.getLogger(__name__)

DRIVERS = "drivers"


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
class DriverSuite(UpgradeSuite):
    """``upgrade-downgrade``'s flow over the real drivers' subtests."""

    def find_subtests(self, packages: SubtestPackages) -> list[Subtest]:
        """One subtest per driver ``E2E_DRA_DRIVERS`` names, not a package's modules."""
        return driver_subtests(parse_drivers(settings().drivers))

    def before_bring_up(self) -> list[Step]:
        """The releases, the node runtime, and every driver's builds."""
        return [*super().before_bring_up(), DriverBuilds()]

    def new_state(self) -> DriverState:
        return DriverState()


DRIVER_SUITE = DriverSuite(AllAtOnce(DRIVERS, KUBE_CLUSTER_COMPONENTS, "", re_upgrade=True))
