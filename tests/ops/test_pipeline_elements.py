"""interpolate_into on Taichi data of any layout: vector and matrix elements, 1-D/2-D/3-D
fields whose every axis is space, named spatial axes, vector ndarrays; values against
``interpolate`` on the same data moved to ``(N, C, *spatial)`` in NumPy, and ``ti.ad.Tape``
gradients against ``interpolate_backward``, the adjoint identity and finite differences,
on every arch."""

import numpy as np
import pytest

import tiinterp
from tests.tolerances import tolerance
from tiinterp._runtime.session import supports_float64
from tiinterp._runtime.taichi import ti

TAICHI_DTYPES = {"float32": ti.f32, "float64": ti.f64}
FLOAT64 = pytest.param("float64", marks=pytest.mark.requires_float64)


def make(storage, dtype, shape, element=(), needs_grad=False):
    real = TAICHI_DTYPES[dtype]
    if storage == "field":
        if not element:
            return ti.field(real, shape, needs_grad=needs_grad)
        if len(element) == 1:
            return ti.Vector.field(element[0], real, shape, needs_grad=needs_grad)
        return ti.Matrix.field(*element, real, shape, needs_grad=needs_grad)
    element_type = (
        real
        if not element
        else ti.types.vector(element[0], real)
        if len(element) == 1
        else ti.types.matrix(*element, real)
    )
    return ti.ndarray(element_type, shape, needs_grad=needs_grad)


def as_channels(x, spatial_axes):
    """NumPy data of shape (*shape, *element) as (1, C, *spatial) for ``interpolate``."""
    others = [a for a in range(x.ndim) if a not in spatial_axes]
    moved = np.transpose(x, others + list(spatial_axes))
    spatial = moved.shape[len(others) :]
    return np.ascontiguousarray(moved.reshape(1, -1, *spatial)), moved.shape


def from_channels(y, moved_shape, spatial_axes, out_spatial):
    """The inverse of ``as_channels`` for the resized data."""
    ndim = len(moved_shape)
    others = [a for a in range(ndim) if a not in spatial_axes]
    y = y.reshape(*moved_shape[: len(others)], *out_spatial)
    order = others + list(spatial_axes)
    return np.transpose(y, np.argsort(order))


# (storage, shape in, shape out, element, spatial_axes argument, axes it means, mode, antialias)
CASES = [
    ("field", (7, 9), (11, 5), (2,), None, (0, 1), "bilinear", False),
    ("field", (7, 9), (11, 5), (2,), None, (0, 1), "bicubic", True),
    ("field", (12, 10), (5, 4), (3,), None, (0, 1), "lanczos3", True),
    ("field", (6, 5), (9, 4), (2,), None, (0, 1), "nearest", False),
    ("field", (4, 5, 6), (6, 3, 8), (2, 3), None, (0, 1, 2), "trilinear", False),
    ("field", (9,), (4,), (), None, (0,), "linear", True),
    ("field", (7, 9), (3, 13), (), None, (0, 1), "nearest-exact", False),
    ("field", (7, 3, 9), (11, 3, 5), (), (0, 2), (0, 2), "bilinear", False),
    ("field", (2, 7, 9), (2, 11, 5), (2,), (-2, -1), (1, 2), "bicubic", False),
    ("ndarray", (7, 9), (11, 5), (2,), None, (0, 1), "bilinear", False),
    ("ndarray", (3, 7, 9, 2), (3, 4, 13, 2), (), (1, 2), (1, 2), "lanczos3", False),
    ("ndarray", (5, 4, 6), (3, 8, 7), (2, 2), None, (0, 1, 2), "nearest", False),
    ("field", (1, 5), (4, 1), (2,), None, (0, 1), "bicubic", False),
    ("field", (1, 1, 1), (1, 3, 1), (3,), None, (0, 1, 2), "trilinear", False),
    ("ndarray", (1, 1), (1, 1), (2,), None, (0, 1), "lanczos3", False),
]
CASE_IDS = [f"{c[0]}-{c[6]}-{'x'.join(map(str, c[3])) or 'scalar'}-{c[5]}" for c in CASES]


