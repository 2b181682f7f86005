"""Planning a resize: what a call asks for (:class:`ResizeSpec`) and the separable passes
that compute it, forward and adjoint, in the cheapest order. Nothing here touches Taichi;
the engine (``_engine/passes.py``) runs the plans."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .taps import AxisTaps, axis_taps


@dataclass(frozen=True)
class ResizeSpec:
    """A validated resize: everything its plan depends on, hashable (the plans' cache key).

    ``coord_scales`` holds, per spatial axis, the scale factor that sets the sample spacing
    (``1 / scale_factor``), or None where the spacing is ``in / out``.
    """

    in_shape: tuple[int, ...]
    out_spatial: tuple[int, ...]
    mode: str
    align_corners: bool
    coord_scales: tuple[float | None, ...]
    dtype: str
    antialias: bool

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.in_shape[:2] + self.out_spatial


@dataclass(frozen=True)
class Pass:
    """Resample ``axis`` (of the full (N, C, ...) array) by ``taps``."""

    axis: int
    taps: AxisTaps


def pass_shapes(in_shape: Sequence[int], passes: Sequence[Pass]) -> list[tuple[int, ...]]:
    """The array's shape before the first pass and after each."""
    shapes = [tuple(in_shape)]
    for p in passes:
        shape = list(shapes[-1])
        shape[p.axis] = p.taps.out_size
        shapes.append(tuple(shape))
    return shapes


def cheapest_order(shape: tuple[int, ...], passes: list[Pass]) -> tuple[Pass, ...]:
    """Order the separable passes so the fewest multiply-adds are done in total."""

    def cost(order: tuple[Pass, ...]) -> int:
        shapes = pass_shapes(shape, order)
        return sum(math.prod(s) * p.taps.width for s, p in zip(shapes[1:], order, strict=True))

    return min(itertools.permutations(passes), key=cost, default=())


@lru_cache(maxsize=128)
def forward_passes(spec: ResizeSpec, for_adjoint: bool = False) -> tuple[Pass, ...]:
    """The forward's passes in execution order; identity axes are left out.

    ``for_adjoint``: the passes whose transposes the adjoint applies (see ``axis_taps``).
    """
    passes = []
    dims = len(spec.in_shape) - 2
    shrinks = all(o <= i for i, o in zip(spec.in_shape[2:], spec.out_spatial, strict=True))
    for axis, (n_in, n_out, factor) in enumerate(
        zip(spec.in_shape[2:], spec.out_spatial, spec.coord_scales, strict=True), 2
    ):
        taps = axis_taps(
            n_in,
            n_out,
            spec.mode,
            spec.align_corners,
            factor,
            spec.dtype,
            spec.antialias,
            dims,
            for_adjoint,
            shrinks,
            sum(spec.out_spatial) - n_out,
        )
        if not taps.is_identity:
            passes.append(Pass(axis, taps))
    return cheapest_order(spec.in_shape, passes)


@lru_cache(maxsize=128)
def adjoint_passes(spec: ResizeSpec) -> tuple[Pass, ...]:
    """The adjoint's passes: the forward's, each transposed, ordered for the gradient's shape."""
    unit_scale = spec.align_corners or all(f in (None, 1.0) for f in spec.coord_scales)
    if (
        spec.mode == "bicubic"
        and not spec.antialias
        and spec.in_shape[2:] == spec.out_spatial
        and unit_scale
    ):
        # PyTorch's bicubic backward copies the gradient when no axis changes size (its
        # forward, numerically the identity there, still reads the zero-weight taps).
        return ()
    forward = forward_passes(spec, for_adjoint=True)
    return cheapest_order(spec.out_shape, [Pass(p.axis, p.taps.transposed) for p in forward])
