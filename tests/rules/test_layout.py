"""``layout=`` of interpolate and interpolate_backward: channels-last and spatial-last arrays
give, bit for bit, the channels-first call's result in their own layout; ``out=`` in every
layout; clear errors for layouts that do not fit the input."""

import re

import numpy as np
import pytest
import torch

import tiinterp
from tests.kernel_spies import empty_at
from tiinterp._runtime.taichi import ti

# (layout, input shape in that layout, output spatial size)
CASES = [
    ("NCW", (2, 3, 7), (11,)),
    ("NCHW", (2, 3, 5, 7), (3, 11)),
    ("NCDHW", (2, 3, 4, 5, 6), (6, 3, 8)),
    ("NWC", (2, 7, 3), (11,)),
    ("NHWC", (2, 5, 7, 3), (3, 11)),
    ("NHWC", (1, 5, 7, 1), (9, 2)),  # one image, one channel: the result is its own view
    ("NDHWC", (2, 4, 5, 6, 3), (6, 3, 8)),
    ("...W", (7,), (11,)),
    ("...W", (2, 3, 7), (11,)),
    ("...HW", (5, 7), (3, 11)),  # a plain image: no leading axes
    ("...HW", (4, 2, 3, 5, 7), (3, 11)),
    ("...HW", (3, 1, 7), (1, 11)),  # size-1 spatial axes
    ("...DHW", (4, 5, 6), (6, 3, 8)),
    ("...DHW", (2, 4, 5, 6), (6, 3, 8)),
]
CASE_IDS = [f"{layout}-{'x'.join(map(str, shape))}" for layout, shape, _ in CASES]
LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}
# (mode, antialias) by number of spatial axes; antialias on a shrinking axis of each case.
MODE_NAMES = ("nearest", "linear-family", "bicubic", "lanczos3", "linear-family+antialias")
DTYPES = [np.float32, pytest.param(np.float64, marks=pytest.mark.requires_float64)]


def spatial_count(layout):
    return len(layout.replace("N", "").replace("C", "").replace("...", ""))


def mode_arguments(name, dims):
    """The ``mode`` and ``antialias`` of a test, or None where the mode lacks ``dims`` axes."""
    if name == "bicubic" and dims != 2:
        return None
    if name.startswith("linear-family"):
        return {"mode": LINEAR[dims], "antialias": name.endswith("+antialias")}
    return {"mode": name, "antialias": False}


def to_channels_first(x, layout):
    """The caller's array as (N, C, *spatial), by NumPy alone: channels-last by a transpose,
    spatial-last by folding the leading axes into the *batch*, with one channel (tiinterp
    folds them into the channels: equal results tell that the fold does not matter)."""
    dims = spatial_count(layout)
    if layout.startswith("..."):
        return x.reshape((-1, 1) + x.shape[x.ndim - dims :])
    if layout.endswith("C"):
        return np.ascontiguousarray(np.moveaxis(x, -1, 1))
    return x


def from_channels_first(y, layout, caller_shape):
    """The inverse of ``to_channels_first`` for a result; ``caller_shape`` is the input's."""
    dims = spatial_count(layout)
    if layout.startswith("..."):
        return y.reshape(caller_shape[: len(caller_shape) - dims] + y.shape[2:])
    if layout.endswith("C"):
        return np.moveaxis(y, 1, -1)
    return y


def caller_out_shape(layout, shape, out_spatial):
    dims = spatial_count(layout)
    if layout.endswith("C"):
        return (shape[0], *out_spatial, shape[-1])
    return shape[: len(shape) - dims] + tuple(out_spatial)


# Every case with every mode that takes its number of spatial axes.
MODE_CASES = [
    pytest.param(layout, shape, size, name, id=f"{case_id}-{name}")
    for (layout, shape, size), case_id in zip(CASES, CASE_IDS, strict=True)
    for name in MODE_NAMES
    if mode_arguments(name, spatial_count(layout)) is not None
]


