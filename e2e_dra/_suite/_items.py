"""The two test functions every suite module shares; a suite module imports them and names its
suite (``E2E_DRA_SUITE``), and the e2e_dra plugin makes one item per step of that suite's plan."""

import pytest

pytestmark = pytest.mark.real


def test_cluster_step(e2e_dra_run, e2e_dra_step):
    e2e_dra_run.execute(e2e_dra_step)


def test_phase(e2e_dra_run, e2e_dra_phase):
    e2e_dra_run.execute(e2e_dra_phase)
