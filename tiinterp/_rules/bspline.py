"""Cubic B-spline coefficients: the prefilter that ``funcs.sample_bspline`` reads after.

A cubic B-spline interpolant ``s(x) = sum_k c_k beta3(x - k)`` passes through the samples
when ``(c_{k-1} + 4 c_k + c_{k+1}) / 6 = f_k``. On an unbounded line the solution is the
convolution ``c = h * f``, ``h[m] = sqrt(3) ALPHA^|m|`` (Note [Cardinal cubic spline] in
``_rules/filters.py``). A boundary that extends the samples by symmetry or periodicity
(``"reflect"``, ``"mirror"``, ``"periodic"``) extends the coefficients by the same rule,
so one axis's prefilter is that convolution with its taps folded back by the boundary:
a tap table like any resize's, whose transpose is its adjoint. ``"clamp"`` and ``"zero"``
have no such fold (the coefficients of an edge-replicated or zero-padded signal differ
from the clamped or zeroed coefficients), so the sampler takes the other three.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .filters import BSPLINE_POLE, BSPLINE_RADIUS
from .plan import Pass
from .taps import AxisTaps

# Where the sampler and the prefilter agree on what lies past the edge.
BSPLINE_BOUNDARIES = ("reflect", "mirror", "periodic")

# h[m] for |m| < BSPLINE_RADIUS: the cut tail sums to 2 sqrt(3) |ALPHA|^28 / (1 - |ALPHA|),
# 5e-16 of the largest sample.
_OFFSETS = np.arange(-(BSPLINE_RADIUS - 1), BSPLINE_RADIUS)
_H = np.sqrt(3.0) * BSPLINE_POLE ** np.abs(_OFFSETS).astype(np.float64)


def fold(index: np.ndarray, size: int, boundary: str) -> np.ndarray:
    """The sample that integer ``index`` reads on an axis of ``size`` samples, as
    ``funcs``' taps fold it."""
    if boundary == "periodic":
        return index % size
    if boundary == "mirror":
        period = max(2 * (size - 1), 1)
        folded = index % period
        return np.where(folded >= size, period - folded, folded)
    folded = index % (2 * size)
    return np.where(folded >= size, 2 * size - 1 - folded, folded)


@lru_cache(maxsize=64)
def prefilter_taps(size: int, boundary: str, dtype: str) -> AxisTaps:
    """The prefilter of one axis of ``size`` samples: row ``j`` is ``sum_m h[m] f[j - m]``,
    in ascending sample order. Near an edge the taps are folded by ``boundary`` and those
    that land on one sample merged (their weights added in float64); elsewhere they are
    ``j - 27 .. j + 27`` as they are."""
    reach = BSPLINE_RADIUS - 1
    width = min(size, len(_OFFSETS))
    index = np.zeros((size, width), dtype=np.int32)
    weight = np.zeros((size, width), dtype=np.float64)
    count = np.full(size, width, dtype=np.int32)
    inner = np.arange(reach, size - reach)  # empty below 55 samples, where width < 55
    if inner.size:
        index[inner] = inner[:, None] + _OFFSETS
        weight[inner] = _H
    for row in (*range(min(reach, size)), *range(max(reach, size - reach), size)):
        samples, visit = np.unique(fold(row + _OFFSETS, size, boundary), return_inverse=True)
        count[row] = len(samples)
        index[row, : len(samples)] = samples
        weight[row, : len(samples)] = np.bincount(visit, weights=_H)
    return AxisTaps(size, size, index, weight.astype(dtype), count)


def prefilter_passes(
    shape: tuple[int, ...],
    spatial_axes: tuple[int, ...],
    boundary: str | tuple[str, ...],
    dtype: str,
    with_adjoint: bool = True,
) -> tuple[tuple[Pass, ...], tuple[Pass, ...]]:
    """The forward passes of the prefilter on the spatial axes of an array of ``shape`` (an
    axis of one sample is its own coefficient: no pass), each folded by its boundary (one
    for every axis, or one per spatial axis), and the adjoint's (transposed; none unless
    ``with_adjoint``: transposing the table of an axis of 2^20 samples takes 10 s the first
    time)."""
    per_axis = (boundary,) * len(spatial_axes) if isinstance(boundary, str) else boundary
    forward = tuple(
        Pass(axis, prefilter_taps(shape[axis], name, dtype))
        for axis, name in zip(spatial_axes, per_axis, strict=True)
        if shape[axis] > 1
    )
    if not with_adjoint:
        return forward, ()
    return forward, tuple(Pass(p.axis, p.taps.transposed) for p in reversed(forward))
