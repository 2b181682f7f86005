"""Taichi kernels of ``grid_sample``: PyTorch's ``F.grid_sample`` for 2-D and 3-D inputs.

Per axis, a grid value ``g`` in ``[-1, 1]`` becomes a source coordinate (PyTorch's
``grid_sampler_compute_source_index``), then taps and weights: 1 tap for ``nearest``
(round half to even), 2 for linear, 4 for Keys cubic (``A = -0.75``, 2-D only). The
forward, its hand-written adjoint (input gradient and grid gradient) and Taichi's ``ti.ad``
of the forward all use the same per-axis functions below.

Layouts: ``source (N, C, *S)``; ``grid (N, *P, D)`` with component 0 along the last axis
(x, width); ``result (N, C, *P)``. ``P`` is any number of axes (one flattened axis for host
arrays, the grid's own axes for Taichi ndarrays); the kernels walk its points in C order.
"""

import itertools
from dataclasses import dataclass
from typing import Any

from .._rules.filters import (
    BORDER,
    CUBIC,
    LINEAR,
    NEAREST,
    REFLECTION,
    ZEROS,
)
from .._runtime.taichi import ti
from .filter_funcs import DEVICE_FORMS, clamp_index

# Keys' cubic with PyTorch's A = -0.75 and its slope, from the one table of filters.
_cubic_weight = DEVICE_FORMS["keys_pytorch"].weight
_cubic_slope = DEVICE_FORMS["keys_pytorch"].slope

# Taps per axis of each mode.
TAPS = {NEAREST: 1, LINEAR: 2, CUBIC: 4}
# PyTorch maps a non-finite coordinate to -100 before casting it to an index, so it lands
# outside the input ("safe_downgrade_to_int_range").
_OUTSIDE = -100.0


@dataclass(frozen=True)
class SamplerStatics:
    """The kernels' compile-time arguments (one ``ti.template()``; each distinct value
    compiles its own kernel).

    ``nan_rules``: apply PyTorch's NaN rules, which test bits; Taichi's autodiff cannot
    differentiate a bit cast, so the kernels it differentiates run without them.
    ``backward``: the NaN clipping of PyTorch's backward passes (see ``_clip``).
    ``differentiated``: the forward as Taichi's autodiff differentiates it (see
    ``grid_sample_forward``).
    """

    mode: int  # NEAREST, LINEAR or CUBIC
    padding: int  # ZEROS, BORDER or REFLECTION
    align_corners: bool
    real: Any  # ti.f32 or ti.f64
    nan_rules: bool = True
    backward: bool = False
    differentiated: bool = False


@ti.func
def _is_nan(x, s: ti.template()):
    """NaN test on the bits: Taichi compiles with fast-math, under which ``x != x`` is
    folded to False."""
    nan = False
    if ti.static(not s.nan_rules):
        pass
    elif ti.static(s.real == ti.f32):
        nan = (ti.bit_cast(x, ti.i32) & 0x7FFFFFFF) > 0x7F800000
    else:
        nan = (ti.bit_cast(x, ti.i64) & ti.i64(0x7FFFFFFFFFFFFFFF)) > ti.i64(0x7FF0000000000000)
    return nan


@ti.func
def _is_finite(x, s: ti.template()):
    finite = True
    if ti.static(not s.nan_rules):
        pass
    elif ti.static(s.real == ti.f32):
        finite = (ti.bit_cast(x, ti.i32) & 0x7F800000) != 0x7F800000
    else:
        finite = (ti.bit_cast(x, ti.i64) & ti.i64(0x7FF0000000000000)) != ti.i64(0x7FF0000000000000)
    return finite


@ti.func
def _quiet_nan(s: ti.template()):
    """A NaN of the data's dtype, from its bits: fast-math folds arithmetic that makes one."""
    nan = ti.cast(0.0, s.real)
    if ti.static(s.real == ti.f32):
        nan = ti.bit_cast(ti.i32(0x7FC00000), ti.f32)
    else:
        nan = ti.bit_cast(ti.i64(0x7FF8000000000000), ti.f64)
    return nan


