"""Small calls: the CPU's serial loops (Note [Small loops run serially] in
``tiinterp/_kernels/simd.py``) give the parallel ones' results, and repeated calls
(Note [Repeated calls] in ``tiinterp/_engine/passes.py``) the first call's."""

import inspect
import io
import sys
import threading
import time

import numpy as np
import pytest
import torch

import tiinterp
import tiinterp._engine.cpu_path as cpu_path_module
import tiinterp._kernels.simd as simd_module
import tiinterp._ops.resize as resize_module
import tiinterp._runtime.taichi as taichi_module
from tiinterp._engine.passes import RepeatCache

# isort: split
from tests import oracle
from tests.kernel_spies import empty_at, spy_simd_argument
from tests.tolerances import relative_error, tolerance

# (in_shape, size, mode): the fused plane (2-D), its last-axis form (1-D), the middle
# kernel (a 3-D depth pass), each forward and adjoint.
SMALL_CASES = [
    ((1, 1, 8, 8), (16, 16), "bilinear"),
    ((2, 3, 20, 12), (7, 30), "bicubic"),
    ((1, 2, 40), (9,), "linear"),
    ((1, 1, 6, 5, 4), (9, 3, 8), "trilinear"),
    ((1, 3, 17, 19), (8, 8), "area"),
    ((1, 2, 9, 7), (13, 5), "nearest"),
]


def _spied_serial_flags(monkeypatch, force_parallel):
    """Record the ``serial`` flag of every SIMD launch; with ``force_parallel`` every loop
    is prepared parallel whatever its size (in a fresh cache of prepared plans)."""
    flags = spy_simd_argument(monkeypatch, "serial")
    monkeypatch.setattr(cpu_path_module, "_CACHE", cpu_path_module._CpuCache())
    monkeypatch.setattr(resize_module, "_REPEATS", RepeatCache())
    if force_parallel:
        monkeypatch.setattr(cpu_path_module, "runs_serially", lambda iterations: False)
        monkeypatch.setattr(cpu_path_module, "runs_serially_for", lambda outputs: False)
    return flags


@pytest.mark.cpu_kernels
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("in_shape", "size", "mode"), SMALL_CASES)
def test_serial_loops_give_the_parallel_loops_bits(
    arch, rng, monkeypatch, in_shape, size, mode, dtype
):
    x = rng.standard_normal(in_shape).astype(dtype)
    runs = {}
    for force_parallel in (False, True):
        with monkeypatch.context() as patch:
            flags = _spied_serial_flags(patch, force_parallel)
            y = tiinterp.interpolate(x, size=size, mode=mode)
            # A misaligned ``out=`` takes the kernels' scalar-store form.
            out = np.empty(y.size + 1, dtype)[1:].reshape(y.shape)
            tiinterp.interpolate(x, size=size, mode=mode, out=out)
            g = tiinterp.interpolate_backward(np.cos(y), in_shape, mode=mode)
            runs[force_parallel] = (y, out, g, flags)
    serial, parallel = runs[False], runs[True]
    assert serial[3] and all(serial[3]), "a small call must run its loops serially"
    assert not any(parallel[3])
    for a, b in zip(serial[:3], parallel[:3], strict=True):
        # Under fast math LLVM may contract the two compilations' multiply-adds differently.
        assert relative_error(a, b) <= tolerance("reorder", dtype)
    assert np.array_equal(serial[0], serial[1])


@pytest.mark.cpu_kernels
def test_calls_past_the_serial_size_keep_every_thread(arch, rng, monkeypatch):
    """Past SERIAL_OUTPUTS values a call's loop stays parallel, with at least a thread
    block of iterations per thread of the runtime, however few its jobs: here 2 planes of
    8 row groups (Note [Workers and threads] in tiinterp/_kernels/simd.py)."""
    from tiinterp._runtime.taichi import cpu_threads

    flags = _spied_serial_flags(monkeypatch, force_parallel=False)
    iterations = []
    spied_plane = cpu_path_module.simd_plane

    def plane(*args):
        bound = inspect.signature(simd_module.simd_plane).bind(*args)
        iterations.append(bound.arguments["counts"][0])
        return spied_plane(*args)

    monkeypatch.setattr(cpu_path_module, "simd_plane", plane)
    x = rng.standard_normal((2, 1, 40, 300)).astype("float32")
    y = tiinterp.interpolate(x, size=(64, 600), mode="bilinear")
    assert y.size > simd_module.SERIAL_OUTPUTS
    assert flags == [False]
    assert iterations == [simd_module.CPU_THREAD_BLOCK * cpu_threads()]
    expected = oracle.resize(x.astype(np.float64), (64, 600), "bilinear")
    assert relative_error(y, expected) <= tolerance("oracle", "float32")
    assert simd_module.runs_serially_for(simd_module.SERIAL_OUTPUTS)
    assert not simd_module.runs_serially_for(simd_module.SERIAL_OUTPUTS + 1)
    assert simd_module.runs_serially(simd_module.CPU_THREAD_BLOCK)
    assert not simd_module.runs_serially(simd_module.CPU_THREAD_BLOCK + 1)


