"""PyTorch's nearest / nearest-exact source indices (docs/semantics.md, "The modes"), bit for
bit against live ``F.interpolate``: which kernel PyTorch 2.13's CPU op takes (its 2-D ops up
to ``out_h + out_w = 128`` compute indices pointwise, with ``nearest``'s ``out == in`` and
``out == 2 * in`` special cases, in float32; everything else builds index tables in the
data's dtype, with no special case) and the scale it is given (``1 / scale_factor`` unless
``recompute_scale_factor=True``).

The input's values are their own flat index, so the output reveals the source index of
every output. The sweep reads the indices from tiinterp's plan (pure Python, no kernel); the
regressions, a sample of the sweep and the adjoint run ``tiinterp.interpolate`` on every
arch.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tiinterp
from tiinterp._rules import validate as _validate
from tiinterp._rules.plan import forward_passes

MODES = ("nearest", "nearest-exact")
DTYPES = (np.float32, np.float64)


def ramp(in_spatial, dtype):
    """(1, 1, *in_spatial), every value its own flat index (exact in float32 below 2^24)."""
    return np.arange(math.prod(in_spatial), dtype=dtype).reshape((1, 1, *in_spatial))


def torch_indices(in_spatial, dtype, mode, **kwargs):
    y = F.interpolate(torch.from_numpy(ramp(in_spatial, dtype)), mode=mode, **kwargs)
    return y[0, 0].numpy().astype(np.int64)


def plan_indices(in_spatial, dtype, mode, **kwargs):
    """The flat input index each output of ``tiinterp.interpolate(x, mode=mode, **kwargs)``
    reads, from its plan's tap tables (identity axes have no pass)."""
    x, _, checked_dtype = _validate.float_array(np.zeros((1, 1, *in_spatial), dtype), "input")
    options = (
        kwargs.get("size"),
        kwargs.get("scale_factor"),
        mode,
        None,
        kwargs.get("recompute_scale_factor"),
        False,
    )
    spec = _validate.forward_spec(x, checked_dtype, options)
    index = np.arange(math.prod(in_spatial)).reshape(in_spatial)
    for p in forward_passes(spec):
        assert p.taps.is_gather
        index = np.take(index, p.taps.index[:, 0], axis=p.axis - 2)
    return index


# The findings of issue 44 (each but the last failed before this rule): id, (input spatial
# shape, dtype, mode, F.interpolate arguments).
REGRESSIONS = {
    # nearest with a scale factor that keeps out == in, or gives out == 2 * in: PyTorch's
    # tables still use floor(o * (1 / scale_factor)); only its pointwise 2-D kernel copies
    # or halves.
    "1d-x1.05": ((16,), np.float64, "nearest", dict(scale_factor=1.05)),
    "3d-x1.05": ((4, 4, 16), np.float64, "nearest", dict(scale_factor=1.05)),
    "2d-x2.01": ((100, 100), np.float64, "nearest", dict(scale_factor=2.01)),
    "2d-x2.01-f32": ((100, 100), np.float32, "nearest", dict(scale_factor=2.01)),
    # 2-D nearest-exact: float32 pointwise only while out_h + out_w <= 128 (here 141).
    "2d-41x100": ((2, 1), np.float64, "nearest-exact", dict(size=(41, 100))),
    # The tables compute in the data's dtype: float32 rounds 2 -> 164 differently (dst 82).
    "1d-2to164-f32": ((2,), np.float32, "nearest", dict(size=164)),
    "2d-2to164-f32": ((1, 2), np.float32, "nearest", dict(size=(1, 164))),
    # nearest-exact's tables compute max(s * (o + 0.5) - 0.5, 0) + 0.5 in float32 for float32
    # data (2 -> 61: output 30 reads 0, 1 in float64), the first sum one fused multiply-add
    # (2 -> 41: output 20 reads 1; rounding the product first gives 0). The fused case
    # passed before (float64 arithmetic happened to agree): it guards the fma.
    "1d-2to61-f32": ((2,), np.float32, "nearest-exact", dict(size=61)),
    "1d-2to41-f32": ((2,), np.float32, "nearest-exact", dict(size=41)),
}
ARGS = "in_spatial, dtype, mode, kwargs"


def regression_params(on_arch):
    """The cases as pytest params; on an arch, the float64 ones require float64."""
    return [
        pytest.param(
            *case,
            id=name,
            marks=pytest.mark.requires_float64 if on_arch and case[1] is np.float64 else (),
        )
        for name, case in REGRESSIONS.items()
    ]


@pytest.mark.parametrize(ARGS, regression_params(on_arch=True))
def test_regressions_through_interpolate(arch, in_spatial, dtype, mode, kwargs):
    expected = torch_indices(in_spatial, dtype, mode, **kwargs)
    y = tiinterp.interpolate(ramp(in_spatial, dtype), mode=mode, **kwargs)
    np.testing.assert_array_equal(y[0, 0].astype(np.int64), expected)