@ti.func
def _unnormalize(g, size, align_corners: ti.template()):
    result = ((g + 1.0) / 2.0) * (size - 1)
    if ti.static(not align_corners):
        result = ((g + 1.0) * size - 1.0) / 2.0
    return result


@ti.func
def _unnormalize_slope(size, align_corners: ti.template()):
    slope = (size - 1) / 2.0
    if ti.static(not align_corners):
        slope = size / 2.0
    return slope


@ti.func
def _clip(x, size, s: ti.template()):
    """``min(size - 1, max(x, 0))`` and the slope PyTorch gives it: 0 at and beyond either
    end. A NaN follows PyTorch's reference code, which differs between its passes: the
    forward's ``std::min/max`` give ``size - 1``, the backward's comparisons keep NaN (the
    point then reads nothing). At either end the value is the end's constant, not ``x``,
    so that ``ti.ad`` takes PyTorch's slope 0 there too (Note [Slopes at the kinks] in
    filter_funcs.py)."""
    high = size - 1.0
    inside = (x > 0) & (x < high)
    nan_to = high
    if ti.static(s.backward):
        nan_to = x
    clipped = ti.select(_is_nan(x, s), nan_to, ti.select(inside, x, ti.select(x <= 0, 0.0, high)))
    return clipped, ti.select(inside, 1.0, 0.0)


@ti.func
def _reflect(x, twice_low, twice_high):
    """PyTorch's ``reflect_coordinates`` with its slope (+1 or -1)."""
    result = x * 0.0
    slope = 0.0
    if twice_low != twice_high:
        low = twice_low / 2.0
        span = (twice_high - twice_low) / 2.0
        shifted = x - low
        sign = ti.select(shifted < 0, -1.0, 1.0)
        # Not ti.abs, whose ti.ad slope at 0 is 0: PyTorch's is +1 there.
        shifted = shifted * sign
        flips = ti.floor(shifted / span)
        extra = shifted - span * flips
        even = ti.cast(flips, ti.i32) % 2 == 0
        result = ti.select(even, extra + low, span - extra + low)
        slope = ti.select(even, sign, -sign)
    return result, slope


@ti.func
def _pad_coordinate(x, size, s: ti.template()):
    """Apply border / reflection padding to a source coordinate; returns it and its slope."""
    slope = 1.0
    if ti.static(s.padding == BORDER):
        x, slope = _clip(x, size, s)
    if ti.static(s.padding == REFLECTION):
        reflect_slope = 1.0
        if ti.static(s.align_corners):
            x, reflect_slope = _reflect(x, 0.0, 2.0 * (size - 1))
        else:
            x, reflect_slope = _reflect(x, -1.0, 2.0 * size - 1.0)
        clip_slope = 1.0
        x, clip_slope = _clip(x, size, s)
        slope = reflect_slope * clip_slope
    return x, slope


@ti.func
def _round_half_even(x):
    r = ti.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = ti.cast(r, ti.i32) % 2 != 0
    return ti.select(tie & odd, r - 1.0, r)


@ti.func
def _finite_or_outside(x, s: ti.template()):
    return ti.select(_is_finite(x, s), x, _OUTSIDE)


