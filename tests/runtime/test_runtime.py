"""Arch selection and switching: tiinterp.init, available_archs, TIINTERP_ARCH."""

import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import tiinterp
from tests.tolerances import tolerance
from tiinterp._runtime.session import supports_float64
from tiinterp._runtime.taichi import current_config, impl, ti

GPU_ARCHS = ("cuda", "vulkan", "metal")


def test_available_archs_lists_the_cpu_last_and_best_first():
    archs = tiinterp.available_archs()
    assert archs[-1] == "cpu"
    assert set(archs) <= {"cpu", *GPU_ARCHS}


def test_missing_arch_is_a_clear_error_naming_the_available_ones(arch):
    missing = [a for a in GPU_ARCHS if a not in tiinterp.available_archs()]
    assert missing, "every GPU arch is present: nothing to test here"
    try:
        with pytest.raises(
            RuntimeError,
            match=rf"arch '{missing[0]}' is not available on this "
            rf"machine \(available: .*cpu\)",
        ):
            tiinterp.init(missing[0])
    finally:
        tiinterp.init(arch)


def test_auto_takes_the_best_available_hardware_arch(arch):
    from tiinterp._runtime.vulkan_devices import has_hardware_vulkan_device

    hardware = [
        a for a in tiinterp.available_archs() if a != "vulkan" or has_hardware_vulkan_device()
    ]
    try:
        assert tiinterp.init("auto") == hardware[0]
        assert tiinterp.current_arch() == hardware[0]
    finally:
        tiinterp.init(arch)


def test_a_software_vulkan_device_is_never_picked_as_best(arch, monkeypatch):
    """Mesa's lavapipe runs Vulkan on the CPU (7x slower than Taichi's CPU arch, measured):
    "auto" must take the CPU and "gpu" must refuse, while "vulkan" still gives it."""
    import tiinterp._runtime.vulkan_devices as devices

    monkeypatch.setattr(devices, "has_hardware_vulkan_device", lambda: False)
    try:
        assert tiinterp.init("auto") != "vulkan"
        if set(tiinterp.available_archs()) <= {"vulkan", "cpu"}:
            assert tiinterp.init("auto") == "cpu"
            with pytest.raises(RuntimeError, match="arch 'gpu': no GPU arch is available"):
                tiinterp.init("gpu")
        if "vulkan" in tiinterp.available_archs():
            assert tiinterp.init("vulkan") == "vulkan"
    finally:
        tiinterp.init(arch)


def test_switching_arch_in_one_process_recompiles_and_agrees(arch):
    """init() again, back and forth between every available arch: same results each time."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 17, 13)).astype(np.float32)
    results = {}
    try:
        for name in tiinterp.available_archs() + tiinterp.available_archs():
            assert tiinterp.init(name) == name == tiinterp.current_arch()
            y = tiinterp.interpolate(x, size=(9, 30), mode="bicubic")
            results.setdefault(name, y)
            np.testing.assert_array_equal(y, results[name])
    finally:
        tiinterp.init(arch)
    for y in results.values():
        np.testing.assert_allclose(
            y, results["cpu"], rtol=0, atol=tolerance("cross_arch", "float32")
        )


class _ProgramSpy:
    """Taichi's C++ program as its Python runtime holds it, noting the ndarrays it makes and
    those it is asked to delete; everything else is passed through."""

    def __init__(self, program):
        self.program, self.made, self.deleted = program, [], []

    def __getattr__(self, name):
        return getattr(self.program, name)

    def create_ndarray(self, *args, **kwargs):
        made = self.program.create_ndarray(*args, **kwargs)
        self.made.append(made)
        return made

    def delete_ndarray(self, array):
        self.deleted.append(array)
        self.program.delete_ndarray(array)


def test_ndarrays_of_an_earlier_runtime_are_never_deleted_through_the_current_one(arch, rng):
    """Note [Ndarrays outliving their runtime]: a user's ndarray and tiinterp's cached
    device tables, made before a re-init and released after it, must not ask the new
    runtime to delete their (freed) C++ ndarrays: the new runtime finds them by address,
    and frees its own ndarray where the allocator reused one (the random "argument not
    found" of a Vulkan launch after the registration demo's init)."""
    options = {"real_matrix_scalarize": current_config().real_matrix_scalarize}
    x = rng.standard_normal((2, 3, 17, 13)).astype(np.float32)
    stale = ti.ndarray(ti.f32, x.shape)
    stale.from_numpy(x)
    expected = tiinterp.interpolate(stale, size=(9, 30), mode="bicubic").to_numpy()
    stale_released = weakref.ref(stale)
    runtime = None
    try:
        tiinterp.init(arch, **options)
        runtime = impl.get_runtime()
        spy = runtime.prog = _ProgramSpy(runtime.prog)
        fresh = ti.ndarray(ti.f32, x.shape)
        fresh.from_numpy(x)
        # Its first call in the new runtime empties tiinterp's caches of the old one.
        result = tiinterp.interpolate(fresh, size=(9, 30), mode="bicubic").to_numpy()
        del stale
        gc.collect()
    finally:
        if runtime is not None and isinstance(runtime.prog, _ProgramSpy):
            runtime.prog = runtime.prog.program
        else:
            tiinterp.init(arch, **options)
    assert stale_released() is None
    foreign = [a for a in spy.deleted if a is not None and not any(a is m for m in spy.made)]
    assert not foreign, f"{len(foreign)} ndarray(s) of the old runtime deleted through the new one"
    np.testing.assert_array_equal(result, expected)


def _arch_in_new_process(env_arch):
    env = dict(os.environ, TIINTERP_ARCH=env_arch)
    code = (
        "import numpy as np, tiinterp; tiinterp.interpolate(np.zeros((1, 1, 2, 2)), size=3); "
        "print(tiinterp.current_arch())"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_tiinterp_arch_environment_variable_sets_the_default():
    best = tiinterp.available_archs()[0]
    done = _arch_in_new_process(best)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == best
    bad = _arch_in_new_process("tpu")
    assert bad.returncode != 0 and "arch: expected one of" in bad.stderr


_REFUSED_CALLS = """
import numpy as np, tiinterp
from tiinterp._runtime.taichi import program_started
for dtype in (np.float32, np.float64):
    x, grid = np.zeros((1, 1, 4, 4), dtype), np.zeros((1, 2, 2, 2), dtype)
    g = np.zeros((1, 1, 2, 2), dtype)
    for call in (
        lambda: tiinterp.interpolate(x, size=2, mode="bogus"),
        lambda: tiinterp.interpolate(x, size=2, out=np.zeros((1, 1, 3, 3), dtype)),
        lambda: tiinterp.interpolate_backward(g, (1, 1, 4, 4), method="bogus"),
        lambda: tiinterp.grid_sample(x, grid, mode="bogus"),
        lambda: tiinterp.grid_sample(x, grid, out=np.zeros((1, 1, 3, 3), dtype)),
        lambda: tiinterp.grid_sample_backward(g, x, grid, method="bogus"),
        lambda: tiinterp.scale_and_translate(x, (1, 1, 2, 2), [2, 3], [1, 1], [0, 0], "bogus"),
    ):
        try:
            call()
        except (TypeError, ValueError):
            print(dtype.__name__, program_started())
tiinterp.interpolate(x, size=2)
print("after a call that passes its checks", program_started())
"""


def test_a_refused_call_leaves_taichi_unstarted_whatever_its_dtype():
    """Note [Where a call starts Taichi]: a call refused by a check that needs no Taichi
    leaves it unstarted, in float64 as in float32 (a float64 call used to start Taichi to
    ask the device about float64 before checking ``out=`` or ``method=``)."""
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_CALLS], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        *["float32 False"] * 7,
        *["float64 False"] * 7,
        "after a call that passes its checks True",
    ]


