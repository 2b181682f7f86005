"""Independent float64 reference: dense per-axis weight matrices written straight from the
formulas in SEMANTICS.md, one output at a time. O(in * out) and slow on purpose; it shares
no code with tiinterp."""

import math

import numpy as np


def _scale(n_in, n_out, align_corners, factor):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if factor is not None:
        return 1.0 / factor
    return n_in / n_out


def _keys(x, a=-0.75):
    x = abs(x)
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def _lanczos(x, radius):
    if abs(x) >= radius:
        return 0.0
    if x == 0:
        return 1.0
    return radius * math.sin(math.pi * x) * math.sin(math.pi * x / radius) / (math.pi * x) ** 2


def _antialias_row(n_in, dst, scale, mode):
    """PIL's convention: the filter stretched by max(scale, 1) around (dst + 0.5) * scale,
    taps outside dropped, weights renormalised."""
    kernel = {
        "bilinear": lambda x: max(0.0, 1 - abs(x)),
        "bicubic": lambda x: _keys(x, -0.5),
        "lanczos3": lambda x: _lanczos(x, 3),
        "lanczos5": lambda x: _lanczos(x, 5),
    }[mode]
    kscale = max(scale, 1.0)
    center = (dst + 0.5) * scale
    row = np.array([kernel((j + 0.5 - center) / kscale) for j in range(n_in)])
    return row / row.sum()


def axis_matrix(
    n_in, n_out, mode, align_corners=False, factor=None, antialias=False, spatial_dims=2
):
    """The (n_out, n_in) matrix of one axis. ``factor`` is the scale_factor that sets the
    coordinates (None when the spacing is in / out)."""
    mode = {"linear": "bilinear", "trilinear": "bilinear", "lanczos": "lanczos3"}.get(mode, mode)
    if n_in == n_out and (mode == "bilinear" or antialias):
        # PyTorch's linear and antialiased kernels copy an axis that keeps its size, whatever
        # the scale factor.
        return np.eye(n_in)
    a = np.zeros((n_out, n_in))
    for dst in range(n_out):
        if mode == "area":
            start = (dst * n_in) // n_out
            end = -((-(dst + 1) * n_in) // n_out)
            a[dst, start:end] = 1.0 / (end - start)
            continue
        if antialias:
            a[dst] = _antialias_row(n_in, dst, _scale(n_in, n_out, False, factor), mode)
            continue
        if mode in ("nearest", "nearest-exact"):
            if mode == "nearest" and n_out == n_in:
                idx = dst
            elif mode == "nearest" and n_out == 2 * n_in:
                idx = dst // 2
            else:
                # PyTorch's 2-D op rounds the scale and the product to float32 up to 128
                # outputs; above that, and in its 1-D and 3-D ops, it computes both in
                # float64 and rounds the product to float32.
                offset = 0.5 if mode == "nearest-exact" else 0.0
                if n_out <= 128 and spatial_dims == 2:
                    s = (
                        np.float32(1.0 / factor)
                        if factor is not None
                        else np.float32(n_in) / np.float32(n_out)
                    )
                    position = np.float32(np.float32(dst + offset) * s)
                else:
                    s = 1.0 / factor if factor is not None else n_in / n_out
                    position = np.float32((dst + offset) * s)
                idx = min(math.floor(position), n_in - 1)
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
        elif mode in ("lanczos3", "lanczos5"):
            radius = int(mode[-1])
            base = math.floor(src)
            row = np.zeros(n_in)
            for i in range(base - radius + 1, base + radius + 1):
                if 0 <= i < n_in:
                    row[i] = _lanczos(src - i, radius)
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


def _matrices(in_spatial, out_spatial, mode, align_corners, factors, antialias):
    factors = factors if factors is not None else (None,) * len(in_spatial)
    return [
        axis_matrix(i, o, mode, align_corners, f, antialias, len(in_spatial))
        for i, o, f in zip(in_spatial, out_spatial, factors, strict=True)
    ]


def resize(x, out_hw, mode, align_corners=False, factors=None, antialias=False):
    """Dense float64 resize of an (N, C, *S) array."""
    return _apply(x, _matrices(x.shape[2:], out_hw, mode, align_corners, factors, antialias))


def resize_adjoint(g, in_hw, mode, align_corners=False, factors=None, antialias=False):
    matrices = _matrices(in_hw, g.shape[2:], mode, align_corners, factors, antialias)
    return _apply(g, [m.T for m in matrices])
