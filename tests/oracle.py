"""Independent float64 reference: dense per-axis weight matrices written straight from the
formulas in SEMANTICS.md, one output at a time. O(in * out) and slow on purpose.

It shares one thing with tiinterp: the filters' formulas, read from the one table of
filters (``tiinterp/_rules/filters.py``'s ``FORMULAS``, and which entry is each mode's
window). That keeps it an independent reference of what it is here to check, the
resampling (the taps each output reads, the windows antialias stretches, the borders, the
normalisation, the axes copied), which it writes itself. The formulas are not its to
check: each is held to external numbers by the golden tests (PyTorch's, PIL's and JAX's in
tests/ops/test_resize_forward.py and tests/ops/test_resize_modes.py, OpenCV's lanczos4 and
ImageMagick's Mitchell in tests/ops/test_forward_references.py, JAX's scale_and_translate
in tests/ops/test_scale_and_translate.py), which a wrong formula fails whatever the
oracle says, and tests/rules/test_filter_forms.py holds every form of a formula to the
others. The cubic B-spline is the exception: its table entry is a derivation of
tiinterp's (Note [Cardinal cubic spline]: a pole, a cut at 28 samples), so the oracle
derives it again, from the spline's equations solved exactly."""

import functools
import math

import numpy as np

from tiinterp._rules.filters import FILTERS, FORMULAS


def _scale(n_in, n_out, align_corners, factor):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if factor is not None:
        return 1.0 / factor
    return n_in / n_out


def _scalar(curve):
    """A NumPy form of the table of filters as a function of one float."""
    return lambda x: float(curve(np.float64(x)))


_keys = _scalar(FORMULAS["keys_pytorch"].weight)  # bicubic without antialias (A = -0.75)
_lanczos4 = _scalar(FORMULAS["lanczos4"].weight)


def _beta3(x):
    x = abs(x)
    if x < 1:
        return 2 / 3 - x * x + x**3 / 2
    return (2 - x) ** 3 / 6 if x < 2 else 0.0


def _reflect(i, n):
    # SciPy's mode="reflect": b a | a b c d | d c (period 2n).
    i %= 2 * n
    return 2 * n - 1 - i if i >= n else i


def _fold(i, n, boundary):
    """The sample that tap ``i`` reads: ``"reflect"`` as above, ``"mirror"`` c b | a b c d
    | c b (period 2 (n - 1)), ``"periodic"`` i mod n."""
    if boundary == "reflect":
        return _reflect(i, n)
    if boundary == "periodic":
        return i % n
    if n == 1:
        return 0
    i %= 2 * (n - 1)
    return 2 * (n - 1) - i if i >= n else i


@functools.cache
def _spline_coefficients(n, boundary="reflect"):
    """(n, n): the cubic B-spline coefficients of n samples, the system (c[k-1] + 4 c[k] +
    c[k+1]) / 6 = f[k] with the coefficients past the edges folded by ``boundary``, solved
    exactly."""
    system = np.zeros((n, n))
    for k in range(n):
        for step, w in ((-1, 1 / 6), (0, 4 / 6), (1, 1 / 6)):
            system[k, _fold(k + step, n, boundary)] += w
    return np.linalg.inv(system)


def _per_axis(boundary, axis):
    return boundary[axis] if isinstance(boundary, tuple) else boundary


def bspline_coefficients(f, boundary):
    """The cubic B-spline coefficients of ``f`` (float64), axis by axis; ``boundary`` one
    for every axis or a tuple, one per axis."""
    c = np.asarray(f, dtype=np.float64)
    for axis in range(c.ndim):
        system = _spline_coefficients(c.shape[axis], _per_axis(boundary, axis))
        c = np.moveaxis(np.tensordot(system, c, (1, axis)), 0, axis)
    return c


def bspline_sample(c, points, boundary):
    """``sum_k c[fold(k)] beta3(x - k)`` over the 4 taps per axis around each point ``x``
    (rows of ``points``, index coordinates), one point at a time."""
    values = []
    for x in np.asarray(points, dtype=np.float64):
        bases = [math.floor(v) for v in x]
        total = 0.0
        for taps in np.ndindex(*(4,) * len(x)):
            k = [b - 1 + t for b, t in zip(bases, taps, strict=True)]
            weight = math.prod(_beta3(v - kk) for v, kk in zip(x, k, strict=True))
            index = tuple(
                _fold(kk, n, _per_axis(boundary, d))
                for d, (kk, n) in enumerate(zip(k, c.shape, strict=True))
            )
            total += weight * c[index]
        values.append(total)
    return np.array(values)


def _bspline_row(n_in, src):
    coefficients = _spline_coefficients(n_in)
    base = math.floor(src)
    return sum(_beta3(src - t) * coefficients[_reflect(t, n_in)] for t in range(base - 1, base + 3))


# tiinterp's cubic B-spline with antialias stretches the cardinal spline (the interpolant of
# one sample among zeros), which tiinterp cuts at |x| < 28: here it is that interpolant on a
# line of 61 samples (whose edges are 30 samples away), its coefficients solved for exactly.
_LINE = 61


