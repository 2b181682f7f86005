"""grid_sample on Taichi ndarrays, which reach the grid kernels unflattened: they index
(N, *P, D) grids and (N, C, *P) results through a 32-bit flat index, which must stay exact
up to 2^31 - 1. A forward with a grid of 2,147,352,578 elements (rows at the start, middle
and end against the NumPy path, the whole output scanned for values outside the input's
range) and a backward with a grid of 2^30 elements (grad_grid rows and the whole
grad_input against the NumPy path). On taichi-forge, where these grids pass 2^31 bytes,
each call must be refused instead, at once."""

import time

import numpy as np
import pytest

import tiinterp
from tests.stress.helpers import (
    past_array_bytes,
    peak_rss_gib,
    refused_at_once,
    release,
    reset_peak_rss,
    skip_on_memory_error,
)
from tests.stress.reference import row_error
from tiinterp._runtime.taichi import ti

pytestmark = pytest.mark.stress

GRID_PERIOD = 4097
OPTIONS = {"mode": "bilinear", "padding_mode": "border", "align_corners": False}


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
    """The NumPy grid of rows ``rows`` (shape (1, len(rows), width, 2)), as _fill_grid."""
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


def _input(rng, channels):
    """The input, in [1, 2], as NumPy and as a Taichi ndarray."""
    x_np = rng.uniform(1.0, 2.0, (1, 2, 61, 67)).astype(np.float32)[:, :channels].copy()
    x = ti.ndarray(ti.f32, x_np.shape)
    x.from_numpy(x_np)
    return x_np, x


def test_forward_with_a_grid_of_2_31_elements(quick, rng, taichi_on, record_property):
    taichi_on("cpu")
    hw = (4096, 4096) if quick else (32767, 32767)  # grid: 2,147,352,578 elements
    # One channel: the grid is the big array (the output has half as many elements).
    x_np, x = _input(rng, 1)
    record_property("grid_shape", (1, *hw, 2))
    if past_array_bytes((1, *hw, 2)):
        big_grid = ti.ndarray(ti.f32, (1, *hw, 2))  # allocated, never launched
        seconds, _ = refused_at_once(lambda: tiinterp.grid_sample(x, big_grid, **OPTIONS))
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        return
    grid = y = None
    try:
        with skip_on_memory_error():
            reset_peak_rss()
            grid = ti.ndarray(ti.f32, (1, *hw, 2))
            _fill_grid(grid)
            start = time.perf_counter()
            y = tiinterp.grid_sample(x, grid, **OPTIONS)
            record_property("seconds", time.perf_counter() - start)
            rows = sorted({0, hw[0] // 2, hw[0] - 1})
            got = _read_rows(y, rows, 1, hw[1])[..., 0]
            want = tiinterp.grid_sample(x_np, _grid_rows(hw[1], rows), **OPTIONS)
            want = np.moveaxis(want[0], 1, 0)  # (rows, C, W)
            low_high = ti.ndarray(ti.f32, (2,))
            low_high.from_numpy(np.array([np.inf, -np.inf], np.float32))
            _value_range(y, low_high)
            low, high = (float(v) for v in low_high.to_numpy())
            record_property("peak_rss_gib", peak_rss_gib())
    finally:
        del grid, y
        release()
    error = float(np.max(np.abs(got - want)))
    record_property("row_error", error)
    record_property("range", (low, high))
    assert error <= 1e-6, f"rows {rows}: error {error:.3g}"
    assert 1.0 <= low <= high <= 2.0, f"values outside the input's [1, 2]: {low}, {high}"


def test_backward_with_a_grid_of_2_30_elements(quick, rng, taichi_on, record_property):
    taichi_on("cpu")
    # grid: 1,073,676,800 elements, so that grad_grid fits beside it.
    hw = (2048, 2048) if quick else (23170, 23170)
    x_np, x = _input(rng, 2)
    record_property("grid_shape", (1, *hw, 2))
    if past_array_bytes((1, *hw, 2)):
        big_grid = ti.ndarray(ti.f32, (1, *hw, 2))  # allocated, never launched
        big_g = ti.ndarray(ti.f32, (1, 2, *hw))
        seconds, _ = refused_at_once(
            lambda: tiinterp.grid_sample_backward(big_g, x, big_grid, **OPTIONS)
        )
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        return
    grid = g = grad_x = grad_grid = grid_np = None
    try:
        with skip_on_memory_error():
            reset_peak_rss()
            grid = ti.ndarray(ti.f32, (1, *hw, 2))
            _fill_grid(grid)
            g = ti.ndarray(ti.f32, (1, 2, *hw))
            g.fill(1.0)
            start = time.perf_counter()
            grad_x, grad_grid = tiinterp.grid_sample_backward(g, x, grid, **OPTIONS)
            record_property("seconds", time.perf_counter() - start)
            g = None
            rows = sorted({0, hw[0] // 2, hw[0] - 1})
            got = _read_rows(grad_grid, rows, 2, hw[1], grid_shaped=True)[:, 0]
            g_rows = np.ones((1, 2, len(rows), hw[1]), np.float32)
            _, want = tiinterp.grid_sample_backward(
                g_rows, x_np, _grid_rows(hw[1], rows), **OPTIONS
            )
            grad_grid_error = float(np.max(np.abs(got - want[0]))) / float(np.max(np.abs(want)))
            grad_x = grad_x.to_numpy()
            grid = grad_grid = None
            release()
            # grad_input: every input sample accumulates ~5e5 float32 terms, whose rounding
            # (~1.5% here) hides a lost row from any formula; the NumPy path accumulates the
            # same terms in the same order, so it must agree to the reordering bound.
            grid_np = np.empty((1, *hw, 2), np.float32)
            for first in range(0, hw[0], 1024):
                last = min(first + 1024, hw[0])
                grid_np[0, first:last] = _grid_rows(hw[1], range(first, last))[0]
            want_x, _ = tiinterp.grid_sample_backward(
                np.ones((1, 2, *hw), np.float32), x_np, grid_np, **OPTIONS
            )
            grad_input_error = row_error(grad_x, want_x.astype(np.float64))
            record_property("peak_rss_gib", peak_rss_gib())
    finally:
        del grid, g, grad_x, grad_grid, grid_np
        release()
    record_property("grad_grid_row_error", grad_grid_error)
    record_property("grad_input_error", grad_input_error)
    assert grad_grid_error <= 1e-5, f"grad_grid rows {rows}: error {grad_grid_error:.3g}"
    assert grad_input_error <= 1e-6, f"grad_input vs the NumPy path: {grad_input_error:.3g}"
