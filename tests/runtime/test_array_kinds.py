"""Taichi ndarrays and torch tensors go in and come out as the same kind, same values."""

import numpy as np
import pytest
import torch

import tiinterp
from tests.cases import MODES_2D
from tests.kernel_spies import empty_at, spy_simd_argument
from tests.tolerances import relative_error, tolerance
from tiinterp._runtime.taichi import submodule as taichi_submodule
from tiinterp._runtime.taichi import ti

SHAPE, SIZE = (2, 3, 9, 12), (14, 5)


@pytest.fixture
def data(rng):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    g = rng.standard_normal(SHAPE[:2] + SIZE).astype(np.float32)
    return x, g


def to_taichi(a):
    array = ti.ndarray(ti.f32 if a.dtype == np.float32 else ti.f64, a.shape)
    array.from_numpy(a)
    return array


@pytest.mark.parametrize("mode", MODES_2D)
def test_taichi_ndarray_in_taichi_ndarray_out(arch, data, mode):
    x, g = data
    y = tiinterp.interpolate(to_taichi(x), size=SIZE, mode=mode)
    gx = tiinterp.interpolate_backward(to_taichi(g), SHAPE, mode=mode)
    assert type(y).__name__ == type(gx).__name__ == "ScalarNdarray"
    assert y.dtype == ti.f32 and tuple(y.shape) == SHAPE[:2] + SIZE
    # Taichi ndarrays cannot be reshaped, so on the CPU they take the generic kernel while
    # NumPy takes the fused one: the same sums, in another order.
    np.testing.assert_allclose(
        y.to_numpy(),
        tiinterp.interpolate(x, size=SIZE, mode=mode),
        rtol=0,
        atol=tolerance("array_kinds", "float32"),
    )
    np.testing.assert_allclose(
        gx.to_numpy(),
        tiinterp.interpolate_backward(g, SHAPE, mode=mode),
        rtol=0,
        atol=tolerance("array_kinds", "float32"),
    )


@pytest.mark.parametrize("mode", MODES_2D)
def test_torch_tensor_in_torch_tensor_out(arch, data, mode):
    x, g = data
    xt = torch.from_numpy(x).requires_grad_(True)
    y = tiinterp.interpolate(xt, size=SIZE, mode=mode)
    gx = tiinterp.interpolate_backward(torch.from_numpy(g), SHAPE, mode=mode)
    assert isinstance(y, torch.Tensor) and isinstance(gx, torch.Tensor)
    assert y.dtype == torch.float32 and y.device == xt.device and not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), tiinterp.interpolate(x, size=SIZE, mode=mode))
    np.testing.assert_array_equal(gx.numpy(), tiinterp.interpolate_backward(g, SHAPE, mode=mode))


def test_torch_matches_pytorch_itself_forward_and_backward(arch, data):
    x, g = data
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    expected = torch.nn.functional.interpolate(xt, size=SIZE, mode="bicubic", align_corners=True)
    expected.backward(torch.from_numpy(g.astype(np.float64)))
    y = tiinterp.interpolate(xt, size=SIZE, mode="bicubic", align_corners=True)
    gx = tiinterp.interpolate_backward(
        torch.from_numpy(g.astype(np.float64)), SHAPE, mode="bicubic", align_corners=True
    )
    bound = tolerance("pytorch_tensor", "float64")
    torch.testing.assert_close(y, expected.detach(), rtol=0, atol=bound)
    torch.testing.assert_close(gx, xt.grad, rtol=0, atol=bound)


def test_non_contiguous_torch_tensor_and_out_buffers(arch, data):
    x, _ = data
    wide = torch.from_numpy(np.ascontiguousarray(np.concatenate([x, x], axis=3)))
    view = wide[..., ::2]
    out = torch.empty(SHAPE[:2] + SIZE)
    result = tiinterp.interpolate(view, size=SIZE, mode="bilinear", out=out)
    assert result is out
    np.testing.assert_array_equal(
        out.numpy(),
        tiinterp.interpolate(np.ascontiguousarray(view.numpy()), size=SIZE, mode="bilinear"),
    )
    taichi_out = ti.ndarray(ti.f32, SHAPE[:2] + SIZE)
    assert (
        tiinterp.interpolate(to_taichi(x), size=SIZE, mode="bilinear", out=taichi_out) is taichi_out
    )