@ti.func
def _axis_taps(g, size, s: ti.template()):
    """For one axis: tap indices, weights, d(weight)/d(g), and whether each tap is inside.

    A tap outside the input reads 0 (PyTorch multiplies its weight by 0 rather than
    skipping it, so a NaN weight still makes the output NaN).
    """
    taps = ti.static(TAPS[s.mode])
    index = ti.Vector([0] * taps)
    # Typed zeros, not ``g * 0.0``: that is NaN for a NaN coordinate unless fast-math folds
    # it (Taichi 1.7.4 does, taichi-forge does not), and nearest's slopes stay at 0.
    weight = ti.Vector([ti.cast(0.0, s.real)] * taps)
    slope = ti.Vector([ti.cast(0.0, s.real)] * taps)
    valid = ti.Vector([0] * taps)
    if ti.static(s.mode == CUBIC):
        # Bicubic pads each tap, not the coordinate. A NaN or infinite coordinate gives NaN
        # weights (as in PyTorch, where t = x - floor(x) is NaN for both): the output, the
        # grid gradient and the input gradient at the taps that exist are NaN. The kernels
        # make the first two explicit (see _point_taps).
        x = _unnormalize(g, size, s.align_corners)
        nan = ~_is_finite(x, s)
        base = ti.floor(_finite_or_outside(x, s))
        t = x - ti.floor(x)
        d = _unnormalize_slope(size, s.align_corners)
        # PyTorch's (CPU) bicubic pads the taps of a NaN or infinite coordinate to index 0
        # (reflection; border for NaN and -inf), to the last index (border, +inf), or
        # leaves them outside (zeros) (measured, torch 2.13).
        nan_tap = _OUTSIDE if ti.static(s.padding == ZEROS) else 0.0
        if ti.static(s.padding == BORDER):
            nan_tap = ti.select(x > 0, size - 1.0, 0.0)
        quiet_nan = _quiet_nan(s)
        for k in ti.static(range(4)):
            tap, _ = _pad_coordinate(base - 1.0 + k, size, s)
            tap = ti.select(nan, nan_tap, _finite_or_outside(tap, s))
            index[k] = ti.cast(tap, ti.i32)
            weight[k] = ti.select(nan, quiet_nan, _cubic_weight(t - (k - 1)))
            slope[k] = ti.select(nan, quiet_nan, _cubic_slope(t - (k - 1)) * d)
            valid[k] = ti.cast((tap >= 0) & (tap <= size - 1), ti.i32)
    else:
        x = _unnormalize(g, size, s.align_corners)
        x, pad_slope = _pad_coordinate(x, size, s)
        x = _finite_or_outside(x, s)
        d = _unnormalize_slope(size, s.align_corners) * pad_slope
        if ti.static(s.mode == NEAREST):
            r = _round_half_even(x)
            index[0] = ti.cast(r, ti.i32)
            weight[0] = 1.0
            valid[0] = ti.cast((r >= 0) & (r <= size - 1), ti.i32)
        else:
            base = ti.floor(x)
            t = x - base
            for k in ti.static(range(2)):
                index[k] = ti.cast(base, ti.i32) + k
                valid[k] = ti.cast((base + k >= 0) & (base + k <= size - 1), ti.i32)
            weight[0] = 1.0 - t
            weight[1] = t
            slope[0] = -d
            slope[1] = d
    return index, weight, slope, valid


@ti.func
def _read(source: ti.template(), n, c, index):
    """``source[n, c, *index]``, with the index clamped so that taps outside can be read."""
    dims = ti.static(index.n)
    safe = ti.Vector([clamp_index(index[a], source.shape[2 + a]) for a in ti.static(range(dims))])
    if ti.static(dims == 2):
        return source[n, c, safe[0], safe[1]]
    else:
        return source[n, c, safe[0], safe[1], safe[2]]


@ti.func
def _at(array: ti.template(), a, b, c, middle, last):
    """The index of element ``(a, b, c)`` of ``array`` seen as ``(-1, middle, last)`` in C
    order (a grid's ``(N, P, D)``, a result's ``(N, C, P)``). Validation keeps every array
    below 2^31 elements, so the flat index fits the 32-bit arithmetic."""
    rank = ti.static(len(array.shape))
    index = ti.Vector([0] * rank)
    if ti.static(rank == 3):
        index = ti.Vector([a, b, c])
    else:
        rest = (a * middle + b) * last + c
        for d in ti.static(range(rank - 1, -1, -1)):
            index[d] = rest % array.shape[d]
            rest //= array.shape[d]
    return index


@ti.func
def _coordinate(grid: ti.template(), n, p, component, points):
    return grid[_at(grid, n, p, component, points, grid.shape[ti.static(len(grid.shape) - 1)])]


