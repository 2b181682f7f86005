"""The Taichi steps of issue 26 past 2^19 rows: ``bspline_coefficients_into`` along an axis
of 2^20 + 3 samples (every coefficient checked against the spline's own equations, and
``funcs.sample_bspline`` through the samples at points spread over the axis), and
``scale_and_translate_into`` from 2^19 + 1 to 2^20 + 3 samples inside ``ti.ad.Tape`` (the
values and the three gradients against the NumPy functions, which the CI tests hold against
JAX), on every arch the suite runs (each test in a new runtime of its own: fields live as
long as their runtime)."""

import time

import numpy as np
import pytest

import tiinterp
from tests.stress.helpers import ROW_RTOL
from tests.tolerances import relative_error, tolerance
from tiinterp._rules.bspline import fold
from tiinterp._runtime.taichi import ti

pytestmark = pytest.mark.stress


@pytest.mark.parametrize("boundary", ["reflect", "mirror", "periodic"])
def test_bspline_coefficients_along_2_20_samples(
    arch, boundary, quick, rng, taichi_on, record_property
):
    taichi_on(arch)
    n = 2**12 + 3 if quick else 2**20 + 3
    samples = rng.standard_normal((2, n)).astype(np.float32)
    src, dst = ti.field(ti.f32, (2, n)), ti.field(ti.f32, (2, n))
    src.from_numpy(samples)
    start = time.perf_counter()
    tiinterp.bspline_coefficients_into(src, dst, boundary)
    record_property("seconds", time.perf_counter() - start)
    c = dst.to_numpy().astype(np.float64)
    # Both axes are spline axes: undo the 2-sample axis first, then check the long one.
    k = np.arange(n)
    rows = (c[:, fold(k - 1, n, boundary)] + 4 * c + c[:, fold(k + 1, n, boundary)]) / 6
    two = np.arange(2)
    columns = (rows[fold(two - 1, 2, boundary)] + 4 * rows + rows[fold(two + 1, 2, boundary)]) / 6
    error = relative_error(columns, samples)
    record_property("equation_error", error)
    assert error <= ROW_RTOL

    points = np.stack([np.full(64, 1.0), np.linspace(0, n - 1, 64).round()], axis=1)
    points_field = ti.Vector.field(2, ti.f32, 64)
    points_field.from_numpy(points.astype(np.float32))
    values = ti.field(ti.f32, 64)

    @ti.kernel
    def sample(boundary: ti.template()):
        for i in values:
            values[i] = tiinterp.funcs.sample_bspline(dst, points_field[i], boundary)

    sample(boundary)
    expected = samples[1, points[:, 1].astype(int)]
    assert relative_error(values.to_numpy(), expected) <= ROW_RTOL


def test_scale_and_translate_into_2_20_rows_in_a_tape(arch, quick, rng, taichi_on, record_property):
    taichi_on(arch)
    n_in = 2**10 + 1 if quick else 2**19 + 1
    n_out = 2 * n_in + 1
    x = rng.standard_normal((4, n_in))
    w = rng.standard_normal((4, n_out))
    src = ti.field(ti.f64, (4, n_in), needs_grad=True)
    dst = ti.field(ti.f64, (4, n_out), needs_grad=True)
    weights = ti.field(ti.f64, (4, n_out))
    scale, translation = (ti.field(ti.f64, 1, needs_grad=True) for _ in range(2))
    loss = ti.field(ti.f64, (), needs_grad=True)
    src.from_numpy(x)
    weights.from_numpy(w)
    scale.from_numpy(np.array([2.0003]))
    translation.from_numpy(np.array([0.3711]))

    @ti.kernel
    def weigh():
        for i in ti.grouped(dst):
            loss[None] += weights[i] * dst[i]

    start = time.perf_counter()
    with ti.ad.Tape(loss=loss):
        tiinterp.scale_and_translate_into(src, dst, scale, translation, "lanczos3", spatial_axes=1)
        weigh()
    record_property("seconds", time.perf_counter() - start)
    call = ((1,), (2.0003,), (0.3711,), "lanczos3")
    expected = tiinterp.scale_and_translate(x, (4, n_out), *call)
    gradients = tiinterp.scale_and_translate_backward(w, x, *call)
    assert relative_error(dst.to_numpy(), expected) <= tolerance("reorder", "float64")
    for got, want in zip((src.grad, scale.grad, translation.grad), gradients, strict=True):
        assert relative_error(got.to_numpy(), want) <= tolerance("reorder", "float64")