def test_float64_support_is_reported_and_enforced(arch, monkeypatch):
    """The refusal of float64 on a device without it (the one test of it; the
    requires_float64 marker skips the float64 tests on such an arch), forced by pretending
    the device lacks float64. Runs on every arch."""
    x = np.zeros((1, 1, 4, 4))
    if supports_float64():
        assert tiinterp.interpolate(x, size=2, mode="bilinear").dtype == np.float64
    monkeypatch.setattr("tiinterp._runtime.session.supports_float64", lambda: False)
    # Another shape: a repeat of the call above would skip the checks (tiinterp's
    # Note [Repeated calls]), which a device's float64 support cannot change within a runtime.
    with pytest.raises(
        TypeError,
        match=rf"input: expected float32 on arch '{arch}', whose "
        r"device has no 64-bit float support, got float64",
    ):
        tiinterp.interpolate(np.zeros((1, 1, 5, 4)), size=2, mode="bilinear")
    assert tiinterp.interpolate(x.astype(np.float32), size=2, mode="bilinear").shape == (1, 1, 2, 2)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("default_ip=ti.i64", "default_ip: expected ti.i32 (Taichi's default), got i64"),
        ("default_fp=ti.f16", "default_fp: expected ti.f32 or ti.f64, got f16"),
    ],
)
def test_default_types_the_kernels_fail_under_are_refused(option, message):
    """Issue 44: default_ip=ti.i64 broke nearest with Taichi's raw type-check assertion,
    default_fp=ti.f16 aborted the process in grid_sample. Refused up front, whether
    tiinterp.init or the caller's own ti.init starts Taichi with them."""
    code = f"""
import numpy as np
import tiinterp
from tiinterp._runtime.taichi import ti
x = np.ones((1, 1, 2, 2), np.float32)
try:
    tiinterp.init("cpu", {option})
except ValueError as error:
    print("init:", error)
ti.init(arch=ti.cpu, log_level=ti.ERROR, {option})
for call in (
    lambda: tiinterp.interpolate(x, size=3, mode="nearest"),
    lambda: tiinterp.grid_sample(x, np.zeros((1, 2, 2, 2), np.float32)),
):
    try:
        call()
        print("call: no error")
    except RuntimeError as error:
        print("call:", error)
ti.init(arch=ti.cpu, log_level=ti.ERROR)
print("after:", float(tiinterp.interpolate(x, size=3, mode="nearest").sum()))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if not line.startswith("[Taichi]")]
    assert lines[0] == f"init: {message}: tiinterp's kernels do not compile under it"
    for line in lines[1:3]:
        assert line.startswith(f"call: Taichi was started with {message}, and tiinterp's")
    assert lines[3] == "after: 9.0"
