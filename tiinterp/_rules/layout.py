"""The ``layout=`` argument of ``interpolate`` and ``interpolate_backward``: which axes of the
caller's array are the batch, the channels and the spatial axes.

Every layout is mapped onto the engine's channels-first ``(N, C, *spatial)`` by a view where
one exists: channels-last arrays by moving their last axis to position 1, spatial-last
arrays (``"...HW"``) by folding every leading axis into the channels of a batch of one.
Results come back in the caller's layout and C-contiguous: a folded result is computed in
place through a reshaped view of it, a channels-last one in a channels-first buffer that is
then copied into it, transposing.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._runtime.arrays import kind_of
from .filters import MODE_DIMS
from .validate import check_mode

CHANNELS_FIRST = ("NCW", "NCHW", "NCDHW")
CHANNELS_LAST = ("NWC", "NHWC", "NDHWC")
SPATIAL_LAST = ("...W", "...HW", "...DHW")
LAYOUTS = CHANNELS_FIRST + CHANNELS_LAST + SPATIAL_LAST
_EXPECTED = ", ".join(map(repr, LAYOUTS)) + " or None"
_LINEAR_NAMES = {1: "'linear'", 2: "'bilinear'", 3: "'trilinear'"}


@dataclass(frozen=True)
class Layout:
    """A checked ``layout=`` value: its name, its number of spatial axes and how its axes
    map onto ``(N, C, *spatial)``: ``"first"`` (already so), ``"last"`` (channels last) or
    ``"folded"`` (any leading axes, then the spatial ones)."""

    name: str
    spatial: int
    arrangement: str

    def bind(self, array: Any, name: str) -> BoundLayout:
        """This layout applied to the caller's ``array`` (the input, or the gradient of the
        output): its rank and spatial sizes checked, and its kind able to take a view."""
        kind = kind_of(array, name)
        shape = tuple(int(n) for n in array.shape)
        rank = self.spatial + 2
        if self.arrangement == "folded":
            if len(shape) < self.spatial:
                raise ValueError(
                    f"{name}: expected at least {self.spatial}-D for layout {self.name!r}, "
                    f"got shape {shape}"
                )
        elif len(shape) != rank:
            raise ValueError(
                f"{name}: expected {rank}-D for layout {self.name!r}, got shape {shape}"
            )
        if self.arrangement != "first" and kind.name == "taichi":
            raise TypeError(
                f"{name}: expected a NumPy array or a torch tensor for layout {self.name!r} "
                "(a Taichi ndarray has no views to rearrange its axes), got a Taichi ndarray; "
                "use tiinterp.interpolate_into(..., spatial_axes=...) for Taichi arrays in "
                "other layouts"
            )
        bound = BoundLayout(self, self._lead(shape))
        if any(n < 1 for n in bound.spatial_of(shape)):
            raise ValueError(
                f"{name}: expected every spatial size >= 1, got shape {shape} "
                f"in layout {self.name!r}"
            )
        return bound

    def check_mode(self, mode: Any) -> None:
        """Refuse a mode that does not take this layout's number of spatial axes, in the
        caller's terms (the channels-first check would name the folded rank)."""
        canonical = check_mode(mode)
        allowed = MODE_DIMS[canonical]
        if self.spatial in allowed:
            return
        counts = " or ".join(map(str, allowed))
        plural = "axis" if allowed == (1,) else "axes"
        hint = (
            f"; for layout {self.name!r} use {_LINEAR_NAMES[self.spatial]}"
            if canonical in ("linear", "bilinear", "trilinear")
            else ""
        )
        raise ValueError(
            f"mode={mode!r}: expected a layout with {counts} spatial {plural}, got layout "
            f"{self.name!r} with {self.spatial}{hint}"
        )

    def _lead(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The caller's axes that are not spatial, in order."""
        if self.arrangement == "folded":
            return shape[: len(shape) - self.spatial]
        if self.arrangement == "last":
            return (shape[0], shape[-1])
        return shape[:2]


@dataclass(frozen=True)
class BoundLayout:
    """A layout applied to one call: ``lead`` holds the caller's non-spatial axes ((N, C)
    for the fixed-rank layouts, the leading axes for the folded ones)."""

    layout: Layout
    lead: tuple[int, ...]

    def spatial_of(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The spatial axes of a shape given in the caller's layout."""
        if self.layout.arrangement == "last":
            return tuple(shape[1:-1])
        return tuple(shape[len(shape) - self.layout.spatial :])

    def canonical_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """A caller-layout shape as ``(N, C, *spatial)``."""
        shape = tuple(shape)
        if self.layout.arrangement == "last":
            return (shape[0], shape[-1], *shape[1:-1])
        if self.layout.arrangement == "folded":
            return (1, math.prod(self.lead), *self.spatial_of(shape))
        return shape

    def caller_shape(self, canonical: Sequence[int]) -> tuple[int, ...]:
        """An ``(N, C, *spatial)`` shape in the caller's layout."""
        canonical = tuple(canonical)
        if self.layout.arrangement == "last":
            return (canonical[0], *canonical[2:], canonical[1])
        if self.layout.arrangement == "folded":
            return (*self.lead, *canonical[2:])
        return canonical

    def canonical_view(self, array: Any) -> Any:
        """The caller's array as ``(N, C, *spatial)``: a view, except where folding the
        leading axes of a non-contiguous array needs a copy."""
        if self.layout.arrangement == "last":
            return _move_axis(array, -1, 1)
        if self.layout.arrangement == "folded":
            return array.reshape(self.canonical_shape(tuple(array.shape)))
        return array

    def canonical_input_size(self, input_size: Any) -> Any:
        """``interpolate_backward``'s ``input_size``, given in the caller's layout, as
        ``(N, C, *spatial)``. Only its length, and for a folded layout its leading axes, are
        checked here: the rest is the channels-first check's."""
        if isinstance(input_size, (str, bytes)) or not isinstance(
            input_size, (Sequence, np.ndarray)
        ):
            return input_size  # the channels-first check refuses it, saying what it expects
        values = tuple(input_size)
        if not all(
            isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))
            for v in values
        ):
            raise ValueError(
                f"input_size: expected the forward input's full shape in layout "
                f"{self.layout.name!r}, a sequence of ints, got {input_size!r}"
            )
        values = tuple(int(v) for v in values)
        spatial = self.layout.spatial
        if self.layout.arrangement == "folded":
            if values[: len(values) - spatial] != self.lead or len(values) < spatial:
                raise ValueError(
                    f"input_size: expected the leading axes {self.lead} of grad_output "
                    f"followed by {spatial} spatial sizes (layout {self.layout.name!r}), "
                    f"got {values}"
                )
        elif len(values) != spatial + 2:
            raise ValueError(
                f"input_size: expected the forward input's full shape in layout "
                f"{self.layout.name!r}, {spatial + 2} ints, got {values}"
            )
        return self.canonical_shape(values)

    def canonical_target(self, result: Any, canonical_shape: tuple[int, ...], kind: Any) -> Any:
        """Where the engine writes the ``(N, C, *spatial)`` result: a view of ``result``
        (the caller's C-contiguous array) when that view is C-contiguous too, else a new
        channels-first buffer that :meth:`finish` copies into ``result``."""
        if self.layout.arrangement == "first":
            return result
        if self.layout.arrangement == "folded":
            # A C-contiguous array reshapes to a view.
            return _reshaped_view(result, canonical_shape)
        view = self.canonical_view(result)
        if _is_c_contiguous(view):
            return view
        return kind.empty(result, canonical_shape)

    def finish(self, target: Any, result: Any) -> Any:
        """Copy a channels-first ``target`` into the caller's ``result`` unless the engine
        wrote ``result`` itself; returns ``result``."""
        if self.layout.arrangement == "last" and not _same_memory(target, result):
            _copy(result, _move_axis(target, 1, -1))
        return result


