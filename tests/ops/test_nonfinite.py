"""NaN and Inf spread exactly as in PyTorch, forward and backward.

One NaN, +Inf or -Inf is put at a corner, in the middle or on the far edge of the input (for
the forward) or of ``grad_output`` (for the backward); the positions of NaN, +Inf and -Inf in
the result must equal PyTorch's, and the finite values must agree. This pins down the tap
tables' structure: a border tap clamped onto a sample another tap also reads, and a tap of
weight 0, still count (``0 * inf`` is NaN), as PyTorch's kernels read them.

Not covered, a known difference: where an antialiased bicubic window puts a tap exactly one
ulp past ``|x| = 1`` (e.g. 17 -> 5 samples, output 1, input 8), PyTorch's fused
multiply-adds give a weight of about 1e-32 and tiinterp's weight is exactly 0, so an Inf
there gives Inf in PyTorch and NaN in tiinterp.
"""

import itertools
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tiinterp
from tests.tolerances import relative_error, tolerance

GEOMETRIES = {
    1: [((7,), (11,)), ((13,), (6,)), ((12,), (4,)), ((7,), (7,))],
    2: [
        ((5, 7), (11, 16)),
        ((13, 12), (6, 5)),
        ((9, 9), (4, 4)),
        ((6, 5), (1, 1)),
        ((4, 4), (8, 8)),
        ((7, 6), (7, 6)),
        ((7, 6), (7, 12)),
        ((12, 10), (5, 4)),
    ],
    3: [((3, 4, 5), (5, 2, 7)), ((6, 4, 4), (3, 8, 2)), ((3, 4, 5), (3, 4, 5))],
}
MODES = {
    1: [
        ("nearest", None, False),
        ("nearest-exact", None, False),
        ("area", None, False),
        ("linear", False, False),
        ("linear", True, False),
    ],
    2: [
        ("nearest", None, False),
        ("nearest-exact", None, False),
        ("area", None, False),
        ("bilinear", False, False),
        ("bilinear", True, False),
        ("bicubic", False, False),
        ("bicubic", True, False),
        ("bilinear", False, True),
        ("bicubic", False, True),
    ],
    3: [
        ("nearest", None, False),
        ("nearest-exact", None, False),
        ("area", None, False),
        ("trilinear", False, False),
        ("trilinear", True, False),
    ],
}
CASES = [
    pytest.param(
        dims,
        spatial_in,
        spatial_out,
        mode,
        align_corners,
        antialias,
        dtype,
        id=f"{dims}d|{spatial_in}->{spatial_out}|{mode}|ac={align_corners}|aa={antialias}|{dtype}",
    )
    for dims, geometries in GEOMETRIES.items()
    for (spatial_in, spatial_out), (mode, align_corners, antialias), dtype in itertools.product(
        geometries, MODES[dims], ("float32", "float64")
    )
]
SPECIALS = (np.nan, np.inf, -np.inf)


def positions(spatial):
    return {
        "corner": (0, 0) + (0,) * len(spatial),
        "middle": (0, 1) + tuple(n // 2 for n in spatial),
        "edge": (0, 0) + tuple(n - 1 for n in spatial),
    }


def assert_same_nonfinite(actual, expected, dtype, what):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(
            test(actual), test(expected), err_msg=f"{what}: {test.__name__} differs"
        )
    finite = np.isfinite(expected)
    if finite.any():
        bound = tolerance("pytorch_nonfinite", dtype)
        assert relative_error(actual[finite], expected[finite]) <= bound, what


@pytest.mark.parametrize(
    "dims, spatial_in, spatial_out, mode, align_corners, antialias, dtype", CASES
)
def test_nan_and_inf_spread_as_in_pytorch(
    arch, dims, spatial_in, spatial_out, mode, align_corners, antialias, dtype
):
    call = dict(mode=mode, align_corners=align_corners, antialias=antialias)
    rng = np.random.default_rng(zlib.crc32(repr((spatial_in, spatial_out, call, dtype)).encode()))
    for special, (where, index) in itertools.product(SPECIALS, positions(spatial_in).items()):
        x = rng.standard_normal((1, 2) + spatial_in).astype(dtype)
        x[index] = special
        expected = F.interpolate(torch.from_numpy(x), size=spatial_out, **call)
        assert_same_nonfinite(
            tiinterp.interpolate(x, size=spatial_out, **call),
            expected.numpy(),
            dtype,
            f"forward, {special} at the {where}",
        )
    for special, (where, index) in itertools.product(SPECIALS, positions(spatial_out).items()):
        g = rng.standard_normal((1, 2) + spatial_out).astype(dtype)
        g[index] = special
        x = torch.zeros((1, 2) + spatial_in, dtype=getattr(torch, dtype), requires_grad=True)
        F.interpolate(x, size=spatial_out, **call).backward(torch.from_numpy(g))
        assert_same_nonfinite(
            tiinterp.interpolate_backward(g, x.shape, **call),
            x.grad.numpy(),
            dtype,
            f"backward, {special} at the {where}",
        )
