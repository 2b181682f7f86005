"""What one call costs in launches, host arrays and allocations, on every arch: the prepared
device path (``tiinterp/_engine/device_path.py``, GPU archs), Taichi ndarrays on the CPU as NumPy
views, dense fields on the CPU read and written in place; and that the fused gather
(``tiinterp/_kernels/gather.py``) computes the separable passes' sums.
"""

import numpy as np
import pytest

import tiinterp
from tests import oracle
from tests.tolerances import relative_error, tolerance
from tiinterp._engine import device_path as _device_path
from tiinterp._rules.plan import ResizeSpec, adjoint_passes, forward_passes
from tiinterp._runtime import taichi as _taichi
from tiinterp._runtime.arrays import TaichiKind
from tiinterp._runtime.taichi import submodule, ti

kernel_impl = submodule("lang.kernel_impl")


class _Counter:
    """Counts kernel launches (through Taichi's call, a prepared launch or a bound host
    launch: Note [Bound host launches] in ``_runtime/taichi.py``), NumPy kernel arguments and
    ``ti.ndarray`` allocations; ``tiinterp_only``: only the launches of tiinterp's kernels."""

    def __init__(self, monkeypatch, tiinterp_only=False):
        self.launches = self.numpy_arguments = self.allocations = 0
        launch, allocate = kernel_impl.Kernel.__call__, ti.ndarray

        def counted_launch(kernel, *args, **kwargs):
            if not tiinterp_only or kernel.func.__module__.startswith("tiinterp."):
                self.launches += 1
                self.numpy_arguments += sum(isinstance(a, np.ndarray) for a in args)
            return launch(kernel, *args, **kwargs)

        def counted_allocation(*args, **kwargs):
            self.allocations += 1
            return allocate(*args, **kwargs)

        def counted_prepared_launch(prepared, args):
            self.launches += 1
            self.numpy_arguments += sum(isinstance(a, np.ndarray) for a in args)
            return prepared_launch(prepared, args)

        def counted_bound_launch(binding, args):
            self.launches += 1
            self.numpy_arguments += sum(isinstance(a, np.ndarray) for a in args)
            return bound_launch(binding, args)

        prepared_launch = _taichi._PreparedKernel.__call__
        bound_launch = _taichi._HostBinding.__call__
        monkeypatch.setattr(kernel_impl.Kernel, "__call__", counted_launch)
        monkeypatch.setattr(_taichi._PreparedKernel, "__call__", counted_prepared_launch)
        monkeypatch.setattr(_taichi._HostBinding, "__call__", counted_bound_launch)
        monkeypatch.setattr(ti, "ndarray", counted_allocation)

    def totals(self):
        return self.launches, self.numpy_arguments, self.allocations


def _ndarray(values):
    array = ti.ndarray(ti.f32, values.shape)
    array.from_numpy(values)
    return array


# (input shape, output size, mode): 2-D resizes and a trilinear 3-D one whose forward and
# adjoint tables are narrow enough to fuse (``_device_path.MAX_FUSED_TAPS``), with lines of
# at least 8 samples both ways (the CPU fuses two axes for lines of a float32 vector's
# lanes or more).
ONE_LAUNCH_CASES = [
    ((2, 3, 12, 10), (20, 9), "bilinear"),
    ((1, 2, 16, 16), (24, 12), "bicubic"),
    ((1, 2, 5, 6, 9), (9, 4, 8), "trilinear"),
]


@pytest.mark.parametrize("shape, size, mode", ONE_LAUNCH_CASES)
def test_a_call_with_out_launches_once_and_allocates_nothing(
    arch, rng, monkeypatch, shape, size, mode
):
    """On a GPU arch: one launch, no host array, no allocation. On the CPU the SIMD kernels
    read the ndarrays' memory: one launch per two axes, tables from host memory."""
    x = rng.standard_normal(shape).astype(np.float32)
    source, result = _ndarray(x), ti.ndarray(ti.f32, shape[:2] + size)
    grad = ti.ndarray(ti.f32, shape)
    # The first calls prepare the plans and upload the tables.
    tiinterp.interpolate(source, size=size, mode=mode, out=result)
    tiinterp.interpolate_backward(result, shape, mode=mode, out=grad)
    for call in (
        lambda: tiinterp.interpolate(source, size=size, mode=mode, out=result),
        lambda: tiinterp.interpolate_backward(result, shape, mode=mode, out=grad),
    ):
        counter = _Counter(monkeypatch)
        call()
        launches, numpy_arguments, allocations = counter.totals()
        assert allocations == 0
        if arch == "cpu":
            assert launches == len(size) - 1
        else:
            assert (launches, numpy_arguments) == (1, 0)


