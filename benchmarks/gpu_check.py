"""GPU check: tiinterp on the CUDA arch, against its own CPU results and PyTorch CUDA.

Run on a machine with an NVIDIA GPU: ``bash benchmarks/gpu_check.sh`` (installs carried
wheels, then runs this), or ``python benchmarks/gpu_check.py --out DIR``. Without a GPU,
``--arch cpu --quick`` runs the same logic with the CPU standing in for the device, and
``--arch vulkan --quick`` with a Vulkan device (Mesa's lavapipe will do); off CUDA, PyTorch
runs on the CPU.

Sections, each in its own subprocess with a time limit (a CUDA error, an abort or a hang
ends that section only; results are written case by case, so a killed section keeps what it
finished). The device sections run one by one; on CUDA the CPU reference runs alongside
them (on the other archs, which use the CPU too, before them):

- ``reference``: tiinterp on the CPU with Taichi ndarrays (the generic kernels that a GPU
  runs), for every resize mode (antialiased where the mode allows it, align_corners=True
  for bilinear and bicubic, 1-D linear, 3-D trilinear and nearest) and grid_sample mode and
  padding, forward and backward (``method="adjoint"`` and ``"autodiff"``), float32 and
  float64.
- ``resize``, ``grid_sample``: the same calls on the device arch with Taichi ndarrays
  (compared with the reference at the end) and with NumPy arrays; PyTorch on the device
  (``F.interpolate``, ``F.grid_sample``, ``torch.autograd.grad``) against tiinterp.
- ``torch_bridge``: ``tiinterp.torch`` with device tensors, forward and autograd backward,
  against tiinterp's ndarray results; its backward run 5 times, bit for bit.
- ``threads``: calls from threads other than the one that started Taichi (issue 42): a new
  signature's first call in a bare ``threading.Thread`` (resize forward and adjoint,
  grid_sample), ``torch.autograd.grad(y, x, g)`` with a contiguous ``g`` as the first
  backward of a signature (resize and grid_sample: PyTorch runs it in its device thread),
  and 4 threads making new signatures at once; each result against the same call in the
  main thread, bit for bit. It records the torch release and ``tiinterp.torch``'s
  registration, and whether the thread had a CUDA context before the call.
- ``determinism``: tiinterp's adjoint backward run 5 times (must be bit-identical), and
  PyTorch's device backward run 5 times (bitwise or not, and the spread).
- ``per_call``: what one small call costs, in microseconds: a tiny resize and W4, bilinear,
  forward and backward, tiinterp on Taichi ndarrays with ``out=`` and through
  ``tiinterp.torch``, against PyTorch on the device; each call followed by a sync (median),
  and the same calls back to back with one sync at the end.
- ``benchmarks``, ``benchmark_large``: device copy bandwidth, then resize forward and
  backward of W1-W3 and a large batch, G1 (grid_sample, forward and both gradients) and a
  3-D trilinear resize, tiinterp on device-resident Taichi ndarrays and through
  ``tiinterp.torch``, against PyTorch on the device.

Every time ratio is tiinterp's time / PyTorch's (below 1: tiinterp faster), printed next
to issue 23's target for its row (TARGETS).

Writes ``OUT/gpu_check.json``, ``OUT/gpu_check.md`` (also printed) and ``OUT/logs/``; exits
1 when a section fails, errs or runs out of time, or a required check fails.
"""

import argparse
import contextlib
import dataclasses
import datetime
import importlib.metadata
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
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tiinterp from this tree, whatever is installed

import tiinterp  # noqa: E402
from tiinterp._rules.filters import ALIASES, ANTIALIAS_MODES, MODE_DIMS  # noqa: E402

# isort: split
# After tiinterp, which imports Taichi without its banner.
import taichi as ti  # noqa: E402

DTYPES = ("float32", "float64")
TAICHI_DTYPES = {"float32": ti.f32, "float64": ti.f64}
RUNS = 5  # repetitions of the determinism checks

# Bounds on max |actual - expected| / max |expected| (grid_sample: / max(1, max |expected|),
# as its grid gradients scale with the image size), on N(0, 1) data. The device may fuse
# multiply-adds and sum in another order than the CPU's kernels (tests/tolerances.py:
# "cross_arch" 2e-6 absolute, "pytorch" 3e-6, "grid_pytorch" 1e-5 / 1e-10).
TOLERANCE = {
    ("resize", "float32"): 1e-5,
    ("resize", "float64"): 1e-12,
    ("grid_sample", "float32"): 1e-5,
    ("grid_sample", "float64"): 1e-10,
}

# Seconds per section: (full run, --quick). The hard limit of the subprocess; the section
# stops starting new cases a few seconds before it. On CUDA the reference runs on the CPU
# alongside the device sections, which run one after another: 435 s in all, and the
# reference's own limit is below that, so that with the install and Python start-up the
# whole check ends within 8 minutes. The H200 run of 2026-11-30 took 144 s in the reference,
# 12-20 s in each device section but grid_sample (80 s, one case short). Kernels compiled
# per tap count (issue 23's fused gather) cost more compiles: on a 2-core machine with
# --quick, the reference took 117-145 s with them where the generic kernels took 29 s.
BUDGETS = {
    "reference": (400, 240),
    "resize": (60, 75),
    "grid_sample": (95, 60),
    "torch_bridge": (40, 60),
    "threads": (30, 60),
    "determinism": (30, 30),
    "per_call": (35, 45),
    "benchmarks": (85, 90),
    "benchmark_large": (60, 30),
}
SECTIONS = tuple(BUDGETS)
SOFT_MARGIN_S = 12.0
# GiB of device memory for Taichi per section. Taichi's CUDA runtime cuts every ndarray
# (tiinterp's scratch and autodiff buffers included) from one pool that ti.init allocates,
# device_memory_GB (default 1); running out is a device-side assert that ends the process
# (taichi-dev/taichi#8455). The benchmarks section probes the default (probe_default_pool).
# The rest of the GPU's memory is PyTorch's. Given on CUDA only.
POOL_GB = {
    "resize": 4,
    "grid_sample": 4,
    "torch_bridge": 4,
    "threads": 4,
    "determinism": 4,
    "per_call": 4,
    "benchmarks": 16,
    "benchmark_large": 64,
}


# --- Cases ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ResizeCase:
    name: str
    shape: tuple
    size: tuple
    mode: str
    antialias: bool
    align_corners: object  # None, False or True
    dtype: str
    seed: int

    @property
    def options(self):
        return {"mode": self.mode, "antialias": self.antialias, "align_corners": self.align_corners}

    @property
    def out_shape(self):
        return (*self.shape[:2], *self.size)

    def arrays(self):
        """The input and an output gradient, N(0, 1), the same in every process."""
        rng = np.random.default_rng(self.seed)
        x = rng.standard_normal(self.shape).astype(self.dtype)
        g = rng.standard_normal(self.out_shape).astype(self.dtype)
        return x, g


@dataclasses.dataclass(frozen=True)
class GridCase:
    name: str
    shape: tuple
    points: tuple
    mode: str
    padding_mode: str
    align_corners: bool
    dtype: str
    seed: int

    @property
    def options(self):
        return {
            "mode": self.mode,
            "padding_mode": self.padding_mode,
            "align_corners": self.align_corners,
        }

    def arrays(self):
        """Input, grid (a little past [-1, 1] on every side, so padding is exercised) and
        output gradient."""
        rng = np.random.default_rng(self.seed)
        x = rng.standard_normal(self.shape).astype(self.dtype)
        dims = len(self.shape) - 2
        grid = rng.uniform(-1.15, 1.15, (self.shape[0], *self.points, dims)).astype(self.dtype)
        g = rng.standard_normal((*self.shape[:2], *self.points)).astype(self.dtype)
        return x, grid, g


