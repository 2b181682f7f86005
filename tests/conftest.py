"""Test fixtures and capability markers.

Every test that takes ``arch`` runs once per arch in TIINTERP_TEST_ARCHS (comma-separated;
default: every arch this machine has). "cpu-simd" is the CPU in tiinterp's SIMD
configuration (Taichi's ``real_matrix_scalarize=False``), "cpu" the CPU under Taichi's
default options.

Markers (registered in pyproject.toml; ``--strict-markers`` rejects any other):

``requires_autodiff``
    The test needs Taichi's ndarray autodiff, which is right only on the archs in
    the backend's row in ``tiinterp/_runtime/capabilities.py`` (taichi: "cpu", "cuda"; taichi-forge:
    "vulkan" too).
    Its items on every other arch are removed at collection and reported as *deselected*
    (not skipped, not passed): the refusal those archs give is tested once, in
    tests/runtime/test_capabilities.py.
``without_autodiff``
    The opposite: the test checks the refusal of archs lacking ndarray autodiff, so its
    items on "cpu" and "cuda" are deselected.
``requires_float64``
    The test computes in float64. On an arch whose device lacks 64-bit floats (decided at
    run time, by asking tiinterp for a float64 result: Metal never has them, a Vulkan
    device only with ``shaderFloat64``) it is skipped with the reason. The CPU and CUDA
    always have float64 and are never skipped; Mesa's lavapipe has it, so nothing skips
    on CI. The refusal itself is tested in tests/runtime/test_runtime.py.
``cpu_kernels``
    The test checks a choice the CPU kernels make (such as running a small loop serially);
    its items on every other arch, which never make that choice, are deselected.
``device_arch``
    The test compares a device arch (Vulkan, CUDA, Metal) with the CPU, whose results it
    computes in a process of its own; its items on "cpu" are deselected.
``gpu_coverage``
    One of the GPU check's cases (tests/ops/test_device_agreement.py) past the handful that
    the stand-in archs run, as ``gpu_check.py --quick`` did: the suite's other tests cover
    them on the CPU and Vulkan, and on cuda they are what the GPU check adds. Deselected on
    every arch but cuda.
``prepared_launches``
    The test checks tiinterp's own launch path (Note [Prepared launches] in
    ``tiinterp/_runtime/taichi.py``); its items are deselected on a backend that launches through
    Taichi's call instead (taichi-forge: ``_capabilities``' ``prepared_launches``).
``kernel_set``
    The test builds and uses a kernel set (``tiinterp/_compiled/``); its items are
    deselected where none can be built: off the CPU, and on a Taichi other than 1.7.4
    (taichi-forge), whose runtime the build refuses.
``compiles_for_minutes(on=[(backend, arch), ...])``
    Its kernels take minutes to compile on the (backend, arch) pairs named: the 3-D lanczos3
    ``tiinterp.funcs`` gradients under taichi 1.7.4 on Vulkan lavapipe (373 s for one,
    measured). Deselected there, run by ``make stress`` (TIINTERP_STRESS=1); every other
    arch and backend runs them in ``make test``, and a stress run leaves them out there.
``slow``
    One of the few tests that take far longer than the rest (long Taichi compiles, batches
    of 2^19 rows). ``make test`` runs them; ``pytest -m "not slow"`` gives a quick run
    (reported as deselected).
``stress``
    Too big or too long for CI (sizes near 2^31, long runs, threads, forked workers: the
    tests under tests/stress/, whose conftest.py describes them). Deselected unless
    TIINTERP_STRESS=1, as ``make stress`` sets.

``TIINTERP_TEST_ARCH_INDEPENDENT=0`` deselects the tests that take no ``arch`` (reported as
deselected): CI runs each backend's suite as one process per arch, and only one of them
runs those.

Fixtures: ``arch`` (Taichi initialised on one arch), ``rng`` (seeded), ``golden`` (the
stored PyTorch / JAX references, ``golden("resize")`` is tests/data/golden_resize.npz,
loaded once per session).

The terminal summary ends with the passed / failed / skipped / deselected counts per arch.
"""

import os
import pathlib

# taichi-forge posts a version check to its metadata host on import unless told not to;
# the tests (and the subprocesses they start) never go online. tiinterp itself leaves the
# setting to its users.
os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
# taichi-forge refuses a runtime's 1025th resident kernel specialization (each distinct
# template argument, a field among them, makes one); the suite makes thousands in one
# runtime, and its tests that re-initialise Taichi get the same limit through the variable.
os.environ.setdefault("TI_KERNEL_SPECIALIZATION_LIMIT", str(1 << 16))
# A kernel set this machine built (``make kernels``) would run the suite's SIMD launches
# natively, past the launch paths its tests check: none is used, but the one
# TIINTERP_TEST_KERNEL_SET names (tests/engine/test_kernel_set.py builds and uses its own).
os.environ["TIINTERP_KERNEL_SET"] = os.environ.get("TIINTERP_TEST_KERNEL_SET", os.devnull)

