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
rounds half up (``floor(p + 0.5)``) and has zero gradient with respect to ``p``. Formulas in
``docs/semantics.md``.

Examples, reading a 2 x 3 field:

>>> import numpy as np
>>> import tiinterp
>>> import taichi as ti
>>> tiinterp.init("cpu")
'cpu'
>>> f = ti.field(ti.f64, shape=(2, 3))
>>> f.from_numpy(np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]))
>>> @ti.kernel
... def sample(f: ti.template(), i: ti.f64, j: ti.f64, filter: ti.template()) -> ti.f64:
...     return filter(f, ti.Vector([i, j]))
>>> sample(f, 0.5, 1.4, tiinterp.funcs.sample_nearest)  # f[1, 1]
4.0
>>> sample(f, 0.5, 1.5, tiinterp.funcs.sample_linear)  # mean of f[0:2, 1:3]
3.0
>>> sample(f, -7.0, 9.0, tiinterp.funcs.sample_linear)  # clamped to f[0, 2]
2.0
>>> sample(f, 1.0, 1.0, tiinterp.funcs.sample_cubic)  # on a sample: its value
4.0
>>> round(sample(f, 0.0, 2.0, tiinterp.funcs.sample_lanczos3), 12)  # on a sample
2.0
"""

from ._filter_funcs import clamp_index, keys_cubic_pytorch, lanczos, tent
from ._taichi import ti


@ti.func
def _clamped_point(p, extent, radius: ti.template()):
    """``p`` clamped, per axis, to ``[-radius, extent - 1 + radius]``: past that every tap of a
    filter of half-width ``radius`` is clamped to the border, so the sampled value does not
    change (and its gradient with respect to ``p`` is 0, as ``ti.max`` / ``ti.min`` give).
    Clamping in floating point, before any conversion to an integer, keeps points beyond the
    int32 range and +-inf on the border: ``floor`` would overflow there."""
    return ti.min(ti.max(p, -radius), extent - 1 + radius)


@ti.func
def _lanczos3(x):
    return lanczos(x, 3)


@ti.func
def _interpolate(
    f: ti.template(), p, radius: ti.template(), kernel: ti.template(), normalise: ti.template()
):
    """Tensor-product filter of half-width ``radius`` taps around ``p`` (2-D or 3-D)."""
    dims = ti.static(p.n)
    ti.static_assert(dims == 2 or dims == 3, "tiinterp.funcs samplers take 2-D or 3-D points")
    extent = ti.Vector(f.shape[:dims])
    p_in = _clamped_point(p, extent, radius)
    base = ti.floor(p_in, ti.i32)
    frac = p_in - base
    width = ti.static(2 * radius)
    weights = ti.Matrix(
        [
            [kernel(frac[d] - (k - radius + 1)) for k in ti.static(range(width))]
            for d in ti.static(range(dims))
        ]
    )
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
    taps = ti.Matrix(
        [
            [clamp_index(first[d] + k, extent[d]) for k in ti.static(range(width))]
            for d in ti.static(range(dims))
        ]
    )
    result = f[clamp_index(base, extent)] * 0.0
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
    return f[clamp_index(index, extent)]


@ti.func
def sample_linear(f: ti.template(), p):
    """Bilinear (2-D) or trilinear (3-D) interpolation at ``p``, border-clamped."""
    return _interpolate(f, p, 1, tent, False)


@ti.func
def sample_cubic(f: ti.template(), p):
    """Keys cubic (A = -0.75) interpolation at ``p``: 4 taps per axis, border-clamped."""
    return _interpolate(f, p, 2, keys_cubic_pytorch, False)


@ti.func
def sample_lanczos3(f: ti.template(), p):
    """Lanczos-3 interpolation at ``p``: 6 taps per axis, weights renormalised per axis,
    border-clamped."""
    return _interpolate(f, p, 3, _lanczos3, True)


__all__ = ["sample_cubic", "sample_lanczos3", "sample_linear", "sample_nearest"]
