"""antialias, area, lanczos5, and 1-D / 3-D inputs: forward and adjoint against the float64
oracle and the PyTorch / JAX goldens, the dot-product identity, and autodiff agreement."""

import numpy as np
import pytest

import tiinterp
from tests import oracle
from tests.cases import coordinate_factors, output_hw
from tests.cases_nd import nd_cases, nd_inputs, nd_key
from tests.tolerances import relative_error, tolerance

CASES = [
    pytest.param(*case, id=nd_key(case[0], case[3], case[4], case[5], case[7]))
    for case in nd_cases()
]
ARGS = "geometry_id, spatial, kwargs, mode, align_corners, antialias, reference, dtype"


def backward_kwargs(kwargs):
    return {k: v for k, v in kwargs.items() if k != "size"}


@pytest.mark.parametrize(ARGS, CASES)
def test_forward_and_adjoint_match_oracle_and_reference(
    arch, golden, geometry_id, spatial, kwargs, mode, align_corners, antialias, reference, dtype
):
    references = golden("resize_modes")
    key = nd_key(geometry_id, mode, align_corners, antialias, dtype)
    x, g = nd_inputs(key, spatial, kwargs, dtype)
    call = dict(mode=mode, align_corners=align_corners, antialias=antialias)
    y = tiinterp.interpolate(x, **call, **kwargs)
    gx = tiinterp.interpolate_backward(g, x.shape, **call, **backward_kwargs(kwargs))
    assert y.shape == x.shape[:2] + output_hw(spatial, kwargs) and y.dtype == x.dtype

    factors = coordinate_factors(spatial, kwargs)
    expected = oracle.resize(x, y.shape[2:], mode, bool(align_corners), factors, antialias)
    assert relative_error(y, expected) <= tolerance("oracle", dtype)
    expected = oracle.resize_adjoint(g, spatial, mode, bool(align_corners), factors, antialias)
    assert relative_error(gx, expected) <= tolerance("oracle", dtype)
    if reference is not None:
        assert relative_error(y, references[key + "|y"]) <= tolerance("modes_golden", dtype)
        assert relative_error(gx, references[key + "|gx"]) <= tolerance("modes_golden", dtype)

    lhs, rhs = np.sum(y.astype(np.float64) * g), np.sum(x.astype(np.float64) * gx)
    scale = np.sum(np.abs(y.astype(np.float64) * g))
    assert abs(lhs - rhs) <= tolerance("dot", dtype) * scale


@pytest.mark.requires_autodiff
@pytest.mark.parametrize(ARGS, CASES)
def test_autodiff_agrees_with_adjoint(
    arch, geometry_id, spatial, kwargs, mode, align_corners, antialias, reference, dtype
):
    key = nd_key(geometry_id, mode, align_corners, antialias, dtype)
    x, g = nd_inputs(key, spatial, kwargs, dtype)
    call = dict(
        mode=mode, align_corners=align_corners, antialias=antialias, **backward_kwargs(kwargs)
    )
    adjoint = tiinterp.interpolate_backward(g, x.shape, **call)
    autodiff = tiinterp.interpolate_backward(g, x.shape, **call, method="autodiff")
    assert autodiff.shape == adjoint.shape and autodiff.dtype == adjoint.dtype
    assert relative_error(autodiff, adjoint) <= tolerance("reorder", dtype)


def test_golden_file_covers_every_case_with_a_reference(golden):
    references = golden("resize_modes")
    missing = [c.id for c in CASES if c.values[6] is not None and c.id + "|y" not in references]
    assert missing == []


def test_antialias_removes_aliasing_of_a_fine_pattern(arch):
    """A checkerboard of 1-pixel squares shrunk to 37% averages to flat grey with antialias
    (measured range <= 0.008); without it, sampling keeps near full-contrast aliases (>= 0.9)."""
    board = (np.indices((64, 64)).sum(axis=0) % 2).astype(np.float64)[None, None]
    for mode in ("bilinear", "bicubic", "lanczos3", "lanczos5"):
        sharp = tiinterp.interpolate(board, scale_factor=0.37, mode=mode)
        smooth = tiinterp.interpolate(board, scale_factor=0.37, mode=mode, antialias=True)
        assert np.ptp(smooth[..., 3:-3, 3:-3]) < 0.02 and np.ptp(sharp[..., 3:-3, 3:-3]) > 0.8, mode


def test_bspline_spreads_a_nan_over_its_56_taps_only(arch):
    """docs/semantics.md: a NaN reaches the outputs whose taps ``floor(src) - 27 ..
    floor(src) + 28`` read it (SciPy's recursive prefilter spreads it along the line)."""
    x = np.linspace(-1.0, 1.0, 200)[None, None]
    x[0, 0, 100] = np.nan
    y = tiinterp.interpolate(x, size=400, mode="bspline")[0, 0]
    src = (np.arange(400) + 0.5) / 2 - 0.5
    reads = (np.floor(src) - 27 <= 100) & (np.floor(src) + 28 >= 100)
    np.testing.assert_array_equal(np.isnan(y), reads)
