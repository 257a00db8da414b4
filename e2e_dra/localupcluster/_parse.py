"""Reading the output of ``hack/local-up-cluster.sh -d``.

The script prints ``RUN <name>: <command line>`` instead of starting a component, and with
``KUBE_VERBOSE >= 2`` bash traces assignments as ``+ VAR=value``. Command lines are split on single
spaces only, like upstream: some arguments hold ``$`` or quotes that a shell would mangle, and empty
bash words (``"${priv_arg}"``) must stay empty argv entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from e2e_dra.localupcluster._errors import ClusterError

RUN_PREFIX = "RUN "
OLD_SCRIPT_READY_LINE = "Local etcd is running. Run commands. Press Ctrl-C to shut it down."
"""Older scripts start etcd themselves, print this and sleep forever: stop reading there."""

_SETTING = re.compile(r"^\+ ([A-Z0-9_]+)=(.*)$")


@dataclass(frozen=True)
class RunLine:
    name: str
    argv: list[str]


def split_command_line(command_line: str) -> list[str]:
    """Split on single spaces, keeping empty words (``"a  b"`` -> ``["a", "", "b"]``)."""
    return command_line.split(" ")


def parse_run_line(line: str) -> RunLine | None:
    """``RUN kubelet: sudo -E /bin/kubelet --v=3`` -> RunLine; other lines -> None."""
    if not line.startswith(RUN_PREFIX):
        return None
    name, sep, command_line = line[len(RUN_PREFIX) :].partition(": ")
    if not sep or not name or not command_line:
        raise ClusterError(f"unexpected RUN line from local-up-cluster.sh: {line!r}")
    return RunLine(name=name, argv=split_command_line(command_line))


def parse_setting(line: str) -> tuple[str, str] | None:
    """``+ API_SECURE_PORT=6443`` -> ("API_SECURE_PORT", "6443"); other lines -> None."""
    match = _SETTING.match(line)
    if match is None:
        return None
    return match.group(1), match.group(2)