# --- Forward and backward, bit for bit against the channels-first call --------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout, shape, size, name", MODE_CASES)
def test_forward_equals_channels_first_call_in_callers_layout(
    arch, rng, layout, shape, size, name, dtype
):
    arguments = mode_arguments(name, spatial_count(layout))
    x = rng.standard_normal(shape).astype(dtype)
    keep = x.copy()
    y = tiinterp.interpolate(x, size=size, layout=layout, **arguments)
    expected = from_channels_first(
        tiinterp.interpolate(to_channels_first(x, layout), size=size, **arguments),
        layout,
        shape,
    )
    assert y.shape == caller_out_shape(layout, shape, size) == expected.shape
    assert y.dtype == dtype and y.flags.c_contiguous
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(x, keep)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout, shape, size, name", MODE_CASES)
def test_backward_equals_channels_first_call_in_callers_layout(
    arch, rng, layout, shape, size, name, dtype
):
    arguments = mode_arguments(name, spatial_count(layout))
    g = rng.standard_normal(caller_out_shape(layout, shape, size)).astype(dtype)
    keep = g.copy()
    gx = tiinterp.interpolate_backward(g, shape, layout=layout, **arguments)
    g_first = to_channels_first(g, layout)
    x_first_shape = to_channels_first(np.empty(shape), layout).shape
    expected = from_channels_first(
        tiinterp.interpolate_backward(g_first, x_first_shape, **arguments), layout, shape
    )
    assert gx.shape == shape == expected.shape
    assert gx.dtype == dtype and gx.flags.c_contiguous
    np.testing.assert_array_equal(gx, expected)
    np.testing.assert_array_equal(g, keep)


@pytest.mark.requires_float64
@pytest.mark.parametrize(
    "layout, shape, size, mode",
    [
        ("NHWC", (2, 6, 9, 3), (4, 13), "bicubic"),
        ("NDHWC", (1, 4, 5, 6, 2), (7, 3, 8), "trilinear"),
        ("...HW", (3, 2, 6, 9), (4, 13), "lanczos3"),
        ("...W", (5, 9), (4,), "linear"),
    ],
)
def test_adjoint_identity_in_a_non_default_layout(arch, rng, layout, shape, size, mode):
    """<A x, g> == <x, A^T g>, both sides computed in the caller's layout."""
    x = rng.standard_normal(shape)
    g = rng.standard_normal(caller_out_shape(layout, shape, size))
    y = tiinterp.interpolate(x, size=size, mode=mode, layout=layout)
    gx = tiinterp.interpolate_backward(g, shape, mode=mode, layout=layout)
    lhs, rhs = np.sum(y * g), np.sum(x * gx)
    assert abs(lhs - rhs) <= 1e-12 * np.sum(np.abs(y * g))


@pytest.mark.requires_autodiff
def test_autodiff_backward_in_channels_last_layout(arch, rng):
    g = rng.standard_normal((2, 4, 13, 3))
    call = {"mode": "bilinear", "layout": "NHWC"}
    autodiff = tiinterp.interpolate_backward(g, (2, 6, 9, 3), method="autodiff", **call)
    adjoint = tiinterp.interpolate_backward(g, (2, 6, 9, 3), **call)
    assert autodiff.shape == (2, 6, 9, 3) and autodiff.flags.c_contiguous
    np.testing.assert_allclose(autodiff, adjoint, rtol=0, atol=1e-12)


def test_default_and_named_channels_first_layouts_are_todays_call(arch, rng):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    plain = tiinterp.interpolate(x, size=(9, 4), mode="bicubic")
    for layout in (None, "NCHW"):
        np.testing.assert_array_equal(
            tiinterp.interpolate(x, size=(9, 4), mode="bicubic", layout=layout), plain
        )


def test_scale_factor_counts_the_spatial_axes_of_the_layout(arch, rng):
    x = rng.standard_normal((2, 5, 7, 3)).astype(np.float32)
    y = tiinterp.interpolate(x, scale_factor=(2, 0.5), mode="bilinear", layout="NHWC")
    assert y.shape == (2, 10, 3, 3)
    g = rng.standard_normal(y.shape).astype(np.float32)
    gx = tiinterp.interpolate_backward(
        g, x.shape, mode="bilinear", scale_factor=(2, 0.5), layout="NHWC"
    )
    assert gx.shape == x.shape


