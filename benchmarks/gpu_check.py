"""GPU check: tiinterp on the CUDA arch, its device tests, and its speed against PyTorch CUDA.

Run on a machine with an NVIDIA GPU: ``bash benchmarks/gpu_check.sh`` (installs carried
wheels, then runs this), or ``python benchmarks/gpu_check.py --out DIR``. Without a GPU,
``--arch cpu --quick`` runs the same logic with the CPU standing in for the device, and
``--arch vulkan --quick`` with a Vulkan device (Mesa's lavapipe will do); off CUDA, PyTorch
runs on the CPU.

Sections, one after another, each in its own subprocess with a time limit (a CUDA error, an
abort or a hang ends that section only; results are written as they come, so a killed
section keeps what it finished):

- ``device_tests``: the test suite's tests of what a GPU must get right, on the arch
  (pytest in the section's process, ``TIINTERP_TEST_ARCHS=ARCH``, the tests that take no
  arch left out): DEVICE_TESTS, that is tests/ops/test_device_agreement.py (Taichi
  ndarrays of every resize mode against the float64 oracle, ``tiinterp.torch`` on device
  tensors against PyTorch on the device, the adjoint backward bit-identical at W1's scale)
  and tests/runtime/test_threads.py (calls from threads that did not start Taichi). Each
  test's outcome is recorded as it ends. Where a test of ``tiinterp.torch`` (a test id
  with "torch" in it) failed, or the section died in one, the sections below leave
  ``tiinterp.torch`` untimed: it would crash or hang there the same way.
- ``per_call``: what one small call costs, in microseconds: a tiny resize and W4, bilinear,
  forward and backward, tiinterp on Taichi ndarrays with ``out=`` and through
  ``tiinterp.torch``, against PyTorch on the device; each call followed by a sync (median),
  and the same calls back to back with one sync at the end.
- ``benchmarks``, ``benchmark_large``: device copy bandwidth, then resize forward and
  backward of W1-W3 and a large batch, G1 (grid_sample, forward and both gradients) and a
  3-D trilinear resize, tiinterp on device-resident Taichi ndarrays and through
  ``tiinterp.torch``, against PyTorch on the device.

Every time ratio is tiinterp's time / PyTorch's (below 1: tiinterp faster), printed next
to issue 23's target for its row (TARGETS). benchmarks/harness.py holds the workloads and
the timing it shares with the CPU benchmarks.

Writes ``OUT/gpu_check.json``, ``OUT/gpu_check.md`` (also printed) and ``OUT/logs/``; exits
1 when a section fails, errs or runs out of time, or a device test fails.
"""

import argparse
import contextlib
import datetime
import functools
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tiinterp from this tree, whatever is installed
sys.path.insert(0, str(ROOT / "benchmarks"))  # harness.py

import harness  # noqa: E402
from harness import Timing, median_time  # noqa: E402

import tiinterp  # noqa: E402

# isort: split
# After tiinterp, which imports Taichi without its banner.
import taichi as ti  # noqa: E402

# The suite's tests of what a GPU must get right, run by section device_tests.
DEVICE_TESTS = ("tests/ops/test_device_agreement.py", "tests/runtime/test_threads.py")

# Seconds per section: (full run, --quick). The hard limit of the subprocess; a timing
# section stops starting new rows a few seconds before it. 435 s in all, so that with the
# install and Python start-up the whole check ends within 8 minutes on an H200. There
# (2026-11-30) benchmarks took 14 s and benchmark_large 19 s; the correctness checks that
# are device_tests now took 12 s (resize), 80 s (grid_sample, with its autodiff for every
# case), 10 s (torch_bridge) and 8 s (determinism). device_tests is not measured on a GPU
# yet; on the shared 2-core development machine, with an empty kernel cache, it took 60 s
# on the CPU (whose kernels compile slowest) and 40 s on lavapipe (2026-12-06).
BUDGETS = {
    "device_tests": (255, 240),
    "per_call": (35, 45),
    "benchmarks": (85, 90),
    "benchmark_large": (60, 30),
}
SECTIONS = tuple(BUDGETS)
SOFT_MARGIN_S = 12.0
ARCH_HELP = "the device arch (vulkan, cpu: stand in for the GPU, to test this script)"
# GiB of device memory for Taichi per timing section. Taichi's CUDA runtime cuts every
# ndarray (tiinterp's scratch and autodiff buffers included) from one pool that ti.init
# allocates, device_memory_GB (default 1); running out is a device-side assert that ends the
# process (taichi-dev/taichi#8455). The benchmarks section probes the default
# (probe_default_pool), which the device tests run with. The rest of the GPU's memory is
# PyTorch's. Given on CUDA only.
POOL_GB = {"per_call": 4, "benchmarks": 16, "benchmark_large": 64}


def failed_check(error):
    return {"ok": False, "error": short_error(error)}


def short_error(error):
    text = f"{type(error).__name__}: {error}".strip()
    return text if len(text) <= 300 else text[:297] + "..."


# --- Section context -----------------------------------------------------------------------


