"""Bad input gets a TypeError/ValueError that says what was expected and what was given."""

import sys

import numpy as np
import pytest

import tiinterp

X = np.zeros((1, 2, 4, 5), np.float32)


def forward(**overrides):
    kwargs = dict(input=X, size=(8, 10), mode="bilinear")
    kwargs.update(overrides)
    return tiinterp.interpolate(**kwargs)


def backward(**overrides):
    kwargs = dict(
        grad_output=np.zeros((1, 2, 8, 10), np.float32), input_size=(1, 2, 4, 5), mode="bilinear"
    )
    kwargs.update(overrides)
    return tiinterp.interpolate_backward(**kwargs)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: forward(input=[[1.0]]),
            TypeError,
            "input: expected a numpy.ndarray, a Taichi scalar ndarray or a torch.Tensor, got list",
        ),
        (
            lambda: forward(input=np.zeros((4, 5), np.float32)),
            ValueError,
            r"input: expected a 3-D .* array, got shape \(4, 5\)",
        ),
        (
            lambda: forward(input=np.zeros((1, 1, 2, 3, 4), np.float32)),
            ValueError,
            r"mode='bilinear': expected a 4-D \(N, C, H, W\) input, got a 5-D input; "
            "for a 5-D input use 'trilinear'",
        ),
        (
            lambda: forward(input=np.zeros((1, 2, 3), np.float32), size=4, mode="bicubic"),
            ValueError,
            r"mode='bicubic': expected a 4-D \(N, C, H, W\) input, got a 3-D input",
        ),
        (
            lambda: forward(input=np.zeros((2, 3), np.float32)),
            ValueError,
            r"input: expected a 3-D \(N, C, W\) or 4-D \(N, C, H, W\) or 5-D",
        ),
        (
            lambda: forward(input=np.zeros((1, 2, 4, 5), np.int64)),
            TypeError,
            "expected dtype float32 or float64, got int64",
        ),
        (lambda: forward(input=np.zeros((1, 2, 4, 5), np.float16)), TypeError, "got float16"),
        (
            lambda: forward(input=np.zeros((1, 2, 0, 5), np.float32)),
            ValueError,
            "expected every spatial size >= 1",
        ),
        (
            lambda: forward(size=None),
            ValueError,
            "expected exactly one of size and scale_factor, got neither",
        ),
        (lambda: forward(scale_factor=2.0), ValueError, "got both"),
        (
            lambda: forward(size=(0, 3)),
            ValueError,
            r"size: expected positive integers, got \(0, 3\)",
        ),
        (lambda: forward(size=(-2, 3)), ValueError, "size: expected positive integers"),
        (lambda: forward(size=(2.5, 3)), TypeError, "size: expected positive integers"),
        (lambda: forward(size=(True, 3)), TypeError, "size: expected positive integers"),
        (
            lambda: forward(size=(2, 3, 4)),
            ValueError,
            "size: expected 2 values, one per spatial axis, got 3",
        ),
        (
            lambda: forward(size="8"),
            TypeError,
            "size: expected a number or a sequence of 2 numbers, got str",
        ),
        (
            lambda: forward(size=None, scale_factor=float("nan")),
            ValueError,
            "scale_factor: expected positive finite numbers",
        ),
        (lambda: forward(size=None, scale_factor=float("inf")), ValueError, "positive finite"),
        (lambda: forward(size=None, scale_factor=-1.0), ValueError, "positive finite"),
        (lambda: forward(size=None, scale_factor=0.0), ValueError, "positive finite"),
        (
            lambda: forward(size=None, scale_factor=0.1),
            ValueError,
            r"scale_factor: 0.1 makes an empty output axis \(floor\(4 \* 0.1\) = 0\)",
        ),
        (
            lambda: forward(mode="bilinaer"),
            ValueError,
            "mode: expected one of 'nearest', 'nearest-exact', 'area', 'area-opencv', 'linear', "
            "'bilinear', 'trilinear', 'bicubic', 'cubic', 'box', 'hamming', 'mitchell', "
            "'lanczos3', 'lanczos4', 'lanczos5', 'bspline', 'lanczos', got 'bilinaer'",
        ),
        (lambda: forward(mode=3), TypeError, "mode: expected a str"),
        (
            lambda: forward(mode="nearest", align_corners=False),
            ValueError,
            "align_corners: expected None with mode='nearest'",
        ),
        (
            lambda: forward(mode="area", align_corners=True),
            ValueError,
            "align_corners: expected None with mode='area'",
        ),
        (lambda: forward(mode="nearest-exact", align_corners=True), ValueError, "expected None"),
        (
            lambda: forward(align_corners="yes"),
            TypeError,
            "align_corners: expected True, False or None, got 'yes'",
        ),
        (
            lambda: forward(recompute_scale_factor=True),
            ValueError,
            "recompute_scale_factor: expected None or False with an explicit size",
        ),
        (
            lambda: forward(mode="nearest", antialias=True),
            ValueError,
            "antialias: expected False with mode='nearest' .antialias applies to linear, bilinear",
        ),
        (
            lambda: forward(antialias=True, align_corners=True),
            ValueError,
            "antialias: expected False with align_corners=True",
        ),
        (
            lambda: forward(mode="lanczos"),
            ValueError,
            "antialias: expected True with mode='lanczos' .PyTorch's name",
        ),
        (lambda: forward(antialias="no"), TypeError, "antialias: expected True or False"),
        (
            lambda: forward(out=np.zeros((1, 2, 8, 9), np.float32)),
            ValueError,
            r"out: expected shape \(1, 2, 8, 10\) and dtype float32, got shape \(1, 2, 8, 9\)",
        ),
        (
            lambda: forward(out=np.zeros((1, 2, 8, 10), np.float64)),
            ValueError,
            "got shape .* and dtype float64",
        ),
        (
            lambda: forward(out=np.zeros((1, 2, 10, 8), np.float32).transpose(0, 1, 3, 2)),
            ValueError,
            "out: expected a writeable C-contiguous array separate from the input, got one that is "
            "not C-contiguous",
        ),
        (lambda: forward(out=[0.0]), TypeError, "out: expected a numpy.ndarray, a Taichi scalar"),
        (
            lambda: backward(grad_output=np.zeros((1, 2, 8, 10), np.int32)),
            TypeError,
            "grad_output: expected dtype float32 or float64, got int32",
        ),
        (lambda: backward(grad_output=(1, 2)), TypeError, "grad_output: expected a numpy.ndarray"),
        (
            lambda: backward(input_size=(1, 3, 4, 5)),
            ValueError,
            r"input_size: expected \(N, C\) = \(1, 2\) as in grad_output, got \(1, 3\)",
        ),
        (
            lambda: backward(input_size=(1, 2, 4)),
            ValueError,
            "input_size: expected the forward input's full shape, 4 ints",
        ),
        (
            lambda: backward(input_size=(1, 2, 0, 5)),
            ValueError,
            "input_size: expected every spatial size >= 1",
        ),
        (
            lambda: backward(input_size=12),
            TypeError,
            "input_size: expected the forward input's full shape",
        ),
        (
            lambda: backward(scale_factor=1.5),
            ValueError,
            r"grad_output: expected spatial shape \(6, 7\) "
            r"\(floor\(input_size \* scale_factor\)\), got \(8, 10\)",
        ),
        (
            lambda: backward(method="numeric"),
            ValueError,
            r"method: expected one of \('adjoint', 'autodiff'\), got 'numeric'",
        ),
        (
            lambda: backward(out=np.zeros((1, 2, 4, 4), np.float32)),
            ValueError,
            "out: expected shape",
        ),
        (
            lambda: backward(mode="nearest", align_corners=True),
            ValueError,
            "align_corners: expected None",
        ),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_out_overlapping_the_input_is_refused(arch):
    x = np.zeros((1, 1, 8, 8))
    with pytest.raises(ValueError, match="got one that is overlapping the input"):
        tiinterp.interpolate(x, size=(8, 8), mode="bilinear", out=x)


