"""grid_sample_into: grid_sample on Taichi fields and ndarrays (grids of scalars or of
vectors), and inside ``ti.ad.Tape``, where its hand-written adjoint gives src.grad and
grid.grad: checked against grid_sample / grid_sample_backward on NumPy and central finite
differences, on every arch."""

import numpy as np
import pytest

import tiinterp
from tests.tolerances import tolerance
from tiinterp._runtime.session import supports_float64
from tiinterp._runtime.taichi import ti

TAICHI_DTYPES = {"float32": ti.f32, "float64": ti.f64}
FLOAT64 = pytest.param("float64", marks=pytest.mark.requires_float64)

# (src shape, grid points shape (N, *P), mode, padding, align_corners)
CASES = [
    ((2, 3, 6, 7), (2, 5, 4), "bilinear", "zeros", False),
    ((2, 3, 6, 7), (2, 5, 4), "bicubic", "border", True),
    ((1, 2, 5, 6), (1, 3, 8), "nearest", "reflection", False),
    ((1, 2, 4, 5, 6), (1, 3, 2, 4), "bilinear", "border", False),
]
IDS = [f"{len(c[0]) - 2}d-{c[2]}-{c[3]}" for c in CASES]


def make(storage, dtype, shape, n=None, needs_grad=False):
    real = TAICHI_DTYPES[dtype]
    if storage == "field":
        if n is None:
            return ti.field(real, shape, needs_grad=needs_grad)
        return ti.Vector.field(n, real, shape, needs_grad=needs_grad)
    element = real if n is None else ti.types.vector(n, real)
    return ti.ndarray(element, shape, needs_grad=needs_grad)


def arrays(storage, dtype, case, grid_as, needs_grad=False, rng=None):
    src_shape, points, *_ = case
    dims = len(src_shape) - 2
    src = make(storage, dtype, src_shape, needs_grad=needs_grad)
    grid = (
        make(storage, dtype, points, dims, needs_grad)
        if grid_as == "vectors"
        else make(storage, dtype, (*points, dims), needs_grad=needs_grad)
    )
    dst = make(storage, dtype, src_shape[:2] + points[1:], needs_grad=needs_grad)
    x = rng.standard_normal(src_shape).astype(dtype)
    g = (1.2 * rng.random((*points, dims)) - 0.6).astype(dtype)
    src.from_numpy(x)
    grid.from_numpy(g)
    return src, grid, dst, x, g


