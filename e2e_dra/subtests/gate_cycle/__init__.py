"""Feature-gate cycle subtests: one module per subtest, each defining a ``Subtest``
named ``SUBTEST``; found by ``e2e_dra.subtest.discover``."""