@ti.func
def _point_taps(source: ti.template(), grid: ti.template(), n, p, points, s: ti.template()):
    """Per array axis (depth, height, width order) the tap tables of point ``p``: matrices of
    shape (dims, taps). Grid component 0 is x, along the last axis."""
    dims = ti.static(len(source.shape) - 2)
    taps = ti.static(TAPS[s.mode])
    zero = ti.cast(0.0, s.real)
    index = ti.Matrix([[0] * taps for _ in ti.static(range(dims))])
    weight = ti.Matrix([[zero] * taps for _ in ti.static(range(dims))])
    slope = ti.Matrix([[zero] * taps for _ in ti.static(range(dims))])
    valid = ti.Matrix([[0] * taps for _ in ti.static(range(dims))])
    nan = False
    for a in ti.static(range(dims)):
        i, w, sl, v = _axis_taps(
            _coordinate(grid, n, p, dims - 1 - a, points), source.shape[2 + a], s
        )
        for k in ti.static(range(taps)):
            index[a, k] = i[k]
            weight[a, k] = w[k]
            slope[a, k] = sl[k]
            valid[a, k] = v[k]
        nan |= _is_nan(w[0], s)
    return index, weight, slope, valid, nan


@ti.func
def _product_tap(index, weight, valid, combo: ti.template()):
    """Weight, inside flag and index of the tensor-product tap ``combo`` (one tap per axis)."""
    dims = ti.static(len(combo))
    w = weight[0, combo[0]]
    ok = valid[0, combo[0]]
    for a in ti.static(range(1, dims)):
        w *= weight[a, combo[a]]
        ok &= valid[a, combo[a]]
    return w, ok, ti.Vector([index[a, combo[a]] for a in ti.static(range(dims))])


@ti.func
def _nan_of(weight):
    """A NaN of the weights' dtype, read off a point whose weights are NaN (bicubic)."""
    return weight[0, 0] + weight[1, 0]


@ti.func
def _sample_channel(
    source: ti.template(),
    result: ti.template(),
    n,
    c,
    p,
    points,
    index,
    weight,
    valid,
    nan,
    s: ti.template(),
):
    """``result[n, c, p]`` from point ``p``'s taps."""
    dims = ti.static(len(source.shape) - 2)
    taps = ti.static(TAPS[s.mode])
    total = ti.cast(0.0, s.real)
    for combo in ti.static(ti.grouped(ti.ndrange(*([taps] * dims)))):
        w, ok, tap = _product_tap(index, weight, valid, combo)
        total += w * ti.select(ok != 0, _read(source, n, c, tap), 0.0)
    # Fast-math may drop a NaN weight times a zero; keep PyTorch's NaN.
    result[_at(result, n, c, p, source.shape[1], points)] = ti.select(nan, _nan_of(weight), total)


@ti.kernel
def forward_kernel(
    source: ti.types.ndarray(),
    grid: ti.types.ndarray(),
    result: ti.types.ndarray(),
    points: ti.i32,
    c_first: ti.i32,
    c_last: ti.i32,
    s: ti.template(),
):
    """``result[n, c, p]`` = the input sampled at grid point ``p`` (``points`` per item), for
    the channels ``c_first <= c < c_last`` (windows of channels: ``_engine/grid_path.py``).

    One thread per point, consecutive threads on consecutive points (so on consecutive
    outputs of each channel), the point's taps computed once and the channels looped over
    inside, as PyTorch's CUDA kernel does. Where Taichi's autodiff differentiates it
    (``s.differentiated``) the taps are computed again for every channel: no local value
    may cross the loop over channels, or Taichi's reverse-mode autodiff of the grid gets it
    wrong (measured)."""
    for n, p in ti.ndrange(grid.shape[0], points):
        if ti.static(s.differentiated):
            for c in range(c_first, c_last):
                index, weight, _, valid, nan = _point_taps(source, grid, n, p, points, s)
                _sample_channel(source, result, n, c, p, points, index, weight, valid, nan, s)
        else:
            index, weight, _, valid, nan = _point_taps(source, grid, n, p, points, s)
            for c in range(c_first, c_last):
                _sample_channel(source, result, n, c, p, points, index, weight, valid, nan, s)


