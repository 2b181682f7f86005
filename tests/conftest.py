"""Test fixtures: every test that takes ``arch`` runs once per arch in TIINTERP_TEST_ARCHS."""
import os

import numpy as np
import pytest
import taichi as ti

import tiinterp


def _test_archs():
    """TIINTERP_TEST_ARCHS (comma-separated), or every arch this machine has."""
    names = os.environ.get("TIINTERP_TEST_ARCHS", "")
    requested = [name.strip() for name in names.split(",") if name.strip()]
    return requested or list(reversed(tiinterp.available_archs()))


@pytest.fixture(scope="session", params=_test_archs())
def arch(request):
    """Taichi initialised on one arch for a group of tests, reset afterwards.

    An arch named in TIINTERP_TEST_ARCHS that this machine lacks makes tiinterp.init raise,
    so the tests fail rather than skip.
    """
    tiinterp.init(request.param, offline_cache=True)
    yield request.param
    ti.reset()


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
