"""Against Pillow: every mode whose registry entry names a PIL filter gives
``Image.resize``'s numbers on float images ("F": float32 samples, float64 weights and sums)
when it runs in float64, shrinking and enlarging (docs/semantics.md: in float32 tiinterp
follows PyTorch's float32 window arithmetic instead)."""

import numpy as np
import pytest
from PIL import Image

import tiinterp
from tiinterp._filters import REGISTRY

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