import numpy as np
import pytest

import tiinterp
from tiinterp._compiled.build import refusal
from tiinterp._runtime.capabilities import capabilities
from tiinterp._runtime.taichi import BACKEND, backend_version, current_config, ti

GOLDEN_DIR = pathlib.Path(__file__).parent / "data"


def _test_archs():
    """TIINTERP_TEST_ARCHS (comma-separated), or every arch this machine has."""
    names = os.environ.get("TIINTERP_TEST_ARCHS", "")
    requested = [name.strip() for name in names.split(",") if name.strip()]
    return requested or list(reversed(tiinterp.available_archs()))


# Configurations of an arch that tiinterp ships besides the one ``tiinterp.init(arch)``
# starts: "cpu-simd" is the CPU with Taichi's ``real_matrix_scalarize=False``, where the
# CPU kernels compile to SIMD code (``tiinterp.init("cpu", real_matrix_scalarize=False)``).
CONFIGURATIONS = {"cpu-simd": ("cpu", {"real_matrix_scalarize": False})}


def arch_of(param):
    """The arch a TIINTERP_TEST_ARCHS entry runs on ("cpu-simd" -> "cpu")."""
    return CONFIGURATIONS.get(param, (param, {}))[0]


@pytest.fixture(scope="session", params=_test_archs())
def arch(request):
    """Taichi initialised on one arch (or configuration) for a group of tests, reset
    afterwards; the value is the arch's name, so a "cpu-simd" test sees "cpu".

    An arch named in TIINTERP_TEST_ARCHS that this machine lacks makes tiinterp.init raise,
    so the tests fail rather than skip.
    """
    name, options = CONFIGURATIONS.get(request.param, (request.param, {}))
    tiinterp.init(name, offline_cache=True, **options)
    yield name
    ti.reset()


@pytest.fixture(autouse=True)
def _configuration_restored(request):
    """A test that re-initialises Taichi puts back its arch (``tiinterp.init(arch)``), not a
    configuration's options: the next test of a configuration such as "cpu-simd" would run
    without them. Each such test starts in its configuration."""
    callspec = getattr(request.node, "callspec", None)
    param = callspec.params.get("arch") if callspec is not None else None
    if param in CONFIGURATIONS:
        name, options = CONFIGURATIONS[param]
        config = current_config()
        if any(getattr(config, key) != value for key, value in options.items()):
            tiinterp.init(name, offline_cache=True, **options)


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)


@pytest.fixture(scope="session")
def golden():
    """``golden(name)``: the arrays of tests/data/golden_<name>.npz as a read-only dict,
    read from disk once per session."""
    loaded = {}

    def load(name):
        if name not in loaded:
            with np.load(GOLDEN_DIR / f"golden_{name}.npz") as stored:
                arrays = {key: stored[key] for key in stored.files}
            for array in arrays.values():
                array.flags.writeable = False
            loaded[name] = arrays
        return loaded[name]

    return load


# --- Capability markers -------------------------------------------------------------------------


def _item_arch(item):
    """The arch a collected test item runs on, or None if it does not take ``arch``."""
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("arch") if callspec is not None else None
    return None if param is None else arch_of(param)


def _stress_run():
    return os.environ.get("TIINTERP_STRESS") == "1"


def _minutes_to_compile(item, arch):
    """Whether ``item`` is a ``compiles_for_minutes`` test on an arch and backend that it
    names, outside ``make stress`` (TIINTERP_STRESS=1), or on one it does not, in it
    (``make test`` runs it there)."""
    marker = item.get_closest_marker("compiles_for_minutes")
    if marker is None:
        return False
    return ((BACKEND, arch) in marker.kwargs.get("on", ())) != _stress_run()


def _stress_only(item):
    """Whether ``item`` is a ``stress`` test outside ``make stress`` (TIINTERP_STRESS=1)."""
    return item.get_closest_marker("stress") is not None and not _stress_run()


# Why this Taichi cannot build a kernel set, or None.
_KERNEL_SETS_REFUSED = refusal(BACKEND, backend_version())


