"""Results of just under 2^31 elements on the CPU, float32: forwards through each CPU kernel
path (fused 2-D resample, 2-D gather, last axis only, middle axis only) and one adjoint whose
result is that large. Rows at the start, middle and end are compared with the float64
reference (tests/stress/reference.py) and the whole result is scanned for unwritten (zero),
non-finite or out-of-range values. Shapes of exactly 2^31 elements, and an absurd lanczos5
size on an empty batch, must be refused with a ValueError in under a second.

On taichi-forge, whose kernels take no array of 2^31 bytes or more, the cases past that
size must be refused instead, at once."""

import math
import time
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tiinterp
from tests import oracle
from tests.stress import reference
from tests.stress.helpers import (
    LIMIT,
    ROW_RTOL,
    fill_uniform,
    past_array_bytes,
    peak_rss_gib,
    refused_at_once,
    release,
    require_memory,
    reset_peak_rss,
    scan_range,
    skip_on_memory_error,
)

pytestmark = pytest.mark.stress

QUICK_DIVISOR = 8


@dataclass(frozen=True)
class BigCase:
    """A forward ``in_shape -> size``, or (``adjoint``) the adjoint of that forward, whose
    result has ``in_shape``."""

    name: str
    mode: str
    in_shape: tuple
    size: tuple
    adjoint: bool = False

    @property
    def out_shape(self):
        return self.in_shape[:2] + self.size

    @property
    def source_shape(self):
        return self.out_shape if self.adjoint else self.in_shape

    @property
    def result_shape(self):
        return self.in_shape if self.adjoint else self.out_shape

    def scaled(self, divisor):
        def shrink(dims):
            return tuple(max(1, d // divisor) for d in dims)

        return BigCase(
            self.name,
            self.mode,
            self.in_shape[:2] + shrink(self.in_shape[2:]),
            shrink(self.size),
            self.adjoint,
        )

    def __call__(self, source):
        if self.adjoint:
            return tiinterp.interpolate_backward(source, self.in_shape, mode=self.mode)
        return tiinterp.interpolate(source, size=self.size, mode=self.mode)


BIG_CASES = (
    BigCase("bilinear-fused-2d", "bilinear", (1, 2, 12000, 16000), (32767, 32767)),
    BigCase("nearest-2d-gather", "nearest", (1, 1, 20000, 30000), (46340, 46340)),
    BigCase("bicubic-last-axis-only", "bicubic", (1, 1, 32767, 16384), (32767, 65536)),
    BigCase("lanczos3-middle-axis-only", "lanczos3", (1, 2, 8192, 32767), (32768, 32767)),
    BigCase("area-adjoint-fused-2d", "area", (1, 1, 46340, 46340), (20000, 20000), adjoint=True),
)


def test_reference_agrees_with_pytorch_and_the_oracle(rng, record_property):
    """The reference's tap tables at a small size, against PyTorch where it has the mode and
    the dense oracle (tests/oracle.py) for lanczos3: a failure here is the reference's, not
    tiinterp's."""
    x = rng.random((1, 2, 150, 170), dtype=np.float32) + np.float32(1)
    errors = {}
    for mode, size in (
        ("nearest", (301, 257)),
        ("bilinear", (301, 257)),
        ("bicubic", (131, 400)),
        ("lanczos3", (301, 97)),
        ("area", (61, 97)),
    ):
        if mode == "lanczos3":
            want = oracle.resize(x, size, mode)
        else:
            want = F.interpolate(torch.from_numpy(x), size=size, mode=mode).numpy()
        tables = reference.axes(x.shape[2:], size, mode)
        errors[mode] = max(
            reference.row_error(want[0, p, r], reference.forward_row(x[0], p, r, tables))
            for p in range(2)
            for r in range(size[0])
        )
    g = rng.random((1, 2, 61, 97), dtype=np.float32)
    xt = torch.from_numpy(x).requires_grad_(True)
    F.interpolate(xt, size=(61, 97), mode="area").backward(torch.from_numpy(g))
    tables = reference.axes(x.shape[2:], (61, 97), "area")
    errors["area adjoint"] = max(
        reference.row_error(
            xt.grad.numpy()[0, p, r], reference.adjoint_row(g[0], p, r, tables, 170)
        )
        for p in range(2)
        for r in range(150)
    )
    record_property("errors", errors)
    assert max(errors.values()) <= ROW_RTOL, errors


@pytest.mark.parametrize("case", BIG_CASES, ids=lambda case: case.name)
def test_result_of_just_under_2_31_elements(case, quick, rng, taichi_on, record_property):
    taichi_on("cpu")
    if quick:
        case = case.scaled(QUICK_DIVISOR)
    elements = math.prod(case.result_shape)
    record_property(
        "shapes", f"{case.in_shape} -> {case.size}" + (" adjoint" if case.adjoint else "")
    )
    record_property("result_elements", elements)
    record_property("result_fraction_of_2^31", elements / LIMIT)
    if past_array_bytes(case.source_shape, case.result_shape):
        # np.zeros: pages that the refusal never touches.
        source = np.zeros(case.source_shape, np.float32)
        seconds, message = refused_at_once(partial(case, source))
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        assert "taichi-forge" in message, message
        return
    require_memory(4 * (math.prod(case.source_shape) + elements))
    source = result = None
    try:
        with skip_on_memory_error():
            source = np.empty(case.source_shape, np.float32)
            fill_uniform(rng, source)
            reset_peak_rss()
            start = time.perf_counter()
            result = case(source)
            record_property("seconds", time.perf_counter() - start)
            record_property("peak_rss_gib", peak_rss_gib())
            errors = reference.row_errors(
                case.mode, case.in_shape[2:], case.size, source, result, case.adjoint
            )
            range_problem = scan_range(result)
    finally:
        del source, result  # a failure's traceback keeps this frame, not 8 GiB
        release()
    record_property("row_errors", errors)
    assert max(errors.values()) <= ROW_RTOL, errors
    assert range_problem is None, range_problem


REFUSALS = {
    "output-of-2_31-elements": lambda: tiinterp.interpolate(
        np.zeros((1, 1, 2, 2), np.float32), size=(32768, 65536), mode="bilinear"
    ),
    "adjoint-result-of-2_31-elements": lambda: tiinterp.interpolate_backward(
        np.zeros((1, 1, 2, 2), np.float32), (1, 1, 32768, 65536), mode="bilinear"
    ),
    # np.zeros: 8 GiB of zero pages that are never touched.
    "input-of-2_31-elements": lambda: tiinterp.interpolate(
        np.zeros((1, 1, 32768, 65536), np.float32), size=(2, 2), mode="bilinear"
    ),
    "empty-batch-lanczos5-to-3e7-squared": lambda: tiinterp.interpolate(
        np.zeros((0, 3, 8, 8), np.float32), size=(30_000_000, 30_000_000), mode="lanczos5"
    ),
}


@pytest.mark.parametrize("call", REFUSALS.values(), ids=REFUSALS.keys())
def test_size_of_2_31_elements_is_refused_at_once(call, record_property):
    seconds, message = refused_at_once(call)
    record_property("refused_in_seconds", seconds)
    record_property("message", message[:300])
