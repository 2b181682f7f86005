"""Inputs a demanding user constructs: each test here failed on an earlier tiinterp (a crash,
an internal error, stdout output or silent garbage) and pins the fix."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tiinterp
from tests import oracle
from tests.cases import MODES_2D
from tests.tolerances import relative_error, tolerance
from tiinterp._engine import passes as _engine
from tiinterp._runtime.taichi import ti

PY = sys.executable


def run_python(code: str, **env):
    """Run ``code`` in a fresh interpreter; returns the completed process."""
    return subprocess.run(
        [PY, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


# --- Output buffers, shapes and sizes -----------------------------------------------------------


def grid_case(dtype=np.float32):
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 6)).astype(dtype)
    grid = np.random.default_rng(2).uniform(-1, 1, (2, 4, 7, 2)).astype(dtype)
    return x, grid


def bad_out_buffers():
    """(description, make out from the input, the grid and the expected shape)."""

    def read_only(shape):
        out = np.zeros(shape, np.float32)
        out.flags.writeable = False
        return out

    return [
        ("fortran order", lambda x, g, s: np.zeros(s, np.float32, order="F"), "not C-contiguous"),
        ("negative strides", lambda x, g, s: np.zeros(s, np.float32)[::-1], "not C-contiguous"),
        (
            "every other element",
            lambda x, g, s: np.zeros(s[:-1] + (2 * s[-1],), np.float32)[..., ::2],
            "not C-contiguous",
        ),
        ("read-only", lambda x, g, s: read_only(s), "read-only"),
        (
            "a bytes buffer",
            lambda x, g, s: np.frombuffer(bytes(4 * int(np.prod(s))), np.float32).reshape(s),
            "read-only",
        ),
        (
            "the input itself",
            lambda x, g, s: x.reshape(-1)[: int(np.prod(s))].reshape(s),
            "overlapping the input",
        ),
        (
            "the grid itself",
            lambda x, g, s: g.reshape(-1)[: int(np.prod(s))].reshape(s),
            "overlapping the input",
        ),
    ]


@pytest.mark.parametrize(
    "description, make, problem", bad_out_buffers(), ids=[case[0] for case in bad_out_buffers()]
)
def test_grid_sample_refuses_an_unusable_out(arch, description, make, problem):
    x, grid = grid_case()
    x = np.zeros((2, 1, 9, 9), np.float32)  # input and grid each large enough to hold out
    out = make(x, grid, (2, 1, 4, 7))
    before = (x.copy(), grid.copy(), np.array(out))
    with pytest.raises(
        ValueError,
        match=f"out: expected a writeable C-contiguous array "
        f"separate from the input, got one that is {problem}",
    ):
        tiinterp.grid_sample(x, grid, out=out)
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(grid, before[1])
    np.testing.assert_array_equal(out, before[2])


def test_grid_sample_refuses_a_read_only_memmap(arch, tmp_path):
    """A read-only memmap used to be written to (a segmentation fault)."""
    path = tmp_path / "out.bin"
    np.zeros((2, 3, 4, 7), np.float32).tofile(path)
    out = np.memmap(path, np.float32, mode="r", shape=(2, 3, 4, 7))
    x, grid = grid_case()
    with pytest.raises(ValueError, match="got one that is read-only"):
        tiinterp.grid_sample(x, grid, out=out)


def test_grid_sample_fills_a_good_out_and_returns_it(arch):
    x, grid = grid_case()
    out = np.full((2, 3, 4, 7), np.nan, np.float32)
    assert tiinterp.grid_sample(x, grid, out=out) is out
    np.testing.assert_array_equal(out, tiinterp.grid_sample(x, grid))


@pytest.mark.parametrize(
    "shape, grid_shape",
    [
        ((0, 3, 5, 6), (0, 4, 7, 2)),
        ((2, 0, 5, 6), (2, 4, 7, 2)),
        ((2, 3, 5, 6), (2, 0, 7, 2)),
        ((0, 3, 2, 5, 6), (0, 4, 7, 1, 3)),
    ],
)
def test_grid_sample_of_empty_arrays_gives_empty_results(arch, shape, grid_shape):
    x = np.ones(shape, np.float32)
    grid = np.zeros(grid_shape, np.float32)
    y = tiinterp.grid_sample(x, grid)
    assert y.shape == shape[:2] + grid_shape[1:-1]
    gx, gg = tiinterp.grid_sample_backward(np.ones_like(y), x, grid)
    assert gx.shape == x.shape and gg.shape == grid.shape
    assert not gx.any() and not gg.any()


def test_grid_sample_takes_align_corners_none_like_pytorch(arch):
    x, grid = grid_case()
    np.testing.assert_array_equal(
        tiinterp.grid_sample(x, grid, align_corners=None),
        tiinterp.grid_sample(x, grid, align_corners=False),
    )


def test_grid_sample_refuses_outputs_past_2_31_elements_at_once(arch):
    x = np.zeros((1, 1, 2, 2), np.float32)
    grid = np.broadcast_to(np.zeros(2, np.float32), (1, 50_000, 50_000, 2))
    started = time.perf_counter()
    with pytest.raises(ValueError, match="expected at most 2147483647 elements"):
        tiinterp.grid_sample(x, grid)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(
    "grad_output, error, message",
    [
        (
            np.zeros((2, 3, 4, 7), np.complex64),
            TypeError,
            "grad_output: expected dtype float32 or float64, got complex64",
        ),
        (
            np.zeros((2, 3, 4, 7), np.int32),
            TypeError,
            "grad_output: expected dtype float32 or float64, got int32",
        ),
        (
            np.zeros((2, 3, 4, 7), bool),
            TypeError,
            "grad_output: expected dtype float32 or float64, got bool",
        ),
        (
            np.zeros((2, 3, 4, 7), np.float64),
            TypeError,
            "grad_output: expected dtype float32 like the input, got float64",
        ),
        (
            np.zeros((2, 3, 4, 6), np.float32),
            ValueError,
            r"grad_output: expected shape \(2, 3, 4, 7\), got \(2, 3, 4, 6\)",
        ),
        (
            [[0.0]],
            TypeError,
            "grad_output: expected a numpy.ndarray, a Taichi scalar ndarray or a "
            "torch.Tensor, got list",
        ),
    ],
)
def test_grid_sample_backward_refuses_bad_gradients(grad_output, error, message):
    x, grid = grid_case()
    with pytest.raises(error, match=message):
        tiinterp.grid_sample_backward(grad_output, x, grid)


def test_grid_sample_errors_have_the_same_types_as_interpolate():
    x, grid = grid_case()
    with pytest.raises(TypeError, match="grid: expected the same kind of array as the input"):
        tiinterp.grid_sample(x, torch.from_numpy(grid))
    with pytest.raises(TypeError, match="grid: expected dtype float32 like the input"):
        tiinterp.grid_sample(x, grid.astype(np.float64))
    with pytest.raises(TypeError, match="out: expected the same kind of array as the input"):
        tiinterp.grid_sample(x, grid, out=torch.zeros(2, 3, 4, 7))
    with pytest.raises(ValueError, match=r"out: expected shape \(2, 3, 4, 7\)"):
        tiinterp.grid_sample(x, grid, out=np.zeros((2, 3, 4, 6), np.float32))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: tiinterp.interpolate(
                np.zeros((0, 3, 8, 8), np.float32), size=(30_000_000, 30_000_000), mode="lanczos5"
            ),
            ValueError,
            r"output: expected at most 2147483647 elements .*counting each empty axis as 1: "
            r"2.7e\+15",
        ),
        (
            lambda: tiinterp.interpolate(np.zeros((1, 1, 8, 8), np.float32), scale_factor=10**400),
            ValueError,
            "scale_factor: expected positive finite numbers",
        ),
        (
            lambda: tiinterp.interpolate(np.zeros((1, 1, 8, 8), np.float32), scale_factor=1e300),
            ValueError,
            r"output: expected at most 2147483647 elements \(Taichi indexes with 32-bit "
            r"integers\), got shape \(1, 1, 8.0e\+300, 8.0e\+300\)",
        ),
        (
            lambda: tiinterp.interpolate(
                np.zeros((1, 1, 8, 8), np.float32), scale_factor=float(np.finfo(np.float64).max)
            ),
            ValueError,
            "scale_factor: expected a finite output size",
        ),
        (
            lambda: tiinterp.interpolate(np.zeros((1, 1, 8, 8), np.float32), size=10**30),
            ValueError,
            "output: expected at most 2147483647 elements",
        ),
        (
            lambda: tiinterp.interpolate(
                np.zeros((1, 1, 8, 8), np.float32), size=np.array([[8, 10]])
            ),
            ValueError,
            r"size: expected a number or a 1-D sequence of 2 numbers, got an array of "
            r"shape \(1, 2\)",
        ),
        (
            lambda: tiinterp.interpolate(torch.zeros(1, 1, 4, 4, device="meta"), size=2),
            TypeError,
            "input: expected a torch.Tensor with data, got one on the 'meta' device",
        ),
        (
            lambda: tiinterp.interpolate(torch.zeros(1, 1, 4, 4).to_sparse(), size=2),
            TypeError,
            "input: expected a dense \\(strided\\) torch.Tensor, got layout torch.sparse_coo",
        ),
        (
            lambda: tiinterp.grid_sample(
                torch.zeros(1, 1, 4, 4), torch.zeros(1, 2, 2, 2).to_sparse()
            ),
            TypeError,
            "grid: expected a dense \\(strided\\) torch.Tensor",
        ),
        (
            lambda: tiinterp.init("cpu", cpu_max_num_threads=0),
            ValueError,
            "cpu_max_num_threads: expected a positive int, got 0",
        ),
        (
            lambda: tiinterp.init("cpu", no_such_option=1),
            TypeError,
            "init: Unrecognized keyword argument",
        ),
    ],
)
def test_bad_input_is_a_clear_error_at_once(call, error, message):
    started = time.perf_counter()
    with pytest.raises(error, match=message):
        call()
    assert time.perf_counter() - started < 5


def test_interpolate_into_refuses_a_different_number_of_axes(arch):
    src = ti.field(ti.f32, (1, 1, 4, 4))
    dst = ti.field(ti.f32, (1, 1, 2, 8, 8))
    with pytest.raises(
        ValueError,
        match=r"dst: expected 4 axes like src \(1, 1, 4, 4\), got "
        r"shape \(1, 1, 2, 8, 8\)",
    ):
        tiinterp.interpolate_into(src, dst)


def test_init_with_bad_options_leaves_the_process_alive():
    """``ti.init(cpu_max_num_threads=0)`` aborts the process; tiinterp refuses it first."""
    result = run_python("""
        import tiinterp
        try:
            tiinterp.init("cpu", cpu_max_num_threads=0)
        except ValueError as error:
            print("refused:", error)
        """)
    assert result.returncode == 0, result.stderr
    assert "refused: cpu_max_num_threads: expected a positive int, got 0" in result.stdout


# --- Large launches -----------------------------------------------------------------------------


@pytest.mark.requires_autodiff
def test_autodiff_splits_launches_past_taichis_32_bit_loop_counter(arch, monkeypatch):
    """``ti.ndrange(outputs, taps)`` overflowed past 2^31 and the gradient came back all
    zero; the launches are now split. A small split size drives the same code here."""
    rng = np.random.default_rng(5)
    g = rng.standard_normal((2, 3, 13, 11))
    adjoint = tiinterp.interpolate_backward(g, (2, 3, 7, 17), mode="lanczos5")
    monkeypatch.setattr(_engine, "MAX_LOOP_ITERATIONS", 97)
    autodiff = tiinterp.interpolate_backward(g, (2, 3, 7, 17), mode="lanczos5", method="autodiff")
    assert relative_error(autodiff, adjoint) <= tolerance("reorder", "float64")


# --- NaN and Inf --------------------------------------------------------------------------------


def test_nan_in_grad_output_reaches_only_the_inputs_that_output_reads(arch):
    """The adjoint of nearest 11 -> 4 used to spread one NaN to 8 inputs, 7 of which no
    output reads (their empty windows computed 0 * NaN)."""
    g = np.array([np.nan, 1, 2, 3], np.float32).reshape(1, 1, 4)
    gx = tiinterp.interpolate_backward(g, (1, 1, 11), mode="nearest")
    expected = torch.zeros(1, 1, 11, requires_grad=True)
    F.interpolate(expected, size=4, mode="nearest").backward(torch.from_numpy(g))
    np.testing.assert_array_equal(gx, expected.grad.numpy())
    assert np.isnan(gx).sum() == 1


def test_area_keeps_an_inf_like_pytorch(arch):
    """Padding taps of weight 0 made ``0 * inf = nan`` in windows shorter than the widest."""
    x = np.zeros((1, 1, 11, 11), np.float32)  # windows of 3, 4, 4 and 3 inputs per axis
    x[0, 0, 0, 0] = np.inf
    y = tiinterp.interpolate(x, size=(4, 4), mode="area")
    expected = F.interpolate(torch.from_numpy(x), size=(4, 4), mode="area").numpy()
    np.testing.assert_array_equal(y, expected)
    assert np.isposinf(y[0, 0, 0, 0])


# --- Coordinates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, size, mode",
    [
        ((1, 1, 200_000), 500_000, "linear"),
        ((1, 1, 200_000, 1), (500_000, 1), "bilinear"),
        ((1, 1, 200_000, 2), (500_000, 2), "bicubic"),
        ((1, 1, 200_000, 1, 1), (500_000, 1, 1), "trilinear"),
    ],
)
def test_float32_long_axes_match_pytorch(arch, shape, size, mode):
    """PyTorch rounds the half-pixel source coordinate once (a fused multiply-add); rounding
    the product first drifted by up to 7.8e-3 (relative) from PyTorch at 200,000 ->
    500,000 rows, on +-1 data."""
    x = np.where(np.random.default_rng(0).random(shape) < 0.5, -1, 1).astype(np.float32)
    y = tiinterp.interpolate(x, size=size, mode=mode)
    expected = F.interpolate(torch.from_numpy(x), size=size, mode=mode, align_corners=False)
    assert relative_error(y, expected.numpy()) <= tolerance("pytorch_long_axis", "float32")


# --- Threads and output -------------------------------------------------------------------------


def test_calls_from_several_threads_agree_with_one_thread(arch):
    """A thread per mode, each calling forward and backward five times at once."""
    rng = np.random.default_rng(11)
    inputs = [
        rng.standard_normal((2, 3, 17 + i, 19 - i)).astype(np.float32) for i in range(len(MODES_2D))
    ]
    expected = [
        tiinterp.interpolate(x, size=(23, 11), mode=m)
        for x, m in zip(inputs, MODES_2D, strict=True)
    ]
    results, errors = {}, []

    def work(i):
        try:
            for _ in range(5):
                y = tiinterp.interpolate(inputs[i], size=(23, 11), mode=MODES_2D[i])
                tiinterp.interpolate_backward(y, inputs[i].shape, mode=MODES_2D[i])
            results[i] = y
        except Exception as error:  # reported below with its thread
            errors.append((i, repr(error)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(MODES_2D))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(len(MODES_2D)):
        np.testing.assert_array_equal(results[i], expected[i])


def test_init_from_another_thread_waits_for_calls_in_flight(arch):
    x = np.random.default_rng(12).standard_normal((4, 3, 64, 64)).astype(np.float32)
    expected = tiinterp.interpolate(x, size=(50, 70), mode="bicubic")
    errors = []

    def compute():
        try:
            for _ in range(20):
                np.testing.assert_array_equal(
                    tiinterp.interpolate(x, size=(50, 70), mode="bicubic"), expected
                )
        except Exception as error:
            errors.append(repr(error))

    workers = [threading.Thread(target=compute) for _ in range(3)]
    for t in workers:
        t.start()
    for _ in range(3):
        tiinterp.init(arch)
    for t in workers:
        t.join()
    assert errors == []


def test_cold_cache_calls_from_six_threads_right_after_init(tmp_path):
    """Six threads each compiling a different mode right after init: Taichi's front end
    raised "Kernels cannot call other kernels" and an LLVM thread assertion. Ones in, so
    every mode's exact output is 1."""
    result = run_python(
        f"""
        import threading
        import numpy as np
        import tiinterp
        tiinterp.init("cpu")
        errors = []
        def work(mode):
            try:
                x = np.ones((1, 2, 9, 9), np.float32)
                y = tiinterp.interpolate(x, size=(5, 7), mode=mode)
                tiinterp.interpolate_backward(y, x.shape, mode=mode)
                assert np.allclose(y, 1, atol={tolerance("oracle", "float32")!r}), mode
            except Exception as error:
                errors.append(repr(error))
        modes = ("nearest", "nearest-exact", "area", "bilinear", "bicubic", "lanczos3")
        threads = [threading.Thread(target=work, args=(m,)) for m in modes]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print("errors:", errors)
        """,
        TI_OFFLINE_CACHE_FILE_PATH=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "errors: []"


def test_nothing_is_printed_on_stdout(tmp_path):
    """Taichi prints a banner on import and a line per ti.init on stdout."""
    archs = ",".join(tiinterp.available_archs())
    result = run_python(
        f"""
        import numpy as np
        import tiinterp
        x = np.ones((1, 1, 4, 4), np.float32)
        for arch in "{archs}".split(",") + ["auto"]:
            tiinterp.init(arch)
            y = tiinterp.interpolate(x, size=(8, 8), mode="bicubic")
            tiinterp.interpolate_backward(y, x.shape, mode="bicubic")
            tiinterp.grid_sample(x, np.zeros((1, 3, 3, 2), np.float32))
        import importlib
        from tiinterp._runtime.taichi import BACKEND
        assert not importlib.import_module(BACKEND + ".lang.shell").pybuf_enabled
        """,
        TI_OFFLINE_CACHE_FILE_PATH=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == ""
    # Under the banner filter Taichi took the script for a notebook: it logged so on stderr
    # and flushed a print buffer after every kernel launch.
    assert "Graphical python shell detected" not in result.stderr


def test_verbose_sends_taichis_lines_to_stderr(tmp_path):
    result = run_python(
        """
        import tiinterp
        tiinterp.init("cpu")
        """,
        TIINTERP_VERBOSE="1",
        TI_OFFLINE_CACHE_FILE_PATH=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == ""
    assert "[Taichi] version" in result.stderr and "[Taichi] Starting on arch=x64" in result.stderr


def test_the_callers_subnormals_survive_taichis_start():
    """Note [Subnormals and the caller's floating-point state]: Taichi's start on the CPU
    switched the calling thread (and the threads it started later) to flush-to-zero."""
    run = run_python(
        """
        import threading
        import numpy as np
        import tiinterp

        def probe():
            return [float(np.float64(1e-310) * 0.5), float(np.log(np.exp(-740.0)))]

        before = probe()
        tiinterp.interpolate(np.ones((1, 1, 2, 2)), size=3, mode="bilinear")
        later = []
        thread = threading.Thread(target=lambda: later.append(probe()))
        thread.start()
        thread.join()
        print(before == probe() == later[0], before)
        """
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "True", run.stdout


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1, 2, 3), (1, 1, 40, 48), (4, 8, 96, 128)])
def test_subnormal_values_stay_within_a_few_smallest_normals(arch, dtype, shape):
    """Note [Subnormals and the caller's floating-point state]: Taichi's CPU workers flush
    subnormal results to zero, so a kernel may give 0 where the float64 oracle (and
    PyTorch) keeps a subnormal, depending on the call's size; never an error of 8 smallest
    normals or more (each flushed product or partial sum loses less than one; measured at
    most 4.8), forward and backward, every mode."""
    tiny = np.finfo(dtype).tiny
    rng = np.random.default_rng(44)
    x = (rng.random(shape) * tiny).astype(dtype)  # every sample subnormal
    size = (2 * shape[2] + 1, shape[3] + 3)
    grad_out = (rng.random((*shape[:2], *size)) * tiny).astype(dtype)
    for mode in MODES_2D:
        y = tiinterp.interpolate(x, size=size, mode=mode)
        g = tiinterp.interpolate_backward(grad_out, shape, mode=mode)
        assert np.abs(y - oracle.resize(x, size, mode)).max() < 8 * tiny, mode
        assert np.abs(g - oracle.resize_adjoint(grad_out, shape[2:], mode)).max() < 8 * tiny, mode


@pytest.mark.parametrize("kind", ["field", "ndarray"])
def test_taichi_steps_refuse_dst_being_their_input(arch, kind):
    """Issue 44: with dst being src, scale_and_translate_into and interpolate_into (mode
    "mitchell") were accepted and gave wrong numbers (errors 0.89 and 0.0056)."""
    make = ti.field if kind == "field" else ti.ndarray
    image = make(ti.f32, (1, 1, 6, 6))
    image.from_numpy(np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6))
    points = (ti.Vector.field if kind == "field" else ti.Vector.ndarray)(2, ti.f32, (1, 6, 6))
    message = "dst: expected another array than src"
    for mode in ("nearest", "bilinear", "mitchell", "lanczos3"):
        with pytest.raises(ValueError, match=message):
            tiinterp.interpolate_into(image, image, mode=mode)
    with pytest.raises(ValueError, match=message):
        tiinterp.scale_and_translate_into(image, image, [1.0, 1.0], [0.5, 0.0])
    with pytest.raises(ValueError, match=message):
        tiinterp.grid_sample_into(image, points, image)
    with pytest.raises(ValueError, match=message):
        tiinterp.bspline_coefficients_into(image, image)
    np.testing.assert_array_equal(image.to_numpy().ravel(), np.arange(36))
