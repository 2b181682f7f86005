"""Gradients of the ``tiinterp.funcs`` samplers with respect to the point where it sits on a
sample or half-way between two: every sampler, every boundary, 2-D and 3-D, constant, ramp
and random fields, against the slope floor-based interpolation defines there (Note [Slopes
at the kinks] in ``tiinterp/_kernels/filter_funcs.py``): the derivative of the filter on
the extended signal with ``floor(x)`` held, an analytic float64 reference. The finite
differences of test_funcs.py nudge their points away from these places.

The pipelines are test_funcs.py's shared ones (most of them compiled there already); the
lanczos3 and bspline kernels that nothing else compiles run where compiles are cheap or
in ``make stress``."""

import itertools
import math

import numpy as np
import pytest

from tests.public.test_funcs import (
    BATCH,
    BOUNDARIES,
    PAD_MODES,
    keys_cubic,
    lanczos3,
    padded_reference,
    shared_pipeline,
)
from tests.tolerances import tolerance
from tiinterp._runtime.taichi import ti

# The slope of each filter at a signed distance t = x - tap, floor(x) held.


def tent_slope(t):
    """Linear's weights are 1 - (x - floor x) and x - floor x: slope -1 on the tap at or
    below x (0 <= t < 1), +1 on the one above (-1 <= t < 0)."""
    return -1.0 if t >= 0 else 1.0


def keys_cubic_slope(t, a=-0.75):
    s, t = math.copysign(1.0, t), abs(t)
    if t <= 1:
        return s * (3 * (a + 2) * t - 2 * (a + 3)) * t
    return s * ((3 * a * t - 10 * a) * t + 8 * a) if t < 2 else 0.0


def lanczos3_slope(t):
    if t == 0 or abs(t) >= 3:
        return 0.0
    u = math.pi * t
    numerator = 3 * math.sin(u) * math.sin(u / 3)
    derivative = 3 * math.pi * (math.cos(u) * math.sin(u / 3) + math.sin(u) * math.cos(u / 3) / 3)
    return derivative / u**2 - 2 * numerator / (u**2 * t)


def bspline(t):
    t = abs(t)
    if t < 1:
        return 2 / 3 - t * t + t**3 / 2
    return (2 - t) ** 3 / 6 if t < 2 else 0.0


def bspline_slope(t):
    s, t = math.copysign(1.0, t), abs(t)
    if t < 1:
        return s * (-2 * t + 1.5 * t * t)
    return -s * (2 - t) ** 2 / 2 if t < 2 else 0.0


FILTERS = {  # (weight, slope, radius, normalised)
    "linear": (lambda t: max(0.0, 1 - abs(t)), tent_slope, 1, False),
    "cubic": (keys_cubic, keys_cubic_slope, 2, False),
    "lanczos3": (lanczos3, lanczos3_slope, 3, True),
    "bspline": (bspline, bspline_slope, 2, False),
}


def reference_slope(values, point, sampler, boundary):
    """d sample / d point (one entry per axis, summed over a trailing channel axis of
    ``values``) on ``values`` extended as ``numpy.pad`` does, ``floor`` held: float64."""
    dims = len(point)
    if sampler == "nearest":
        return np.zeros(dims)
    weight, slope, radius, normalised = FILTERS[sampler]
    per_axis = []
    for d in range(dims):
        n = values.shape[d]
        width = int(max(0.0, -point[d], point[d] - (n - 1))) + radius + 2
        options = {"constant_values": -1} if boundary == "zero" else {}
        source = np.pad(np.arange(n), width, PAD_MODES[boundary], **options)
        x = point[d] + width
        base = math.floor(x)
        taps = [base + k for k in range(1 - radius, radius + 1)]
        w = np.array([weight(x - j) for j in taps])
        s = np.array([slope(x - j) for j in taps])
        if normalised:
            s = (s * w.sum() - w * s.sum()) / w.sum() ** 2
            w = w / w.sum()
        per_axis.append([(source[j], wj, sj) for j, wj, sj in zip(taps, w, s, strict=True)])
    result = np.zeros(dims)
    for combo in itertools.product(*per_axis):
        if any(i < 0 for i, _, _ in combo):
            continue  # a zero of "constant"
        value = np.sum(values[tuple(i for i, _, _ in combo)])
        for a in range(dims):
            factor = math.prod(s if b == a else w for b, (_, w, s) in enumerate(combo))
            result[a] += factor * value
    return result


