"""The environment the cluster's processes run in: what they see, what the engine adds to it, and
what of a printed command line can be run there.

The engine reads no configuration of its own from the environment (its callers pass values in).
It looks at ``os.environ`` only to know what the processes it starts will inherit (:class:`Cmd`
passes our environment on), so that a value the caller or the user gave always wins over one the
engine would add.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

TRACING_VERBOSITY = 2
"""``KUBE_VERBOSE`` from which bash traces the script's ``+ VAR=value`` assignments: the only way
the engine learns the settings (ports, certificate directory) the script chose."""


def inherited(env: Mapping[str, str], name: str) -> str | None:
    """What the processes we start see as ``name``: the caller's ``env``, else what they
    inherit from us (:class:`Cmd` passes our environment on). Not configuration of ours: the
    engine reads none, its callers pass values in."""
    return env.get(name, os.environ.get(name))


def trace_assignments(env: dict[str, str]) -> None:
    """Raise ``KUBE_VERBOSE`` in ``env`` to :data:`TRACING_VERBOSITY` unless the script already
    gets that much or more: without the trace the engine would not know the script's settings."""
    verbose = inherited(env, "KUBE_VERBOSE") or ""
    if not verbose.isdecimal() or int(verbose) < TRACING_VERBOSITY:
        env["KUBE_VERBOSE"] = str(TRACING_VERBOSITY)


def confine(env: dict[str, str], slot_values: Mapping[str, str], scratch: Path) -> None:
    """Give the script the control-plane ports and certificate directory of its slot (each one
    the caller did not choose itself) and the cluster's scratch directory.

    Everything the script makes with mktemp (etcd's data, the components' configuration) and
    writes to its LOG_DIR (the API server's audit log, 100 MB a file, never rotated away) goes to
    the scratch directory, and goes when the cluster stops; by default both are /tmp.
    """
    for name, value in slot_values.items():
        if inherited(env, name) is None:  # the caller's choice wins
            env[name] = value
    env["TMPDIR"] = str(scratch)
    if inherited(env, "LOG_DIR") is None:
        env["LOG_DIR"] = str(scratch)


def runnable(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], bool]:
    """The words to execute for a printed command line, and whether a ``sudo`` was dropped.

    Leading empty words go. Running as root where no ``sudo`` is installed, a leading
    ``sudo``/``sudo -E`` goes too: it would change nothing, and it cannot be run. The saved command
    line keeps it.
    """
    words = list(argv)
    while words and not words[0]:
        words.pop(0)
    sudo_missing = os.geteuid() == 0 and not shutil.which("sudo", path=inherited(env, "PATH"))
    if not (words and words[0] == "sudo" and sudo_missing):
        return words, False
    words.pop(0)
    while words and words[0].startswith("-"):
        words.pop(0)
    return words, True