def test_strided_big_endian_views_in_channels_last_layout(arch, rng):
    base = rng.standard_normal((2, 10, 14, 6)).astype(np.float32)
    view = base[:, ::2, 1::2, ::2]  # (2, 5, 7, 3), not contiguous
    expected = tiinterp.interpolate(np.ascontiguousarray(view), size=(3, 4), layout="NHWC")
    for x in (view, view.astype(">f4"), np.asfortranarray(view)):
        y = tiinterp.interpolate(x, size=(3, 4), layout="NHWC")
        np.testing.assert_array_equal(y, expected)
    folded = tiinterp.interpolate(view, size=(3, 4), layout="...HW")
    assert folded.shape == (2, 5, 3, 4)
    np.testing.assert_array_equal(
        folded,
        tiinterp.interpolate(np.ascontiguousarray(view), size=(3, 4), layout="...HW"),
    )


def test_empty_leading_axes_give_an_empty_result(arch):
    y = tiinterp.interpolate(np.zeros((0, 4, 5, 6), np.float32), size=(2, 3), layout="...HW")
    assert y.shape == (0, 4, 2, 3)
    y = tiinterp.interpolate(np.zeros((2, 5, 6, 0), np.float32), size=(2, 3), layout="NHWC")
    assert y.shape == (2, 2, 3, 0)


# --- out= ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout, shape, size", CASES, ids=CASE_IDS)
def test_out_in_each_layout_is_filled_and_returned(arch, rng, layout, shape, size):
    mode = LINEAR[spatial_count(layout)]
    x = rng.standard_normal(shape).astype(np.float32)
    out = np.full(caller_out_shape(layout, shape, size), np.nan, np.float32)
    y = tiinterp.interpolate(x, size=size, mode=mode, layout=layout, out=out)
    assert y is out
    np.testing.assert_array_equal(out, tiinterp.interpolate(x, size=size, mode=mode, layout=layout))

    g = rng.standard_normal(out.shape).astype(np.float32)
    grad_out = np.full(shape, np.nan, np.float32)
    gx = tiinterp.interpolate_backward(g, shape, mode=mode, layout=layout, out=grad_out)
    assert gx is grad_out
    np.testing.assert_array_equal(
        grad_out, tiinterp.interpolate_backward(g, shape, mode=mode, layout=layout)
    )