def tap_combos(taps: int, dims: int) -> list[tuple[int, ...]]:
    """The tensor-product taps of a point (one tap per axis), in the order the adjoint sums
    them: the last axis fastest."""
    return list(itertools.product(range(taps), repeat=dims))


@ti.func
def _pixel(index, source: ti.template()):
    """The flat position of spatial ``index`` within one (n, c) plane of ``source``."""
    flat = index[0]
    for a in ti.static(range(1, index.n)):
        flat = flat * source.shape[2 + a] + index[a]
    return flat


@ti.kernel
def adjoint_entries(
    source: ti.types.ndarray(),
    grid: ti.types.ndarray(),
    table: ti.types.ndarray(),
    weights: ti.types.ndarray(),
    first: ti.i32,
    count: ti.i32,
    points: ti.i32,
    item: ti.i32,
    outside: ti.i32,
    s: ti.template(),
):
    """For the ``count`` flat points from ``first`` (``n * points + p``), one entry per tap:
    ``table[e]`` the pixel it reads, counted from item ``item``'s first (``outside`` if it
    reads nothing), ``weights[e]`` its weight; ``e`` is (point - first, tap) in C order."""
    dims = ti.static(len(source.shape) - 2)
    combos = ti.static(tap_combos(TAPS[s.mode], dims))
    taps = ti.static(len(combos))
    pixels = 1
    for a in ti.static(range(dims)):
        pixels *= source.shape[2 + a]
    for j in range(count):
        n = (first + j) // points
        p = first + j - n * points
        index, weight, _, valid, _ = _point_taps(source, grid, n, p, points, s)
        for k in ti.static(range(len(combos))):
            w, ok, tap = _product_tap(index, weight, valid, ti.static(combos[k]))
            key = outside
            if ok != 0:
                key = (n - item) * pixels + _pixel(tap, source)
            table[j * taps + k] = key
            weights[j * taps + k] = w


@ti.func
def _unravel(array: ti.template(), flat):
    """The index over ``array``'s axes from the third on of their C-order position
    ``flat`` (``flat`` itself when there is one such axis)."""
    rank = ti.static(len(array.shape))
    index = ti.Vector([flat] * (rank - 2))
    if ti.static(rank > 3):
        rest = flat
        for d in ti.static(range(rank - 1, 1, -1)):
            index[d - 2] = rest % array.shape[d]
            rest //= array.shape[d]
    return index


@ti.func
def _element(array: ti.template(), n, c, index):
    """``array[n, c, *index]``."""
    rank = ti.static(len(array.shape))
    if ti.static(rank == 3):
        return array[n, c, index[0]]
    elif ti.static(rank == 4):
        return array[n, c, index[0], index[1]]
    else:
        return array[n, c, index[0], index[1], index[2]]


@ti.func
def _add_to(array: ti.template(), n, c, index, amount):
    """``array[n, c, *index] += amount`` as a plain load and store, not Taichi's atomic
    ``+=``: the calling thread owns the element."""
    rank = ti.static(len(array.shape))
    if ti.static(rank == 3):
        array[n, c, index[0]] = array[n, c, index[0]] + amount
    elif ti.static(rank == 4):
        array[n, c, index[0], index[1]] = array[n, c, index[0], index[1]] + amount
    else:
        i, j, k = index[0], index[1], index[2]
        array[n, c, i, j, k] = array[n, c, i, j, k] + amount


