"""The fused gather kernel of the device path: up to three separable passes in one launch.

``gather`` computes, for every output element, the nested sums of Note [Fused summation
order] straight from the source: no intermediate array, one launch per group of passes,
tables as arrays on the device, tap counts fixed at compile time where the arch's compiler
unrolls them profitably (``_device_path.UNROLLED_ARCHS``). The adjoint is the same
kernel over the transposed tables (``_taps.AxisTaps.transposed``): every input element
gathers what it owes, so there are no atomics and the result is bit-identical run to run.

Note [Fused summation order]
----------------------------
The separable path computes pass ``p0`` (axis ``a0``) into an intermediate ``T``, then pass
``p1`` over ``T``: ``out[o1] = sum_k1 w1[o1, k1] * T[i1[o1, k1]]`` with ``T[j] = sum_k0
w0[o0, k0] * x[i0[o0, k0], j]``, each sum from 0 in tap order and rounded to the data's
dtype. The fused kernel evaluates exactly those sums in exactly that order, recomputing
``T`` at each outer tap instead of storing it, so it rounds like the separable path step
for step. What can differ is contraction: a compiler may fuse ``total + w * x`` into one
fused multiply-add (LLVM does on CUDA and on CPUs with FMA), which rounds once instead of
twice. Each such contraction moves a sum by at most half an ulp of the partial sum, so a
result differs from the separable CPU path's by at most ``n_taps * eps * sum_k |w_k x_k|``
per pass (``docs/semantics.md``, "Summation order on GPU archs").

Rows of a transposed table that no output reads (``_taps.AxisTaps.empty_outputs``) are
marked by an index one past the last sample; their outputs are written as exactly 0 (``0 *
NaN`` would not be 0).
"""

from ._taichi import ScalarField, has_offset, index_offset, ti


@ti.func
def _tap_count(count, fixed: ti.template()):
    """``fixed`` where it is a compile-time count (the device compiler then unrolls the tap
    loop), else the run-time ``count``."""
    if ti.static(fixed > 0):
        return fixed
    else:
        return count


@ti.func
def _load(data: ti.template(), at):
    """``data`` at position ``at``: a field's index is shifted by its ``offset=``."""
    if ti.static(has_offset(data)):
        return data[at + ti.Vector(ti.static(index_offset(data)))]
    else:
        return data[at]


@ti.func
def _store(data: ti.template(), at, value, accumulate: ti.template()):
    index = at + ti.Vector(ti.static(index_offset(data)))
    if ti.static(accumulate):
        data[index] += value
    else:
        data[index] = value


@ti.func
def _axis_sum(
    source: ti.template(),
    at,
    index: ti.template(),
    weight: ti.template(),
    o,
    axis: ti.template(),
    count,
    fixed: ti.template(),
    zero,
):
    """``sum_k weight[o, k] * source[at with at[axis] = index[o, k]]``, taps in order."""
    total = zero
    for k in range(_tap_count(count, fixed)):
        at[axis] = index[o, k]
        total += weight[o, k] * _load(source, at)
    return total


@ti.func
def _fused_value(
    source: ti.template(),
    out,
    tables: ti.template(),
    axes: ti.template(),
    counts,
    fixed: ti.template(),
    zero,
):
    """The value at output index ``out`` of the passes on ``axes`` (innermost first)."""
    at = out
    o0 = out[axes[0]]
    value = zero
    if ti.static(len(axes) == 1):
        value = _axis_sum(source, at, tables[0], tables[1], o0, axes[0], counts[0], fixed[0], zero)
    elif ti.static(len(axes) == 2):
        o1 = out[axes[1]]
        for k1 in range(_tap_count(counts[1], fixed[1])):
            at[axes[1]] = tables[2][o1, k1]
            inner = _axis_sum(
                source, at, tables[0], tables[1], o0, axes[0], counts[0], fixed[0], zero
            )
            value += tables[3][o1, k1] * inner
    else:
        o1 = out[axes[1]]
        o2 = out[axes[2]]
        for k2 in range(_tap_count(counts[2], fixed[2])):
            at[axes[2]] = tables[4][o2, k2]
            middle = zero
            for k1 in range(_tap_count(counts[1], fixed[1])):
                at[axes[1]] = tables[2][o1, k1]
                inner = _axis_sum(
                    source, at, tables[0], tables[1], o0, axes[0], counts[0], fixed[0], zero
                )
                middle += tables[3][o1, k1] * inner
            value += tables[5][o2, k2] * middle
    return value


