"""Stress checks too big or too slow for CI: `make stress` (about 10-15 minutes, ~20 GiB RAM).

CI runs thousands of small cases; this script runs what they cannot:

1. Near 2^31 elements (cpu, float32): forwards whose output has just under 2^31 elements
   through each CPU kernel path (fused 2-D resample, 2-D gather, last axis only, middle
   axis only) and one adjoint whose result is that large. Rows at the start, middle and
   end are compared with a float64 reference built from the formulas (coordinates rounded
   in float32 where PyTorch rounds them, weights and sums in float64), and the whole output
   is scanned for unwritten (zero), non-finite or out-of-range values. Then shapes of
   exactly 2^31 elements, and an absurd lanczos5 size on an empty batch, must be refused
   with a ValueError in under a second.
2. `method="autodiff"` where outputs x taps pass 2^31 (lanczos5, 14000 x 16000 -> 8000
   wide), against the hand-written adjoint.
3. Memory flatness: 10,000 mixed small calls (every resize mode, with and without
   antialias, forward and backward, grid_sample and its backward); the resident set size
   must not grow by more than 50 MiB between call 1,000 and call 10,000.
4. Threads: 8 threads x 200 mixed calls on cpu and then on vulkan, while another thread
   calls `tiinterp.init(arch)` again; every result must be bit-identical to the same call
   made single-threaded beforehand.
5. Cold cache: in fresh processes with an empty Taichi offline cache, 6 threads each call
   `interpolate` with a different mode right after `tiinterp.init("cpu")`.
6. grid_sample on Taichi ndarrays, which the kernels index unflattened: a forward with a
   grid of 2,147,352,578 elements (rows at the start, middle and end against the NumPy path,
   the whole output scanned for values outside the input's range) and a backward with a
   grid of 2^30 elements (grad_grid rows and the whole grad_input against the NumPy path).
7. The torch bridge: ``tiinterp.torch.interpolate`` (a custom op) with an output of just
   under 2^31 elements, and its backward through ``torch.autograd.grad`` (the backward op),
   rows against the float64 reference of section 1.
8. Taichi pipelines: ``interpolate_into`` from a small ``ti.Vector.field`` of 2-vectors into
   one of 2,147,287,044 floats (rows against the float64 reference, the whole field scanned
   for unwritten or non-finite values), and inside ``ti.ad.Tape`` the adjoint of ``area``
   into a vector field of 1,073,709,056 floats (rows against the reference, each
   component's sum against the number of outputs).
9. Forked workers (Note [Taichi after fork]): after the parent has called tiinterp, a fork
   pool of 4 workers x 64 mixed calls (every mode, forward and backward, grid_sample, a
   16 MB image among them), 10 forks while 4 threads of the parent keep calling, and a
   grandchild forked by a child that has restarted its runtime: every result bit-identical
   to the parent's, every worker within its deadline (on taichi-forge, each forked call
   must be the RuntimeError that names spawn and forkserver instead).

On taichi-forge (`make TAICHI=taichi_forge stress`), whose kernels take no array of 2^31
bytes or more, the cases of sections 1, 6, 7 and 8 that pass that size must be refused instead,
with a ValueError, at once.

Each section prints its figures as it goes; the report is also written as JSON to
benchmarks/out/stress.json. The exit status is 1 if any check failed. A case the machine
has no memory for is reported as skipped. `--quick` runs everything at small sizes (no case
near 2^31) for development; `--sections 1,3` runs a subset.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "2")

import argparse
import gc
import json
import math
import pathlib
import platform
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from functools import partial

import numpy as np

import tiinterp
from tiinterp import _filters, _validate

ti = tiinterp.taichi_module()  # taichi or taichi_forge, whichever tiinterp runs on

HERE = pathlib.Path(__file__).resolve().parent
OUT_DIR = HERE / "out"
GIB = 2**30
MIB = 2**20
LIMIT = 2**31
# Forward rows and adjoint rows must match the float64 reference to this, relative to the
# largest reference value in the row.
ROW_RTOL = 1e-5
AUTODIFF_RTOL = 1e-5
REFUSAL_SECONDS = 1.0
RSS_GROWTH_LIMIT_MIB = 50
# Besides a case's arrays: the reference rows, tiinterp's scratch lines and the rest of
# the process.
MEMORY_MARGIN = 2 * GIB
QUICK_DIVISOR = 8


def say(message=""):
    print(message, flush=True)


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# --- memory --------------------------------------------------------------------------------


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_mib() -> float:
    return _status_kib("VmRSS") / 1024


def reset_peak_rss() -> None:
    """Restart VmHWM from the current RSS (Linux: clear_refs "5")."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def peak_rss_gib() -> float:
    return _status_kib("VmHWM") / 1024 / 1024


def available_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def release() -> None:
    gc.collect()


# --- section 1 reference: per-axis tap tables from the formulas ------------------------------


def _f32(value):
    return np.float32(value)


def _keys(x, a=-0.75):
    x = np.abs(x)
    inner = ((a + 2) * x - (a + 3)) * x * x + 1
    outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, inner, np.where(x < 2, outer, 0.0))


def _lanczos(x, radius):
    return np.where(np.abs(x) < radius, np.sinc(x) * np.sinc(x / radius), 0.0)


def _half_pixel_source_f32(n_in, n_out):
    """PyTorch's float32 source coordinate for float32 data on x86-64 (AVX2 builds):
    ``fma(scale, dst + 0.5, -0.5)`` with ``scale = float32(in) / float32(out)``, one
    rounding (the float32 product is exact in float64)."""
    scale = np.float64(_f32(n_in) / _f32(n_out))
    dst = np.arange(n_out, dtype=np.float32) + _f32(0.5)
    return (scale * dst.astype(np.float64) - 0.5).astype(np.float32)


def _nearest_taps(n_in, n_out):
    dst = np.arange(n_out)
    if n_out == n_in:
        index = dst
    elif n_out == 2 * n_in:
        index = dst // 2
    elif n_out <= 128:
        position = dst.astype(np.float32) * (_f32(n_in) / _f32(n_out))
        index = np.floor(position).astype(np.int64)
    else:
        position = (dst * (n_in / n_out)).astype(np.float32)
        index = np.floor(position).astype(np.int64)
    return np.minimum(index, n_in - 1)[:, None], np.ones((n_out, 1))


def _bilinear_taps(n_in, n_out):
    src = np.maximum(_half_pixel_source_f32(n_in, n_out), _f32(0))
    base = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    frac = np.clip(src - base.astype(np.float32), 0, 1).astype(np.float64)
    index = np.stack([base, np.minimum(base + 1, n_in - 1)], axis=1)
    return index, np.stack([1 - frac, frac], axis=1)


def _bicubic_taps(n_in, n_out):
    src = _half_pixel_source_f32(n_in, n_out)
    base = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    frac = np.clip(src - base.astype(np.float32), 0, 1).astype(np.float64)
    offsets = np.arange(-1, 3)
    index = np.clip(base[:, None] + offsets, 0, n_in - 1)
    return index, _keys(frac[:, None] - offsets)


def _lanczos_taps(n_in, n_out, radius):
    src = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
    base = np.floor(src).astype(np.int64)
    taps = base[:, None] + np.arange(1 - radius, radius + 1)
    weight = np.where((taps >= 0) & (taps < n_in), _lanczos(taps - src[:, None], radius), 0.0)
    return np.clip(taps, 0, n_in - 1), weight / weight.sum(axis=1, keepdims=True)


