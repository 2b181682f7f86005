"""``ti.func`` samplers for users' own Taichi kernels.

Each sampler reads a 2-D or 3-D, scalar or vector Taichi field or ndarray ``f`` at a point
``p`` (a ``ti.Vector`` of floats, one per axis of ``f``) in *index* coordinates: sample ``i``
sits at ``p == i``. Taps outside the array are clamped to the border (the edge sample is
replicated). Everything is differentiable by ``ti.ad`` with respect to the values of ``f``
and to ``p`` (``floor`` contributes no gradient, as everywhere in autodiff)::

    @ti.kernel
    def advect(q: ti.template(), q_new: ti.template(), vel: ti.template(), dt: float):
        for i, j in q_new:
            p = ti.Vector([i, j]) - dt * vel[i, j]
            q_new[i, j] = tiinterp.funcs.sample_linear(q, p)

Filters: ``sample_linear`` is the tent (bilinear / trilinear); ``sample_cubic`` is Keys'
cubic with ``A = -0.75`` (tiinterp's and PyTorch's ``bicubic``); ``sample_lanczos3`` is
``sinc(x) sinc(x / 3)``, its weights renormalised per axis to sum to 1; ``sample_nearest``
rounds half up (``floor(p + 0.5)``) and has zero gradient with respect to ``p``.
"""
import math

import numpy as np
import taichi as ti

_KEYS_A = -0.75


@ti.func
def _clamped(index, extent):
    return ti.min(ti.max(index, 0), extent - 1)


@ti.func
def _clamped_point(p, extent, radius: ti.template()):
    """``p`` clamped, per axis, to ``[-radius, extent - 1 + radius]``: past that every tap of a
    filter of half-width ``radius`` is clamped to the border, so the sampled value does not
    change (and its gradient with respect to ``p`` is 0, as ``ti.max`` / ``ti.min`` give).
    Clamping in floating point, before any conversion to an integer, keeps points beyond the
    int32 range and +-inf on the border: ``floor`` would overflow there."""
    return ti.min(ti.max(p, -radius), extent - 1 + radius)


@ti.func
def _tent(x):
    return ti.max(0.0, 1.0 - ti.abs(x))


@ti.func
def _keys_cubic(x):
    a = _KEYS_A
    x = ti.abs(x)
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return ti.select(x <= 1.0, inner, ti.select(x < 2.0, outer, 0.0))


def _float32_pair(value):
    """``value`` as two float32-exact parts whose sum carries ~48 bits."""
    high = float(np.float32(value))
    return high, float(np.float32(value - high))


@ti.func
def _constant(like, value: ti.template()):
    """``value`` in the dtype of ``like``. A bare Python float becomes a float32 constant in
    Taichi, which would cost a float64 sampler half its digits."""
    high, low = ti.static(_float32_pair(value))
    return like * 0.0 + high + low


# sin(theta) = sum_n (-1)^n theta^(2n+1) / (2n+1)!; ten terms reach double precision for
# |theta| <= pi / 2 (the next term is below 3e-16).
_SIN_TAYLOR = tuple((-1) ** n / math.factorial(2 * n + 1) for n in range(10))


@ti.func
def _sin_pi(x):
    """``sin(pi * x)`` from a polynomial: Vulkan and Metal have no float64 ``sin``."""
    k = ti.floor(x + 0.5)
    theta = _constant(x, math.pi) * (x - k)
    theta2 = theta * theta
    series = _constant(x, _SIN_TAYLOR[9])
    for n in ti.static(range(8, -1, -1)):
        series = series * theta2 + _constant(x, _SIN_TAYLOR[n])
    return ti.select(ti.cast(k, ti.i32) % 2 == 0, 1.0, -1.0) * theta * series