def test_a_field_step_is_one_launch_in_place(arch, rng, monkeypatch):
    src, dst = ti.field(ti.f32, (1, 2, 16, 16)), ti.field(ti.f32, (1, 2, 24, 40))
    values = rng.standard_normal((1, 2, 16, 16)).astype(np.float32)
    src.from_numpy(values)
    tiinterp.interpolate_into(src, dst, mode="bilinear")
    counter = _Counter(monkeypatch)
    tiinterp.interpolate_into(src, dst, mode="bilinear")
    # On the CPU the SIMD kernels read and write the fields' memory (their tables are host
    # arrays there); elsewhere the fused gather reads and writes the fields themselves.
    launches, numpy_arguments, allocations = counter.totals()
    assert (launches, allocations) == (1, 0)
    if arch != "cpu":
        assert numpy_arguments == 0
    expected = tiinterp.interpolate(values, size=(24, 40), mode="bilinear")
    np.testing.assert_array_equal(dst.to_numpy(), expected)


def test_a_field_step_on_a_tape_is_one_launch_each_way(arch, rng, monkeypatch):
    src = ti.field(ti.f32, (1, 2, 16, 16), needs_grad=True)
    dst = ti.field(ti.f32, (1, 2, 24, 40), needs_grad=True)
    loss = ti.field(ti.f32, (), needs_grad=True)

    @ti.kernel
    def total(dst: ti.template(), loss: ti.template()):
        for index in ti.grouped(dst):
            loss[None] += dst[index] * dst[index]

    src.from_numpy(rng.standard_normal((1, 2, 16, 16)).astype(np.float32))
    for counted in (False, True):
        # The first round compiles and probes the fields.
        counter = _Counter(monkeypatch, tiinterp_only=True) if counted else None
        with ti.ad.Tape(loss):
            tiinterp.interpolate_into(src, dst, mode="bilinear")
            total(dst, loss)
    launches, _, allocations = counter.totals()
    assert (launches, allocations) == (2, 0)
    expected = tiinterp.interpolate_backward(2 * dst.to_numpy(), (1, 2, 16, 16), mode="bilinear")
    np.testing.assert_allclose(src.grad.to_numpy(), expected, rtol=1e-6, atol=1e-6)


def _device_run(values, passes, out_shape):
    source, result = _ndarray(values), ti.ndarray(ti.f32, out_shape)
    _device_path.run_on_device(source, passes, result, TaichiKind)
    return result.to_numpy()


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos3"])
def test_fused_gather_computes_the_separable_sums(arch, rng, monkeypatch, mode):
    """The fused gather and the separable passes (each its own launch) agree to the bound of
    Note [Fused summation order], forward and adjoint, and match the float64 oracle."""
    in_shape, size = (2, 3, 11, 13), (17, 6)
    spec = ResizeSpec(in_shape, size, mode, False, (None, None), "float32", False)
    x = rng.standard_normal(in_shape).astype(np.float32)
    g = rng.standard_normal(spec.out_shape).astype(np.float32)
    results = []
    for fused_taps in (_device_path.MAX_FUSED_TAPS, 1):
        monkeypatch.setattr(_device_path, "MAX_FUSED_TAPS", fused_taps)
        forward = _device_run(x, forward_passes(spec), spec.out_shape)
        adjoint = _device_run(g, adjoint_passes(spec), in_shape)
        results.append((forward, adjoint))
    (fused, fused_adjoint), (separable, separable_adjoint) = results
    bound = tolerance("fused_gather", "float32")
    assert relative_error(fused, separable) <= bound
    assert relative_error(fused_adjoint, separable_adjoint) <= bound
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    assert relative_error(fused, oracle.resize(x64, size, mode)) <= tolerance("oracle", "float32")
    expected_adjoint = oracle.resize_adjoint(g64, in_shape[2:], mode)
    assert relative_error(fused_adjoint, expected_adjoint) <= tolerance("oracle", "float32")


