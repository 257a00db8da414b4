"""What the chain relies on the kubelet doing, and reads of what it logged: how long it keeps a
gone driver's ResourceSlices, how long an unprepare may take, and its own words when it fails to
prepare or unprepare a claim or registers a driver's instance."""

from __future__ import annotations

import re
from pathlib import Path

WIPE_DELAY = 30.0
"""The kubelet wipes a driver's ResourceSlices this long after the driver went away
(kubernetes#141912): a driver's downtime in the chain lasts longer than that, a restart that
changes its devices much less."""
UNPREPARE_TIMEOUT = 150.0
"""From a pod's deletion to its claim unprepared: the kubelet's pod sync, then the DRA manager's
once-a-minute reconcile for a claim it missed, twice."""
REFUSALS = 3
"""Failed unprepares of one claim the kubelet logs before the driver counts as refusing it (the
kubelet retries every 10 to 15 s; one failure may be a driver still starting)."""

UNPREPARE_ERROR = re.compile(r'err="unprepare dynamic resources: (?P<said>(?:[^"\\]|\\.)*)"')
PREPARE_ERROR = re.compile(
    r'"Failed to prepare dynamic resources" err="(?:prepare dynamic resources: )?'
    r'(?P<said>(?:[^"\\]|\\.)*)"'
)
REGISTERED = re.compile(r'"Regist(?:ered|er new) DRA plugin"')  # 1.34 on, and 1.33


def log_size(log: Path | None) -> int:
    """Where the kubelet's log ends now: what it says from here on is said after this point."""
    return log.stat().st_size if log is not None and log.exists() else 0


def kubelet_said(log: Path, start: int, pattern: re.Pattern[str], *names: str) -> list[str]:
    """What the kubelet said in its ``pattern`` lines that name any of ``names``, logged after
    byte ``start``: the pattern's ``said`` group, else its whole match."""
    try:
        with log.open("rb") as file:
            file.seek(start)
            text = file.read(16 << 20).decode(errors="replace")
    except OSError:
        return []
    return [
        (found.groupdict().get("said") or found.group(0))[:400]
        for line in text.splitlines()
        if (found := pattern.search(line)) and any(name in line for name in names)
    ]