def reference(x, case):
    _, _, shape_out, _, _, axes, mode, antialias = case
    channels, moved_shape = as_channels(x, axes)
    out_spatial = tuple(shape_out[a] for a in axes)
    y = tiinterp.interpolate(channels, size=out_spatial, mode=mode, antialias=antialias)
    return from_channels(y, moved_shape, axes, out_spatial)


@pytest.mark.parametrize("dtype", ["float32", FLOAT64])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_values_equal_interpolate_on_the_moved_data(arch, rng, case, dtype):
    storage, shape_in, shape_out, element, spatial_axes, _, mode, antialias = case
    src = make(storage, dtype, shape_in, element)
    dst = make(storage, dtype, shape_out, element)
    x = rng.standard_normal(shape_in + element).astype(dtype)
    src.from_numpy(x)
    result = tiinterp.interpolate_into(
        src, dst, mode=mode, antialias=antialias, spatial_axes=spatial_axes
    )
    assert result is dst
    expected = reference(x, case)
    assert dst.to_numpy().shape == expected.shape
    np.testing.assert_allclose(
        dst.to_numpy(), expected, rtol=0, atol=tolerance("tape_values", dtype)
    )
    np.testing.assert_array_equal(src.to_numpy(), x)


@ti.kernel
def weighted_sum(dst: ti.template(), weights: ti.template(), loss: ti.template()):
    for i in ti.grouped(dst):
        loss[None] += weights[i] * dst[i]


@ti.kernel
def weighted_element_sum(dst: ti.template(), weights: ti.template(), loss: ti.template()):
    for i in ti.grouped(dst):
        loss[None] += (weights[i] * dst[i]).sum()


def run_tape(src, dst, weights, loss, element, spatial_axes, mode, antialias):
    """loss = sum(weights * dst) through interpolate_into, on fields."""
    with ti.ad.Tape(loss=loss):
        tiinterp.interpolate_into(
            src, dst, mode=mode, antialias=antialias, spatial_axes=spatial_axes
        )
        (weighted_element_sum if element else weighted_sum)(dst, weights, loss)
    return src.grad.to_numpy()


@pytest.mark.parametrize("dtype", ["float32", FLOAT64])
@pytest.mark.parametrize(
    "case", [c for c in CASES if c[0] == "field"], ids=[i for i in CASE_IDS if "field" in i]
)
def test_tape_gradient_is_the_adjoint(arch, rng, case, dtype):
    """src.grad = A^T g for loss = <A x, g>: equal to interpolate_backward on the moved
    data, and <A x, g> == <x, A^T g>; in float64 also central finite differences."""
    assert dtype != "float64" or supports_float64(), f"{arch}: float64 expected"
    _, shape_in, shape_out, element, spatial_axes, axes, mode, antialias = case
    x = rng.standard_normal(shape_in + element).astype(dtype)
    g = rng.standard_normal(shape_out + element).astype(dtype)
    src = make("field", dtype, shape_in, element, needs_grad=True)
    dst = make("field", dtype, shape_out, element, needs_grad=True)
    weights = make("field", dtype, shape_out, element)
    loss = ti.field(TAICHI_DTYPES[dtype], (), needs_grad=True)
    src.from_numpy(x)
    weights.from_numpy(g)
    grad = run_tape(src, dst, weights, loss, element, spatial_axes, mode, antialias)

    g_channels, moved_out = as_channels(g, axes)
    in_spatial = tuple(shape_in[a] for a in axes)
    expected = tiinterp.interpolate_backward(
        g_channels, (1, g_channels.shape[1], *in_spatial), mode=mode, antialias=antialias
    )
    moved_in = moved_out[: len(moved_out) - len(axes)] + in_spatial
    expected = from_channels(expected, moved_in, axes, in_spatial)
    scale = max(1.0, float(np.abs(expected).max()))
    assert np.abs(grad - expected).max() <= tolerance("tape", dtype) * scale

    forward = float(loss[None])
    backward = float(np.sum(x.astype(np.float64) * grad))
    assert abs(forward - backward) <= tolerance("tape", dtype) * 10 * max(1.0, abs(forward))

    if dtype == "float64":
        direction = rng.standard_normal(x.shape)
        step = 1e-4
        values = []
        for sign in (1, -1):
            src.from_numpy(x + sign * step * direction)
            loss[None] = 0
            tiinterp.interpolate_into(
                src, dst, mode=mode, antialias=antialias, spatial_axes=spatial_axes
            )
            values.append(float(np.sum(dst.to_numpy() * g)))
        numeric = (values[0] - values[1]) / (2 * step)
        analytic = float(np.sum(grad * direction))
        assert abs(numeric - analytic) <= tolerance("tape_finite_difference", dtype) * max(
            1.0, abs(analytic)
        )