class Section:
    """What a section child knows: its arguments, its deadline, and its result file, which
    it rewrites as results come so that a killed child leaves what it finished."""

    def __init__(self, args):
        self.name = args.section
        self.arch = args.arch
        self.quick = args.quick
        self.work = pathlib.Path(args.work)
        self.deadline = args.deadline
        self.skip_bridge = args.skip_bridge
        self.started = time.monotonic()
        self.data = {}
        self.status = "running"
        self.path = self.work / f"{self.name}.json"

    def out_of_time(self):
        return time.time() > self.deadline

    def save(self):
        record = {
            "status": self.status,
            "seconds": round(time.monotonic() - self.started, 2),
            "data": self.data,
        }
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(harness.clean_json(record), indent=1))
        temporary.replace(self.path)

    def measure_rows(self, jobs, measure, on_error=None):
        """For each (row, arguments) of jobs, the row ``measure(*arguments)`` returns, saved
        as it comes; the row with the error instead where it raises (the other rows still
        count), or with "skipped" once the section is out of time."""
        rows = self.data.setdefault("rows", [])
        for row, arguments in jobs:
            if self.out_of_time():
                rows.append({**row, "error": "skipped: out of time"})
                continue
            try:
                rows.append(measure(*arguments))
            except Exception as error:
                traceback.print_exc()
                rows.append({**row, **failed_check(error)})
                if on_error is not None:
                    on_error()
            self.save()

    # --- device helpers (child processes only) ---

    def start_taichi(self):
        """``tiinterp.init`` on the section's arch, with a Taichi device memory pool that
        holds the section's ndarrays (see POOL_GB)."""
        options = {"device_memory_GB": POOL_GB[self.name]} if self.arch == "cuda" else {}
        started = tiinterp.init(self.arch, **options)
        self.data.setdefault("taichi_arch", started)
        self.data.setdefault("taichi_options", options)
        if started == "vulkan":
            self.data.setdefault("device_name", vulkan_device_name())
        return started

    def torch(self):
        import torch

        self.torch_device = torch.device("cuda" if self.arch == "cuda" else "cpu")
        if self.arch == "cuda":
            self.data.setdefault("device_name", torch.cuda.get_device_name(0))
        return torch

    def titorch(self):
        """tiinterp.torch, or None where a device test of it failed."""
        if self.skip_bridge:
            self.data["torch_bridge"] = "skipped: a device test of tiinterp.torch failed"
            return None
        import tiinterp.torch as titorch

        return titorch

    def sync(self):
        ti.sync()
        if self.arch == "cuda":
            import torch

            torch.cuda.synchronize()


def vulkan_device_name():
    from tiinterp._runtime.vulkan_devices import physical_devices

    devices = physical_devices()
    names = ", ".join(name for _, name in devices) if devices else "unknown device"
    return f"Vulkan: {names} (PyTorch on the CPU)"


def ndarray_from(array):
    """A Taichi ndarray holding ``array`` (on Taichi's device)."""
    result = ti.ndarray(ti.f32 if array.dtype == np.float32 else ti.f64, array.shape)
    result.from_numpy(np.ascontiguousarray(array))
    return result


@ti.kernel
def fill_uniform(target: ti.types.ndarray()):
    """Values in [-1, 1) made on the device: filling gigabytes from the host takes long."""
    for index in ti.grouped(target):
        target[index] = ti.random() * 2.0 - 1.0


@ti.kernel
def copy_kernel(source: ti.types.ndarray(), target: ti.types.ndarray()):
    for index in ti.grouped(target):
        target[index] = source[index]


# --- Device tests ----------------------------------------------------------------------------


class OutcomeRecorder:
    """A pytest plugin that keeps each test's outcome in the section's record as it ends,
    and the test that runs (the one a crash or the time limit ends in)."""

    def __init__(self, section):
        self.section = section
        self.tests = section.data.setdefault("tests", [])

    def pytest_deselected(self, items):
        self.section.data["deselected"] = self.section.data.get("deselected", 0) + len(items)

    def pytest_collectreport(self, report):
        if report.failed:
            self.record(report.nodeid or "collection", "error", 0.0, report.longreprtext)

    def pytest_runtest_logstart(self, nodeid, location):
        self.section.data["running"] = nodeid
        self.section.save()

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            outcome = report.outcome
        elif report.failed:
            outcome = "error"  # in a fixture, before or after the test
        elif report.skipped:
            outcome = "skipped"
        else:
            return
        if report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2])
        else:
            message = report.longreprtext if report.failed else ""
        self.record(report.nodeid, outcome, report.duration, message)

    def record(self, nodeid, outcome, seconds, message):
        entry = {"test": nodeid, "outcome": outcome, "seconds": round(seconds, 3)}
        if message:
            entry["message"] = message.strip()[-800:]
        self.tests.append(entry)
        self.section.save()


