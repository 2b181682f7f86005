"""Taichi kernels of ``grid_sample``: PyTorch's ``F.grid_sample`` for 2-D and 3-D inputs.

Per axis, a grid value ``g`` in ``[-1, 1]`` becomes a source coordinate (PyTorch's
``grid_sampler_compute_source_index``), then taps and weights: 1 tap for ``nearest``
(round half to even), 2 for linear, 4 for Keys cubic (``A = -0.75``, 2-D only). The
forward, its hand-written adjoint (input gradient and grid gradient) and Taichi's ``ti.ad``
of the forward all use the same per-axis functions below.

Layouts: ``source (N, C, *S)``, ``grid (N, P, D)`` with component 0 along the last axis
(x, width), ``result (N, C, P)`` for the P flattened output points.
"""
import taichi as ti

NEAREST, LINEAR, CUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
_TAPS = {NEAREST: 1, LINEAR: 2, CUBIC: 4}
_KEYS_A = -0.75
# PyTorch maps a non-finite coordinate to -100 before casting it to an index, so it lands
# outside the input ("safe_downgrade_to_int_range").
_OUTSIDE = -100.0


@ti.func
def _is_nan(x, real: ti.template()):
    """NaN test on the bits: Taichi compiles with fast-math, under which ``x != x`` is
    folded to False. ``real`` is ``(dtype, nan_rules, backward)``; Taichi's autodiff cannot
    differentiate a bit cast, so the kernels it differentiates run without the NaN rules."""
    nan = False
    if ti.static(not real[1]):
        pass
    elif ti.static(real[0] == ti.f32):
        nan = (ti.bit_cast(x, ti.i32) & 0x7FFFFFFF) > 0x7F800000
    else:
        nan = (ti.bit_cast(x, ti.i64) & ti.i64(0x7FFFFFFFFFFFFFFF)) > ti.i64(0x7FF0000000000000)
    return nan


@ti.func
def _is_finite(x, real: ti.template()):
    finite = True
    if ti.static(not real[1]):
        pass
    elif ti.static(real[0] == ti.f32):
        finite = (ti.bit_cast(x, ti.i32) & 0x7F800000) != 0x7F800000
    else:
        finite = (ti.bit_cast(x, ti.i64) & ti.i64(0x7FF0000000000000)) != ti.i64(0x7FF0000000000000)
    return finite


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
def _clip(x, size, real: ti.template()):
    """``min(size - 1, max(x, 0))`` and the slope PyTorch gives it: 0 at and beyond either
    end. A NaN follows PyTorch's reference code, which differs between its passes: the
    forward's ``std::min/max`` give ``size - 1``, the backward's comparisons keep NaN (the
    point then reads nothing)."""
    high = size - 1.0
    inside = (x > 0) & (x < high)
    nan_to = high
    if ti.static(real[2]):
        nan_to = x
    clipped = ti.select(_is_nan(x, real), nan_to,
                        ti.select(x < 0, 0.0, ti.select(x > high, high, x)))
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
        shifted = ti.abs(shifted)
        flips = ti.floor(shifted / span)
        extra = shifted - span * flips
        even = ti.cast(flips, ti.i32) % 2 == 0
        result = ti.select(even, extra + low, span - extra + low)
        slope = ti.select(even, sign, -sign)
    return result, slope


@ti.func
def _pad_coordinate(x, size, padding: ti.template(), align_corners: ti.template(),
                    real: ti.template()):
    """Apply border / reflection padding to a source coordinate; returns it and its slope."""
    slope = 1.0
    if ti.static(padding == BORDER):
        x, slope = _clip(x, size, real)
    if ti.static(padding == REFLECTION):
        reflect_slope = 1.0
        if ti.static(align_corners):
            x, reflect_slope = _reflect(x, 0.0, 2.0 * (size - 1))
        else:
            x, reflect_slope = _reflect(x, -1.0, 2.0 * size - 1.0)
        clip_slope = 1.0
        x, clip_slope = _clip(x, size, real)
        slope = reflect_slope * clip_slope
    return x, slope


@ti.func
def _round_half_even(x):
    r = ti.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = ti.cast(r, ti.i32) % 2 != 0
    return ti.select(tie & odd, r - 1.0, r)


