"""Against OpenCV, ImageMagick and SciPy: every mode whose registry entry names one of them gives
its numbers (tests/data/golden_<library>.npz, written by tests/data/make_golden.py; they
have no gradients, so forward results only: the adjoint, autodiff and finite differences
are checked for every mode in tests/ops/test_resize_modes.py)."""

import numpy as np
import pytest

import tiinterp

# isort: split
from tests.cases_nd import FORWARD_ONLY, forward_reference_cases, nd_inputs
from tests.tolerances import relative_error, tolerance

CASES = [
    pytest.param(
        library,
        key,
        spatial,
        size,
        mode,
        align_corners,
        antialias,
        dtype,
        id=f"{library}-{key}",
        marks=[pytest.mark.requires_float64] if dtype == "float64" else [],
    )
    for library, key, spatial, size, mode, _, align_corners, antialias, dtype in (
        forward_reference_cases()
    )
]


def test_every_case_is_stored(golden):
    assert {case.values[0] for case in CASES} == set(FORWARD_ONLY)
    assert all(case.values[1] in golden(case.values[0]) for case in CASES)


@pytest.mark.parametrize(
    "library, key, spatial, size, mode, align_corners, antialias, dtype", CASES
)
def test_gives_the_librarys_numbers(
    arch, golden, library, key, spatial, size, mode, align_corners, antialias, dtype
):
    x, _ = nd_inputs(key, spatial, {"size": size}, dtype)
    before = x.copy()
    y = tiinterp.interpolate(
        x, size=size, mode=mode, align_corners=align_corners, antialias=antialias
    )
    assert relative_error(y, golden(library)[key]) <= tolerance(library, dtype)
    np.testing.assert_array_equal(x, before)