def parse_layout(layout: Any) -> Layout | None:
    """The checked ``layout=`` argument; None for None (the default channels-first layout
    of the input's rank, as without the argument)."""
    if layout is None:
        return None
    if not isinstance(layout, str):
        raise TypeError(f"layout: expected a str, one of {_EXPECTED}, got {type(layout).__name__}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {_EXPECTED}, got {layout!r}")
    spatial = len(layout.replace("N", "").replace("C", "").replace("...", ""))
    if layout in CHANNELS_FIRST:
        return Layout(layout, spatial, "first")
    if layout in CHANNELS_LAST:
        return Layout(layout, spatial, "last")
    return Layout(layout, spatial, "folded")


def bind_layout(layout: Any, array: Any, name: str, mode: Any) -> BoundLayout | None:
    """The checked ``layout=`` of a call on ``array``, bound to it and checked against the
    mode's number of spatial axes; None for the default layout (the call's unchanged path)."""
    checked = parse_layout(layout)
    if checked is None:
        return None
    bound = checked.bind(array, name)
    checked.check_mode(mode)
    return bound


# --- The few array operations a layout needs, for NumPy arrays and torch tensors ----------


def _move_axis(array: Any, source: int, destination: int) -> Any:
    if isinstance(array, np.ndarray):
        return np.moveaxis(array, source, destination)
    return array.movedim(source, destination)


def _reshaped_view(array: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(array, np.ndarray):
        return array.reshape(shape)
    return array.view(shape)


def _is_c_contiguous(array: Any) -> bool:
    if isinstance(array, np.ndarray):
        return bool(array.flags.c_contiguous)
    return bool(array.is_contiguous())


def _same_memory(a: Any, b: Any) -> bool:
    """Whether two arrays start at one address (a view of the other, not a new buffer)."""
    if isinstance(a, np.ndarray):
        return bool(a.ctypes.data == b.ctypes.data)
    return bool(a.data_ptr() == b.data_ptr())


def _copy(target: Any, source: Any) -> None:
    if isinstance(target, np.ndarray):
        np.copyto(target, source)
    else:
        target.copy_(source)