def resize_cases():
    shape_2d, up_2d, down_2d = (2, 3, 23, 37), (41, 58), (9, 14)
    specs = []  # (tag, shape, size, mode, antialias, align_corners)
    for mode in tiinterp.MODES:
        canonical = ALIASES.get(mode, mode)
        if 2 not in MODE_DIMS[canonical]:
            continue
        antialiased_only = mode in ALIASES  # PyTorch's "lanczos" is antialiased lanczos3
        if not antialiased_only:
            specs.append(("up", shape_2d, up_2d, mode, False, None))
            specs.append(("down", shape_2d, down_2d, mode, False, None))
        if canonical in ANTIALIAS_MODES:
            specs.append(("down-aa", shape_2d, down_2d, mode, True, None))
            if antialiased_only:
                specs.append(("up-aa", shape_2d, up_2d, mode, True, None))
        if mode in ("bilinear", "bicubic"):
            specs.append(("up-ac", shape_2d, up_2d, mode, False, True))
    shape_1d, shape_3d, size_3d = (2, 3, 29), (2, 2, 7, 9, 11), (11, 6, 15)
    specs += [
        ("1d-up", shape_1d, (47,), "linear", False, None),
        ("1d-down-aa", shape_1d, (11,), "linear", True, None),
        ("3d", shape_3d, size_3d, "trilinear", False, None),
        ("3d-ac", shape_3d, size_3d, "trilinear", False, True),
        ("3d", shape_3d, size_3d, "nearest", False, None),
    ]
    cases = []
    for dtype in DTYPES:
        for tag, shape, size, mode, antialias, align in specs:
            name = f"{mode}/{tag}/{dtype}"
            cases.append(
                ResizeCase(name, shape, size, mode, antialias, align, dtype, seed=len(cases))
            )
    return cases


def grid_cases(quick=False):
    """Every mode with every padding in float32, align_corners alternating so that each
    mode has both; fewer in float64 and 3-D. Each (mode, padding, align_corners, dtype) is
    its own compiled kernel set (the autodiff of bicubic takes seconds), so not the full
    product; with ``quick`` (a test of this script), only the HOST_PATH_GRID cases."""
    shape_2d, points_2d = (2, 3, 13, 17), (7, 11)
    shape_3d, points_3d = (2, 2, 6, 7, 8), (4, 5, 6)
    specs = []  # (shape, points, mode, padding_mode, align_corners, dtype)
    for m, mode in enumerate(("bilinear", "nearest", "bicubic")):
        for p, padding in enumerate(("zeros", "border", "reflection")):
            specs.append((shape_2d, points_2d, mode, padding, (m + p) % 2 == 1, "float32"))
    specs += [
        (shape_3d, points_3d, "bilinear", "zeros", False, "float32"),
        (shape_3d, points_3d, "bilinear", "reflection", True, "float32"),
        (shape_3d, points_3d, "nearest", "border", False, "float32"),
        (shape_2d, points_2d, "bilinear", "reflection", True, "float64"),
        (shape_2d, points_2d, "nearest", "zeros", False, "float64"),
        (shape_2d, points_2d, "bicubic", "border", True, "float64"),
        (shape_3d, points_3d, "bilinear", "border", False, "float64"),
    ]
    cases = []
    for shape, points, mode, padding, align, dtype in specs:
        name = f"{mode}/{len(shape) - 2}d-{padding}-ac{int(align)}/{dtype}"
        cases.append(GridCase(name, shape, points, mode, padding, align, dtype, 1000 + len(cases)))
    return [case for case in cases if case.name in HOST_PATH_GRID] if quick else cases


# Resize cases that also run with NumPy arrays and through tiinterp.torch. On CUDA every
# case does: those take the same generic kernels as Taichi ndarrays. On the CPU (--arch
# cpu) they take the fast CPU kernels instead, compiled per tap width (minutes for every
# case), so these stand in.
CPU_HOST_PATH_RESIZE = frozenset(
    {
        "nearest/up/float32",
        "bilinear/down-aa/float32",
        "bicubic/up-ac/float32",
        "trilinear/3d/float32",
        "bilinear/up/float64",
    }
)
# grid_sample cases that also run with NumPy arrays and through tiinterp.torch, on every
# arch: those reshape the points to (N, P, D), the same code for every mode, but each
# (mode, padding, align_corners, dtype) compiles the kernels again for that layout.
HOST_PATH_GRID = frozenset(
    {
        "bilinear/2d-zeros-ac0/float32",
        "nearest/2d-border-ac0/float32",
        "bicubic/2d-reflection-ac0/float32",
        "bilinear/3d-zeros-ac0/float32",
        "nearest/2d-zeros-ac0/float64",
    }
)


def host_path_cases(section, cases):
    """The cases that also run with NumPy arrays and through tiinterp.torch."""
    if cases and isinstance(cases[0], GridCase):
        return [case for case in cases if case.name in HOST_PATH_GRID]
    if section.arch == "cuda":
        return cases
    return [case for case in cases if case.name in CPU_HOST_PATH_RESIZE]


def key(case, what):
    """An npz member name for one result of one case."""
    return key_prefix(case.name) + what


# --- Comparison ----------------------------------------------------------------------------


def compare(actual, expected, tolerance, scale_floor=0.0):
    """Max abs and relative error of ``actual`` against ``expected``; ok when the relative
    error is within ``tolerance``. NaN at the same place on both sides counts as equal."""
    a = np.asarray(actual, dtype=np.float64)
    b = np.asarray(expected, dtype=np.float64)
    if a.shape != b.shape:
        return {"ok": False, "error": f"shape {a.shape}, expected {b.shape}"}
    difference = np.abs(a - b)
    difference[np.isnan(a) & np.isnan(b)] = 0.0
    difference[np.isnan(difference)] = np.inf
    max_abs = float(difference.max(initial=0.0))
    finite = np.abs(b[np.isfinite(b)])
    scale = max(float(finite.max(initial=0.0)), scale_floor, np.finfo(np.float64).tiny)
    max_rel = max_abs / scale
    return {
        "ok": bool(max_rel <= tolerance),
        "max_abs": max_abs,
        "max_rel": max_rel,
        "tolerance": tolerance,
        "identical": bool(np.array_equal(a, b, equal_nan=True)),
    }


def failed_check(error):
    return {"ok": False, "error": short_error(error)}


def short_error(error):
    text = f"{type(error).__name__}: {error}".strip()
    return text if len(text) <= 300 else text[:297] + "..."


def spread(runs, required):
    """Whether repeated results are bit-identical, and how far apart they are."""
    first = runs[0]
    identical = all(np.array_equal(run, first) for run in runs[1:])
    widest = max(
        (float(np.max(np.abs(run.astype(np.float64) - first))) for run in runs[1:]),
        default=0.0,
    )
    return {
        "runs": len(runs),
        "identical": bool(identical),
        "max_spread": widest,
        "max_abs_value": float(np.max(np.abs(first))),
        "required": required,
        "ok": bool(identical or not required),
    }


# --- Section context -----------------------------------------------------------------------


class Section:
    """What a section child knows: its arguments, its deadline, and its result file, which
    it rewrites after every case so that a killed child leaves what it finished."""

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
        temporary.write_text(json.dumps(clean_json(record), indent=1))
        temporary.replace(self.path)

    # --- device helpers (child processes only) ---

    def start_taichi(self, arch=None):
        """``tiinterp.init`` on the section's arch, with a Taichi device memory pool that
        holds the section's ndarrays (see POOL_GB)."""
        arch = arch or self.arch
        options = {"device_memory_GB": POOL_GB[self.name]} if arch == "cuda" else {}
        started = tiinterp.init(arch, **options)
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


def has_autodiff():
    """Whether Taichi differentiates ndarrays on the current arch: elsewhere tiinterp
    refuses method="autodiff" (taichi 1.7.4 on Vulkan, for one), as documented."""
    from tiinterp._runtime.session import AUTODIFF_ARCHS, current_arch

    return current_arch() in AUTODIFF_ARCHS


def no_autodiff_here():
    from tiinterp._runtime.session import BACKEND, current_arch

    return {"ok": True, "unsupported": f"no ndarray autodiff in {BACKEND} on {current_arch()}"}


def clean_json(value):
    """JSON without NaN/Infinity (written as strings) and with plain Python numbers."""
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def save_arrays(folder, case, arrays):
    """One case's results, in a file of its own: a section killed later keeps them."""
    folder.mkdir(exist_ok=True)
    np.savez(folder / f"{key_prefix(case.name).rstrip('|')}.npz", **arrays)


