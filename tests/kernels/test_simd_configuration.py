"""tiinterp's CPU SIMD configuration (``tiinterp.init("cpu", real_matrix_scalarize=False)``):
what it refuses, on every arch and configuration the suite runs (``cpu-simd`` included); and
the CPU path's SIMD kernels, compiled with vector types under any options
(Note [Vector types under any options] in ``tiinterp/_runtime/taichi.py``)."""

import contextlib

import numpy as np
import pytest

import tiinterp
from tests.tolerances import relative_error, tolerance
from tiinterp._runtime.capabilities import capabilities
from tiinterp._runtime.session import simd_configuration
from tiinterp._runtime.taichi import BACKEND


def test_grid_sample_is_refused_only_in_the_simd_configuration(arch, rng):
    """Taichi 1.7.4 aborts the process compiling grid_sample's kernels with
    real_matrix_scalarize=False: a clear RuntimeError there, results everywhere else."""
    x = rng.standard_normal((1, 1, 4, 4))
    grid = rng.uniform(-1, 1, (1, 3, 3, 2))
    if simd_configuration():
        with pytest.raises(RuntimeError, match=r"SIMD configuration.*tiinterp\.init\('cpu'\)"):
            tiinterp.grid_sample(x, grid)
        with pytest.raises(RuntimeError, match="SIMD configuration"):
            tiinterp.grid_sample_backward(np.ones((1, 1, 3, 3)), x, grid)
    else:
        assert tiinterp.grid_sample(x, grid).shape == (1, 1, 3, 3)


def test_simd_configuration_is_reported_from_the_running_taichi(arch):
    from tiinterp._runtime.taichi import current_config

    expected = arch == "cpu" and not current_config().real_matrix_scalarize
    assert simd_configuration() == expected


@pytest.mark.cpu_kernels
def test_a_test_that_reinitialises_taichi_on_its_arch(arch):
    """As tests that re-initialise Taichi do in their clean-up: the arch is put back, a
    configuration's options are not. The next test checks that it still runs in its own."""
    tiinterp.init(arch)


@pytest.mark.cpu_kernels
def test_the_next_test_still_runs_in_its_configuration(arch, request):
    """tests/conftest.py restores a configuration's options that an earlier test dropped:
    cpu-simd tests after a re-initialisation ran without SIMD before."""
    assert simd_configuration() == (request.node.callspec.params["arch"] == "cpu-simd")


def test_vector_fields_in_pipelines_are_refused_only_in_the_simd_configuration(arch, rng):
    """Taichi 1.7.4 reads and writes vector fields wrongly (or aborts) with
    real_matrix_scalarize=False: interpolate_into and grid_sample_into refuse them there
    before compiling anything; scalar fields still work."""
    from tiinterp._runtime.taichi import ti

    velocity = ti.Vector.field(2, ti.f32, (4, 4))
    fine = ti.Vector.field(2, ti.f32, (8, 8))
    image = ti.field(ti.f32, (1, 1, 4, 4))
    points = ti.Vector.field(2, ti.f32, (1, 3, 3))
    warped = ti.field(ti.f32, (1, 1, 3, 3))
    scalar_in, scalar_out = ti.field(ti.f32, (4, 4)), ti.field(ti.f32, (8, 8))
    scalar_in.from_numpy(rng.standard_normal((4, 4)).astype(np.float32))
    tiinterp.interpolate_into(scalar_in, scalar_out, mode="bilinear")
    assert np.isfinite(scalar_out.to_numpy()).all()
    if simd_configuration():
        with pytest.raises(RuntimeError, match=r"vector or matrix elements.*SIMD configuration"):
            tiinterp.interpolate_into(velocity, fine, mode="bilinear")
        with pytest.raises(RuntimeError, match="grid_sample_into: not available in tiinterp"):
            tiinterp.grid_sample_into(image, points, warped)
    else:
        tiinterp.interpolate_into(velocity, fine, mode="bilinear")
        tiinterp.grid_sample_into(image, points, warped)


# --- The SIMD kernels under any options ---------------------------------------------------------


@pytest.mark.cpu_kernels
def test_simd_kernels_compile_with_vector_types_and_the_options_come_back(arch):
    """A SIMD kernel's first launch per signature (its compilation) runs with
    real_matrix_scalarize=False, later launches with the program's own options, which are
    back after each launch, also when it raises; on a backend whose launches compile a
    kernel again under new options (taichi-forge), every launch runs with it off."""
    from tiinterp._kernels.simd import simd_kernels
    from tiinterp._runtime.taichi import current_config, launch, launch_with_vector_types

    # A new runtime with the same options, in which no kernel has been compiled yet.
    _, arch_name, options = tiinterp._runtime.session._last_init
    tiinterp.init(arch_name, **options)
    options = current_config().real_matrix_scalarize
    middle = simd_kernels(np.dtype(np.float32), "scalars", False).middle
    source = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    index = np.array([[2, 0]], dtype=np.int32)
    weight = np.array([[0.25, 0.75]], dtype=np.float32)
    seen = []

    def run(kernel, *args):
        seen.append(current_config().real_matrix_scalarize)
        launch(kernel, *args)

    def failing(kernel, *args):
        seen.append(current_config().real_matrix_scalarize)
        raise ValueError("a launch that fails")

    signature = (index, weight, 2, 1, True)
    with pytest.raises(ValueError, match="a launch that fails"):
        launch_with_vector_types(failing, middle, source, np.empty(16, np.float32), *signature)
    assert current_config().real_matrix_scalarize == options
    for _ in range(2):
        result = np.empty((2, 1, 8), np.float32)
        # The scalar-store form writes a flat result.
        launch_with_vector_types(run, middle, source, result.reshape(-1), *signature)
        np.testing.assert_array_equal(result[:, 0], 0.25 * source[:, 2] + 0.75 * source[:, 0])
        assert current_config().real_matrix_scalarize == options
    recompiles = capabilities(BACKEND, "cpu").recompiles_for_new_options
    assert seen == [False, False, False if recompiles else options]