@ti.func
def _keys(x):
    a = _KEYS_A
    x = ti.abs(x)
    return ti.select(x <= 1.0, ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
                     ti.select(x < 2.0, ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a, 0.0))


@ti.func
def _keys_slope(x):
    """d/dx of ``_keys`` (x signed)."""
    a = _KEYS_A
    s = ti.select(x < 0, -1.0, 1.0)
    x = ti.abs(x)
    return s * ti.select(x <= 1.0, (3.0 * (a + 2.0) * x - 2.0 * (a + 3.0)) * x,
                         ti.select(x < 2.0, (3.0 * a * x - 10.0 * a) * x + 8.0 * a, 0.0))


@ti.func
def _finite_or_outside(x, real: ti.template()):
    return ti.select(_is_finite(x, real), x, _OUTSIDE)


@ti.func
def axis_taps(g, size, mode: ti.template(), padding: ti.template(), align_corners: ti.template(),
              real: ti.template()):
    """For one axis: tap indices, weights, d(weight)/d(g), and whether each tap is inside.

    A tap outside the input reads 0 (PyTorch multiplies its weight by 0 rather than
    skipping it, so a NaN weight still makes the output NaN).
    """
    taps = ti.static(_TAPS[mode])
    index = ti.Vector([0] * taps)
    weight = ti.Vector([g * 0.0] * taps)
    slope = ti.Vector([g * 0.0] * taps)
    valid = ti.Vector([0] * taps)
    if ti.static(mode == CUBIC):
        # Bicubic pads each tap, not the coordinate. A NaN coordinate gives NaN weights (as
        # in PyTorch): the output, the grid gradient and the input gradient at the taps
        # that exist are NaN. The kernels make the first two explicit (see _point_taps).
        x = _unnormalize(g, size, align_corners)
        nan = _is_nan(x, real)
        base = ti.floor(_finite_or_outside(x, real))
        t = x - ti.floor(x)
        d = _unnormalize_slope(size, align_corners)
        # PyTorch's (CPU) bicubic pads a NaN tap to index 0 (border, reflection), or
        # leaves it outside (zeros).
        nan_tap = _OUTSIDE if ti.static(padding == ZEROS) else 0.0
        for k in ti.static(range(4)):
            tap, _ = _pad_coordinate(base - 1.0 + k, size, padding, align_corners, real)
            tap = ti.select(nan, nan_tap, _finite_or_outside(tap, real))
            index[k] = ti.cast(tap, ti.i32)
            weight[k] = ti.select(nan, x, _keys(t - (k - 1)))
            slope[k] = ti.select(nan, x, _keys_slope(t - (k - 1)) * d)
            valid[k] = ti.cast((tap >= 0) & (tap <= size - 1), ti.i32)
    else:
        x = _unnormalize(g, size, align_corners)
        x, pad_slope = _pad_coordinate(x, size, padding, align_corners, real)
        x = _finite_or_outside(x, real)
        d = _unnormalize_slope(size, align_corners) * pad_slope
        if ti.static(mode == NEAREST):
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
    safe = ti.Vector([ti.min(ti.max(index[a], 0), source.shape[2 + a] - 1)
                      for a in ti.static(range(dims))])
    if ti.static(dims == 2):
        return source[n, c, safe[0], safe[1]]
    else:
        return source[n, c, safe[0], safe[1], safe[2]]


@ti.func
def _scatter(target: ti.template(), n, c, index, amount):
    if ti.static(index.n == 2):
        target[n, c, index[0], index[1]] += amount
    else:
        target[n, c, index[0], index[1], index[2]] += amount