def load_arrays(folder):
    """``{key(case, what): array}`` of every case saved in ``folder``."""
    arrays = {}
    for path in sorted(folder.glob("*.npz")) if folder.exists() else ():
        with np.load(path) as archive:
            prefix = path.stem + "|"
            arrays.update({prefix + name: archive[name] for name in archive.files})
    return arrays


def ndarray_from(array):
    """A Taichi ndarray holding ``array`` (on Taichi's device)."""
    result = ti.ndarray(TAICHI_DTYPES[array.dtype.name], array.shape)
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


def run_case(section, cases, compute):
    """``compute(case)`` -> checks, for every case until the deadline; each case's failure
    is recorded in it and the next one runs."""
    records = section.data.setdefault("cases", [])
    skipped = section.data.setdefault("skipped", [])
    for case in cases:
        if section.out_of_time():
            skipped.append(case.name)
            continue
        started = time.monotonic()
        try:
            checks = compute(case)
        except Exception as error:  # one case's failure must not end the section
            checks = {"case": failed_check(error)}
            traceback.print_exc()
        records.append(
            {"name": case.name, "seconds": round(time.monotonic() - started, 3), "checks": checks}
        )
        section.save()


def attempt(checks, label, compute):
    """``compute()``, or None with the error recorded under ``label``."""
    try:
        return compute()
    except Exception as error:
        checks[label] = failed_check(error)
        traceback.print_exc()
        return None


# --- Sections ------------------------------------------------------------------------------


def section_reference(section):
    """tiinterp on the CPU with Taichi ndarrays: the generic kernels that the GPU runs, as
    the CPU's LLVM backend compiles them (the NumPy arrays of the CPU take other, CPU-only
    kernels, checked against PyTorch by the test suite)."""
    section.start_taichi("cpu")

    def resize_reference(case):
        checks = {}
        save_arrays(section.work / "ref_resize", case, ndarray_resize_results(checks, case))
        return checks

    def grid_reference(case):
        checks = {}
        save_arrays(section.work / "ref_grid", case, ndarray_grid_results(checks, case))
        return checks

    run_case(section, resize_cases(), resize_reference)
    run_case(section, grid_cases(section.quick), grid_reference)


def resize_calls(case, x, g):
    """The calls whose results are compared, by name, on any array kind."""
    options = case.options
    return {
        "forward": lambda: tiinterp.interpolate(x, size=case.size, **options),
        "adjoint": lambda: tiinterp.interpolate_backward(g, case.shape, **options),
        "autodiff": lambda: tiinterp.interpolate_backward(
            g, case.shape, method="autodiff", **options
        ),
    }


def grid_calls(case, x, grid, g):
    """As ``resize_calls``; a backward gives two results, named ``*_input`` and ``*_grid``."""
    options = case.options
    return {
        "forward": lambda: tiinterp.grid_sample(x, grid, **options),
        "adjoint": lambda: tiinterp.grid_sample_backward(g, x, grid, **options),
        "autodiff": lambda: tiinterp.grid_sample_backward(g, x, grid, method="autodiff", **options),
    }


def named_results(what, result):
    """``{name: array}`` of one call: the gradient pair of grid_sample gets two names."""
    if isinstance(result, tuple):
        return {f"{what}_input": to_numpy(result[0]), f"{what}_grid": to_numpy(result[1])}
    return {what: to_numpy(result)}


def ndarray_resize_results(checks, case):
    """The case's results with Taichi ndarrays on the current arch, as NumPy arrays; a
    failed call is recorded in ``checks``."""
    x, g = case.arrays()
    results = {}
    for what, compute in resize_calls(case, ndarray_from(x), ndarray_from(g)).items():
        if what == "autodiff" and not has_autodiff():
            checks[f"ndarray {what}"] = no_autodiff_here()
            continue
        result = attempt(checks, f"ndarray {what}", compute)
        if result is not None:
            results.update(named_results(what, result))
    return results


def ndarray_grid_results(checks, case):
    x, grid, g = case.arrays()
    results = {}
    arrays = [ndarray_from(a) for a in (x, grid, g)]
    for what, compute in grid_calls(case, *arrays).items():
        if what == "autodiff" and not has_autodiff():
            checks[f"ndarray {what}"] = no_autodiff_here()
            continue
        result = attempt(checks, f"ndarray {what}", compute)
        if result is not None:
            results.update(named_results(what, result))
    return results


def to_numpy(value):
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "to_numpy"):  # Taichi ndarray
        return value.to_numpy()
    return value.detach().cpu().numpy()  # torch


def check_host_path(checks, calls, ours, tolerance, scale_floor):
    """The same calls with NumPy arrays (Taichi's host-array path on a GPU) against the
    Taichi ndarray results ``ours``."""
    for what, compute in calls.items():
        if what == "autodiff" and not has_autodiff():
            checks[f"NumPy {what} vs ndarray"] = no_autodiff_here()
            continue
        result = attempt(checks, f"NumPy {what} vs ndarray", compute)
        if result is None:
            continue
        for name, value in named_results(what, result).items():
            if name in ours:
                checks[f"NumPy {name} vs ndarray"] = compare(
                    value, ours[name], tolerance, scale_floor
                )


def section_resize(section):
    """Every resize case on the device with Taichi ndarrays (compared with the CPU by the
    parent process), the same with NumPy arrays, and PyTorch on the device."""
    section.start_taichi()
    torch = section.torch()
    import torch.nn.functional as F

    host_path = {case.name for case in host_path_cases(section, resize_cases())}

    def check_case(case):
        tolerance = TOLERANCE[("resize", case.dtype)]
        checks = {}
        ours = ndarray_resize_results(checks, case)
        save_arrays(section.work / "dev_resize", case, ours)
        x, g = case.arrays()
        if case.name in host_path:
            check_host_path(checks, resize_calls(case, x, g), ours, tolerance, 0.0)
        checks.update(pytorch_resize_checks(torch, F, section.torch_device, case, x, g, ours))
        return checks

    run_case(section, resize_cases(), check_case)