# --- Repeated calls (Note [Repeated calls] in tiinterp/_engine/passes.py) -----------------------

REPEATED = [
    dict(size=(16, 16), mode="bilinear"),
    dict(size=(7, 30), mode="bicubic", antialias=True),
    dict(scale_factor=0.5, mode="nearest"),
    dict(size=[5, 9], mode="area"),
    dict(size=(3, 4, 5), mode="trilinear", align_corners=True),
    # Tables too wide to unroll on both axes: two launches of one kernel with different
    # template values (the axis) in one prepared plan.
    dict(size=(3, 2), mode="lanczos3", antialias=True),
]


def _input_for(call, rng, dtype="float32"):
    shape = (2, 3, 6, 8, 10) if call["mode"] == "trilinear" else (2, 3, 12, 10)
    if call.get("antialias"):
        shape = (1, 2, 40, 36)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("call", REPEATED, ids=lambda c: c["mode"])
def test_a_repeated_call_gives_the_first_calls_bits(arch, rng, call, monkeypatch):
    """The second call of a signature skips the checks and the planning: its result and
    its gradient, with and without ``out=``, equal the first call's and the checked
    path's (a call that finds nothing remembered)."""
    x = _input_for(call, rng)
    before = x.copy()
    first = tiinterp.interpolate(x, **call)
    repeats = [tiinterp.interpolate(x, **call) for _ in range(3)]
    repeats.append(tiinterp.interpolate(x, **call, out=np.empty_like(first)))
    g = np.cos(first)
    backward = {k: v for k, v in call.items() if k != "size"}
    gradients = [tiinterp.interpolate_backward(g, x.shape, **backward) for _ in range(3)]
    gradients.append(tiinterp.interpolate_backward(g, x.shape, **backward, out=np.empty_like(x)))
    monkeypatch.setattr(resize_module, "_REPEATS", RepeatCache())
    checked = tiinterp.interpolate(x, **call, out=np.empty_like(first))
    checked_gradient = tiinterp.interpolate_backward(g, x.shape, **backward, out=np.empty_like(x))
    for repeat in [*repeats, checked]:
        assert repeat is not first and repeat.flags.c_contiguous
        np.testing.assert_array_equal(repeat, first)
    for gradient in gradients:
        np.testing.assert_array_equal(gradient, checked_gradient)
    options = dict(align_corners=call.get("align_corners", False))
    options.update(antialias=call.get("antialias", False))
    expected = oracle.resize(x.astype("float64"), first.shape[2:], call["mode"], **options)
    assert relative_error(first, expected) <= tolerance("oracle", "float32")
    np.testing.assert_array_equal(x, before)


def _remember_nothing(monkeypatch):
    """Every call from now on takes the full path: checked, planned and run by its steps."""
    repeats = RepeatCache()
    monkeypatch.setattr(repeats, "lookup", lambda array, arguments: (None, None))
    monkeypatch.setattr(resize_module, "_REPEATS", repeats)


def _offset_view(values, offset_bytes):
    view = empty_at(values.shape, values.dtype, offset_bytes)
    view[...] = values
    return view


def _counting_replays(monkeypatch):
    replays = []
    replay = taichi_module.RecordedLaunches.__call__

    def counted(self, addresses):
        ran = replay(self, addresses)
        replays.append(ran)
        return ran

    monkeypatch.setattr(taichi_module.RecordedLaunches, "__call__", counted)
    return replays


