"""Taichi pipelines on vector fields (the element copies between a field and tiinterp's
scalar arrays): ``interpolate_into`` from a small ``ti.Vector.field`` of 2-vectors into
one of 2,147,287,044 floats (rows against the float64 reference, the whole field scanned
for unwritten or non-finite values), and inside ``ti.ad.Tape`` the adjoint of ``area``
into a vector field of 1,073,709,056 floats (rows against the reference, each component's
sum against the number of outputs). On taichi-forge, where these fields pass 2^31 bytes,
the calls must be refused instead, at once."""

import math
import time

import numpy as np
import pytest

import tiinterp
from tests.stress import reference
from tests.stress.helpers import (
    ROW_RTOL,
    past_array_bytes,
    peak_rss_gib,
    refused_at_once,
    reset_peak_rss,
    skip_on_memory_error,
)
from tiinterp._runtime.taichi import ti

pytestmark = pytest.mark.stress

IN_HW = (61, 67)


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


def _row_errors(field, rows, width, want_row):
    line = ti.ndarray(ti.f32, (width, 2))
    errors = []
    for r in rows:
        _vector_field_row(field, r, line)
        got = line.to_numpy()
        errors += [reference.row_error(got[:, c], want_row(c, r)) for c in range(2)]
    return max(errors)


def test_interpolate_into_a_vector_field_of_2_31_floats(quick, rng, taichi_on, record_property):
    taichi_on("cpu")
    hw = (2048, 4095) if quick else (32766, 32767)  # 2 x 1,073,643,522 = 2,147,287,044 floats
    x = rng.uniform(1.0, 2.0, (*IN_HW, 2)).astype(np.float32)
    planes = np.moveaxis(x, -1, 0)  # (2, H, W) for the float64 reference rows
    record_property("field", (*hw, 2))
    src = ti.Vector.field(2, ti.f32, IN_HW)
    src.from_numpy(x)
    if past_array_bytes((*hw, 2)):
        dst = ti.Vector.field(2, ti.f32, hw)  # defined, never launched
        seconds, _ = refused_at_once(lambda: tiinterp.interpolate_into(src, dst, mode="bilinear"))
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        return
    # The fields live until the runtime goes: taichi_on's new runtime frees the 8 GiB.
    with skip_on_memory_error():
        reset_peak_rss()
        dst = ti.Vector.field(2, ti.f32, hw)
        start = time.perf_counter()
        tiinterp.interpolate_into(src, dst, mode="bilinear")
        record_property("seconds", time.perf_counter() - start)
        tables = reference.axes(IN_HW, hw, "bilinear")
        rows = sorted({0, hw[0] // 2, hw[0] - 1})
        error = _row_errors(
            dst, rows, hw[1], lambda c, r: reference.forward_row(planes, c, r, tables)
        )
        low, high, non_finite, *_ = _summary(dst)
        record_property("peak_rss_gib", peak_rss_gib())
    record_property("row_error", error)
    record_property("range", (low, high))
    assert error <= ROW_RTOL, f"rows {rows}: error {error:.3g}"
    assert 1.0 <= low <= high <= 2.0 and non_finite == 0, (
        f"values outside the input's [1, 2] (unwritten?): {low}, {high}, "
        f"{int(non_finite)} non-finite"
    )


def test_area_adjoint_in_a_tape_into_a_vector_field_of_2_30_floats(
    quick, taichi_on, record_property
):
    """loss = the sum of every component of dst, so dst.grad = 1 and src.grad = A^T 1: each
    component of src.grad sums to the number of outputs (area weights sum to 1)."""
    taichi_on("cpu")
    hw = (1024, 4095) if quick else (16384, 32767)  # 2 x 536,854,528 = 1,073,709,056 floats
    record_property("field", (*hw, 2))
    if past_array_bytes((*hw, 2)):
        big = ti.Vector.field(2, ti.f32, hw, needs_grad=True)  # defined, never launched
        small = ti.Vector.field(2, ti.f32, IN_HW, needs_grad=True)
        seconds, _ = refused_at_once(lambda: tiinterp.interpolate_into(big, small, mode="area"))
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        return
    with skip_on_memory_error():
        reset_peak_rss()
        big = ti.Vector.field(2, ti.f32, hw, needs_grad=True)
        small = ti.Vector.field(2, ti.f32, IN_HW, needs_grad=True)
        loss = ti.field(ti.f32, (), needs_grad=True)

        @ti.kernel
        def total():
            for index in ti.grouped(small):
                loss[None] += small[index].sum()

        start = time.perf_counter()
        with ti.ad.Tape(loss=loss):
            tiinterp.interpolate_into(big, small, mode="area")
            total()
        record_property("seconds", time.perf_counter() - start)
        tables = reference.axes(hw, IN_HW, "area")
        ones = np.ones((2, *IN_HW))
        rows = sorted({0, hw[0] // 2, hw[0] - 1})
        error = _row_errors(
            big.grad,
            rows,
            hw[1],
            lambda c, r: reference.adjoint_row(ones, c, r, tables, hw[1]),
        )
        low, _, non_finite, *sums = _summary(big.grad)
        record_property("peak_rss_gib", peak_rss_gib())
    expected_sum = float(math.prod(IN_HW))
    sum_error = max(abs(s - expected_sum) / expected_sum for s in sums)
    record_property("row_error", error)
    record_property("component_sums", sums)
    assert error <= ROW_RTOL, f"adjoint rows {rows}: error {error:.3g}"
    assert sum_error <= 1e-4 and non_finite == 0 and low >= 0.0, (
        f"adjoint sums {sums} (expected {expected_sum}), min {low}, {int(non_finite)} non-finite"
    )