def pytorch_resize_checks(torch, F, device, case, x, g, ours):
    """F.interpolate and its autograd gradient on the device vs tiinterp's device results.
    A mode or option PyTorch lacks (lanczos3, antialiased 1-D, ...) is reported as such."""
    tolerance = TOLERANCE[("resize", case.dtype)]
    try:
        xt = torch.from_numpy(x).to(device).requires_grad_(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yt = F.interpolate(xt, size=case.size, **case.options)
    except Exception as error:
        unsupported = {"ok": True, "unsupported": short_error(error)}
        return {"PyTorch forward": unsupported, "PyTorch backward": unsupported}
    checks = {}
    if "forward" in ours:
        checks["PyTorch forward"] = compare(ours["forward"], to_numpy(yt), tolerance)
    gt = torch.from_numpy(g).to(device)
    grad = attempt(checks, "PyTorch backward", lambda: torch.autograd.grad(yt, xt, gt)[0])
    if grad is not None and "adjoint" in ours:
        checks["PyTorch backward"] = compare(ours["adjoint"], to_numpy(grad), tolerance)
    return checks


def section_grid_sample(section):
    """Every grid_sample case, as section_resize."""
    section.start_taichi()
    torch = section.torch()
    import torch.nn.functional as F

    host_path = {case.name for case in host_path_cases(section, grid_cases(section.quick))}

    def check_case(case):
        tolerance = TOLERANCE[("grid_sample", case.dtype)]
        checks = {}
        ours = ndarray_grid_results(checks, case)
        save_arrays(section.work / "dev_grid", case, ours)
        x, grid, g = case.arrays()
        if case.name in host_path:
            calls = grid_calls(case, x, grid, g)
            del calls["autodiff"]  # the same ti.ad machinery as for ndarrays; slow to compile
            check_host_path(checks, calls, ours, tolerance, 1.0)
        checks.update(pytorch_grid_checks(torch, F, section.torch_device, case, x, grid, g, ours))
        return checks

    run_case(section, grid_cases(section.quick), check_case)


def pytorch_grid_checks(torch, F, device, case, x, grid, g, ours):
    tolerance = TOLERANCE[("grid_sample", case.dtype)]
    try:
        xt = torch.from_numpy(x).to(device).requires_grad_(True)
        gridt = torch.from_numpy(grid).to(device).requires_grad_(True)
        yt = F.grid_sample(xt, gridt, **case.options)
    except Exception as error:
        return {"PyTorch forward": {"ok": True, "unsupported": short_error(error)}}
    checks = {}
    if "forward" in ours:
        checks["PyTorch forward"] = compare(ours["forward"], to_numpy(yt), tolerance, 1.0)
    gt = torch.from_numpy(g).to(device)
    grads = attempt(checks, "PyTorch backward", lambda: torch.autograd.grad(yt, (xt, gridt), gt))
    if grads is not None:
        for name, value in zip(("input", "grid"), grads, strict=True):
            if f"adjoint_{name}" in ours:
                checks[f"PyTorch grad_{name}"] = compare(
                    ours[f"adjoint_{name}"], to_numpy(value), tolerance, 1.0
                )
    return checks


def section_torch_bridge(section):
    """tiinterp.torch with device tensors (on CUDA: pointers handed to Taichi's kernels),
    forward and autograd backward, against tiinterp's Taichi ndarray results on the device
    (section resize / grid_sample)."""
    section.start_taichi()
    torch = section.torch()
    import tiinterp.torch as titorch

    device = section.torch_device
    resize_ours = load_arrays(section.work / "dev_resize")
    grid_ours = load_arrays(section.work / "dev_grid")

    def expect(checks, label, value, expected, tolerance, scale_floor):
        if expected is None:
            checks[label] = {"ok": False, "error": "no Taichi ndarray result on the device"}
        else:
            checks[label] = compare(to_numpy(value), expected, tolerance, scale_floor)

    def check_resize(case):
        x, g = case.arrays()
        tolerance = TOLERANCE[("resize", case.dtype)]
        checks = {}
        xt = torch.from_numpy(x).to(device).requires_grad_(True)
        yt = attempt(
            checks,
            "forward vs ndarray",
            lambda: titorch.interpolate(xt, size=case.size, **case.options),
        )
        if yt is None:
            return checks
        expect(
            checks, "forward vs ndarray", yt, resize_ours.get(key(case, "forward")), tolerance, 0
        )
        gt = torch.from_numpy(g).to(device)
        grad = attempt(checks, "backward vs ndarray", lambda: torch.autograd.grad(yt, xt, gt)[0])
        if grad is not None:
            expected = resize_ours.get(key(case, "adjoint"))
            expect(checks, "backward vs ndarray", grad, expected, tolerance, 0)
        return checks

    def check_grid(case):
        x, grid, g = case.arrays()
        tolerance = TOLERANCE[("grid_sample", case.dtype)]
        checks = {}
        xt = torch.from_numpy(x).to(device).requires_grad_(True)
        gridt = torch.from_numpy(grid).to(device).requires_grad_(True)
        yt = attempt(
            checks, "forward vs ndarray", lambda: titorch.grid_sample(xt, gridt, **case.options)
        )
        if yt is None:
            return checks
        expect(checks, "forward vs ndarray", yt, grid_ours.get(key(case, "forward")), tolerance, 1)
        gt = torch.from_numpy(g).to(device)
        grads = attempt(
            checks, "backward vs ndarray", lambda: torch.autograd.grad(yt, (xt, gridt), gt)
        )
        if grads is not None:
            for name, value in zip(("input", "grid"), grads, strict=True):
                expected = grid_ours.get(key(case, f"adjoint_{name}"))
                expect(checks, f"grad_{name} vs ndarray", value, expected, tolerance, 1)
        return checks

    run_case(section, host_path_cases(section, resize_cases()), check_resize)
    run_case(section, host_path_cases(section, grid_cases(section.quick)), check_grid)
    if section.out_of_time():
        return
    # tiinterp.torch's backward is tiinterp's adjoint: bit-identical from run to run.
    shape, size = determinism_shape(section.quick)
    x = torch.randn(shape, device=device, requires_grad=True)
    y = titorch.interpolate(x, size=size, mode="bilinear")
    g = torch.randn_like(y)
    runs = [to_numpy(torch.autograd.grad(y, x, g, retain_graph=True)[0]) for _ in range(RUNS)]
    section.data["determinism"] = [
        {"what": f"tiinterp.torch bilinear backward {shape}->{size}", **spread(runs, True)}
    ]
    section.save()


def thread_context_state(arch):
    """On CUDA, whether the calling thread has a current context (cuCtxGetCurrent); None
    elsewhere."""
    if arch != "cuda":
        return None
    import ctypes

    context = ctypes.c_void_p()
    ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(context))
    return bool(context.value)


def in_bare_thread(arch, call):
    """``call()`` in a new ``threading.Thread``: (its result, whether the thread had a CUDA
    context before it); its exception re-raised here."""
    import threading

    outcome = {}

    def run():
        outcome["context_before"] = thread_context_state(arch)
        try:
            outcome["value"] = call()
        except Exception as error:  # re-raised in the section
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    if thread.is_alive():
        raise TimeoutError("the thread did not finish within 120 s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"], outcome["context_before"]


def identical(actual, expected):
    return compare(to_numpy(actual), to_numpy(expected), 0.0)


def section_threads(section):
    """Calls from threads that did not start Taichi, each of a signature not used before in
    this process (its tables are uploaded in that thread), against the same call in the
    main thread."""
    section.start_taichi()
    torch = section.torch()
    import tiinterp.torch as titorch

    section.data["torch"] = torch.__version__
    section.data["registration"] = titorch.REGISTRATION
    device = section.torch_device
    rng = np.random.default_rng(42)
    x = rng.standard_normal((2, 3, 19, 23), dtype=np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 7, 5, 2)).astype(np.float32)

    @dataclasses.dataclass(frozen=True)
    class ThreadCase:
        name: str
        run: object

    def checked(label, call, expected_call):
        checks = {}
        result = attempt(checks, label, lambda: in_bare_thread(section.arch, call))
        if result is not None:
            value, had_context = result
            checks[label] = identical(value, expected_call())
            checks[label]["context_before"] = had_context
        return checks

    def bare_resize(case):
        return checked(
            "forward in a bare thread",
            lambda: tiinterp.interpolate(x, size=(37, 29), mode="bicubic"),
            lambda: tiinterp.interpolate(x, size=(37, 29), mode="bicubic"),
        )

    def bare_adjoint(case):
        g = rng.standard_normal((2, 3, 31, 41), dtype=np.float32)
        return checked(
            "adjoint in a bare thread",
            lambda: tiinterp.interpolate_backward(g, x.shape, mode="lanczos3"),
            lambda: tiinterp.interpolate_backward(g, x.shape, mode="lanczos3"),
        )

    def bare_grid(case):
        return checked(
            "grid_sample in a bare thread",
            lambda: tiinterp.grid_sample(x, grid, mode="bicubic", padding_mode="border"),
            lambda: tiinterp.grid_sample(x, grid, mode="bicubic", padding_mode="border"),
        )

    def autograd_resize(case):
        xt = torch.from_numpy(x).to(device).requires_grad_(True)
        yt = titorch.interpolate(xt, size=(43, 17), mode="bilinear")
        gt = torch.from_numpy(rng.standard_normal(tuple(yt.shape), dtype=np.float32)).to(device)
        checks = {}
        grad = attempt(checks, "grad", lambda: torch.autograd.grad(yt, xt, gt)[0])
        if grad is not None:
            expected = titorch.interpolate(xt.detach(), size=(43, 17), mode="bilinear")
            checks["forward"] = identical(yt, expected)
            checks["grad"] = identical(
                grad,
                tiinterp.interpolate_backward(gt.contiguous(), tuple(x.shape), mode="bilinear"),
            )
        return checks

    def autograd_grid(case):
        xt = torch.from_numpy(x).to(device).requires_grad_(True)
        gridt = torch.from_numpy(grid[:, :3]).to(device).requires_grad_(True)
        yt = titorch.grid_sample(xt, gridt, mode="bilinear", align_corners=True)
        gt = torch.from_numpy(rng.standard_normal(tuple(yt.shape), dtype=np.float32)).to(device)
        checks = {}
        grads = attempt(checks, "grads", lambda: torch.autograd.grad(yt, (xt, gridt), gt))
        if grads is not None:
            expected = tiinterp.grid_sample_backward(
                gt, xt.detach(), gridt.detach(), "bilinear", "zeros", True
            )
            for name, value, reference in zip(("input", "grid"), grads, expected, strict=True):
                checks[f"grad_{name}"] = identical(value, reference)
        return checks

    def four_at_once(case):
        import threading

        sizes = [(11, 47), (53, 13), (29, 31), (7, 61)]
        barrier = threading.Barrier(len(sizes))
        results = [None] * len(sizes)

        def worker(index):
            barrier.wait(timeout=60)
            results[index] = tiinterp.interpolate(x, size=sizes[index], mode="lanczos5")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(sizes))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        checks = {}
        for size, result in zip(sizes, results, strict=True):
            label = f"{size[0]}x{size[1]}"
            if result is None:
                checks[label] = {"ok": False, "error": "the thread failed (see the log)"}
            else:
                expected = tiinterp.interpolate(x, size=size, mode="lanczos5")
                checks[label] = identical(result, expected)
        return checks

    cases = [
        ThreadCase("new signature: resize forward", bare_resize),
        ThreadCase("new signature: resize adjoint", bare_adjoint),
        ThreadCase("new signature: grid_sample", bare_grid),
        ThreadCase("torch.autograd.grad first backward: resize", autograd_resize),
        ThreadCase("torch.autograd.grad first backward: grid_sample", autograd_grid),
        ThreadCase("4 threads, new signatures at once", four_at_once),
    ]
    run_case(section, cases, lambda case: case.run(case))


