"""The prepared-devices net: what the kubelet says a driver prepared is what the claim was
allocated, whichever driver, helper library or kubelet release did it.

In the kubelet's DRA protocol (KEP-4381, ``NodePrepareResources``) the kubelet asks each driver to
prepare the devices that a claim's allocation holds from that driver, and the driver answers with
the devices it prepared: pool, device and the CDI IDs the runtime injects. The kubelet keeps the
answer in its checkpoint (``dra_manager_state`` in its root directory) and hands the CDI IDs to
the container runtime; it does not compare the answer with the allocation. A driver, or the
helper library it links (``k8s.io/dynamic-resource-allocation/kubeletplugin``), that answers with
another device, or with its pool and device names mixed up, leaves a pod running with what its
claim was not allocated, and the pod may well still start.

So at the end of every entry the checkpoint is read, and each claim in it that the API server
still has (the same UID), that is allocated and reserved for a pod the entry was prepared for,
must list, for every driver, only devices of its allocation's results for that driver. A claim
without an allocation, or gone, or given to other pods since, is the claim lifecycle net's and
the kubelet's unprepare's business, not this one's. The checkpoint is a file the kubelet
rewrites: one that is missing (nothing prepared yet) is nothing to look at, one that does not
decode is looked at again at the next entry's end, and said in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from e2e_dra._suite._nets import RESOURCE_V1, Finding
from e2e_dra.kube import Kube, KubeError, path, retrying
from e2e_dra.subtest_kit import checkpoint_data

logger = logging.getLogger(__name__)

Device = tuple[str, str, str]  # driver, pool, device


def read_checkpoint(file: Path) -> list[dict[str, Any]] | None:
    """The claims of the kubelet's checkpoint ``file`` (``{"Data": "<JSON>", ...}``); [] when
    there is none yet; None when it cannot be decoded now (the kubelet may be writing it)."""
    try:
        data = checkpoint_data(file)
    except FileNotFoundError:
        return []
    except (AssertionError, ValueError, KeyError, TypeError) as exc:  # too big, or mid-write
        logger.info(f"{file}: not read now ({type(exc).__name__}: {exc}); looked at again later")
        return None
    return list(data.get("ClaimInfoStateList") or [])


def prepared(entry: dict[str, Any]) -> set[Device]:
    """The devices a checkpoint entry says each driver prepared for its claim."""
    return {
        (driver, str(device.get("PoolName", "")), str(device.get("DeviceName", "")))
        for driver, state in (entry.get("DriverState") or {}).items()
        for device in (state or {}).get("Devices") or []
    }


def allocated(claim: dict[str, Any]) -> set[Device] | None:
    """The devices of a claim's allocation; None when it has none."""
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return None
    results = (allocation.get("devices") or {}).get("results") or []
    return {(r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results}


def mismatches(
    entries: Iterable[dict[str, Any]],
    claims: dict[tuple[str, str], dict[str, Any]],
    owner: Callable[[dict[str, Any]], str | None],
) -> list[Finding]:
    """What the checkpoint's ``entries`` say was prepared beyond the allocation of their claims
    (``claims`` by namespace and name, as the API server has them now)."""
    found = []
    for entry in entries:
        key = (str(entry.get("Namespace", "")), str(entry.get("ClaimName", "")))
        claim = claims.get(key)
        if claim is None or (claim.get("metadata") or {}).get("uid") != entry.get("ClaimUID"):
            continue
        given = allocated(claim)
        if given is None or not _for_a_consumer(entry, claim):
            continue
        beyond = sorted(prepared(entry) - given)
        if beyond:
            said = ", ".join(f"{d} (pool {p!r}, device {n!r})" for d, p, n in beyond)
            found.append(
                Finding(
                    owner(claim),
                    f"prepared devices: the kubelet's checkpoint says driver(s) prepared {said} "
                    f"for ResourceClaim {key[0]}/{key[1]}, which its allocation does not have "
                    f"(allocated: {', '.join(f'{d}/{p}/{n}' for d, p, n in sorted(given))}): "
                    "a NodePrepareResources answer that names other devices than the claim's",
                )
            )
    return found


def _for_a_consumer(entry: dict[str, Any], claim: dict[str, Any]) -> bool:
    """Whether the entry was prepared for a pod the claim is reserved for now: a claim given
    back and allocated again may meet the kubelet's entry of before, not yet unprepared."""
    reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []}
    return bool(reserved & set(entry.get("PodUIDs") or {}))


class PreparedNet:
    """Holds the kubelet's checkpoint at ``file`` to the claims' allocations, each time it is
    asked (:meth:`look`); a mismatch is reported once per claim and device."""

    def __init__(self, file: Path, owner: Callable[[dict[str, Any]], str | None]) -> None:
        self.file = file
        self._owner = owner
        self._said: set[str] = set()

    def look(self, kube: Kube) -> list[Finding]:
        entries = read_checkpoint(self.file)
        if not entries:
            return []
        try:
            listed = retrying(kube.list)(path(RESOURCE_V1, "resourceclaims"))
        except KubeError as exc:
            logger.info(f"prepared devices: claims not listed ({exc}); looked at again later")
            return []
        claims = {(c["metadata"].get("namespace", ""), c["metadata"]["name"]): c for c in listed}
        new = [f for f in mismatches(entries, claims, self._owner) if f.message not in self._said]
        self._said.update(f.message for f in new)
        return new
