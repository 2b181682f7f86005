"""The resize geometries every mode is tested on, shared by the tests and the golden-data
generator so both always cover the same cases."""

import math
import zlib

import numpy as np

from tiinterp._rules.filters import REGISTRY, modes_taking

# (case id, input (H, W), keyword arguments of the forward call)
GEOMETRIES = [
    ("up-size", (5, 7), dict(size=(11, 16))),
    ("up-scale2", (5, 7), dict(scale_factor=2.0)),
    ("up-scale-frac", (5, 7), dict(scale_factor=(1.5, 2.3))),
    ("up-scale-recompute", (5, 7), dict(scale_factor=(1.5, 2.3), recompute_scale_factor=True)),
    ("down-size", (13, 17), dict(size=(6, 5))),
    ("down-scale-half", (13, 17), dict(scale_factor=0.5)),
    ("down-scale-frac", (13, 17), dict(scale_factor=(0.37, 0.61))),
    ("identity-size", (6, 9), dict(size=(6, 9))),
    ("identity-scale", (6, 9), dict(scale_factor=1.0)),
    ("ratio-up", (7, 10), dict(size=(10, 13))),
    ("ratio-mixed", (10, 7), dict(size=(7, 10))),
    ("from-1x1", (1, 1), dict(size=(4, 3))),
    ("to-1x1", (5, 6), dict(size=(1, 1))),
    ("to-1-wide", (1, 8), dict(size=(3, 1))),
    ("thin-row", (1, 40), dict(size=(3, 25))),
    ("thin-column", (40, 2), dict(size=(17, 5))),
    # More than 128 outputs on an axis: PyTorch's nearest index switches to float64 there.
    ("wide-scale", (3, 61), dict(scale_factor=(1.5, 2.9))),
    # A large magnification: the adjoint's windows are wider than the unrolled kernels take.
    ("up-large-ratio", (2, 3), dict(size=(41, 50))),
]

# The geometries above run on one mode per way of building taps (tests/cases_nd.py runs
# every registered mode on fewer geometries).
INTERPOLATING = ("bilinear", "bicubic", "lanczos3")
NEAREST = ("nearest", "nearest-exact")
# Every mode that takes a 4-D (N, C, H, W) input, by its canonical name.
MODES_2D = modes_taking(2)


def mode_options(dims, aligned=(None, False, True), antialiased=(None, False)):
    """(mode, align_corners, antialias) for every call the registry allows on ``dims``
    spatial axes: None only for the modes without a filter; the ``aligned`` values of
    align_corners for the filters, and the ``antialiased`` ones with antialias (corners
    aligned are not); an alias (PyTorch's ``"lanczos"``) antialiased only."""
    for mode in REGISTRY.values():
        if dims not in mode.dims:
            continue
        if mode.filter is None:
            yield mode.name, None, False
            continue
        if mode.alias_of is None:
            for align_corners in aligned:
                yield mode.name, align_corners, False
        for align_corners in antialiased:
            yield mode.name, align_corners, True


def mode_variants():
    """(mode, align_corners) pairs: None for the nearest modes, False and True otherwise."""
    for mode in NEAREST:
        yield mode, None
    for mode in INTERPOLATING:
        yield mode, False
        yield mode, True


def case_key(geometry_id, mode, align_corners, dtype):
    return f"{geometry_id}|{mode}|{align_corners}|{dtype}"


def batch_shape(hw):
    return (2, 3) + tuple(hw)


def output_hw(hw, kwargs):
    """PyTorch's output size for a forward call's keyword arguments."""
    if "size" in kwargs:
        size = kwargs["size"]
        return (size,) * len(hw) if isinstance(size, int) else tuple(size)
    factors = kwargs["scale_factor"]
    factors = (factors,) * len(hw) if np.isscalar(factors) else tuple(factors)
    return tuple(math.floor(n * f) for n, f in zip(hw, factors, strict=True))


def coordinate_factors(hw, kwargs):
    """Per axis, the scale_factor that sets sample spacing, or None where it is in / out."""
    if "size" in kwargs or kwargs.get("recompute_scale_factor"):
        return (None,) * len(hw)
    factors = kwargs["scale_factor"]
    return (factors,) * len(hw) if np.isscalar(factors) else tuple(factors)


def golden_input_and_grad(key, shape, kwargs, dtype):
    """A seeded input of ``shape`` and a seeded output gradient, both in ``dtype``."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape[:2] + output_hw(shape[2:], kwargs)).astype(dtype)
    return x, g


def resize_params(dtypes=("float32", "float64")):
    """Every geometry x (mode, align_corners) x dtype as pytest params with readable ids."""
    import pytest

    return [
        pytest.param(
            geometry_id,
            hw,
            kwargs,
            mode,
            align_corners,
            dtype,
            id=case_key(geometry_id, mode, align_corners, dtype),
        )
        for geometry_id, hw, kwargs in GEOMETRIES
        for mode, align_corners in mode_variants()
        for dtype in dtypes
    ]
