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


def _lanczos3(x):
    if abs(x) >= 3:
        return 0.0
    if x == 0:
        return 1.0
    return 3 * math.sin(math.pi * x) * math.sin(math.pi * x / 3) / (math.pi * x) ** 2


def axis_matrix(n_in, n_out, mode, align_corners=False, factor=None):
    """The (n_out, n_in) matrix of one axis. ``factor`` is the scale_factor that sets the
    coordinates (None when the spacing is in / out)."""
    a = np.zeros((n_out, n_in))
    for dst in range(n_out):
        if mode in ("nearest", "nearest-exact"):
            if mode == "nearest" and n_out == n_in:
                idx = dst
            elif mode == "nearest" and n_out == 2 * n_in:
                idx = dst // 2
            else:
                # PyTorch rounds the scale and the product to float32 up to 128 outputs;
                # above that it computes both in float64 and rounds the product to float32.
                offset = 0.5 if mode == "nearest-exact" else 0.0
                if n_out <= 128:
                    s = np.float32(1.0 / factor) if factor is not None else np.float32(n_in) / np.float32(n_out)
                    position = np.float32(np.float32(dst + offset) * s)
                else:
                    s = 1.0 / factor if factor is not None else n_in / n_out
                    position = np.float32((dst + offset) * s)
                idx = min(int(math.floor(position)), n_in - 1)
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
            for k, w in zip(range(-1, 3), weights):
                a[dst, min(max(base + k, 0), n_in - 1)] += w
        elif mode == "lanczos3":
            base = math.floor(src)
            row = np.zeros(n_in)
            for i in range(base - 2, base + 4):
                if 0 <= i < n_in:
                    row[i] = _lanczos3(src - i)
            a[dst] = row / row.sum()
        else:
            raise ValueError(mode)
    return a


def resize(x, out_hw, mode, align_corners=False, factors=(None, None)):
    """Dense float64 resize of an (N, C, H, W) array."""
    ah = axis_matrix(x.shape[2], out_hw[0], mode, align_corners, factors[0])
    aw = axis_matrix(x.shape[3], out_hw[1], mode, align_corners, factors[1])
    return np.einsum("oh,nchw,pw->ncop", ah, x.astype(np.float64), aw)


def resize_adjoint(g, in_hw, mode, align_corners=False, factors=(None, None)):
    ah = axis_matrix(in_hw[0], g.shape[2], mode, align_corners, factors[0])
    aw = axis_matrix(in_hw[1], g.shape[3], mode, align_corners, factors[1])
    return np.einsum("oh,ncop,pw->nchw", ah, g.astype(np.float64), aw)
