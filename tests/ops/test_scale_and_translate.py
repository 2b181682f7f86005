"""tiinterp.scale_and_translate against jax.image.scale_and_translate: values, and gradients
with respect to the image, the scale and the translation against ``jax.grad`` (stored by
tests/data/make_golden.py, and two cases computed again here against the installed JAX);
finite differences in float64, the adjoint identity, determinism and the checks on bad
arguments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tiinterp
from tiinterp._rules.scale_translate import METHODS

# isort: split
from tests.jax_x64 import x64
from tests.scale_translate_cases import (
    case_key,
    inputs,
    jax_values_and_gradients,
    scale_translate_cases,
)
from tests.tolerances import relative_error, tolerance

CASES = [pytest.param(*case, id=case_key(*case[:1], *case[6:])) for case in scale_translate_cases()]
ARGS = "geometry_id, in_shape, dims, out_shape, scale, translation, method, antialias"


@pytest.mark.parametrize(
    "dtype", ["float32", pytest.param("float64", marks=pytest.mark.requires_float64)]
)
@pytest.mark.parametrize(ARGS, CASES)
def test_values_are_jaxs(
    arch,
    golden,
    geometry_id,
    in_shape,
    dims,
    out_shape,
    scale,
    translation,
    method,
    antialias,
    dtype,
):
    x, _ = inputs(geometry_id, in_shape, out_shape, dtype)
    before = x.copy()
    y = tiinterp.scale_and_translate(x, out_shape, dims, scale, translation, method, antialias)
    expected = golden("jax_scale_translate")[
        f"{case_key(geometry_id, method, antialias)}|{dtype}|y"
    ]
    assert y.shape == expected.shape and y.dtype == x.dtype
    assert relative_error(y, expected) <= tolerance("jax_scale_translate", dtype)
    np.testing.assert_array_equal(x, before)


@pytest.mark.requires_float64
@pytest.mark.parametrize(ARGS, CASES)
def test_gradients_are_jaxs(
    arch, golden, geometry_id, in_shape, dims, out_shape, scale, translation, method, antialias
):
    x, g = inputs(geometry_id, in_shape, out_shape, "float64")
    before = g.copy()
    grads = tiinterp.scale_and_translate_backward(g, x, dims, scale, translation, method, antialias)
    key = case_key(geometry_id, method, antialias)
    for name, ours in zip(("image", "scale", "translation"), grads, strict=True):
        theirs = golden("jax_scale_translate")[f"{key}|float64|grad_{name}"]
        assert ours.shape == theirs.shape and ours.dtype == np.float64, name
        assert relative_error(ours, theirs) <= tolerance("jax_scale_translate_grad", "float64"), (
            name
        )
    np.testing.assert_array_equal(g, before)


# Cases whose JAX numbers are computed again here, against the stored ones: the file is the
# installed JAX's (a JAX release that changed its numbers fails here, not silently).
LIVE_CASES = [
    case for case in CASES if case.id in ("1d-lanczos3-aaTrue", "2d-outside-cubic-aaFalse")
]


@pytest.mark.parametrize(ARGS, LIVE_CASES)
def test_stored_jax_numbers_are_the_installed_jaxs(
    golden, geometry_id, in_shape, dims, out_shape, scale, translation, method, antialias
):
    case = (geometry_id, in_shape, dims, out_shape, scale, translation, method, antialias)
    key = case_key(geometry_id, method, antialias)
    stored = golden("jax_scale_translate")
    for dtype in ("float32", "float64"):
        values, gradients = jax_values_and_gradients(case, dtype)
        assert relative_error(values, stored[f"{key}|{dtype}|y"]) <= tolerance("reorder", dtype)
    for name, gradient in zip(("image", "scale", "translation"), gradients, strict=True):
        assert relative_error(gradient, stored[f"{key}|float64|grad_{name}"]) <= tolerance(
            "reorder", "float64"
        )


@pytest.mark.requires_float64
@pytest.mark.parametrize("method", METHODS)
def test_parameter_gradients_match_finite_differences(arch, method):
    """Central differences of <scale_and_translate(x), g> at parameters where no sample lies
    on a kink of the weights (the slopes JAX picks there are conventions, not limits)."""
    x, g = inputs("fd", (1, 2, 9, 11), (1, 2, 12, 8), "float64")
    dims, scale, translation = (2, 3), np.array([1.37, 0.71]), np.array([-0.93, 0.41])

    def loss(s, t):
        y = tiinterp.scale_and_translate(x, g.shape, dims, s, t, method, True)
        return float(np.sum(y * g))

    _, grad_scale, grad_translation = tiinterp.scale_and_translate_backward(
        g, x, dims, scale, translation, method, True
    )
    step = 1e-6
    for axis in range(2):
        bump = np.eye(2)[axis] * step
        numeric_scale = (loss(scale + bump, translation) - loss(scale - bump, translation)) / (
            2 * step
        )
        numeric_translation = (
            loss(scale, translation + bump) - loss(scale, translation - bump)
        ) / (2 * step)
        for analytic, numeric in (
            (grad_scale[axis], numeric_scale),
            (grad_translation[axis], numeric_translation),
        ):
            error = abs(analytic - numeric) / max(1.0, abs(analytic))
            assert error <= tolerance("finite_difference_parameters", "float64"), (axis, method)


# Parameters where no output's coordinate or footprint lies on a kink of the weights: there
# JAX's slopes (which the adjoint follows) are conventions that ti.ad need not share.
GENERIC = [
    ("nchw", (1, 2, 9, 11), (2, 3), (1, 2, 12, 8), (1.3719, 0.7137), (-0.9311, 0.4129)),
    ("nhwc-shrink", (1, 23, 17, 2), (1, 2), (1, 6, 7, 2), (0.2617, 0.4193), (0.3291, -0.1877)),
    ("3d", (1, 6, 7, 5), (1, 2, 3), (1, 4, 9, 5), (0.7071, 1.318, 1.0913), (0.2243, -0.47, 0.1417)),
]


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "geometry_id, in_shape, dims, out_shape, scale, translation",
    GENERIC,
    ids=[g[0] for g in GENERIC],
)
def test_autodiff_gives_the_handwritten_gradients(
    arch, geometry_id, in_shape, dims, out_shape, scale, translation, method, antialias
):
    """ti.ad through the weights computed from the parameters in Taichi and through the
    passes (gradients="autodiff") against the hand-written derivative tables."""
    x, g = inputs(f"autodiff-{geometry_id}", in_shape, out_shape, "float64")
    call = (dims, scale, translation, method, antialias)
    adjoint = tiinterp.scale_and_translate_backward(g, x, *call)
    autodiff = tiinterp.scale_and_translate_backward(g, x, *call, gradients="autodiff")
    for name, by_hand, by_ti_ad in zip(
        ("image", "scale", "translation"), adjoint, autodiff, strict=True
    ):
        assert relative_error(by_ti_ad, by_hand) <= tolerance("autodiff_parameters", "float64"), (
            name
        )


def test_gradients_are_adjoint_or_autodiff():
    x, g = inputs("refused", (1, 5), (1, 4), "float32")
    with pytest.raises(ValueError, match="gradients: expected 'adjoint' or 'autodiff', got 'jax'"):
        tiinterp.scale_and_translate_backward(g, x, (1,), (0.9,), (0.1,), gradients="jax")


@pytest.mark.without_autodiff
def test_autodiff_is_refused_without_ndarray_autodiff(arch):
    x, g = inputs("refused", (1, 5), (1, 4), "float32")
    with pytest.raises(RuntimeError, match=r"ndarrays only on"):
        tiinterp.scale_and_translate_backward(g, x, (1,), (0.9,), (0.1,), gradients="autodiff")


@pytest.mark.parametrize("method", METHODS)
def test_image_gradient_is_the_adjoint(arch, method):
    x, g = inputs("dot", (2, 3, 8, 10), (2, 3, 11, 6), "float64")
    dims, scale, translation = (2, 3), (1.3, 0.55), (0.6, -0.7)
    y = tiinterp.scale_and_translate(x, g.shape, dims, scale, translation, method)
    gx, _, _ = tiinterp.scale_and_translate_backward(g, x, dims, scale, translation, method)
    left, right = np.sum(y * g), np.sum(x * gx)
    assert abs(left - right) <= tolerance("dot", "float64") * np.sum(np.abs(y * g))


def test_gradients_are_bit_identical_run_after_run(arch):
    x, g = inputs("repeat", (2, 3, 30, 40), (2, 3, 17, 55), "float32")
    call = (g, x, (2, 3), (0.6, 1.4), (1.1, -2.0), "lanczos3", True)
    first = tiinterp.scale_and_translate_backward(*call)
    for _ in range(3):
        for a, b in zip(first, tiinterp.scale_and_translate_backward(*call), strict=True):
            np.testing.assert_array_equal(a, b)


X = np.zeros((1, 1, 4, 5))
BAD = [
    (dict(image=[[1.0]]), TypeError, "image: expected a NumPy array, got list"),
    (dict(image=X.astype(np.int32)), TypeError, "image: expected float32 or float64, got int32"),
    (dict(method="nearest"), ValueError, "JAX has no nearest scale_and_translate either"),
    (dict(method="bilinaer"), ValueError, "method: expected one of 'linear', 'cubic'"),
    (dict(antialias=1), TypeError, "antialias: expected a bool, got 1"),
    (dict(spatial_dims=(2, 2)), ValueError, "spatial_dims: expected distinct axes"),
    (dict(spatial_dims=(2, 4)), ValueError, "spatial_dims: expected axes of a 4-D image"),
    (dict(spatial_dims=(0, 1, 2, 3)), ValueError, "spatial_dims: expected 1 to 3 axes"),
    (dict(shape=(1, 1, 4)), ValueError, "shape: expected 4 sizes"),
    (dict(shape=(1, 2, 4, 5)), ValueError, "shape: expected 1 on axis 1, which is not spatial"),
    (dict(shape=(1, 1, 0, 5)), ValueError, "shape: expected spatial sizes of at least 1"),
    (dict(scale=(1.0,)), ValueError, "scale: expected 2 numbers (one per spatial axis)"),
    (dict(scale=(1.0, 0.0)), ValueError, "scale: expected positive numbers"),
    (dict(scale=(1.0, "a")), TypeError, "scale: expected 2 real numbers"),
    (dict(translation=(0.0, np.nan)), ValueError, "translation: expected finite numbers"),
    (dict(scale=(1.0, 1e-16)), ValueError, "scale: expected numbers from 1e-15 to 1e15"),
    (dict(translation=(2e15, 0)), ValueError, "translation: expected numbers from -1e15"),
]


@pytest.mark.parametrize("method", METHODS)
def test_extreme_parameters_give_finite_numbers_without_warnings(arch, method):
    """The ends of the allowed ranges: a zoom by 1e15 or 1e-15, a shift by 1e15 (every
    output outside the input, or every input in one output), in float32."""
    import warnings

    x, g = inputs("extreme", (1, 8, 9), (1, 5, 7), "float32")
    for scale, translation in [
        ((1e-15, 1.0), (0.0, 0.0)),
        ((1e15, 1.0), (0.0, 0.0)),
        ((1.0, 1.0), (1e15, 0.0)),
        ((1e-15, 1.0), (1e15, -1e15)),
        ((1e15, 2.0), (-1e15, 0.0)),
    ]:
        for antialias in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                call = ((1, 2), scale, translation, method, antialias)
                y = tiinterp.scale_and_translate(x, g.shape, *call)
                grads = tiinterp.scale_and_translate_backward(g, x, *call)
            assert all(np.isfinite(a).all() for a in (y, *grads)), (scale, translation)


@pytest.mark.parametrize("change, error, message", BAD)
def test_bad_arguments_are_refused_with_what_was_expected(change, error, message):
    call = dict(
        image=X, shape=(1, 1, 6, 7), spatial_dims=(2, 3), scale=(1.5, 1.4), translation=(0, 0)
    )
    call.update(change)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        tiinterp.scale_and_translate(**call)


# --- tiinterp.jax.scale_and_translate -----------------------------------------------------------


@pytest.mark.requires_float64
@pytest.mark.parametrize("method", METHODS)
def test_jax_bridge_under_jit_vmap_and_grad_is_jaxs(arch, method):
    """A batch of images, each with its own scale and translation (vmap over all three),
    jitted; and one scale and translation shared by a vmapped batch inside jax.grad."""
    import tiinterp.jax as tj

    rng = np.random.default_rng(7)
    with x64():
        x = jnp.asarray(rng.standard_normal((3, 2, 9, 11)))
        g = jnp.asarray(rng.standard_normal((3, 2, 7, 13)))
        scales = jnp.asarray(rng.uniform(0.5, 1.6, (3, 2)))
        shifts = jnp.asarray(rng.uniform(-1.5, 1.5, (3, 2)))

        def ours(x, s, t):
            return tj.scale_and_translate(x, (2, 7, 13), (1, 2), s, t, method=method)

        def theirs(x, s, t):
            return jax.image.scale_and_translate(x, (2, 7, 13), (1, 2), s, t, method=method)

        def per_item(f):
            return jax.vmap(jax.grad(lambda x, s, t, g: jnp.sum(f(x, s, t) * g), (0, 1, 2)))

        def shared(f):
            def loss(x, s, t):
                return jnp.sum(jax.vmap(lambda xi, gi: f(xi, s, t) * gi)(x, g))

            return jax.grad(loss, (0, 1, 2))

        pairs = [
            (jax.jit(per_item(ours))(x, scales, shifts, g), per_item(theirs)(x, scales, shifts, g)),
            (shared(ours)(x, scales[0], shifts[0]), shared(theirs)(x, scales[0], shifts[0])),
            ((jax.jit(jax.vmap(ours))(x, scales, shifts),), (jax.vmap(theirs)(x, scales, shifts),)),
        ]
        for got, expected in pairs:
            for a, b in zip(got, expected, strict=True):
                assert a.dtype == b.dtype == jnp.float64
                error = relative_error(np.asarray(a), np.asarray(b))
                assert error <= tolerance("jax_scale_translate_grad", "float64")


def test_jax_bridge_refuses_bad_arguments_at_the_call():
    import tiinterp.jax as tj

    x = jnp.zeros((1, 4, 5), jnp.float32)
    with pytest.raises(ValueError, match="scale: expected positive numbers"):
        tj.scale_and_translate(x, (1, 6, 7), (1, 2), jnp.array([1.0, -1.0]), jnp.zeros(2))
    with pytest.raises(ValueError, match=r"translation: expected 2 numbers"):
        tj.scale_and_translate(x, (1, 6, 7), (1, 2), jnp.ones(2), jnp.zeros(3))
    with pytest.raises(TypeError, match="shape: expected a static value"):
        jax.jit(lambda n: tj.scale_and_translate(x, (1, n, 7), (1, 2), jnp.ones(2), jnp.zeros(2)))(
            6
        )
    with pytest.raises(ValueError, match="method: expected one of"):
        tj.scale_and_translate(x, (1, 6, 7), (1, 2), jnp.ones(2), jnp.zeros(2), method="box")


# --- tiinterp.torch.scale_and_translate ---------------------------------------------------------


@pytest.mark.requires_float64
@pytest.mark.parametrize("method", METHODS)
def test_torch_bridge_passes_gradcheck(arch, method):
    """torch.autograd.gradcheck: the image's, the scale's and the translation's gradients
    against finite differences, float64."""
    import torch

    import tiinterp.torch as titorch

    # Small: gradcheck runs the op twice per input element (a Vulkan launch each).
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64, generator=generator, requires_grad=True)
    scale = torch.tensor([1.3, 0.6], dtype=torch.float64, requires_grad=True)
    shift = torch.tensor([-0.7, 0.9], dtype=torch.float64, requires_grad=True)

    def resample(x, scale, shift):
        return titorch.scale_and_translate(x, (1, 2, 7, 4), (2, 3), scale, shift, method)

    assert torch.autograd.gradcheck(resample, (x, scale, shift), eps=1e-6, atol=1e-7, rtol=1e-6)


def test_torch_bridge_compiles_and_refuses_what_it_lacks(arch):
    import torch

    import tiinterp.torch as titorch

    x = torch.randn(1, 2, 8, 8, generator=torch.Generator().manual_seed(4))
    scale = torch.tensor([1.5, 0.75], requires_grad=True)
    shift = torch.tensor([0.25, -0.5], requires_grad=True)

    def loss(x, scale, shift):
        return titorch.scale_and_translate(x, (1, 2, 10, 6), (2, 3), scale, shift).square().sum()

    compiled = torch.compile(loss, fullgraph=True)
    expected = torch.autograd.grad(loss(x, scale, shift), (scale, shift))
    got = torch.autograd.grad(compiled(x, scale, shift), (scale, shift))
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(loss(x, scale, shift), scale, create_graph=True)
    with pytest.raises(ValueError, match="scale: expected positive numbers"):
        titorch.scale_and_translate(x, (1, 2, 10, 6), (2, 3), torch.tensor([1.0, 0.0]), shift)
    with pytest.raises(TypeError, match=r"scale: expected torch\.float32 like the image"):
        titorch.scale_and_translate(x, (1, 2, 10, 6), (2, 3), scale.double(), shift)