@functools.cache
def _impulse_coefficients():
    system = np.zeros((_LINE, _LINE))
    for k in range(_LINE):
        for step, w in ((-1, 1 / 6), (0, 4 / 6), (1, 1 / 6)):
            system[k, _reflect(k + step, _LINE)] += w
    return np.linalg.solve(system, np.eye(_LINE)[_LINE // 2])


def _cardinal_spline(x):
    if abs(x) >= 28:
        return 0.0
    c, base = _impulse_coefficients(), math.floor(x)
    return sum(_beta3(x - t) * c[t + _LINE // 2] for t in range(base - 1, base + 3))


# Each filter mode's window, a function of tap - src, with its half-width (PIL's support):
# the table's (bicubic's is its antialias filter, A = -0.5; its plain one is A = -0.75, in
# axis_matrix), but the B-spline's, which the oracle derives.
KERNELS = {
    mode: (filt.window.support, _scalar(filt.window.weight)) for mode, filt in FILTERS.items()
}
KERNELS["bspline"] = (28, _cardinal_spline)


@functools.cache
def _smooths(mode):
    """Whether the filter of ``mode`` is not 1 at 0 and 0 at the other integers (Mitchell's):
    then it blurs an axis that keeps its size, which the interpolating ones copy."""
    if mode not in KERNELS:
        return False
    support, kernel = KERNELS[mode]
    reach = math.ceil(support)
    return any(abs(kernel(k) - (k == 0)) > 1e-15 for k in range(-reach, reach + 1))


def _antialias_row(n_in, n_out, dst, factor, mode):
    """PIL's convention (``ImagingResample``'s ``precompute_coeffs``): the filter stretched
    by ``kscale = max(scale, 1)`` around ``center = (dst + 0.5) * scale``, read over PIL's
    window ``int(center -+ support + 0.5)`` clipped to the input (``support`` the filter's
    half-width times ``kscale``), the weights renormalised."""
    support, kernel = KERNELS[mode]
    scale = _scale(n_in, n_out, False, factor)
    kscale = max(scale, 1.0)
    center = (dst + 0.5) * scale
    support *= kscale
    row = np.zeros(n_in)
    for j in range(max(int(center - support + 0.5), 0), min(int(center + support + 0.5), n_in)):
        # Box is a step, and samples exactly on its edges are common (13 -> 6: input 6 is on
        # the edges of outputs 2 and 3): PIL's window and its float64 rounding, in its order
        # of operations, decide them (input 6 then weighs in neither output, as in PIL).
        row[j] = kernel(((j - center) + 0.5) * (1.0 / kscale))
    return row / row.sum()


def _opencv_area_row(n_in, n_out, dst, every_axis_shrinks):
    """cv::resize's INTER_AREA for one output, written from OpenCV's rules one sample at a
    time: the covered part of each sample when every axis shrinks, a 2-tap rule else."""
    inverse = n_out / n_in
    scale = 1 / inverse
    row = np.zeros(n_in)
    if not every_axis_shrinks:
        sx = math.floor(dst * scale)
        fx = (dst + 1) - (sx + 1) * inverse
        fx = 0.0 if fx <= 0 else fx - math.floor(fx)
        if sx < 0 or sx >= n_in - 1:
            row[min(max(sx, 0), n_in - 1)] = 1.0
        else:
            row[sx] += 1 - fx
            row[sx + 1] += fx
        return row
    start, end = dst * scale, dst * scale + scale
    footprint = min(scale, n_in - start)
    for j in range(n_in):
        covered = min(end, j + 1) - max(start, j)
        # OpenCV drops partial samples covered by 1e-3 or less, at either end.
        partial = covered < 1 and (j < start or j + 1 > end)
        if covered > 1e-3 or (covered > 0 and not partial):
            row[j] = min(covered, 1.0, footprint) / footprint
    return row


def nearest_rule(in_spatial, out_spatial, dtype):
    """PyTorch's CPU nearest ops index pointwise in float32 (``nearest_idx``) in the 2-D op
    up to out_h + out_w = 128, else through per-axis tables in the data's dtype
    (UpSampleKernel.cpp; docs/semantics.md)."""
    if len(in_spatial) == 2 and sum(out_spatial) <= 128:
        return ("pointwise", None)
    return ("tables", np.dtype(dtype).type)


def _nearest_source(n_in, n_out, dst, exact, factor, rule):
    kind, real = rule
    if kind == "pointwise":
        if not exact and n_out == n_in:
            return dst
        if not exact and n_out == 2 * n_in:
            return dst // 2
        s = np.float32(1.0 / factor) if factor is not None else np.float32(n_in) / np.float32(n_out)
        if exact:
            position = np.float32(np.float64(dst + 0.5) * np.float64(s))
        else:
            position = np.float32(np.float32(dst) * s)
    else:
        s = real(1.0 / factor) if factor is not None else real(n_in) / real(n_out)
        if not exact:
            position = np.float32(real(dst) * s)
        elif real is np.float32:
            # One rounding of s * (dst + 0.5) - 0.5: PyTorch's fused multiply-add on x86-64.
            src = np.float32(np.float64(s) * (dst + 0.5) - 0.5)
            position = np.float32(max(src, np.float32(0)) + np.float32(0.5))
        else:
            position = np.float32(max(s * real(dst + 0.5) - real(0.5), real(0)) + real(0.5))
    return min(math.floor(position), n_in - 1)


def axis_matrix(
    n_in,
    n_out,
    mode,
    align_corners=False,
    factor=None,
    antialias=False,
    nearest_rule=("pointwise", None),
    every_axis_shrinks=True,
):
    """The (n_out, n_in) matrix of one axis. ``factor`` is the scale_factor that sets the
    coordinates (None when the spacing is in / out). ``nearest_rule``: which of PyTorch's
    nearest kernels the call reaches, see :func:`nearest_rule`."""
    mode = {"linear": "bilinear", "trilinear": "bilinear", "lanczos": "lanczos3"}.get(mode, mode)
    if n_in == n_out and (mode == "bilinear" or antialias) and not _smooths(mode):
        # PyTorch's linear and antialiased kernels copy an axis that keeps its size, whatever
        # the scale factor (PIL's skip it); Mitchell's filter smooths it (ImageMagick).
        return np.eye(n_in)
    a = np.zeros((n_out, n_in))
    for dst in range(n_out):
        if mode == "area-opencv":
            a[dst] = _opencv_area_row(n_in, n_out, dst, every_axis_shrinks)
            continue
        if mode == "area":
            start = (dst * n_in) // n_out
            end = -((-(dst + 1) * n_in) // n_out)
            a[dst, start:end] = 1.0 / (end - start)
            continue
        if antialias:
            a[dst] = _antialias_row(n_in, n_out, dst, factor, mode)
            continue
        if mode in ("nearest", "nearest-exact"):
            idx = _nearest_source(n_in, n_out, dst, mode == "nearest-exact", factor, nearest_rule)
            a[dst, idx] = 1.0
            continue
        s = _scale(n_in, n_out, align_corners, factor)
        src = s * dst if align_corners else s * (dst + 0.5) - 0.5
        if mode == "bilinear":
            src = max(src, 0.0)
            i0 = min(math.floor(src), n_in - 1)
            i1 = min(i0 + 1, n_in - 1)
            w1 = src - i0
            a[dst, i0] += 1 - w1
            a[dst, i1] += w1
        elif mode == "bicubic":
            base = min(math.floor(src), n_in - 1)
            t = min(max(src - base, 0.0), 1.0)
            weights = (_keys(t + 1), _keys(t), _keys(1 - t), _keys(2 - t))
            for k, w in zip(range(-1, 3), weights, strict=True):
                a[dst, min(max(base + k, 0), n_in - 1)] += w
        elif mode == "lanczos4":
            # OpenCV: src rounded to float32; 8 taps, the weights divided by their sum, then
            # the indices clamped.
            src = float(np.float32(src))
            base = math.floor(src)
            taps = range(base - 3, base + 5)
            weights = np.array([_lanczos4(src - i) for i in taps])
            for i, w in zip(taps, weights / weights.sum(), strict=True):
                a[dst, min(max(i, 0), n_in - 1)] += w
        elif mode == "bspline":
            a[dst] = _bspline_row(n_in, src)
        elif mode in KERNELS:
            # Every other filter: taps outside the input dropped, the rest renormalised
            # (JAX, PIL, ImageMagick).
            support, kernel = KERNELS[mode]
            radius = math.ceil(support)
            base = math.floor(src)
            row = np.zeros(n_in)
            for i in range(base - radius + 1, base + radius + 1):
                if 0 <= i < n_in:
                    row[i] = kernel(i - src)
            a[dst] = row / row.sum()
        else:
            raise ValueError(mode)
    return a


def _apply(x, matrices):
    """Contract each spatial axis of x (N, C, *S) with its matrix."""
    y = x.astype(np.float64)
    for axis, m in enumerate(matrices, 2):
        y = np.moveaxis(np.tensordot(m, np.moveaxis(y, axis, 0), axes=1), 0, axis)
    return y


def _matrices(in_spatial, out_spatial, mode, align_corners, factors, antialias, dtype):
    factors = factors if factors is not None else (None,) * len(in_spatial)
    shrinks = all(o <= i for i, o in zip(in_spatial, out_spatial, strict=True))
    rule = nearest_rule(in_spatial, out_spatial, dtype)
    return [
        axis_matrix(i, o, mode, align_corners, f, antialias, rule, shrinks)
        for i, o, f in zip(in_spatial, out_spatial, factors, strict=True)
    ]


def resize(x, out_hw, mode, align_corners=False, factors=None, antialias=False):
    """Dense float64 resize of an (N, C, *S) array."""
    matrices = _matrices(x.shape[2:], out_hw, mode, align_corners, factors, antialias, x.dtype)
    return _apply(x, matrices)


def resize_adjoint(g, in_hw, mode, align_corners=False, factors=None, antialias=False):
    matrices = _matrices(in_hw, g.shape[2:], mode, align_corners, factors, antialias, g.dtype)
    return _apply(g, [m.T for m in matrices])