def test_kernels_compiled_after_a_cpu_resize_keep_the_programs_options(arch, rng):
    """The option is off only while tiinterp's SIMD kernels compile: grid_sample, which
    Taichi 1.7.4 cannot compile without scalarised vectors (LLVM aborts the process),
    compiles after a resize has compiled SIMD kernels, wherever the program's options allow
    it, and gives PyTorch's values."""
    import torch

    from tiinterp._runtime.taichi import current_config

    options = current_config().real_matrix_scalarize
    x = rng.standard_normal((1, 2, 13, 11))
    tiinterp.interpolate(x, size=(17, 29), mode="bicubic")
    assert current_config().real_matrix_scalarize == options
    grid = rng.uniform(-1, 1, (1, 5, 4, 2))
    if simd_configuration():
        with pytest.raises(RuntimeError, match="SIMD configuration"):
            tiinterp.grid_sample(x, grid, mode="bicubic")
    else:
        expected = torch.nn.functional.grid_sample(
            torch.from_numpy(x), torch.from_numpy(grid), mode="bicubic", align_corners=False
        ).numpy()
        actual = tiinterp.grid_sample(x, grid, mode="bicubic")
        assert relative_error(actual, expected) <= tolerance("grid_pytorch", np.float64)


# --- Results: the SIMD configuration against Taichi's default options ---------------------------

# (dtype, input shape, output size, mode, antialias), each through interpolate and
# interpolate_backward: both trailing axes in the fused SIMD kernel (bilinear), and a filter
# of more than 16 taps (antialiased bicubic, 300 -> 11), which takes the generic kernel: the
# sweep's largest difference. Few cases: every kernel compiles anew in each configuration.
AGREEMENT_CASES = [
    (np.float32, (1, 2, 40, 33), (57, 70), "bilinear", False),
    (np.float64, (1, 2, 40, 33), (57, 70), "bilinear", False),
    (np.float32, (1, 1, 300, 7), (11, 5), "bicubic", True),
    (np.float64, (1, 1, 300, 7), (11, 5), "bicubic", True),
]


@contextlib.contextmanager
def taichi_restored():
    """Whatever tiinterp.init started last (the arch fixture's arch and configuration) is
    started again afterwards: the tests below switch the CPU's configuration themselves."""
    last = tiinterp._runtime.session._last_init
    try:
        yield
    finally:
        if last is not None:
            tiinterp.init(last[1], **last[2])


def results_in(cases, **options):
    """Forward results and gradients of ``cases`` in a fresh Taichi CPU runtime started
    with ``options``, on the same seeded data every time."""
    tiinterp.init("cpu", offline_cache=True, **options)
    assert simd_configuration() == (options.get("real_matrix_scalarize") is False)
    data = np.random.default_rng(20261201)
    results = []
    for dtype, shape, size, mode, antialias in cases:
        x = data.standard_normal(shape).astype(dtype)
        g = data.standard_normal(shape[:2] + size).astype(dtype)
        arguments = dict(mode=mode, antialias=antialias)
        results.append(tiinterp.interpolate(x, size=size, **arguments))
        results.append(tiinterp.interpolate_backward(g, shape, **arguments))
    return results


def test_simd_configuration_agrees_with_the_default_to_rounding():
    """Both configurations compute each output as the same sum of the same products, but
    under Taichi's default fast math LLVM may reorder the sum and fuse multiply-adds, and
    does so differently in the vector and the scalar build: measured at most 5.3 (float32)
    and 3.4 (float64) epsilons of the largest output over 244 mode / size / dtype cases
    (docs/guide/archs.md), within the "reorder" bound."""
    with taichi_restored():
        default = results_in(AGREEMENT_CASES)
        simd = results_in(AGREEMENT_CASES, real_matrix_scalarize=False)
    for actual, expected in zip(simd, default, strict=True):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert relative_error(actual, expected) <= tolerance("reorder", expected.dtype)


def test_without_fast_math_the_simd_configuration_is_bit_identical():
    """With fast_math=False LLVM keeps every product and sum as written (IEEE: no
    reassociation, no fused multiply-adds), and both builds sum each output's taps in the
    table's order: bit-identical results, as documented (the bilinear gradient differs
    by up to 4.8e-7 under fast math)."""
    cases = AGREEMENT_CASES[:1]
    with taichi_restored():
        default = results_in(cases, fast_math=False)
        simd = results_in(cases, real_matrix_scalarize=False, fast_math=False)
    for actual, expected in zip(simd, default, strict=True):
        np.testing.assert_array_equal(actual, expected)