def determinism_shape(quick):
    return ((2, 4, 64, 64), (128, 128)) if quick else ((8, 16, 256, 256), (512, 512))


def section_determinism(section):
    """Repeated backward passes: tiinterp's adjoint (Taichi ndarrays) must be bit-identical;
    PyTorch's device backward (atomicAdd on CUDA) is reported as it is."""
    section.start_taichi()
    torch = section.torch()
    import torch.nn.functional as F

    device = section.torch_device
    entries = section.data.setdefault("entries", [])
    shape, size = determinism_shape(section.quick)
    out_shape = (*shape[:2], *size)
    rng = np.random.default_rng(7)
    g = rng.standard_normal(out_shape, dtype=np.float32)
    grid_shape = (shape[0], 8, shape[2] // 2, shape[3] // 2)
    grid_points = (grid_shape[0], 2 * grid_shape[2], 2 * grid_shape[3], 2)
    grid_x = rng.standard_normal(grid_shape, dtype=np.float32)
    grid = rng.uniform(-1.1, 1.1, grid_points).astype(np.float32)
    grid_g = rng.standard_normal((*grid_shape[:2], *grid_points[1:3]), dtype=np.float32)

    def record(what, make_runs, required):
        if section.out_of_time():
            entries.append({"what": what, "ok": False, "error": "skipped: out of time"})
            return
        try:
            runs = make_runs()
            entries.append({"what": what, **spread(runs, required)})
        except Exception as error:
            traceback.print_exc()
            entries.append({"what": what, **failed_check(error)})
        section.save()

    nd_g = ndarray_from(g)
    for mode in ("bilinear", "bicubic"):
        record(
            f"tiinterp {mode} adjoint backward {shape}->{size}",
            lambda mode=mode: [
                tiinterp.interpolate_backward(nd_g, shape, mode=mode).to_numpy()
                for _ in range(RUNS)
            ],
            required=True,
        )
    what = f"tiinterp bilinear autodiff backward {shape}->{size} (atomics: not promised)"
    if has_autodiff():
        record(
            what,
            lambda: [
                tiinterp.interpolate_backward(
                    nd_g, shape, mode="bilinear", method="autodiff"
                ).to_numpy()
                for _ in range(RUNS)
            ],
            required=False,
        )
    else:
        entries.append({"what": what, **no_autodiff_here()})
    nd_grid = [ndarray_from(a) for a in (grid_g, grid_x, grid)]

    def grid_runs():
        runs = []
        for _ in range(RUNS):
            grad_input, grad_grid = tiinterp.grid_sample_backward(*nd_grid)
            runs.append(
                np.concatenate([grad_input.to_numpy().ravel(), grad_grid.to_numpy().ravel()])
            )
        return runs

    record(
        f"tiinterp grid_sample bilinear adjoint backward {grid_shape}, grid {grid_points}",
        grid_runs,
        required=True,
    )

    def torch_runs(mode):
        x = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).to(device)
        x.requires_grad_(True)
        y = F.interpolate(x, size=size, mode=mode)
        gt = torch.from_numpy(g).to(device)
        return [to_numpy(torch.autograd.grad(y, x, gt, retain_graph=True)[0]) for _ in range(RUNS)]

    for mode in ("bilinear", "bicubic"):
        record(
            f"PyTorch {mode} backward {shape}->{size}",
            lambda mode=mode: torch_runs(mode),
            required=False,
        )

    def torch_grid_runs():
        x = torch.from_numpy(grid_x).to(device).requires_grad_(True)
        points = torch.from_numpy(grid).to(device).requires_grad_(True)
        y = F.grid_sample(x, points, align_corners=False)
        gt = torch.from_numpy(grid_g).to(device)
        runs = []
        for _ in range(RUNS):
            grad_input, grad_grid = torch.autograd.grad(y, (x, points), gt, retain_graph=True)
            runs.append(np.concatenate([to_numpy(grad_input).ravel(), to_numpy(grad_grid).ravel()]))
        return runs

    record(
        f"PyTorch grid_sample bilinear backward {grid_shape}, grid {grid_points}",
        torch_grid_runs,
        required=False,
    )


# --- Benchmarks ----------------------------------------------------------------------------

WORKLOADS = {
    "W1": ((8, 16, 256, 256), (512, 512)),
    "W2": ((8, 16, 512, 512), (256, 256)),
    "W3": ((4, 3, 333, 517), (480, 640)),
}
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
# 3-D, trilinear only: 16 MiB in, 128 MiB out.
VOLUME = {"V1": ((2, 8, 64, 64, 64), (128, 128, 128))}
QUICK_VOLUME = {"V1": ((1, 2, 16, 16, 16), (32, 32, 32))}
BENCH_MODES = ("bilinear", "bicubic", "nearest", "lanczos3")
QUICK_BENCH_MODES = ("bilinear", "lanczos3")  # one PyTorch has, one it lacks
PYTORCH_MODES = ("bilinear", "bicubic", "nearest", "trilinear")
# Per-call cost: a resize with almost no work, and W4 (bench.py's small workload); same
# shapes with --quick, fewer calls.
PER_CALL = {"tiny": ((1, 1, 8, 8), (16, 16)), "W4": ((1, 3, 64, 64), (128, 128))}
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
    for _ in range(warmup):
        call()
        section.sync()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        section.sync()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def copy_bandwidth(section, torch, nbytes, timing):
    """GB/s (read + write, 1e9 bytes) of a device copy: torch ``dst.copy_(src)``, and a
    Taichi copy kernel between ndarrays."""
    count = nbytes // 4

    def torch_copy_ms():
        source = torch.empty(count, device=section.torch_device).uniform_()
        target = torch.empty_like(source)
        return median_ms(section, lambda: target.copy_(source), *timing)

    def taichi_copy_ms():
        source, target = ti.ndarray(ti.f32, (count,)), ti.ndarray(ti.f32, (count,))
        fill_uniform(source)
        return median_ms(section, lambda: copy_kernel(source, target), *timing)

    torch_ms = torch_copy_ms()
    release(torch)
    taichi_ms = taichi_copy_ms()
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


