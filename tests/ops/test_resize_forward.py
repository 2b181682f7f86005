"""Forward pass of tiinterp.interpolate against the float64 oracle and PyTorch/JAX goldens."""

import numpy as np
import pytest

import tiinterp
from tiinterp._rules.filters import REGISTRY

# isort: split
from tests import oracle
from tests.cases import (
    MODES_2D,
    batch_shape,
    case_key,
    coordinate_factors,
    golden_input_and_grad,
    output_hw,
    resize_params,
)
from tests.tolerances import golden_tolerance, relative_error, tolerance

CASES = resize_params()


@pytest.mark.parametrize("geometry_id, hw, kwargs, mode, align_corners, dtype", CASES)
def test_forward_matches_oracle_and_reference(
    arch, golden, geometry_id, hw, kwargs, mode, align_corners, dtype
):
    references = golden("resize")
    key = case_key(geometry_id, mode, align_corners, dtype)
    x, _ = golden_input_and_grad(key, batch_shape(hw), kwargs, dtype)
    y = tiinterp.interpolate(x, mode=mode, align_corners=align_corners, **kwargs)

    assert y.dtype == x.dtype
    assert y.shape == x.shape[:2] + output_hw(hw, kwargs)
    expected = oracle.resize(
        x, y.shape[2:], mode, bool(align_corners), coordinate_factors(hw, kwargs)
    )
    assert relative_error(y, expected) <= tolerance("oracle", dtype)
    if key + "|y" in references:  # every case a library has (not corner-aligned lanczos)
        assert relative_error(y, references[key + "|y"]) <= golden_tolerance(mode, dtype)


def test_golden_file_covers_every_case_with_a_reference(golden):
    references = golden("resize")
    missing = [
        c.id
        for c in CASES
        if c.id + "|y" not in references
        and REGISTRY[c.values[3]].reference(2, c.values[4], False) is not None
    ]
    assert missing == []


@pytest.mark.parametrize("mode", MODES_2D)
def test_out_buffer_is_filled_and_returned(arch, rng, mode):
    x = rng.standard_normal((2, 2, 9, 6))
    out = np.full((2, 2, 4, 11), np.nan)
    y = tiinterp.interpolate(x, size=(4, 11), mode=mode, out=out)
    assert y is out
    np.testing.assert_array_equal(out, tiinterp.interpolate(x, size=(4, 11), mode=mode))


@pytest.mark.parametrize("mode", MODES_2D)
def test_input_is_never_modified_and_views_work(arch, rng, mode):
    base = rng.standard_normal((2, 3, 12, 14)).astype(np.float32)
    keep = base.copy()
    strided = base[:, ::2, ::2, 1::3]  # a non-contiguous view
    readonly = strided.copy()
    readonly.flags.writeable = False
    big_endian = strided.astype(">f4")
    results = [
        tiinterp.interpolate(a, size=(7, 3), mode=mode)
        for a in (strided, readonly, big_endian, np.ascontiguousarray(strided))
    ]
    for r in results[:-1]:
        np.testing.assert_array_equal(r, results[-1])
    np.testing.assert_array_equal(base, keep)


def test_empty_batch_gives_empty_output(arch):
    y = tiinterp.interpolate(np.zeros((0, 3, 4, 4), np.float32), size=(8, 2), mode="bilinear")
    assert y.shape == (0, 3, 8, 2) and y.dtype == np.float32


@pytest.mark.parametrize("mode", MODES_2D)
def test_nan_and_inf_propagate_like_ieee_arithmetic(arch, mode):
    """A NaN/Inf sample reaches every output that reads it with a nonzero weight (and, as
    in PyTorch, outputs whose window holds it with weight 0); nothing farther away."""
    x = np.zeros((1, 1, 16, 16))
    x[0, 0, 3, 5] = np.nan
    x[0, 0, 12, 10] = np.inf
    y = tiinterp.interpolate(x, size=(24, 20), mode=mode)
    ah = oracle.axis_matrix(16, 24, mode)
    aw = oracle.axis_matrix(16, 20, mode)
    nan_reach = np.outer(ah[:, 3] != 0, aw[:, 5] != 0)
    inf_reach = np.outer(ah[:, 12] != 0, aw[:, 10] != 0)
    assert np.isnan(y[0, 0][nan_reach]).all()
    assert not np.isfinite(y[0, 0][inf_reach]).any()
    # Away from both samples (and their filter support) the output stays finite and exact.
    far = ~(
        np.outer((ah[:, 2:5] != 0).any(1), (aw[:, 4:7] != 0).any(1))
        | np.outer((ah[:, 11:14] != 0).any(1), (aw[:, 9:12] != 0).any(1))
    )
    assert np.all(y[0, 0][far] == 0)
