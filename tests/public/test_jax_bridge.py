"""tiinterp.jax, the JAX bridge: gradients by ``jax.test_util.check_grads`` for every mode,
agreement with ``jax.image.resize`` where docs/semantics.md says tiinterp matches it, ``jit``
and ``vmap`` against eager per-sample calls, determinism, errors, and the import rules."""

import doctest
import functools
import inspect
import logging
import subprocess
import sys
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import tiinterp
import tiinterp.jax as tj
from tiinterp._rules.filters import REGISTRY

# isort: split
from tests.cases import mode_options
from tests.jax_x64 import x64
from tests.tolerances import relative_error, tolerance

LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}
# Per-sample shapes: (N, C, *spatial) and an output size that grows some axes and shrinks
# others (1-D: a scale factor, 0.7, which shrinks and spaces samples 1 / 0.7 apart).
SHAPES = {1: (2, 2, 7), 2: (1, 2, 5, 7), 3: (1, 2, 4, 5, 3)}
RESIZE = {1: {"scale_factor": 0.7}, 2: {"size": (7, 4)}, 3: {"size": (3, 7, 2)}}


RESIZE_CASES = [
    pytest.param(dims, *case, id=f"{dims}d-{case[0]}-ac{case[1]}-aa{case[2]}")
    for dims in (1, 2, 3)
    for case in mode_options(dims, aligned=(False, True), antialiased=(None,))
]


def resize_arguments(dims, mode, align_corners, antialias):
    return dict(RESIZE[dims], mode=mode, align_corners=align_corners, antialias=antialias)


# --- Gradients: jax.test_util.check_grads in float64 --------------------------------------------


def test_every_resize_mode_is_checked():
    """The check_grads cases cover every mode tiinterp has, on every number of spatial axes
    it takes."""
    covered = {(case.values[1], case.values[0]) for case in RESIZE_CASES}
    assert covered == {(name, dims) for name, m in REGISTRY.items() for dims in m.dims}


@pytest.mark.requires_float64
@pytest.mark.parametrize("dims, mode, align_corners, antialias", RESIZE_CASES)
def test_interpolate_check_grads(arch, rng, dims, mode, align_corners, antialias):
    arguments = resize_arguments(dims, mode, align_corners, antialias)
    bound = tolerance("jax_check_grads", "float64")
    with x64():
        x = jnp.asarray(rng.standard_normal(SHAPES[dims]))
        check_grads(
            lambda x: tj.interpolate(x, **arguments), (x,), 1, ["rev"], atol=bound, rtol=bound
        )


@pytest.mark.requires_float64
@pytest.mark.parametrize(
    "dims, mode, align_corners, antialias",
    [(1, "lanczos3", None, True), (2, "bicubic", True, False), (3, "area", None, False)],
)
def test_interpolate_second_order(arch, rng, dims, mode, align_corners, antialias):
    """The adjoint's own vjp is the forward: reverse mode to the second order."""
    arguments = resize_arguments(dims, mode, align_corners, antialias)
    bound = tolerance("jax_check_grads", "float64")
    with x64():
        x = jnp.asarray(rng.standard_normal(SHAPES[dims]))
        check_grads(
            lambda x: tj.interpolate(x, **arguments), (x,), 2, ["rev"], atol=bound, rtol=bound
        )


GRID_SHAPES = {2: ((1, 2, 4, 5), (1, 3, 2, 2)), 3: ((1, 2, 3, 4, 5), (1, 2, 2, 2, 3))}
GRID_CASES = [
    pytest.param(
        dims, mode, padding, align_corners, id=f"{dims}d-{mode}-{padding}-ac{align_corners}"
    )
    for dims in (2, 3)
    for mode in ("nearest", "bilinear", "bicubic")
    if not (mode == "bicubic" and dims == 3)
    for padding in ("zeros", "border", "reflection")
    for align_corners in (False, True)
]


