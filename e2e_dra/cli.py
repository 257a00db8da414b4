"""``e2e-dra``: the command line of every area, assembled from the areas' own ``_cli`` modules.

Start-up stays fast because only argparse-level modules are imported before a command runs; the
handlers import what they need. A user's mistake ends as one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from e2e_dra import __version__
from e2e_dra.errors import E2EDRAError

PROG = "e2e-dra"

# One line per area; each module exposes ``register(subparsers) -> None``.
COMMAND_MODULES: tuple[str, ...] = (
    "e2e_dra.releases._cli",
    "e2e_dra.releases._gobuild_cli",
    "e2e_dra.provision._cli",
    "e2e_dra.driver._cli",
    "localupcluster._cli",
)


class _OneLineErrorParser(argparse.ArgumentParser):
    """Usage mistakes as one line, like every other error of ours."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrorParser(
        prog=PROG,
        description="Kubernetes DRA upgrade/downgrade test harness: versions, releases, clusters.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(
        title="commands", metavar="COMMAND", required=True, parser_class=_OneLineErrorParser
    )
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except E2EDRAError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