def _area_taps(n_in, n_out):
    dst = np.arange(n_out)
    start = dst * n_in // n_out
    end = -((-(dst + 1) * n_in) // n_out)
    width = int((end - start).max())
    offsets = np.arange(width)
    used = offsets < (end - start)[:, None]
    index = np.where(used, start[:, None] + offsets, start[:, None])
    return index, np.where(used, 1.0 / (end - start)[:, None], 0.0)


REFERENCE_TAPS = {
    "nearest": _nearest_taps,
    "bilinear": _bilinear_taps,
    "bicubic": _bicubic_taps,
    "lanczos3": partial(_lanczos_taps, radius=3),
    "area": _area_taps,
}


def reference_axes(in_hw, out_hw, mode):
    """(index, weight) per trailing axis: ``out[o] = sum_k weight[o, k] * in[index[o, k]]``."""
    return tuple(
        REFERENCE_TAPS[mode](n_in, n_out) for n_in, n_out in zip(in_hw, out_hw, strict=True)
    )


def forward_row(x3, plane, row, axes):
    """Row ``row`` of plane ``plane`` of the forward of ``x3`` (planes, H, W), in float64."""
    (row_index, row_weight), (col_index, col_weight) = axes
    line = row_weight[row] @ x3[plane, row_index[row], :].astype(np.float64)
    return (line[col_index] * col_weight).sum(axis=1)


def adjoint_row(g3, plane, row, axes, in_width):
    """Row ``row`` of plane ``plane`` of the adjoint applied to ``g3`` (planes, H_out, W_out)."""
    (row_index, row_weight), (col_index, col_weight) = axes
    outs, taps = np.nonzero((row_index == row) & (row_weight != 0))
    line = row_weight[outs, taps] @ g3[plane, outs, :].astype(np.float64)
    return np.bincount(
        col_index.ravel(), weights=(col_weight * line[:, None]).ravel(), minlength=in_width
    )


def row_error(got, want) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


# --- section 1: near 2^31 elements -----------------------------------------------------------


@dataclass(frozen=True)
class BigCase:
    """A forward ``in_shape -> size``, or (``adjoint``) the adjoint of that forward, whose
    result has ``in_shape``."""

    name: str
    mode: str
    in_shape: tuple
    size: tuple
    adjoint: bool = False

    @property
    def out_shape(self):
        return self.in_shape[:2] + self.size

    @property
    def source_shape(self):
        return self.out_shape if self.adjoint else self.in_shape

    @property
    def result_shape(self):
        return self.in_shape if self.adjoint else self.out_shape

    def scaled(self, divisor):
        shrink = lambda dims: tuple(max(1, d // divisor) for d in dims)  # noqa: E731
        return BigCase(
            self.name,
            self.mode,
            self.in_shape[:2] + shrink(self.in_shape[2:]),
            shrink(self.size),
            self.adjoint,
        )


BIG_CASES = (
    BigCase("bilinear, fused 2-D kernel", "bilinear", (1, 2, 12000, 16000), (32767, 32767)),
    BigCase("nearest, 2-D gather", "nearest", (1, 1, 20000, 30000), (46340, 46340)),
    BigCase("bicubic, last axis only", "bicubic", (1, 1, 32767, 16384), (32767, 65536)),
    BigCase("lanczos3, middle axis only", "lanczos3", (1, 2, 8192, 32767), (32768, 32767)),
    BigCase(
        "area adjoint, fused 2-D kernel", "area", (1, 1, 46340, 46340), (20000, 20000), adjoint=True
    ),
)


def fill_uniform(rng, array, low=1.0, chunk=2**26):
    """Fill in place with uniform values in [low, low + 1), a chunk at a time."""
    flat = array.reshape(-1)
    for begin in range(0, flat.size, chunk):
        part = flat[begin : begin + chunk]
        rng.random(out=part, dtype=np.float32)
        part += np.float32(low)


def scan_range(array, low=0.0, high=3.0, chunk=2**26):
    """The first chunk of ``array`` holding a value outside (low, high) or non-finite (an
    unwritten output reads 0), as a message, else None."""
    flat = array.reshape(-1)
    for begin in range(0, flat.size, chunk):
        part = flat[begin : begin + chunk]
        lo, hi = float(part.min()), float(part.max())
        if not (low < lo and hi < high):
            bad = np.flatnonzero(~((part > low) & (part < high)))
            first = begin + int(bad[0])
            return (
                f"{bad.size} values outside ({low}, {high}) in flat elements "
                f"{begin}..{begin + part.size - 1}, first at {first} = {flat[first]!r}"
            )
    return None


def checked_rows(shape3):
    """(plane, row) pairs: the first two, the one holding the middle element, the last two."""
    planes, height, width = shape3
    middle = divmod(planes * height * width // 2 // width, height)
    return sorted(
        {
            (0, 0),
            (0, min(1, height - 1)),
            middle,
            (planes - 1, max(height - 2, 0)),
            (planes - 1, height - 1),
        }
    )


def as_planes(array):
    return array.reshape(-1, *array.shape[-2:])


def check_rows(case, source, result):
    axes = reference_axes(case.in_shape[2:], case.size, case.mode)
    source3, result3 = as_planes(source), as_planes(result)
    errors = {}
    for plane, row in checked_rows(result3.shape):
        if case.adjoint:
            want = adjoint_row(source3, plane, row, axes, result3.shape[2])
        else:
            want = forward_row(source3, plane, row, axes)
        errors[f"{plane},{row}"] = row_error(result3[plane, row], want)
    return errors


def run_big_case(case, rng):
    elements = math.prod(case.result_shape)
    record = {
        "case": case.name,
        "mode": case.mode,
        "adjoint": case.adjoint,
        "input_shape": case.in_shape,
        "size": case.size,
        "result_elements": elements,
        "result_fraction_of_2^31": elements / LIMIT,
    }
    needed = 4 * (math.prod(case.source_shape) + elements)
    available = available_bytes()
    record["needed_gib"] = needed / GIB
    if needed + MEMORY_MARGIN > available:
        record.update(
            status="skipped",
            reason=f"needs {needed / GIB:.1f} GiB + "
            f"{MEMORY_MARGIN / GIB:.0f} GiB margin, {available / GIB:.1f} GiB available",
        )
        return record
    source = result = None
    try:
        source = np.empty(case.source_shape, np.float32)
        fill_uniform(rng, source)
        reset_peak_rss()
        start = time.perf_counter()
        if case.adjoint:
            result = tiinterp.interpolate_backward(source, case.in_shape, mode=case.mode)
        else:
            result = tiinterp.interpolate(source, size=case.size, mode=case.mode)
        record["seconds"] = time.perf_counter() - start
        record["peak_rss_gib"] = peak_rss_gib()
        record["row_errors"] = check_rows(case, source, result)
        record["max_row_error"] = max(record["row_errors"].values())
        record["range_problem"] = scan_range(result)
    except MemoryError as error:
        record.update(status="skipped", reason=f"MemoryError: {error}")
        return record
    except Exception as error:
        record.update(
            status="fail", error=error_text(error), traceback=traceback.format_exc(limit=-4)
        )
        return record
    finally:
        del source, result
        release()
    problems = []
    if not record["max_row_error"] <= ROW_RTOL:
        problems.append(f"row error {record['max_row_error']:.3g} > {ROW_RTOL:g}")
    if record["range_problem"]:
        problems.append(record["range_problem"])
    record["status"] = "fail" if problems else "pass"
    if problems:
        record["error"] = "; ".join(problems)
    return record


REFUSALS = (
    (
        "output of exactly 2^31 elements",
        lambda: tiinterp.interpolate(
            np.zeros((1, 1, 2, 2), np.float32), size=(32768, 65536), mode="bilinear"
        ),
    ),
    (
        "adjoint result of exactly 2^31 elements",
        lambda: tiinterp.interpolate_backward(
            np.zeros((1, 1, 2, 2), np.float32), (1, 1, 32768, 65536), mode="bilinear"
        ),
    ),
    (
        "input of exactly 2^31 elements (untouched zero pages)",
        lambda: tiinterp.interpolate(
            np.zeros((1, 1, 32768, 65536), np.float32), size=(2, 2), mode="bilinear"
        ),
    ),
    (
        "empty batch, lanczos5 to 30,000,000^2",
        lambda: tiinterp.interpolate(
            np.zeros((0, 3, 8, 8), np.float32), size=(30_000_000, 30_000_000), mode="lanczos5"
        ),
    ),
)


def past_array_bytes(case) -> bool:
    """Whether a float32 array of the case passes taichi-forge's 2^31-byte limit (taichi
    1.7.4 has none: always False there)."""
    largest = max(math.prod(case.source_shape), math.prod(case.result_shape))
    return _validate.MAX_BYTES is not None and 4 * largest > _validate.MAX_BYTES


def refused_on_forge(name, call):
    """A section's check on taichi-forge, whose kernels take no array of 2^31 bytes: the
    call must be refused with a ValueError, at once."""
    record = run_refusal(name, call)
    say(
        f"  refuse {name} on taichi-forge (arrays of 2^31 bytes): {record['outcome']} in "
        f"{record['seconds'] * 1e3:.1f} ms  {record['status'].upper()}"
    )
    failures = [f"{name}: {record['outcome']} ({record['message']})"]
    return {"refusal": record}, failures if record["status"] == "fail" else []


def big_call(case, source):
    if case.adjoint:
        return tiinterp.interpolate_backward(source, case.in_shape, mode=case.mode)
    return tiinterp.interpolate(source, size=case.size, mode=case.mode)


def run_refusal(name, call):
    start = time.perf_counter()
    try:
        call()
        outcome, message = "no error", ""
    except ValueError as error:
        outcome, message = "ValueError", str(error)
    except Exception as error:
        outcome, message = type(error).__name__, str(error)
    seconds = time.perf_counter() - start
    ok = outcome == "ValueError" and seconds < REFUSAL_SECONDS
    return {
        "case": name,
        "outcome": outcome,
        "message": message[:300],
        "seconds": seconds,
        "status": "pass" if ok else "fail",
    }


def reference_self_check(rng):
    """The reference tables against PyTorch (where it has the mode) or tiinterp at a small
    size: a failure here is the harness's, not tiinterp's."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        torch = None
    x = rng.random((1, 2, 150, 170), dtype=np.float32) + np.float32(1)
    errors = {}
    for mode, size in (
        ("nearest", (301, 257)),
        ("bilinear", (301, 257)),
        ("bicubic", (131, 400)),
        ("lanczos3", (301, 97)),
        ("area", (61, 97)),
    ):
        if torch is not None and mode != "lanczos3":
            want = F.interpolate(torch.from_numpy(x), size=size, mode=mode).numpy()
        else:
            want = tiinterp.interpolate(x, size=size, mode=mode)
        axes = reference_axes(x.shape[2:], size, mode)
        errors[mode] = max(
            row_error(want[0, p, r], forward_row(x[0], p, r, axes))
            for p in range(2)
            for r in range(size[0])
        )
    g = rng.random((1, 2, 61, 97), dtype=np.float32)
    if torch is not None:
        xt = torch.from_numpy(x).requires_grad_(True)
        F.interpolate(xt, size=(61, 97), mode="area").backward(torch.from_numpy(g))
        want = xt.grad.numpy()
    else:
        want = tiinterp.interpolate_backward(g, x.shape, mode="area")
    axes = reference_axes(x.shape[2:], (61, 97), "area")
    errors["area adjoint"] = max(
        row_error(want[0, p, r], adjoint_row(g[0], p, r, axes, 170))
        for p in range(2)
        for r in range(150)
    )
    return {
        "against": "torch" if torch is not None else "tiinterp",
        "errors": errors,
        "status": "pass" if max(errors.values()) <= ROW_RTOL else "fail",
    }


def describe_big(record):
    head = (
        f"  {record['case']:<32} {record['input_shape']} -> {record['size']}"
        f"{' (adjoint)' if record['adjoint'] else ''}: {record['result_elements']:,} el"
    )
    if record["status"] == "skipped":
        return f"{head}  SKIPPED ({record['reason']})"
    if "max_row_error" not in record:
        return f"{head}  FAIL {record['error']}"
    return (
        f"{head}  {record['seconds']:.1f} s  peak RSS {record['peak_rss_gib']:.1f} GiB  "
        f"max row error {record['max_row_error']:.2g}  {record['status'].upper()}"
        + (f" ({record['error']})" if record["status"] == "fail" else "")
    )


def section_big(args, rng):
    tiinterp.init("cpu")
    out = {"self_check": reference_self_check(rng), "cases": [], "refusals": []}
    check = out["self_check"]
    say(
        f"  reference self-check against {check['against']}: "
        + ", ".join(f"{mode} {err:.2g}" for mode, err in check["errors"].items())
        + f"  {check['status'].upper()}"
    )
    for case in BIG_CASES:
        if args.quick:
            case = case.scaled(QUICK_DIVISOR)
        if past_array_bytes(case):
            # taichi-forge launches no array of 2 GiB or more: the case must be refused.
            # np.zeros: pages the refusal never touches.
            source = np.zeros(case.source_shape, np.float32)
            record = run_refusal(f"{case.name} on taichi-forge", partial(big_call, case, source))
            del source
            out["refusals"].append(record)
            say(
                f"  refuse {case.name} ({_validate.MAX_BYTES + 1} bytes or more per array on "
                f"taichi-forge): {record['outcome']} in {record['seconds'] * 1e3:.1f} ms  "
                f"{record['status'].upper()}"
            )
            continue
        record = run_big_case(case, rng)
        out["cases"].append(record)
        say(describe_big(record))
    for name, call in REFUSALS:
        record = run_refusal(name, call)
        out["refusals"].append(record)
        say(
            f"  refuse {name}: {record['outcome']} in {record['seconds'] * 1e3:.1f} ms  "
            f"{record['status'].upper()}"
        )
    failures = [f"self-check: {check['errors']}"] if check["status"] == "fail" else []
    failures += [f"{r['case']}: {r['error']}" for r in out["cases"] if r["status"] == "fail"]
    failures += [
        f"refuse {r['case']}: {r['outcome']} in {r['seconds']:.3f} s ({r['message']})"
        for r in out["refusals"]
        if r["status"] == "fail"
    ]
    out["skipped"] = [
        f"{r['case']}: {r['reason']}" for r in out["cases"] if r["status"] == "skipped"
    ]
    return out, failures


# --- section 2: autodiff past 2^31 outputs x taps ---------------------------------------------


def section_autodiff(args, rng):
    in_shape, g_shape = (1, 1, 14000, 8000), (1, 1, 14000, 16000)
    if args.quick:
        in_shape, g_shape = (1, 1, 1400, 800), (1, 1, 1400, 1600)
    taps = 10
    out = {
        "input_shape": in_shape,
        "grad_output_shape": g_shape,
        "outputs_x_taps": math.prod(g_shape) * taps,
    }
    tiinterp.init("cpu")
    g = rng.standard_normal(g_shape, dtype=np.float32)
    reset_peak_rss()
    try:
        start = time.perf_counter()
        autodiff = tiinterp.interpolate_backward(g, in_shape, mode="lanczos5", method="autodiff")
        out["autodiff_seconds"] = time.perf_counter() - start
        out["peak_rss_gib"] = peak_rss_gib()
        start = time.perf_counter()
        adjoint = tiinterp.interpolate_backward(g, in_shape, mode="lanczos5")
        out["adjoint_seconds"] = time.perf_counter() - start
    except MemoryError as error:
        out["skipped"] = [f"MemoryError: {error}"]
        return out, []
    except Exception as error:
        out["error"] = error_text(error)
        out["traceback"] = traceback.format_exc(limit=-4)
        return out, [f"autodiff: {out['error']}"]
    del g
    scale = float(np.max(np.abs(adjoint)))
    height = in_shape[2]
    crossing = min(height - 1, (LIMIT - 1) // taps // g_shape[3])
    rows = sorted({0, crossing, height // 2, height - 1})
    out["row_errors"] = {
        str(r): row_error(autodiff[0, 0, r], adjoint[0, 0, r].astype(np.float64)) for r in rows
    }
    out["max_error_all_rows"] = float(np.max(np.abs(autodiff - adjoint))) / scale
    out["nonzero_fraction"] = float(np.count_nonzero(autodiff)) / autodiff.size
    zero_rows = np.flatnonzero(~autodiff.reshape(height, -1).any(axis=1))
    out["all_zero_rows"] = int(zero_rows.size)
    failures = []
    if out["nonzero_fraction"] == 0:
        failures.append("autodiff result is all zero")
    elif zero_rows.size:
        failures.append(f"{zero_rows.size} all-zero rows, the first {int(zero_rows[0])}")
    if not out["max_error_all_rows"] <= AUTODIFF_RTOL:
        worst = int(np.argmax(np.max(np.abs(autodiff - adjoint), axis=-1).reshape(-1)))
        failures.append(
            f"autodiff vs adjoint: error {out['max_error_all_rows']:.3g} relative "
            f"to max |adjoint| > {AUTODIFF_RTOL:g} (worst row {worst})"
        )
    say(
        f"  autodiff {in_shape} <- {g_shape} lanczos5, {out['outputs_x_taps']:,} outputs x taps: "
        f"{out['autodiff_seconds']:.1f} s (adjoint {out['adjoint_seconds']:.2f} s)  peak RSS "
        f"{out['peak_rss_gib']:.1f} GiB  rows {rows} errors "
        + ", ".join(f"{e:.2g}" for e in out["row_errors"].values())
        + f"  all rows {out['max_error_all_rows']:.2g}  nonzero {out['nonzero_fraction']:.3f}  "
        + ("FAIL" if failures else "PASS")
    )
    del autodiff, adjoint
    release()
    return out, failures


# --- mixed small calls (sections 3 and 4) ----------------------------------------------------

RESIZE_MODES = (
    ("nearest", False),
    ("nearest-exact", False),
    ("area", False),
    ("bilinear", False),
    ("bilinear", True),
    ("bicubic", False),
    ("bicubic", True),
    ("lanczos3", False),
    ("lanczos3", True),
)
GRID_MODES = (
    ("nearest", "zeros"),
    ("bilinear", "border"),
    ("bicubic", "reflection"),
    ("bilinear", "zeros"),
    ("nearest", "reflection"),
    ("bicubic", "border"),
)


@dataclass
class Call:
    label: str
    function: object
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def __call__(self):
        return self.function(*self.args, **self.kwargs)


def resize_calls(rng, in_shape, size, modes, dtype=np.float32):
    x = rng.random(in_shape).astype(dtype)
    g = rng.standard_normal(in_shape[:2] + tuple(size)).astype(dtype)
    calls = []
    for mode, antialias in modes:
        tag = f"{mode}{' aa' if antialias else ''} {in_shape}->{tuple(size)} {np.dtype(dtype).name}"
        options = {"mode": mode, "antialias": antialias}
        calls.append(
            Call(f"interpolate {tag}", tiinterp.interpolate, (x,), dict(options, size=tuple(size)))
        )
        calls.append(
            Call(
                f"interpolate_backward {tag}", tiinterp.interpolate_backward, (g, in_shape), options
            )
        )
    return calls


def grid_calls(rng, in_shape, grid_hw, modes, dtype=np.float32):
    x = rng.random(in_shape).astype(dtype)
    grid = rng.uniform(-1.2, 1.2, (in_shape[0],) + tuple(grid_hw) + (2,)).astype(dtype)
    g = rng.standard_normal(in_shape[:2] + tuple(grid_hw)).astype(dtype)
    calls = []
    for mode, padding in modes:
        tag = f"{mode} {padding} {in_shape} grid {tuple(grid_hw)} {np.dtype(dtype).name}"
        options = {"mode": mode, "padding_mode": padding, "align_corners": padding == "border"}
        calls.append(Call(f"grid_sample {tag}", tiinterp.grid_sample, (x, grid), options))
        calls.append(
            Call(
                f"grid_sample_backward {tag}", tiinterp.grid_sample_backward, (g, x, grid), options
            )
        )
    return calls


def flatness_calls(rng):
    return (
        resize_calls(rng, (2, 3, 17, 19), (23, 11), RESIZE_MODES)
        + resize_calls(rng, (1, 2, 9, 40), (30, 13), RESIZE_MODES, np.float64)
        + grid_calls(rng, (2, 3, 17, 19), (7, 5), GRID_MODES)
        + grid_calls(rng, (1, 2, 12, 9), (4, 11), GRID_MODES[:3], np.float64)
    )


def rotated(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def thread_calls(t, rng):
    """Thread ``t``'s own mix: its own shapes, mode order and (thread 7) float64."""
    dtype = np.float64 if t == 7 else np.float32
    in_shape = (1 + t % 2, 1 + t % 3, 11 + 3 * t, 29 - 2 * t)
    size = (7 + 5 * t, 13 + 4 * t)
    calls = resize_calls(rng, in_shape, size, rotated(RESIZE_MODES, t)[:5], dtype)
    calls += grid_calls(rng, in_shape, (3 + t, 9 - t), rotated(GRID_MODES, t)[:2], dtype)
    if t % 2:
        calls += resize_calls(
            rng,
            (2, 2, 5 + t, 6, 7),
            (8, 4, 9 + t),
            (("trilinear", False), ("nearest", False)),
            dtype,
        )
    else:
        calls += resize_calls(
            rng, (2, 3, 31 + t), (17,), (("linear", True), ("area", False)), dtype
        )
    return calls


def results_equal(a, b) -> bool:
    if isinstance(a, tuple):
        return len(a) == len(b) and all(results_equal(x, y) for x, y in zip(a, b, strict=True))
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    bits = np.uint32 if a.dtype == np.float32 else np.uint64
    return np.array_equal(np.ascontiguousarray(a).view(bits), np.ascontiguousarray(b).view(bits))


# --- section 3: memory flatness --------------------------------------------------------------


def section_memory(args, rng):
    calls = flatness_calls(rng)
    total, warmup, every = (1000, 100, 100) if args.quick else (10_000, 500, 1000)
    tiinterp.init("cpu")
    order = rng.integers(len(calls), size=warmup + total)
    order[: len(calls)] = np.arange(len(calls))
    reset_peak_rss()
    try:
        for i in order[:warmup]:
            calls[i]()
        release()
        series = {0: rss_mib()}
        start = time.perf_counter()
        for n, i in enumerate(order[warmup:], 1):
            calls[i]()
            if n % every == 0:
                release()
                series[n] = rss_mib()
                say(f"    {n:>6} calls: RSS {series[n]:.1f} MiB")
        seconds = time.perf_counter() - start
    except Exception as error:
        return (
            {"error": error_text(error), "traceback": traceback.format_exc(limit=-4)},
            [f"memory flatness: {error_text(error)}"],
        )
    growth = series[total] - series[every]
    out = {
        "calls": total,
        "warmup_calls": warmup,
        "distinct_calls": len(calls),
        "rss_mib": series,
        "growth_mib": growth,
        "seconds": seconds,
        "calls_per_second": total / seconds,
        "peak_rss_gib": peak_rss_gib(),
    }
    failed = growth > RSS_GROWTH_LIMIT_MIB
    say(
        f"  {total:,} calls ({len(calls)} distinct) in {seconds:.1f} s ({total / seconds:.0f}/s): "
        f"RSS {series[every]:.1f} -> {series[total]:.1f} MiB (growth {growth:+.1f} MiB, limit "
        f"{RSS_GROWTH_LIMIT_MIB})  {'FAIL' if failed else 'PASS'}"
    )
    return out, ([f"RSS grew {growth:.1f} MiB from call {every} to {total}"] if failed else [])


# --- section 4: threads ----------------------------------------------------------------------


class ThreadRun:
    """Workers repeat their calls and compare each result with the single-threaded one,
    while one more thread re-initialises the arch at 25%, 50% and 75% of the calls."""

    def __init__(self, arch, workers, calls_each, rng):
        self.arch = arch
        self.calls_each = calls_each
        self.lists = [thread_calls(t, rng) for t in range(workers)]
        self.expected = [[call() for call in calls] for calls in self.lists]
        self.done = 0
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.mismatches, self.exceptions, self.init_seconds = [], [], []
        self.done_at_inits = []

    def worker(self, t, barrier):
        calls, expected = self.lists[t], self.expected[t]
        barrier.wait()
        for n in range(self.calls_each):
            k = (n * 7 + t) % len(calls)
            try:
                if not results_equal(calls[k](), expected[k]):
                    self.mismatches.append(f"thread {t} call {n}: {calls[k].label}")
            except Exception as error:
                self.exceptions.append(
                    f"thread {t} call {n}: {calls[k].label}: {error_text(error)}"
                )
            with self.lock:
                self.done += 1

    def reinit(self, barrier):
        total = self.calls_each * len(self.lists)
        barrier.wait()
        for fraction in (0.25, 0.5, 0.75):
            while self.done < fraction * total and not self.finished.is_set():
                time.sleep(0.001)
            if self.finished.is_set():
                break
            start = time.perf_counter()
            try:
                tiinterp.init(self.arch)
            except Exception as error:
                self.exceptions.append(f"init({self.arch!r}): {error_text(error)}")
            self.init_seconds.append(time.perf_counter() - start)
            self.done_at_inits.append(self.done)

    def run(self):
        barrier = threading.Barrier(len(self.lists) + 1)
        threads = [
            threading.Thread(target=self.worker, args=(t, barrier)) for t in range(len(self.lists))
        ]
        threads.append(threading.Thread(target=self.reinit, args=(barrier,)))
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads[:-1]:
            thread.join()
        seconds = time.perf_counter() - start
        self.finished.set()
        threads[-1].join()
        return seconds


def run_threads_on(arch, args, rng):
    if arch not in tiinterp.available_archs():
        return {"arch": arch, "skipped": f"arch {arch!r} not available"}, []
    workers, calls_each = 8, (20 if args.quick else 200)
    tiinterp.init(arch)
    reset_peak_rss()
    run = ThreadRun(arch, workers, calls_each, rng)
    seconds = run.run()
    total = workers * calls_each
    out = {
        "arch": arch,
        "threads": workers,
        "calls_per_thread": calls_each,
        "distinct_calls": sum(map(len, run.lists)),
        "seconds": seconds,
        "calls_per_second": total / seconds,
        "inits": len(run.init_seconds),
        "init_seconds": run.init_seconds,
        "calls_done_when_init_returned": run.done_at_inits,
        "mismatches": run.mismatches[:20],
        "mismatch_count": len(run.mismatches),
        "exceptions": run.exceptions[:20],
        "exception_count": len(run.exceptions),
        "peak_rss_gib": peak_rss_gib(),
    }
    failures = [f"{arch}: {m}" for m in run.mismatches[:20]]
    failures += [f"{arch}: {e}" for e in run.exceptions[:20]]
    overlapped = sum(done < total for done in run.done_at_inits)
    if overlapped < 3:
        failures.append(
            f"{arch}: only {overlapped} of 3 re-inits returned while calls were "
            "still running (the check did not happen as designed)"
        )
    say(
        f"  {arch}: {workers} threads x {calls_each} calls + re-init thread: {seconds:.1f} s "
        f"({total / seconds:.0f} calls/s), {len(run.init_seconds)} inits ("
        + ", ".join(
            f"{s:.2f} s at call {d}"
            for s, d in zip(run.init_seconds, run.done_at_inits, strict=True)
        )
        + "), "
        f"{len(run.mismatches)} mismatches, {len(run.exceptions)} exceptions  "
        + ("FAIL" if failures else "PASS")
    )
    for line in failures[:5]:
        say(f"    {line}")
    return out, failures


def section_threads(args, rng):
    out, failures = {}, []
    for arch in ("cpu", "vulkan"):
        try:
            out[arch], arch_failures = run_threads_on(arch, args, rng)
        except Exception as error:
            out[arch] = {"error": error_text(error), "traceback": traceback.format_exc(limit=-4)}
            arch_failures = [f"{arch}: {error_text(error)}"]
            say(f"  {arch}: FAIL {error_text(error)}")
        if "skipped" in out[arch]:
            say(f"  {arch}: SKIPPED ({out[arch]['skipped']})")
        failures += arch_failures
    tiinterp.init("cpu")
    out["skipped"] = [v["skipped"] for v in out.values() if isinstance(v, dict) and "skipped" in v]
    return out, failures


# --- section 5: cold cache, many threads -----------------------------------------------------

COLD_CACHE = r"""
import json, threading, time, traceback
import numpy as np
import tiinterp
from tiinterp import _validate

MODES = ("nearest", "nearest-exact", "area", "bilinear", "bicubic", "lanczos3")
x = np.random.default_rng(5).random((2, 3, 33, 29), dtype=np.float32)
tiinterp.init("cpu")
barrier = threading.Barrier(len(MODES))
results, outputs = {}, {}

def work(mode):
    barrier.wait()
    start = time.perf_counter()
    try:
        outputs[mode] = tiinterp.interpolate(x, size=(41, 17), mode=mode)
        results[mode] = {"ok": True}
    except BaseException as error:
        results[mode] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:500],
                         "traceback": traceback.format_exc()[-1500:]}
    results[mode]["seconds"] = time.perf_counter() - start

threads = [threading.Thread(target=work, args=(m,)) for m in MODES]
for t in threads:
    t.start()
for t in threads:
    t.join()
for mode, y in outputs.items():
    again = tiinterp.interpolate(x, size=(41, 17), mode=mode)
    results[mode]["same_as_serial"] = bool(np.array_equal(y.view(np.uint32), again.view(np.uint32)))
print("STRESS-RESULT " + json.dumps(results))
"""


def cold_cache_run():
    with tempfile.TemporaryDirectory(prefix="tiinterp-stress-cache-") as cache:
        env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", COLD_CACHE], env=env, capture_output=True, text=True, timeout=600
        )
        seconds = time.perf_counter() - start
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("STRESS-RESULT ")]
    run = {"seconds": seconds, "returncode": done.returncode}
    if done.returncode != 0 or not lines:
        run["error"] = f"exit status {done.returncode}"
        run["stderr_tail"] = done.stderr[-3000:]
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return run, [f"cold cache process: exit status {done.returncode}: {last}"]
    run["modes"] = json.loads(lines[-1].split(" ", 1)[1])
    failures = [
        f"cold cache, {mode}: {r['error']}" for mode, r in run["modes"].items() if not r["ok"]
    ]
    failures += [
        f"cold cache, {mode}: threaded result differs from a serial call"
        for mode, r in run["modes"].items()
        if r["ok"] and not r["same_as_serial"]
    ]
    return run, failures


def section_cold_cache(args, rng):
    repeats = 1 if args.quick else 3
    runs, failures = [], []
    for i in range(repeats):
        try:
            run, run_failures = cold_cache_run()
        except subprocess.TimeoutExpired:
            run, run_failures = {"error": "timed out"}, ["cold cache process timed out (600 s)"]
        runs.append(run)
        failures += run_failures
        modes = run.get("modes", {})
        say(
            f"  run {i + 1}: fresh cache, 6 threads x 1 mode: {run.get('seconds', 0):.1f} s "
            f"process, {sum(r['ok'] for r in modes.values())}/6 succeeded  "
            + ("FAIL" if run_failures else "PASS")
        )
        for line in run_failures[:6]:
            say(f"    {line}")
    return {"runs": runs}, failures


# --- section 6: grid_sample on Taichi ndarrays near 2^31 grid elements -----------------------
# Taichi ndarrays reach the grid kernels unflattened: they index (N, *P, D) grids and
# (N, C, *P) results through a 32-bit flat index, which must stay exact up to 2^31 - 1.

GRID_PERIOD = 4097


@ti.kernel
def _fill_grid(grid: ti.types.ndarray(ndim=4)):
    """An exact, index-defined grid in [-1, 1.0005]: ``(7 i + 13 j + 5 c) mod 4097 / 2048 - 1``."""
    for n, i, j, c in grid:
        grid[n, i, j, c] = ti.cast((7 * i + 13 * j + 5 * c) % GRID_PERIOD, ti.f32) * 2.0**-11 - 1.0


@ti.kernel
def _copy_row(source: ti.types.ndarray(ndim=4), row: ti.i32, out: ti.types.ndarray(ndim=3)):
    """``out[c, j, k] = source[0, c, row, j]`` with the last axis of ``out`` of size 1 (values),
    or ``source[0, row, j, k]`` for a grid-shaped ``source``; chosen by the shapes."""
    for c, j, k in out:
        if out.shape[2] == 1:
            out[c, j, k] = source[0, c, row, j]
        else:
            out[c, j, k] = source[0, row, j, k]


@ti.kernel
def _value_range(values: ti.types.ndarray(ndim=4), low_high: ti.types.ndarray(ndim=1)):
    for index in ti.grouped(values):
        ti.atomic_min(low_high[0], values[index])
        ti.atomic_max(low_high[1], values[index])


def _grid_rows(width, rows):
    """The numpy grid of rows ``rows`` (shape (1, len(rows), width, 2)), as _fill_grid."""
    i = np.asarray(rows)[:, None, None]
    j = np.arange(width)[None, :, None]
    c = np.arange(2)[None, None, :]
    k = ((7 * i + 13 * j + 5 * c) % GRID_PERIOD).astype(np.float32)
    return (k * np.float32(2.0**-11) - np.float32(1.0))[None]


def _read_rows(array, rows, channels, width, grid_shaped=False):
    out = ti.ndarray(
        ti.f32, (len(rows) if grid_shaped else channels, width, 2 if grid_shaped else 1)
    )
    result = []
    for r in rows:
        _copy_row(array, r, out)
        result.append(out.to_numpy())
    return np.stack(result)


def section_grid_taichi(args, rng):
    tiinterp.init("cpu")
    forward_hw = (32767, 32767)  # grid: 2,147,352,578 elements
    backward_hw = (23170, 23170)  # grid: 1,073,676,800 elements, so grad_grid fits beside it
    if args.quick:
        forward_hw, backward_hw = (4096, 4096), (2048, 2048)
    # One channel for the forward, whose grid is the big array (its output then has half as
    # many elements, 4 GiB); two for the backward.
    x_np = rng.uniform(1.0, 2.0, (1, 2, 61, 67)).astype(np.float32)
    x = ti.ndarray(ti.f32, x_np.shape)
    x.from_numpy(x_np)
    x1_np = np.ascontiguousarray(x_np[:, :1])
    x1 = ti.ndarray(ti.f32, x1_np.shape)
    x1.from_numpy(x1_np)
    if _validate.MAX_BYTES is not None and 8 * math.prod(forward_hw) > _validate.MAX_BYTES:
        big_grid = ti.ndarray(ti.f32, (1, *forward_hw, 2))  # allocated, never launched
        return refused_on_forge(
            "grid_sample with a grid of 2^31 elements", lambda: tiinterp.grid_sample(x1, big_grid)
        )
    out, failures = {"forward_grid_shape": (1, *forward_hw, 2)}, []
    options = dict(mode="bilinear", padding_mode="border", align_corners=False)
    try:
        reset_peak_rss()
        grid = ti.ndarray(ti.f32, (1, *forward_hw, 2))
        _fill_grid(grid)
        start = time.perf_counter()
        y = tiinterp.grid_sample(x1, grid, **options)
        out["forward_seconds"] = time.perf_counter() - start
        rows = sorted({0, forward_hw[0] // 2, forward_hw[0] - 1})
        got = _read_rows(y, rows, 1, forward_hw[1])[..., 0]
        want = tiinterp.grid_sample(x1_np, _grid_rows(forward_hw[1], rows), **options)
        want = np.moveaxis(want[0], 1, 0)  # (rows, C, W)
        out["forward_row_error"] = float(np.max(np.abs(got - want)))
        low_high = ti.ndarray(ti.f32, (2,))
        low_high.from_numpy(np.array([np.inf, -np.inf], np.float32))
        _value_range(y, low_high)
        low, high = (float(v) for v in low_high.to_numpy())
        out["forward_range"] = (low, high)
        out["forward_peak_rss_gib"] = peak_rss_gib()
        if not out["forward_row_error"] <= 1e-6:
            failures.append(f"forward rows {rows}: error {out['forward_row_error']:.3g}")
        if not 1.0 <= low <= high <= 2.0:
            failures.append(f"forward values outside the input's [1, 2]: {low}, {high}")
        say(
            f"  forward  grid {(1, *forward_hw, 2)}: {math.prod(forward_hw) * 2:,} el  "
            f"{out['forward_seconds']:.1f} s  peak RSS {out['forward_peak_rss_gib']:.1f} GiB  "
            f"rows {rows} error {out['forward_row_error']:.2g}  range [{low:.3f}, {high:.3f}]  "
            + ("FAIL" if failures else "PASS")
        )
        del grid, y
        release()

        reset_peak_rss()
        grid = ti.ndarray(ti.f32, (1, *backward_hw, 2))
        _fill_grid(grid)
        g = ti.ndarray(ti.f32, (1, 2, *backward_hw))
        g.fill(1.0)
        start = time.perf_counter()
        grad_x, grad_grid = tiinterp.grid_sample_backward(g, x, grid, **options)
        out["backward_seconds"] = time.perf_counter() - start
        del g
        rows = sorted({0, backward_hw[0] // 2, backward_hw[0] - 1})
        got = _read_rows(grad_grid, rows, 2, backward_hw[1], grid_shaped=True)[:, 0]
        g_rows = np.ones((1, 2, len(rows), backward_hw[1]), np.float32)
        _, want = tiinterp.grid_sample_backward(
            g_rows, x_np, _grid_rows(backward_hw[1], rows), **options
        )
        scale = float(np.max(np.abs(want)))
        out["grad_grid_row_error"] = float(np.max(np.abs(got - want[0]))) / scale
        grad_x = grad_x.to_numpy()
        backward_failures = []
        if not out["grad_grid_row_error"] <= 1e-5:
            backward_failures.append(
                f"grad_grid rows {rows}: error {out['grad_grid_row_error']:.3g}"
            )
        del grid, grad_grid
        release()
        # grad_input: every input sample accumulates ~5e5 float32 terms, whose rounding
        # (~1.5% here) hides a lost row from any formula; the NumPy path accumulates the same
        # terms in the same order, so it must agree to the reordering bound.
        grid_np = np.empty((1, *backward_hw, 2), np.float32)
        for first in range(0, backward_hw[0], 1024):
            last = min(first + 1024, backward_hw[0])
            grid_np[0, first:last] = _grid_rows(backward_hw[1], range(first, last))[0]
        want_x, _ = tiinterp.grid_sample_backward(
            np.ones((1, 2, *backward_hw), np.float32), x_np, grid_np, **options
        )
        del grid_np
        out["grad_input_error"] = row_error(grad_x, want_x.astype(np.float64))
        out["backward_peak_rss_gib"] = peak_rss_gib()
        if not out["grad_input_error"] <= 1e-6:
            backward_failures.append(
                f"grad_input vs the NumPy path: error {out['grad_input_error']:.3g}"
            )
        failures += backward_failures
        say(
            f"  backward grid {(1, *backward_hw, 2)}: {out['backward_seconds']:.1f} s  "
            f"peak RSS {out['backward_peak_rss_gib']:.1f} GiB  grad_grid rows {rows} error "
            f"{out['grad_grid_row_error']:.2g}  grad_input vs NumPy path "
            f"{out['grad_input_error']:.2g}  " + ("FAIL" if backward_failures else "PASS")
        )
    except MemoryError as error:
        out["skipped"] = [f"MemoryError: {error}"]
    except Exception as error:
        out["error"] = error_text(error)
        out["traceback"] = traceback.format_exc(limit=-4)
        failures.append(f"grid_sample on Taichi ndarrays: {out['error']}")
    release()
    return out, failures


# --- section 7: tiinterp.torch near 2^31 elements ---------------------------------------------


def section_torch_bridge(args, rng):
    """``tiinterp.torch.interpolate`` (the custom op) with an output of just under 2^31
    elements and its backward through autograd (the backward op), rows against the float64
    reference of section 1."""
    import torch

    import tiinterp.torch as titorch

    tiinterp.init("cpu")
    divisor = QUICK_DIVISOR if args.quick else 1
    side_in, side_out = 8192 // divisor, 32767 // divisor
    forward = BigCase("torch bridge", "bilinear", (2, 1, side_in, side_in), (side_out, side_out))
    adjoint = BigCase(forward.name, forward.mode, forward.in_shape, forward.size, adjoint=True)
    out = {"input_shape": forward.in_shape, "size": forward.size}
    out["output_elements"] = elements = math.prod(forward.out_shape)
    failures = []
    if past_array_bytes(forward):
        return refused_on_forge(
            "tiinterp.torch.interpolate to 2^31 outputs",
            partial(
                titorch.interpolate,
                torch.zeros(forward.in_shape),
                size=forward.size,
                mode=forward.mode,
            ),
        )
    needed = 4 * (2 * math.prod(forward.in_shape) + elements)
    if needed + MEMORY_MARGIN > available_bytes():
        out["skipped"] = [f"needs {needed / GIB:.1f} GiB + margin"]
        return out, failures
    x = y = gx = None
    try:
        x = torch.empty(forward.in_shape, dtype=torch.float32)
        fill_uniform(rng, x.numpy())
        x.requires_grad_(True)
        reset_peak_rss()
        start = time.perf_counter()
        y = titorch.interpolate(x, size=forward.size, mode=forward.mode)
        out["forward_seconds"] = time.perf_counter() - start
        g = y.detach()  # the gradient of 0.5 * sum(y ** 2): y itself, no second 8 GiB
        start = time.perf_counter()
        (gx,) = torch.autograd.grad(y, x, grad_outputs=g)
        out["backward_seconds"] = time.perf_counter() - start
        out["peak_rss_gib"] = peak_rss_gib()
        forward_errors = check_rows(forward, x.detach().numpy(), g.numpy())
        adjoint_errors = check_rows(adjoint, g.numpy(), gx.numpy())
        out["forward_row_error"] = max(forward_errors.values())
        out["backward_row_error"] = max(adjoint_errors.values())
        out["range_problem"] = scan_range(g.numpy())
        for name in ("forward_row_error", "backward_row_error"):
            if not out[name] <= ROW_RTOL:
                failures.append(f"torch bridge: {name} {out[name]:.3g} > {ROW_RTOL:g}")
        if out["range_problem"]:
            failures.append(f"torch bridge: {out['range_problem']}")
        say(
            f"  {forward.in_shape} -> {forward.size} ({elements:,} outputs, "
            f"{elements / LIMIT:.4f} of 2^31): forward {out['forward_seconds']:.1f} s, "
            f"backward {out['backward_seconds']:.1f} s, peak RSS {out['peak_rss_gib']:.1f} GiB; "
            f"row errors forward {out['forward_row_error']:.2g}, backward "
            f"{out['backward_row_error']:.2g}  " + ("FAIL" if failures else "PASS")
        )
    except MemoryError as error:
        out["skipped"] = [f"MemoryError: {error}"]
    except Exception as error:
        out["error"] = error_text(error)
        out["traceback"] = traceback.format_exc(limit=-4)
        failures.append(f"torch bridge: {out['error']}")
    del x, y, gx
    release()
    return out, failures


# --- driver ----------------------------------------------------------------------------------

# --- section 8: Taichi pipelines on vector fields near 2^31 elements --------------------------


@ti.kernel
def _vector_field_row(field: ti.template(), row: ti.i32, out: ti.types.ndarray(ndim=2)):
    """``out[j, c] = field[row, j][c]``."""
    for j in range(out.shape[0]):
        for c in ti.static(range(2)):
            out[j, c] = field[row, j][c]


@ti.kernel
def _vector_field_summary(field: ti.template(), summary: ti.types.ndarray(ndim=1)):
    """Minimum, maximum, non-finite count, and the float64 sum of each of two components."""
    for index in ti.grouped(field):
        for c in ti.static(range(2)):
            value = field[index][c]
            ti.atomic_min(summary[0], ti.cast(value, ti.f64))
            ti.atomic_max(summary[1], ti.cast(value, ti.f64))
            if not (ti.abs(value) < ti.math.inf):
                summary[2] += 1.0
            summary[3 + c] += ti.cast(value, ti.f64)


def _summary(field):
    summary = ti.ndarray(ti.f64, (5,))
    summary.from_numpy(np.array([np.inf, -np.inf, 0.0, 0.0, 0.0]))
    _vector_field_summary(field, summary)
    return summary.to_numpy()


def section_pipeline(args, rng):
    """``interpolate_into`` on ``ti.Vector.field(2, ti.f32, ...)`` data (the element copies
    between a field and tiinterp's scalar arrays): a forward whose field holds just under 2^31
    floats, and a ``ti.ad.Tape`` adjoint into a field of 2^30 floats."""
    tiinterp.init("cpu")
    in_hw = (61, 67)
    forward_hw = (32766, 32767)  # 2 x 1,073,643,522 = 2,147,287,044 floats
    backward_hw = (16384, 32767)  # 2 x 536,854,528 = 1,073,709,056 floats
    if args.quick:
        forward_hw, backward_hw = (2048, 4095), (1024, 4095)
    x = rng.uniform(1.0, 2.0, (*in_hw, 2)).astype(np.float32)
    planes = np.moveaxis(x, -1, 0)  # (2, H, W) for the float64 reference rows
    out, failures = {"forward_field": (*forward_hw, 2), "backward_field": (*backward_hw, 2)}, []
    if _validate.MAX_BYTES is not None and 8 * math.prod(forward_hw) > _validate.MAX_BYTES:
        small = ti.Vector.field(2, ti.f32, in_hw)
        small.from_numpy(x)
        big = ti.Vector.field(2, ti.f32, forward_hw)  # defined, never launched
        return refused_on_forge(
            "interpolate_into a field of 2^31 floats",
            partial(tiinterp.interpolate_into, small, big, mode="bilinear"),
        )
    try:
        reset_peak_rss()
        src = ti.Vector.field(2, ti.f32, in_hw)
        src.from_numpy(x)
        dst = ti.Vector.field(2, ti.f32, forward_hw)
        start = time.perf_counter()
        tiinterp.interpolate_into(src, dst, mode="bilinear")
        out["forward_seconds"] = time.perf_counter() - start
        axes = reference_axes(in_hw, forward_hw, "bilinear")
        rows = sorted({0, forward_hw[0] // 2, forward_hw[0] - 1})
        line = ti.ndarray(ti.f32, (forward_hw[1], 2))
        errors = []
        for r in rows:
            _vector_field_row(dst, r, line)
            got = line.to_numpy()
            errors += [row_error(got[:, c], forward_row(planes, c, r, axes)) for c in range(2)]
        out["forward_row_error"] = max(errors)
        low, high, non_finite, *_ = _summary(dst)
        out["forward_range"], out["forward_non_finite"] = (low, high), int(non_finite)
        out["forward_peak_rss_gib"] = peak_rss_gib()
        forward_failures = []
        if not out["forward_row_error"] <= ROW_RTOL:
            forward_failures.append(f"forward rows {rows}: error {out['forward_row_error']:.3g}")
        if not (1.0 <= low <= high <= 2.0 and non_finite == 0):
            forward_failures.append(
                f"forward values outside the input's [1, 2] (unwritten?): {low}, {high}, "
                f"{int(non_finite)} non-finite"
            )
        failures += forward_failures
        say(
            f"  forward  {in_hw} -> {forward_hw} of 2-vectors: "
            f"{2 * math.prod(forward_hw):,} floats  {out['forward_seconds']:.1f} s  peak RSS "
            f"{out['forward_peak_rss_gib']:.1f} GiB  rows {rows} error "
            f"{out['forward_row_error']:.2g}  range [{low:.3f}, {high:.3f}]  "
            + ("FAIL" if forward_failures else "PASS")
        )
        del dst, src
        # Fields live until Taichi's runtime goes: a new one frees the 8 GiB field.
        tiinterp.init("cpu")
        release()

        # loss = sum of every component of dst, so dst.grad = 1 and src.grad = A^T 1: each
        # component of src.grad sums to the number of outputs (area weights sum to 1).
        reset_peak_rss()
        big = ti.Vector.field(2, ti.f32, backward_hw, needs_grad=True)
        small = ti.Vector.field(2, ti.f32, in_hw, needs_grad=True)
        loss = ti.field(ti.f32, (), needs_grad=True)

        @ti.kernel
        def total():
            for index in ti.grouped(small):
                loss[None] += small[index].sum()

        start = time.perf_counter()
        with ti.ad.Tape(loss=loss):
            tiinterp.interpolate_into(big, small, mode="area")
            total()
        out["backward_seconds"] = time.perf_counter() - start
        axes = reference_axes(backward_hw, in_hw, "area")
        ones = np.ones((2, *in_hw))
        rows = sorted({0, backward_hw[0] // 2, backward_hw[0] - 1})
        line = ti.ndarray(ti.f32, (backward_hw[1], 2))
        errors = []
        for r in rows:
            _vector_field_row(big.grad, r, line)
            got = line.to_numpy()
            errors += [
                row_error(got[:, c], adjoint_row(ones, c, r, axes, backward_hw[1]))
                for c in range(2)
            ]
        out["adjoint_row_error"] = max(errors)
        low, high, non_finite, *sums = _summary(big.grad)
        expected_sum = float(math.prod(in_hw))
        out["adjoint_component_sums"] = sums
        out["adjoint_sum_error"] = max(abs(total - expected_sum) / expected_sum for total in sums)
        out["backward_peak_rss_gib"] = peak_rss_gib()
        backward_failures = []
        if not out["adjoint_row_error"] <= ROW_RTOL:
            backward_failures.append(f"adjoint rows {rows}: error {out['adjoint_row_error']:.3g}")
        if not (out["adjoint_sum_error"] <= 1e-4 and non_finite == 0 and low >= 0.0):
            backward_failures.append(
                f"adjoint sums {sums} (expected {expected_sum}), min {low}, "
                f"{int(non_finite)} non-finite"
            )
        failures += backward_failures
        say(
            f"  adjoint  {backward_hw} <- {in_hw} of 2-vectors in a ti.ad.Tape (area): "
            f"{2 * math.prod(backward_hw):,} floats  {out['backward_seconds']:.1f} s  peak RSS "
            f"{out['backward_peak_rss_gib']:.1f} GiB  rows {rows} error "
            f"{out['adjoint_row_error']:.2g}  component sums off by "
            f"{out['adjoint_sum_error']:.2g}  " + ("FAIL" if backward_failures else "PASS")
        )
    except MemoryError as error:
        out["skipped"] = [f"MemoryError: {error}"]
    except Exception as error:
        out["error"] = error_text(error)
        out["traceback"] = traceback.format_exc(limit=-4)
        failures.append(f"interpolate_into on vector fields: {out['error']}")
    release()
    return out, failures


# --- section 9: forked workers ----------------------------------------------------------------

FORK_DEADLINE = 600


def fork_calls(quick):
    """(name, call) pairs: every mode forward and backward, grid_sample, and a 16 MB image."""
    rng = np.random.default_rng(9)
    x = rng.random((2, 3, 37, 29), dtype=np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 5, 7, 2)).astype(np.float32)
    big = rng.random((1, 8, 256, 256) if quick else (2, 8, 512, 512), dtype=np.float32)
    calls = []
    for mode in _filters.MODE_DIMS:
        if 2 in _filters.MODE_DIMS[mode]:
            calls.append(
                (f"{mode} forward", partial(tiinterp.interpolate, x, (23, 41), None, mode))
            )
            g = np.ones((2, 3, 23, 41), np.float32)
            calls.append(
                (f"{mode} adjoint", partial(tiinterp.interpolate_backward, g, x.shape, mode=mode))
            )
    calls.append(("grid_sample", partial(tiinterp.grid_sample, x, grid, "bicubic", "reflection")))
    calls.append(
        (
            "16 MB image",
            partial(tiinterp.interpolate, big, None, 0.75, "lanczos3", None, None, True),
        )
    )
    return calls


def _fork_results(indices, quick):
    calls = fork_calls(quick)
    try:
        return [calls[i][1]() for i in indices]
    except RuntimeError as error:
        return str(error)


def _fork_child_then_grandchild(quick, pipe):
    """In a forked child: compute, fork a grandchild that computes, send both."""
    import multiprocessing

    own = _fork_results([0, 1], quick)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        grandchild = pool.apply_async(_fork_results, ([0, 1], quick)).get(FORK_DEADLINE)
    pipe.send((own, grandchild))


def section_fork(args, rng):
    import multiprocessing

    from tiinterp._taichi import can_abandon_runtime

    tiinterp.init("cpu")
    calls = fork_calls(args.quick)
    expected = [call() for _, call in calls]
    works = can_abandon_runtime()
    out, failures = {"calls": len(calls), "children_compute": works}, []

    def check(where, results, indices):
        if isinstance(results, str):
            if works or "'spawn'" not in results:
                failures.append(f"{where}: {results[:300]}")
            return
        if not works:
            failures.append(f"{where}: computed where a RuntimeError was expected")
            return
        for i, got in zip(indices, results, strict=True):
            if not np.array_equal(got, expected[i], equal_nan=True):
                failures.append(f"{where}: {calls[i][0]} differs from the parent's")

    context = multiprocessing.get_context("fork")
    jobs = [list(range(len(calls)))[k::4] for k in range(4)] * (1 if args.quick else 16)
    start = time.perf_counter()
    with context.Pool(4) as pool:
        pending = [pool.apply_async(_fork_results, (job, args.quick)) for job in jobs]
        for k, task in enumerate(pending):
            check(f"pool task {k}", task.get(FORK_DEADLINE), jobs[k])
    out["pool_seconds"] = time.perf_counter() - start
    say(f"  fork pool: {len(jobs)} tasks of 4 workers, {out['pool_seconds']:.1f} s")

    stop = threading.Event()

    def keep_calling():
        while not stop.is_set():
            for _, call in calls[:4]:
                call()

    threads = [threading.Thread(target=keep_calling) for _ in range(4)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    try:
        for k in range(3 if args.quick else 10):
            with context.Pool(1) as pool:
                check(
                    f"fork {k} under threads",
                    pool.apply_async(_fork_results, ([0, 1, 2, 3], args.quick)).get(FORK_DEADLINE),
                    [0, 1, 2, 3],
                )
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    out["forks_under_threads_seconds"] = time.perf_counter() - start
    say(f"  forks while 4 threads call: {out['forks_under_threads_seconds']:.1f} s")

    if works:  # a Process, not a pool's daemon worker: those may not have children
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_fork_child_then_grandchild, args=(args.quick, send))
        child.start()
        if not receive.poll(FORK_DEADLINE):
            child.kill()
            failures.append("child and grandchild: no result within the deadline")
            return out, failures
        own, grandchild = receive.recv()
        child.join()
        check("child", own, [0, 1])
        check("grandchild", grandchild, [0, 1])
        say("  child and grandchild: checked")
    return out, failures


# --- section 10: the device path (vulkan) past 2^19 rows and near 2^31 elements ----------------


@ti.kernel
def _scalar_row(data: ti.types.ndarray(ndim=4), row: ti.i32, out: ti.types.ndarray(ndim=1)):
    """``out[j] = data[0, 0, row, j]``."""
    for j in range(out.shape[0]):
        out[j] = data[0, 0, row, j]


def _device_rows(data, rows, width):
    line = ti.ndarray(ti.f32, (width,))
    got = []
    for r in rows:
        _scalar_row(data, r, line)
        got.append(line.to_numpy())
    return got


def section_device_path(args, rng):
    """The GPU archs' path on Vulkan (one fused gather per call, tables on the device), on
    Taichi ndarrays: a bilinear resize past 2^19 rows, and one whose output holds just under
    2^31 floats, forward and adjoint; sampled rows against the float64 reference."""
    if "vulkan" not in tiinterp.available_archs():
        return {"skipped": "no Vulkan device"}, ["section 10 needs a Vulkan device (lavapipe)"]
    # Mesa's lavapipe refuses allocations of 3.9 GiB and more (measured), so the largest
    # case computed holds 2^29 outputs (2 GiB); a result of nearly 2^31 floats must be
    # refused promptly with tiinterp's MemoryError where the device refuses it.
    cases = [("past 2^19 rows", (2**20 + 3, 6), (2**19 + 7, 9))]
    cases.append(("2^29 outputs", (4096, 4096), (16384, 32768)))
    near_limit = ("near 2^31 outputs", (4096, 4096), (46340, 46340))
    if args.quick:
        cases = [
            ("past 2^13 rows", (2**14 + 3, 6), (2**13 + 7, 9)),
            ("big", (512, 512), (4096, 4096)),
        ]
        near_limit = ("past the device's allocation limit", (64, 64), (40000, 40000))
    out, failures = {"cases": [], "refusals": []}, []
    tiinterp.init("vulkan")
    name, in_hw, out_hw = near_limit
    source = ti.ndarray(ti.f32, (1, 1, *in_hw))
    record = run_refusal(name, partial(tiinterp.interpolate, source, size=out_hw, mode="bilinear"))
    # Computed (a device that holds it) or refused promptly with a MemoryError.
    computed = record["outcome"] == "no error"
    refused = record["outcome"] == "MemoryError" and record["seconds"] < REFUSAL_SECONDS
    record["status"] = "pass" if computed or refused else "fail"
    out["refusals"].append(record)
    if record["status"] == "fail":
        failures.append(f"{name}: {record['outcome']} ({record['message']})")
    say(
        f"  {name}: {in_hw} -> {out_hw}: {record['outcome']} in "
        f"{record['seconds'] * 1e3:.1f} ms ({record['message'][:120]})  {record['status'].upper()}"
    )
    del source
    for name, in_hw, out_hw in cases:
        tiinterp.init("vulkan")
        reset_peak_rss()
        x = rng.uniform(1.0, 2.0, (1, 1, *in_hw)).astype(np.float32)
        source = ti.ndarray(ti.f32, x.shape)
        source.from_numpy(x)
        start = time.perf_counter()
        result = tiinterp.interpolate(source, size=out_hw, mode="bilinear")
        ti.sync()
        forward_seconds = time.perf_counter() - start
        axes = reference_axes(in_hw, out_hw, "bilinear")
        rows = sorted({0, out_hw[0] // 2, out_hw[0] - 1})
        got = _device_rows(result, rows, out_hw[1])
        forward_error = max(
            row_error(g, forward_row(x[0], 0, r, axes)) for g, r in zip(got, rows, strict=True)
        )
        # The adjoint of the same resize applied to the forward's result.
        start = time.perf_counter()
        grad = tiinterp.interpolate_backward(result, x.shape, mode="bilinear")
        ti.sync()
        adjoint_seconds = time.perf_counter() - start
        del result
        in_rows = sorted({0, in_hw[0] // 2, in_hw[0] - 1})
        got = _device_rows(grad, in_rows, in_hw[1])
        del grad
        # The reference adjoint needs the forward in full: only where it fits in memory.
        adjoint_error = None
        if math.prod(out_hw) <= 2**26:
            forward = tiinterp.interpolate(x, size=out_hw, mode="bilinear")[0]
            adjoint_error = max(
                row_error(g, adjoint_row(forward, 0, r, axes, in_hw[1]))
                for g, r in zip(got, in_rows, strict=True)
            )
        finite = all(np.isfinite(g).all() for g in got)
        record = {
            "case": name,
            "in": in_hw,
            "out": out_hw,
            "forward_seconds": forward_seconds,
            "adjoint_seconds": adjoint_seconds,
            "forward_row_error": forward_error,
            "adjoint_row_error": adjoint_error,
            "peak_rss_gib": peak_rss_gib(),
        }
        ok = (
            forward_error <= ROW_RTOL
            and finite
            and (adjoint_error is None or adjoint_error <= ROW_RTOL)
        )
        if not ok:
            failures.append(
                f"{name}: forward {forward_error:.3g}, adjoint {adjoint_error}, finite {finite}"
            )
        out["cases"].append(record)
        adjoint_text = "not checked (too big)" if adjoint_error is None else f"{adjoint_error:.2g}"
        say(
            f"  {name}: {in_hw} -> {out_hw}  forward {forward_seconds:.1f} s, rows {rows} "
            f"error {forward_error:.2g}; adjoint {adjoint_seconds:.1f} s, rows {in_rows} "
            f"error {adjoint_text}, finite {finite}; peak RSS {record['peak_rss_gib']:.1f} GiB  "
            + ("PASS" if ok else "FAIL")
        )
        del source
        release()
    tiinterp.init("cpu")
    return out, failures


SECTIONS = {
    1: ("near 2^31 elements (cpu, float32)", section_big),
    2: ("autodiff past 2^31 outputs x taps", section_autodiff),
    3: ("memory flatness", section_memory),
    4: ("threads (cpu, vulkan) with re-init", section_threads),
    5: ("cold cache, many threads", section_cold_cache),
    6: ("grid_sample on Taichi ndarrays near 2^31 grid elements", section_grid_taichi),
    7: ("tiinterp.torch near 2^31 elements, forward and autograd backward", section_torch_bridge),
    8: ("interpolate_into on vector fields near 2^31 floats, with a Tape", section_pipeline),
    9: ("forked workers after the parent's calls", section_fork),
    10: ("the device path (vulkan) past 2^19 rows and near 2^31 outputs", section_device_path),
}


def jsonable(value):
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for development")
    parser.add_argument("--sections", default=",".join(map(str, SECTIONS)))
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=None,
        help="JSON report (default benchmarks/out/stress.json, stress-quick.json with --quick)",
    )
    args = parser.parse_args()
    chosen = [int(s) for s in args.sections.split(",")]
    path = args.out or OUT_DIR / ("stress-quick.json" if args.quick else "stress.json")
    report = {
        "quick": args.quick,
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "available_gib_at_start": available_bytes() / GIB,
        },
        "sections": {},
    }
    all_failures, skipped = [], []
    begin = time.perf_counter()
    for number in chosen:
        title, run = SECTIONS[number]
        say(f"[{number}/{len(SECTIONS)}] {title}")
        start = time.perf_counter()
        out, failures = run(args, np.random.default_rng(1000 + number))
        out.update(
            seconds_total=time.perf_counter() - start,
            failures=failures,
            status="fail" if failures else "pass",
        )
        report["sections"][title] = out
        all_failures += [f"[{number}] {f}" for f in failures]
        skipped += [f"[{number}] {s}" for s in out.get("skipped", [])]
        say(f"  -> {out['status'].upper()} in {out['seconds_total']:.1f} s")
        release()
    report["total_seconds"] = time.perf_counter() - begin
    report["failures"], report["skipped"] = all_failures, skipped
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(jsonable(report), indent=1))
    say(
        f"total {report['total_seconds']:.1f} s; {len(all_failures)} failures, "
        f"{len(skipped)} skipped; wrote {path}"
    )
    for line in all_failures:
        say(f"  FAIL {line}")
    for line in skipped:
        say(f"  SKIPPED {line}")
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
