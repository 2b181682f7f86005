"""grid_sample on every array kind (Taichi ndarrays take the kernels' N-D layout, host
arrays a flattened view of the same data) and grid_sample_backward's ``out=``."""

import numpy as np
import pytest
import torch

import tiinterp
from tests.grid_cases import grid_inputs
from tests.tolerances import relative_error, tolerance
from tiinterp._runtime.taichi import ti

CASES = [
    (2, "bilinear", "zeros", False),
    (2, "bicubic", "reflection", True),
    (2, "nearest", "border", False),
    (3, "bilinear", "border", True),
    (3, "nearest", "reflection", False),
]
IDS = [f"{dims}d-{mode}-{padding}-{align}" for dims, mode, padding, align in CASES]


def to_taichi(array):
    result = ti.ndarray(ti.f32 if array.dtype == np.float32 else ti.f64, array.shape)
    result.from_numpy(array)
    return result


def options(mode, padding, align_corners):
    return dict(mode=mode, padding_mode=padding, align_corners=align_corners)


@pytest.mark.parametrize("grid_kind", ["random", "nan"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dims, mode, padding, align_corners", CASES, ids=IDS)
def test_taichi_ndarrays_give_the_numpy_numbers(
    arch, dims, mode, padding, align_corners, dtype, grid_kind
):
    """The same kernels with N-D instead of flattened indexing: Taichi compiles them apart,
    and its fast-math code generation may order a sum's float operations differently."""
    x, grid, g = grid_inputs(dims, mode, padding, align_corners, grid_kind, dtype)
    kwargs = options(mode, padding, align_corners)
    y = tiinterp.grid_sample(x, grid, **kwargs)
    gx, gg = tiinterp.grid_sample_backward(g, x, grid, **kwargs)
    y_ti = tiinterp.grid_sample(to_taichi(x), to_taichi(grid), **kwargs)
    gx_ti, gg_ti = tiinterp.grid_sample_backward(
        to_taichi(g), to_taichi(x), to_taichi(grid), **kwargs
    )
    for expected, actual in ((y, y_ti), (gx, gx_ti), (gg, gg_ti)):
        assert type(actual).__name__ == "ScalarNdarray"
        assert actual.dtype == (ti.f32 if dtype == "float32" else ti.f64)
        assert_same_numbers(actual.to_numpy(), expected, dtype)


def assert_same_numbers(actual, expected, dtype):
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = ~np.isnan(expected)
    if finite.any():
        error = relative_error(actual[finite], expected[finite])
        assert error <= tolerance("reorder", dtype), error


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("dims, mode, padding, align_corners", CASES, ids=IDS)
def test_taichi_ndarrays_autodiff(arch, dims, mode, padding, align_corners):
    x, grid, g = grid_inputs(dims, mode, padding, align_corners, "random", "float64")
    kwargs = options(mode, padding, align_corners)
    expected = tiinterp.grid_sample_backward(g, x, grid, **kwargs, method="autodiff")
    actual = tiinterp.grid_sample_backward(
        to_taichi(g), to_taichi(x), to_taichi(grid), **kwargs, method="autodiff"
    )
    for e, a in zip(expected, actual, strict=True):
        assert_same_numbers(a.to_numpy(), e, "float64")


def check_backward_writes_into_out(kind, method):
    x, grid, g = grid_inputs(2, "bicubic", "border", False, "random", "float32")
    kwargs = options("bicubic", "border", False)
    expected = tiinterp.grid_sample_backward(g, x, grid, **kwargs, method=method)
    convert = {"numpy": np.array, "torch": torch.from_numpy, "taichi": to_taichi}[kind]
    # Garbage in both buffers: the adjoint accumulates into grad_input, which must be zeroed.
    out = (
        convert(np.full(x.shape, 7.0, np.float32)),
        convert(np.full(grid.shape, 7.0, np.float32)),
    )
    returned = tiinterp.grid_sample_backward(
        convert(g), convert(x), convert(grid), **kwargs, method=method, out=out
    )
    assert returned[0] is out[0] and returned[1] is out[1]
    for actual, e in zip(out, expected, strict=True):
        if kind == "taichi":  # compiled apart (see above)
            assert_same_numbers(actual.to_numpy(), e, "float32")
        else:
            np.testing.assert_array_equal(np.asarray(actual), e)


@pytest.mark.parametrize("kind", ["numpy", "torch", "taichi"])
def test_backward_writes_into_out(arch, kind):
    check_backward_writes_into_out(kind, "adjoint")


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("kind", ["numpy", "torch", "taichi"])
def test_backward_autodiff_writes_into_out(arch, kind):
    check_backward_writes_into_out(kind, "autodiff")


def test_backward_out_with_an_empty_output_is_zeroed(arch):
    x = np.ones((1, 2, 3, 3), np.float32)
    grid = np.zeros((1, 0, 4, 2), np.float32)
    g = np.zeros((1, 2, 0, 4), np.float32)
    out = (np.full(x.shape, 5.0, np.float32), np.full(grid.shape, 5.0, np.float32))
    gx, gg = tiinterp.grid_sample_backward(g, x, grid, out=out)
    assert gx is out[0] and gg is out[1]
    assert not gx.any() and gg.shape == grid.shape


def test_forward_out_on_taichi_ndarrays(arch):
    x, grid, _ = grid_inputs(2, "bilinear", "zeros", True, "random", "float64")
    out = ti.ndarray(ti.f64, (2, 3, 4, 6))
    returned = tiinterp.grid_sample(to_taichi(x), to_taichi(grid), align_corners=True, out=out)
    assert returned is out
    np.testing.assert_array_equal(out.to_numpy(), tiinterp.grid_sample(x, grid, align_corners=True))


def _bad_out(x, grid):
    good_x, good_grid = np.zeros_like(x), np.zeros_like(grid)
    return [
        (
            good_x,
            TypeError,
            r"out: expected a pair \(grad_input, grad_grid\) of arrays, "
            r"got ndarray",
        ),
        ((good_x,), TypeError, r"out: expected a pair .* got tuple of length 1"),
        (
            (good_x, np.zeros((1, 1), np.float32)),
            ValueError,
            r"out\[1\]: expected shape \(2, 4, 6, 2\) and dtype float32, got shape \(1, 1\)",
        ),
        (
            (good_x, good_grid.astype(np.float64)),
            ValueError,
            r"out\[1\]: expected shape .* and dtype float32, got .* dtype float64",
        ),
        ((x, good_grid), ValueError, r"out\[0\]: .* got one that is overlapping the input"),
        ((good_x, grid), ValueError, r"out\[1\]: .* got one that is overlapping the input"),
        (
            (np.zeros(x.shape, np.float32, order="F"), good_grid),
            ValueError,
            r"out\[0\]: .* got one that is not C-contiguous",
        ),
        (
            (torch.zeros(x.shape), good_grid),
            TypeError,
            r"out\[0\]: expected the same kind of array as the input \(numpy\), got Tensor",
        ),
    ]


@pytest.mark.parametrize("case", range(8))
def test_backward_refuses_unusable_out(arch, case):
    x, grid, g = grid_inputs(2, "bilinear", "zeros", False, "random", "float32")
    out, error, message = _bad_out(x, grid)[case]
    before = [np.array(a) for a in (x, grid, g)]
    with pytest.raises(error, match=message):
        tiinterp.grid_sample_backward(g, x, grid, out=out)
    for a, b in zip((x, grid, g), before, strict=True):
        np.testing.assert_array_equal(a, b)


def test_backward_refuses_one_buffer_for_both_gradients(arch):
    x = np.zeros((1, 1, 2, 2), np.float32)
    grid = np.zeros((1, 1, 2, 2), np.float32)  # the same shape as x
    g = np.ones((1, 1, 1, 2), np.float32)
    shared = np.zeros_like(x)
    with pytest.raises(ValueError, match=r"out\[1\]: .* overlapping the input"):
        tiinterp.grid_sample_backward(g, x, grid, out=(shared, shared))


def test_taichi_ndarrays_past_2_19_points(arch):
    """525,625 points (more than 2^19) through the N-D indexing, forward and adjoint, against
    the flattened NumPy path; `make stress` runs a grid of 2,147,352,578 elements."""
    rng = np.random.default_rng(19)
    x = rng.standard_normal((1, 2, 9, 11)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (1, 725, 725, 2)).astype(np.float32)
    g = rng.standard_normal((1, 2, 725, 725)).astype(np.float32)
    kwargs = options("bilinear", "reflection", False)
    y = tiinterp.grid_sample(to_taichi(x), to_taichi(grid), **kwargs)
    gx, gg = tiinterp.grid_sample_backward(to_taichi(g), to_taichi(x), to_taichi(grid), **kwargs)
    expected = (
        tiinterp.grid_sample(x, grid, **kwargs),
        *tiinterp.grid_sample_backward(g, x, grid, **kwargs),
    )
    for actual, e in zip((y, gx, gg), expected, strict=True):
        assert_same_numbers(actual.to_numpy(), e, "float32")