def _torch_views_of_one_buffer(how, first_count, offset, second_count):
    """Two float32 tensors of ``first_count`` and ``second_count`` elements over one piece
    of memory, the second ``offset`` elements after the first, each with a storage of its
    own."""
    total = max(first_count, offset + second_count)
    if how == "frombuffer":
        buffer = bytearray(4 * total)
        return (
            torch.frombuffer(buffer, dtype=torch.float32, count=first_count),
            torch.frombuffer(buffer, dtype=torch.float32, count=second_count, offset=4 * offset),
        )
    array = np.zeros(total, np.float32)
    wrap = torch.from_numpy if how == "from_numpy" else torch.from_dlpack
    return wrap(array[:first_count]), wrap(array[offset : offset + second_count])


def _resample_into(call, source, grid, out):
    if call == "interpolate":
        return tiinterp.interpolate(source, size=(6, 5), mode="bilinear", out=out)
    return tiinterp.grid_sample(source, grid, out=out)


@pytest.mark.parametrize("how", ["from_numpy", "frombuffer", "dlpack"])
@pytest.mark.parametrize("call", ["interpolate", "grid_sample-input", "grid_sample-grid"])
def test_torch_out_overlapping_an_input_through_another_storage_is_refused(arch, how, call):
    """Torch tensors over one memory can have storages of their own; an out= over the input
    (or the grid) was accepted when only storages were compared, and the result was wrong
    (max error 0.99). Adjacent tensors of one buffer do not overlap and are taken."""
    out_shape, grid_shape = (1, 2, 6, 5), (1, 6, 5, 2)
    in_shape = (1, 2, 4, 5) if call == "interpolate" else (1, 2, 7, 7)
    count = int(np.prod(out_shape))
    for offset, overlaps in ((count // 2, True), (count - 1, True), (count, False)):
        if call == "grid_sample-grid":
            out, grid = _torch_views_of_one_buffer(how, count, offset, int(np.prod(grid_shape)))
            grid, source = grid.view(grid_shape), torch.ones(in_shape)
        else:
            out, source = _torch_views_of_one_buffer(how, count, offset, int(np.prod(in_shape)))
            source, grid = source.view(in_shape), torch.zeros(grid_shape)
        source.fill_(1.0)
        out = out.view(out_shape)
        before = source.clone(), grid.clone()
        if overlaps:
            with pytest.raises(ValueError, match="got one that is overlapping the input"):
                _resample_into(call, source, grid, out)
            torch.testing.assert_close(source, before[0], rtol=0, atol=0)
            torch.testing.assert_close(grid, before[1], rtol=0, atol=0)
        else:
            assert _resample_into(call, source, grid, out) is out
            torch.testing.assert_close(out, torch.ones(out_shape), rtol=0, atol=0)


@pytest.mark.requires_autodiff
def test_autodiff_method_takes_every_kind(arch, data):
    _, g = data
    expected = tiinterp.interpolate_backward(g, SHAPE, mode="lanczos3")
    for grad in (to_taichi(g), torch.from_numpy(g)):
        got = tiinterp.interpolate_backward(grad, SHAPE, mode="lanczos3", method="autodiff")
        assert type(got) is type(grad)
        np.testing.assert_allclose(
            got.to_numpy() if hasattr(got, "to_numpy") else got.numpy(),
            expected,
            rtol=0,
            atol=tolerance("array_kinds", "float32"),
        )


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: tiinterp.interpolate(ti.Vector.ndarray(2, ti.f32, (1, 1, 4, 4)), size=2),
            TypeError,
            "expected a Taichi \\*scalar\\* ndarray",
        ),
        (
            lambda: tiinterp.interpolate(ti.ndarray(ti.i32, (1, 1, 4, 4)), size=2),
            TypeError,
            "input: expected dtype float32 or float64, got i32",
        ),
        (
            lambda: tiinterp.interpolate(torch.zeros(1, 1, 4, 4, dtype=torch.int64), size=2),
            TypeError,
            "input: expected dtype float32 or float64, got torch.int64",
        ),
        (
            lambda: tiinterp.interpolate(
                torch.zeros(1, 1, 4, 4), size=2, out=np.zeros((1, 1, 2, 2), np.float32)
            ),
            TypeError,
            r"out: expected the same kind of array as the input \(torch\), got ndarray",
        ),
        (
            lambda: tiinterp.interpolate(
                torch.zeros(1, 1, 4, 4), size=2, out=torch.zeros(1, 1, 2, 2, requires_grad=True)
            ),
            ValueError,
            "got one that is a tensor that requires grad",
        ),
        (
            lambda: tiinterp.interpolate(torch.zeros(4, 4), size=2),
            ValueError,
            r"expected a 3-D \(N, C, W\) or 4-D \(N, C, H, W\) or 5-D \(N, C, D, H, W\) array, "
            r"got shape \(4, 4\)",
        ),
    ],
)
def test_bad_arrays_of_other_kinds(arch, call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("reset", ["tiinterp.init", "ti.init", "ti.reset"])
def test_taichi_data_from_before_a_reinit_is_always_a_clear_error(arch, reset):
    """Taichi frees every ndarray and field on re-init without noticing later uses (zeros,
    "invalid DeviceAllocation" or an abort, measured); tiinterp tags each with the runtime
    that made it. Repeated, because the failures Taichi gives are not the same every time."""
    taichi_reset = taichi_submodule("lang.misc").reset

    restart = {
        "tiinterp.init": lambda: tiinterp.init(arch),
        "ti.init": lambda: ti.init(getattr(ti, "cpu" if arch == "cpu" else arch)),
        "ti.reset": taichi_reset,
    }[reset]
    message = "was made before the last ti.init / ti.reset / tiinterp.init, which freed it"
    try:
        for _ in range(5):
            tiinterp.init(arch)
            array = ti.ndarray(ti.f32, (1, 1, 4, 4))
            src = ti.field(ti.f32, (1, 1, 4, 4))
            dst = ti.field(ti.f32, (1, 1, 8, 8))
            restart()
            with pytest.raises(RuntimeError, match=f"input: this Taichi ndarray {message}"):
                tiinterp.interpolate(array, size=2)
            with pytest.raises(RuntimeError, match=f"src: this Taichi field {message}"):
                tiinterp.interpolate_into(src, dst)
    finally:
        tiinterp.init(arch)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos3"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sources_read_in_half_vectors_or_by_scalar_loads_agree(arch, rng, dtype, mode):
    """Note [Half-vector loads] (CPU): a large source on a 16-byte boundary is read in half
    vectors, as a NumPy array and as a torch tensor over the same memory (bit-identical); a
    copy 4 bytes off that boundary is read by scalar loads (to rounding). Other archs run
    the same checks through their own path."""
    shape, size = (2, 3, 128, 176), (100, 200)  # 135,168 elements per source
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape[:2] + size).astype(dtype)
    buffer = np.empty(x.size + 1, dtype)
    shift = 1 if buffer.ctypes.data % 16 == 0 else 0

    def forward(a):
        return tiinterp.interpolate(a, size=size, mode=mode)

    def backward(a):
        return tiinterp.interpolate_backward(a, shape, mode=mode)

    for data, call in ((x, forward), (g, backward)):
        assert data.ctypes.data % 16 == 0
        expected = call(data)
        as_tensor = call(torch.from_numpy(data))
        np.testing.assert_array_equal(as_tensor.numpy(), expected)
        off_boundary = buffer[shift : shift + data.size].reshape(data.shape)
        off_boundary[...] = data
        assert off_boundary.ctypes.data % 16 != 0
        error = relative_error(call(off_boundary), expected)
        assert error <= tolerance("reorder", dtype), (call.__name__, error)