@pytest.mark.parametrize("layout, shape", [("NHWC", (2, 6, 9, 3)), ("...HW", (2, 3, 6, 9))])
def test_misaligned_out_is_used_as_any_c_contiguous_out(arch, rng, layout, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    out = empty_at(caller_out_shape(layout, shape, (5, 17)), np.float32, 4)
    assert out.ctypes.data % 64 == 4
    y = tiinterp.interpolate(x, size=(5, 17), mode="bilinear", layout=layout, out=out)
    assert y is out
    np.testing.assert_array_equal(
        out, tiinterp.interpolate(x, size=(5, 17), mode="bilinear", layout=layout)
    )


def not_contiguous(shape):
    """An array of ``shape`` that is a strided view (every other element of its last axis)."""
    return np.zeros(shape[:-1] + (2 * shape[-1],), np.float32)[..., ::2]


@pytest.mark.parametrize(
    "layout, make_out, problem",
    [
        # The channels-first buffer seen channels-last: the right shape, the wrong strides.
        ("NHWC", lambda: np.moveaxis(np.zeros((2, 3, 5, 17), np.float32), 1, -1), "not C-"),
        ("NHWC", lambda: not_contiguous((2, 5, 17, 3)), "not C-contiguous"),
        # Folding a strided out would reshape a copy: it must be refused, not filled.
        ("...HW", lambda: not_contiguous((2, 3, 5, 17)), "not C-contiguous"),
        ("...HW", lambda: np.zeros((2, 3, 5, 17), np.float32)[::-1], "not C-contiguous"),
    ],
)
def test_unusable_out_is_refused_in_any_layout(arch, rng, layout, make_out, problem):
    shape = (2, 6, 9, 3) if layout == "NHWC" else (2, 3, 6, 9)
    x = rng.standard_normal(shape).astype(np.float32)
    out = make_out()
    with pytest.raises(ValueError, match=f"out: expected a writeable C-contiguous .*{problem}"):
        tiinterp.interpolate(x, size=(5, 17), layout=layout, out=out)
    np.testing.assert_array_equal(out, 0)


def test_out_of_the_channels_first_shape_is_refused_with_the_callers_shape(arch, rng):
    x = rng.standard_normal((2, 6, 9, 3)).astype(np.float32)
    message = (
        "out: expected shape (2, 5, 17, 3) and dtype float32, got shape (2, 3, 5, 17) "
        "and dtype float32"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        tiinterp.interpolate(
            x, size=(5, 17), layout="NHWC", out=np.zeros((2, 3, 5, 17), np.float32)
        )
    g = rng.standard_normal((2, 5, 17, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=re.escape("out: expected shape (2, 6, 9, 3)")):
        tiinterp.interpolate_backward(
            g, (2, 6, 9, 3), layout="NHWC", out=np.zeros((2, 3, 6, 9), np.float32)
        )


def test_out_overlapping_the_input_is_refused_in_channels_last_layout(arch, rng):
    x = rng.standard_normal((2, 6, 9, 3)).astype(np.float32)
    keep = x.copy()
    with pytest.raises(ValueError, match="overlapping the input"):
        tiinterp.interpolate(x, size=(6, 9), layout="NHWC", out=x)
    np.testing.assert_array_equal(x, keep)


# --- Other array kinds --------------------------------------------------------------------------


@pytest.mark.parametrize("layout, shape", [("NHWC", (2, 6, 9, 3)), ("...HW", (4, 6, 9))])
def test_torch_tensors_in_a_layout(arch, rng, layout, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(caller_out_shape(layout, shape, (5, 17))).astype(np.float32)
    call = {"size": (5, 17), "mode": "bicubic", "layout": layout}
    xt = torch.from_numpy(x).requires_grad_(True)
    y = tiinterp.interpolate(xt, **call)
    assert isinstance(y, torch.Tensor) and y.is_contiguous() and not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), tiinterp.interpolate(x, **call))

    out = torch.full(tuple(g.shape), float("nan"))
    assert tiinterp.interpolate(xt, out=out, **call) is out
    np.testing.assert_array_equal(out.numpy(), y.numpy())

    del call["size"]
    gx = tiinterp.interpolate_backward(torch.from_numpy(g), shape, **call)
    assert isinstance(gx, torch.Tensor) and tuple(gx.shape) == shape
    np.testing.assert_array_equal(gx.numpy(), tiinterp.interpolate_backward(g, shape, **call))


def test_taichi_ndarrays_take_the_channels_first_layouts_only(arch, rng):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    array = ti.ndarray(ti.f32, x.shape)
    array.from_numpy(x)
    np.testing.assert_allclose(
        tiinterp.interpolate(array, size=(3, 4), layout="NCHW").to_numpy(),
        tiinterp.interpolate(x, size=(3, 4)),
        rtol=0,
        atol=1e-6,
    )
    for layout in ("NHWC", "...HW"):
        with pytest.raises(TypeError, match=r"interpolate_into\(\.\.\., spatial_axes=\.\.\.\)"):
            tiinterp.interpolate(array, size=(3, 4), layout=layout)
        with pytest.raises(TypeError, match="grad_output: expected a NumPy array or a torch"):
            tiinterp.interpolate_backward(array, (2, 3, 5, 7), layout=layout)


# --- Errors -------------------------------------------------------------------------------------

LAYOUT_LIST = "'NCW', 'NCHW', 'NCDHW', 'NWC', 'NHWC', 'NDHWC', '...W', '...HW', '...DHW' or None"


@pytest.mark.parametrize("layout", ["NHCW", "nhwc", "HW", "...", "", "NHWC ", "...NHW"])
def test_unknown_layout_names_are_refused(layout):
    x = np.zeros((2, 5, 7, 3), np.float32)
    message = f"layout: expected one of {LAYOUT_LIST}, got {layout!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        tiinterp.interpolate(x, size=3, layout=layout)
    with pytest.raises(ValueError, match=re.escape(message)):
        tiinterp.interpolate_backward(x, x.shape, layout=layout)


@pytest.mark.parametrize("layout, kind", [(4, "int"), (b"NHWC", "bytes"), (("N", "C"), "tuple")])
def test_layout_of_another_type_is_refused(layout, kind):
    message = f"layout: expected a str, one of {LAYOUT_LIST}, got {kind}"
    with pytest.raises(TypeError, match=re.escape(message)):
        tiinterp.interpolate(np.zeros((2, 5, 7, 3), np.float32), size=3, layout=layout)


@pytest.mark.parametrize(
    "layout, shape, message",
    [
        ("NHWC", (5, 7, 3), "input: expected 4-D for layout 'NHWC', got shape (5, 7, 3)"),
        ("NCHW", (2, 3, 4, 5, 7), "input: expected 4-D for layout 'NCHW', got shape (2, 3, 4"),
        ("NWC", (2, 5, 7, 3), "input: expected 3-D for layout 'NWC', got shape (2, 5, 7, 3)"),
        ("NDHWC", (2, 5, 3), "input: expected 5-D for layout 'NDHWC', got shape (2, 5, 3)"),
        ("...HW", (7,), "input: expected at least 2-D for layout '...HW', got shape (7,)"),
        ("...DHW", (5, 7), "input: expected at least 3-D for layout '...DHW', got shape (5, 7)"),
        (
            "NHWC",
            (2, 0, 7, 3),
            "input: expected every spatial size >= 1, got shape (2, 0, 7, 3) in layout 'NHWC'",
        ),
        (
            "...HW",
            (4, 5, 0),
            "input: expected every spatial size >= 1, got shape (4, 5, 0) in layout '...HW'",
        ),
    ],
)
def test_input_of_a_rank_the_layout_does_not_have_is_refused(layout, shape, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tiinterp.interpolate(np.zeros(shape, np.float32), size=3, layout=layout)
    with pytest.raises(ValueError, match=re.escape(message.replace("input:", "grad_output:"))):
        tiinterp.interpolate_backward(np.zeros(shape, np.float32), shape, layout=layout)


def test_size_and_scale_factor_count_the_layouts_spatial_axes():
    x = np.zeros((2, 5, 7, 3), np.float32)
    with pytest.raises(ValueError, match="size: expected 2 values, one per spatial axis, got 3"):
        tiinterp.interpolate(x, size=(4, 4, 4), layout="NHWC")
    with pytest.raises(ValueError, match="scale_factor: expected 3 values, one per spatial axis"):
        tiinterp.interpolate(x[..., None], scale_factor=(2, 2), layout="NDHWC")


@pytest.mark.parametrize(
    "layout, mode, message",
    [
        (
            "...W",
            "bilinear",
            "mode='bilinear': expected a layout with 2 spatial axes, got layout '...W' with 1; "
            "for layout '...W' use 'linear'",
        ),
        (
            "NHWC",
            "linear",
            "mode='linear': expected a layout with 1 spatial axis, got layout 'NHWC' with 2; "
            "for layout 'NHWC' use 'bilinear'",
        ),
        (
            "...DHW",
            "bicubic",
            "mode='bicubic': expected a layout with 2 spatial axes, got layout '...DHW' with 3",
        ),
    ],
)
def test_mode_that_does_not_take_the_layouts_spatial_axes_is_refused(layout, mode, message):
    x = np.zeros((2, 4, 5, 6), np.float32)
    with pytest.raises(ValueError, match=re.escape(message)):
        tiinterp.interpolate(x, size=3, mode=mode, layout=layout)


@pytest.mark.parametrize(
    "layout, input_size, error, message",
    [
        ("NHWC", (2, 6, 9), ValueError, "input_size: expected the forward input's full shape "
         "in layout 'NHWC', 4 ints, got (2, 6, 9)"),
        ("NHWC", (2, 6, 9, 4), ValueError, "input_size: expected (N, C) = (2, 3) as in "
         "grad_output, got (2, 4)"),
        ("NHWC", (2, 6, 9.0, 3), ValueError, "input_size: expected the forward input's full "
         "shape in layout 'NHWC', a sequence of ints, got (2, 6, 9.0, 3)"),
        ("NHWC", "2693", TypeError, "input_size: expected the forward input's full shape"),
        ("...HW", (3, 6, 9), ValueError, "input_size: expected the leading axes (2,) of "
         "grad_output followed by 2 spatial sizes (layout '...HW'), got (3, 6, 9)"),
        ("...HW", (6, 9), ValueError, "input_size: expected the leading axes (2,) of "
         "grad_output followed by 2 spatial sizes (layout '...HW'), got (6, 9)"),
    ],
)  # fmt: skip
def test_backward_input_size_is_read_in_the_layout(layout, input_size, error, message):
    g = np.zeros((2, 5, 17, 3) if layout == "NHWC" else (2, 5, 17), np.float32)
    with pytest.raises(error, match=re.escape(message)):
        tiinterp.interpolate_backward(g, input_size, mode="bilinear", layout=layout)
