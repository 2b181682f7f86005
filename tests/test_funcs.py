"""tiinterp.funcs samplers: values against the dense oracle, and gradients with respect to
the field values and the sample points inside ti.ad.Tape against finite differences."""

import itertools
import math

import numpy as np
import pytest
import taichi as ti

from tests.tolerances import tolerance
from tiinterp import funcs
from tiinterp._runtime import supports_float64
from tiinterp._taichi import runtime_generation

SAMPLERS = {
    "nearest": funcs.sample_nearest,
    "linear": funcs.sample_linear,
    "cubic": funcs.sample_cubic,
    "lanczos3": funcs.sample_lanczos3,
}


def reference_sample(values, point, sampler):
    """Independent float64 evaluation: per-axis 1-D weights, border-clamped taps."""

    def keys(x, a=-0.75):
        x = abs(x)
        return (
            ((a + 2) * x - (a + 3)) * x * x + 1
            if x <= 1
            else (((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0)
        )

    def lanczos(x):
        return (
            1.0
            if x == 0
            else (
                3 * math.sin(math.pi * x) * math.sin(math.pi * x / 3) / (math.pi * x) ** 2
                if abs(x) < 3
                else 0.0
            )
        )

    dims = len(point)
    per_axis = []
    for d in range(dims):
        if sampler == "nearest":
            per_axis.append([(math.floor(point[d] + 0.5), 1.0)])
            continue
        radius, kernel = {
            "linear": (1, lambda x: max(0.0, 1 - abs(x))),
            "cubic": (2, keys),
            "lanczos3": (3, lanczos),
        }[sampler]
        base = math.floor(point[d])
        taps = [(base + k, kernel(point[d] - base - k)) for k in range(1 - radius, radius + 1)]
        if sampler == "lanczos3":
            total = sum(w for _, w in taps)
            taps = [(i, w / total) for i, w in taps]
        per_axis.append(taps)
    result = 0.0
    for combo in itertools.product(*per_axis):
        index = tuple(min(max(i, 0), values.shape[d] - 1) for d, (i, _) in enumerate(combo))
        result = result + math.prod(w for _, w in combo) * values[index]
    return result


class SamplerPipeline:
    """loss = sum_i c_i * sample(f, p_i), f a scalar or vector field, all on Taichi fields;
    each sample(f, p_i) is also kept in ``samples``."""

    def __init__(self, shape, channels, points, sampler, real):
        dims = len(shape)
        self.field = (
            ti.field(real, shape, needs_grad=True)
            if channels == 1
            else ti.Vector.field(channels, real, shape, needs_grad=True)
        )
        self.points = ti.Vector.field(dims, real, len(points), needs_grad=True)
        self.loss = ti.field(real, (), needs_grad=True)
        self.samples = (
            ti.field(real, len(points))
            if channels == 1
            else ti.Vector.field(channels, real, len(points))
        )
        self.points.from_numpy(points)
        fn = SAMPLERS[sampler]
        vector = channels > 1

        @ti.kernel
        def evaluate():
            for i in self.points:
                value = fn(self.field, self.points[i])
                self.samples[i] = value
                if ti.static(vector):
                    self.loss[None] += (i + 1) * value.sum()
                else:
                    self.loss[None] += (i + 1) * value

        self.evaluate = evaluate

    def value(self, field_values, points):
        self.field.from_numpy(field_values)
        self.points.from_numpy(points)
        self.loss[None] = 0
        self.evaluate()
        return float(self.loss[None])

    def gradients(self, field_values, points):
        self.field.from_numpy(field_values)
        self.points.from_numpy(points)
        with ti.ad.Tape(loss=self.loss):
            self.evaluate()
        return self.field.grad.to_numpy(), self.points.grad.to_numpy()


_PIPELINES = {}
BATCH = 9  # points per launch of a shared pipeline


def shared_pipeline(shape, sampler, real, channels=1):
    """A SamplerPipeline of BATCH points, made once per Taichi runtime: tests that sample
    alike share its compiled kernels (a 3-D lanczos3 kernel and its gradient take ~25 s to
    compile)."""
    key = (runtime_generation(), shape, channels, sampler, str(real))
    if key not in _PIPELINES:
        _PIPELINES[key] = SamplerPipeline(
            shape, channels, np.zeros((BATCH, len(shape))), sampler, real
        )
    return _PIPELINES[key]


def slow_to_compile(sampler, shape):
    """3-D lanczos3 value-and-gradient kernels are by far the slowest compiles of the suite
    (cold cache, measured: 25 s (c1) and 52 s (c3) on the CPU, 46 s and 373 s on Vulkan
    lavapipe); ``-m "not slow"`` leaves them out."""
    return [pytest.mark.slow] if sampler == "lanczos3" and len(shape) == 3 else []


CASES = [
    pytest.param(
        sampler,
        shape,
        channels,
        id=f"{sampler}-{len(shape)}d-c{channels}",
        marks=slow_to_compile(sampler, shape),
    )
    for sampler in SAMPLERS
    for shape in ((7, 9), (5, 6, 4))
    for channels in (1, 3)
]


@pytest.mark.requires_float64
@pytest.mark.parametrize("sampler, shape, channels", CASES)
def test_values_and_gradients_inside_a_tape(arch, rng, sampler, shape, channels):
    assert supports_float64(), f"{arch}: requires_float64 let it run, so float64 is expected"
    dims = len(shape)
    values = rng.standard_normal(shape + ((channels,) if channels > 1 else ()))
    # Points inside, near and beyond the borders; kept off the integer / half-integer kinks.
    points = rng.uniform(-1.5, np.array(shape) + 0.5, (BATCH, dims))
    points += 0.013 * (np.abs(points - np.round(points * 2) / 2) < 0.02)
    pipeline = shared_pipeline(shape, sampler, ti.f64, channels)

    expected = sum(
        (i + 1) * np.sum(reference_sample(values, p, sampler)) for i, p in enumerate(points)
    )
    assert abs(pipeline.value(values, points) - expected) <= (
        tolerance("funcs", "float64") * max(1, abs(expected))
    )

    field_grad, point_grad = pipeline.gradients(values, points)
    step = 1e-6
    direction = rng.standard_normal(values.shape)
    numeric = (
        pipeline.value(values + step * direction, points)
        - pipeline.value(values - step * direction, points)
    ) / (2 * step)
    assert abs(numeric - np.sum(field_grad * direction)) <= (
        tolerance("funcs_field_finite_difference", "float64") * max(1, abs(numeric))
    )

    direction = rng.standard_normal(points.shape)
    numeric = (
        pipeline.value(values, points + step * direction)
        - pipeline.value(values, points - step * direction)
    ) / (2 * step)
    analytic = np.sum(point_grad * direction)
    if sampler == "nearest":
        assert np.all(point_grad == 0) and numeric == 0
    else:
        assert abs(numeric - analytic) <= (
            tolerance("funcs_point_finite_difference", "float64") * max(1, abs(numeric))
        )


@pytest.mark.requires_float64
def test_samplers_read_exact_samples_at_integer_points(arch, rng):
    values = rng.standard_normal((6, 5))
    points = np.array([[0, 0], [2, 3], [5, 4], [3, 1]], dtype=np.float64)
    for sampler in SAMPLERS:
        pipeline = SamplerPipeline((6, 5), 1, points, sampler, ti.f64)
        expected = sum((i + 1) * values[int(p[0]), int(p[1])] for i, p in enumerate(points))
        assert abs(pipeline.value(values, points) - expected) <= tolerance("funcs", "float64"), (
            sampler
        )


# Far outside the array, past what int32 holds, and infinite: border clamping reads the
# first sample there for the negative ones and the last for the positive ones.
FAR = (3e9, -3e9, 1e30, -1e30, math.inf, -math.inf)
# float64 reuses the Tape test's kernels (shared_pipeline), so the 3-D lanczos3 float64 case
# is slow too when it runs alone: it is marked slow with them.
FAR_CASES = [
    pytest.param(
        sampler,
        shape,
        real,
        id=f"{sampler}-{len(shape)}d-{real}",
        marks=([pytest.mark.requires_float64] if real == "f64" else [])
        + (slow_to_compile(sampler, shape) if real == "f64" else []),
    )
    for sampler in SAMPLERS
    for shape in ((7, 9), (5, 6, 4))
    for real in ("f32", "f64")
]


def far_points(shape):
    """(point, exact) pairs: every axis far (same or mixed signs), or one axis far and the
    others inside, at integer points (``exact``: the border-clamped value is one sample,
    every weight 0 or 1) or at fractional ones."""
    dims = len(shape)
    pairs = [(np.full(dims, v), True) for v in FAR]
    pairs += [(np.array([v, -v, v][:dims]), True) for v in (3e9, 1e30, math.inf)]
    for inside, exact in ((np.array([1.0, 4.0, 2.0]), True), (np.array([2.3, 3.6, 1.45]), False)):
        for d in range(dims):
            for v in FAR:
                point = inside[:dims].copy()
                point[d] = v
                pairs.append((point, exact))
    return pairs


@pytest.mark.parametrize("sampler, shape, real", FAR_CASES)
def test_far_and_infinite_points_read_the_border(arch, rng, sampler, shape, real):
    """Points beyond the int32 range and at +-inf: the border-clamped value, a finite
    gradient that is 0 along the far axes, and the field gradient on the border samples."""
    if real == "f64":
        assert supports_float64(), f"{arch}: requires_float64 let it run, so float64 is expected"
    dims = len(shape)
    values = rng.standard_normal(shape).astype(real.replace("f", "float"))
    bound = tolerance("funcs", real)
    # float64 shares the kernels compiled for the Tape test above; float32 checks gradients
    # in 2-D only, since a 3-D float32 gradient kernel would add ~25 s of compiling per arch
    # and runs the same code as the float64 one.
    pipeline = shared_pipeline(shape, sampler, getattr(ti, real))
    check_gradients = real == "f64" or dims == 2
    # Clipping the point well past every filter's reach gives the border-clamped value.
    low, high = -4.0, np.array(shape) - 1 + 4.0
    basis = np.eye(values.size).reshape(shape + (values.size,))
    for point, exact in far_points(shape):
        clipped = np.clip(point, low, high)
        far = clipped != point
        batch = np.repeat(point[None], BATCH, axis=0)  # loss = (1 + ... + BATCH) * sample
        expected = reference_sample(values, clipped, sampler)
        pipeline.value(values, batch)
        got = pipeline.samples.to_numpy()[0]
        if exact and sampler != "lanczos3":  # fast-math leaves lanczos3's 0 weights ~1e-16
            assert got == expected, (point, got, expected)
        else:
            assert abs(got - expected) <= bound * max(1, abs(expected)), (point, got, expected)
        if not check_gradients:
            continue

        field_grad, point_grad = pipeline.gradients(values, batch)
        field_grad /= BATCH * (BATCH + 1) / 2
        point_grad = point_grad[0]
        assert np.all(np.isfinite(point_grad)) and np.all(point_grad[far] == 0), (point, point_grad)
        on_border = np.ones(shape, dtype=bool)
        for d in np.flatnonzero(far):
            edge = 0 if point[d] < 0 else shape[d] - 1
            on_border &= (np.arange(shape[d]) == edge).reshape(
                [-1 if axis == d else 1 for axis in range(dims)]
            )
        assert np.all(field_grad[~on_border] == 0), (point, field_grad)
        weights = reference_sample(basis, clipped, sampler).reshape(shape)
        assert np.allclose(field_grad, weights, rtol=0, atol=bound), (point, field_grad)
        if sampler != "nearest" and not exact:  # an inside axis: finite differences
            step = 1e-6
            for d in np.flatnonzero(~far):
                offset = step * (np.arange(dims) == d)
                numeric = (
                    reference_sample(values, clipped + offset, sampler)
                    - reference_sample(values, clipped - offset, sampler)
                ) / (2 * step)
                assert abs(point_grad[d] - numeric) <= (
                    tolerance("funcs_far_point_derivative", real) * max(1, abs(numeric))
                ), (point, d, point_grad, numeric)
