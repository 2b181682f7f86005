"""antialias, area, lanczos5, and 1-D / 3-D inputs: forward and adjoint against the float64
oracle and the PyTorch / JAX goldens, the dot-product identity, and autodiff agreement."""
import pathlib

import numpy as np
import pytest

import tiinterp
from tests import oracle
from tests.cases import coordinate_factors, output_hw
from tests.cases_nd import nd_cases, nd_inputs, nd_key
from tests.tolerances import DOT_TOL, ORACLE_TOL, REORDER_TOL, relative_error

GOLDEN = np.load(pathlib.Path(__file__).parent / "data" / "golden_resize_modes.npz")
# float32 against the references: PyTorch's float32 weights, JAX's float32 lanczos.
REFERENCE_TOL = {"float32": 1e-5, "float64": 1e-13}
CASES = [pytest.param(*case, id=nd_key(case[0], case[3], case[4], case[5], case[7]))
         for case in nd_cases()]
ARGS = "geometry_id, spatial, kwargs, mode, align_corners, antialias, reference, dtype"


def backward_kwargs(kwargs):
    return {k: v for k, v in kwargs.items() if k != "size"}


@pytest.mark.parametrize(ARGS, CASES)
def test_forward_and_adjoint_match_oracle_and_reference(
        arch, geometry_id, spatial, kwargs, mode, align_corners, antialias, reference, dtype):
    key = nd_key(geometry_id, mode, align_corners, antialias, dtype)
    x, g = nd_inputs(key, spatial, kwargs, dtype)
    call = dict(mode=mode, align_corners=align_corners, antialias=antialias)
    y = tiinterp.interpolate(x, **call, **kwargs)
    gx = tiinterp.interpolate_backward(g, x.shape, **call, **backward_kwargs(kwargs))
    assert y.shape == x.shape[:2] + output_hw(spatial, kwargs) and y.dtype == x.dtype

    factors = coordinate_factors(spatial, kwargs)
    expected = oracle.resize(x, y.shape[2:], mode, bool(align_corners), factors, antialias)
    assert relative_error(y, expected) <= ORACLE_TOL[dtype]
    expected = oracle.resize_adjoint(g, spatial, mode, bool(align_corners), factors, antialias)
    assert relative_error(gx, expected) <= ORACLE_TOL[dtype]
    if reference is not None:
        assert relative_error(y, GOLDEN[key + "|y"]) <= REFERENCE_TOL[dtype]
        assert relative_error(gx, GOLDEN[key + "|gx"]) <= REFERENCE_TOL[dtype]

    lhs, rhs = np.sum(y.astype(np.float64) * g), np.sum(x.astype(np.float64) * gx)
    assert abs(lhs - rhs) <= DOT_TOL[dtype] * np.sum(np.abs(y.astype(np.float64) * g))

    if arch in ("cpu", "cuda"):
        autodiff = tiinterp.interpolate_backward(g, x.shape, **call, method="autodiff",
                                                 **backward_kwargs(kwargs))
        assert relative_error(autodiff, gx) <= REORDER_TOL[dtype]


def test_golden_file_covers_every_case_with_a_reference():
    missing = [c.id for c in CASES if c.values[6] is not None and c.id + "|y" not in GOLDEN]
    assert missing == []


def test_antialias_removes_aliasing_of_a_fine_pattern(arch):
    """A checkerboard of 1-pixel squares shrunk to 37% averages to flat grey with antialias
    (measured range <= 0.008); without it, sampling keeps near full-contrast aliases (>= 0.9)."""
    board = (np.indices((64, 64)).sum(axis=0) % 2).astype(np.float64)[None, None]
    for mode in ("bilinear", "bicubic", "lanczos3", "lanczos5"):
        sharp = tiinterp.interpolate(board, scale_factor=0.37, mode=mode)
        smooth = tiinterp.interpolate(board, scale_factor=0.37, mode=mode, antialias=True)
        assert np.ptp(smooth[..., 3:-3, 3:-3]) < 0.02 and np.ptp(sharp[..., 3:-3, 3:-3]) > 0.8, mode