@pytest.mark.cpu_kernels
@pytest.mark.prepared_launches
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("call", REPEATED, ids=lambda c: c["mode"])
def test_repeats_replay_recorded_launches_at_every_alignment(arch, rng, call, dtype, monkeypatch):
    """Repeats replay the launches recorded at their first call (Note [Recorded launches]
    in ``_runtime/taichi.py``), one recording per alignment of the source and the result
    (their views and store forms depend on it): sources and results at every 4-byte offset
    from a 64-byte boundary, in turn, NumPy and torch, forward and backward, give the bits
    of a call that remembers nothing, and no replay runs on arrays it was not recorded
    for (such a replay wrote past the result in a trial, and crashed)."""
    x = _input_for(call, rng, dtype)
    backward = {k: v for k, v in call.items() if k != "size"}
    with monkeypatch.context() as patch:
        _remember_nothing(patch)
        expected = tiinterp.interpolate(x, **call)
        g = np.cos(expected)
        expected_gradient = tiinterp.interpolate_backward(g, x.shape, **backward)
    replays = _counting_replays(monkeypatch)
    monkeypatch.setattr(resize_module, "_REPEATS", RepeatCache())
    offsets = [0, 4, 8, 16, 24, 32, 36, 0, 16, 4]
    for source_offset, out_offset in zip(offsets, offsets[3:] + offsets[:3], strict=True):
        source, gradient = _offset_view(x, source_offset), _offset_view(g, source_offset)
        out = _offset_view(np.zeros_like(expected), out_offset)
        grad_out = _offset_view(np.zeros_like(x), out_offset)
        np.testing.assert_array_equal(tiinterp.interpolate(source, **call), expected)
        assert tiinterp.interpolate(source, **call, out=out) is out
        np.testing.assert_array_equal(out, expected)
        adjoint = tiinterp.interpolate_backward(gradient, x.shape, **backward)
        np.testing.assert_array_equal(adjoint, expected_gradient)
        tiinterp.interpolate_backward(gradient, x.shape, **backward, out=grad_out)
        np.testing.assert_array_equal(grad_out, expected_gradient)
        as_tensor = torch.from_numpy(source)
        np.testing.assert_array_equal(tiinterp.interpolate(as_tensor, **call).numpy(), expected)
    assert replays and all(replays), "repeats must replay their recordings"


def test_calls_too_large_to_record_repeat_without_a_recording(arch, rng, monkeypatch):
    """A recording keeps its intermediates and scratch: calls that would keep more than
    MAX_RECORDED_BYTES repeat through the prepared steps, with the same bits."""
    x = rng.standard_normal((1, 2, 6, 8, 10)).astype("float32")
    call = dict(size=(3, 4, 5), mode="trilinear")
    expected = tiinterp.interpolate(x, **call)
    replays = _counting_replays(monkeypatch)
    monkeypatch.setattr(resize_module, "_REPEATS", RepeatCache())
    monkeypatch.setattr(cpu_path_module, "MAX_RECORDED_BYTES", 0)
    for _ in range(3):
        np.testing.assert_array_equal(tiinterp.interpolate(x, **call), expected)
    assert replays == []


@pytest.mark.cpu_kernels
@pytest.mark.prepared_launches
def test_a_recording_declines_under_a_tape(arch, rng, monkeypatch):
    """A replay launches below Taichi's kernel objects, where ``ti.ad.Tape`` would not see
    it: with a tape active it runs nothing and says so (the call then takes the prepared
    steps, which Taichi records)."""
    from taichi.lang import impl

    x = rng.standard_normal((1, 1, 8, 8)).astype("float32")
    expected = tiinterp.interpolate(x, size=16, mode="bilinear")
    result = np.zeros_like(expected)
    prepared = cpu_path_module._CACHE.prepared
    recording = next(reversed(prepared.values())).record(x, result)
    result[...] = 0
    addresses = (x.ctypes.data, result.ctypes.data)
    monkeypatch.setattr(impl.get_runtime(), "target_tape", object())
    assert recording(addresses) is False
    np.testing.assert_array_equal(result, 0)
    monkeypatch.undo()
    assert recording(addresses) is True
    np.testing.assert_array_equal(result, expected)


