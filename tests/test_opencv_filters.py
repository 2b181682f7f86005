"""Against OpenCV: every mode whose registry entry names an OpenCV interpolation gives
``cv2.resize``'s numbers (tests/data/golden_opencv.npz, written by
tests/data/make_golden.py; OpenCV has no gradients, so forward results only: the adjoint,
autodiff and finite differences are checked for every mode in tests/test_resize_modes.py)."""

import numpy as np
import pytest

import tiinterp

# isort: split
from tests.cases_nd import nd_inputs, opencv_cases
from tests.tolerances import relative_error, tolerance

CASES = [
    pytest.param(
        key,
        spatial,
        size,
        mode,
        dtype,
        id=key,
        marks=[pytest.mark.requires_float64] if dtype == "float64" else [],
    )
    for key, spatial, size, mode, _, dtype in opencv_cases()
]


def test_every_opencv_case_is_stored(golden):
    stored = golden("opencv")
    assert CASES and all(case.values[0] in stored for case in CASES)


@pytest.mark.parametrize("key, spatial, size, mode, dtype", CASES)
def test_gives_opencvs_numbers(arch, golden, key, spatial, size, mode, dtype):
    x, _ = nd_inputs(key, spatial, {"size": size}, dtype)
    before = x.copy()
    y = tiinterp.interpolate(x, size=size, mode=mode)
    assert relative_error(y, golden("opencv")[key]) <= tolerance("opencv", dtype)
    np.testing.assert_array_equal(x, before)