def test_out_read_only_is_refused(arch):
    out = np.zeros((1, 2, 8, 10), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="got one that is read-only"):
        forward(out=out)


def test_too_many_elements_for_32_bit_indexing_is_refused():
    with pytest.raises(ValueError, match="expected at most 2147483647 elements"):
        forward(size=(50000, 50000))


# 536,895,241 elements: under 2^31, but 2,147,580,964 bytes in float32.
PAST_2_GIB_FLOAT32 = (23171, 23171)


def test_arrays_of_2_gib_are_refused_on_taichi_forge_only(arch):
    """taichi-forge refuses, at launch, an array argument of 2^31 bytes or more (with a C++
    message, taichi 1.7.4 has no such limit): tiinterp refuses it first, before allocating,
    as input, output or backward result, float32 and float64."""
    from tiinterp._rules import validate as _validate
    from tiinterp._runtime.taichi import BACKEND

    small = np.zeros((1, 1, 2, 2), np.float32)
    if BACKEND != "taichi_forge":
        _validate.check_element_count((1, 1, *PAST_2_GIB_FLOAT32), "output", 4)
        return
    message = r"output: expected at most 536870911 elements of 4 bytes \(taichi-forge"
    with pytest.raises(ValueError, match=message):
        tiinterp.interpolate(small, size=PAST_2_GIB_FLOAT32)
    with pytest.raises(ValueError, match="at most 268435455 elements of 8 bytes"):
        tiinterp.interpolate(small.astype(np.float64), size=(16384, 16384))
    with pytest.raises(ValueError, match=message):
        tiinterp.interpolate_backward(small, (1, 1, *PAST_2_GIB_FLOAT32), mode="bilinear")
    huge = np.broadcast_to(np.float32(0), (1, 1, *PAST_2_GIB_FLOAT32))  # no memory behind it
    with pytest.raises(ValueError, match=r"input: expected at most 536870911 elements"):
        tiinterp.interpolate(huge, size=(4, 4))