def test_a_bound_launch_sets_again_the_arguments_that_changed(arch, rng):
    """A step's launches keep their tables set between calls (Note [Bound host launches]
    in ``_runtime/taichi.py``), and set them again when a call passes other ones: two plans' tables
    through the same kernel, alternately, each call against NumPy's sum of the taps."""
    from tiinterp._kernels.resample import resample_axis

    launches = taichi_module.HostLaunches()
    source = rng.standard_normal((2, 9)).astype("float32")
    tables = []
    for shift in (0, 3):
        index = (np.arange(4)[:, None] + np.arange(2)[None, :] + shift).astype(np.int32)
        weight = rng.random((4, 2)).astype("float32")
        tables.append((index, np.full(4, 2, np.int32), weight))
    for call in range(6):
        index, count, weight = tables[call % 2]
        target = np.empty((2, 4), np.float32)
        launches(resample_axis, source, target, 1, index, count, weight, 0, 2)
        expected = (source[:, index] * weight).sum(axis=-1)
        np.testing.assert_allclose(target, expected, rtol=1e-6)


@pytest.mark.prepared_launches
def test_bound_launches_hold_no_reference_to_the_taichi_program(arch, rng):
    """Bound launches outlive their runtime, and a Taichi program they kept alive would be
    destroyed under the next one (Note [Bound host launches]; it segfaulted a later test):
    repeated calls, bound on the CPU, leave the program's reference count as it was."""
    from taichi.lang import impl

    x = rng.standard_normal((1, 2, 8, 8)).astype("float32")
    tiinterp.interpolate(x, size=(16, 12), mode="bicubic")
    program = impl.get_runtime().prog
    before = sys.getrefcount(program)
    for _ in range(3):
        tiinterp.interpolate(x, size=(16, 12), mode="bicubic")
        tiinterp.interpolate_backward(x, (1, 2, 5, 4), mode="bicubic")
    assert sys.getrefcount(program) == before


def test_a_repeat_of_a_refused_call_is_refused_again(arch, rng):
    """Signatures tell ``size=16`` from ``size=16.0`` and ``True`` from ``1``: the refused
    twin of a remembered call is checked, and refused, every time."""
    x = rng.standard_normal((1, 2, 8, 8)).astype("float32")
    tiinterp.interpolate(x, size=16, mode="bilinear", align_corners=False)
    for _ in range(2):
        with pytest.raises(TypeError, match=r"size: expected positive integers, got 16\.0"):
            tiinterp.interpolate(x, size=16.0, mode="bilinear", align_corners=False)
        with pytest.raises(TypeError, match="align_corners"):
            tiinterp.interpolate(x, size=16, mode="bilinear", align_corners=0)


def test_repeats_follow_the_input_dtype_layout_and_byte_order(arch, rng):
    """Inputs of another dtype, non-contiguous or byte-swapped ones, are their own calls
    (the last two never remembered) and give the same values."""
    x = rng.standard_normal((1, 2, 9, 11))
    call = dict(size=(5, 13), mode="bicubic")
    expected = tiinterp.interpolate(x, **call)
    tiinterp.interpolate(x, **call)
    as_float32 = tiinterp.interpolate(x.astype("float32"), **call)
    assert as_float32.dtype == np.float32
    np.testing.assert_allclose(as_float32, expected, rtol=1e-5, atol=1e-5)
    strided = np.zeros((1, 2, 9, 22))
    strided[..., ::2] = x
    swapped = x.astype(">f8")
    for variant in (strided[..., ::2], swapped, np.asfortranarray(x)):
        for _ in range(2):
            np.testing.assert_array_equal(tiinterp.interpolate(variant, **call), expected)


def test_repeats_are_forgotten_with_the_runtime(arch, rng, monkeypatch):
    """A new Taichi runtime (ti.init, ti.reset, a forked child) compiled nothing of the old
    one's: remembered calls are dropped, and the next call is checked and prepared again."""
    x = rng.standard_normal((1, 1, 6, 6)).astype("float32")
    first = tiinterp.interpolate(x, size=(9, 9), mode="bilinear")
    tiinterp.interpolate(x, size=(9, 9), mode="bilinear")
    # As a forked child sees it (a new runtime is another runtime object).
    monkeypatch.setattr(taichi_module, "_forks", [taichi_module._forks[0] + 1])
    checked = []
    planned = _counting(resize_module.forward_passes, checked)
    monkeypatch.setattr(resize_module, "forward_passes", planned)
    again = tiinterp.interpolate(x, size=(9, 9), mode="bilinear")
    np.testing.assert_array_equal(again, first)
    assert checked == [1], "the call after a new runtime must be planned again"