def fields(shape, channels, rng):
    """Constant, ramp (a different slope along each axis) and random values."""
    full = shape + ((channels,) if channels > 1 else ())
    index = np.indices(shape).astype(np.float64)
    ramp = sum((3.0**d + 1) * index[d] for d in range(len(shape)))
    if channels > 1:
        ramp = np.stack([ramp * (c + 1) for c in range(channels)], axis=-1)
    return {"constant": np.full(full, 5.0), "ramp": ramp, "random": rng.standard_normal(full)}


def sweep_points(shape):
    """Every integer and half-integer point from two samples before the first to two past
    the last (2-D); in 3-D the integer ones, and the half-integer ones on the diagonal."""
    if len(shape) == 2:
        axes = [np.arange(-2.0, n + 1.5, 0.5) for n in shape]
        return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
    axes = [np.arange(-1.0, n + 1.0) for n in shape]
    whole = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    half = np.arange(-1.5, max(shape) + 1.0, 0.5)[:, None] * np.ones(3)
    return np.concatenate([whole, half])


SHAPES = {2: ((6, 5), 2), 3: ((4, 5, 3), 1)}  # test_funcs.py's GRADIENT_CASES pipelines
CLAMP_SHAPES = {2: ((7, 9), 1), 3: ((5, 6, 4), 1)}  # and its CASES pipelines ("clamp")
SPLINE_BOUNDARIES = ("periodic", "mirror", "reflect")


def _marks(sampler, boundary, dims):
    """Kernels no other CI test compiles, in ``make stress``: lanczos3 outside test_funcs.py's
    2-D periodic and clamp pipelines (on the CPU, taichi 1.7.4: 16 s for a 2-D case, 163 s
    for a 3-D one; minutes on lavapipe) and the 3-D B-spline (9 s a case on the CPU, four
    suites: some 2 minutes of CI's time for a C2 filter whose 2-D cases run there)."""
    on_every_suite = [
        (backend, arch) for backend in ("taichi", "taichi_forge") for arch in ("cpu", "vulkan")
    ]
    compiled_elsewhere = sampler == "lanczos3" and dims == 2 and boundary in ("periodic", "clamp")
    if (sampler == "lanczos3" and not compiled_elsewhere) or (sampler == "bspline" and dims == 3):
        return [pytest.mark.compiles_for_minutes(on=on_every_suite)]
    return []


CASES = [
    pytest.param(
        sampler,
        boundary,
        dims,
        id=f"{sampler}-{boundary}-{dims}d",
        marks=_marks(sampler, boundary, dims),
    )
    for sampler in ("nearest", "linear", "cubic", "lanczos3", "bspline")
    for boundary in (SPLINE_BOUNDARIES if sampler == "bspline" else BOUNDARIES)
    for dims in (2, 3)
    # sample_nearest's slope is 0 whatever the boundary (its weight does not depend on the
    # point): "clamp" checks that; its folds are test_funcs.py's.
    if sampler != "nearest" or boundary == "clamp"
]


@pytest.mark.requires_float64
@pytest.mark.parametrize("sampler, boundary, dims", CASES)
def test_point_gradients_on_samples_and_half_way(arch, rng, sampler, boundary, dims):
    shape, channels = (CLAMP_SHAPES if boundary == "clamp" else SHAPES)[dims]
    pipeline = shared_pipeline(shape, sampler, ti.f64, channels, boundary, 0.0)
    points = sweep_points(shape)
    points = np.concatenate([points, np.zeros((-len(points) % BATCH, dims))])
    weights = np.arange(1, BATCH + 1)[:, None]  # the pipeline's loss weighs point i by i + 1
    bound = tolerance("funcs", "float64")
    for name, values in fields(shape, channels, rng).items():
        scale = max(1.0, float(np.max(np.abs(values))))
        for start in range(0, len(points), BATCH):
            batch = points[start : start + BATCH]
            _, got = pipeline.gradients(values, batch)
            expected = weights * np.array(
                [reference_slope(values, p, sampler, boundary) for p in batch]
            )
            wrong = np.abs(got - expected) > bound * scale * weights
            assert not wrong.any(), (
                name,
                batch[wrong.any(axis=1)],
                got[wrong.any(axis=1)],
                expected[wrong.any(axis=1)],
            )
        # The values at the same points, against numpy.pad (only their gradients are new here).
        if sampler != "bspline":
            batch = points[:BATCH]
            want = sum(
                (i + 1) * np.sum(padded_reference(values, p, sampler, boundary))
                for i, p in enumerate(batch)
            )
            assert abs(pipeline.value(values, batch) - want) <= bound * max(1, abs(want))
