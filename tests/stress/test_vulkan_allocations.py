"""The GPU archs' path on Vulkan (one fused gather per call, tables on the device), on Taichi
ndarrays: a bilinear resize past 2^19 rows and one whose output holds 2^29 floats, forward
and adjoint, sampled rows against the float64 reference; and an output of nearly 2^31
floats, which a device either computes or refuses promptly with tiinterp's MemoryError
(Mesa's lavapipe refuses allocations of 3.9 GiB and more, measured), and taichi-forge
refuses at once with a ValueError the cases whose output has 2^31 bytes or more (its kernels
take no such array). Needs a Vulkan device (lavapipe on CI's machines)."""

import math
import time
from functools import partial

import numpy as np
import pytest

import tiinterp
from tests.stress import reference
from tests.stress.helpers import (
    REFUSAL_SECONDS,
    ROW_RTOL,
    past_array_bytes,
    peak_rss_gib,
    refused_at_once,
    release,
    reset_peak_rss,
)
from tiinterp._runtime.taichi import ti

pytestmark = pytest.mark.stress

CASES = {
    "past-2_19-rows": ((2**20 + 3, 6), (2**19 + 7, 9)),
    "2_29-outputs": ((4096, 4096), (16384, 32768)),
}
QUICK_CASES = {
    "past-2_19-rows": ((2**14 + 3, 6), (2**13 + 7, 9)),
    "2_29-outputs": ((512, 512), (4096, 4096)),
}


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


def test_nearly_2_31_outputs_are_computed_or_refused_at_once(quick, taichi_on, record_property):
    taichi_on("vulkan")
    in_hw, out_hw = ((64, 64), (40000, 40000)) if quick else ((4096, 4096), (46340, 46340))
    record_property("shapes", f"{in_hw} -> {out_hw}")
    source = ti.ndarray(ti.f32, (1, 1, *in_hw))
    call = partial(tiinterp.interpolate, source, size=out_hw, mode="bilinear")
    if past_array_bytes((1, 1, *out_hw)):
        seconds, _ = refused_at_once(call)  # taichi-forge's limit, before the device's
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        return
    start = time.perf_counter()
    try:
        call()
        outcome = "computed"
    except MemoryError as error:
        outcome = f"MemoryError: {error}"
    seconds = time.perf_counter() - start
    record_property("outcome", outcome[:200])
    record_property("seconds", seconds)
    assert outcome == "computed" or seconds < REFUSAL_SECONDS, f"{outcome} after {seconds:.3f} s"


@pytest.mark.parametrize("case", CASES.keys())
def test_bilinear_on_the_device_path(case, quick, rng, taichi_on, record_property):
    taichi_on("vulkan")
    in_hw, out_hw = (QUICK_CASES if quick else CASES)[case]
    record_property("shapes", f"{in_hw} -> {out_hw}")
    reset_peak_rss()
    x = rng.uniform(1.0, 2.0, (1, 1, *in_hw)).astype(np.float32)
    source = ti.ndarray(ti.f32, x.shape)
    source.from_numpy(x)
    if past_array_bytes((1, 1, *out_hw)):  # 2^29 floats: 2^31 bytes, 1 past taichi-forge's limit
        call = partial(tiinterp.interpolate, source, size=out_hw, mode="bilinear")
        seconds, _ = refused_at_once(call)
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        return
    start = time.perf_counter()
    result = tiinterp.interpolate(source, size=out_hw, mode="bilinear")
    ti.sync()
    record_property("forward_seconds", time.perf_counter() - start)
    tables = reference.axes(in_hw, out_hw, "bilinear")
    rows = sorted({0, out_hw[0] // 2, out_hw[0] - 1})
    got = _device_rows(result, rows, out_hw[1])
    forward_error = max(
        reference.row_error(g, reference.forward_row(x[0], 0, r, tables))
        for g, r in zip(got, rows, strict=True)
    )
    # The adjoint of the same resize applied to the forward's result.
    start = time.perf_counter()
    grad = tiinterp.interpolate_backward(result, x.shape, mode="bilinear")
    ti.sync()
    record_property("adjoint_seconds", time.perf_counter() - start)
    del result
    in_rows = sorted({0, in_hw[0] // 2, in_hw[0] - 1})
    got_grad = _device_rows(grad, in_rows, in_hw[1])
    del grad, source
    release()
    # The reference adjoint needs the forward in full: only where it fits in memory.
    adjoint_error = None
    if math.prod(out_hw) <= 2**26:
        forward = tiinterp.interpolate(x, size=out_hw, mode="bilinear")[0]
        adjoint_error = max(
            reference.row_error(g, reference.adjoint_row(forward, 0, r, tables, in_hw[1]))
            for g, r in zip(got_grad, in_rows, strict=True)
        )
    record_property("forward_row_error", forward_error)
    record_property(
        "adjoint_row_error", "too big to check" if adjoint_error is None else adjoint_error
    )
    record_property("peak_rss_gib", peak_rss_gib())
    assert forward_error <= ROW_RTOL, f"forward rows {rows}: {forward_error:.3g}"
    assert all(np.isfinite(g).all() for g in got_grad), f"non-finite adjoint rows {in_rows}"
    assert adjoint_error is None or adjoint_error <= ROW_RTOL, (
        f"adjoint rows {in_rows}: {adjoint_error:.3g}"
    )