@pytest.mark.cpu_kernels
def test_a_repeated_call_is_not_checked_or_planned_again(arch, rng, monkeypatch):
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    g = tiinterp.interpolate(x, size=(5, 16), mode="lanczos3")
    tiinterp.interpolate_backward(g, x.shape, mode="lanczos3")
    checked = []
    for name in ("forward_passes", "adjoint_passes"):
        monkeypatch.setattr(resize_module, name, _counting(getattr(resize_module, name), checked))
    monkeypatch.setattr(
        resize_module.v, "forward_spec", _counting(resize_module.v.forward_spec, checked)
    )
    out, grad_out = np.empty_like(g), np.empty_like(x)
    tiinterp.interpolate(x, size=(5, 16), mode="lanczos3")
    tiinterp.interpolate_backward(g, x.shape, mode="lanczos3")
    assert tiinterp.interpolate(x, size=(5, 16), mode="lanczos3", out=out) is out
    assert tiinterp.interpolate_backward(g, x.shape, mode="lanczos3", out=grad_out) is grad_out
    assert checked == []
    np.testing.assert_array_equal(out, g)


def test_a_repeated_call_checks_its_out_array(arch, rng):
    """A repeat with ``out=`` writes only an array the full call would accept: after the
    call is remembered, an ``out`` of another shape, dtype, kind, a read-only one, a
    non-contiguous one and one overlapping the input are refused as the first time, and
    the input is never written."""
    x = rng.standard_normal((1, 2, 8, 8)).astype("float32")
    call = dict(size=(12, 12), mode="bilinear")
    expected = tiinterp.interpolate(x, **call)
    tiinterp.interpolate(x, **call, out=np.empty_like(expected))
    before = x.copy()
    read_only = np.empty_like(expected)
    read_only.flags.writeable = False
    overlapping = np.empty(x.size + expected.size, np.float32)
    overlapping[: x.size] = x.ravel()
    refused = {
        "shape": (np.empty((1, 2, 12, 11), np.float32), ValueError, "expected shape"),
        "dtype": (np.empty_like(expected, dtype=np.float64), ValueError, "dtype float32"),
        "kind": (torch.empty(expected.shape), TypeError, "same kind of array"),
        "read-only": (read_only, ValueError, "read-only"),
        "strided": (np.empty((1, 2, 12, 24), np.float32)[..., ::2], ValueError, "C-contig"),
        "overlapping": (
            overlapping[x.size // 2 : x.size // 2 + expected.size].reshape(expected.shape),
            ValueError,
            "overlapping the input",
        ),
    }
    source = overlapping[: x.size].reshape(x.shape)
    for name, (out, error, message) in refused.items():
        with pytest.raises(error, match=message):
            tiinterp.interpolate(source if name == "overlapping" else x, **call, out=out)
    np.testing.assert_array_equal(x, before)
    out = np.empty_like(expected)
    assert tiinterp.interpolate(x, **call, out=out) is out
    np.testing.assert_array_equal(out, expected)


def _taichi_array(values):
    array = taichi_module.ti.ndarray(taichi_module.ti.f32, values.shape)
    array.from_numpy(values)
    return array


@pytest.mark.parametrize("kind", ["taichi", "torch"])
@pytest.mark.parametrize("call", REPEATED, ids=lambda c: c["mode"])
def test_repeats_of_taichi_ndarrays_and_torch_tensors(arch, rng, call, kind, monkeypatch):
    """Taichi ndarrays and torch tensors are remembered too (on GPU archs their repeat
    launches the prepared gather straight away: ``_device_path.DeviceRepeat``): repeats,
    with and without ``out=``, forward and backward, give the checked path's bits."""
    x = _input_for(call, rng)
    g = np.cos(tiinterp.interpolate(x, **call))
    make = _taichi_array if kind == "taichi" else torch.from_numpy
    as_numpy = (lambda a: a.to_numpy()) if kind == "taichi" else (lambda a: a.numpy())
    source, gradient = make(x), make(g)
    backward = {k: v for k, v in call.items() if k != "size"}
    runs = []
    for _ in range(3):
        out, grad_out = make(np.zeros_like(g)), make(np.zeros_like(x))
        runs.append(
            (
                as_numpy(tiinterp.interpolate(source, **call)),
                as_numpy(tiinterp.interpolate(source, **call, out=out)),
                as_numpy(tiinterp.interpolate_backward(gradient, x.shape, **backward)),
                as_numpy(
                    tiinterp.interpolate_backward(gradient, x.shape, **backward, out=grad_out)
                ),
            )
        )
    _remember_nothing(monkeypatch)
    checked = as_numpy(tiinterp.interpolate(source, **call))
    checked_gradient = as_numpy(tiinterp.interpolate_backward(gradient, x.shape, **backward))
    for forward, forward_out, adjoint, adjoint_out in runs:
        np.testing.assert_array_equal(forward, checked)
        np.testing.assert_array_equal(forward_out, checked)
        np.testing.assert_array_equal(adjoint, checked_gradient)
        np.testing.assert_array_equal(adjoint_out, checked_gradient)
    np.testing.assert_array_equal(as_numpy(source), x)


def test_a_repeat_of_taichi_ndarrays_checks_out_and_the_runtime(arch, rng, monkeypatch):
    """A remembered call on Taichi ndarrays is not checked or planned again on GPU archs
    (on the CPU they take NumPy's path through views), and refuses what the full call
    refuses: ``out`` of another shape or dtype, ``out`` being the input; and an ndarray
    from before a new runtime is a clear error, not a launch on freed memory."""
    x = rng.standard_normal((1, 2, 8, 8)).astype("float32")
    source = _taichi_array(x)
    call = dict(size=(8, 8), mode="bilinear")
    expected = tiinterp.interpolate(x, **call)
    for _ in range(2):
        tiinterp.interpolate(source, **call, out=_taichi_array(np.zeros_like(expected)))
    checked = []
    with monkeypatch.context() as patch:
        patch.setattr(
            resize_module.v, "forward_spec", _counting(resize_module.v.forward_spec, checked)
        )
        repeated = tiinterp.interpolate(source, **call)
    assert checked == ([1] if arch == "cpu" else [])
    np.testing.assert_array_equal(repeated.to_numpy(), expected)
    ti = taichi_module.ti
    with pytest.raises(ValueError, match="expected shape"):
        tiinterp.interpolate(source, **call, out=ti.ndarray(ti.f32, (1, 2, 8, 9)))
    with pytest.raises(ValueError, match="overlapping the input"):
        tiinterp.interpolate(source, **call, out=source)
    np.testing.assert_array_equal(source.to_numpy(), x)
    tiinterp.init(arch)
    fresh = _taichi_array(x)
    for _ in range(2):
        np.testing.assert_array_equal(tiinterp.interpolate(fresh, **call).to_numpy(), expected)
    with pytest.raises(RuntimeError, match=r"made before the last ti\.init"):
        tiinterp.interpolate(source, **call)


def _counting(function, calls):
    def counted(*args, **kwargs):
        calls.append(1)
        return function(*args, **kwargs)

    return counted


def test_repeated_calls_from_several_threads_agree(arch, rng):
    """Threads repeating the same calls get the single-threaded results, bit for bit."""
    from concurrent.futures import ThreadPoolExecutor

    inputs = [rng.standard_normal((1, 3, 10 + i, 12)).astype("float32") for i in range(3)]
    expected = [tiinterp.interpolate(x, size=(20, 7), mode="bicubic") for x in inputs]

    def work(i):
        x = inputs[i % 3]
        return i % 3, [tiinterp.interpolate(x, size=(20, 7), mode="bicubic") for _ in range(20)]

    with ThreadPoolExecutor(4) as pool:
        for which, results in pool.map(work, range(12)):
            for result in results:
                np.testing.assert_array_equal(result, expected[which])


# --- First calls --------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_slow_first_launch_on_a_terminal_prints_one_notice(monkeypatch):
    """Note [Compile notice] in tiinterp/_runtime/taichi.py: one line on a terminal's stderr when
    a first launch takes long, once per process; nothing when it is quick, nothing in logs."""
    monkeypatch.setattr(taichi_module, "_compile_notice_shown", threading.Event())
    monkeypatch.setattr(taichi_module, "COMPILE_NOTICE_SECONDS", 30.0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with taichi_module.compile_notice():
        pass  # quick: no notice
    assert terminal.getvalue() == ""
    monkeypatch.setattr(taichi_module, "COMPILE_NOTICE_SECONDS", 0.01)
    for _ in range(2):
        with taichi_module.compile_notice():
            time.sleep(0.3)
    assert terminal.getvalue() == taichi_module.COMPILE_NOTICE
    assert terminal.getvalue().startswith("tiinterp: compiling Taichi kernels")

    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setattr(taichi_module, "_compile_notice_shown", threading.Event())
    with taichi_module.compile_notice():
        time.sleep(0.3)
    assert log.getvalue() == ""
