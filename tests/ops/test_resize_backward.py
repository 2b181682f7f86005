"""interpolate_backward: adjoint identity, finite differences, autodiff agreement, goldens,
determinism."""

import numpy as np
import pytest

import tiinterp
from tests import oracle
from tests.cases import (
    MODES_2D,
    batch_shape,
    case_key,
    coordinate_factors,
    golden_input_and_grad,
    resize_params,
)
from tests.tolerances import golden_tolerance, relative_error, tolerance

CASES = resize_params()
ARGS = "geometry_id, hw, kwargs, mode, align_corners, dtype"


def backward_kwargs(kwargs):
    """The forward's coordinate arguments, minus ``size`` (the backward reads it from the
    gradient's shape)."""
    return {k: val for k, val in kwargs.items() if k != "size"}


@pytest.mark.parametrize(ARGS, CASES)
def test_adjoint_matches_oracle_golden_and_dot_product_identity(
    arch, golden, geometry_id, hw, kwargs, mode, align_corners, dtype
):
    references = golden("resize")
    key = case_key(geometry_id, mode, align_corners, dtype)
    x, g = golden_input_and_grad(key, batch_shape(hw), kwargs, dtype)
    gx = tiinterp.interpolate_backward(
        g, x.shape, mode=mode, align_corners=align_corners, **backward_kwargs(kwargs)
    )
    assert gx.shape == x.shape and gx.dtype == x.dtype

    expected = oracle.resize_adjoint(
        g, hw, mode, bool(align_corners), coordinate_factors(hw, kwargs)
    )
    assert relative_error(gx, expected) <= tolerance("oracle", dtype)
    if key + "|gx" in references:
        assert relative_error(gx, references[key + "|gx"]) <= golden_tolerance(mode, dtype)

    y = tiinterp.interpolate(x, mode=mode, align_corners=align_corners, **kwargs)
    lhs = np.sum(y.astype(np.float64) * g)
    rhs = np.sum(x.astype(np.float64) * gx)
    scale = np.sum(np.abs(y.astype(np.float64) * g))
    assert abs(lhs - rhs) <= tolerance("dot", dtype) * scale


@pytest.mark.parametrize(ARGS, [c for c in CASES if c.values[-1] == "float64"])
def test_adjoint_matches_finite_differences(
    arch, rng, geometry_id, hw, kwargs, mode, align_corners, dtype
):
    """Central differences of L(x) = <interpolate(x), g> along random directions, float64."""
    key = case_key(geometry_id, mode, align_corners, dtype)
    x, g = golden_input_and_grad(key, batch_shape(hw), kwargs, dtype)
    gx = tiinterp.interpolate_backward(
        g, x.shape, mode=mode, align_corners=align_corners, **backward_kwargs(kwargs)
    )

    def loss(a):
        return np.sum(tiinterp.interpolate(a, mode=mode, align_corners=align_corners, **kwargs) * g)

    step = 1e-3
    for _ in range(3):
        direction = rng.standard_normal(x.shape)
        numeric = (loss(x + step * direction) - loss(x - step * direction)) / (2 * step)
        analytic = np.sum(gx * direction)
        assert abs(numeric - analytic) <= (
            tolerance("finite_difference", dtype) * max(1.0, abs(analytic))
        )


@pytest.mark.requires_autodiff
@pytest.mark.parametrize(ARGS, CASES)
def test_autodiff_agrees_with_adjoint(arch, geometry_id, hw, kwargs, mode, align_corners, dtype):
    key = case_key(geometry_id, mode, align_corners, dtype)
    _, g = golden_input_and_grad(key, batch_shape(hw), kwargs, dtype)
    call = dict(mode=mode, align_corners=align_corners, **backward_kwargs(kwargs))
    adjoint = tiinterp.interpolate_backward(g, batch_shape(hw), method="adjoint", **call)
    autodiff = tiinterp.interpolate_backward(g, batch_shape(hw), method="autodiff", **call)
    assert autodiff.dtype == adjoint.dtype
    assert relative_error(autodiff, adjoint) <= tolerance("reorder", dtype)


@pytest.mark.parametrize("mode", MODES_2D)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adjoint_is_bit_identical_across_runs(arch, rng, mode, dtype):
    g = rng.standard_normal((4, 8, 96, 80)).astype(dtype)
    runs = [tiinterp.interpolate_backward(g, (4, 8, 61, 173), mode=mode) for _ in range(5)]
    for run in runs[1:]:
        assert run.tobytes() == runs[0].tobytes()


def test_backward_into_out_buffer(arch, rng):
    g = rng.standard_normal((1, 2, 10, 12))
    out = np.full((1, 2, 5, 6), np.nan)
    result = tiinterp.interpolate_backward(g, (1, 2, 5, 6), mode="bicubic", out=out)
    assert result is out
    np.testing.assert_array_equal(
        out, tiinterp.interpolate_backward(g, (1, 2, 5, 6), mode="bicubic")
    )


def test_backward_with_scale_factor_reproduces_forward_coordinates(arch, rng):
    """With scale_factor=1.5 on 7 samples the output has 10 samples spaced 1/1.5 apart,
    which differs from size=10 (spacing 0.7); the backward must follow the same rule."""
    g = rng.standard_normal((1, 1, 10, 10))
    by_factor = tiinterp.interpolate_backward(g, (1, 1, 7, 7), mode="bilinear", scale_factor=1.5)
    by_size = tiinterp.interpolate_backward(g, (1, 1, 7, 7), mode="bilinear")
    expected = oracle.resize_adjoint(g, (7, 7), "bilinear", False, (1.5, 1.5))
    assert relative_error(by_factor, expected) <= tolerance("oracle", "float64")
    assert relative_error(by_size, expected) > 1e-3
