"""The ``tiinterp`` command's image in memory, and its resampling by ``tiinterp.interpolate``.

A :class:`Raster` is what the file readers (:mod:`tiinterp.cli.image_files`,
:mod:`tiinterp.cli.png`) return and the writers take: integer levels, ``(H, W, C)``, with the
channel layout named as Pillow names its modes. :func:`resample` resizes one with a single
``interpolate`` call, in three steps that the command runs in different threads
(:func:`to_planes`, :func:`resample_planes`, :func:`to_raster`): float32 for 8-bit images,
float64 for 16-bit ones where the arch has it (float32's 24-bit significand leaves errors
of a few hundredths of a 16-bit level after two lanczos passes, enough to change the
rounding of some outputs; float64's do not).
Colour with alpha is resampled premultiplied by alpha and divided by the resampled alpha
afterwards, so a transparent pixel's colour never bleeds into its opaque neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Channel layouts, named as Pillow's modes; the alpha channel, if any, is the last one.
LAYOUT_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4}


class ImageError(Exception):
    """A file tiinterp cannot read or write; the message says why, for the error line."""


@dataclass
class Raster:
    """An image as ``(H, W, C)`` uint8 or uint16 levels, C given by ``layout``."""

    pixels: np.ndarray
    layout: str
    icc_profile: bytes | None = None

    @property
    def bits(self) -> int:
        return 16 if self.pixels.dtype == np.uint16 else 8

    @property
    def has_alpha(self) -> bool:
        return self.layout.endswith("A")

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    def describe(self) -> str:
        names = {"L": "gray", "LA": "gray+alpha"}
        return f"{self.bits}-bit {names.get(self.layout, self.layout)}"


@dataclass
class Planes:
    """A raster as ``interpolate`` takes it: ``(1, C, H, W)`` floats, colour premultiplied
    by alpha; ``levels`` is the integer dtype of the raster it came from."""

    values: np.ndarray
    layout: str
    icc_profile: bytes | None
    levels: np.dtype


def to_planes(raster: Raster, wide: bool) -> Planes:
    """``raster`` as float planes: float64 if ``wide`` (16-bit images on an arch that has
    float64), else float32."""
    top = float(np.iinfo(raster.pixels.dtype).max)
    dtype = np.float64 if wide else np.float32
    values = raster.pixels.astype(dtype)
    if raster.has_alpha:
        # Premultiplied: a transparent pixel's colour weighs nothing.
        values[..., :-1] *= values[..., -1:] / dtype(top)
    planes = np.ascontiguousarray(values.transpose(2, 0, 1))[None]
    return Planes(planes, raster.layout, raster.icc_profile, raster.pixels.dtype)


# Note [8-bit images as Pillow resizes them]
# Pillow resizes an 8-bit image in two passes and stores the intermediate image in 8 bits:
# rounded to the nearest level and clipped to 0..255. Where a filter with negative lobes
# overshoots at a hard edge, that clipping changes the final levels (by up to 30 for
# lanczos3 next to a black and white step), so one 2-D resize in float cannot give
# Pillow's numbers, and neither can the two passes in the other order. tiinterp resizes
# 8-bit images as Pillow does: the rows first, unless the height shrinks by more than twice
# as many samples as the width (Pillow 13's ImagingResampleInner, python-pillow/Pillow#9549;
# earlier Pillow always takes the rows first), the levels rounded and clipped in between.
# Each pass is one ``interpolate`` call with the other axis moved into the channels (a
# spatial axis of 1 sample, which every mode copies). What remains is Pillow's fixed-point
# weights (22 fraction bits), which round some levels the other way: at most 1 level apart
# (tests/cli/test_pil_filters.py). 16-bit images keep one float64 resize.


def _columns_first(height: int, width: int, out_height: int, out_width: int) -> bool:
    """Pillow's order of passes (Note [8-bit images as Pillow resizes them])."""
    return height - out_height > 0 and height - out_height > 2 * (width - out_width)


def _resize_axis(values: np.ndarray, axis: int, size: int, mode: str, antialias: bool):
    """``values`` ``(1, C, H, W)`` resized along ``axis`` (2 or 3) only."""
    from .._ops.resize import interpolate

    moved = np.moveaxis(values, axis, -1)
    lines = moved.reshape(1, -1, 1, moved.shape[-1])
    resized = interpolate(lines, size=(1, size), mode=mode, antialias=antialias)
    return np.moveaxis(resized.reshape(*moved.shape[:-1], size), -1, axis)


def resample_planes(planes: Planes, width: int, height: int, mode: str, antialias: bool) -> Planes:
    """``planes`` resized to ``width`` x ``height``: by one ``tiinterp.interpolate`` call, or
    for 8-bit images by Pillow's two passes (Note [8-bit images as Pillow resizes them])."""
    from .._ops.resize import interpolate

    values = planes.values
    if planes.levels != np.uint8:
        resized = interpolate(values, size=(height, width), mode=mode, antialias=antialias)
        return Planes(resized, planes.layout, planes.icc_profile, planes.levels)
    passes = [(3, width), (2, height)]
    if _columns_first(values.shape[2], values.shape[3], height, width):
        passes.reverse()
    passes = [(axis, size) for axis, size in passes if values.shape[axis] != size]
    for step, (axis, size) in enumerate(passes):
        if step:
            values = np.floor(np.clip(values, 0.0, 255.0) + 0.5)
        values = _resize_axis(values, axis, size, mode, antialias)
    return Planes(np.ascontiguousarray(values), planes.layout, planes.icc_profile, planes.levels)


def to_raster(planes: Planes) -> Raster:
    """Resampled ``planes`` as a raster: levels rounded to the nearest integer and clipped
    to the bit depth's range."""
    top = float(np.iinfo(planes.levels).max)
    result = planes.values[0].transpose(1, 2, 0)
    if planes.layout.endswith("A"):
        # Unmultiply by the alpha before clipping: where the filter overshoots, colour and
        # alpha overshoot together and their ratio is still the colour. Pixels whose alpha
        # rounds to 0 are fully transparent and get colour 0.
        alpha = result[..., -1:]
        visible = alpha >= 0.5
        colour = result[..., :-1] * top / np.where(visible, alpha, 1.0)
        result = np.concatenate([np.where(visible, colour, 0.0), alpha], axis=-1)
    result = np.clip(result, 0.0, top)
    levels = np.floor(result + 0.5).astype(planes.levels)
    return Raster(levels, planes.layout, planes.icc_profile)


def resample(raster: Raster, width: int, height: int, mode: str, antialias: bool) -> Raster:
    """``raster`` resized to ``width`` x ``height`` by one ``tiinterp.interpolate`` call;
    levels rounded to the nearest integer and clipped to the bit depth's range."""
    from .._runtime.session import supports_float64

    planes = to_planes(raster, raster.bits == 16 and supports_float64())
    return to_raster(resample_planes(planes, width, height, mode, antialias))
