"""Taichi kernels. One gather kernel serves every mode, the forward and the adjoint.

``resample_axis`` resamples one axis of an N-D array by an :class:`~tiinterp._taps.AxisTaps`
table. The forward applies it with each axis's table; the hand-written adjoint applies it
with the transposed tables (see ``_taps.py``); ``method="autodiff"`` runs Taichi's
``ti.ad`` reverse of this same kernel (``resample_axis.grad``).
"""

import taichi as ti


@ti.func
def _tap(weight, value):
    """``weight * value``, except that a zero weight gives 0 even for a NaN or Inf sample:
    an output is affected only by the samples it really reads."""
    return ti.select(weight != 0, weight * value, weight)


@ti.kernel
def resample_axis(
    source: ti.types.ndarray(),
    result: ti.types.ndarray(),
    axis: ti.template(),
    start: ti.types.ndarray(dtype=ti.i32, ndim=1),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
):
    """``result[..., o, ...] = sum_k weight[o, k] * source[..., start[o] + k, ...]`` on ``axis``."""
    for index in ti.grouped(result):
        o = index[axis]
        total = weight[o, 0] * 0  # a zero of the data dtype
        tap = index
        for k in range(count[o]):
            tap[axis] = start[o] + k
            total += _tap(weight[o, k], source[tap])
        result[index] = total


@ti.kernel
def copy_array(source: ti.types.ndarray(), target: ti.types.ndarray()):
    """``target[...] = source`` for any two array kinds of one shape, on the device."""
    for index in ti.grouped(target):
        target[index] = source[index]


@ti.kernel
def float64_probe(out: ti.types.ndarray(dtype=ti.f64, ndim=1)):
    """Writes 1/3 in float64; a device without 64-bit floats fails or rounds it to float32."""
    for i in out:
        out[i] = ti.f64(1.0) / ti.f64(3.0)


@ti.kernel
def copy_field_to_array(field: ti.template(), array: ti.types.ndarray()):
    for index in ti.grouped(array):
        array[index] = field[index]


@ti.kernel
def copy_array_to_field(array: ti.types.ndarray(), field: ti.template()):
    for index in ti.grouped(array):
        field[index] = array[index]


@ti.kernel
def add_array_to_field(array: ti.types.ndarray(), field: ti.template()):
    for index in ti.grouped(array):
        field[index] += array[index]


@ti.kernel
def add_array(source: ti.types.ndarray(), target: ti.types.ndarray()):
    for index in ti.grouped(target):
        target[index] += source[index]


# --- Fast kernels ---------------------------------------------------------------------------
# Taichi reloads an ndarray's data pointer after every store (it cannot rule out aliasing),
# which keeps LLVM from vectorising a plain element loop. Computing LANES neighbouring
# outputs together, loads first and stores last, lets LLVM's SLP vectoriser pack them.
# Tap loops are unrolled over a fixed width (``AxisTaps.fixed_width``); padding taps have
# zero weight, which ``_tap`` never applies, so they cannot spread a NaN.
LANES = 8
MAX_UNROLLED_TAPS = 16


@ti.func
def _combine_lines(source: ti.template(), p, first, line_weights, taps: ti.template(), q0):
    """``sum_k line_weights[k] * source[p, first + k, q0 : q0 + LANES]``."""
    total = ti.Vector([_tap(line_weights[0], source[p, first, q0 + lane])
                       for lane in ti.static(range(LANES))])
    for k in ti.static(range(1, taps)):
        total += ti.Vector([_tap(line_weights[k], source[p, first + k, q0 + lane])
                            for lane in ti.static(range(LANES))])
    return total


@ti.func
def _combine_line(source: ti.template(), p, first, line_weights, taps: ti.template(), q):
    total = _tap(line_weights[0], source[p, first, q])
    for k in ti.static(range(1, taps)):
        total += _tap(line_weights[k], source[p, first + k, q])
    return total


@ti.func
def _gather_lanes(line: ti.template(), a, b, start: ti.template(), weight: ti.template(),
                  taps: ti.template(), o0):
    """``line[a, b, start[o] + k]`` weighted by ``weight[o, k]``, for LANES outputs ``o``."""
    first = ti.Vector([start[o0 + lane] for lane in ti.static(range(LANES))])
    total = ti.Vector([_tap(weight[o0 + lane, 0], line[a, b, first[lane]])
                       for lane in ti.static(range(LANES))])
    for k in ti.static(range(1, taps)):
        total += ti.Vector([_tap(weight[o0 + lane, k], line[a, b, first[lane] + k])
                            for lane in ti.static(range(LANES))])
    return total


