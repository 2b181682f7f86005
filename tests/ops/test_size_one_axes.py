"""Size-1 spatial axes: every mode x align_corners x antialias on geometries where some input
or output axis has a single sample while another axis is resized.

Why: a size-1 axis is where the tap tables degenerate (a scale of 0 with align_corners=True
and one output, every tap of a filter clamped or dropped onto one sample, an antialias
window covering the whole input) and where the CPU dispatcher picks a different kernel for
the same mode (a pass on an axis followed only by size-1 axes runs as a "last axis" pass;
both trailing axes resized, one of them to or from 1, go through the fused 2-D kernel with a
one-sample row or column). Each case checks the forward and the hand-written adjoint
against the independent float64 oracle, the dot-product identity <A x, g> = <x, A^T g>, and
on the archs with ndarray autodiff (``requires_autodiff``), ``method="autodiff"`` against the
adjoint.
"""

import zlib

import numpy as np
import pytest

import tiinterp
from tiinterp._rules.filters import FILTERS, modes_taking

# isort: split
from tests import oracle
from tests.cases import mode_options
from tests.tolerances import relative_error, tolerance

BATCH = (2, 3)  # (N, C)

# (input spatial shape, output spatial shape) per dimensionality; in each, some input or
# output axis is 1 while another axis is resized (or, for 1-D, the only axis is 1).
GEOMETRIES = {
    1: [((1,), (5,)), ((5,), (1,)), ((1,), (1,))],
    2: [
        ((4, 1), (8, 1)),
        ((1, 4), (1, 8)),
        ((4, 5), (8, 1)),
        ((4, 5), (1, 8)),
        ((1, 1), (3, 2)),
        ((4, 1), (1, 1)),
        ((1, 5), (3, 1)),
        ((7, 6), (1, 1)),
        # Only one axis resized, the other kept at > 1: a pass that is not the last one
        # (H from or to 1 with W kept), and the last axis from 1 with H kept.
        ((1, 4), (5, 4)),
        ((6, 4), (1, 4)),
        ((3, 1), (3, 5)),
    ],
    3: [
        ((4, 1, 1), (8, 1, 1)),
        ((1, 1, 4), (1, 1, 8)),
        ((1, 4, 1), (3, 4, 1)),
        ((3, 4, 5), (1, 1, 7)),
        ((1, 1, 1), (2, 3, 1)),
        # Depth from 1 with the two trailing axes resized to and from 1 as well.
        ((1, 5, 1), (4, 1, 3)),
    ],
}

DTYPES = ("float32", "float64")


def _shape_id(shape):
    return "x".join(map(str, shape))


def case_id(in_spatial, out_spatial, mode, align_corners, antialias, dtype):
    return (
        f"{len(in_spatial)}d|{_shape_id(in_spatial)}->{_shape_id(out_spatial)}|{mode}"
        f"|ac={align_corners}|aa={antialias}|{dtype}"
    )


def size_one_cases():
    for dims, geometries in GEOMETRIES.items():
        for in_spatial, out_spatial in geometries:
            assert 1 in in_spatial + out_spatial
            for mode, align_corners, antialias in mode_options(dims):
                for dtype in DTYPES:
                    yield pytest.param(
                        in_spatial,
                        out_spatial,
                        mode,
                        align_corners,
                        antialias,
                        dtype,
                        id=case_id(in_spatial, out_spatial, mode, align_corners, antialias, dtype),
                    )


CASES = list(size_one_cases())


def case_inputs(key, in_spatial, out_spatial, dtype):
    """Seeded N(0, 1) input and output gradient; the seed is the case id's CRC32."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    x = rng.standard_normal(BATCH + tuple(in_spatial)).astype(dtype)
    g = rng.standard_normal(BATCH + tuple(out_spatial)).astype(dtype)
    return x, g


@pytest.mark.parametrize("in_spatial, out_spatial, mode, align_corners, antialias, dtype", CASES)
def test_size_one_axes_match_oracle(
    arch, in_spatial, out_spatial, mode, align_corners, antialias, dtype
):
    """Forward and adjoint against the float64 oracle and the dot-product identity, for one
    size-1 geometry."""
    key = case_id(in_spatial, out_spatial, mode, align_corners, antialias, dtype)
    x, g = case_inputs(key, in_spatial, out_spatial, dtype)
    call = dict(mode=mode, align_corners=align_corners, antialias=antialias)

    y = tiinterp.interpolate(x, size=out_spatial, **call)
    assert y.shape == g.shape and y.dtype == x.dtype
    expected = oracle.resize(x, out_spatial, mode, bool(align_corners), None, antialias)
    assert relative_error(y, expected) <= tolerance("oracle", dtype), "forward"

    gx = tiinterp.interpolate_backward(g, x.shape, **call)
    assert gx.shape == x.shape and gx.dtype == x.dtype
    expected = oracle.resize_adjoint(g, in_spatial, mode, bool(align_corners), None, antialias)
    assert relative_error(gx, expected) <= tolerance("oracle", dtype), "adjoint"

    products = y.astype(np.float64) * g
    lhs, rhs = products.sum(), np.sum(x.astype(np.float64) * gx)
    assert abs(lhs - rhs) <= tolerance("dot", dtype) * np.abs(products).sum(), (
        "dot-product identity"
    )


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("in_spatial, out_spatial, mode, align_corners, antialias, dtype", CASES)
def test_size_one_axes_autodiff_agrees_with_adjoint(
    arch, in_spatial, out_spatial, mode, align_corners, antialias, dtype
):
    """``method="autodiff"`` against the adjoint (checked against the oracle above), for one
    size-1 geometry."""
    key = case_id(in_spatial, out_spatial, mode, align_corners, antialias, dtype)
    _, g = case_inputs(key, in_spatial, out_spatial, dtype)
    shape = BATCH + tuple(in_spatial)
    call = dict(mode=mode, align_corners=align_corners, antialias=antialias)
    gx = tiinterp.interpolate_backward(g, shape, **call)
    autodiff = tiinterp.interpolate_backward(g, shape, **call, method="autodiff")
    assert autodiff.shape == shape and autodiff.dtype == g.dtype
    assert relative_error(autodiff, gx) <= tolerance("reorder", dtype), "autodiff vs adjoint"


def test_sweep_covers_every_mode_and_option_per_dimensionality():
    """The sweep is built programmatically; this guards against a filter that drops a
    mode, a dimensionality or an option by mistake."""
    seen = {(len(c.values[0]), c.values[2], c.values[3], c.values[4]) for c in CASES}
    for dims in (1, 2, 3):
        modes = {m for d, m, _, _ in seen if d == dims}
        assert modes == set(modes_taking(dims, aliases=True))
        for mode in set(modes_taking(dims)) & set(FILTERS):
            options = {(ac, aa) for d, m, ac, aa in seen if d == dims and m == mode}
            assert options == {
                (None, False),
                (False, False),
                (True, False),
                (None, True),
                (False, True),
            }
    assert len({c.id for c in CASES}) == len(CASES)
