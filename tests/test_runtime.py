"""Arch selection and switching: tiinterp.init, available_archs, TIINTERP_ARCH."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tiinterp
from tests.tolerances import tolerance
from tiinterp._runtime import supports_float64

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
    from tiinterp._vulkan_devices import has_hardware_vulkan_device

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
    import tiinterp._vulkan_devices as devices

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


def test_float64_support_is_reported_and_enforced(arch, monkeypatch):
    """The refusal of float64 on a device without it (the one test of it; the
    requires_float64 marker skips the float64 tests on such an arch), forced by pretending
    the device lacks float64. Runs on every arch."""
    x = np.zeros((1, 1, 4, 4))
    if supports_float64():
        assert tiinterp.interpolate(x, size=2, mode="bilinear").dtype == np.float64
    monkeypatch.setattr("tiinterp._runtime.supports_float64", lambda: False)
    # Another shape: a repeat of the call above would skip the checks (tiinterp's
    # _repeat_calls.py), which a device's float64 support cannot change within a runtime.
    with pytest.raises(
        TypeError,
        match=rf"input: expected float32 on arch '{arch}', whose "
        r"device has no 64-bit float support, got float64",
    ):
        tiinterp.interpolate(np.zeros((1, 1, 5, 4)), size=2, mode="bilinear")
    assert tiinterp.interpolate(x.astype(np.float32), size=2, mode="bilinear").shape == (1, 1, 2, 2)