def pytest_collection_modifyitems(config, items):
    """Deselect the ``requires_autodiff`` items on archs without ndarray autodiff, the
    ``without_autodiff`` items on archs with it, the ``cpu_kernels`` items off the CPU, the
    ``device_arch`` items on it, the
    ``gpu_coverage`` items off cuda, the ``prepared_launches`` items on a backend without them, the
    ``kernel_set`` items where no set can be built, the
    ``compiles_for_minutes`` items where they do (unless TIINTERP_STRESS=1; with it, where
    they do not), the ``stress`` items (unless TIINTERP_STRESS=1), and the items without an
    arch if TIINTERP_TEST_ARCH_INDEPENDENT=0."""
    arch_independent = os.environ.get("TIINTERP_TEST_ARCH_INDEPENDENT", "1") != "0"
    kept, deselected = [], []
    for item in items:
        markers = {
            name: item.get_closest_marker(name)
            for name in (
                "requires_autodiff",
                "without_autodiff",
                "requires_float64",
                "compiles_for_minutes",
                "cpu_kernels",
                "device_arch",
                "gpu_coverage",
                "prepared_launches",
                "kernel_set",
            )
        }
        used = [name for name, marker in markers.items() if marker is not None]
        if used and "arch" not in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid}: marker {used[0]} needs the arch fixture")
        arch = _item_arch(item)
        if markers["requires_autodiff"] and markers["without_autodiff"]:
            raise pytest.UsageError(f"{item.nodeid}: requires_autodiff and without_autodiff")
        has_autodiff = arch is not None and capabilities(BACKEND, arch).ndarray_autodiff
        if (
            (arch is None and not arch_independent)
            or (markers["requires_autodiff"] and not has_autodiff)
            or (markers["without_autodiff"] and has_autodiff)
            or (markers["cpu_kernels"] and arch != "cpu")
            or (markers["device_arch"] and arch == "cpu")
            or (markers["gpu_coverage"] and arch != "cuda")
            or (
                markers["prepared_launches"]
                and not (arch is not None and capabilities(BACKEND, arch).prepared_launches)
            )
            or (markers["kernel_set"] and (arch != "cpu" or _KERNEL_SETS_REFUSED))
            or _minutes_to_compile(item, arch)
            or _stress_only(item)
        ):
            deselected.append(item)
        else:
            kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


_float64_by_arch = {}


def _arch_has_float64(arch):
    """Whether tiinterp computes in float64 on ``arch`` (Taichi already initialised on it):
    the answer of a float64 call through the public API, once per arch and session."""
    if capabilities(BACKEND, arch_of(arch)).float64:  # every device of the arch: no probe
        return True
    if arch not in _float64_by_arch:
        try:
            tiinterp.interpolate(np.zeros((1, 1, 2, 2), np.float64), size=(3, 3), mode="nearest")
            _float64_by_arch[arch] = True
        except TypeError as error:  # any other error is a failure of the test, not a skip
            if "no 64-bit float support" not in str(error):
                raise
            _float64_by_arch[arch] = False
    return _float64_by_arch[arch]


@pytest.fixture(autouse=True)
def _requires_float64(request):
    """Skips a ``requires_float64`` test on an arch whose device lacks 64-bit floats."""
    if request.node.get_closest_marker("requires_float64") is not None:
        arch = request.getfixturevalue("arch")
        if not _arch_has_float64(arch):
            pytest.skip(f"requires_float64: the {arch} device has no 64-bit float support")


# --- Reporting ----------------------------------------------------------------------------------


def pytest_report_header(config):
    return (
        f"tiinterp test archs: {', '.join(_test_archs())} "
        f"(available here: {', '.join(tiinterp.available_archs())})"
    )


def _report_arch(nodeid, archs):
    """The arch in a test id (``test_x[vulkan-...]``), or "arch-independent"."""
    params = nodeid.partition("[")[2]
    longest_first = sorted(archs, key=len, reverse=True)  # "cpu-simd-..." is not "cpu"
    return next(
        (a for a in longest_first if params == f"{a}]" or params.startswith(f"{a}-")),
        "arch-independent",
    )


def pytest_terminal_summary(terminalreporter):
    """Per-arch outcome counts, deselected included (by ``requires_autodiff``,
    ``without_autodiff`` or ``-m``)."""
    archs = _test_archs()
    counts = {}
    for outcome in ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected"):
        for report in terminalreporter.stats.get(outcome, []):
            arch = _report_arch(report.nodeid, archs)
            counts.setdefault(arch, {}).setdefault(outcome, 0)
            counts[arch][outcome] += 1
    terminalreporter.section("tests per arch")
    for arch, outcomes in counts.items():
        terminalreporter.write_line(
            f"{arch:>16}: " + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
        )