def test_interpolate_into_counts_bytes_where_the_backend_limits_them(arch, monkeypatch):
    """interpolate_into stages fields through flat ndarrays: with a byte limit (taichi-forge's
    2^31, here 511 so that the fields stay small) a dst of 512 bytes is refused."""
    from tiinterp._rules import validate as _validate
    from tiinterp._runtime.taichi import ti

    src, dst = ti.Vector.field(2, ti.f32, (4, 4)), ti.Vector.field(2, ti.f32, (8, 8))
    monkeypatch.setattr(_validate, "MAX_BYTES", 511)
    with pytest.raises(ValueError, match=r"dst: expected at most 127 elements of 4 bytes"):
        tiinterp.interpolate_into(src, dst, mode="bilinear")


def test_numpy_scalars_and_arrays_are_accepted_as_sizes(arch):
    a = forward(size=(np.int64(8), np.int32(10)))
    b = forward(size=np.array([8, 10]))
    c = forward(size=None, scale_factor=np.float32(2.0))
    d = forward(size=None, scale_factor=np.array([2.0, 2]))
    assert a.shape == b.shape == c.shape == d.shape == (1, 2, 8, 10)
    # A 0-d array is a number, as a NumPy scalar is.
    assert forward(size=np.array(8)).shape == (1, 2, 8, 8)
    assert forward(size=None, scale_factor=np.array(2.0)).shape == (1, 2, 8, 10)


ELEMENTS = r"expected at most 2147483647 elements \(Taichi indexes with 32-bit integers\)"
EMPTY_BATCH = np.zeros((0, 2, 4, 5), np.float32)


