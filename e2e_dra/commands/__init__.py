"""The ``e2e-dra`` subcommands, the top layer: each module registers its commands with
``register(subparsers)`` and imports what a command needs only when it runs, so ``e2e-dra --help``
loads argparse and little else (:mod:`e2e_dra.cli` assembles them)."""
