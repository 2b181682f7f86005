"""tiinterp's CPU SIMD configuration (``tiinterp.init("cpu", real_matrix_scalarize=False)``):
what it refuses, on every arch and configuration the suite runs (``cpu-simd`` included)."""

import numpy as np
import pytest

import tiinterp
from tiinterp._runtime import simd_configuration


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
    from tiinterp._taichi import current_config

    expected = arch == "cpu" and not current_config().real_matrix_scalarize
    assert simd_configuration() == expected


def test_vector_fields_in_pipelines_are_refused_only_in_the_simd_configuration(arch, rng):
    """Taichi 1.7.4 reads and writes vector fields wrongly (or aborts) with
    real_matrix_scalarize=False: interpolate_into and grid_sample_into refuse them there
    before compiling anything; scalar fields still work."""
    from tiinterp._taichi import ti

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