@pytest.mark.parametrize("taps", ["compile-time", "run-time"])
def test_every_thread_layout_gives_the_same_bits(arch, rng, monkeypatch, taps):
    """Note [Threads over positions, planes inside]: a thread per output, a thread per
    position over every plane, and chunks of planes that do not divide them (4 of 6, 5 of
    6) give the same bits, forward and adjoint, 1-D to 3-D passes, with the tap counts
    compiled in (held in registers) or read at run time (Vulkan's form), against the
    float64 oracle."""
    if taps == "run-time":
        monkeypatch.setattr(_device_path, "UNROLLED_ARCHS", ())
    cases = [
        ((2, 3, 11, 13), (17, 6), "bicubic"),
        ((3, 2, 9), (14,), "bilinear"),
        ((1, 6, 5, 6, 9), (9, 4, 8), "trilinear"),
        ((2, 3, 12, 10), (12, 7), "nearest"),  # one pass, on the last axis
    ]
    for in_shape, size, mode in cases:
        spec = ResizeSpec(in_shape, size, mode, False, (None,) * len(size), "float32", False)
        x = rng.standard_normal(in_shape).astype(np.float32)
        g = rng.standard_normal(spec.out_shape).astype(np.float32)
        runs = []
        for per_thread in (1, 4, 5, 6):
            monkeypatch.setattr(_device_path, "planes_per_thread", lambda *_, n=per_thread: n)
            runs.append(
                (
                    _device_run(x, forward_passes(spec), spec.out_shape),
                    _device_run(g, adjoint_passes(spec), in_shape),
                )
            )
        for forward, adjoint in runs[1:]:
            np.testing.assert_array_equal(forward, runs[0][0])
            np.testing.assert_array_equal(adjoint, runs[0][1])
        x64, g64 = x.astype(np.float64), g.astype(np.float64)
        bound = tolerance("oracle", "float32")
        assert relative_error(runs[0][0], oracle.resize(x64, size, mode)) <= bound
        expected = oracle.resize_adjoint(g64, in_shape[2:], mode)
        assert relative_error(runs[0][1], expected) <= bound


def test_a_thread_over_thousands_of_planes_gives_every_plane(arch, rng, monkeypatch):
    """Every plane in one thread's loop (``MIN_THREADS`` 1) with wide tap tables: 3,000
    planes of a 6 x 6-tap lanczos3, where on Mesa's lavapipe one thread would loop 150,000
    times and its shader stop silently after 65,535 (Note [The loop limit of software
    Vulkan]); the planes per thread are capped there. Every plane matches the oracle."""
    monkeypatch.setattr(_device_path, "MIN_THREADS", 1)
    in_shape, size = (1, 3000, 4, 5), (6, 7)
    spec = ResizeSpec(in_shape, size, "lanczos3", False, (None, None), "float32", False)
    x = rng.standard_normal(in_shape).astype(np.float32)
    forward = _device_run(x, forward_passes(spec), spec.out_shape)
    expected = oracle.resize(x.astype(np.float64), size, "lanczos3")
    assert relative_error(forward, expected) <= tolerance("oracle", "float32")


def test_adjoint_is_bit_identical_run_to_run(arch, rng):
    g = _ndarray(rng.standard_normal((2, 4, 33, 47)).astype(np.float32))
    runs = [
        tiinterp.interpolate_backward(g, (2, 4, 16, 20), mode="bicubic").to_numpy()
        for _ in range(3)
    ]
    for run in runs[1:]:
        np.testing.assert_array_equal(run, runs[0])


def test_a_new_runtime_gets_new_tables(arch, rng):
    """Tables and pooled arrays belong to the runtime that made them: after ``ti.init`` the
    same call uploads them again instead of reading freed memory."""
    x = rng.standard_normal((1, 2, 7, 9)).astype(np.float32)
    before = tiinterp.interpolate(_ndarray(x), size=(5, 12), mode="bilinear").to_numpy()
    tiinterp.init(arch)
    after = tiinterp.interpolate(_ndarray(x), size=(5, 12), mode="bilinear").to_numpy()
    np.testing.assert_array_equal(after, before)