def section_device_tests(section):
    """DEVICE_TESTS on the section's arch, in this process (the suite's ``arch`` fixture
    starts Taichi there)."""
    try:
        import pytest
    except ImportError:
        raise RuntimeError(
            f"pytest is not installed for {sys.executable}: carry its wheels in .whl/ "
            "(pytest, pluggy, iniconfig, packaging)"
        ) from None
    env = {"TIINTERP_TEST_ARCHS": section.arch, "TIINTERP_TEST_ARCH_INDEPENDENT": "0"}
    # Other plugins of a machine's Python (pytest-benchmark, -cov, ...) stay out.
    os.environ.update(env, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    command = ["-p", "no:cacheprovider", "-q", *DEVICE_TESTS]
    shown = [f"{key}={value}" for key, value in env.items()]
    section.data["command"] = " ".join([*shown, "python", "-m", "pytest", *command])
    code = pytest.main(command, plugins=[OutcomeRecorder(section)])
    section.data.pop("running", None)
    section.data["exit_code"] = int(code)


def bridge_failed(record):
    """Whether a tiinterp.torch test failed, or the section ended while one ran."""
    data = record.get("data", {})
    failed = [t["test"] for t in data.get("tests", []) if t["outcome"] in ("failed", "error")]
    if record.get("status") != "done":
        failed.append(data.get("running", ""))
    return any("torch" in test for test in failed)


# --- Benchmarks ----------------------------------------------------------------------------

WORKLOADS = {name: harness.WORKLOADS[name] for name in ("W1", "W2", "W3")}
QUICK_WORKLOADS = {
    "W1": ((2, 4, 64, 64), (128, 128)),
    "W2": ((2, 4, 128, 128), (64, 64)),
    "W3": ((1, 3, 83, 129), (120, 160)),
}
# (32, 64, 512, 512) -> (1024, 1024) has 2^31 outputs, one past Taichi's 32-bit indexing
# (tiinterp refuses it): 63 channels keep the 2x upsampling at 2.11e9 outputs (7.9 GiB).
LARGE = {"L": ((32, 63, 512, 512), (1024, 1024))}
QUICK_LARGE = {"L": ((2, 8, 128, 128), (256, 256))}
GRID_WORKLOAD = ((8, 16, 256, 256), (256, 256))  # input, grid points per batch item
QUICK_GRID_WORKLOAD = ((2, 4, 32, 32), (32, 32))
GRID_MODE = "grid_sample bilinear"  # zeros padding, align_corners=False
ROW_KEYS = ("workload", "shape", "size", "mode")  # what names a benchmark row
# 3-D, trilinear only: 16 MiB in, 128 MiB out.
VOLUME = {"V1": ((2, 8, 64, 64, 64), (128, 128, 128))}
QUICK_VOLUME = {"V1": ((1, 2, 16, 16, 16), (32, 32, 32))}
BENCH_MODES = ("bilinear", "bicubic", "nearest", "lanczos3")
QUICK_BENCH_MODES = ("bilinear", "lanczos3")  # one PyTorch has, one it lacks
PYTORCH_MODES = ("bilinear", "bicubic", "nearest", "trilinear")
# Per-call cost: a resize with almost no work, and W4 (bench.py's small workload); same
# shapes with --quick, fewer calls.
PER_CALL = {"tiny": harness.TINY, "W4": harness.WORKLOADS["W4"]}
PER_CALL_TIMING = {False: (300, 30), True: (40, 5)}  # --quick: (calls, warm-up calls)
PER_CALL_MAX_S, PER_CALL_MIN_CALLS = 1.0, 10  # a time cap per measurement, and its floor
PER_CALL_PATHS = ("pytorch", "ndarray_out", "titorch")
# Issue 23's targets, on CUDA: tiinterp's time / PyTorch's at most this, forward and
# backward (W1-W3, L: 1.5x faster; G1: no slower; a tiny call: at most 3x PyTorch's), and L
# at 50 % of the device copy bandwidth or more. W4 and V1 have none.
TARGETS = {"W1": 0.67, "W2": 0.67, "W3": 0.67, "L": 0.67, "G1": 1.0, "tiny": 3.0}
L_COPY_SHARE_TARGET = 50.0
COPY_BYTES = 1 << 30
QUICK_COPY_BYTES = 64 << 20


def median_ms(section, call, repeats, warmup):
    """Median wall time of ``call`` plus a device sync, in ms, after ``warmup`` calls."""
    timing = Timing(repeats, warmup, min_seconds=0.0)  # exactly ``repeats`` calls
    return median_time(call, timing, section.sync) * 1e3


def copy_bandwidth(section, torch, nbytes, timing):
    """GB/s (read + write, 1e9 bytes) of a device copy: torch ``dst.copy_(src)``, and a
    Taichi copy kernel between ndarrays."""
    count = nbytes // 4
    source = torch.empty(count, device=section.torch_device).uniform_()
    target = torch.empty_like(source)
    torch_ms = median_ms(section, lambda: target.copy_(source), *timing)
    del source, target
    release(torch)
    source, target = ti.ndarray(ti.f32, (count,)), ti.ndarray(ti.f32, (count,))
    fill_uniform(source)
    taichi_ms = median_ms(section, lambda: copy_kernel(source, target), *timing)
    return {
        "bytes": count * 4,
        "torch_copy_ms": torch_ms,
        "torch_copy_gbps": 2 * count * 4 / torch_ms / 1e6,
        "taichi_copy_ms": taichi_ms,
        "taichi_copy_gbps": 2 * count * 4 / taichi_ms / 1e6,
    }


def release(torch):
    """Hand PyTorch's cached device memory back, for Taichi's allocations that follow."""
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def time_tensors(section, torch, function, inputs, timing):
    """Forward and autograd backward (the gradients of every input) of ``function(*inputs)``
    on device tensors (F.interpolate's or grid_sample's, or tiinterp.torch's), in ms."""
    forward = median_ms(section, lambda: function(*inputs), *timing)
    for tensor in inputs:
        tensor.requires_grad_(True)
    y = function(*inputs)
    g = y.detach()  # any finite values do as a gradient
    backward = median_ms(
        section, lambda: torch.autograd.grad(y, inputs, g, retain_graph=True), *timing
    )
    return {"forward": forward, "backward": backward}


def bench_row(section, torch, titorch, name, shape, size, mode, timing):
    """One workload and mode: PyTorch, tiinterp on Taichi ndarrays (a new result per call,
    and ``out=``; the adjoint backward), tiinterp.torch; forward and backward; ms, and the
    bytes of input + output. G1 is grid_sample bilinear/zeros: forward and both gradients."""
    import torch.nn.functional as F

    grid = mode == GRID_MODE
    out_shape = (*shape[:2], *size)
    input_shapes = (shape, (shape[0], *size, 2)) if grid else (shape,)
    row = {
        "workload": name,
        "shape": shape,
        "size": size,
        "mode": mode,
        "bytes": 4 * sum(math.prod(s) for s in (*input_shapes, out_shape)),
        "target": TARGETS.get(name),
    }

    def tensor_inputs():
        x = torch.randn(shape, device=section.torch_device)
        if not grid:
            return (x,)
        return x, torch.rand(input_shapes[1], device=section.torch_device) * 2.2 - 1.1

    def through(module):  # torch.nn.functional or tiinterp.torch
        if grid:
            return lambda x, points: module.grid_sample(x, points, align_corners=False)
        return lambda x: module.interpolate(x, size=size, mode=mode)

    paths = {"pytorch": F} if grid or mode in PYTORCH_MODES else {}
    paths.update({"tiinterp": None} | ({"titorch": titorch} if titorch is not None else {}))
    for path, module in paths.items():
        if module is None:
            times = time_ndarrays(section, input_shapes, out_shape, size, mode, grid, timing)
        else:
            times = time_tensors(section, torch, through(module), tensor_inputs(), timing)
            release(torch)
        row.update({f"{path}_{what}_ms": ms for what, ms in times.items()})
    return row


def time_ndarrays(section, input_shapes, out_shape, size, mode, grid, timing):
    """tiinterp on Taichi ndarrays: a new result per call, and ``out=``; forward and
    adjoint backward, in ms."""
    inputs = [ti.ndarray(ti.f32, s) for s in input_shapes]
    y, grads = ti.ndarray(ti.f32, out_shape), tuple(ti.ndarray(ti.f32, s) for s in input_shapes)
    for array in inputs:
        fill_uniform(array)
    if grid:
        forward = functools.partial(tiinterp.grid_sample, *inputs)
        backward = functools.partial(tiinterp.grid_sample_backward, y, *inputs)
    else:
        forward = functools.partial(tiinterp.interpolate, inputs[0], size=size, mode=mode)
        backward = functools.partial(tiinterp.interpolate_backward, y, input_shapes[0], mode=mode)
        grads = grads[0]
    # Forward into y first: y then holds finite values that do as a gradient.
    calls = {
        "forward": forward,
        "forward_out": lambda: forward(out=y),
        "backward": backward,
        "backward_out": lambda: backward(out=grads),
    }
    return {what: median_ms(section, call, *timing) for what, call in calls.items()}


PROBE_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[2])
import tiinterp
import taichi as ti
tiinterp.init(sys.argv[1])  # Taichi's default device memory
held, kept = 0.0, []
for gib in map(float, sys.argv[3].split(",")):
    array = ti.ndarray(ti.f32, (int(gib * 2**28),))
    array.fill(1.0)
    ti.sync()
    kept.append(array)
    held += gib
    print(f"new ndarray of {gib:g} GiB: ok ({held:g} GiB held)", flush=True)