@ti.func
def _point_taps(source: ti.template(), grid: ti.template(), n, p, mode: ti.template(),
                padding: ti.template(), align_corners: ti.template(), real: ti.template()):
    """Per array axis (depth, height, width order) the tap tables of point ``p``: matrices of
    shape (dims, taps). Grid component 0 is x, along the last axis."""
    dims = ti.static(len(source.shape) - 2)
    taps = ti.static(_TAPS[mode])
    index = ti.Matrix([[0] * taps for _ in ti.static(range(dims))])
    weight = ti.Matrix([[grid[n, p, 0] * 0.0] * taps for _ in ti.static(range(dims))])
    slope = ti.Matrix([[grid[n, p, 0] * 0.0] * taps for _ in ti.static(range(dims))])
    valid = ti.Matrix([[0] * taps for _ in ti.static(range(dims))])
    nan = False
    for a in ti.static(range(dims)):
        i, w, s, v = axis_taps(grid[n, p, dims - 1 - a], source.shape[2 + a], mode, padding,
                               align_corners, real)
        for k in ti.static(range(taps)):
            index[a, k] = i[k]
            weight[a, k] = w[k]
            slope[a, k] = s[k]
            valid[a, k] = v[k]
        nan |= _is_nan(w[0], real)
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


@ti.kernel
def grid_sample_forward(source: ti.types.ndarray(), grid: ti.types.ndarray(ndim=3),
                        result: ti.types.ndarray(ndim=3), mode: ti.template(),
                        padding: ti.template(), align_corners: ti.template(),
                        real: ti.template()):
    dims = ti.static(len(source.shape) - 2)
    taps = ti.static(_TAPS[mode])
    for n, p in ti.ndrange(grid.shape[0], grid.shape[1]):
        for c in range(source.shape[1]):
            # Recomputed per channel so no local value crosses the loop over channels,
            # which Taichi's reverse-mode autodiff of the grid gets wrong (measured).
            index, weight, _, valid, nan = _point_taps(source, grid, n, p, mode, padding,
                                                       align_corners, real)
            total = weight[0, 0] * 0.0
            for combo in ti.static(ti.grouped(ti.ndrange(*([taps] * dims)))):
                w, ok, tap = _product_tap(index, weight, valid, combo)
                total += w * ti.select(ok != 0, _read(source, n, c, tap), 0.0)
            # Fast-math may drop a NaN weight times a zero; keep PyTorch's NaN.
            result[n, c, p] = ti.select(nan, _nan_of(weight), total)


@ti.kernel
def grid_sample_grad_input(grad_result: ti.types.ndarray(ndim=3), source: ti.types.ndarray(),
                           grid: ti.types.ndarray(ndim=3), grad_source: ti.types.ndarray(),
                           mode: ti.template(), padding: ti.template(),
                           align_corners: ti.template(), real: ti.template()):
    """``grad_source`` (zeroed by the caller) += the transposed sampling of ``grad_result``.
    One thread per (n, c) plane walks the points in order: no atomics, deterministic."""
    dims = ti.static(len(source.shape) - 2)
    taps = ti.static(_TAPS[mode])
    for n, c in ti.ndrange(source.shape[0], source.shape[1]):
        for p in range(grid.shape[1]):
            index, weight, _, valid, _ = _point_taps(source, grid, n, p, mode, padding,
                                                     align_corners, real)
            g = grad_result[n, c, p]
            for combo in ti.static(ti.grouped(ti.ndrange(*([taps] * dims)))):
                w, ok, tap = _product_tap(index, weight, valid, combo)
                if ok != 0:
                    _scatter(grad_source, n, c, tap, w * g)


@ti.kernel
def grid_sample_grad_grid(grad_result: ti.types.ndarray(ndim=3), source: ti.types.ndarray(),
                          grid: ti.types.ndarray(ndim=3), grad_grid: ti.types.ndarray(ndim=3),
                          mode: ti.template(), padding: ti.template(),
                          align_corners: ti.template(), real: ti.template()):
    """``grad_grid[n, p, :]``: the derivative of the sampled values along each grid
    component, contracted with ``grad_result`` over channels."""
    dims = ti.static(len(source.shape) - 2)
    taps = ti.static(_TAPS[mode])
    for n, p in ti.ndrange(grid.shape[0], grid.shape[1]):
        index, weight, slope, valid, nan = _point_taps(source, grid, n, p, mode, padding,
                                                       align_corners, real)
        along = ti.Vector([weight[0, 0] * 0.0 for _ in ti.static(range(dims))])
        for c in range(source.shape[1]):
            g = grad_result[n, c, p]
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
            grad_grid[n, p, dims - 1 - a] = ti.select(nan, _nan_of(weight), along[a])