def grid_off_kinks(rng, dims, align_corners):
    """A grid whose points are at least 0.1 pixel from every integer and half-integer pixel
    coordinate (tap boundaries, nearest's rounding, the padding folds), some outside the
    input: the central differences of check_grads (step 1e-6 along a N(0, 1) direction)
    never cross a kink."""
    in_shape, grid_shape = GRID_SHAPES[dims]
    coordinates = []
    for axis in range(dims):  # grid[..., 0] is x, along the last axis
        size = in_shape[-1 - axis]
        pixel = rng.integers(-3, 2 * size + 2, grid_shape[:-1]) / 2
        pixel += rng.uniform(0.1, 0.4, grid_shape[:-1])
        if align_corners:
            coordinates.append(2 * pixel / (size - 1) - 1)
        else:
            coordinates.append((2 * pixel + 1) / size - 1)
    return np.stack(coordinates, axis=-1)


def test_every_grid_sample_case_is_checked():
    """18 2-D and 12 3-D (mode, padding, align_corners) combinations."""
    assert len(GRID_CASES) == 30


@pytest.mark.requires_float64
@pytest.mark.parametrize("dims, mode, padding, align_corners", GRID_CASES)
def test_grid_sample_check_grads(arch, rng, dims, mode, padding, align_corners):
    bound = tolerance("jax_grid_check_grads", "float64")
    with x64():
        x = jnp.asarray(rng.standard_normal(GRID_SHAPES[dims][0]))
        grid = jnp.asarray(grid_off_kinks(rng, dims, align_corners))
        options = dict(mode=mode, padding_mode=padding, align_corners=align_corners)
        check_grads(
            lambda x, grid: tj.grid_sample(x, grid, **options),
            (x, grid),
            1,
            ["rev"],
            atol=bound,
            rtol=bound,
            eps=1e-6,
        )
        if mode == "nearest":
            grad_grid = jax.grad(lambda grid: tj.grid_sample(x, grid, **options).sum())(grid)
            assert np.all(np.asarray(grad_grid) == 0)


# --- Against jax.image.resize -------------------------------------------------------------------

# docs/semantics.md: the modes whose registry entry names a JAX method are
# jax.image.resize's; the antialiased linear family and bicubic follow PIL's convention,
# which jax.image.resize shares ("linear", "cubic" with antialias=True).
JAX_REFERENCES = {
    name: reference
    for name, m in REGISTRY.items()
    if m.alias_of is None
    for reference in m.references
    if reference.library == "jax"
}
JAX_METHODS = {name: reference.name for name, reference in JAX_REFERENCES.items()}
JAX_METHODS["bicubic"] = "cubic"
# Each axis is resampled by the same 1-D operator whatever the number of axes: the filters
# JAX has with and without antialias in 1-D and 2-D, the linear family in each of its
# dimensions (JAX compiles every case anew).
JAX_CASES = [
    pytest.param(dims, mode, antialias, id=f"{dims}d-{mode}-aa{antialias}")
    for dims in (1, 2, 3)
    for mode, antialias in [
        (LINEAR[dims], True),
        *([("bicubic", True)] if dims == 2 else []),
        *(
            (name, aa)
            for name, reference in JAX_REFERENCES.items()
            if reference.antialias == (False, True)
            for aa in (False, True)
            if dims < 3
        ),
    ]
]
# Output sizes that shrink an axis (where antialias widens the filter) and, in 2-D and 3-D,
# grow another.
JAX_SHAPES = {1: (2, 3, 9), 2: (2, 2, 7, 6), 3: (1, 2, 5, 4, 3)}
JAX_SIZES = {1: (4,), 2: (3, 11), 3: (2, 6, 5)}


def value_and_gradient(function, x, weights):
    """``function(x)`` and the gradient of ``<function(x), weights>``, from one jitted vjp
    (one XLA compilation: eager ``jax.image.resize`` and its gradient compile op by op)."""

    def both(x, weights):
        y, pull_back = jax.vjp(function, x)
        return y, pull_back(weights)[0]

    return jax.jit(both)(x, weights)


