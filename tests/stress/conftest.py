"""The stress tests: what is too big or too long for CI, each marked ``stress``.

tests/conftest.py deselects them unless TIINTERP_STRESS=1; ``make stress`` sets it and
runs them with the ``compiles_for_minutes`` tests, in one pytest run on every available
arch (TIINTERP_TEST_ARCHS to choose)::

    TIINTERP_STRESS=1 pytest -m "stress or compiles_for_minutes"

Full size, they need about 20 GiB of memory and 10-15 minutes on 2 cores (as a script,
before they were tests); TIINTERP_STRESS_QUICK=1 runs every check at small sizes (no case
near 2^31), for development. A case the machine has no memory for is skipped with the
figures (the only skip). On taichi-forge, whose kernels take no array of 2^31 bytes or
more, the cases past that size check tiinterp's prompt ValueError instead.

The modules, by theme:

- test_outputs_near_2_31_elements.py: forwards and an adjoint whose result has just under
  2^31 elements through each CPU kernel path, sampled rows against the float64 reference
  (tests/stress/reference.py) and the whole result scanned; sizes of exactly 2^31 refused;
- test_autodiff_past_2_31_taps.py: ``method="autodiff"`` past 2^31 outputs x taps;
- test_memory_flatness.py: 10,000 mixed small calls in a flat resident set;
- test_threads_with_reinit.py (per arch): 8 threads of mixed calls while another thread
  calls ``tiinterp.init``, every result bit-identical to a single-threaded call;
- test_cold_cache_threads.py: 6 threads compiling different modes on an empty cache;
- test_grid_sample_ndarrays_near_2_31.py, test_torch_bridge_near_2_31.py,
  test_field_pipelines_near_2_31.py: grid_sample on Taichi ndarrays, ``tiinterp.torch``
  and ``interpolate_into`` on vector fields near 2^31 elements;
- test_forked_workers_at_scale.py: fork pools, forks under threads, a grandchild;
- test_vulkan_allocations.py: the device path on Vulkan past 2^19 rows and at its
  allocation limit;
- test_spline_and_zoom_pipelines.py: ``bspline_coefficients_into`` (and
  ``funcs.sample_bspline``) along 2^20 + 3 samples, ``scale_and_translate_into`` to 2^20
  + 3 rows inside a Tape, on the CPU and Vulkan.

Each test records its figures (times, peak resident memory, errors) with pytest's
``record_property``; at the end they are printed ("stress figures") and written, with each
test's outcome, to build/stress.json (build/stress-quick.json in quick mode).

Fixtures: ``quick`` (TIINTERP_STRESS_QUICK=1), ``taichi_on`` (Taichi on a named arch for a
test that takes no ``arch``).
"""

import json
import os
import pathlib
import platform
import time

import numpy as np
import pytest

import tiinterp
from tests.stress.helpers import GIB, available_bytes
from tiinterp._runtime.taichi import BACKEND, program_started, ti

QUICK = os.environ.get("TIINTERP_STRESS_QUICK") == "1"
REPORT = (
    pathlib.Path(__file__).resolve().parents[2]
    / "build"
    / ("stress-quick.json" if QUICK else "stress.json")
)
_AVAILABLE_AT_START = available_bytes()
_results = {}


@pytest.fixture(scope="session")
def quick():
    """Whether to run at small sizes (TIINTERP_STRESS_QUICK=1)."""
    return QUICK


@pytest.fixture
def taichi_on():
    """``taichi_on(name)``: Taichi initialised on arch ``name`` for a test that takes no
    ``arch``. Afterwards a new runtime frees what the test left (fields live as long as their
    runtime), on the arch that ran before: the session's ``arch`` fixture may hold one."""
    before = tiinterp.current_arch() if program_started() else None
    yield lambda name: tiinterp.init(name, offline_cache=True)
    if before is not None:
        tiinterp.init(before, offline_cache=True)
    elif program_started():
        ti.reset()


# --- Report -------------------------------------------------------------------------------------


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def pytest_runtest_logreport(report):
    """Each stress test's outcome, time and figures (its ``record_property`` calls); this
    conftest's hooks see only the items under tests/stress."""
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "figures": {}})
    if report.when == "call":
        entry["seconds"] = report.duration
        entry["figures"].update(report.user_properties)
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"] = report.longreprtext.strip().splitlines()[-1][:500]
    elif report.skipped:
        entry["outcome"] = "skipped"
        entry["message"] = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""


def pytest_sessionfinish(session):
    if not _results:
        return
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "quick": QUICK,
        "backend": BACKEND,
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "available_gib_at_start": _AVAILABLE_AT_START / GIB,
        },
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        "tests": _results,
    }
    REPORT.write_text(json.dumps(_jsonable(report), indent=1))


def _figure(value):
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_figure(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_figure(v) for v in value) + "]"
    return str(value)


def pytest_terminal_summary(terminalreporter):
    if not _results:
        return
    terminalreporter.section("stress figures")
    for nodeid, entry in _results.items():
        seconds = f", {entry['seconds']:.1f} s" if "seconds" in entry else ""
        terminalreporter.write_line(f"{nodeid.split('::', 1)[-1]}: {entry['outcome']}{seconds}")
        for name, value in entry["figures"].items():
            terminalreporter.write_line(f"    {name}: {_figure(value)}")
        if "message" in entry:
            terminalreporter.write_line(f"    {entry['message']}")
    mode = "quick sizes" if QUICK else "full sizes"
    terminalreporter.write_line(f"{mode}, {BACKEND}; written to {REPORT}")