def test_gradients_of_two_steps_add_up(arch, rng):
    """One source read by two interpolate_into steps: the Tape adds both adjoints into
    src.grad (the adjoint accumulates, it does not overwrite)."""
    x = rng.standard_normal((6, 7, 2)).astype(np.float32)
    src = ti.Vector.field(2, ti.f32, (6, 7), needs_grad=True)
    small = ti.Vector.field(2, ti.f32, (3, 4), needs_grad=True)
    large = ti.Vector.field(2, ti.f32, (9, 11), needs_grad=True)
    loss = ti.field(ti.f32, (), needs_grad=True)
    src.from_numpy(x)

    @ti.kernel
    def total(a: ti.template(), b: ti.template()):
        for i in ti.grouped(a):
            loss[None] += a[i].sum()
        for i in ti.grouped(b):
            loss[None] += 2.0 * b[i].sum()

    with ti.ad.Tape(loss=loss):
        tiinterp.interpolate_into(src, small, mode="bilinear")
        tiinterp.interpolate_into(src, large, mode="bicubic")
        total(small, large)

    def adjoint(out_spatial, mode, scale):
        g = np.full((1, 2, *out_spatial), scale, np.float32)
        return tiinterp.interpolate_backward(g, (1, 2, 6, 7), mode=mode)[0].transpose(1, 2, 0)

    expected = adjoint((3, 4), "bilinear", 1.0) + adjoint((9, 11), "bicubic", 2.0)
    np.testing.assert_allclose(src.grad.to_numpy(), expected, rtol=0, atol=1e-5)


@pytest.mark.requires_autodiff
def test_vector_ndarrays_in_a_tape(arch, rng):
    x = rng.standard_normal((5, 6, 2))
    g = rng.standard_normal((8, 3, 2))
    src = make("ndarray", "float64", (5, 6), (2,), needs_grad=True)
    dst = make("ndarray", "float64", (8, 3), (2,), needs_grad=True)
    weights = make("ndarray", "float64", (8, 3), (2,))
    loss = ti.ndarray(ti.f64, (), needs_grad=True)
    src.from_numpy(x)
    weights.from_numpy(g)

    @ti.kernel
    def weighted_sum(
        dst: ti.types.ndarray(), weights: ti.types.ndarray(), loss: ti.types.ndarray()
    ):
        for i in ti.grouped(dst):
            loss[None] += (weights[i] * dst[i]).sum()

    src.grad.fill(0)
    dst.grad.fill(0)
    with ti.ad.Tape(loss=loss):
        tiinterp.interpolate_into(src, dst, mode="bilinear")
        weighted_sum(dst, weights, loss)
    expected = tiinterp.interpolate_backward(
        np.ascontiguousarray(g.transpose(2, 0, 1)[None]), (1, 2, 5, 6), mode="bilinear"
    )[0].transpose(1, 2, 0)
    np.testing.assert_allclose(src.grad.to_numpy(), expected, rtol=0, atol=1e-13)


@pytest.mark.without_autodiff
def test_vector_ndarrays_in_a_tape_are_refused_without_ndarray_autodiff(arch):
    src = make("ndarray", "float32", (5, 6), (2,), needs_grad=True)
    dst = make("ndarray", "float32", (8, 3), (2,), needs_grad=True)
    loss = ti.field(ti.f32, (), needs_grad=True)
    with (
        pytest.raises(ValueError, match=r"src/dst: expected Taichi fields inside ti\.ad\.Tape"),
        ti.ad.Tape(loss=loss),
    ):
        tiinterp.interpolate_into(src, dst, mode="bilinear")