@ti.func
def _lanczos3(x):
    # sinc(x) sinc(x/3) = 3 sin(pi x) sin(pi x / 3) / (pi x)^2. Near 0 the quotient is 0/0
    # for autodiff too, so evaluate it at a safe x and use the Taylor series there:
    # 1 - (pi x)^2 (1 + 1/9) / 6.
    pi = _constant(x, math.pi)
    small = ti.abs(x) < 1e-3
    safe = ti.select(small, 1.0, x)
    exact = 3.0 * _sin_pi(safe) * _sin_pi(safe / 3.0) / (pi * safe) ** 2
    series = 1.0 - (pi * x) ** 2 * _constant(x, 10.0 / 54.0)
    return ti.select(ti.abs(x) < 3.0, ti.select(small, series, exact), 0.0)


@ti.func
def _interpolate(f: ti.template(), p, radius: ti.template(), kernel: ti.template(),
                 normalise: ti.template()):
    """Tensor-product filter of half-width ``radius`` taps around ``p`` (2-D or 3-D)."""
    dims = ti.static(p.n)
    ti.static_assert(dims == 2 or dims == 3, "tiinterp.funcs samplers take 2-D or 3-D points")
    extent = ti.Vector(f.shape[:dims])
    p_in = _clamped_point(p, extent, radius)
    base = ti.floor(p_in, ti.i32)
    frac = p_in - base
    width = ti.static(2 * radius)
    weights = ti.Matrix([[kernel(frac[d] - (k - radius + 1)) for k in ti.static(range(width))]
                         for d in ti.static(range(dims))])
    if ti.static(normalise):
        for d in ti.static(range(dims)):
            total = weights[d, 0] * 0.0  # in the points' dtype (a bare 0.0 is float32)
            for k in ti.static(range(width)):
                total += weights[d, k]
            for k in ti.static(range(width)):
                weights[d, k] /= total
    first = base - (radius - 1)
    # Clamped tap indices once per axis, then the separable sums innermost axis first: far
    # fewer statements for Taichi to compile than one clamped index per tap (a 3-D lanczos3
    # reads 216 taps).
    taps = ti.Matrix([[ti.min(ti.max(first[d] + k, 0), extent[d] - 1)
                       for k in ti.static(range(width))] for d in ti.static(range(dims))])
    result = f[_clamped(base, extent)] * 0.0
    if ti.static(dims == 2):
        for a in ti.static(range(width)):
            row = weights[1, 0] * f[taps[0, a], taps[1, 0]]
            for b in ti.static(range(1, width)):
                row += weights[1, b] * f[taps[0, a], taps[1, b]]
            result += weights[0, a] * row
    else:
        for a in ti.static(range(width)):
            plane = result * 0.0
            for b in ti.static(range(width)):
                row = weights[2, 0] * f[taps[0, a], taps[1, b], taps[2, 0]]
                for c in ti.static(range(1, width)):
                    row += weights[2, c] * f[taps[0, a], taps[1, b], taps[2, c]]
                plane += weights[1, b] * row
            result += weights[0, a] * plane
    return result


@ti.func
def sample_nearest(f: ti.template(), p):
    """The sample nearest to ``p`` (half-way rounds up), border-clamped."""
    dims = ti.static(p.n)
    extent = ti.Vector(f.shape[:dims])
    index = ti.floor(_clamped_point(p, extent, 1) + 0.5, ti.i32)
    return f[_clamped(index, extent)]


@ti.func
def sample_linear(f: ti.template(), p):
    """Bilinear (2-D) or trilinear (3-D) interpolation at ``p``, border-clamped."""
    return _interpolate(f, p, 1, _tent, False)


@ti.func
def sample_cubic(f: ti.template(), p):
    """Keys cubic (A = -0.75) interpolation at ``p``: 4 taps per axis, border-clamped."""
    return _interpolate(f, p, 2, _keys_cubic, False)


@ti.func
def sample_lanczos3(f: ti.template(), p):
    """Lanczos-3 interpolation at ``p``: 6 taps per axis, weights renormalised per axis,
    border-clamped."""
    return _interpolate(f, p, 3, _lanczos3, True)


__all__ = ["sample_nearest", "sample_linear", "sample_cubic", "sample_lanczos3"]