def check_against_jax_image_resize(rng, dims, mode, antialias, dtype):
    x = jnp.asarray(rng.standard_normal(JAX_SHAPES[dims]).astype(dtype))
    size = JAX_SIZES[dims]
    shape = x.shape[:2] + size
    weights = jnp.asarray(rng.standard_normal(shape).astype(dtype))
    theirs = functools.partial(
        jax.image.resize, shape=shape, method=JAX_METHODS[mode], antialias=antialias
    )
    ours = functools.partial(tj.interpolate, size=size, mode=mode, antialias=antialias)
    expected, expected_grad = value_and_gradient(theirs, x, weights)
    actual = ours(x)
    actual_grad = jax.grad(lambda x: (ours(x) * weights).sum())(x)
    assert actual.dtype == expected.dtype == actual_grad.dtype == np.dtype(dtype)
    bound = tolerance("jax_image_resize", dtype)
    assert relative_error(actual, expected) <= bound
    assert relative_error(actual_grad, expected_grad) <= bound


@pytest.mark.parametrize("dims, mode, antialias", JAX_CASES)
def test_matches_jax_image_resize_float32(arch, rng, dims, mode, antialias):
    check_against_jax_image_resize(rng, dims, mode, antialias, np.float32)


@pytest.mark.requires_float64
@pytest.mark.parametrize("dims, mode, antialias", JAX_CASES)
def test_matches_jax_image_resize_float64(arch, rng, dims, mode, antialias):
    with x64():
        check_against_jax_image_resize(rng, dims, mode, antialias, np.float64)


# --- jit and vmap: the eager, per-sample results, bit for bit -----------------------------------


