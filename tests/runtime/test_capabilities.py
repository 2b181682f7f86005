"""What an arch without a capability gives instead: a clear error, each tested once.

Taichi 1.7.4 has right ndarray autodiff only on "cpu" and "cuda", taichi-forge on "vulkan"
too (the capabilities table, tiinterp/_runtime/capabilities.py). The tests that need it carry
``@pytest.mark.requires_autodiff`` and are deselected on every other arch (tests/conftest.py);
the tests here carry ``@pytest.mark.without_autodiff`` and run on exactly those other archs
(Vulkan on CI), checking the refusals that replace the autodiff results there:
``method="autodiff"`` of interpolate_backward and grid_sample_backward, and Taichi ndarrays
inside ``ti.ad.Tape`` for interpolate_into (taichi-dev/taichi#8524).

The float64 refusal (a device without 64-bit floats, where ``requires_float64`` tests skip) is
tested on every arch by
tests/runtime/test_runtime.py::test_float64_support_is_reported_and_enforced.
"""

import re

import numpy as np
import pytest
import torch

import tiinterp
from tests.grid_cases import grid_inputs
from tiinterp._runtime.session import AUTODIFF_ARCHS
from tiinterp._runtime.taichi import BACKEND, ti


def autodiff_refusal(arch):
    """The RuntimeError of ``method="autodiff"`` on ``arch``: it names the archs that have
    autodiff, the arch in use and the way out."""
    return (
        rf"method='autodiff': {BACKEND} differentiates ndarrays only on "
        rf"{re.escape(str(AUTODIFF_ARCHS))}.*"
        rf"'{re.escape(arch)}'.*use method='adjoint'"
    )


def as_kind(array, kind):
    if kind == "numpy":
        return array
    if kind == "torch":
        return torch.from_numpy(array)
    taichi_array = ti.ndarray(ti.f32 if array.dtype == np.float32 else ti.f64, array.shape)
    taichi_array.from_numpy(array)
    return taichi_array


@pytest.mark.without_autodiff
@pytest.mark.parametrize("kind", ["numpy", "taichi", "torch"])
@pytest.mark.parametrize(
    "input_size, out_spatial, mode, dtype",
    [
        ((2, 3, 9), (14,), "linear", "float32"),
        ((2, 3, 9, 12), (14, 5), "lanczos3", "float32"),
        ((2, 3, 9, 12), (4, 20), "bicubic", "float64"),
        ((2, 1, 4, 5, 6), (6, 3, 7), "trilinear", "float64"),
    ],
)
def test_interpolate_backward_refuses_autodiff(arch, kind, input_size, out_spatial, mode, dtype):
    g = np.random.default_rng(3).standard_normal(input_size[:2] + out_spatial).astype(dtype)
    with pytest.raises(RuntimeError, match=autodiff_refusal(arch)):
        tiinterp.interpolate_backward(as_kind(g, kind), input_size, mode=mode, method="autodiff")
    # The adjoint, the default, still answers there.
    gx = tiinterp.interpolate_backward(as_kind(g, kind), input_size, mode=mode)
    assert tuple(gx.shape) == input_size


@pytest.mark.without_autodiff
@pytest.mark.parametrize(
    "dims, mode, dtype",
    [(2, "bicubic", "float32"), (2, "bilinear", "float64"), (3, "nearest", "float32")],
)
def test_grid_sample_backward_refuses_autodiff(arch, dims, mode, dtype):
    x, grid, g = grid_inputs(dims, mode, "zeros", False, "random", dtype)
    options = dict(mode=mode, padding_mode="zeros", align_corners=False)
    with pytest.raises(RuntimeError, match=autodiff_refusal(arch)):
        tiinterp.grid_sample_backward(g, x, grid, **options, method="autodiff")
    gx, gg = tiinterp.grid_sample_backward(g, x, grid, **options)
    assert gx.shape == x.shape and gg.shape == grid.shape


@pytest.mark.without_autodiff
@pytest.mark.parametrize(
    "src_kind, dst_kind", [("ndarray", "ndarray"), ("field", "ndarray"), ("ndarray", "field")]
)
def test_interpolate_into_refuses_ndarrays_inside_a_tape(arch, src_kind, dst_kind):
    """Measured with Taichi 1.7.4 on Vulkan: a Tape over ndarray kernels corrupts the
    pipeline's values and gradients, so interpolate_into refuses them (fields work)."""

    def make(kind, shape):
        return (ti.field if kind == "field" else ti.ndarray)(ti.f32, shape, needs_grad=True)

    src, dst = make(src_kind, (2, 2, 7, 9)), make(dst_kind, (2, 2, 11, 5))
    loss = make("ndarray" if "ndarray" == src_kind == dst_kind else "field", ())
    message = (
        rf"src/dst: expected Taichi fields inside ti.ad.Tape on arch '{re.escape(arch)}'"
        r".*got an ndarray"
    )
    with pytest.raises(ValueError, match=message), ti.ad.Tape(loss=loss):
        tiinterp.interpolate_into(src, dst, mode="bilinear")
