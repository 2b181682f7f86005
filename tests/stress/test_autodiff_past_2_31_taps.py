"""``method="autodiff"`` where outputs x taps pass 2^31 (lanczos5, 14000 x 16000 -> 8000
wide), against the hand-written adjoint: Taichi's 32-bit loop counter made it all zeros
before tiinterp split its launches."""

import math
import time

import numpy as np
import pytest

import tiinterp
from tests.stress.helpers import (
    LIMIT,
    peak_rss_gib,
    release,
    reset_peak_rss,
    skip_on_memory_error,
)
from tests.stress.reference import row_error

pytestmark = pytest.mark.stress

# Every row of the autodiff result against the adjoint, relative to the largest |adjoint|.
AUTODIFF_RTOL = 1e-5
TAPS = 10  # lanczos5


def test_autodiff_past_2_31_outputs_x_taps_equals_the_adjoint(
    quick, rng, taichi_on, record_property
):
    in_shape, g_shape = (1, 1, 14000, 8000), (1, 1, 14000, 16000)
    if quick:
        in_shape, g_shape = (1, 1, 1400, 800), (1, 1, 1400, 1600)
    record_property("shapes", f"{in_shape} <- {g_shape}")
    record_property("outputs_x_taps", math.prod(g_shape) * TAPS)
    taichi_on("cpu")
    g = autodiff = adjoint = None
    try:
        with skip_on_memory_error():
            g = rng.standard_normal(g_shape, dtype=np.float32)
            reset_peak_rss()
            start = time.perf_counter()
            autodiff = tiinterp.interpolate_backward(
                g, in_shape, mode="lanczos5", method="autodiff"
            )
            record_property("autodiff_seconds", time.perf_counter() - start)
            record_property("peak_rss_gib", peak_rss_gib())
            start = time.perf_counter()
            adjoint = tiinterp.interpolate_backward(g, in_shape, mode="lanczos5")
            record_property("adjoint_seconds", time.perf_counter() - start)
        g = None
        scale = float(np.max(np.abs(adjoint)))
        height = in_shape[2]
        crossing = min(height - 1, (LIMIT - 1) // TAPS // g_shape[3])
        rows = sorted({0, crossing, height // 2, height - 1})
        record_property(
            "row_errors",
            {r: row_error(autodiff[0, 0, r], adjoint[0, 0, r].astype(np.float64)) for r in rows},
        )
        row_worst = np.max(np.abs(autodiff - adjoint), axis=-1).reshape(-1)
        error = float(np.max(row_worst)) / scale
        nonzero = float(np.count_nonzero(autodiff)) / autodiff.size
        zero_rows = np.flatnonzero(~autodiff.reshape(height, -1).any(axis=1))
    finally:
        del g, autodiff, adjoint  # a failure's traceback keeps this frame, not its arrays
        release()
    record_property("max_error_all_rows", error)
    record_property("nonzero_fraction", nonzero)
    assert nonzero > 0, "the autodiff result is all zero"
    assert zero_rows.size == 0, f"{zero_rows.size} all-zero rows, the first {int(zero_rows[0])}"
    assert error <= AUTODIFF_RTOL, (
        f"autodiff vs adjoint: {error:.3g} relative to max |adjoint| (worst row "
        f"{int(np.argmax(row_worst))})"
    )