"""
# On the CPU there is no pool: small sizes, to exercise the probe itself.
PROBE_GIB = {"cuda": "0.25,0.5,2,8", "cpu": "0.0625,0.125", "vulkan": "0.0625,0.125"}


def probe_default_pool(section):
    """Which Taichi ndarrays a default ``tiinterp.init`` can hold on this device: a child
    process allocates arrays of growing size and keeps them (a failure may abort it)."""
    command = [sys.executable, "-c", PROBE_SCRIPT, section.arch, str(ROOT)]
    try:
        done = subprocess.run(
            [*command, PROBE_GIB[section.arch]], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return {"returncode": None, "succeeded": [], "output_tail": "timed out after 60 s"}
    lines = (done.stdout + done.stderr).strip().splitlines()
    return {
        "returncode": done.returncode,
        "succeeded": [line for line in lines if line.startswith("new ndarray")],
        "output_tail": "\n".join(lines[-6:]),
    }


def run_benchmarks(section, workloads, with_grid, volumes=None):
    """The resize rows of ``workloads`` in every benchmark mode, then G1 (``with_grid``),
    then the trilinear rows of ``volumes``."""
    section.start_taichi()
    torch = section.torch()
    titorch = section.titorch()
    timing = (3, 1) if section.quick else (10, 3)  # (repeats, warm-up calls)
    section.data["timing"] = {"repeats": timing[0], "warmup": timing[1], "statistic": "median"}
    section.data["copy"] = copy_bandwidth(
        section, torch, QUICK_COPY_BYTES if section.quick else COPY_BYTES, timing
    )
    section.save()
    modes = QUICK_BENCH_MODES if section.quick else BENCH_MODES
    cases = [(name, *case, mode) for name, case in workloads.items() for mode in modes]
    if with_grid:
        cases.append(("G1", *(QUICK_GRID_WORKLOAD if section.quick else GRID_WORKLOAD), GRID_MODE))
    cases += [(name, *case, "trilinear") for name, case in (volumes or {}).items()]
    section.measure_rows(
        [(dict(zip(ROW_KEYS, case, strict=True)), case) for case in cases],
        lambda *case: bench_row(section, torch, titorch, *case, timing),
        on_error=lambda: release(torch),
    )


def call_cost_us(call, sync, calls, warmup):
    """Microseconds per call: the median of ``calls`` calls each followed by ``sync``, and
    the mean of as many calls back to back with one ``sync`` after the last; and how many.
    Fewer calls (PER_CALL_MIN_CALLS at least) where they take over PER_CALL_MAX_S, so that
    a slow path cannot run the section out of time."""
    for _ in range(warmup):
        call()
    sync()
    times = []
    deadline = time.perf_counter() + PER_CALL_MAX_S
    while len(times) < calls and (
        len(times) < PER_CALL_MIN_CALLS or time.perf_counter() < deadline
    ):
        started = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    for _ in times:
        call()
    sync()
    streamed = (time.perf_counter() - started) / len(times)
    return statistics.median(times) * 1e6, streamed * 1e6, len(times)


def per_call_row(section, torch, titorch, name, shape, size, timing):
    """One bilinear case: PyTorch, tiinterp on Taichi ndarrays with ``out=``, and
    tiinterp.torch, forward and backward. Each path waits for its own work only (PyTorch's
    and tiinterp.torch's calls with torch's sync, the ndarray calls with Taichi's; on CUDA
    both wait for the whole device, as Taichi runs in PyTorch's context), so that no path
    pays for a sync it does not need."""
    import torch.nn.functional as F

    mode = "bilinear"
    out_shape = (*shape[:2], *size)
    device = section.torch_device
    torch_sync = torch.cuda.synchronize if section.arch == "cuda" else lambda: None
    # Off CUDA, tiinterp.torch runs Taichi on CPU tensors' copies: Taichi's sync is its own.
    bridge_sync = torch_sync if section.arch == "cuda" else ti.sync
    rng = np.random.default_rng(23)
    x = rng.standard_normal(shape, dtype=np.float32)
    g = rng.standard_normal(out_shape, dtype=np.float32)

    def tensor_calls(interpolate, sync):
        """F.interpolate's or tiinterp.torch's calls on device tensors."""
        return sync, harness.tensor_calls(x, g, size, interpolate, device, mode=mode)

    def ndarray_calls():
        xn, gn = ndarray_from(x), ndarray_from(g)
        yn, gxn = ti.ndarray(ti.f32, out_shape), ti.ndarray(ti.f32, shape)
        calls_source.update(forward=xn, backward=gn)
        return ti.sync, {
            "forward": lambda: tiinterp.interpolate(xn, size=size, mode=mode, out=yn),
            "backward": lambda: tiinterp.interpolate_backward(gn, shape, mode=mode, out=gxn),
        }

    def launch_calls():
        """The prepared gather launch alone that a repeated ndarray call makes (Taichi's
        launch: what tiinterp's own Python adds is 'ndarray_out' less this)."""
        from tiinterp._engine.device_path import DeviceRepeat
        from tiinterp._ops import resize as _resize

        sync, calls = ndarray_calls()
        launches = {}
        for direction, call in calls.items():
            call()
            call()
            repeat = list(_resize._REPEATS._repeats.values())[-1]
            if not isinstance(repeat, DeviceRepeat) or repeat._launch is None:
                raise RuntimeError("no prepared device launch to time (a CPU arch)")
            target = ti.ndarray(ti.f32, out_shape if direction == "forward" else shape)
            source = calls_source[direction]
            launches[direction] = lambda r=repeat, a=(source, target): r._launch(
                (*a, *r._arguments)
            )
        return sync, launches

    row = {
        "workload": name,
        "shape": shape,
        "size": size,
        "mode": mode,
        "target": TARGETS.get(name),
    }
    calls_source = {}
    makers = {
        "pytorch": lambda: tensor_calls(F.interpolate, torch_sync),
        "ndarray_out": ndarray_calls,
    }
    if section.arch != "cpu":
        makers["taichi_launch"] = launch_calls
    if titorch is not None:
        makers["titorch"] = lambda: tensor_calls(titorch.interpolate, bridge_sync)
    errors = []
    for path, make in makers.items():
        try:
            sync, calls = make()
            for direction, call in calls.items():
                synced, streamed, count = call_cost_us(call, sync, *timing)
                row[f"{path}_{direction}_us"] = synced
                row[f"{path}_{direction}_stream_us"] = streamed
                row["fewest_calls"] = min(count, row.get("fewest_calls", count))
        except Exception as error:  # the other paths' figures still count
            traceback.print_exc()
            errors.append(f"{path}: {short_error(error)}")
    if errors:
        row["error"] = "; ".join(errors)
    return row


def section_per_call(section):
    section.start_taichi()
    torch = section.torch()
    titorch = section.titorch()
    timing = PER_CALL_TIMING[section.quick]
    section.data["timing"] = {
        "calls": timing[0],
        "warmup": timing[1],
        "max_seconds": PER_CALL_MAX_S,
        "min_calls": PER_CALL_MIN_CALLS,
    }
    section.measure_rows(
        [({"workload": n, "mode": "bilinear"}, (n, *case)) for n, case in PER_CALL.items()],
        lambda *job: per_call_row(section, torch, titorch, *job, timing),
    )


def section_benchmarks(section):
    section.data["default_pool_probe"] = probe_default_pool(section)
    section.save()
    run_benchmarks(
        section,
        QUICK_WORKLOADS if section.quick else WORKLOADS,
        with_grid=True,
        volumes=QUICK_VOLUME if section.quick else VOLUME,
    )


def section_benchmark_large(section):
    run_benchmarks(section, QUICK_LARGE if section.quick else LARGE, with_grid=False)


SECTION_FUNCTIONS = {
    "device_tests": section_device_tests,
    "per_call": section_per_call,
    "benchmarks": section_benchmarks,
    "benchmark_large": section_benchmark_large,
}


def run_section(args):
    """A child process: one section, its record in WORK/SECTION.json; exit 1 on an error."""
    section = Section(args)
    section.save()
    try:
        SECTION_FUNCTIONS[section.name](section)
        section.status = "done"
        code = 0
    except Exception as error:
        traceback.print_exc()
        section.status = "error"
        section.data["error"] = short_error(error)
        section.data["traceback"] = traceback.format_exc()[-4000:]
        code = 1
    section.save()
    return code


# --- Orchestration -------------------------------------------------------------------------


def section_failures(record):
    """Labels of what failed in a section's record."""
    data = record.get("data", {})
    failures = []
    if record.get("status") != "done":
        failures.append(f"section {record.get('status')}")
        if data.get("running"):
            failures.append(f"ended in {data['running']}")
    for test in data.get("tests", []):
        if test["outcome"] in ("failed", "error"):
            last = test.get("message", "").splitlines()[-1:]
            failures.append(f"{test['outcome']}: {test['test']}{': ' + last[0] if last else ''}")
    if data.get("exit_code") not in (None, 0) and not any(
        test["outcome"] in ("failed", "error") for test in data.get("tests", [])
    ):
        failures.append(f"pytest exited with status {data['exit_code']}")
    for row in data.get("rows", []):
        if "error" in row:
            failures.append(f"benchmark {row['workload']} {row['mode']}: {row['error']}")
    return failures


def run_child(args, name, work, logs, skip_bridge=False):
    """One section in a subprocess, killed at its wall-clock limit; its record."""
    budget = BUDGETS[name][1 if args.quick else 0] * args.budget_scale
    started = time.monotonic()
    deadline = time.time() + budget - SOFT_MARGIN_S
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--section", name]
    command += ["--arch", args.arch, "--work", str(work), "--deadline", str(deadline)]
    command += ["--quick"] * args.quick + ["--skip-bridge"] * skip_bridge
    log_path = logs / f"{name}.log"
    print(f"[gpu_check] {name}: started (limit {budget:.0f} s)", flush=True)
    with open(log_path, "w") as log:
        try:
            done = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, timeout=budget
            )
            returncode, timed_out = done.returncode, False
        except subprocess.TimeoutExpired:  # run() has killed it
            returncode, timed_out = -9, True
    seconds = time.monotonic() - started
    result_path = work / f"{name}.json"
    record = json.loads(result_path.read_text()) if result_path.exists() else {"data": {}}
    if timed_out:
        record["status"] = "timeout"
    elif record.get("status") in (None, "running"):  # died without writing its end
        record["status"] = "crashed"
    elif returncode != 0 and record.get("status") == "done":
        # Finished and saved everything, then failed on the way out (Taichi's runtime
        # can crash at interpreter exit): the results stand.
        record["note"] = f"exited with status {returncode} after finishing"
    record.update(returncode=returncode, seconds=round(seconds, 1), limit_s=budget)
    if record["status"] != "done":
        record["log_tail"] = log_path.read_text(errors="replace")[-3000:]
    print(f"[gpu_check] {name}: {record['status']}, {seconds:.1f} s", flush=True)
    if record["status"] != "done":
        tail = record["log_tail"].strip().splitlines()[-12:]
        print("\n".join(f"    | {line}" for line in tail), flush=True)
    return record


# Sections that time tiinterp.torch: without it where a device test of it failed.
BRIDGE_TIMED = ("per_call", "benchmarks", "benchmark_large")


def run_children(args, work, logs):
    """The sections, one subprocess each, one after another."""
    records = {}
    skip_bridge = False
    for name in args.sections:
        records[name] = run_child(args, name, work, logs, skip_bridge and name in BRIDGE_TIMED)
        if name == "device_tests" and bridge_failed(records[name]):
            skip_bridge = True  # tiinterp.torch timings would crash (or hang) the same way
    for name, record in records.items():
        record["failures"] = section_failures(record)
        record["passed"] = not record["failures"]
        verdict = "passed" if record["passed"] else f"FAILED ({len(record['failures'])})"
        print(f"[gpu_check] {name}: {verdict}", flush=True)
    return records


def versions():
    found = {"python": platform.python_version()}
    found.update({name: harness.installed_version(name) for name in ("numpy", "torch", "taichi")})
    found["tiinterp"] = tiinterp.__version__
    found["taichi_loaded_from"] = str(pathlib.Path(ti.__file__).parent)
    return found


def orchestrate(args):
    out = pathlib.Path(args.out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    report = {
        "meta": {
            "arch": args.arch,
            "quick": args.quick,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(),
            "versions": versions(),
        }
    }
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        report["sections"] = run_children(args, pathlib.Path(work), logs)
    for record in report["sections"].values():
        device_name = record.get("data", {}).get("device_name")
        if device_name:
            report["meta"]["device_name"] = device_name
    report["meta"]["seconds"] = round(time.monotonic() - started, 1)
    failed = [name for name, record in report["sections"].items() if not record["passed"]]
    report["summary"] = {
        "passed": not failed,
        "failed_sections": failed,
        "failures": sum(len(record["failures"]) for record in report["sections"].values()),
    }
    harness.write_json(out / "gpu_check.json", report)
    markdown = render_markdown(report)
    (out / "gpu_check.md").write_text(markdown)
    print(markdown, flush=True)
    return 0 if not failed else 1


# --- Markdown ------------------------------------------------------------------------------


def number(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if value == 0:
        return "0"
    return f"{value:.{digits}g}" if abs(value) < 1e4 else f"{value:.0f}"


def render_markdown(report):
    meta = report["meta"]
    lines = ["# tiinterp GPU check", ""]
    failed = ", ".join(report["summary"]["failed_sections"])
    failed = f" (sections: {failed})" if failed else ""
    versions_text = ", ".join(
        f"{k} {v}" for k, v in meta["versions"].items() if k != "taichi_loaded_from"
    )
    lines += [
        f"- arch `{meta['arch']}`{' (quick)' if meta['quick'] else ''}, device: "
        f"{meta.get('device_name', 'CPU')}; {meta['date']}; {meta['seconds']} s in all",
        f"- {versions_text}",
        f"- result: **{'PASSED' if report['summary']['passed'] else 'FAILED'}**{failed}",
        "",
        "## Sections",
        "",
        *harness.markdown_table(("section", "status", "passed", "seconds (limit)", "problems")),
    ]
    for name, record in report["sections"].items():
        status = record["status"] + (f" ({record['note']})" if "note" in record else "")
        lines.append(
            f"| {name} | {status} | {'yes' if record['passed'] else '**no**'} | "
            f"{record['seconds']} ({record['limit_s']:.0f}) | {len(record['failures'])} |"
        )
    lines += render_device_tests(report)
    lines += render_per_call(report)
    lines += render_benchmarks(report)
    problems = [
        f"- {name}: {failure}"
        for name, record in report["sections"].items()
        for failure in record["failures"]
    ]
    if problems:
        lines += ["", "## Problems", ""] + problems[:60]
        if len(problems) > 60:
            lines.append(f"- ... and {len(problems) - 60} more (gpu_check.json)")
    for name, record in report["sections"].items():
        if "log_tail" in record or record.get("data", {}).get("error"):
            tail = record.get("data", {}).get("traceback") or record.get("log_tail", "")
            tail = tail.strip()[-1500:] or "(the log is empty)"
            lines += ["", f"### {name}: end of its log", "", "```", tail, "```"]
    return "\n".join(lines) + "\n"


def render_device_tests(report):
    """Outcomes per test function (its parameters counted together)."""
    data = report["sections"].get("device_tests", {}).get("data", {})
    if not data.get("tests"):
        return []
    groups = {}
    for test in data["tests"]:
        group = groups.setdefault(test["test"].split("[")[0], {"seconds": 0.0})
        group[test["outcome"]] = group.get(test["outcome"], 0) + 1
        group["seconds"] += test["seconds"]
    outcomes = ("passed", "failed", "error", "skipped")
    totals = {o: sum(g.get(o, 0) for g in groups.values()) for o in outcomes}
    lines = [
        "",
        "## Device tests",
        "",
        f"`{data.get('command', 'pytest')}`: "
        + ", ".join(f"{n} {o}" for o, n in totals.items() if n)
        + f", {data.get('deselected', 0)} deselected (on this arch, or taking no arch).",
        "",
        *harness.markdown_table(
            ("test", *outcomes, "seconds"),
            [
                (name, *(g.get(o, 0) or "-" for o in outcomes), f"{g['seconds']:.1f}")
                for name, g in groups.items()
            ],
        ),
    ]
    return lines


def case_label(row):
    return f"{row['workload']} {tuple(row.get('shape', ()))}->{tuple(row.get('size', ()))}"


def ratio_cell(ours, theirs, target):
    """tiinterp's time / PyTorch's, in bold where it misses the target."""
    if not ours or not theirs:
        return "-"
    ratio = ours / theirs
    text = number(ratio, 3)
    return f"**{text}**" if target is not None and ratio > target else text


def target_cell(target, extra=""):
    return (f"<= {target:g}" if target is not None else "none") + extra


def render_benchmarks(report):
    rows, copy, timing = [], None, None
    for name in ("benchmarks", "benchmark_large"):
        data = report["sections"].get(name, {}).get("data", {})
        rows += data.get("rows", [])
        copy = copy or data.get("copy")
        timing = timing or data.get("timing")
    if not rows:
        return []
    lines = ["", "## Benchmarks", ""]
    copy_gbps = copy["torch_copy_gbps"] if copy else None
    if copy:
        lines.append(
            f"Device copy of {copy['bytes'] / 2**30:.3g} GiB (read + write): torch "
            f"`dst.copy_(src)` {copy['torch_copy_gbps']:.0f} GB/s, Taichi copy kernel "
            f"{copy['taichi_copy_gbps']:.0f} GB/s."
        )
        lines.append("")
    probe = report["sections"].get("benchmarks", {}).get("data", {}).get("default_pool_probe")
    if probe:
        outcome = "; ".join(probe["succeeded"]) or "no ndarray"
        ending = probe["output_tail"][-300:].replace("\n", " | ")
        ending = "." if probe["returncode"] == 0 else f", ending: `{ending}`."
        if report["meta"]["arch"] == "cuda":
            ending += f" This check passes device_memory_GB per section: {POOL_GB}."
        lines.append(
            f"Taichi's default device memory (`tiinterp.init` without `device_memory_GB`): "
            f"{outcome}; exit status {probe['returncode']}{ending}"
        )
        lines.append("")
    if timing:
        lines.append(
            f"Times: median of {timing['repeats']} calls after {timing['warmup']} warm-up "
            "calls, wall clock with a device sync, float32, data already on the device. "
            "'ndarray': tiinterp on Taichi ndarrays (a new result each call; 'out=' into a "
            "preallocated one); 'tiinterp.torch': the PyTorch bridge on device tensors. "
            "The ratios are **tiinterp's time / PyTorch's time** (below 1: tiinterp faster), "
            "for ndarray out= and for tiinterp.torch; 'target': the most issue 23 allows, "
            f"on CUDA (L also at >= {L_COPY_SHARE_TARGET:g} % of the copy bandwidth); "
            "**bold**: over the target. GB/s: (input + output bytes) / time of ndarray out=; "
            "% copy: of torch's copy GB/s. G1 backward: both gradients."
        )
    lines += [
        "",
        "| workload | mode | pass | PyTorch ms | ndarray ms | ndarray out= ms | "
        "tiinterp.torch ms | ndarray out= / PyTorch | tiinterp.torch / PyTorch | target | "
        "GB/s | % copy | PyTorch GB/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        label = case_label(row)
        if "error" in row:
            lines.append(f"| {label} | {row['mode']} | - | error: {row['error']} ||||||||||")
            continue
        target = row.get("target")
        extra = f", >= {L_COPY_SHARE_TARGET:g} % copy" if row["workload"] == "L" else ""
        for direction in ("forward", "backward"):
            torch_ms = row.get(f"pytorch_{direction}_ms")
            ours = row.get(f"tiinterp_{direction}_out_ms", row.get(f"tiinterp_{direction}_ms"))
            bridge = row.get(f"titorch_{direction}_ms")
            gbps = row["bytes"] / ours / 1e6 if ours else None
            torch_gbps = row["bytes"] / torch_ms / 1e6 if torch_ms else None
            lines.append(
                f"| {label} | {row['mode']} | {direction} | {number(torch_ms)} | "
                f"{number(row.get(f'tiinterp_{direction}_ms'))} | "
                f"{number(row.get(f'tiinterp_{direction}_out_ms'))} | "
                f"{number(bridge)} | "
                f"{ratio_cell(ours, torch_ms, target)} | "
                f"{ratio_cell(bridge, torch_ms, target)} | "
                f"{target_cell(target, extra) if torch_ms else '-'} | "
                f"{number(gbps)} | "
                f"{number(100 * gbps / copy_gbps, 3) if gbps and copy_gbps else '-'} | "
                f"{number(torch_gbps)} |"
            )
    return lines


def render_per_call(report):
    data = report["sections"].get("per_call", {}).get("data", {})
    rows, timing = data.get("rows", []), data.get("timing")
    if not rows:
        return []
    lines = ["", "## Per-call cost", ""]
    if timing:
        lines.append(
            f"Microseconds per call, float32, bilinear, data already on the device: the "
            f"median of {timing['calls']} calls (after {timing['warmup']} warm-up calls), each "
            "followed by a sync of its own work (torch's for PyTorch and tiinterp.torch, "
            "Taichi's for ndarrays); 'back to back': as many calls and one sync, divided by "
            f"their number. Fewer calls (at least {timing['min_calls']}) where they take over "
            f"{timing['max_seconds']:g} s: 'calls' is the fewest in the row. 'ndarray out=': "
            "tiinterp on Taichi ndarrays into a preallocated result; backward: the adjoint "
            "(ndarray) or torch.autograd.grad. Ratios: **tiinterp's time / PyTorch's time** "
            "(synced); 'target': the most issue 23 allows, on CUDA; **bold**: over it. "
            "'Taichi launch': the prepared gather launch alone that a repeated ndarray call "
            "makes (GPU archs), and 'tiinterp's own': ndarray out= less it, back to back "
            "(issue 43 asks at most ~20 us)."
        )
    lines += [
        "",
        "| case | pass | PyTorch us | ndarray out= us | tiinterp.torch us | "
        "ndarray out= / PyTorch | tiinterp.torch / PyTorch | target | "
        "back to back us: PyTorch / ndarray out= / tiinterp.torch | "
        "Taichi launch us, back to back | tiinterp's own us | calls |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        label = case_label(row)
        target = row.get("target")
        for direction in ("forward", "backward"):
            synced = {p: row.get(f"{p}_{direction}_us") for p in PER_CALL_PATHS}
            launch = row.get(f"taichi_launch_{direction}_stream_us")
            ours = row.get(f"ndarray_out_{direction}_stream_us")
            own = ours - launch if launch is not None and ours is not None else None
            streamed = " / ".join(
                number(row.get(f"{p}_{direction}_stream_us")) for p in PER_CALL_PATHS
            )
            lines.append(
                f"| {label} | {direction} | {number(synced['pytorch'])} | "
                f"{number(synced['ndarray_out'])} | {number(synced['titorch'])} | "
                f"{ratio_cell(synced['ndarray_out'], synced['pytorch'], target)} | "
                f"{ratio_cell(synced['titorch'], synced['pytorch'], target)} | "
                f"{target_cell(target)} | {streamed} | "
                f"{number(launch)} | {number(own)} | {row.get('fewest_calls', '-')} |"
            )
        if "error" in row:
            lines.append(f"| {label} | - | error: {row['error']} ||||||||")
    return lines


# --- Command line --------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--arch", choices=("cuda", "vulkan", "cpu"), default="cuda", help=ARCH_HELP)
    add(
        "--quick",
        action="store_true",
        help="small benchmark shapes and fewer calls: a test of this script",
    )
    add("--out", default=str(ROOT / "benchmarks" / "out"), help="result folder")
    add(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="run only these sections (in the standard order)",
    )
    add(
        "--budget-scale",
        type=float,
        default=float(os.environ.get("GPU_CHECK_BUDGET_SCALE", "1")),
        help="multiply every section's time limit (a slow machine)",
    )
    # Internal: one section in a child process.
    add("--section", choices=SECTIONS, help=argparse.SUPPRESS)
    add("--work", help=argparse.SUPPRESS)
    add("--deadline", type=float, help=argparse.SUPPRESS)
    add("--skip-bridge", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sections = [name for name in SECTIONS if name in args.sections]
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.section:
        with contextlib.redirect_stdout(sys.stderr):
            return run_section(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
