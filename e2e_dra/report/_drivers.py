"""The real drivers a run's summary records (the drivers suite), as lines a page and JUnit show."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

HELPER = "k8s.io/dynamic-resource-allocation"


def driver_builds(drivers: Any, said: Callable[[Any, str], str]) -> tuple[tuple[str, str], ...]:
    """(``driver upstream beside kubelet v1.37.2``, ``v1.37.2, k8s.io/dynamic-resource-allocation
    v0.37.2, go1.26.8``) for each driver's build beside each kubelet release; ``said`` checks and
    cuts each text. Another shape is not refused, just not shown."""
    if not isinstance(drivers, dict):
        return ()
    found = []
    for label, builds in drivers.items():
        if not isinstance(builds, dict):
            continue
        for kubelet, build in builds.items():
            if not isinstance(build, dict):
                continue
            parts = [build.get("version") or build.get("command")]
            parts += [f"{HELPER} {build[HELPER]}" if build.get(HELPER) else None, build.get("go")]
            shown = ", ".join(str(p) for p in parts if isinstance(p, str) and p)
            where = f"drivers[{str(label)[:40]!r}]"
            found.append(
                (
                    f"driver {said(label, where)} beside kubelet {said(kubelet, where)}",
                    said(shown, where),
                )
            )
    return tuple(found)