def time_torch_resize(section, torch, interpolate, shape, size, mode, timing):
    """Forward and autograd backward of ``interpolate`` (F.interpolate or tiinterp.torch's)
    on device tensors, in ms."""
    x = torch.randn(shape, device=section.torch_device)
    forward = median_ms(section, lambda: interpolate(x, size=size, mode=mode), *timing)
    x.requires_grad_(True)
    y = interpolate(x, size=size, mode=mode)
    g = y.detach()  # any finite values do as a gradient
    backward = median_ms(section, lambda: torch.autograd.grad(y, x, g, retain_graph=True), *timing)
    return forward, backward


def time_tiinterp_resize(section, shape, size, mode, timing):
    """tiinterp on Taichi ndarrays: a new result per call, and ``out=``; forward and
    adjoint backward, in ms."""
    out_shape = (*shape[:2], *size)
    x, y, gx = (ti.ndarray(ti.f32, s) for s in (shape, out_shape, shape))
    fill_uniform(x)
    times = {
        "forward": median_ms(
            section, lambda: tiinterp.interpolate(x, size=size, mode=mode), *timing
        ),
        "forward_out": median_ms(
            section, lambda: tiinterp.interpolate(x, size=size, mode=mode, out=y), *timing
        ),
    }
    # y now holds the forward result: any finite values do as a gradient.
    times["backward"] = median_ms(
        section, lambda: tiinterp.interpolate_backward(y, shape, mode=mode), *timing
    )
    times["backward_out"] = median_ms(
        section, lambda: tiinterp.interpolate_backward(y, shape, mode=mode, out=gx), *timing
    )
    return times


def bench_resize_row(section, torch, titorch, name, shape, size, mode, timing):
    """One workload and mode: PyTorch, tiinterp on Taichi ndarrays (new result / ``out=``),
    tiinterp.torch; forward and backward; ms, and GB/s of input + output bytes."""
    import torch.nn.functional as F

    out_shape = (*shape[:2], *size)
    row = {
        "workload": name,
        "shape": shape,
        "size": size,
        "mode": mode,
        "bytes": 4 * (math.prod(shape) + math.prod(out_shape)),
        "target": TARGETS.get(name),
    }
    if mode in PYTORCH_MODES:
        forward, backward = time_torch_resize(
            section, torch, F.interpolate, shape, size, mode, timing
        )
        row.update(pytorch_forward_ms=forward, pytorch_backward_ms=backward)
        release(torch)
    for what, ms in time_tiinterp_resize(section, shape, size, mode, timing).items():
        row[f"tiinterp_{what}_ms"] = ms
    if titorch is not None:
        forward, backward = time_torch_resize(
            section, torch, titorch.interpolate, shape, size, mode, timing
        )
        row.update(titorch_forward_ms=forward, titorch_backward_ms=backward)
        release(torch)
    return row


def time_torch_grid(section, torch, grid_sample, shape, grid_shape, timing):
    """Forward and autograd backward (input and grid) of ``grid_sample``, in ms."""
    x = torch.randn(shape, device=section.torch_device)
    grid = torch.rand(grid_shape, device=section.torch_device) * 2.2 - 1.1
    forward = median_ms(section, lambda: grid_sample(x, grid, align_corners=False), *timing)
    x.requires_grad_(True)
    grid.requires_grad_(True)
    y = grid_sample(x, grid, align_corners=False)
    g = y.detach()
    backward = median_ms(
        section, lambda: torch.autograd.grad(y, (x, grid), g, retain_graph=True), *timing
    )
    return forward, backward


def time_tiinterp_grid(section, shape, grid_shape, timing):
    out_shape = (*shape[:2], *grid_shape[1:-1])
    x, grid, y, gx, ggrid = (
        ti.ndarray(ti.f32, s) for s in (shape, grid_shape, out_shape, shape, grid_shape)
    )
    fill_uniform(x)
    fill_uniform(grid)
    return {
        "forward": median_ms(section, lambda: tiinterp.grid_sample(x, grid), *timing),
        "forward_out": median_ms(section, lambda: tiinterp.grid_sample(x, grid, out=y), *timing),
        "backward": median_ms(section, lambda: tiinterp.grid_sample_backward(y, x, grid), *timing),
        "backward_out": median_ms(
            section,
            lambda: tiinterp.grid_sample_backward(y, x, grid, out=(gx, ggrid)),
            *timing,
        ),
    }


