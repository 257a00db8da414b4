"""The Kubernetes Enhancement Proposals (KEPs) the subtests exercise, as data: number -> title.

A subtest names the KEPs whose feature it exercises (``Subtest.keps``); the suite writes them into
``summary.json`` (``keps_by_subtest``), and the report turns them into the production-readiness
evidence of each KEP (``prr-evidence.md``). The table lives here, in the report layer, so that the
report can title a KEP without importing the subtests (a layer above it), and a subtest naming a
number that is not here fails when its module is imported, not in a reviewer's hands.

Each title is the ``title`` of the KEP's ``kep.yaml`` in kubernetes/enhancements
(``keps/<sig>/<number>-<name>/kep.yaml``); its tracking issue has the KEP's number
(:func:`kep_url`). A report of a summary written by a newer e2e-dra may meet a number that is not
here: it is shown with its number and link, and no title.
"""

from __future__ import annotations

KEPS: dict[int, str] = {
    4381: "DRA Structured Parameters",  # sig-node; DynamicResourceAllocation, GA in 1.34
    4680: "Add Resource Health Status to the Pod Status for Device Plugin and DRA",  # sig-node
    4815: "DRA Partitionable Devices",  # sig-scheduling; DRAPartitionableDevices
    4816: "DRA Prioritized List",  # sig-scheduling; DRAPrioritizedList
    4817: "Resource Claim Device Status",  # sig-node; DRAResourceClaimDeviceStatus
    5004: "DRA Extended Resource",  # sig-scheduling; DRAExtendedResource
    5007: "DRA Device Binding Conditions",  # sig-scheduling; DRADeviceBindingConditions
    5018: "DRA Admin Access",  # sig-auth; DRAAdminAccess
    5055: "DRA: device taints and tolerations",  # sig-scheduling; DRADeviceTaints
    5075: "DRA Consumable Capacity",  # sig-scheduling; DRAConsumableCapacity
    5729: "DRA: ResourceClaim Support for Workloads",  # sig-scheduling; DRAWorkloadResourceClaims
    5963: "DRA Device Compatibility Groups",  # sig-scheduling; DRADeviceCompatibilityGroups
}
"""Every KEP a subtest may name (``Subtest.keps`` is checked against it)."""

KEP_ISSUES = "https://github.com/kubernetes/enhancements/issues/"


def kep_url(number: int) -> str:
    """The KEP's tracking issue in kubernetes/enhancements (the KEP's number is the issue's)."""
    return f"{KEP_ISSUES}{number}"