# Sizes, scale factors and shapes out of every range (past int32, int64, float64, Python's
# 4300 printable digits; inf, nan, -0.0, bools, NumPy scalars, sequences of absurd length):
# the documented TypeError / ValueError saying what was expected and what was given, at
# once, never an OverflowError, a hang or an allocation. Nothing here reaches Taichi.
@pytest.mark.parametrize(
    "call, error, message",
    [
        # The case: float(10**400) overflowed while the message was written.
        (lambda: forward(size=(10, 10**400)), ValueError,
         rf"output: {ELEMENTS}, got shape \(1, 2, 10, 1\.0e\+400\)$"),
        (lambda: forward(size=10**400), ValueError, r"got shape \(1, 2, 1\.0e\+400, 1\.0e\+400\)"),
        # str() refuses integers past 4300 digits.
        (lambda: forward(size=10**5000), ValueError,
         r"got shape \(1, 2, 1\.0e\+5000, 1\.0e\+5000\)"),
        (lambda: forward(size=-(10**5000)), ValueError,
         r"size: expected positive integers, got -1\.0e\+5000$"),
        (lambda: forward(input=EMPTY_BATCH, size=(10, 10**400)), ValueError,
         r"got shape \(0, 2, 10, 1\.0e\+400\) \(counting each empty axis as 1: 2\.0e\+401\)"),
        (lambda: forward(size=np.array([10**400, 3], dtype=object)), ValueError,
         r"got shape \(1, 2, 1\.0e\+400, 3\)"),
        # Past int32, int64 and uint64; an output of 10^12 elements.
        (lambda: forward(size=(2**31, 1)), ValueError, r"got shape \(1, 2, 2147483648, 1\)"),
        (lambda: forward(size=2**63), ValueError, r"got shape \(1, 2, 9\.2e\+18, 9\.2e\+18\)"),
        (lambda: forward(size=np.uint64(2**64 - 1)), ValueError, r"\(1, 2, 1\.8e\+19, 1\.8e\+19\)"),
        (lambda: forward(size=(np.int64(2**63 - 1), 1)), ValueError, r"\(1, 2, 9\.2e\+18, 1\)"),
        (lambda: forward(size=(1, 10**12)), ValueError, r"got shape \(1, 2, 1, 1000000000000\)"),
        (lambda: forward(size=(-(2**63), 3)), ValueError,
         r"size: expected positive integers, got \(-9223372036854775808, 3\)"),
        # Floats, bools and other numbers are not sizes.
        (lambda: forward(size=float("inf")), TypeError,
         "size: expected positive integers, got inf"),
        (lambda: forward(size=(2, float("nan"))), TypeError, r"got \(2, nan\)"),
        (lambda: forward(size=1e300), TypeError, "size: expected positive integers, got 1e\\+300"),
        (lambda: forward(size=-0.0), TypeError, "size: expected positive integers, got -0.0"),
        (lambda: forward(size=np.float64(8.0)), TypeError, r"got np.float64\(8.0\)"),
        (lambda: forward(size=np.True_), TypeError,
         "size: expected positive integers, got np.True_"),
        (lambda: forward(size=np.array(8.0)), TypeError, r"got array\(8\.\)"),
        (lambda: forward(size=2 + 0j), TypeError, "size: expected a number or a sequence of 2 "
         "numbers, got complex"),
        (lambda: forward(size=np.zeros((2, 1), int)), ValueError,
         r"size: expected a number or a 1-D sequence of 2 numbers, got an array of shape \(2, 1\)"),
        # A sequence's length is read before its items: tuple(range(10**20)) raised
        # OverflowError, and every item of a long list went into the message.
        (lambda: forward(size=range(10**20)), ValueError,
         r"size: expected a number or a 1-D sequence of 2 numbers, got more than "
         rf"{sys.maxsize} items \(a range\)"),
        (lambda: forward(size=[8] * 1000), ValueError, r"got 1000 items \(a list\)$"),
        # scale_factor: str() of 10**5000 raised "Exceeds the limit (4300 digits)".
        (lambda: forward(size=None, scale_factor=10**5000), ValueError,
         "scale_factor: expected positive finite numbers, got 1\\.0e\\+5000$"),
        (lambda: forward(size=None, scale_factor=(2, 10**400)), ValueError,
         r"scale_factor: expected positive finite numbers, got \(2, 1\.0e\+400\)$"),
        (lambda: forward(size=None, scale_factor=1e300), ValueError,
         rf"output: {ELEMENTS}, got shape \(1, 2, 4\.0e\+300, 5\.0e\+300\)$"),
        (lambda: forward(input=EMPTY_BATCH, size=None, scale_factor=1e300), ValueError,
         r"\(counting each empty axis as 1: 4\.0e\+601\)"),
        (lambda: forward(size=None, scale_factor=1e308), ValueError,
         r"scale_factor: expected a finite output size, got 1e\+308 for spatial shape \(4, 5\)"),
        (lambda: forward(size=None, scale_factor=-0.0), ValueError,
         "scale_factor: expected positive finite numbers, got -0.0"),
        (lambda: forward(size=None, scale_factor=np.float32("nan")), ValueError,
         r"got np.float32\(nan\)"),
        (lambda: forward(size=None, scale_factor=np.True_), TypeError,
         "scale_factor: expected positive finite numbers, got np.True_"),
        (lambda: forward(size=None, scale_factor=2**31), ValueError,
         r"got shape \(1, 2, 8589934592, 10737418240\)"),
        # interpolate_backward: input_size and its scale_factor.
        (lambda: backward(input_size=(1, 2, 10**400, 5)), ValueError,
         rf"input_size: {ELEMENTS}, got shape \(1, 2, 1\.0e\+400, 5\)"),
        (lambda: backward(input_size=(10**5000, 2, 4, 5)), ValueError,
         r"input_size: expected \(N, C\) = \(1, 2\) as in grad_output, got \(1\.0e\+5000, 2\)"),
        (lambda: backward(input_size=np.array([1, 2, 2**64 - 1, 5], np.uint64)), ValueError,
         r"got shape \(1, 2, 1\.8e\+19, 5\)"),
        (lambda: backward(input_size=np.array(4)), TypeError,
         r"input_size: expected the forward input's full shape, a sequence of 4 ints, got "
         r"array\(4\) \(a 0-d array\)"),
        (lambda: backward(input_size=np.array(4), layout="NCHW"), TypeError,
         r"in layout 'NCHW', 4 ints, got array\(4\) \(a 0-d array\)"),
        (lambda: backward(input_size=range(10**20), layout="NHWC"), ValueError,
         rf"in layout 'NHWC', 4 ints, got more than {sys.maxsize} items \(a range\)"),
        (lambda: backward(input_size=range(10**20)), ValueError, f"got more than {sys.maxsize}"),
        (lambda: backward(input_size=(1, 2, 4.0, 5)), ValueError, r"4 ints, got \(1, 2, 4.0, 5\)"),
        (lambda: backward(scale_factor=1e300), ValueError,
         r"grad_output: expected spatial shape \(4\.0e\+300, 5\.0e\+300\) \(floor"),
    ],
)  # fmt: skip
def test_numbers_out_of_every_range_raise_the_documented_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_spatial_axes_of_every_kind(arch):
    """interpolate_into's spatial_axes: NumPy integers and 1-D arrays are axes; huge and
    endless ones the documented errors with short messages."""
    from tiinterp._runtime.taichi import ti

    src, dst = ti.field(ti.f32, (1, 2, 4, 5)), ti.field(ti.f32, (1, 3, 8, 10))
    # dst's channels differ from src's: the error names the axes that were read.
    for axes in [(np.int64(2), np.int32(3)), np.array([2, 3]), np.array([-2, -1])]:
        with pytest.raises(ValueError, match=r"not spatial \(0, 1\) \(spatial axes: \(2, 3\)\)"):
            tiinterp.interpolate_into(src, dst, mode="bilinear", spatial_axes=axes)
    with pytest.raises(ValueError, match=r"\(spatial axes: \(3,\)\)"):
        tiinterp.interpolate_into(src, dst, mode="linear", spatial_axes=np.array(3))
    with pytest.raises(ValueError, match=r"from -4 to 3\), got \(1\.0e\+5000,\)$"):
        tiinterp.interpolate_into(src, dst, mode="linear", spatial_axes=10**5000)
    with pytest.raises(ValueError, match=rf"got more than {sys.maxsize} items \(a range\)"):
        tiinterp.interpolate_into(src, dst, mode="bilinear", spatial_axes=range(10**20))
    with pytest.raises(TypeError, match="spatial_axes: expected a sequence of 1-3 axis numbers"):
        tiinterp.interpolate_into(src, dst, mode="bilinear", spatial_axes=np.True_)


def test_init_rejects_unknown_arch_names():
    with pytest.raises(ValueError, match="arch: expected one of"):
        tiinterp.init("tpu")
    with pytest.raises(TypeError, match="arch: expected a str"):
        tiinterp.init(None)