def assert_same(actual, expected):
    """The same dtype, shape and bits."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


def resize(x):
    return tj.interpolate(x, size=(9, 4), mode="bicubic", align_corners=False)


def resize_loss(x, weights):
    return (resize(x) * weights).sum()


def sample(x, grid):
    return tj.grid_sample(x, grid, mode="bicubic", padding_mode="reflection")


def sample_loss(x, grid):
    return (sample(x, grid) ** 2).sum()


def test_interpolate_jit_and_vmap(arch, rng):
    xs = jnp.asarray(rng.standard_normal((3, 2, 2, 6, 5)).astype(np.float32))
    weights = jnp.asarray(rng.standard_normal((2, 2, 9, 4)).astype(np.float32))
    eager = jnp.stack([resize(x) for x in xs])
    eager_grads = jnp.stack([jax.grad(resize_loss)(x, weights) for x in xs])
    assert eager.shape == (3, 2, 2, 9, 4)
    for x, y, gx in zip(xs, eager, eager_grads, strict=True):
        assert_same(jax.jit(resize)(x), y)
        assert_same(jax.jit(jax.grad(resize_loss))(x, weights), gx)
    assert_same(jax.vmap(resize)(xs), eager)
    assert_same(jax.jit(jax.vmap(resize))(xs), eager)
    # The vmapped axis elsewhere than in front.
    moved = jax.vmap(resize, in_axes=2, out_axes=1)(xs.transpose(1, 2, 0, 3, 4))
    assert_same(moved, eager.transpose(1, 0, 2, 3, 4))
    # vmap of grad, and grad of a vmapped loss.
    assert_same(jax.vmap(jax.grad(resize_loss), (0, None))(xs, weights), eager_grads)

    def total(xs):
        return jax.vmap(resize_loss, (0, None))(xs, weights).sum()

    assert_same(jax.grad(total)(xs), eager_grads)
    # Nested vmaps: two vmapped axes folded into N (times 2: exact in floating point).
    nested = jax.vmap(jax.vmap(resize))(jnp.stack([xs, 2 * xs]))
    assert_same(nested, jnp.stack([eager, 2 * eager]))


@pytest.mark.parametrize(
    "layout, shape",
    [("NHWC", (2, 6, 5, 2)), ("...HW", (2, 2, 6, 5)), ("...HW", (6, 5)), ("NCHW", (2, 2, 6, 5))],
)
def test_interpolate_layout_under_jit_vmap_and_grad(arch, rng, layout, shape):
    """layout= means what it means for tiinterp.interpolate: the NumPy function's result and
    gradient, bit for bit, eagerly, under jit, per sample under vmap and through grad."""
    xs = rng.standard_normal((3, *shape)).astype(np.float32)

    def resize(x):
        return tj.interpolate(x, size=(9, 4), mode="bicubic", layout=layout)

    expected = np.stack([tiinterp.interpolate(x, size=(9, 4), mode="bicubic", layout=layout)
                         for x in xs])  # fmt: skip
    weights = rng.standard_normal(expected.shape[1:]).astype(np.float32)
    expected_grads = np.stack(
        [tiinterp.interpolate_backward(weights, x.shape, mode="bicubic", layout=layout) for x in xs]
    )

    def loss(x):
        return (resize(x) * weights).sum()

    assert_same(resize(xs[0]), expected[0])
    assert_same(jax.jit(resize)(xs[0]), expected[0])
    assert_same(jax.vmap(resize)(xs), expected)
    assert_same(jax.grad(loss)(xs[0]), expected_grads[0])
    assert_same(jax.jit(jax.vmap(jax.grad(loss)))(xs), expected_grads)


def test_grid_sample_jit_and_vmap(arch, rng):
    """Both arguments vmapped, only the grid (folded into the points of one call), only
    the input (the grid broadcast); the gradients of each."""
    xs = jnp.asarray(rng.standard_normal((3, 2, 2, 5, 6)).astype(np.float32))
    grids = jnp.asarray(rng.uniform(-1.3, 1.3, (3, 2, 4, 3, 2)).astype(np.float32))
    both = jax.grad(sample_loss, argnums=(0, 1))
    for in_axes in [(0, 0), (None, 0), (0, None)]:
        arguments = (xs if in_axes[0] == 0 else xs[0], grids if in_axes[1] == 0 else grids[0])
        pairs = [
            tuple(a[i] if axis == 0 else a for a, axis in zip(arguments, in_axes, strict=True))
            for i in range(3)
        ]
        eager = jnp.stack([sample(*pair) for pair in pairs])
        per_sample = [both(*pair) for pair in pairs]
        eager_grads = [jnp.stack([grads[i] for grads in per_sample]) for i in range(2)]
        assert_same(jax.vmap(sample, in_axes)(*arguments), eager)
        assert_same(jax.jit(jax.vmap(sample, in_axes))(*arguments), eager)
        for actual, expected in zip(jax.vmap(both, in_axes)(*arguments), eager_grads, strict=True):
            assert_same(actual, expected)
    for actual, expected in zip(jax.jit(both)(xs[0], grids[0]), both(xs[0], grids[0]), strict=True):
        assert_same(actual, expected)

    # A gradient with respect to an argument that is not vmapped sums over the batch.
    def total(x):
        return jax.vmap(sample_loss, (None, 0))(x, grids).sum()

    expected = sum(both(xs[0], grid)[0] for grid in grids)
    np.testing.assert_allclose(jax.grad(total)(xs[0]), expected, rtol=1e-6, atol=1e-6)


def small_resize_sum(x):
    return tj.interpolate(x, size=9, mode="bilinear").sum()


def sample_sum(x, grid):
    return sample(x, grid).sum()


def test_vmapped_batches_past_taichi_indexing_are_split(arch, rng, monkeypatch):
    """With Taichi's element limit made tiny, a vmapped batch whose arrays would pass it is
    cut into several tiinterp calls, each within the limit, with the per-sample results."""
    xs = jnp.asarray(rng.standard_normal((5, 1, 2, 6, 6)).astype(np.float32))
    grids = jnp.asarray(rng.uniform(-1, 1, (5, 1, 4, 4, 2)).astype(np.float32))
    resize_grad, grid_grad = jax.grad(small_resize_sum), jax.grad(sample_sum, argnums=1)
    pairs = list(zip(xs, grids, strict=True))
    expected = {
        "resize": jnp.stack([jax.grad(small_resize_sum)(x) for x in xs]),
        "sample": jnp.stack([sample(x, grid) for x, grid in pairs]),
        "one input": jnp.stack([sample(xs[0], grid) for grid in grids]),
        "grid grad": jnp.stack([grid_grad(x, grid) for x, grid in pairs]),
    }
    # One item: 162 output elements; 400 fits two items per call, so five take three.
    monkeypatch.setattr(tiinterp._rules.validate, "MAX_ELEMENTS", 400)
    with pytest.raises(ValueError, match="at most 400 elements"):
        tiinterp.interpolate(np.zeros((3, 2, 6, 6), np.float32), size=9)
    assert_same(jax.vmap(resize_grad)(xs), expected["resize"])
    assert_same(jax.vmap(sample)(xs, grids), expected["sample"])
    assert_same(jax.vmap(sample, (None, 0))(xs[0], grids), expected["one input"])
    assert_same(jax.vmap(grid_grad)(xs, grids), expected["grid grad"])
    # taichi-forge's byte limit instead: 3,200 bytes hold 800 float32 elements, less than
    # the 810 of five items, and the chunks are counted for float64 (400 elements).
    monkeypatch.setattr(tiinterp._rules.validate, "MAX_ELEMENTS", 2**31 - 1)
    monkeypatch.setattr(tiinterp._rules.validate, "MAX_BYTES", 3200)
    with pytest.raises(ValueError, match="at most 800 elements of 4 bytes"):
        tiinterp.interpolate(np.zeros((5, 2, 6, 6), np.float32), size=9)
    assert_same(jax.vmap(resize_grad)(xs), expected["resize"])
    assert_same(jax.vmap(sample)(xs, grids), expected["sample"])


def test_repeated_eager_calls_compile_nothing(arch, caplog):
    """Equal calls make equal callbacks, so that JAX reuses what it compiled for the first
    (eager code calls a function many times)."""
    x = jnp.ones((1, 1, 4, 4), jnp.float32)
    grid = jnp.zeros((1, 2, 2, 2), jnp.float32)
    jax.grad(small_resize_sum)(x)
    jax.grad(sample_sum, argnums=(0, 1))(x, grid)
    with caplog.at_level(logging.WARNING), jax.log_compiles(True):
        jax.grad(small_resize_sum)(x)
        jax.grad(sample_sum, argnums=(0, 1))(x, grid)
    assert not [r.message for r in caplog.records if "pure_callback" in r.getMessage()]


def test_gradients_are_deterministic(arch, rng):
    x = jnp.asarray(rng.standard_normal((2, 3, 17, 11)).astype(np.float32))
    grid = jnp.asarray(rng.uniform(-1.2, 1.2, (2, 9, 4, 2)).astype(np.float32))
    weights = jnp.asarray(rng.standard_normal((2, 3, 9, 4)).astype(np.float32))
    for gradient, inputs in [
        (jax.grad(resize_loss, argnums=(0,)), (x, weights)),
        (jax.grad(sample_loss, argnums=(0, 1)), (x, grid)),
    ]:
        first, second = gradient(*inputs), gradient(*inputs)
        for a, b in zip(first, second, strict=True):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_inputs_are_not_modified(arch, rng):
    x = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)
    saved_x, saved_grid = x.copy(), grid.copy()
    jx, jgrid = jnp.asarray(x), jnp.asarray(grid)
    for arguments in [(x, grid), (jx, jgrid)]:
        jax.grad(small_resize_sum)(arguments[0])
        jax.grad(sample_sum, argnums=(0, 1))(*arguments)
    assert_same(x, saved_x)
    assert_same(grid, saved_grid)
    assert_same(jx, saved_x)
    assert_same(jgrid, saved_grid)


def test_numpy_float64_follows_jax_dtype_rules(arch):
    """Without 64-bit mode JAX makes float64 data float32, so the result is float32; with
    it, float64 stays float64."""
    x = np.linspace(0.0, 1.0, 12).reshape(1, 1, 3, 4)
    assert tj.interpolate(x, size=5, mode="bilinear").dtype == np.float32
    if tiinterp._runtime.session.supports_float64():
        with x64():
            assert tj.interpolate(x, size=5, mode="bilinear").dtype == np.float64


# --- Errors -------------------------------------------------------------------------------------

X = np.zeros((1, 1, 4, 4), np.float32)
GRID = np.zeros((1, 2, 2, 2), np.float32)
BAD_CALLS = [
    (lambda: tj.interpolate([[[[1.0]]]], size=2), TypeError, "input: expected a jax.Array"),
    (
        lambda: tj.interpolate(jnp.zeros((1, 1, 4, 4), jnp.int32), size=2),
        TypeError,
        "expected dtype float32 or float64",
    ),
    (
        lambda: tj.interpolate(jnp.zeros((1, 1, 4, 4), jnp.bfloat16), size=2),
        TypeError,
        "got bfloat16",
    ),
    (lambda: tj.interpolate(X[0, 0], size=2), ValueError, r"expected a 3-D \(N, C, W\)"),
    (lambda: tj.interpolate(X[:, :, :0], size=2), ValueError, "spatial size >= 1"),
    (lambda: tj.interpolate(X, size=2, scale_factor=2), ValueError, "exactly one of size"),
    (lambda: tj.interpolate(X), ValueError, "got neither"),
    (lambda: tj.interpolate(X, size=2.5), TypeError, "size: expected positive integers"),
    (lambda: tj.interpolate(X, size=(2, 0)), ValueError, "size: expected positive integers"),
    (lambda: tj.interpolate(X, size=(2, 2, 2)), ValueError, "expected 2 values"),
    (lambda: tj.interpolate(X, scale_factor=0.1), ValueError, "empty output axis"),
    (lambda: tj.interpolate(X, size=2, mode="bilinaer"), ValueError, "mode: expected one of"),
    (lambda: tj.interpolate(X, size=2, mode="linear"), ValueError, "use 'bilinear'"),
    (
        lambda: tj.interpolate(X, size=2, mode="nearest", align_corners=True),
        ValueError,
        "align_corners: expected None",
    ),
    (
        lambda: tj.interpolate(X, size=2, mode="bilinear", align_corners=1),
        TypeError,
        "align_corners: expected True, False or None",
    ),
    (
        lambda: tj.interpolate(X, size=2, mode="area", antialias=True),
        ValueError,
        "antialias: expected False",
    ),
    (
        lambda: tj.interpolate(X, size=2, mode="bilinear", align_corners=True, antialias=True),
        ValueError,
        "with align_corners=True",
    ),
    (lambda: tj.interpolate(X, size=2, mode="lanczos"), ValueError, "antialias: expected True"),
    (
        lambda: tj.interpolate(X, size=2, recompute_scale_factor=True),
        ValueError,
        "recompute_scale_factor",
    ),
    (lambda: tj.interpolate(X, size=2**20), ValueError, "at most 2147483647 elements"),
    (lambda: tj.interpolate(X, size=(2, 10**400)), ValueError, r"\(1, 1, 2, 1\.0e\+400\)"),
    # layout=, in tiinterp.interpolate's words.
    (
        lambda: tj.interpolate(X, size=2, layout="NHCW"),
        ValueError,
        "layout: expected one of 'NCW', 'NCHW', 'NCDHW', 'NWC', 'NHWC', 'NDHWC', '...W', "
        "'...HW', '...DHW' or None, got 'NHCW'",
    ),
    (lambda: tj.interpolate(X, size=2, layout=4), TypeError, "layout: expected a str"),
    (
        lambda: tj.interpolate(X, size=2, layout="NDHWC"),
        ValueError,
        r"input: expected 5-D for layout 'NDHWC', got shape \(1, 1, 4, 4\)",
    ),
    (
        lambda: tj.interpolate(X, size=2, mode="bilinear", layout="...W"),
        ValueError,
        "mode='bilinear': expected a layout with 2 spatial axes, got layout '...W' with 1; "
        "for layout '...W' use 'linear'",
    ),
    (
        lambda: tj.interpolate(X, size=(2, 2, 2), layout="...HW"),
        ValueError,
        "size: expected 2 values",
    ),
    (
        lambda: tj.interpolate(X[:, :, :0], size=2, layout="NHWC"),
        ValueError,
        r"input: expected every spatial size >= 1, got shape \(1, 1, 0, 4\) in layout 'NHWC'",
    ),
    # Traced values where static ones are needed.
    (lambda: jax.jit(tj.interpolate)(X, (2, 2)), TypeError, "size: expected a static value"),
    (
        lambda: jax.jit(lambda x, s: tj.interpolate(x, scale_factor=s))(X, 2.0),
        TypeError,
        "scale_factor: expected a static value",
    ),
    (
        lambda: jax.jit(lambda x, a: tj.interpolate(x, size=2, mode="bilinear", antialias=a))(
            X, True
        ),
        TypeError,
        "antialias: expected a static value",
    ),
    (
        lambda: jax.vmap(lambda s: tj.interpolate(X, size=s))(jnp.array([2, 3])),
        TypeError,
        "size: expected a static value",
    ),
    (
        lambda: jax.jit(lambda x, g, a: tj.grid_sample(x, g, align_corners=a))(X, GRID, True),
        TypeError,
        "align_corners: expected a static value",
    ),
    # grid_sample
    (lambda: tj.grid_sample(X, GRID[..., :1]), ValueError, r"grid: expected shape \(N, H_out"),
    (lambda: tj.grid_sample(X, GRID[0]), ValueError, r"grid: expected a 4-D \(N, H_out"),
    (lambda: tj.grid_sample(X, np.zeros((2, 2, 2, 2), np.float32)), ValueError, "with N = 1"),
    (lambda: tj.grid_sample(X[0], GRID), ValueError, r"input: expected a 4-D \(N, C, H, W\)"),
    (lambda: tj.grid_sample(X, GRID, mode="area"), ValueError, "mode: expected one of"),
    (
        lambda: tj.grid_sample(
            X[:, :, None], np.zeros((1, 1, 1, 1, 3), np.float32), mode="bicubic"
        ),
        ValueError,
        "bicubic is 2-D only",
    ),
    (lambda: tj.grid_sample(X, GRID, padding_mode="wrap"), ValueError, "padding_mode"),
    (lambda: tj.grid_sample(X, GRID, align_corners="yes"), TypeError, "align_corners"),
    (lambda: tj.grid_sample(X, GRID.astype(np.int32)), TypeError, "grid: expected dtype"),
]


@pytest.mark.parametrize(
    "call, error, message", BAD_CALLS, ids=[f"{e.__name__}:{m}" for _, e, m in BAD_CALLS]
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_concrete_arrays_count_as_static(arch):
    """A concrete (not traced) JAX array is a value like any other: size, scale_factor,
    flags."""
    x = jnp.asarray(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    expected = tj.interpolate(x, size=(3, 5), mode="bilinear", align_corners=True)
    actual = tj.interpolate(
        x, size=jnp.array([3, 5]), mode="bilinear", align_corners=jnp.array(True)
    )
    assert_same(actual, expected)


@pytest.mark.requires_float64
def test_float64_callbacks_on_jax_threads(arch):
    """With JAX's 64-bit mode on globally, a float64 result is accepted on whichever thread
    JAX runs the callback: queued asynchronous work first makes XLA run it on its own."""
    with x64():
        x = jnp.asarray(np.linspace(0.0, 1.0, 64).reshape(1, 1, 8, 8))
        big = jnp.ones((1000, 1000), jnp.float64)
        resize = jax.jit(lambda x: tj.interpolate(x, size=(5, 9), mode="bicubic"))
        expected = np.asarray(resize(x))
        for _ in range(5):
            queued = big @ big
            actual = resize(x + 0.0 * queued[0, 0])
            assert actual.dtype == np.float64
            assert_same(actual, expected)


@pytest.mark.requires_float64
@pytest.mark.skipif(not hasattr(jax, "enable_x64"), reason="jax.enable_x64 is jax >= 0.5")
def test_thread_local_x64_is_refused_for_float64(arch):
    """Under the thread-local ``jax.enable_x64`` context JAX would cast float64 results of a
    callback run on its own threads to float32 and fail on some calls only; tiinterp.jax
    refuses float64 there on every call instead, saying what to do."""
    with jax.enable_x64(True):
        x = jnp.zeros((1, 1, 4, 4), jnp.float64)
        with pytest.raises(ValueError, match=r"jax.config.update\("):
            tj.interpolate(x, size=2)
        with pytest.raises(ValueError, match="only in this thread"):
            tj.grid_sample(x, jnp.zeros((1, 2, 2, 2), jnp.float64))
        # float32 data is unaffected.
        assert tj.interpolate(x.astype(jnp.float32), size=2).dtype == np.float32


def test_grid_dtype_must_match_the_input():
    with x64():
        grid = jnp.zeros((1, 2, 2, 2), jnp.float64)
        with pytest.raises(TypeError, match="grid: expected dtype float32 like the input"):
            tj.grid_sample(jnp.asarray(X), grid)


def test_unsupported_derivatives_are_refused(arch):
    x, grid = jnp.asarray(X), jnp.asarray(GRID)
    first = jax.grad(sample_sum, argnums=1)
    with pytest.raises(NotImplementedError, match="second derivatives are not implemented"):
        jax.grad(lambda grid: first(x, grid).sum())(grid)
    # Forward mode: JAX refuses it for a custom_vjp function.
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jvp(lambda x: tj.interpolate(x, size=2), (x,), (x,))


# --- Documentation and imports ------------------------------------------------------------------


def test_examples_pass(arch):
    """The docstring examples of tiinterp.jax run and pass (tests/public/test_docs.py covers the
    modules of tiinterp's own ``__all__``, which does not include this one)."""
    finder, runner = (
        doctest.DocTestFinder(),
        doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE),
    )
    tests = [test for test in finder.find(tj) if test.examples]
    for test in tests:
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0 and attempted > 0
    names = {test.name.rsplit(".", 1)[-1] for test in tests}
    assert names >= set(tj.__all__)


