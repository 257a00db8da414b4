"""The exception types users see, and the exit status each kind of failure ends with.

Every failure that is the user's to fix (bad input, a missing tool, an unreachable mirror, a full
disk) is raised as an :class:`E2EDRAError` whose message is a single line naming the input or the
thing that failed and what to do. The CLI prints that line and exits with the class's
``exit_status``, so a script can tell "you typed it wrong" from "the mirror is down" from "the disk
is full" without parsing text; tracebacks are for our bugs only (and go to a file, see
:mod:`e2e_dra.commands._main`).
"""

from __future__ import annotations

import errno

# Exit statuses, one per kind of failure. ``e2e-dra --help`` prints this table (EXIT_STATUS_HELP).
EXIT_FAILED = 1  # anything of ours without a more precise class
EXIT_USAGE = 2  # argparse: unknown command or option; a number flag out of its range
EXIT_BAD_INPUT = 3  # a value given on the command line or in the environment is malformed
EXIT_NOT_FOUND = 4  # a release or version that does not exist
EXIT_REMOTE = 5  # a mirror failed: unreachable, too slow, wrong checksum, broken archive
EXIT_LOCAL = 6  # this machine: cache dir unusable, disk full, permission denied, stdout unwritable
EXIT_PROVISION = 7  # a part of the node runtime is missing and could not be installed
EXIT_INTERNAL = 70  # a bug of ours (EX_SOFTWARE): the traceback is in a file
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_STDOUT_GONE = 141  # nobody reads stdout (closed, or a pipe whose reader exited): 128+SIGPIPE
EXIT_TERMINATED = 143  # SIGTERM

EXIT_STATUS_HELP = f"""\
exit status:
  0    success
  {EXIT_FAILED}    a failure with no more precise status (the message says what)
  {EXIT_USAGE}    usage: unknown command or option, missing argument, a number out of its range
  {EXIT_BAD_INPUT}    a malformed value (version, URL, --os/--arch, cache path, version file)
  {EXIT_NOT_FOUND}    the release or version does not exist
  {EXIT_REMOTE}    the release mirror failed (unreachable, too slow, deadline, bad checksum)
  {EXIT_LOCAL}    this machine (cache dir unusable, disk full, permission denied, stdout)
  {EXIT_PROVISION}    the node runtime could not be provisioned
  {EXIT_INTERNAL}   a bug in e2e-dra: the message names a file holding the traceback
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C);  {EXIT_TERMINATED}  terminated (SIGTERM)
  {EXIT_STDOUT_GONE}  stdout was closed or its reader went away (`| head`): stopped quietly"""


class E2EDRAError(Exception):
    """A failure with a message that tells the user what to do."""

    exit_status = EXIT_FAILED


class InputError(E2EDRAError, ValueError):
    """A value from the command line or the environment that cannot be used as given."""

    exit_status = EXIT_BAD_INPUT


class VersionError(InputError):
    """A version string that Kubernetes would not produce, or one with no previous minor."""


class ReleaseError(E2EDRAError):
    """A release could not be resolved, fetched, verified or unpacked."""

    exit_status = EXIT_REMOTE


class NotFoundError(ReleaseError):
    """The release (or its marker) does not exist where we looked."""

    exit_status = EXIT_NOT_FOUND


class LocalError(E2EDRAError):
    """This machine cannot do what is needed: a cache dir that is unusable, a full disk."""

    exit_status = EXIT_LOCAL


class UnbuildableRelease(ReleaseError):
    """The release cannot be built from this Go module proxy (it refuses a module the release
    needs and serves no version of it)."""


class ProvisionError(E2EDRAError):
    """A part of the node runtime is missing and could not be installed."""

    exit_status = EXIT_PROVISION


class ComponentCrashed(E2EDRAError):
    """A cluster component ended while a test was using the cluster: nothing after it can pass."""


class ExecError(E2EDRAError):
    """A command in a container ran and failed, or did not finish (no restart explains that)."""


def describe_os_error(exc: OSError, where_else: object = None) -> str:
    """One line for an OSError: the path (``where_else`` when the error names none), what went
    wrong, and the usual way out."""
    where = exc.filename if exc.filename is not None else where_else
    where = f"writing under {where}" if exc.filename is None and where else where or "(no path)"
    what = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: "free some space there or use a directory on another file system",
        errno.EFBIG: "the file size limit (ulimit -f) or the file system's limit was reached",
        errno.EDQUOT: "the disk quota is used up; free some space or use another directory",
        errno.EACCES: "make it writable for this user or use another directory",
        errno.EPERM: "make it writable (chattr -i?) or use another directory",
        errno.EROFS: "the file system is read-only; use another directory",
        errno.ENOTDIR: "a component of that path is a file, not a directory",
        errno.EEXIST: "a file is in the way of a directory there",
    }.get(exc.errno or 0, "check that path")
    return f"{where}: {what}; {hint}"