@ti.func
def _is_empty(source: ti.template(), out, tables: ti.template(), axes: ti.template()):
    empty = 0
    for d in ti.static(range(len(axes))):
        empty |= ti.cast(tables[2 * d][out[axes[d]], 0] == source.shape[axes[d]], ti.i32)
    return empty != 0


@ti.func
def _gather_into(
    source: ti.template(),
    result: ti.template(),
    tables: ti.template(),
    axes: ti.template(),
    fixed: ti.template(),
    lanes: ti.template(),
    threads,
    zero,
    accumulate: ti.template(),
):
    dims = ti.static(len(result.shape))
    counts = ti.Vector([tables[1].shape[1], tables[3].shape[1], tables[5].shape[1]])
    last = result.shape[dims - 1]
    blocks = (last + lanes - 1) // lanes
    for t in range(threads):
        row = t // blocks
        out = ti.Vector([0] * dims)
        out[dims - 1] = (t - row * blocks) * lanes
        for d in ti.static(range(dims - 2, -1, -1)):
            out[d] = row % result.shape[d]
            row //= result.shape[d]
        start = out[dims - 1]
        for lane in range(lanes):
            out[dims - 1] = start + lane
            if out[dims - 1] < last:
                value = zero
                if not _is_empty(source, out, tables, axes):
                    value = _fused_value(source, out, tables, axes, counts, fixed, zero)
                _store(result, out, value, accumulate)


@ti.kernel
def gather(
    source: ti.types.ndarray(),
    result: ti.types.ndarray(),
    index0: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight0: ti.types.ndarray(ndim=2),
    index1: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight1: ti.types.ndarray(ndim=2),
    index2: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight2: ti.types.ndarray(ndim=2),
    axes: ti.template(),
    fixed: ti.template(),
    lanes: ti.template(),
    threads: ti.i32,
):
    """``result`` = the passes on ``axes`` (innermost first) applied to ``source``, by the
    fixed-width tables ``index*``/``weight*`` (unused pairs are ignored), with ``threads``
    threads of ``lanes`` consecutive outputs each. ``fixed``: per pass, its tap count as a
    compile-time constant, or 0 to read it from the table's width at run time."""
    tables = ti.static((index0, weight0, index1, weight1, index2, weight2))
    _gather_into(source, result, tables, axes, fixed, lanes, threads, weight0[0, 0] * 0, False)


@ti.func
def _zero_element(data: ti.template()):
    """A zero of ``data``'s element type (scalar, vector or matrix)."""
    if ti.static(isinstance(data, ScalarField)):
        return ti.cast(0, data.dtype)
    elif ti.static(data.ndim == 1):
        return ti.Vector.zero(data.dtype, data.n)
    else:
        return ti.Matrix.zero(data.dtype, data.n, data.m)


@ti.kernel
def gather_fields(
    source: ti.template(),
    result: ti.template(),
    index0: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight0: ti.types.ndarray(ndim=2),
    index1: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight1: ti.types.ndarray(ndim=2),
    index2: ti.types.ndarray(dtype=ti.i32, ndim=2),
    weight2: ti.types.ndarray(ndim=2),
    axes: ti.template(),
    fixed: ti.template(),
    lanes: ti.template(),
    threads: ti.i32,
    accumulate: ti.template(),
):
    """:func:`gather` from one dense field into another, in place (``accumulate``: added
    to ``result``), whole elements at a time: a vector or matrix element's components are
    summed with the same weights, in the same order, as the scalar arrays' would be.
    Taichi compiles it once per pair of fields."""
    tables = ti.static((index0, weight0, index1, weight1, index2, weight2))
    zero = _zero_element(result)
    _gather_into(source, result, tables, axes, fixed, lanes, threads, zero, accumulate)