@pytest.mark.parametrize("grid_as", ["vectors", "scalars"])
@pytest.mark.parametrize("storage", ["field", "ndarray"])
@pytest.mark.parametrize("dtype", ["float32", FLOAT64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_equal_grid_sample(arch, rng, case, dtype, storage, grid_as):
    src, grid, dst, x, g = arrays(storage, dtype, case, grid_as, rng=rng)
    _, _, mode, padding, align_corners = case
    assert tiinterp.grid_sample_into(src, grid, dst, mode, padding, align_corners) is dst
    expected = tiinterp.grid_sample(x, g, mode, padding, align_corners)
    np.testing.assert_allclose(dst.to_numpy(), expected, rtol=0, atol=tolerance("tape", dtype))
    np.testing.assert_array_equal(src.to_numpy(), x)
    np.testing.assert_array_equal(grid.to_numpy(), g)


@ti.kernel
def weighted_sum(dst: ti.template(), weights: ti.template(), loss: ti.template()):
    for i in ti.grouped(dst):
        loss[None] += weights[i] * dst[i]


@pytest.mark.parametrize("grid_as", ["vectors", "scalars"])
@pytest.mark.parametrize("dtype", ["float32", FLOAT64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tape_gradients_match_grid_sample_backward(arch, rng, case, dtype, grid_as):
    assert dtype != "float64" or supports_float64(), f"{arch}: float64 expected"
    src, grid, dst, x, g = arrays("field", dtype, case, grid_as, needs_grad=True, rng=rng)
    _, _, mode, padding, align_corners = case
    w = rng.standard_normal(dst.shape).astype(dtype)
    weights = make("field", dtype, dst.shape)
    weights.from_numpy(w)
    loss = ti.field(TAICHI_DTYPES[dtype], (), needs_grad=True)

    def forward():
        tiinterp.grid_sample_into(src, grid, dst, mode, padding, align_corners)
        weighted_sum(dst, weights, loss)

    with ti.ad.Tape(loss=loss):
        forward()
    expected_input, expected_grid = tiinterp.grid_sample_backward(
        w, x, g, mode, padding, align_corners
    )
    for got, expected in ((src.grad, expected_input), (grid.grad, expected_grid)):
        scale = max(1.0, float(np.abs(expected).max()))
        assert np.abs(got.to_numpy() - expected).max() <= tolerance("tape", dtype) * scale

    if dtype == "float64":
        analytic_input, analytic_grid = src.grad.to_numpy(), grid.grad.to_numpy()
        for field, value, analytic in ((src, x, analytic_input), (grid, g, analytic_grid)):
            direction = rng.standard_normal(value.shape)
            step = 1e-6
            losses = []
            for sign in (1, -1):
                field.from_numpy(value + sign * step * direction)
                loss[None] = 0
                forward()
                losses.append(loss[None])
            field.from_numpy(value)
            numeric = (losses[0] - losses[1]) / (2 * step)
            expected = float(np.sum(analytic * direction))
            assert abs(numeric - expected) <= tolerance("tape_finite_difference", dtype) * max(
                1.0, abs(expected)
            )


def test_only_the_arrays_with_gradients_get_them(arch, rng):
    """A fixed image warped by a learnable grid: src has no gradient buffer."""
    case = CASES[0]
    src, _, _, x, g = arrays("field", "float32", case, "vectors", rng=rng)
    grid = make("field", "float32", case[1], 2, needs_grad=True)
    dst = make("field", "float32", src.shape[:2] + case[1][1:], needs_grad=True)
    grid.from_numpy(g)
    ones = make("field", "float32", dst.shape)
    ones.fill(1)
    loss = ti.field(ti.f32, (), needs_grad=True)
    with ti.ad.Tape(loss=loss):
        tiinterp.grid_sample_into(src, grid, dst)
        weighted_sum(dst, ones, loss)
    _, expected = tiinterp.grid_sample_backward(np.ones(dst.shape, np.float32), x, g)
    np.testing.assert_allclose(grid.grad.to_numpy(), expected, rtol=0, atol=1e-5)


@pytest.mark.requires_autodiff
def test_ndarrays_in_a_tape(arch, rng):
    case = CASES[0]
    src, grid, dst, x, g = arrays("ndarray", "float64", case, "vectors", True, rng)
    w = rng.standard_normal(dst.shape)
    weights = make("ndarray", "float64", dst.shape)
    weights.from_numpy(w)
    loss = ti.ndarray(ti.f64, (), needs_grad=True)

    @ti.kernel
    def weighted(dst: ti.types.ndarray(), w: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in ti.grouped(dst):
            loss[None] += w[i] * dst[i]

    for a in (src, grid, dst):
        a.grad.fill(0)
    with ti.ad.Tape(loss=loss):
        tiinterp.grid_sample_into(src, grid, dst)
        weighted(dst, weights, loss)
    expected_input, expected_grid = tiinterp.grid_sample_backward(w, x, g)
    np.testing.assert_allclose(src.grad.to_numpy(), expected_input, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grid.grad.to_numpy(), expected_grid, rtol=0, atol=1e-12)


@pytest.mark.without_autodiff
def test_ndarrays_in_a_tape_are_refused_without_ndarray_autodiff(arch, rng):
    src, grid, dst, *_ = arrays("ndarray", "float32", CASES[0], "vectors", True, rng)
    loss = ti.field(ti.f32, (), needs_grad=True)
    with (
        pytest.raises(ValueError, match=r"dst: expected Taichi fields inside ti\.ad\.Tape"),
        ti.ad.Tape(loss=loss),
    ):
        tiinterp.grid_sample_into(src, grid, dst)


def test_bad_arguments_are_refused_clearly(arch, rng):
    src, grid, dst, *_ = arrays("field", "float32", CASES[0], "vectors", rng=rng)
    with pytest.raises(TypeError, match=r"src: expected a Taichi scalar field or ndarray, got"):
        tiinterp.grid_sample_into(ti.Vector.field(2, ti.f32, src.shape), grid, dst)
    with pytest.raises(TypeError, match=r"src: expected a Taichi field or ndarray"):
        tiinterp.grid_sample_into(np.zeros(src.shape, np.float32), grid, dst)
    with pytest.raises(TypeError, match=r"grid: expected the dtype of src \(f32\), got f64"):
        tiinterp.grid_sample_into(src, ti.Vector.field(2, ti.f64, grid.shape), dst)
    with pytest.raises(ValueError, match=r"grid: expected \(N, H_out, W_out, 2\) scalars or"):
        tiinterp.grid_sample_into(src, ti.Vector.field(3, ti.f32, grid.shape), dst)
    with pytest.raises(ValueError, match=r"grid: expected N = 2 as in src"):
        tiinterp.grid_sample_into(src, ti.Vector.field(2, ti.f32, (1, 5, 4)), dst)
    with pytest.raises(ValueError, match=r"dst: expected shape \(2, 3, 5, 4\)"):
        tiinterp.grid_sample_into(src, grid, ti.field(ti.f32, (2, 3, 4, 5)))
    with pytest.raises(ValueError, match=r"src: expected a 4-D \(N, C, H, W\) or 5-D"):
        tiinterp.grid_sample_into(ti.field(ti.f32, (3, 4)), grid, dst)
    with pytest.raises(ValueError, match=r"padding_mode: expected one of"):
        tiinterp.grid_sample_into(src, grid, dst, padding_mode="wrap")
    loss = ti.field(ti.f32, (), needs_grad=True)
    with (
        pytest.raises(ValueError, match=r"dst: expected gradients inside ti\.ad\.Tape"),
        ti.ad.Tape(loss=loss),
    ):
        tiinterp.grid_sample_into(src, grid, dst)
