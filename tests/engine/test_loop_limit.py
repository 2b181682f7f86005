"""Loops of more than 65,535 iterations in every kernel family whose loop counts come from
the data: Mesa's software Vulkan (lavapipe, CI's Vulkan) stops a shader's loops there
without an error (Note [The loop limit of software Vulkan] in
``tiinterp/_runtime/vulkan_devices.py``), so the engine splits them into windows of
launches. On every arch: wide tap tables forward and adjoint (resample_axis), the fused
gather's planes, scale_and_translate, and grid_sample's forward, input gradient (its
gather) and grid gradient, each at and past the limit."""

import itertools
import math

import numpy as np
import pytest
import torch

import tiinterp
from tiinterp._runtime.vulkan_devices import GRID_STRIDE_INVOCATIONS, loop_windows

LIMIT = 65535
PAST = (LIMIT, LIMIT + 1, 100_000)


@pytest.mark.parametrize(
    "budget, top_level, length, cost",
    [
        (32768, 1, 100_000, 1),
        (32768, 3 * GRID_STRIDE_INVOCATIONS + 1, 70_000, 4),
        (32768, 2**31 - 1, 5, 2),
        (100, 1, 7, 200),
        (32768, 10, 0, 1),
    ],
)
def test_windows_cover_the_range_within_the_budget(budget, top_level, length, cost):
    windows = loop_windows(budget, top_level, length, cost)
    assert windows[0][0] == 0 and windows[-1][1] == max(length, 0)
    for (_, last), (first, _) in itertools.pairwise(windows):
        assert first == last
    per_invocation = math.ceil(top_level / GRID_STRIDE_INVOCATIONS)
    width = max(last - first for first, last in windows)
    # One iteration per window is always allowed: a single term that alone passes the
    # budget is the callers' to refuse or split further.
    assert width == 1 or per_invocation * (1 + width * cost) <= budget
    assert loop_windows(None, top_level, length, cost) == [(0, length)]


@pytest.mark.requires_float64
@pytest.mark.parametrize("taps", PAST)
def test_wide_tables_forward_and_adjoint(arch, taps):
    """One output reading ``taps`` inputs (area, forward), one input read by ``taps``
    outputs (nearest's adjoint), and JAX's scale_and_translate over the same window: before
    the windows, lavapipe gave 0.656, 65,535 and 0.691."""
    ones = np.ones((1, 1, 1, taps))
    bound = taps * np.finfo(np.float64).eps  # the sums of taps weights of 1 / taps
    area = tiinterp.interpolate(ones, size=(1, 1), mode="area")
    assert abs(float(area[0, 0, 0, 0]) - 1.0) <= bound
    adjoint = tiinterp.interpolate_backward(ones, (1, 1, 1, 1), mode="nearest")
    assert float(adjoint[0, 0, 0, 0]) == taps
    scaled = tiinterp.scale_and_translate(np.ones((1, taps)), (1, 1), (1,), [1 / taps], [0.0])
    assert abs(float(scaled[0, 0]) - 1.0) <= bound


@pytest.mark.parametrize("planes", [LIMIT + 1])
def test_fused_gather_over_many_planes(arch, rng, planes):
    """A 2-D resize of more planes than the limit (its threads loop over several)."""
    x = rng.standard_normal((planes, 1, 3, 4)).astype(np.float32)
    y = tiinterp.interpolate(x, size=(5, 6), mode="bilinear")
    expected = torch.nn.functional.interpolate(torch.tensor(x), size=(5, 6), mode="bilinear")
    assert np.abs(y - expected.numpy()).max() <= 1e-6


@pytest.mark.parametrize("channels", [LIMIT + 1, 70_000])
def test_grid_sample_over_many_channels(arch, rng, channels):
    """Forward and both gradients looping over more channels than the limit per point:
    before, lavapipe left 8,930 of 70,000 channels' outputs 0."""
    x = rng.standard_normal((1, channels, 2, 3)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (1, 2, 2, 2)).astype(np.float32)
    g = rng.standard_normal((1, channels, 2, 2)).astype(np.float32)
    source = torch.tensor(x, requires_grad=True)
    points = torch.tensor(grid, requires_grad=True)
    expected = torch.nn.functional.grid_sample(source, points, align_corners=False)
    expected.backward(torch.tensor(g))
    y = tiinterp.grid_sample(x, grid)
    gx, gg = tiinterp.grid_sample_backward(g, x, grid)
    assert np.abs(y - expected.detach().numpy()).max() <= 1e-6
    assert np.abs(gx - source.grad.numpy()).max() <= 1e-6
    scale = np.abs(points.grad.numpy()).max()
    assert np.abs(gg - points.grad.numpy()).max() <= 1e-5 * scale


@pytest.mark.requires_float64
@pytest.mark.parametrize("points", [LIMIT + 1, 100_000])
def test_grid_sample_input_gradient_of_many_points_on_one_sample(arch, rng, points):
    """Every point reads the same input sample, so one thread adds all their terms: the
    sum of the gradients, in point order."""
    x = rng.standard_normal((1, 3, 1, 1))
    grid = np.zeros((1, 1, points, 2))
    g = rng.standard_normal((1, 3, 1, points))
    gx, _ = tiinterp.grid_sample_backward(g, x, grid, padding_mode="border", align_corners=True)
    for c in range(3):
        assert abs(gx[0, c, 0, 0] - math.fsum(g[0, c, 0])) <= 1e-11 * points


def test_grid_sample_input_gradient_of_an_image_on_a_dense_grid(arch, rng):
    """The issue's case: an RGB 16 x 16 image sampled on a regular 64 x 64 grid (~99 % of
    its input gradient was wrong on lavapipe: the tile's loop stopped)."""
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    line = np.linspace(-1, 1, 64, dtype=np.float32)
    grid = np.stack(np.meshgrid(line, line, indexing="xy"), -1)[None]
    g = rng.standard_normal((1, 3, 64, 64)).astype(np.float32)
    source = torch.tensor(x, requires_grad=True)
    torch.nn.functional.grid_sample(source, torch.tensor(grid), align_corners=True).backward(
        torch.tensor(g)
    )
    gx, _ = tiinterp.grid_sample_backward(g, x, grid, align_corners=True)
    assert np.abs(gx - source.grad.numpy()).max() <= 1e-5 * np.abs(gx).max()


def test_a_fused_resize_past_the_limit_at_one_plane_a_thread_is_refused(monkeypatch):
    """Where even one plane per thread passes the budget (on lavapipe, some 50 million
    outputs of 64 taps: too large for CI), the call is refused with an error naming the
    limit, not run short: here on a small resize, with Taichi's grid-stride invocations
    made few."""
    from tiinterp._engine import device_path
    from tiinterp._rules.plan import ResizeSpec, forward_passes

    spec = ResizeSpec((4, 3, 40, 40), (80, 80), "bicubic", False, (None, None), "float32", False)
    (group,) = device_path.group_passes(forward_passes(spec))
    monkeypatch.setattr(device_path, "running_arch", lambda: "vulkan")
    monkeypatch.setattr(device_path, "loop_budget", lambda arch: 32768)
    arguments = device_path._gather_arguments((), group, spec.out_shape)
    assert arguments[-2] >= 1  # planes per thread: within the budget as it is
    monkeypatch.setattr(device_path, "GRID_STRIDE_INVOCATIONS", 1)
    with pytest.raises(ValueError, match=r"65,535 iterations.*use arch='cpu'"):
        device_path._gather_arguments((), group, spec.out_shape)
