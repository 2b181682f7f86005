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


def pytest_report_header(config):
    return (f"tiinterp test archs: {', '.join(_test_archs())} "
            f"(available here: {', '.join(tiinterp.available_archs())})")


def pytest_terminal_summary(terminalreporter):
    """Per-arch outcome counts, read from the test ids (``test_x[vulkan-...]``)."""
    archs = _test_archs()
    counts = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            params = report.nodeid.partition("[")[2]
            arch = next((a for a in archs if params == f"{a}]" or params.startswith(f"{a}-")),
                        "arch-independent")
            counts.setdefault(arch, {}).setdefault(outcome, 0)
            counts[arch][outcome] += 1
    terminalreporter.section("tests per arch")
    for arch, outcomes in counts.items():
        terminalreporter.write_line(
            f"{arch:>16}: " + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())))
