"""Per-axis tap tables: which input samples each output reads, and with what weights.

Every mode is separable, so an N-D resize is one 1-D resampling per spatial axis, and every
1-D resampling is described by an :class:`AxisTaps` table: output ``o`` reads the samples
``index[o, k]`` with weights ``weight[o, k]`` for ``k < count[o]``, in that order. These are
the reference's own visits, one per tap: a border tap clamped onto a sample another tap
also reads stays a separate visit, and a tap of weight 0 that the reference reads stays
too. That is what makes NaN and Inf spread exactly as in PyTorch (``0 * inf`` is NaN;
``w0 * inf + w1 * inf`` with weights of opposite signs is NaN where ``(w0 + w1) * inf``
would not be).

The adjoint of a 1-D resampling is again a 1-D resampling, by the transposed table
(:attr:`AxisTaps.transposed`): input ``i`` gathers ``weight * gradient`` over every visit
that reads it, in the order PyTorch's backward scatters them (outputs ascending, then taps).
Gathering instead of scattering keeps the backward free of atomics and bit-for-bit
deterministic.

Coordinates follow PyTorch's ``F.interpolate`` (see ``docs/semantics.md``) and are computed in
the data's dtype, as PyTorch does, so float32 results round like PyTorch's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

import numpy as np

from .filters import ALIASES, FILTERS, MODE_DIMS, MODES


@dataclass(frozen=True, eq=False)
class AxisTaps:
    """A 1-D resampling from ``in_size`` to ``out_size`` samples as a table of visits."""

    in_size: int
    out_size: int
    index: np.ndarray  # int32 (out_size, K): the samples row o reads, in order
    weight: np.ndarray  # float (out_size, K): their weights; zero past count
    count: np.ndarray  # int32 (out_size,): visits per row (0: the output is exactly 0)

    def __post_init__(self):
        for array in (self.index, self.weight, self.count):
            array.flags.writeable = False

    @property
    def width(self) -> int:
        return self.weight.shape[1]

    @cached_property
    def is_identity(self) -> bool:
        return (
            self.in_size == self.out_size
            and self.width == 1
            and bool(np.all(self.count == 1))
            and bool(np.all(self.weight[:, 0] == 1))
            and bool(np.array_equal(self.index[:, 0], np.arange(self.out_size)))
        )

    @cached_property
    def is_gather(self) -> bool:
        """Every output copies one input sample (nearest modes, forward)."""
        return self.width == 1 and bool(np.all(self.count == 1)) and bool(np.all(self.weight == 1))

    @cached_property
    def fixed_width(self) -> tuple[np.ndarray, np.ndarray]:
        """``(index, weight)``, both ``(out_size, K)``, every row using all ``K`` taps, for
        kernels that unroll the tap loop and sum the taps in order: :meth:`padded` to the
        table's own width."""
        return self._padded_visits(self.width)

    @cached_property
    def fixed_width_marked(self) -> np.ndarray:
        """:attr:`fixed_width`'s index with every tap of an empty output (see
        :attr:`empty_outputs`) set to ``in_size``, one past the last sample: the SIMD
        kernels (``_kernels/simd.py``) write such outputs as exactly 0 themselves."""
        return self.padded(self.width)[0]

    def padded(self, width: int) -> tuple[np.ndarray, np.ndarray]:
        """``(index, weight)``, both ``(out_size, width)`` for a ``width`` of at least
        :attr:`width`, every row using all taps, empty outputs' taps marked as in
        :attr:`fixed_width_marked` (cached per width)."""
        cache = self.__dict__.setdefault("_padded", {})
        if width not in cache:
            index, weight = self._padded_visits(width)
            index = index.copy()
            index[self.empty_outputs] = self.in_size
            index.flags.writeable = False
            cache[width] = (index, weight)
        return cache[width]

    def _padded_visits(self, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Every row padded to ``width`` visits. A row of ``c < width`` visits is padded at
        the front by splitting its first visit into ``width - c + 1`` visits of the same
        sample with weights ``w/2^p, w/2^p, w/2^(p-1), ..., w/2`` (``p = width - c``). Each
        partial sum of those is an exact doubling, so the sum equals ``w * x`` bit for bit
        (barring subnormals), an Inf sample stays Inf (a zero padding weight would turn it
        into NaN) and a NaN spreads exactly where the row reads it. A row of no visits (an
        input no output reads, in an adjoint table) has all-zero weights here;
        :attr:`empty_outputs` lists those rows, which the kernels zero (``0 * NaN`` would
        not be 0)."""
        if width < self.width:
            raise ValueError(f"width: expected at least {self.width}, got {width}")
        pads = width - np.maximum(self.count, 1)[:, None]  # (out_size, 1)
        k = np.arange(width)[None, :]
        # Column k holds visit k - pads; columns 0..pads all hold visit 0.
        visit = np.minimum(np.maximum(k - pads, 0), self.width - 1)
        index = np.take_along_axis(self.index, visit, axis=1).astype(np.int32)
        weight = np.take_along_axis(self.weight, visit, axis=1).astype(np.float64)
        halvings = np.where(k <= pads, pads - np.maximum(k - 1, 0), 0)
        weight = np.ldexp(weight, -halvings).astype(self.weight.dtype)
        for array in (index, weight):
            array.flags.writeable = False
        return index, weight

    @cached_property
    def empty_outputs(self) -> np.ndarray:
        """Outputs that no visit reads into (``count == 0``): they are exactly 0."""
        empty = np.flatnonzero(self.count == 0)
        empty.flags.writeable = False
        return empty

    @cached_property
    def transposed(self) -> AxisTaps:
        """The adjoint table: input ``i`` visits every output that reads it, once per visit,
        outputs ascending and each output's visits in order."""
        used = np.arange(self.width)[None, :] < self.count[:, None]
        outputs = np.broadcast_to(np.arange(self.out_size)[:, None], used.shape)[used]
        inputs = self.index[used].astype(np.int64)
        weights = self.weight[used]
        # Row-major order of ``used`` is (output, visit); a stable sort by input keeps it.
        order = np.argsort(inputs, kind="stable")
        return _table_from_visits(
            self.out_size, self.in_size, inputs[order], outputs[order], weights[order]
        )


def _table_from_visits(
    in_size: int, out_size: int, rows: np.ndarray, samples: np.ndarray, weights: np.ndarray
) -> AxisTaps:
    """An :class:`AxisTaps` from visits ``(row, sample, weight)`` sorted by row (a stable
    order within each row is the visit order)."""
    count = np.bincount(rows, minlength=out_size)
    first = np.concatenate(([0], np.cumsum(count)[:-1]))
    column = np.arange(len(rows)) - first[rows]
    width = max(int(count.max(initial=0)), 1)
    index = np.zeros((out_size, width), dtype=np.int32)
    table = np.zeros((out_size, width), dtype=weights.dtype)
    index[rows, column] = samples
    table[rows, column] = weights
    return AxisTaps(in_size, out_size, index, table, count.astype(np.int32))


def dense_visits(
    in_size: int, taps: np.ndarray, weights: np.ndarray, valid: np.ndarray, dtype
) -> AxisTaps:
    """An :class:`AxisTaps` from per-row tap arrays ``(out_size, K)``; ``valid`` marks the
    visits (in row order)."""
    out_size = taps.shape[0]
    rows = np.broadcast_to(np.arange(out_size)[:, None], taps.shape)[valid]
    return _table_from_visits(
        in_size,
        out_size,
        rows,
        taps[valid].astype(np.int64),
        np.asarray(weights, dtype=np.float64)[valid].astype(dtype),
    )


def coordinate_scale(
    in_size: int, out_size: int, align_corners: bool, scale_factor: float | None, dtype: Any
) -> np.floating:
    """The spacing of output samples in input units, PyTorch's ``area_pixel_compute_scale``.

    With ``scale_factor`` given (and not recomputed) the spacing is ``1 / scale_factor``,
    not ``in / out``: the two differ whenever ``in * scale_factor`` is not an integer.
    """
    real = np.dtype(dtype).type
    if align_corners:
        return real(in_size - 1) / real(out_size - 1) if out_size > 1 else real(0)
    if scale_factor is not None and scale_factor > 0:
        return real(1.0 / scale_factor)
    return real(in_size) / real(out_size)


# PyTorch 2.13's CPU nearest kernels (aten/src/ATen/native/cpu/UpSampleKernel.cpp) compute
# the source index in one of two ways, and which one depends on the op and the output size:
#
# - ``upsample_nearest2d_kernel_impl`` / ``_upsample_nearest_exact2d_kernel_impl`` take the
#   pointwise kernel (``upsample_nearest_channels_last``) when ``_use_channels_last_kernel_2d``
#   holds: a channels-last input of more than 3 channels, or ``out_h + out_w <= 128``. It
#   calls ``nearest_idx`` / ``nearest_exact_idx`` (aten/src/ATen/native/UpSample.h) per
#   output: ``nearest`` copies an axis with ``out == in`` and returns ``o >> 1`` for
#   ``out == 2 * in``, whatever the scale factor; otherwise ``floorf(o * scale)`` with ``scale``
#   a float (``compute_scales_value<float>``: ``(float)(1.0 / scale_factor)`` or
#   ``(float)in / out``) and ``o * scale`` a float product. ``nearest-exact`` has no special
#   case: ``floorf((o + 0.5) * scale)``, a double product of that float scale, rounded to
#   float by ``floorf``.
# - Otherwise (and always in the 1-D and 3-D ops, for a contiguous channels-first input) the
#   TensorIterator kernel (``upsample_non_separable_Nd_kernel_impl``) builds per-axis index
#   tables with ``HelperInterpNearest`` / ``HelperInterpNearestExact::compute_indices_weights``,
#   in the data's ``opmath_t`` (float for float32, double for float64), with no special case:
#   ``floorf(scale * o)`` (``area_pixel_compute_source_index(.., align_corners=true)``) and
#   ``floorf(max(scale * (o + 0.5) - 0.5, 0) + 0.5)`` (``align_corners=false``; in float32
#   the first sum is one fused multiply-add on x86-64, see :func:`_source_coordinate`, which
#   moves indices: 2 -> 41, output 20; in float64 fusing it or not moves none, measured on
#   every (in, out) pair up to 119 x 399). ``floorf`` of a double rounds it to float first.
#
# Both clamp the index to ``in - 1``. The scale is ``1 / scale_factor`` wherever
# ``F.interpolate`` passes the scale factor down (given, and ``recompute_scale_factor`` not
# True), else ``in / out``. tiinterp's arrays are channels-first and contiguous, so the
# channels-last condition never applies (it holds for a contiguous array only where
# ``in_h == in_w == 1``, and every index is 0 there). Checked bit for bit against
# ``F.interpolate`` (tests/rules/test_nearest_rules.py).
POINTWISE_NEAREST_MAX_OUTPUTS = 128  # out_h + out_w at which PyTorch's 2-D ops switch kernels


def uses_pointwise_nearest(spatial_dims: int, total_outputs: int) -> bool:
    """Whether PyTorch's nearest op of ``spatial_dims`` dimensions, writing ``total_outputs``
    summed over its output axes (``out_h + out_w``), computes its indices pointwise
    (``nearest_idx``), rather than in its TensorIterator tables."""
    return spatial_dims == 2 and total_outputs <= POINTWISE_NEAREST_MAX_OUTPUTS


def _nearest_index(
    in_size: int,
    out_size: int,
    scale_factor: float | None,
    exact: bool,
    pointwise: bool,
    dtype: Any,
) -> np.ndarray:
    """PyTorch's nearest / nearest-exact source index for one axis (see the note above).

    ``pointwise``: PyTorch's ``nearest_idx`` / ``nearest_exact_idx`` (its 2-D ops up to 128
    outputs in all), in float32 whatever the data's dtype; otherwise its TensorIterator
    tables, in the data's ``dtype``. Either rounds differently from exact integer arithmetic
    for about 2% of (in, out) pairs.
    """
    if pointwise:
        if not exact and out_size == in_size:
            return np.arange(out_size, dtype=np.int64)
        if not exact and out_size == 2 * in_size:
            return np.arange(out_size, dtype=np.int64) >> 1
        scale = coordinate_scale(in_size, out_size, False, scale_factor, np.float32)
        if exact:
            dst = np.arange(out_size, dtype=np.float64) + 0.5
            source = (dst * np.float64(scale)).astype(np.float32)
        else:
            source = np.arange(out_size, dtype=np.float32) * scale
    else:
        real = np.dtype(dtype).type
        if exact:
            clamped = _source_coordinate(in_size, out_size, False, scale_factor, True, real)
            source = (clamped + real(0.5)).astype(np.float32)
        else:
            scale = coordinate_scale(in_size, out_size, False, scale_factor, real)
            source = (np.arange(out_size, dtype=real) * scale).astype(np.float32)
    return np.minimum(np.floor(source).astype(np.int64), in_size - 1)


# Per-row tap arrays (out_size, K): the sample indices, their weights and which are visits.
RowTaps = tuple[np.ndarray, np.ndarray, np.ndarray]


def _area_taps(in_size: int, out_size: int) -> RowTaps:
    """PyTorch's adaptive average pooling: output ``o`` averages inputs
    ``floor(o * in / out) .. ceil((o + 1) * in / out) - 1`` (integer arithmetic)."""
    dst = np.arange(out_size, dtype=np.int64)
    start = dst * in_size // out_size
    end = ((dst + 1) * in_size + out_size - 1) // out_size
    offsets = np.arange(int((end - start).max()))
    taps = start[:, None] + offsets[None, :]
    used = offsets[None, :] < (end - start)[:, None]
    weights = np.broadcast_to(1.0 / (end - start)[:, None], taps.shape)
    return np.where(used, taps, 0), weights, used


def _opencv_area_taps(in_size: int, out_size: int, every_axis_shrinks: bool) -> RowTaps:
    """OpenCV's ``INTER_AREA`` (``cv::resize``, OpenCV 4-5), with its sample spacing
    ``scale = 1 / (out / in)``.

    Where every axis shrinks (``scale >= 1`` on each), output ``o`` covers ``[o * scale,
    o * scale + scale]``, and each input it covers weighs the part covered divided by the
    footprint (clipped to the input): ``computeResizeAreaTab``, whose partial samples at the
    ends count only when more than 1e-3 of them is covered. Otherwise every axis takes a
    2-tap rule: ``sx = floor(o * scale)``, ``fx = (o + 1) - (sx + 1) / scale`` reduced to its
    fraction (0 where it is not positive), weights ``1 - fx`` and ``fx`` on ``sx`` and ``sx
    + 1``, an edge sample alone at the ends."""
    inverse = out_size / in_size
    scale = 1.0 / inverse
    dst = np.arange(out_size, dtype=np.float64)
    if not every_axis_shrinks:
        sx = np.floor(dst * scale)
        fx = (dst + 1) - (sx + 1) * inverse
        fx = np.where(fx <= 0, 0.0, fx - np.floor(fx))
        fx = np.where((sx < 0) | (sx >= in_size - 1), 0.0, fx)
        sx = np.clip(sx, 0, in_size - 1).astype(np.int64)
        taps = np.stack([sx, np.minimum(sx + 1, in_size - 1)], axis=1)
        weights = np.stack([1.0 - fx, fx], axis=1)
        return taps, weights, np.ones(taps.shape, dtype=bool)
    start = dst * scale
    end = start + scale
    cell = np.minimum(scale, in_size - start)
    first = np.ceil(start)
    last = np.minimum(np.floor(end), in_size - 1)
    first = np.minimum(first, last)
    width = int((last - first).max()) + 2
    taps = (first - 1).astype(np.int64)[:, None] + np.arange(width)[None, :]
    head = (first - start)[:, None]
    tail = (end - last)[:, None]
    weights = np.where(taps < first[:, None], head, 1.0)
    weights = np.where(
        taps == last[:, None], np.minimum(np.minimum(tail, 1.0), cell[:, None]), weights
    )
    used = np.where(
        taps < first[:, None],
        head > 1e-3,
        np.where(taps == last[:, None], tail > 1e-3, taps < last[:, None]),
    )
    used &= (taps >= 0) & (taps < in_size)
    return np.where(used, taps, 0), weights / cell[:, None], used


def _antialiased_taps(
    in_size: int, out_size: int, mode: str, scale_factor: float | None, dtype: Any
) -> RowTaps:
    """PIL's convention (shared by PyTorch's and JAX's antialias): the filter is stretched by
    ``kscale = max(scale, 1)`` around ``center = (dst + 0.5) * scale``; input ``j`` weighs
    ``f((j - center + 0.5) / kscale)``, and the weights are renormalised to sum to 1. The
    visits are PIL's and PyTorch's window, ``trunc(center -+ support + 0.5)`` clipped to the
    input, zero weights at its ends included (PyTorch reads them: a NaN there spreads).

    The window and the filter's argument are computed as PyTorch computes them, in the data's
    dtype and in its order of operations (``((j - center) + 0.5) * (1 / kscale)``): whether
    a tap lands exactly on the filter's zero, and so whether ``0 * inf`` makes a NaN there,
    depends on that rounding."""
    filt = FILTERS[mode]
    work = np.float64 if filt.float64_window else dtype
    real = np.dtype(work).type
    scale = coordinate_scale(in_size, out_size, False, scale_factor, work)
    stretched = scale >= 1
    inverse = real(1) / scale if stretched else real(1)
    support = real(filt.window.support) * (scale if stretched else real(1))
    center = scale * (np.arange(out_size, dtype=real) + real(0.5))
    first = np.maximum(np.trunc(center - support + real(0.5)), 0).astype(np.int64)
    end = np.minimum(np.trunc(center + support + real(0.5)), in_size).astype(np.int64)
    offsets = np.arange(int((end - first).max()))
    taps = first[:, None] + offsets[None, :]
    used = offsets[None, :] < (end - first)[:, None]
    distance = ((taps.astype(real) - center[:, None]) + real(0.5)) * inverse
    weights = np.where(used, filt.window.weight(distance.astype(np.float64)), 0).astype(real)
    total = np.zeros(out_size, dtype=real)
    for column in weights.T:  # summed in order, in the data's dtype, like PIL and PyTorch
        total = total + column
    return np.where(used, taps, 0), weights / total[:, None], used


def _source_coordinate(in_size, out_size, align_corners, scale_factor, clamp_negative, dtype):
    """PyTorch's ``area_pixel_compute_source_index`` in the data's dtype.

    In float32 the half-pixel form is rounded once, as a fused multiply-add
    ``fma(scale, dst + 0.5, -0.5)``: that is what PyTorch's CPU kernels compute on every
    x86-64 build with AVX2/AVX-512 (measured bit for bit against torch 2.13, 1-D, 2-D and
    3-D). Rounding the product first moves ``src`` by up to 2^-8 where ``scale * (dst +
    0.5)`` lies just above a power of two (7.8e-3 relative error for 200,000 -> 500,000
    rows). The float32 product is exact in float64, and so is subtracting 0.5 below 2^28
    outputs, so one rounding to float32 afterwards is the fma.
    """
    real = np.dtype(dtype).type
    scale = coordinate_scale(in_size, out_size, align_corners, scale_factor, dtype)
    dst = np.arange(out_size, dtype=dtype)
    if align_corners:
        return scale * dst
    if real is np.float32:
        src = (np.float64(scale) * (dst + real(0.5)).astype(np.float64) - 0.5).astype(real)
    else:
        src = scale * (dst + real(0.5)) - real(0.5)
    return np.maximum(src, real(0)) if clamp_negative else src


def _filtered_taps(
    in_size: int,
    out_size: int,
    mode: str,
    align_corners: bool | None,
    scale_factor: float | None,
    dtype: Any,
) -> RowTaps:
    filt = FILTERS[mode]
    work = np.float64 if filt.float64_weights else dtype
    src = _source_coordinate(
        in_size, out_size, bool(align_corners), scale_factor, filt.clamp_negative_source, work
    )
    if filt.float32_source:
        src = src.astype(np.float32).astype(work)
    # PyTorch's guard_index_and_lambda: the base index never passes the last sample and the
    # fraction stays in [0, 1] (matters only where rounding pushes src past in - 1).
    base = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    frac = np.clip(src - base.astype(work), 0, 1).astype(work)
    offsets = np.arange(1 - filt.radius, filt.radius + 1)
    taps = base[:, None] + offsets[None, :]
    if filt.row_weight is not None:
        weights = filt.row_weight(frac, offsets).astype(work)
    else:
        weights = filt.weight(frac[:, None] - offsets[None, :].astype(work))
    if filt.normalized:
        weights = weights / weights.sum(axis=1, keepdims=True)
    inside = (taps >= 0) & (taps < in_size)
    if filt.border == "reflect":
        folded = taps % (2 * in_size)
        mirrored = np.where(folded >= in_size, 2 * in_size - 1 - folded, folded)
        return mirrored, weights, np.ones_like(inside)
    if filt.border == "drop":
        weights = np.where(inside, weights, 0.0)
        weights = weights / weights.sum(axis=1, keepdims=True)
        return np.where(inside, taps, 0), weights, inside
    return np.clip(taps, 0, in_size - 1), weights, np.ones_like(inside)


def _equal_size_taps(size: int, antialias: bool, dtype) -> AxisTaps:
    """PyTorch keeps an axis whose output size equals its input size, whatever the scale
    factor (measured: scale_factor=1.2 on 3 samples gives the input back), in its linear
    kernels and its antialiased ones; its bicubic kernel interpolates such an axis. The
    antialiased kernel copies; the linear one reads each sample twice, with weights 1 and
    0 (so an Inf there becomes NaN, without spreading)."""
    samples = np.arange(size, dtype=np.int32)[:, None]
    if antialias:
        return AxisTaps(
            size, size, samples, np.ones((size, 1), dtype=dtype), np.ones(size, dtype=np.int32)
        )
    return AxisTaps(
        size,
        size,
        np.repeat(samples, 2, axis=1),
        np.tile(np.array([1, 0], dtype=dtype), (size, 1)),
        np.full(size, 2, dtype=np.int32),
    )


def _keeps_equal_sizes(mode: str, antialias: bool) -> bool:
    filt = FILTERS[mode]
    return filt.interpolating and (antialias or filt is FILTERS["linear"])


def axis_taps(
    in_size: int,
    out_size: int,
    mode: str,
    align_corners: bool | None,
    scale_factor: float | None,
    dtype: str,
    antialias: bool = False,
    spatial_dims: int = 2,
    for_adjoint: bool = False,
    every_axis_shrinks: bool = True,
    other_outputs: int = 0,
) -> AxisTaps:
    """The tap table for one axis; ``scale_factor`` is None when the scale is ``in / out``.

    ``spatial_dims`` and ``other_outputs`` (the output sizes of the call's other spatial
    axes, summed) select PyTorch's nearest rounding, which differs between its 2-D op up to
    ``out_h + out_w = 128`` and everything else (see :func:`uses_pointwise_nearest`); no
    other mode reads them. ``for_adjoint`` gives the table whose transpose the backward
    applies, which differs in one case: PyTorch's antialiased forward copies an axis of
    unchanged size (scale 1), while its backward applies the filter window there (weights
    0, 1, 0: the same numbers, but a NaN spreads to the neighbours). ``every_axis_shrinks``:
    whether no axis of the call grows, which decides OpenCV's area rule (``area-opencv``).
    Tables are cached: they depend only on these arguments.
    """
    mode = ALIASES.get(mode, mode)
    pointwise = False
    if mode in ("nearest", "nearest-exact"):
        pointwise = uses_pointwise_nearest(spatial_dims, out_size + other_outputs)
    key = _TableKey(
        in_size,
        out_size,
        mode,
        align_corners,
        scale_factor,
        dtype,
        antialias,
        pointwise,
        for_adjoint,
        every_axis_shrinks,
    )
    return _axis_taps(key)


class _TableKey(NamedTuple):
    """What one axis's table depends on (:func:`axis_taps`' arguments, the nearest rule
    decided)."""

    in_size: int
    out_size: int
    mode: str
    align_corners: bool | None
    scale_factor: float | None
    dtype: str
    antialias: bool
    pointwise_nearest: bool
    for_adjoint: bool
    every_axis_shrinks: bool


@lru_cache(maxsize=256)
def _axis_taps(key: _TableKey) -> AxisTaps:
    in_size, out_size, mode, align_corners, scale_factor, dtype = key[:6]
    antialias, pointwise_nearest, for_adjoint, every_axis_shrinks = key[6:]
    if mode not in MODE_DIMS:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    real = np.dtype(dtype)
    if mode in ("nearest", "nearest-exact"):
        index = _nearest_index(
            in_size, out_size, scale_factor, mode == "nearest-exact", pointwise_nearest, real
        )
        return AxisTaps(
            in_size,
            out_size,
            index.astype(np.int32)[:, None],
            np.ones((out_size, 1), real),
            np.ones(out_size, dtype=np.int32),
        )
    if mode == "area":
        return dense_visits(in_size, *_area_taps(in_size, out_size), real)
    if mode == "area-opencv":
        return dense_visits(
            in_size, *_opencv_area_taps(in_size, out_size, every_axis_shrinks), real
        )
    if (
        in_size == out_size
        and _keeps_equal_sizes(mode, antialias)
        and not (for_adjoint and antialias and (scale_factor is None or scale_factor == 1.0))
    ):
        return _equal_size_taps(in_size, antialias, real)
    if antialias:
        return dense_visits(
            in_size, *_antialiased_taps(in_size, out_size, mode, scale_factor, real), real
        )
    return dense_visits(
        in_size, *_filtered_taps(in_size, out_size, mode, align_corners, scale_factor, real), real
    )
