"""Mixed small calls for the long-run checks (memory flatness, threads): every resize mode
with and without antialias, forward and backward, and grid_sample and its backward, float32
and float64."""

from dataclasses import dataclass, field

import numpy as np

import tiinterp

RESIZE_MODES = (
    ("nearest", False),
    ("nearest-exact", False),
    ("area", False),
    ("bilinear", False),
    ("bilinear", True),
    ("bicubic", False),
    ("bicubic", True),
    ("lanczos3", False),
    ("lanczos3", True),
)
GRID_MODES = (
    ("nearest", "zeros"),
    ("bilinear", "border"),
    ("bicubic", "reflection"),
    ("bilinear", "zeros"),
    ("nearest", "reflection"),
    ("bicubic", "border"),
)


@dataclass
class Call:
    label: str
    function: object
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def __call__(self):
        return self.function(*self.args, **self.kwargs)


def resize_calls(rng, in_shape, size, modes, dtype=np.float32):
    x = rng.random(in_shape).astype(dtype)
    g = rng.standard_normal(in_shape[:2] + tuple(size)).astype(dtype)
    calls = []
    for mode, antialias in modes:
        tag = f"{mode}{' aa' if antialias else ''} {in_shape}->{tuple(size)} {np.dtype(dtype).name}"
        options = {"mode": mode, "antialias": antialias}
        calls.append(
            Call(f"interpolate {tag}", tiinterp.interpolate, (x,), dict(options, size=tuple(size)))
        )
        calls.append(
            Call(
                f"interpolate_backward {tag}", tiinterp.interpolate_backward, (g, in_shape), options
            )
        )
    return calls


def grid_calls(rng, in_shape, grid_hw, modes, dtype=np.float32):
    x = rng.random(in_shape).astype(dtype)
    grid = rng.uniform(-1.2, 1.2, (in_shape[0],) + tuple(grid_hw) + (2,)).astype(dtype)
    g = rng.standard_normal(in_shape[:2] + tuple(grid_hw)).astype(dtype)
    calls = []
    for mode, padding in modes:
        tag = f"{mode} {padding} {in_shape} grid {tuple(grid_hw)} {np.dtype(dtype).name}"
        options = {"mode": mode, "padding_mode": padding, "align_corners": padding == "border"}
        calls.append(Call(f"grid_sample {tag}", tiinterp.grid_sample, (x, grid), options))
        calls.append(
            Call(
                f"grid_sample_backward {tag}", tiinterp.grid_sample_backward, (g, x, grid), options
            )
        )
    return calls


def flatness_calls(rng):
    """The memory flatness check's 54 distinct calls."""
    return (
        resize_calls(rng, (2, 3, 17, 19), (23, 11), RESIZE_MODES)
        + resize_calls(rng, (1, 2, 9, 40), (30, 13), RESIZE_MODES, np.float64)
        + grid_calls(rng, (2, 3, 17, 19), (7, 5), GRID_MODES)
        + grid_calls(rng, (1, 2, 12, 9), (4, 11), GRID_MODES[:3], np.float64)
    )


def rotated(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def thread_calls(t, rng, grid_sample=True):
    """Thread ``t``'s own mix: its own shapes, mode order and (thread 7) float64; without
    grid_sample where the configuration refuses it (the CPU's SIMD one)."""
    dtype = np.float64 if t == 7 else np.float32
    in_shape = (1 + t % 2, 1 + t % 3, 11 + 3 * t, 29 - 2 * t)
    size = (7 + 5 * t, 13 + 4 * t)
    calls = resize_calls(rng, in_shape, size, rotated(RESIZE_MODES, t)[:5], dtype)
    if grid_sample:
        calls += grid_calls(rng, in_shape, (3 + t, 9 - t), rotated(GRID_MODES, t)[:2], dtype)
    if t % 2:
        calls += resize_calls(
            rng,
            (2, 2, 5 + t, 6, 7),
            (8, 4, 9 + t),
            (("trilinear", False), ("nearest", False)),
            dtype,
        )
    else:
        calls += resize_calls(
            rng, (2, 3, 31 + t), (17,), (("linear", True), ("area", False)), dtype
        )
    return calls