@ti.func
def _gather_one(line: ti.template(), a, b, start: ti.template(), weight: ti.template(),
                taps: ti.template(), o):
    total = _tap(weight[o, 0], line[a, b, start[o]])
    for k in ti.static(range(1, taps)):
        total += _tap(weight[o, k], line[a, b, start[o] + k])
    return total


@ti.func
def _gather_line_into(result: ti.template(), p, row, line: ti.template(), a, b,
                      start: ti.template(), weight: ti.template(), taps: ti.template()):
    """``result[p, row, :]`` = the last-axis resampling of ``line[a, b, :]``."""
    width = result.shape[2]
    for block in range(width // LANES):
        o0 = block * LANES
        values = _gather_lanes(line, a, b, start, weight, taps, o0)
        for lane in ti.static(range(LANES)):
            result[p, row, o0 + lane] = values[lane]
    for o in range(width // LANES * LANES, width):
        result[p, row, o] = _gather_one(line, a, b, start, weight, taps, o)


@ti.kernel
def resample_last_axis(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    start: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
    taps: ti.template(),
):
    """Resample the last axis of ``(P, R, W)`` by a fixed-width table."""
    for p, row in ti.ndrange(result.shape[0], result.shape[1]):
        _gather_line_into(result, p, row, source, p, row, start, weight, taps)


@ti.kernel
def resample_middle_axis(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    start: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
    taps: ti.template(),
):
    """Resample the middle axis of ``(P, L, Q)``: contiguous runs of Q, vectorised."""
    for p, o in ti.ndrange(result.shape[0], result.shape[1]):
        first = start[o]
        line_weights = ti.Vector([weight[o, k] for k in ti.static(range(taps))])
        width = result.shape[2]
        for block in range(width // LANES):
            q0 = block * LANES
            values = _combine_lines(source, p, first, line_weights, taps, q0)
            for lane in ti.static(range(LANES)):
                result[p, o, q0 + lane] = values[lane]
        for q in range(width // LANES * LANES, width):
            result[p, o, q] = _combine_line(source, p, first, line_weights, taps, q)


@ti.kernel
def resample_2d(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    scratch: ti.types.ndarray(ndim=3),
    row_start: ti.types.ndarray(dtype=ti.i32, ndim=1),
    row_weight: ti.types.ndarray(ndim=2),
    row_taps: ti.template(),
    col_start: ti.types.ndarray(dtype=ti.i32, ndim=1),
    col_weight: ti.types.ndarray(ndim=2),
    col_taps: ti.template(),
):
    """Resample both axes of ``(P, H, W)`` in one pass: for each output row, combine the
    input rows it reads into a per-worker scratch line (in cache), then resample that line.
    ``scratch`` is ``(workers, 1, W_in)``; each worker takes a contiguous run of rows.
    Taichi's CPU backend hands a thread at least 512 consecutive iterations of a parallel
    loop, so a few thousand workers are needed for the threads to share the work."""
    rows = result.shape[0] * result.shape[1]
    workers = scratch.shape[0]
    width = source.shape[2]
    for worker in range(workers):
        for r in range(worker * rows // workers, (worker + 1) * rows // workers):
            p = r // result.shape[1]
            o = r % result.shape[1]
            first = row_start[o]
            line_weights = ti.Vector([row_weight[o, k] for k in ti.static(range(row_taps))])
            for block in range(width // LANES):
                q0 = block * LANES
                values = _combine_lines(source, p, first, line_weights, row_taps, q0)
                for lane in ti.static(range(LANES)):
                    scratch[worker, 0, q0 + lane] = values[lane]
            for q in range(width // LANES * LANES, width):
                scratch[worker, 0, q] = _combine_line(source, p, first, line_weights, row_taps, q)
            _gather_line_into(result, p, o, scratch, worker, 0, col_start, col_weight, col_taps)


@ti.kernel
def gather_2d(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    row_index: ti.types.ndarray(dtype=ti.i32, ndim=1),
    col_index: ti.types.ndarray(dtype=ti.i32, ndim=1),
):
    """Nearest-neighbour resampling of both axes: ``result[p, o, q] = source[p, row_index[o],
    col_index[q]]``."""
    for p, o in ti.ndrange(result.shape[0], result.shape[1]):
        i = row_index[o]
        width = result.shape[2]
        for block in range(width // LANES):
            q0 = block * LANES
            values = ti.Vector([source[p, i, col_index[q0 + lane]] for lane in ti.static(range(LANES))])
            for lane in ti.static(range(LANES)):
                result[p, o, q0 + lane] = values[lane]
        for q in range(width // LANES * LANES, width):
            result[p, o, q] = source[p, i, col_index[q]]
