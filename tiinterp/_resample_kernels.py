"""The resampling kernels. One gather kernel serves every mode, the forward and the adjoint.

``resample_axis`` resamples one axis of an N-D array by an :class:`~tiinterp._taps.AxisTaps`
table (the generic path: GPU archs and Taichi ndarrays). The forward applies it with each
axis's table; the hand-written adjoint applies it with the transposed tables (see
``_taps.py``); ``method="autodiff"`` runs Taichi's ``ti.ad`` reverse of its accumulating form
``resample_axis_accumulate``. The fast kernels below serve host arrays on the CPU.
"""

from ._taichi import ti


@ti.kernel
def resample_axis(
    source: ti.types.ndarray(),
    result: ti.types.ndarray(),
    axis: ti.template(),
    index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
):
    """``result[..., o, ...] = sum_k weight[o, k] * source[..., index[o, k], ...]`` on
    ``axis``, for ``k < count[o]`` (an :class:`~tiinterp._taps.AxisTaps` table)."""
    for out in ti.grouped(result):
        o = out[axis]
        total = weight[o, 0] * 0  # a zero of the data dtype
        tap = out
        for k in range(count[o]):
            tap[axis] = index[o, k]
            total += weight[o, k] * source[tap]
        result[out] = total


@ti.kernel
def resample_axis_accumulate(
    source: ti.types.ndarray(),
    result: ti.types.ndarray(),
    axis: ti.template(),
    index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
    first: ti.i32,
    chunk: ti.i32,
):
    """``result +=`` the resampling of ``source`` on ``axis``: the form of
    ``resample_axis`` that ``method="autodiff"`` differentiates. Every (output, tap) pair is
    its own parallel iteration, so there is no loop inside the kernel body: Taichi's
    reverse mode then needs no autodiff stack, whose default depth (32) an antialiased
    downsampling window exceeds (measured: the process crashes). One launch covers the
    ``chunk`` result elements from flat index ``first`` (the caller splits the result so
    that ``chunk * taps`` stays below 2^31: Taichi's loop counter is 32-bit)."""
    dims = ti.static(len(result.shape))
    for flat_in_chunk, k in ti.ndrange(chunk, weight.shape[1]):
        out = ti.Vector([0] * dims)
        rest = first + flat_in_chunk
        for d in ti.static(range(dims - 1, -1, -1)):
            out[d] = rest % result.shape[d]
            rest //= result.shape[d]
        o = out[axis]
        if k < count[o]:
            tap = out
            tap[axis] = index[o, k]
            result[out] += weight[o, k] * source[tap]


# --- Fast kernels ---------------------------------------------------------------------------
# Taichi reloads an ndarray's data pointer after every store (it cannot rule out aliasing),
# which keeps LLVM from vectorising a plain element loop. Computing LANES neighbouring
# outputs together, loads first and stores last, roughly halves the time per output.
# Tap loops are unrolled over a fixed width (``AxisTaps.fixed_width``) with an index per
# tap, so padding taps can point at a sample the output reads anyway.
LANES = 8
MAX_UNROLLED_TAPS = 16
# Elements of a line that one parallel iteration of resample_middle_axis computes.
CHUNK = 1024


@ti.func
def _combine_lines(source: ti.template(), p, lines, line_weights, taps: ti.template(), q0):
    """``sum_k line_weights[k] * source[p, lines[k], q0 : q0 + LANES]``."""
    total = line_weights[0] * ti.Vector(
        [source[p, lines[0], q0 + lane] for lane in ti.static(range(LANES))]
    )
    for k in ti.static(range(1, taps)):
        total += line_weights[k] * ti.Vector(
            [source[p, lines[k], q0 + lane] for lane in ti.static(range(LANES))]
        )
    return total


@ti.func
def _combine_line(source: ti.template(), p, lines, line_weights, taps: ti.template(), q):
    total = line_weights[0] * source[p, lines[0], q]
    for k in ti.static(range(1, taps)):
        total += line_weights[k] * source[p, lines[k], q]
    return total


@ti.func
def _gather_lanes(
    line: ti.template(), a, b, index: ti.template(), weight: ti.template(), taps: ti.template(), o0
):
    """``sum_k weight[o, k] * line[a, b, index[o, k]]`` for the LANES outputs from ``o0``."""
    total = ti.Vector(
        [weight[o0 + lane, 0] * line[a, b, index[o0 + lane, 0]] for lane in ti.static(range(LANES))]
    )
    for k in ti.static(range(1, taps)):
        total += ti.Vector(
            [
                weight[o0 + lane, k] * line[a, b, index[o0 + lane, k]]
                for lane in ti.static(range(LANES))
            ]
        )
    return total


@ti.func
def _gather_one(
    line: ti.template(), a, b, index: ti.template(), weight: ti.template(), taps: ti.template(), o
):
    total = weight[o, 0] * line[a, b, index[o, 0]]
    for k in ti.static(range(1, taps)):
        total += weight[o, k] * line[a, b, index[o, k]]
    return total


