"""Per-axis tap tables: which input samples each output reads, and with what weights.

Every mode is separable, so an N-D resize is one 1-D resampling per spatial axis, and every
1-D resampling is described by an :class:`AxisTaps` table: output ``o`` reads the contiguous
window ``start[o] .. start[o] + count[o] - 1`` of the input with ``weight[o, :count[o]]``.
The window is contiguous for every mode because the source coordinate grows with the output
index; clamped border taps that land on the same sample are merged into one weight.

The adjoint of a 1-D resampling is again a 1-D resampling, by the transposed table
(:attr:`AxisTaps.transposed`): input ``i`` gathers the gradients of the contiguous run of
outputs that read it. Gathering instead of scattering keeps the backward free of atomics and
bit-for-bit deterministic.

Coordinates follow PyTorch's ``F.interpolate`` (see ``SEMANTICS.md``) and are computed in the
data's dtype, as PyTorch does, so float32 results round like PyTorch's.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from ._filters import ALIASES, FILTERS, MODE_DIMS, MODES


@dataclass(frozen=True, eq=False)
class AxisTaps:
    """A 1-D resampling from ``in_size`` to ``out_size`` samples as a windowed table."""

    in_size: int
    out_size: int
    start: np.ndarray  # int32 (out_size,)
    count: np.ndarray  # int32 (out_size,)
    weight: np.ndarray  # float (out_size, max(count)); zero past count

    @property
    def is_identity(self) -> bool:
        return (
            self.in_size == self.out_size
            and self.weight.shape[1] == 1
            and bool(np.all(self.count == 1))
            and bool(np.all(self.weight[:, 0] == 1))
            and bool(np.array_equal(self.start, np.arange(self.out_size)))
        )

    def __post_init__(self):
        for array in (self.start, self.count, self.weight):
            array.flags.writeable = False

    @cached_property
    def is_gather(self) -> bool:
        """Every output copies one input sample (nearest modes, forward)."""
        weight = self.fixed_width[1]
        return weight.shape[1] == 1 and bool(np.all(weight == 1))

    @cached_property
    def fixed_width(self) -> tuple[np.ndarray, np.ndarray]:
        """``(index, weight)``, both ``(out_size, K)``: every window padded to one width
        ``K`` for kernels that unroll the tap loop and sum the taps in order.

        A window of ``c < K`` taps is padded at the front by splitting its first tap into
        ``K - c + 1`` taps on the same sample with weights ``w/2^p, w/2^p, w/2^(p-1), ...,
        w/2`` (``p = K - c``). Each partial sum of those is an exact doubling, so the sum
        equals ``w * x`` bit for bit (barring subnormals), an Inf sample stays Inf (a zero
        padding weight would turn it into NaN) and a NaN spreads exactly where the window
        reads it. A window of no taps (an input no output reads, in an adjoint table) has
        all-zero weights here; :attr:`empty_outputs` lists those rows, which the kernels'
        callers zero afterwards (``0 * NaN`` would not be 0).
        """
        width = self.weight.shape[1]
        pads = width - np.maximum(self.count, 1)[:, None]  # (out_size, 1)
        k = np.arange(width)[None, :]
        # Column k reads tap k - pads of the window; columns 0..pads all read tap 0.
        tap = np.maximum(k - pads, 0)
        index = (self.start[:, None] + tap).astype(np.int32)
        weight = np.take_along_axis(self.weight, tap, axis=1).astype(np.float64)
        halvings = np.where(k <= pads, pads - np.maximum(k - 1, 0), 0)
        weight = np.ldexp(weight, -halvings).astype(self.weight.dtype)
        for array in (index, weight):
            array.flags.writeable = False
        return index, weight

    @cached_property
    def empty_outputs(self) -> np.ndarray:
        """Outputs whose window is empty (``count == 0``): they are exactly 0."""
        empty = np.flatnonzero(self.count == 0)
        empty.flags.writeable = False
        return empty

    @cached_property
    def transposed(self) -> "AxisTaps":
        """The adjoint table: input ``i`` reads the outputs whose windows contain ``i``."""
        taps = np.arange(self.weight.shape[1])
        used = taps[None, :] < self.count[:, None]
        outputs = np.broadcast_to(np.arange(self.out_size)[:, None], used.shape)[used]
        inputs = (self.start[:, None] + taps[None, :])[used]
        weights = self.weight[used]
        first = np.full(self.in_size, self.out_size, dtype=np.int64)
        last = np.full(self.in_size, -1, dtype=np.int64)
        np.minimum.at(first, inputs, outputs)
        np.maximum.at(last, inputs, outputs)
        unread = last < 0
        first[unread] = 0
        count = np.where(unread, 0, last - first + 1)
        weight = np.zeros((self.in_size, max(int(count.max()), 1)), dtype=self.weight.dtype)
        np.add.at(weight, (inputs, outputs - first[inputs]), weights)
        return AxisTaps(self.out_size, self.in_size, first.astype(np.int32),
                        count.astype(np.int32), weight)


def coordinate_scale(in_size: int, out_size: int, align_corners: bool,
                     scale_factor: float | None, dtype: np.dtype):
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


# PyTorch 2.13's CPU nearest kernels compute the source index in two ways (measured against
# every (in, out) pair up to 200 and random scale factors): the 2-D op in float32 up to 128
# outputs per axis and in float64 (rounded to float32 before the floor) above that; the 1-D
# and 3-D ops always in float64. No pair with 127 or 128 outputs tells the two 2-D rules
# apart, so the exact cut is immaterial.
FLOAT32_INDEX_MAX_OUTPUTS = {1: 0, 2: 128, 3: 0}


def _nearest_index(in_size: int, out_size: int, scale_factor: float | None,
                   exact: bool, spatial_dims: int) -> np.ndarray:
    """PyTorch's nearest / nearest-exact source index, the same for every data dtype.

    ``nearest`` special-cases ``out == in`` (identity) and ``out == 2 * in`` (``o >> 1``),
    as PyTorch's ``nearest_idx`` does; elsewhere ``floor(o * scale)`` and, for
    ``nearest-exact``, ``floor((o + 0.5) * scale)``, with ``scale = in / out`` or
    ``1 / scale_factor``, rounded as PyTorch rounds them (see
    :data:`FLOAT32_INDEX_MAX_OUTPUTS`). This differs from exact integer arithmetic for about
    2% of (in, out) pairs.
    """
    if not exact and out_size == in_size:
        return np.arange(out_size, dtype=np.int64)
    if not exact and out_size == 2 * in_size:
        return np.arange(out_size, dtype=np.int64) // 2
    single = out_size <= FLOAT32_INDEX_MAX_OUTPUTS[spatial_dims]
    real = np.float32 if single else np.float64
    scale = coordinate_scale(in_size, out_size, False, scale_factor, real)
    dst = np.arange(out_size, dtype=real) + real(0.5 if exact else 0)
    source = (dst * scale).astype(np.float32)
    return np.minimum(np.floor(source).astype(np.int64), in_size - 1)


def _area_taps(in_size: int, out_size: int):
    """PyTorch's adaptive average pooling: output ``o`` averages inputs
    ``floor(o * in / out) .. ceil((o + 1) * in / out) - 1`` (integer arithmetic)."""
    dst = np.arange(out_size, dtype=np.int64)
    start = dst * in_size // out_size
    end = ((dst + 1) * in_size + out_size - 1) // out_size
    width = int((end - start).max())
    offsets = np.arange(width)
    taps = np.minimum(start[:, None] + offsets[None, :], end[:, None] - 1)
    used = offsets[None, :] < (end - start)[:, None]
    weights = np.where(used, 1.0 / (end - start)[:, None], 0.0)
    return taps, weights


def _antialiased_taps(in_size: int, out_size: int, mode: str, scale_factor: float | None):
    """PIL's convention (shared by PyTorch's and JAX's antialias): the filter is stretched by
    ``kscale = max(scale, 1)`` around ``center = (dst + 0.5) * scale``; input ``j`` weighs
    ``f((j + 0.5 - center) / kscale)``; samples outside the input are dropped and the
    weights renormalised."""
    filt = FILTERS[mode]
    scale = float(coordinate_scale(in_size, out_size, False, scale_factor, np.float64))
    kscale = max(scale, 1.0)
    center = (np.arange(out_size) + 0.5) * scale
    support = filt.radius * kscale
    first = np.floor(center - support).astype(np.int64)
    width = int(np.ceil(2 * support)) + 2
    taps = first[:, None] + np.arange(width)[None, :]
    weights = filt.antialias_weight((taps + 0.5 - center[:, None]) / kscale)
    weights = np.where((taps >= 0) & (taps < in_size), weights, 0.0)
    return np.clip(taps, 0, in_size - 1), weights / weights.sum(axis=1, keepdims=True)


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


def _filtered_taps(in_size, out_size, mode, align_corners, scale_factor, dtype):
    filt = FILTERS[mode]
    work = np.float64 if filt.float64_weights else dtype
    src = _source_coordinate(in_size, out_size, bool(align_corners), scale_factor,
                             filt.clamp_negative_source, work)
    # PyTorch's guard_index_and_lambda: the base index never passes the last sample and the
    # fraction stays in [0, 1] (matters only where rounding pushes src past in - 1).
    base = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    frac = np.clip(src - base.astype(work), 0, 1).astype(work)
    offsets = np.arange(1 - filt.radius, filt.radius + 1)
    taps = base[:, None] + offsets[None, :]
    weights = filt.weight(frac[:, None] - offsets[None, :].astype(work))
    inside = (taps >= 0) & (taps < in_size)
    if filt.border == "drop":
        weights = np.where(inside, weights, 0.0)
        weights = weights / weights.sum(axis=1, keepdims=True)
    return np.clip(taps, 0, in_size - 1), weights


def _windowed(in_size: int, taps: np.ndarray, weights: np.ndarray, dtype,
              trim: bool = False) -> AxisTaps:
    """Pack per-output (tap, weight) lists, taps sorted per row, into a window table.
    ``trim`` drops zero-weight taps at either end of a row (antialias windows are generous;
    elsewhere a zero-weight tap stays, so a NaN there spreads as in PyTorch)."""
    out_size = taps.shape[0]
    nonzero = (weights != 0) | (not trim)
    any_nonzero = nonzero.any(axis=1)
    first = np.where(any_nonzero, nonzero.argmax(axis=1), 0)
    last = np.where(any_nonzero, taps.shape[1] - 1 - nonzero[:, ::-1].argmax(axis=1), 0)
    rows = np.arange(out_size)
    start = taps[rows, first]
    count = taps[rows, last] - start + 1
    keep = (np.arange(taps.shape[1])[None, :] >= first[:, None]) & \
        (np.arange(taps.shape[1])[None, :] <= last[:, None])
    weights = np.where(keep, weights, 0)
    taps = np.where(keep, taps, start[:, None])
    table = np.zeros((out_size, int(count.max())), dtype=np.float64)
    rows = np.broadcast_to(np.arange(out_size)[:, None], taps.shape)
    np.add.at(table, (rows, taps - start[:, None]), weights.astype(np.float64))
    # Accumulating in float64 keeps unmerged float32 weights exact; merged clamped-border
    # weights are rounded once.
    return AxisTaps(in_size, out_size, start.astype(np.int32), count.astype(np.int32),
                    table.astype(dtype))


@lru_cache(maxsize=256)
def axis_taps(in_size: int, out_size: int, mode: str, align_corners: bool | None,
              scale_factor: float | None, dtype: str, antialias: bool = False,
              spatial_dims: int = 2) -> AxisTaps:
    """The tap table for one axis; ``scale_factor`` is None when the scale is ``in / out``.

    ``spatial_dims`` selects PyTorch's nearest rounding, which differs between its 2-D and
    its 1-D / 3-D ops. Tables are cached: they depend only on these arguments.
    """
    mode = ALIASES.get(mode, mode)
    if mode not in MODE_DIMS:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    dtype = np.dtype(dtype)
    if mode in ("nearest", "nearest-exact"):
        index = _nearest_index(in_size, out_size, scale_factor, mode == "nearest-exact",
                               spatial_dims)
        return _windowed(in_size, index[:, None], np.ones((out_size, 1), dtype), dtype)
    if mode == "area":
        return _windowed(in_size, *_area_taps(in_size, out_size), dtype)
    if antialias:
        return _windowed(in_size, *_antialiased_taps(in_size, out_size, mode, scale_factor),
                         dtype, trim=True)
    taps, weights = _filtered_taps(in_size, out_size, mode, align_corners, scale_factor, dtype)
    return _windowed(in_size, taps, weights, dtype)
