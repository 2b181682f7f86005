"""The torch bridge: ``tiinterp.torch.interpolate`` (a custom op) with an output of just
under 2^31 elements, and its backward through ``torch.autograd.grad`` (the backward op),
rows against the float64 reference. On taichi-forge, where that output passes 2^31 bytes,
the call must be refused instead, at once."""

import math
import time

import pytest
import torch

import tiinterp.torch as titorch
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
MODE = "bilinear"


def test_custom_op_and_its_backward_near_2_31_elements(quick, rng, taichi_on, record_property):
    taichi_on("cpu")
    divisor = QUICK_DIVISOR if quick else 1
    side_in, side_out = 8192 // divisor, 32767 // divisor
    in_shape, size = (2, 1, side_in, side_in), (side_out, side_out)
    elements = math.prod(in_shape[:2] + size)
    record_property("shapes", f"{in_shape} -> {size}")
    record_property("output_fraction_of_2^31", elements / LIMIT)
    if past_array_bytes(in_shape[:2] + size):
        # The op's first call imports torch._dynamo (measured: 1.1 s), torch's own one-time
        # cost, not the refusal's: a small call first.
        titorch.interpolate(torch.zeros((1, 1, 2, 2)), size=(3, 3), mode=MODE)
        zeros = torch.zeros(in_shape)
        seconds, _ = refused_at_once(lambda: titorch.interpolate(zeros, size=size, mode=MODE))
        record_property("refused_on_taichi_forge_in_seconds", seconds)
        return
    require_memory(4 * (2 * math.prod(in_shape) + elements))
    x = y = g = gx = None
    try:
        with skip_on_memory_error():
            x = torch.empty(in_shape, dtype=torch.float32)
            fill_uniform(rng, x.numpy())
            x.requires_grad_(True)
            reset_peak_rss()
            start = time.perf_counter()
            y = titorch.interpolate(x, size=size, mode=MODE)
            record_property("forward_seconds", time.perf_counter() - start)
            g = y.detach()  # the gradient of 0.5 * sum(y ** 2): y itself, no second 8 GiB
            start = time.perf_counter()
            (gx,) = torch.autograd.grad(y, x, grad_outputs=g)
            record_property("backward_seconds", time.perf_counter() - start)
            record_property("peak_rss_gib", peak_rss_gib())
            hw = in_shape[2:]
            forward = reference.row_errors(MODE, hw, size, x.detach().numpy(), g.numpy())
            adjoint = reference.row_errors(MODE, hw, size, g.numpy(), gx.numpy(), adjoint=True)
            range_problem = scan_range(g.numpy())
    finally:
        del x, y, g, gx
        release()
    record_property("forward_row_errors", forward)
    record_property("backward_row_errors", adjoint)
    assert max(forward.values()) <= ROW_RTOL, forward
    assert max(adjoint.values()) <= ROW_RTOL, adjoint
    assert range_problem is None, range_problem