def test_bad_layouts_are_refused_clearly(arch):
    vel = ti.Vector.field(2, ti.f32, (4, 4))
    with pytest.raises(TypeError, match=r"dst: expected elements like src's \(vector 2"):
        tiinterp.interpolate_into(vel, ti.Vector.field(3, ti.f32, (8, 8)))
    with pytest.raises(TypeError, match=r"dst: expected elements like src's \(vector 2"):
        tiinterp.interpolate_into(vel, ti.field(ti.f32, (8, 8)))
    with pytest.raises(ValueError, match="name them with spatial_axes"):
        tiinterp.interpolate_into(
            ti.Vector.field(2, ti.f32, (2, 3, 4, 4)), ti.Vector.field(2, ti.f32, (2, 3, 8, 8))
        )
    with pytest.raises(ValueError, match="name them with spatial_axes"):
        tiinterp.interpolate_into(
            ti.field(ti.f32, (1, 1, 1, 2, 3, 4)), ti.field(ti.f32, (1, 1, 1, 2, 3, 4))
        )
    scalar = ti.field(ti.f32, (3, 4, 5))
    for axes, error, message in [
        ((0, 0), ValueError, "spatial_axes: expected distinct axes, got \\(0, 0\\)"),
        ((3,), ValueError, r"spatial_axes: expected 1-3 axes of src's 3 \(from -3 to 2\)"),
        ((), ValueError, r"spatial_axes: expected 1-3 axes"),
        (("x",), TypeError, "spatial_axes: expected a sequence of 1-3 axis numbers"),
        (1.0, TypeError, "spatial_axes: expected a sequence of 1-3 axis numbers"),
    ]:
        with pytest.raises(error, match=message):
            tiinterp.interpolate_into(scalar, ti.field(ti.f32, (3, 4, 5)), spatial_axes=axes)
    with pytest.raises(
        ValueError,
        match=r"dst: expected the sizes of src \(3, 4, 5\) on the axes that are not spatial "
        r"\(1,\) \(spatial axes: \(0, 2\)\), got shape \(6, 3, 5\)",
    ):
        tiinterp.interpolate_into(scalar, ti.field(ti.f32, (6, 3, 5)), spatial_axes=(0, 2))
    with pytest.raises(
        ValueError,
        match=r"mode='bilinear': expected 2 spatial axes, got 1 \(spatial axes \(2,\)\); "
        "for 1 use 'linear'",
    ):
        tiinterp.interpolate_into(scalar, ti.field(ti.f32, (3, 4, 5)), mode="bilinear")
    with pytest.raises(ValueError, match="mode='linear': expected 1 spatial axis, got 2"):
        tiinterp.interpolate_into(vel, ti.Vector.field(2, ti.f32, (8, 8)), mode="linear")


@pytest.mark.parametrize("storage", ["field", "ndarray"])
def test_non_finite_values_spread_as_in_interpolate(arch, rng, storage):
    """NaN and Inf in a vector field reach the outputs whose windows hold them, exactly as
    interpolate on the same data (the element copies carry them untouched)."""
    x = rng.standard_normal((6, 7, 2)).astype(np.float32)
    x[2, 3, 0], x[4, 1, 1], x[0, 6, 1] = np.nan, np.inf, -np.inf
    src = make(storage, "float32", (6, 7), (2,))
    dst = make(storage, "float32", (9, 5), (2,))
    src.from_numpy(x)
    tiinterp.interpolate_into(src, dst, mode="bicubic")
    expected = tiinterp.interpolate(
        np.ascontiguousarray(x.transpose(2, 0, 1)[None]), size=(9, 5), mode="bicubic"
    )[0].transpose(1, 2, 0)
    got = dst.to_numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
    finite = np.isfinite(expected)
    assert not finite.all() and finite.any()
    np.testing.assert_allclose(got[finite], expected[finite], rtol=0, atol=1e-5)