# The arguments each function shares with tiinterp's own, described there only.
SHARED_ARGUMENTS = {
    "interpolate": {
        "size",
        "scale_factor",
        "mode",
        "align_corners",
        "recompute_scale_factor",
        "antialias",
    },
    "grid_sample": {"mode", "padding_mode"},
    "scale_and_translate": {"shape", "spatial_dims", "method", "antialias"},
}


@pytest.mark.parametrize("name", tj.__all__)
def test_documented_and_typed(name):
    function = getattr(tj, name)
    doc = inspect.getdoc(function)
    for section in ("Parameters", "Returns", "Raises", "Examples"):
        assert f"\n{section}\n{'-' * len(section)}\n" in doc, section
    # An entry starts unindented: ``name : type``, or several names without a type that
    # share one description; the arguments shared with tiinterp's function cite it.
    section = doc.split("\nParameters\n----------\n")[1].split("\n\n")[0].splitlines()
    documented, cited = set(), set()
    for line, following in zip(section, [*section[1:], ""], strict=True):
        if not line.startswith(" "):
            names, _, kind = line.partition(" : ")
            documented.update(names.split(", "))
            if not kind and following.strip().startswith(f"As in :func:`tiinterp.{name}`."):
                cited.update(names.split(", "))
    assert documented == set(inspect.signature(function).parameters)
    assert cited == SHARED_ARGUMENTS[name]
    hints = typing.get_type_hints(function)
    for parameter in documented:
        assert parameter in hints
    assert "return" in hints


def test_public_names():
    assert sorted(tj.__all__) == ["grid_sample", "interpolate", "scale_and_translate"]
    assert tj.__doc__ and "pip install 'tiinterp[jax]'" in tj.__doc__


_IMPORTS = """
import importlib, sys, types
import tiinterp
assert "jax" not in sys.modules, "import tiinterp imported jax"
sys.modules["jax"] = None  # as if JAX were not installed
try:
    import tiinterp.jax
except ImportError as error:
    print("MISSING:", error)
sys.modules["jax"] = types.SimpleNamespace(__version__="0.4.34")
try:
    importlib.import_module("tiinterp.jax")
except ImportError as error:
    print("OLD:", error)
"""


def test_imported_only_on_request_and_import_errors():
    run = subprocess.run(
        [sys.executable, "-c", _IMPORTS], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines() if ": " in line)
    assert "pip install 'tiinterp[jax]'" in lines["MISSING"]
    assert "jax >= 0.4.35" in lines["OLD"] and "got jax 0.4.34" in lines["OLD"]
    assert "pip install 'tiinterp[jax]'" in lines["OLD"]