def bench_grid_row(section, torch, titorch, shape, points, timing):
    """grid_sample bilinear/zeros: forward and both gradients."""
    import torch.nn.functional as F

    grid_shape = (shape[0], *points, 2)
    out_shape = (*shape[:2], *points)
    row = {
        "workload": "G1",
        "shape": shape,
        "size": points,
        "mode": GRID_MODE,
        "bytes": 4 * (math.prod(shape) + math.prod(grid_shape) + math.prod(out_shape)),
        "target": TARGETS["G1"],
    }
    forward, backward = time_torch_grid(section, torch, F.grid_sample, shape, grid_shape, timing)
    row.update(pytorch_forward_ms=forward, pytorch_backward_ms=backward)
    release(torch)
    for what, ms in time_tiinterp_grid(section, shape, grid_shape, timing).items():
        row[f"tiinterp_{what}_ms"] = ms
    if titorch is not None:
        forward, backward = time_torch_grid(
            section, torch, titorch.grid_sample, shape, grid_shape, timing
        )
        row.update(titorch_forward_ms=forward, titorch_backward_ms=backward)
        release(torch)
    return row


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
    titorch = None
    if section.skip_bridge:
        section.data["torch_bridge"] = "skipped: section torch_bridge did not pass"
    else:
        import tiinterp.torch as titorch
    timing = (3, 1) if section.quick else (10, 3)  # (repeats, warm-up calls)
    section.data["timing"] = {"repeats": timing[0], "warmup": timing[1], "statistic": "median"}
    section.data["copy"] = copy_bandwidth(
        section, torch, QUICK_COPY_BYTES if section.quick else COPY_BYTES, timing
    )
    section.save()
    rows = section.data.setdefault("rows", [])
    modes = QUICK_BENCH_MODES if section.quick else BENCH_MODES
    jobs = [
        (name, shape, size, mode) for name, (shape, size) in workloads.items() for mode in modes
    ]
    if with_grid:
        jobs.append(("G1", *(QUICK_GRID_WORKLOAD if section.quick else GRID_WORKLOAD), GRID_MODE))
    jobs += [(name, shape, size, "trilinear") for name, (shape, size) in (volumes or {}).items()]
    for name, shape, size, mode in jobs:
        if section.out_of_time():
            rows.append(
                {
                    "workload": name,
                    "shape": shape,
                    "size": size,
                    "mode": mode,
                    "error": "skipped: out of time",
                }
            )
            continue
        try:
            if mode == GRID_MODE:
                rows.append(bench_grid_row(section, torch, titorch, shape, size, timing))
            else:
                rows.append(
                    bench_resize_row(section, torch, titorch, name, shape, size, mode, timing)
                )
        except Exception as error:
            traceback.print_exc()
            rows.append(
                {
                    "workload": name,
                    "shape": shape,
                    "size": size,
                    "mode": mode,
                    **failed_check(error),
                }
            )
            release(torch)
        section.save()


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

    def pytorch_calls():
        xt = torch.from_numpy(x).to(device)
        xg = xt.clone().requires_grad_(True)
        yt = F.interpolate(xg, size=size, mode=mode)
        gt = torch.from_numpy(g).to(device)
        return torch_sync, {
            "forward": lambda: F.interpolate(xt, size=size, mode=mode),
            "backward": lambda: torch.autograd.grad(yt, xg, gt, retain_graph=True),
        }

    def ndarray_calls():
        xn, gn = ndarray_from(x), ndarray_from(g)
        yn, gxn = ti.ndarray(ti.f32, out_shape), ti.ndarray(ti.f32, shape)
        calls_source.update(forward=xn, backward=gn)
        return ti.sync, {
            "forward": lambda: tiinterp.interpolate(xn, size=size, mode=mode, out=yn),
            "backward": lambda: tiinterp.interpolate_backward(gn, shape, mode=mode, out=gxn),
        }

    def bridge_calls():
        xt = torch.from_numpy(x).to(device)
        xg = xt.clone().requires_grad_(True)
        yt = titorch.interpolate(xg, size=size, mode=mode)
        gt = torch.from_numpy(g).to(device)
        return bridge_sync, {
            "forward": lambda: titorch.interpolate(xt, size=size, mode=mode),
            "backward": lambda: torch.autograd.grad(yt, xg, gt, retain_graph=True),
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
    makers = {"pytorch": pytorch_calls, "ndarray_out": ndarray_calls}
    if section.arch != "cpu":
        makers["taichi_launch"] = launch_calls
    if titorch is not None:
        makers["titorch"] = bridge_calls
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
    titorch = None
    if section.skip_bridge:
        section.data["torch_bridge"] = "skipped: section torch_bridge did not pass"
    else:
        import tiinterp.torch as titorch
    timing = PER_CALL_TIMING[section.quick]
    section.data["timing"] = {
        "calls": timing[0],
        "warmup": timing[1],
        "max_seconds": PER_CALL_MAX_S,
        "min_calls": PER_CALL_MIN_CALLS,
    }
    rows = section.data.setdefault("rows", [])
    for name, (shape, size) in PER_CALL.items():
        if section.out_of_time():
            rows.append({"workload": name, "mode": "bilinear", "error": "skipped: out of time"})
            continue
        try:
            rows.append(per_call_row(section, torch, titorch, name, shape, size, timing))
        except Exception as error:
            traceback.print_exc()
            rows.append({"workload": name, "mode": "bilinear", **failed_check(error)})
        section.save()


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
    "reference": section_reference,
    "resize": section_resize,
    "grid_sample": section_grid_sample,
    "torch_bridge": section_torch_bridge,
    "threads": section_threads,
    "determinism": section_determinism,
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
    for case in data.get("cases", []):
        for label, check in case["checks"].items():
            if not check.get("ok", False):
                failures.append(f"{case['name']}: {label}: {check.get('error', 'over tolerance')}")
    skipped = data.get("skipped", [])
    if skipped:
        failures.append(f"{len(skipped)} cases skipped (out of time), from {skipped[0]} on")
    for entry in data.get("entries", []) + data.get("determinism", []):
        if not entry.get("ok", False):
            failures.append(f"determinism: {entry['what']}: {entry.get('error', 'not identical')}")
    for row in data.get("rows", []):
        if "error" in row:
            failures.append(f"benchmark {row['workload']} {row['mode']}: {row['error']}")
    return failures


class Child:
    """One section in a subprocess, with a wall-clock limit."""

    def __init__(self, args, name, work, logs, skip_bridge=False, own_kernel_cache=False):
        self.name, self.work = name, work
        self.budget = BUDGETS[name][1 if args.quick else 0] * args.budget_scale
        self.started = time.monotonic()
        command = [
            sys.executable,
            str(pathlib.Path(__file__).resolve()),
            "--section",
            name,
            "--arch",
            args.arch,
            "--work",
            str(work),
            "--deadline",
            str(time.time() + self.budget - SOFT_MARGIN_S),
        ]
        command += ["--quick"] if args.quick else []
        command += ["--skip-bridge"] if skip_bridge else []
        self.log_path = logs / f"{name}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115  (closed in finish)
        print(f"[gpu_check] {name}: started (limit {self.budget:.0f} s)", flush=True)
        environment = dict(os.environ)
        if own_kernel_cache:
            # Taichi's offline cache is not meant for two processes writing at once.
            cache = pathlib.Path(environment.get("TI_OFFLINE_CACHE_FILE_PATH", work / "ticache"))
            environment["TI_OFFLINE_CACHE_FILE_PATH"] = str(cache / name)
        self.process = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, env=environment
        )

    def finish(self):
        """Wait for the child (killed at its limit) and return its record."""
        remaining = self.budget - (time.monotonic() - self.started)
        try:
            returncode = self.process.wait(timeout=max(remaining, 0.1))
            timed_out = False
        except subprocess.TimeoutExpired:
            self.process.kill()
            returncode = self.process.wait()
            timed_out = True
        self.log.close()
        seconds = time.monotonic() - self.started
        result_path = self.work / f"{self.name}.json"
        record = json.loads(result_path.read_text()) if result_path.exists() else {"data": {}}
        if timed_out:
            record["status"] = "timeout"
        elif record.get("status") in (None, "running"):  # died without writing its end
            record["status"] = "crashed"
        elif returncode != 0 and record.get("status") == "done":
            # Finished and saved everything, then failed on the way out (Taichi's runtime
            # can crash at interpreter exit): the results stand.
            record["note"] = f"exited with status {returncode} after finishing"
        record.update(returncode=returncode, seconds=round(seconds, 1), limit_s=self.budget)
        if record["status"] != "done":
            record["log_tail"] = self.log_path.read_text(errors="replace")[-3000:]
        print(f"[gpu_check] {self.name}: {record['status']}, {seconds:.1f} s", flush=True)
        if record["status"] != "done":
            tail = record["log_tail"].strip().splitlines()[-12:]
            print("\n".join(f"    | {line}" for line in tail), flush=True)
        return record


def compare_with_cpu(sections, work):
    """Add '... vs CPU' checks to the device sections' cases: their Taichi ndarray results
    against the reference section's, made on the CPU at the same time."""
    for name, kind in (("resize", "resize"), ("grid_sample", "grid")):
        record = sections.get(name)
        if record is None:
            continue
        reference = load_arrays(work / f"ref_{kind}")
        ours = load_arrays(work / f"dev_{kind}")
        for case in record.get("data", {}).get("cases", []):
            dtype = case["name"].rsplit("/", 1)[-1]
            tolerance = TOLERANCE[(name, dtype)]
            prefix = key_prefix(case["name"])
            for member in sorted(m for m in ours if m.startswith(prefix)):
                what = member[len(prefix) :]
                expected = reference.get(member)
                case["checks"][f"{what} vs CPU"] = (
                    compare(ours[member], expected, tolerance, 1.0 if kind == "grid" else 0.0)
                    if expected is not None
                    else {"ok": False, "error": "no CPU result (section reference)"}
                )


def key_prefix(case_name):
    return f"{case_name}|".replace("/", ":")


# Sections that time tiinterp.torch: skipped there when section torch_bridge did not pass.
BRIDGE_TIMED = ("per_call", "benchmarks", "benchmark_large")


def run_children(args, work, logs):
    """The sections, one subprocess each. On CUDA the CPU reference runs alongside the
    device sections, which run one after another; on the other archs it runs first, since
    they use the CPU too (with --arch cpu the device sections then find its kernels in
    Taichi's offline cache)."""
    records = {}
    reference = None
    if "reference" in args.sections:
        alongside = args.arch == "cuda"
        reference = Child(args, "reference", work, logs, own_kernel_cache=alongside)
        if not alongside:
            records["reference"] = reference.finish()
    skip_bridge = False
    for name in args.sections:
        if name == "reference":
            continue
        child = Child(args, name, work, logs, skip_bridge and name in BRIDGE_TIMED)
        records[name] = child.finish()
        if name == "torch_bridge" and records[name]["status"] != "done":
            skip_bridge = True  # tiinterp.torch timings would crash (or hang) the same way
    if reference is not None:
        if "reference" not in records:
            records = {"reference": reference.finish(), **records}
        compare_with_cpu(records, work)
    for name, record in records.items():
        record["failures"] = section_failures(record)
        record["passed"] = not record["failures"]
        verdict = "passed" if record["passed"] else f"FAILED ({len(record['failures'])})"
        print(f"[gpu_check] {name}: {verdict}", flush=True)
    return records


