"""The fused gather kernel of the device path: up to three separable passes in one launch.

Note [Threads over positions, planes inside]
--------------------------------------------
A launch's threads are laid out as a GPU wants them (the shape of PyTorch's own CUDA
upsampling kernels): consecutive threads on consecutive output positions of the trailing
axes, from the first axis a pass changes to the last (``(H_out, W_out)`` of an NCHW
resize), so that a warp's loads and stores fall on neighbouring addresses; and each thread
loops over the planes, the leading axes no pass changes (N and C there). Its index
arithmetic, and on the archs that unroll the tap loops its taps too, are done once and
serve every plane. Measured on an NVIDIA H200 for bilinear 2x (``../shared/gpu/
kernel_forms.py``): 0.65x PyTorch's time on (32, 63, 512, 512) -> 1024^2, where 4
consecutive outputs per thread (this kernel's form before) took 1.33x and one output per
thread 1.44x. Where the planes are so many and the positions so few that too few threads
would run, the planes are cut into chunks of ``planes_per_thread``, one thread per chunk
and position (1: a thread per output).

``gather`` computes, for every output element, the nested sums of Note [Fused summation
order] straight from the source: no intermediate array, one launch per group of passes,
tables as arrays on the device, tap counts fixed at compile time where the arch's compiler
unrolls them profitably (``_engine.device_path.UNROLLED_ARCHS``). The adjoint is the same
kernel over the transposed tables (``_rules.taps.AxisTaps.transposed``): every input element
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

Rows of a transposed table that no output reads (``_rules.taps.AxisTaps.empty_outputs``) are
marked by an index one past the last sample; their outputs are written as exactly 0 (``0 *
NaN`` would not be 0).
"""

from .._runtime.taichi import ScalarField, has_offset, index_offset, ti


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
def _taps_of(index: ti.template(), weight: ti.template(), o, width: ti.template()):
    """Row ``o`` of a table of the compile-time ``width``, as register vectors."""
    return (
        ti.Vector([index[o, k] for k in ti.static(range(width))]),
        ti.Vector([weight[o, k] for k in ti.static(range(width))]),
    )


@ti.func
def _axis_sum_held(
    source: ti.template(), at, axis: ti.template(), index, weight, width: ti.template(), zero
):
    """:func:`_axis_sum` over taps held in registers (the same sum, in the same order)."""
    total = zero
    for k in ti.static(range(width)):
        at[axis] = index[k]
        total += weight[k] * _load(source, at)
    return total


@ti.func
def _two_axes_held(
    source: ti.template(), at, axes: ti.template(), i0, w0, i1, w1, f: ti.template(), zero
):
    """The sum over the passes on ``axes[0]`` and ``axes[1]`` at ``at``, taps held in
    registers: each outer tap's weight times the inner pass's sum, in tap order."""
    value = zero
    for k1 in ti.static(range(f[1])):
        at[axes[1]] = i1[k1]
        value += w1[k1] * _axis_sum_held(source, at, axes[0], i0, w0, f[0], zero)
    return value


@ti.func
def _next_plane(out: ti.template(), shape: ti.template(), lead: ti.template()):
    """Advance ``out``'s leading ``lead`` axes to the next plane, last axis fastest."""
    carry = 1
    for d in ti.static(range(lead - 1, -1, -1)):
        if carry:
            out[d] += 1
            carry = 0
            if out[d] == shape[d]:
                out[d] = 0
                carry = 1


def _all_positive(widths: tuple[int, ...]) -> bool:
    # Plain Python, for ti.static: inside a kernel ``min`` and ``all`` are Taichi's.
    return all(width > 0 for width in widths)


