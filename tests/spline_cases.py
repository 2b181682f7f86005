"""Cases of cubic B-spline sampling (``bspline_coefficients_into`` then
``funcs.sample_bspline``) and their inputs, rebuilt from a seed; SciPy's
``map_coordinates(order=3)`` of them is stored in tests/data/golden_scipy_spline.npz."""

import zlib

import numpy as np

# tiinterp's boundary -> SciPy's mode.
SCIPY_MODES = {"reflect": "reflect", "mirror": "mirror", "periodic": "grid-wrap"}
LONG_SHAPES = ((13, 17), (12, 13, 14))
# Axes of 1-3 samples. SciPy's reflect prefilter reads a coefficient it has overwritten
# (scipy gh-24550): off by 1e-3 on such axes, so reflect is checked there against the
# oracle alone.
SHORT_SHAPES = ((2, 3), (1, 5), (3, 1, 2))
POINTS = 48


def spline_cases():
    """``(boundary, shape, against_scipy)`` for every case."""
    for boundary in SCIPY_MODES:
        for shape in LONG_SHAPES:
            yield boundary, shape, True
        for shape in SHORT_SHAPES:
            yield boundary, shape, boundary != "reflect"


def spline_key(boundary, shape):
    return f"{boundary}|{'x'.join(map(str, shape))}"


def spline_inputs(boundary, shape):
    """Samples ``(shape)`` and points ``(POINTS, len(shape))``: every third point on a
    sample, the rest anywhere from 4 samples before the first to 3 past the last."""
    rng = np.random.default_rng(zlib.crc32(spline_key(boundary, shape).encode()))
    samples = rng.standard_normal(shape)
    points = rng.uniform(-4.0, np.array(shape) + 3.0, (POINTS, len(shape)))
    points[::3] = np.floor(rng.uniform(0, shape, (len(points[::3]), len(shape))))
    return samples, points