@ti.kernel
def adjoint_gather(
    grad_result: ti.types.ndarray(),
    grad_source: ti.types.ndarray(),
    table: ti.types.ndarray(),
    keys: ti.i32,
    ids: ti.i32,
    entries: ti.i32,
    bounds: ti.types.ndarray(),
    weights: ti.types.ndarray(),
    first: ti.i32,
    item: ti.i32,
    items: ti.i32,
    points: ti.i32,
    span: ti.i32,
    group: ti.i32,
    threads: ti.i32,
    part_first: ti.i32,
    part_size: ti.i32,
    taps: ti.template(),
):
    """``grad_source[n, c, pixel]`` += its entries' ``weight * grad_result[n, c, p]``, in
    sorted order (pixels ascending, each pixel's ids ascending); ``weights[entries + i]``
    is the weight of sorted entry ``i``. One thread per tile of ``span`` pixels of item
    ``n`` (of ``item .. item + items - 1``) and ``group`` channels: the entries
    ``bounds[tile] .. bounds[tile + 1] - 1``, each read once for all its channels.
    ``grad_source`` is ``(N, C, pixels)`` or ``(N, C, *S)``, ``grad_result`` ``(N, C,
    points)`` or ``(N, C, *P)``; ``taps``: entries per point. Compiled per tap count and
    array layout, not per mode, padding or ``align_corners``. A launch adds a tile's
    entries ``part_first .. part_first + part_size - 1`` (all of them in one launch,
    unless the arch bounds an invocation's loops: then the parts in order, each going on
    from the sums the previous one left)."""
    channels = grad_source.shape[1]
    pixels = 1
    for a in ti.static(range(2, len(grad_source.shape))):
        pixels *= grad_source.shape[a]
    tiles = (pixels + span - 1) // span
    groups = (channels + group - 1) // group
    # ``threads`` is ``items * groups * tiles``, an argument: taichi-forge's Vulkan backend
    # refuses a loop count computed in the kernel.
    for t in range(threads):
        row = t // tiles
        n = row // groups
        low = (row - n * groups) * group
        high = ti.min(low + group, channels)
        tile = n * tiles + t - row * tiles
        base = n * pixels
        n += item
        start = bounds[tile] + part_first
        for i in range(start, ti.min(start + part_size, bounds[tile + 1])):
            w = weights[entries + i]
            at = _unravel(grad_result, first + table[ids + i] // taps - n * points)
            pixel = _unravel(grad_source, table[keys + i] - base)
            for c in range(low, high):
                # A load and a store per step, each channel's in entry order: a sum held
                # in a register instead may be split and reordered under Taichi's
                # fast-math (measured on the CPU).
                _add_to(grad_source, n, c, pixel, w * _element(grad_result, n, c, at))


@ti.kernel
def grad_grid_kernel(
    grad_result: ti.types.ndarray(),
    source: ti.types.ndarray(),
    grid: ti.types.ndarray(),
    grad_grid: ti.types.ndarray(),
    points: ti.i32,
    c_first: ti.i32,
    c_last: ti.i32,
    s: ti.template(),
):
    """``grad_grid[n, p, :]`` over the channels ``c_first <= c < c_last``, going on from
    the sums in ``grad_grid`` where ``c_first > 0``."""
    dims = ti.static(len(source.shape) - 2)
    taps = ti.static(TAPS[s.mode])
    for n, p in ti.ndrange(grid.shape[0], points):
        index, weight, slope, valid, nan = _point_taps(source, grid, n, p, points, s)
        along = ti.Vector([ti.cast(0.0, s.real) for _ in ti.static(range(dims))])
        if c_first > 0:
            for a in ti.static(range(dims)):
                along[a] = grad_grid[_at(grad_grid, n, p, dims - 1 - a, points, dims)]
        for c in range(c_first, c_last):
            g = grad_result[_at(grad_result, n, c, p, source.shape[1], points)]
            for combo in ti.static(ti.grouped(ti.ndrange(*([taps] * dims)))):
                _, ok, tap = _product_tap(index, weight, valid, combo)
                v = ti.select(ok != 0, _read(source, n, c, tap), 0.0) * g
                for a in ti.static(range(dims)):
                    d = slope[a, combo[a]]
                    for b in ti.static(range(dims)):
                        if ti.static(b != a):
                            d *= weight[b, combo[b]]
                    along[a] += d * v
        for a in ti.static(range(dims)):
            grad_grid[_at(grad_grid, n, p, dims - 1 - a, points, dims)] = ti.select(
                nan, _nan_of(weight), along[a]
            )