@ti.func
def _gather_line_into(
    result: ti.template(),
    p,
    row,
    line: ti.template(),
    a,
    b,
    index: ti.template(),
    weight: ti.template(),
    taps: ti.template(),
):
    """``result[p, row, :]`` = the last-axis resampling of ``line[a, b, :]``."""
    width = result.shape[2]
    for block in range(width // LANES):
        o0 = block * LANES
        values = _gather_lanes(line, a, b, index, weight, taps, o0)
        for lane in ti.static(range(LANES)):
            result[p, row, o0 + lane] = values[lane]
    for o in range(width // LANES * LANES, width):
        result[p, row, o] = _gather_one(line, a, b, index, weight, taps, o)


@ti.func
def _combine_lines_into(
    result: ti.template(),
    a,
    b,
    source: ti.template(),
    p,
    lines,
    line_weights,
    taps: ti.template(),
    begin,
    end,
):
    """``result[a, b, begin:end]`` = the weighted sum of rows ``lines`` of ``source[p]``."""
    blocks = (end - begin) // LANES
    for block in range(blocks):
        q0 = begin + block * LANES
        values = _combine_lines(source, p, lines, line_weights, taps, q0)
        for lane in ti.static(range(LANES)):
            result[a, b, q0 + lane] = values[lane]
    for q in range(begin + blocks * LANES, end):
        result[a, b, q] = _combine_line(source, p, lines, line_weights, taps, q)


@ti.kernel
def resample_last_axis(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight: ti.types.ndarray(ndim=2),
    taps: ti.template(),
):
    """Resample the last axis of ``(P, R, W)`` by a fixed-width table."""
    for p, row in ti.ndrange(result.shape[0], result.shape[1]):
        _gather_line_into(result, p, row, source, p, row, index, weight, taps)


@ti.kernel
def resample_middle_axis(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight: ti.types.ndarray(ndim=2),
    taps: ti.template(),
):
    """Resample the middle axis of ``(P, L, Q)``: weighted sums of contiguous runs of Q,
    split into chunks so that even a few long lines (a depth pass) keep every thread busy."""
    width = result.shape[2]
    chunks = (width + CHUNK - 1) // CHUNK
    for p, o, chunk in ti.ndrange(result.shape[0], result.shape[1], chunks):
        lines = ti.Vector([index[o, k] for k in ti.static(range(taps))])
        line_weights = ti.Vector([weight[o, k] for k in ti.static(range(taps))])
        _combine_lines_into(
            result,
            p,
            o,
            source,
            p,
            lines,
            line_weights,
            taps,
            chunk * CHUNK,
            ti.min((chunk + 1) * CHUNK, width),
        )


@ti.kernel
def resample_2d(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    scratch: ti.types.ndarray(ndim=3),
    row_index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    row_weight: ti.types.ndarray(ndim=2),
    row_taps: ti.template(),
    col_index: ti.types.ndarray(dtype=ti.i32, ndim=2),
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
    for worker in range(workers):
        # worker * rows passes 2^31 from 2^19 rows on: split in 64-bit arithmetic.
        begin = ti.cast(ti.cast(worker, ti.i64) * rows // workers, ti.i32)
        end = ti.cast(ti.cast(worker + 1, ti.i64) * rows // workers, ti.i32)
        for r in range(begin, end):
            p = r // result.shape[1]
            o = r % result.shape[1]
            lines = ti.Vector([row_index[o, k] for k in ti.static(range(row_taps))])
            line_weights = ti.Vector([row_weight[o, k] for k in ti.static(range(row_taps))])
            _combine_lines_into(
                scratch, worker, 0, source, p, lines, line_weights, row_taps, 0, source.shape[2]
            )
            _gather_line_into(result, p, o, scratch, worker, 0, col_index, col_weight, col_taps)


@ti.kernel
def gather_2d(
    source: ti.types.ndarray(ndim=3),
    result: ti.types.ndarray(ndim=3),
    row_index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    col_index: ti.types.ndarray(dtype=ti.i32, ndim=2),
):
    """Nearest-neighbour resampling of both axes:
    ``result[p, o, q] = source[p, row_index[o, 0], col_index[q, 0]]``."""
    for p, o in ti.ndrange(result.shape[0], result.shape[1]):
        i = row_index[o, 0]
        width = result.shape[2]
        for block in range(width // LANES):
            q0 = block * LANES
            values = ti.Vector(
                [source[p, i, col_index[q0 + lane, 0]] for lane in ti.static(range(LANES))]
            )
            for lane in ti.static(range(LANES)):
                result[p, o, q0 + lane] = values[lane]
        for q in range(width // LANES * LANES, width):
            result[p, o, q] = source[p, i, col_index[q, 0]]