@ti.func
def _planes(
    source: ti.template(),
    result: ti.template(),
    tables: ti.template(),
    axes: ti.template(),
    fixed: ti.template(),
    lead: ti.template(),
    out: ti.template(),
    count,
    zero,
    accumulate: ti.template(),
):
    """Write ``count`` planes' outputs at the position ``out`` (its leading axes at the
    first plane): the sums of :func:`_fused_value`, in its order, with the taps loaded
    once, before the loop, where ``fixed`` gives every pass a compile-time width."""
    empty = _is_empty(source, out, tables, axes)
    n = ti.static(len(axes))
    f = ti.static(fixed)
    if ti.static(not _all_positive(f[:n])):
        counts = ti.Vector([tables[1].shape[1], tables[3].shape[1], tables[5].shape[1]])
        for _ in range(count):
            value = zero
            if not empty:
                value = _fused_value(source, out, tables, axes, counts, fixed, zero)
            _store(result, out, value, accumulate)
            _next_plane(out, result.shape, lead)
    elif ti.static(n == 1):
        i0, w0 = _taps_of(tables[0], tables[1], out[axes[0]], f[0])
        for _ in range(count):
            value = zero
            if not empty:
                value = _axis_sum_held(source, out, axes[0], i0, w0, f[0], zero)
            _store(result, out, value, accumulate)
            _next_plane(out, result.shape, lead)
    elif ti.static(n == 2):
        i0, w0 = _taps_of(tables[0], tables[1], out[axes[0]], f[0])
        i1, w1 = _taps_of(tables[2], tables[3], out[axes[1]], f[1])
        for _ in range(count):
            value = zero
            if not empty:
                value = _two_axes_held(source, out, axes, i0, w0, i1, w1, f, zero)
            _store(result, out, value, accumulate)
            _next_plane(out, result.shape, lead)
    else:
        i0, w0 = _taps_of(tables[0], tables[1], out[axes[0]], f[0])
        i1, w1 = _taps_of(tables[2], tables[3], out[axes[1]], f[1])
        i2, w2 = _taps_of(tables[4], tables[5], out[axes[2]], f[2])
        for _ in range(count):
            value = zero
            if not empty:
                at = out
                for k2 in ti.static(range(f[2])):
                    at[axes[2]] = i2[k2]
                    value += w2[k2] * _two_axes_held(source, at, axes, i0, w0, i1, w1, f, zero)
            _store(result, out, value, accumulate)
            _next_plane(out, result.shape, lead)


@ti.func
def _gather_into(
    source: ti.template(),
    result: ti.template(),
    tables: ti.template(),
    axes: ti.template(),
    fixed: ti.template(),
    lead: ti.template(),
    planes_per_thread,
    threads,
    zero,
    accumulate: ti.template(),
):
    """Note [Threads over positions, planes inside]: the axes before ``lead`` are the
    planes, ``planes_per_thread`` of them per thread."""
    dims = ti.static(len(result.shape))
    positions = 1
    for d in ti.static(range(lead, dims)):
        positions *= result.shape[d]
    planes = 1
    for d in ti.static(range(lead)):
        planes *= result.shape[d]
    for t in range(threads):
        chunk = t // positions
        rest = t - chunk * positions
        out = ti.Vector([0] * dims)
        for d in ti.static(range(dims - 1, lead - 1, -1)):
            out[d] = rest % result.shape[d]
            rest //= result.shape[d]
        first = chunk * planes_per_thread
        plane = first
        for d in ti.static(range(lead - 1, -1, -1)):
            out[d] = plane % result.shape[d]
            plane //= result.shape[d]
        count = ti.min(planes_per_thread, planes - first)
        _planes(source, result, tables, axes, fixed, lead, out, count, zero, accumulate)


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
    lead: ti.template(),
    planes_per_thread: ti.i32,
    threads: ti.i32,
):
    """``result`` = the passes on ``axes`` (innermost first) applied to ``source``, by the
    fixed-width tables ``index*``/``weight*`` (unused pairs are ignored). ``fixed``: per
    pass, its tap count as a compile-time constant, or 0 to read it from the table's width
    at run time. ``threads`` threads, each over ``planes_per_thread`` planes (the axes
    before ``lead``) at one position: Note [Threads over positions, planes inside]."""
    tables = ti.static((index0, weight0, index1, weight1, index2, weight2))
    zero = weight0[0, 0] * 0
    _gather_into(source, result, tables, axes, fixed, lead, planes_per_thread, threads, zero, False)


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
    lead: ti.template(),
    planes_per_thread: ti.i32,
    threads: ti.i32,
    accumulate: ti.template(),
):
    """:func:`gather` from one dense field into another, in place (``accumulate``: added
    to ``result``), whole elements at a time: a vector or matrix element's components are
    summed with the same weights, in the same order, as the scalar arrays' would be.
    Taichi compiles it once per pair of fields."""
    tables = ti.static((index0, weight0, index1, weight1, index2, weight2))
    zero = _zero_element(result)
    _gather_into(
        source, result, tables, axes, fixed, lead, planes_per_thread, threads, zero, accumulate
    )