# A kernel path each (tiinterp/_engine/cpu_path.py): both trailing axes fused (plane), one-tap
# tables (gather), the middle axis alone (middle, area leaving W as it is).
STORE_CASES = [
    ("bicubic", (2, 3, 128, 176), (100, 200)),
    ("nearest", (2, 3, 128, 176), (100, 200)),
    ("area", (2, 3, 128, 176), (100, 176)),
]


@pytest.mark.parametrize(("mode", "shape", "size"), STORE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_results_stored_as_vectors_half_vectors_or_scalars_agree(
    arch, rng, monkeypatch, dtype, mode, shape, size
):
    """Note [Store forms] (CPU): a large result 32 bytes aligned is stored in vectors, one
    16 bytes off in half vectors (bit-identical: the same sums, stored otherwise), one an
    element off by scalars (to rounding: another compilation); forward and adjoint. Other
    archs run the same calls through their own path."""
    forms = spy_simd_argument(monkeypatch, "stores")
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape[:2] + size).astype(dtype)
    itemsize = np.dtype(dtype).itemsize
    calls = (
        (lambda out: tiinterp.interpolate(x, size=size, mode=mode, out=out), g.shape),
        (lambda out: tiinterp.interpolate_backward(g, shape, mode=mode, out=out), shape),
    )
    for call, result_shape in calls:
        results = {}
        for offset, form in ((0, "vectors"), (16, "halves"), (itemsize, "scalars")):
            forms.clear()
            results[form] = call(empty_at(result_shape, dtype, offset))
            if arch == "cpu":
                assert forms and forms[-1] == form, (offset, forms)
        np.testing.assert_array_equal(results["halves"], results["vectors"])
        error = relative_error(results["scalars"], results["vectors"])
        assert error <= tolerance("reorder", dtype), error