def versions():
    found = {"python": platform.python_version()}
    for package in ("numpy", "torch", "taichi"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
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
            "tolerances": {f"{op} {dtype}": v for (op, dtype), v in TOLERANCE.items()},
            "error_measure": "max|a-b| / max|b| (grid_sample: / max(1, max|b|))",
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
    (out / "gpu_check.json").write_text(json.dumps(clean_json(report), indent=1))
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


def correctness_rows(report):
    """Worst error per (section, check, dtype) over the cases."""
    groups = {}
    for section_name in ("resize", "grid_sample", "torch_bridge"):
        record = report["sections"].get(section_name)
        if not record:
            continue
        for case in record.get("data", {}).get("cases", []):
            dtype = case["name"].rsplit("/", 1)[-1]
            op = "grid_sample" if case["name"] in GRID_NAMES else "resize"
            for label, check in case["checks"].items():
                group = groups.setdefault(
                    (section_name, op, label, dtype),
                    {
                        "cases": 0,
                        "failed": 0,
                        "unsupported": 0,
                        "identical": 0,
                        "worst": None,
                        "worst_case": "",
                    },
                )
                group["cases"] += 1
                group["failed"] += not check.get("ok", False)
                group["unsupported"] += "unsupported" in check
                group["identical"] += bool(check.get("identical"))
                error = check.get("max_rel")
                if isinstance(error, str):
                    error = float("inf")
                if error is not None and (group["worst"] is None or error > group["worst"]):
                    group["worst"], group["worst_case"] = error, case["name"]
    return dict(sorted(groups.items(), key=lambda item: check_order(*item[0])))


def check_order(section_name, op, label, dtype):
    """Table order: by section, op; the CPU comparisons, then NumPy, then PyTorch."""
    rank = 0 if label.endswith("vs CPU") else 1 if label.startswith("NumPy") else 2
    return (SECTIONS.index(section_name), op, rank, label, dtype)


GRID_NAMES = frozenset(case.name for case in grid_cases())


def render_markdown(report):
    meta = report["meta"]
    lines = ["# tiinterp GPU check", ""]
    versions_text = ", ".join(
        f"{k} {v}" for k, v in meta["versions"].items() if k != "taichi_loaded_from"
    )
    lines += [
        f"- arch `{meta['arch']}`{' (quick)' if meta['quick'] else ''}, device: "
        f"{meta.get('device_name', 'CPU')}; {meta['date']}; {meta['seconds']} s in all",
        f"- {versions_text}",
        f"- result: **{'PASSED' if report['summary']['passed'] else 'FAILED'}**"
        + (
            f" (sections: {', '.join(report['summary']['failed_sections'])})"
            if report["summary"]["failed_sections"]
            else ""
        ),
        "",
        "## Sections",
        "",
        "| section | status | passed | seconds (limit) | problems |",
        "|---|---|---|---|---|",
    ]
    for name, record in report["sections"].items():
        status = record["status"] + (f" ({record['note']})" if "note" in record else "")
        lines.append(
            f"| {name} | {status} | {'yes' if record['passed'] else '**no**'} | "
            f"{record['seconds']} ({record['limit_s']:.0f}) | {len(record['failures'])} |"
        )
    lines += render_correctness(report)
    lines += render_threads(report)
    lines += render_determinism(report)
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


def render_correctness(report):
    groups = correctness_rows(report)
    if not groups:
        return []
    lines = [
        "",
        "## Correctness",
        "",
        "Relative error: max|a - b| / max|b| (grid_sample: / max(1, max|b|)). Tolerances: "
        + ", ".join(f"{k} {number(v, 2)}" for k, v in report["meta"]["tolerances"].items())
        + ". 'X vs CPU': tiinterp on the device arch with Taichi ndarrays against the same "
        "kernels on the CPU; 'NumPy X vs ndarray': NumPy arrays against Taichi ndarrays, both "
        "on the device arch; 'PyTorch X': tiinterp (ndarrays) against PyTorch, both on the "
        "device; torch_bridge: tiinterp.torch on device tensors against tiinterp (ndarrays). "
        "X: forward, adjoint (method='adjoint'), autodiff (method='autodiff'); grid_sample's "
        "gradients: X_input, X_grid.",
        "",
        "| section | op | check | dtype | cases | failed | bit-identical | worst rel. error "
        "| worst case |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (section_name, op, label, dtype), group in groups.items():
        lacking = "not in PyTorch" if label.startswith("PyTorch") else "not on this arch"
        note = f" ({group['unsupported']} {lacking})" if group["unsupported"] else ""
        lines.append(
            f"| {section_name} | {op} | {label} | {dtype} | {group['cases']}{note} | "
            f"{group['failed'] or 0} | {group['identical']} | {number(group['worst'], 2)} | "
            f"{group['worst_case'] if group['worst'] else '-'} |"
        )
    not_in_pytorch = sorted(
        {
            case["name"].rsplit("/", 1)[0]
            for section_name in ("resize", "grid_sample")
            for case in report["sections"].get(section_name, {}).get("data", {}).get("cases", [])
            if any(
                "unsupported" in check
                for label, check in case["checks"].items()
                if label.startswith("PyTorch")
            )
        }
    )
    if not_in_pytorch:
        lines += [
            "",
            "Not compared (PyTorch on this device lacks them): " + ", ".join(not_in_pytorch),
        ]
    return lines


def render_threads(report):
    data = report["sections"].get("threads", {}).get("data", {})
    if not data.get("cases"):
        return []
    lines = [
        "",
        "## Threads",
        "",
        f"torch {data.get('torch')}, tiinterp.torch registration {data.get('registration')}. "
        "Each call from a thread that did not start Taichi, of a signature new to the process, "
        "against the same call in the main thread (bit for bit).",
        "",
        "| case | check | identical | thread had a CUDA context before |",
        "|---|---|---|---|",
    ]
    for case in data["cases"]:
        for label, check in case["checks"].items():
            outcome = "yes" if check.get("identical") else f"**no** {check.get('error', '')}"
            before = check.get("context_before")
            context = "-" if before is None else "yes" if before else "no"
            lines.append(f"| {case['name']} | {label} | {outcome} | {context} |")
    return lines


def render_determinism(report):
    entries = []
    for name in ("determinism", "torch_bridge"):
        data = report["sections"].get(name, {}).get("data", {})
        entries += data.get("entries", []) + data.get("determinism", [])
    if not entries:
        return []
    lines = [
        "",
        "## Determinism",
        "",
        f"Each backward run {RUNS} times on the same data; spread: max |run - first run|.",
        "",
        "| what | bit-identical | max spread | max abs value | must be identical |",
        "|---|---|---|---|---|",
    ]
    for entry in entries:
        if "error" in entry:
            lines.append(f"| {entry['what']} | error: {entry['error']} | - | - | - |")
            continue
        if "unsupported" in entry:
            lines.append(f"| {entry['what']} | not run: {entry['unsupported']} | - | - | - |")
            continue
        lines.append(
            f"| {entry['what']} | {'yes' if entry['identical'] else '**no**'} | "
            f"{number(entry['max_spread'], 2)} | {number(entry['max_abs_value'], 3)} | "
            f"{'yes' if entry['required'] else 'no'} |"
        )
    return lines


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
        lines.append(
            f"Taichi's default device memory (`tiinterp.init` without `device_memory_GB`): "
            f"{outcome}; exit status {probe['returncode']}"
            + (
                "."
                if probe["returncode"] == 0
                else f", ending: `{probe['output_tail'][-300:].replace(chr(10), ' | ')}`."
            )
            + (
                f" This check passes device_memory_GB per section: {POOL_GB}."
                if report["meta"]["arch"] == "cuda"
                else ""
            )
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
        label = f"{row['workload']} {tuple(row.get('shape', ()))}->{tuple(row.get('size', ()))}"
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
        label = f"{row['workload']} {tuple(row.get('shape', ()))}->{tuple(row.get('size', ()))}"
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
    parser.add_argument(
        "--arch",
        choices=("cuda", "vulkan", "cpu"),
        default="cuda",
        help="the device arch (vulkan, cpu: stand in for the GPU, to test this script)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small benchmark shapes and fewer grid_sample cases: a test of this script",
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "out"), help="result folder")
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="run only these sections (in the standard order)",
    )
    parser.add_argument(
        "--budget-scale",
        type=float,
        default=float(os.environ.get("GPU_CHECK_BUDGET_SCALE", "1")),
        help="multiply every section's time limit (a slow machine)",
    )
    # Internal: one section in a child process.
    parser.add_argument("--section", choices=SECTIONS, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--skip-bridge", action="store_true", help=argparse.SUPPRESS)
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
