"""The float64 reference of the near-2^31 checks: per-axis tap tables built from the
formulas, vectorised so that an axis of 46,340 outputs costs milliseconds, and single rows
of a forward or an adjoint from them.

tests/oracle.py is the suite's reference, but its dense (out, in) matrices (3 GB for one
axis of 32,767 x 12,000) and float64 coordinates do not serve here: at these sizes the
bilinear and bicubic source coordinates must be rounded in float32 as PyTorch rounds them
(at 16,000 inputs a float32 coordinate is off by up to 4.9e-4, and a weight with it). The
tables are checked against PyTorch and the oracle at small sizes
(tests/stress/test_outputs_near_2_31_elements.py)."""

from functools import partial

import numpy as np


def _f32(value):
    return np.float32(value)


def _keys(x, a=-0.75):
    x = np.abs(x)
    inner = ((a + 2) * x - (a + 3)) * x * x + 1
    outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, inner, np.where(x < 2, outer, 0.0))


def _lanczos(x, radius):
    return np.where(np.abs(x) < radius, np.sinc(x) * np.sinc(x / radius), 0.0)


def _half_pixel_source_f32(n_in, n_out):
    """PyTorch's float32 source coordinate for float32 data on x86-64 (AVX2 builds):
    ``fma(scale, dst + 0.5, -0.5)`` with ``scale = float32(in) / float32(out)``, one
    rounding (the float32 product is exact in float64)."""
    scale = np.float64(_f32(n_in) / _f32(n_out))
    dst = np.arange(n_out, dtype=np.float32) + _f32(0.5)
    return (scale * dst.astype(np.float64) - 0.5).astype(np.float32)


def _nearest_taps(n_in, n_out):
    """PyTorch's nearest for float32 data above 128 outputs in all (its TensorIterator
    tables, docs/semantics.md): ``floor(float32(in / out) * dst)``, all in float32."""
    position = np.arange(n_out, dtype=np.float32) * (_f32(n_in) / _f32(n_out))
    index = np.minimum(np.floor(position).astype(np.int64), n_in - 1)
    return index[:, None], np.ones((n_out, 1))


def _bilinear_taps(n_in, n_out):
    src = np.maximum(_half_pixel_source_f32(n_in, n_out), _f32(0))
    base = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    frac = np.clip(src - base.astype(np.float32), 0, 1).astype(np.float64)
    index = np.stack([base, np.minimum(base + 1, n_in - 1)], axis=1)
    return index, np.stack([1 - frac, frac], axis=1)


def _bicubic_taps(n_in, n_out):
    src = _half_pixel_source_f32(n_in, n_out)
    base = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    frac = np.clip(src - base.astype(np.float32), 0, 1).astype(np.float64)
    offsets = np.arange(-1, 3)
    index = np.clip(base[:, None] + offsets, 0, n_in - 1)
    return index, _keys(frac[:, None] - offsets)


def _lanczos_taps(n_in, n_out, radius):
    src = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
    base = np.floor(src).astype(np.int64)
    taps = base[:, None] + np.arange(1 - radius, radius + 1)
    weight = np.where((taps >= 0) & (taps < n_in), _lanczos(taps - src[:, None], radius), 0.0)
    return np.clip(taps, 0, n_in - 1), weight / weight.sum(axis=1, keepdims=True)


def _area_taps(n_in, n_out):
    dst = np.arange(n_out)
    start = dst * n_in // n_out
    end = -((-(dst + 1) * n_in) // n_out)
    width = int((end - start).max())
    offsets = np.arange(width)
    used = offsets < (end - start)[:, None]
    index = np.where(used, start[:, None] + offsets, start[:, None])
    return index, np.where(used, 1.0 / (end - start)[:, None], 0.0)


TAPS = {
    "nearest": _nearest_taps,
    "bilinear": _bilinear_taps,
    "bicubic": _bicubic_taps,
    "lanczos3": partial(_lanczos_taps, radius=3),
    "area": _area_taps,
}


def axes(in_hw, out_hw, mode):
    """(index, weight) per trailing axis: ``out[o] = sum_k weight[o, k] * in[index[o, k]]``."""
    return tuple(TAPS[mode](n_in, n_out) for n_in, n_out in zip(in_hw, out_hw, strict=True))


def forward_row(x3, plane, row, tables):
    """Row ``row`` of plane ``plane`` of the forward of ``x3`` (planes, H, W), in float64."""
    (row_index, row_weight), (col_index, col_weight) = tables
    line = row_weight[row] @ x3[plane, row_index[row], :].astype(np.float64)
    return (line[col_index] * col_weight).sum(axis=1)


def adjoint_row(g3, plane, row, tables, in_width):
    """Row ``row`` of plane ``plane`` of the adjoint applied to ``g3`` (planes, H_out, W_out)."""
    (row_index, row_weight), (col_index, col_weight) = tables
    outs, taps = np.nonzero((row_index == row) & (row_weight != 0))
    line = row_weight[outs, taps] @ g3[plane, outs, :].astype(np.float64)
    return np.bincount(
        col_index.ravel(), weights=(col_weight * line[:, None]).ravel(), minlength=in_width
    )


def row_error(got, want) -> float:
    """The largest difference, relative to the largest reference value of the row."""
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


def checked_rows(shape3):
    """(plane, row) pairs of a (planes, H, W) result: the first two rows, the one holding the
    middle element, the last two."""
    planes, height, width = shape3
    middle = divmod(planes * height * width // 2 // width, height)
    return sorted(
        {
            (0, 0),
            (0, min(1, height - 1)),
            middle,
            (planes - 1, max(height - 2, 0)),
            (planes - 1, height - 1),
        }
    )


def as_planes(array):
    return array.reshape(-1, *array.shape[-2:])


def row_errors(mode, in_hw, out_hw, source, result, adjoint=False):
    """{"plane,row": error} of the ``checked_rows`` of ``result``: the forward ``in_hw ->
    out_hw`` of ``source``, or (``adjoint``) its adjoint applied to ``source``."""
    tables = axes(in_hw, out_hw, mode)
    source3, result3 = as_planes(source), as_planes(result)
    errors = {}
    for plane, row in checked_rows(result3.shape):
        if adjoint:
            want = adjoint_row(source3, plane, row, tables, result3.shape[2])
        else:
            want = forward_row(source3, plane, row, tables)
        errors[f"{plane},{row}"] = row_error(result3[plane, row], want)
    return errors