@pytest.mark.parametrize(ARGS, regression_params(on_arch=False))
def test_regressions_in_the_plan(in_spatial, dtype, mode, kwargs):
    expected = torch_indices(in_spatial, dtype, mode, **kwargs)
    np.testing.assert_array_equal(plan_indices(in_spatial, dtype, mode, **kwargs), expected)


def test_adjoint_stays_the_transpose_of_the_forward(arch):
    """PyTorch's nearest backward uses its pointwise rule everywhere (``out == in`` copies
    the gradient even where its forward, as here, does not); tiinterp's gradient is the
    adjoint of its forward (docs/semantics.md, "Backward")."""
    x = ramp((16,), np.float32)
    g = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 16)
    index = tiinterp.interpolate(x, scale_factor=1.05, mode="nearest")[0, 0].astype(np.int64)
    expected = np.zeros(16, np.float32)
    np.add.at(expected, index, g[0, 0])
    got = tiinterp.interpolate_backward(g, x.shape, mode="nearest", scale_factor=1.05)
    np.testing.assert_array_equal(got[0, 0], expected)


def sweep_cases(count, seed):
    """``count`` random calls: 1-D to 3-D, both modes and dtypes, ``size`` or
    ``scale_factor`` (random, rounded to 2 digits, or one of the special ratios) with
    ``recompute_scale_factor`` None, False or True. Sizes are small, and 2-D ones
    straddle ``out_h + out_w = 128``."""
    rng = np.random.default_rng(seed)
    special = (1.0, 2.0, 1.05, 2.01, 0.5, 1.5, 3.0, 0.99, 1.99, 0.7)
    cases = []
    while len(cases) < count:
        dims = int(rng.integers(1, 4))
        mode = MODES[int(rng.integers(2))]
        dtype = DTYPES[int(rng.integers(2))]
        largest = {1: 260, 2: 100, 3: 10}[dims]
        in_spatial = tuple(int(n) for n in rng.integers(1, largest, size=dims))
        kind = int(rng.integers(4))
        if kind == 0:
            size = tuple(int(n) for n in rng.integers(1, int(largest * 1.6), size=dims))
            kwargs = dict(size=size)
        else:
            if kind == 1:
                factors = rng.uniform(0.3, 3.0, size=dims)
            elif kind == 2:
                factors = np.round(rng.uniform(0.3, 3.0, size=dims), 2)
            else:
                factors = rng.choice(special, size=dims)
            factors = tuple(float(f) for f in factors)
            if any(math.floor(n * f) < 1 for n, f in zip(in_spatial, factors, strict=True)):
                continue
            recompute = (None, False, True)[int(rng.integers(3))]
            kwargs = dict(scale_factor=factors, recompute_scale_factor=recompute)
        cases.append((in_spatial, dtype, mode, kwargs))
    return cases


def boundary_cases():
    """2-D calls on both sides of ``out_h + out_w = 128``, by size and by scale factors that
    keep ``out == in`` or give ``out == 2 * in`` (where the two kernels differ), and the
    same axes in 1-D and 3-D calls."""
    cases = []
    for mode in MODES:
        for dtype in DTYPES:
            for total in (127, 128, 129, 130):
                cases.append(((2, 3), dtype, mode, dict(size=(total - 82, 82))))
                cases.append(((1, 41), dtype, mode, dict(size=(1, total - 1))))
            for n, factor in ((64, 1.01), (65, 1.01), (32, 2.01), (33, 2.01), (40, 2.02)):
                for recompute in (None, True):
                    kwargs = dict(scale_factor=factor, recompute_scale_factor=recompute)
                    cases.append(((n, n), dtype, mode, kwargs))
                    cases.append(((n,), dtype, mode, kwargs))
                    cases.append(((3, 2, n), dtype, mode, kwargs))
    return cases


SWEEP = sweep_cases(3000, seed=44) + boundary_cases()


def test_sweep_of_plan_indices_equals_pytorch():
    mismatched = [
        case
        for case in SWEEP
        if not np.array_equal(
            plan_indices(*case[:3], **case[3]), torch_indices(*case[:3], **case[3])
        )
    ]
    assert mismatched == [], f"{len(mismatched)} of {len(SWEEP)} calls differ: {mismatched[:5]}"


def test_sweep_sample_through_interpolate(arch):
    """A sample of the sweep through the kernels on every arch (float32: every arch has it)."""
    sample = [case for case in sweep_cases(300, seed=45) if case[1] is np.float32][:40]
    for in_spatial, dtype, mode, kwargs in sample:
        y = tiinterp.interpolate(ramp(in_spatial, dtype), mode=mode, **kwargs)
        expected = torch_indices(in_spatial, dtype, mode, **kwargs)
        np.testing.assert_array_equal(y[0, 0].astype(np.int64), expected, err_msg=repr(kwargs))
