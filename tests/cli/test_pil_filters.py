"""Against Pillow: every mode whose registry entry names a PIL filter gives
``Image.resize``'s numbers on float images ("F": float32 samples, float64 weights and sums)
when it runs in float64, shrinking and enlarging (docs/semantics.md: in float32 tiinterp
follows PyTorch's float32 window arithmetic instead)."""

import numpy as np
import pytest
from PIL import Image

import tiinterp
from tiinterp._rules.filters import REGISTRY

# isort: split
from tests.tolerances import relative_error, tolerance

PIL_CASES = [
    pytest.param(name, reference.name, id=f"{name}-{reference.name}")
    for name, mode in REGISTRY.items()
    if mode.alias_of is None
    for reference in mode.references
    if reference.library == "pil"
]
# (in, out) per axis: both shrinking (the filter stretched), both enlarging, one of each,
# an axis kept, sizes 1.
SIZES = [
    ((37, 53), (20, 71)),
    ((64, 64), (17, 23)),
    ((10, 13), (40, 9)),
    ((100, 120), (33, 120)),
    ((1, 9), (5, 1)),
]


def test_pil_references_are_listed():
    assert len(PIL_CASES) >= 4


@pytest.mark.requires_float64
@pytest.mark.parametrize("in_hw, out_hw", SIZES)
@pytest.mark.parametrize("mode, pil_filter", PIL_CASES)
def test_float64_gives_pillows_numbers(arch, rng, mode, pil_filter, in_hw, out_hw):
    x = rng.standard_normal(in_hw).astype(np.float32)
    resample = getattr(Image.Resampling, pil_filter)
    expected = np.asarray(Image.fromarray(x).resize(out_hw[::-1], resample=resample))
    before = x.copy()
    y = tiinterp.interpolate(
        x.astype(np.float64), size=out_hw, mode=mode, antialias=True, layout="...HW"
    )
    # PIL rounds its float64 sums to float32 once; so does this.
    assert relative_error(y.astype(np.float32), expected) <= tolerance("pil", "float64")
    np.testing.assert_array_equal(x, before)


def _photo_like(rng, hw, channels):
    """8-bit levels with what makes filters overshoot and round: flat areas at 0 and 255,
    hard edges and noise."""
    rows, cols = np.indices(hw)
    smooth = 127.5 + 127.5 * np.sin(rows / 3.0) * np.cos(cols / 5.0)
    steps = np.where((rows // 4 + cols // 3) % 2 == 0, 0.0, 255.0)
    noise = rng.integers(0, 256, hw)
    planes = [steps, smooth, noise][:channels]
    return np.clip(np.stack(planes, axis=-1), 0, 255).astype(np.uint8)


# Pillow takes the columns first where the height shrinks by more than twice as many samples
# as the width (37 -> 20 by 53 -> 71, 100 -> 33 by 120 -> 120, 300 -> 123 by 400 -> 517),
# else the rows.
@pytest.mark.parametrize("in_hw, out_hw", [*SIZES, ((300, 400), (123, 517))])
@pytest.mark.parametrize("layout", ["L", "RGB"])
@pytest.mark.parametrize("mode, pil_filter", PIL_CASES)
def test_8bit_images_within_one_level_of_pillow(arch, rng, mode, pil_filter, layout, in_hw, out_hw):
    """What the ``tiinterp`` command writes for an 8-bit image against ``Image.resize`` on
    the 8-bit image: Pillow's two passes with 8-bit levels in between (Note [8-bit images as
    Pillow resizes them] in tiinterp/cli/raster.py), whose fixed-point weights (22 fraction
    bits) round some levels the other way: never more than 1 level apart (with the passes
    in the other order, up to 30 levels apart next to edges that overshoot)."""
    from tiinterp.cli.raster import Raster, resample

    pixels = _photo_like(rng, in_hw, len(layout))
    image = Image.fromarray(pixels[..., 0] if layout == "L" else pixels, mode=layout)
    expected = np.asarray(
        image.resize(out_hw[::-1], resample=getattr(Image.Resampling, pil_filter))
    ).reshape(*out_hw, len(layout))
    before = pixels.copy()
    result = resample(Raster(pixels, layout), out_hw[1], out_hw[0], mode, antialias=True)
    assert result.pixels.dtype == np.uint8 and result.pixels.shape == expected.shape
    assert np.abs(result.pixels.astype(int) - expected).max() <= 1
    np.testing.assert_array_equal(pixels, before)
