"""What a GPU is checked for, as tests on every arch of the suite: the correctness checks
that benchmarks/gpu_check.py made on CUDA, which benchmarks/gpu_check.sh now runs as this file
with ``TIINTERP_TEST_ARCHS=cuda`` (the CPU and Vulkan stand in here, as they did for it).

- Taichi ndarrays, the data that stays on the device, for every resize mode (antialiased
  where the mode allows it, ``align_corners=True`` for bilinear and bicubic, 1-D linear, 3-D
  trilinear and nearest), float32 and float64: forward, adjoint and (where the arch has it)
  autodiff against the float64 oracle. The NumPy path of every mode is tested against the
  oracle in tests/ops/test_resize_modes.py; ndarrays against NumPy in
  tests/runtime/test_array_kinds.py (2-D, float32) and, for grid_sample, every case in
  tests/ops/test_grid_sample_kinds.py.
- ``tiinterp.torch`` on tensors of the arch's own torch device (CUDA tensors on cuda, CPU
  tensors elsewhere), forward and autograd backward, against PyTorch on that device: a
  resize of each kind (also against tiinterp on Taichi ndarrays), and grid_sample in every
  mode with every padding. tests/public/test_torch_bridge.py tests the bridge against
  PyTorch on CPU tensors only, so off CUDA these repeat some of its checks.
- The adjoint backward at a GPU's scale (W1 on cuda, a small stand-in elsewhere) is
  bit-identical over five runs: resize, grid_sample and through ``tiinterp.torch``
  (tests/engine/test_device_path.py and tests/ops/test_grid_sample.py check small shapes).

Calls from threads that did not start Taichi, the rest of what the GPU check covered, are
tests/runtime/test_threads.py's (gpu_check.sh runs its arch tests too).

On cuda every case runs; the stand-in archs run a handful of each kind (STAND_IN_RESIZES,
STAND_IN_BRIDGE_CASES), as ``gpu_check.py --quick`` did, and deselect the rest (marker
``gpu_coverage``): the suite's other tests cover those there.
"""

import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tiinterp
import tiinterp.torch as titorch
from tests import oracle
from tests.tolerances import relative_error, tolerance
from tiinterp._rules.filters import ALIASES, ANTIALIAS_MODES, MODE_DIMS
from tiinterp._runtime.taichi import ti

RUNS = 5  # repetitions of the determinism checks


# The cases every arch runs; the others run on cuda only (``gpu_coverage``): off it, the
# suite's other tests cover them (the bridge's, tests/public/test_torch_bridge.py), and a
# stand-in arch took a minute over all of them.
STAND_IN_RESIZES = {
    "nearest-up-float32",
    "bilinear-down-aa-float32",
    "bicubic-up-ac-float32",
    "lanczos3-down-aa-float32",
    "area-down-float32",
    "linear-1d-up-float32",
    "trilinear-3d-float32",
    "bilinear-up-float64",
}
STAND_IN_BRIDGE_CASES = {"bilinear-down-aa-float32", "bicubic-2d-reflection-ac0-float32"}


def _param(values, case_id, dtype, stand_ins):
    name = f"{case_id}-{dtype}"
    marks = [pytest.mark.requires_float64] if dtype == "float64" else []
    if name not in stand_ins:
        marks.append(pytest.mark.gpu_coverage)
    return pytest.param(*values, dtype, id=name, marks=marks)


def _resize_specs():
    """(id, input shape, size, mode, antialias, align_corners): every mode that takes 2
    spatial axes upsampled and downsampled, antialiased where it can be (an alias such as
    PyTorch's "lanczos" antialiased only), bilinear and bicubic with corners aligned; then
    1-D linear and 3-D trilinear and nearest."""
    shape, up, down = (2, 3, 23, 37), (41, 58), (9, 14)
    specs = []
    for mode in tiinterp.MODES:
        canonical = ALIASES.get(mode, mode)
        if 2 not in MODE_DIMS[canonical]:
            continue
        antialiased_only = mode in ALIASES
        if not antialiased_only:
            specs.append((f"{mode}-up", shape, up, mode, False, None))
            specs.append((f"{mode}-down", shape, down, mode, False, None))
        if canonical in ANTIALIAS_MODES:
            specs.append((f"{mode}-down-aa", shape, down, mode, True, None))
            if antialiased_only:
                specs.append((f"{mode}-up-aa", shape, up, mode, True, None))
        if mode in ("bilinear", "bicubic"):
            specs.append((f"{mode}-up-ac", shape, up, mode, False, True))
    shape_1d, shape_3d, size_3d = (2, 3, 29), (2, 2, 7, 9, 11), (11, 6, 15)
    return [
        *specs,
        ("linear-1d-up", shape_1d, (47,), "linear", False, None),
        ("linear-1d-down-aa", shape_1d, (11,), "linear", True, None),
        ("trilinear-3d", shape_3d, size_3d, "trilinear", False, None),
        ("trilinear-3d-ac", shape_3d, size_3d, "trilinear", False, True),
        ("nearest-3d", shape_3d, size_3d, "nearest", False, None),
    ]


RESIZE_ARGS = "shape, size, mode, antialias, align_corners, dtype"
RESIZE_CASES = [
    _param(spec[1:], spec[0], dtype, STAND_IN_RESIZES)
    for dtype in ("float32", "float64")
    for spec in _resize_specs()
]
# Through tiinterp.torch: one case per kind of call (PyTorch has each).
BRIDGE_RESIZE_CASES = [
    _param(spec[1:], spec[0], dtype, STAND_IN_BRIDGE_CASES)
    for spec, dtype in (
        (("nearest-up", (2, 3, 23, 37), (41, 58), "nearest", False, None), "float32"),
        (("bilinear-down-aa", (2, 3, 23, 37), (9, 14), "bilinear", True, None), "float32"),
        (("bicubic-up-ac", (2, 3, 23, 37), (41, 58), "bicubic", False, True), "float32"),
        (("trilinear-3d", (2, 2, 7, 9, 11), (11, 6, 15), "trilinear", False, None), "float32"),
        (("bilinear-up", (2, 3, 23, 37), (41, 58), "bilinear", False, None), "float64"),
    )
]
GRID_ARGS = "shape, points, mode, padding_mode, align_corners, dtype"


def _grid_specs():
    """Parameters (input shape, points, mode, padding, align_corners, dtype): every mode
    with every padding in float32, align_corners alternating so that each mode has both; fewer
    in 3-D and float64 (each combination compiles kernels of its own)."""
    shape_2d, points_2d = (2, 3, 13, 17), (7, 11)
    shape_3d, points_3d = (2, 2, 6, 7, 8), (4, 5, 6)
    specs = [
        (shape_2d, points_2d, mode, padding, (m + p) % 2 == 1, "float32")
        for m, mode in enumerate(("bilinear", "nearest", "bicubic"))
        for p, padding in enumerate(("zeros", "border", "reflection"))
    ]
    specs += [
        (shape_3d, points_3d, "bilinear", "zeros", False, "float32"),
        (shape_3d, points_3d, "bilinear", "reflection", True, "float32"),
        (shape_3d, points_3d, "nearest", "border", False, "float32"),
        (shape_2d, points_2d, "bilinear", "reflection", True, "float64"),
        (shape_2d, points_2d, "nearest", "zeros", False, "float64"),
        (shape_2d, points_2d, "bicubic", "border", True, "float64"),
        (shape_3d, points_3d, "bilinear", "border", False, "float64"),
    ]
    return [
        _param(
            spec[:5],
            f"{spec[2]}-{len(spec[0]) - 2}d-{spec[3]}-ac{int(spec[4])}",
            spec[5],
            STAND_IN_BRIDGE_CASES,
        )
        for spec in specs
    ]


BRIDGE_GRID_CASES = _grid_specs()


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _resize_inputs(shape, size, dtype, *key):
    """The input and an output gradient, N(0, 1)."""
    rng = _rng(shape, size, dtype, *key)
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal((*shape[:2], *size)).astype(dtype)
    return x, g


def _grid_inputs(shape, points, dtype, *key):
    """Input, points (a little past [-1, 1] on every side, so that padding is exercised)
    and output gradient."""
    rng = _rng(shape, points, dtype, *key)
    x = rng.standard_normal(shape).astype(dtype)
    grid = rng.uniform(-1.15, 1.15, (shape[0], *points, len(shape) - 2)).astype(dtype)
    g = rng.standard_normal((*shape[:2], *points)).astype(dtype)
    return x, grid, g


def _ndarray(array):
    """A Taichi ndarray holding ``array``, on Taichi's device."""
    result = ti.ndarray(ti.f32 if array.dtype == np.float32 else ti.f64, array.shape)
    result.from_numpy(np.ascontiguousarray(array))
    return result


def _torch_device(arch):
    """Where tiinterp.torch takes tensors on ``arch``: CUDA's own memory on cuda, the CPU's
    elsewhere (Taichi copies them to a Vulkan device and back)."""
    return torch.device("cuda" if arch == "cuda" else "cpu")


def _expected(x, g, size, mode, antialias, align_corners):
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    aligned = bool(align_corners)
    return (
        oracle.resize(x64, size, mode, aligned, None, antialias),
        oracle.resize_adjoint(g64, x.shape[2:], mode, aligned, None, antialias),
    )


# --- Taichi ndarrays against the oracle -------------------------------------------------------


@pytest.mark.parametrize(RESIZE_ARGS, RESIZE_CASES)
def test_ndarrays_give_the_oracle_numbers(arch, shape, size, mode, antialias, align_corners, dtype):
    x, g = _resize_inputs(shape, size, dtype, mode, antialias, align_corners)
    options = dict(mode=mode, antialias=antialias, align_corners=align_corners)
    y = tiinterp.interpolate(_ndarray(x), size=size, **options)
    gx = tiinterp.interpolate_backward(_ndarray(g), shape, **options)
    assert type(y).__name__ == type(gx).__name__ == "ScalarNdarray"
    expected_y, expected_gx = _expected(x, g, size, mode, antialias, align_corners)
    assert relative_error(y.to_numpy(), expected_y) <= tolerance("oracle", dtype)
    assert relative_error(gx.to_numpy(), expected_gx) <= tolerance("oracle", dtype)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize(RESIZE_ARGS, RESIZE_CASES)
def test_ndarray_autodiff_gives_the_oracle_numbers(
    arch, shape, size, mode, antialias, align_corners, dtype
):
    x, g = _resize_inputs(shape, size, dtype, mode, antialias, align_corners)
    options = dict(mode=mode, antialias=antialias, align_corners=align_corners)
    gx = tiinterp.interpolate_backward(_ndarray(g), shape, method="autodiff", **options)
    _, expected = _expected(x, g, size, mode, antialias, align_corners)
    assert relative_error(gx.to_numpy(), expected) <= tolerance("oracle", dtype)


# --- tiinterp.torch on the arch's device ------------------------------------------------------


@pytest.mark.parametrize(RESIZE_ARGS, BRIDGE_RESIZE_CASES)
def test_torch_bridge_resize_on_the_device(
    arch, shape, size, mode, antialias, align_corners, dtype
):
    """Forward and autograd backward against F.interpolate on the same device and against
    tiinterp on Taichi ndarrays."""
    device = _torch_device(arch)
    x, g = _resize_inputs(shape, size, dtype, mode, antialias, align_corners)
    options = dict(mode=mode, antialias=antialias, align_corners=align_corners)
    xt = torch.from_numpy(x).to(device).requires_grad_(True)
    gt = torch.from_numpy(g).to(device)
    ours = titorch.interpolate(xt, size=size, **options)
    assert ours.device == xt.device
    (grad,) = torch.autograd.grad(ours, xt, gt)
    theirs = F.interpolate(xt, size=size, **options)
    (their_grad,) = torch.autograd.grad(theirs, xt, gt)
    ndarray_y = tiinterp.interpolate(_ndarray(x), size=size, **options).to_numpy()
    ndarray_gx = tiinterp.interpolate_backward(_ndarray(g), shape, **options).to_numpy()
    bound = tolerance("torch_bridge", dtype)
    for actual, expected in (
        (ours, theirs),
        (grad, their_grad),
        (ours, ndarray_y),
        (grad, ndarray_gx),
    ):
        expected = expected.detach().cpu().numpy() if torch.is_tensor(expected) else expected
        assert relative_error(actual.detach().cpu().numpy(), expected) <= bound


@pytest.mark.parametrize(GRID_ARGS, BRIDGE_GRID_CASES)
def test_torch_bridge_grid_sample_on_the_device(
    arch, shape, points, mode, padding_mode, align_corners, dtype
):
    """Forward and both autograd gradients against F.grid_sample on the same device (Taichi
    ndarrays give the NumPy path's numbers, tests/ops/test_grid_sample_kinds.py)."""
    device = _torch_device(arch)
    x, grid, g = _grid_inputs(shape, points, dtype, mode, padding_mode, align_corners)
    options = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    xt = torch.from_numpy(x).to(device).requires_grad_(True)
    gridt = torch.from_numpy(grid).to(device).requires_grad_(True)
    gt = torch.from_numpy(g).to(device)
    ours = titorch.grid_sample(xt, gridt, **options)
    assert ours.device == xt.device
    grads = torch.autograd.grad(ours, (xt, gridt), gt)
    theirs = F.grid_sample(xt, gridt, **options)
    their_grads = torch.autograd.grad(theirs, (xt, gridt), gt)
    bound = tolerance("torch_bridge_grid", dtype)
    for actual, expected in ((ours, theirs), *zip(grads, their_grads, strict=True)):
        scale = max(1.0, expected.detach().abs().max().item())
        assert (actual - expected).detach().abs().max().item() <= bound * scale


# --- Determinism at a GPU's scale -------------------------------------------------------------


def _scale_shape(arch):
    """W1 (8, 16, 256, 256) -> (512, 512) on cuda; a small stand-in elsewhere."""
    return ((8, 16, 256, 256), (512, 512)) if arch == "cuda" else ((2, 4, 64, 64), (128, 128))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_resize_adjoint_is_bit_identical_at_scale(arch, mode):
    shape, size = _scale_shape(arch)
    _, g = _resize_inputs(shape, size, "float32", "determinism")
    g_nd = _ndarray(g)
    first = tiinterp.interpolate_backward(g_nd, shape, mode=mode).to_numpy()
    for _ in range(RUNS - 1):
        again = tiinterp.interpolate_backward(g_nd, shape, mode=mode).to_numpy()
        assert again.tobytes() == first.tobytes()


def test_grid_sample_adjoint_is_bit_identical_at_scale(arch):
    """8 channels, twice as many points as pixels on each axis: many points per pixel."""
    (n, _, h, w), _ = _scale_shape(arch)
    shape, points = (n, 8, h // 2, w // 2), (h, w)
    x, grid, g = _grid_inputs(shape, points, "float32", "determinism")
    arrays = [_ndarray(a) for a in (g, x, grid)]

    def run():
        grad_input, grad_grid = tiinterp.grid_sample_backward(*arrays)
        return grad_input.to_numpy().tobytes() + grad_grid.to_numpy().tobytes()

    first = run()
    for _ in range(RUNS - 1):
        assert run() == first


def test_torch_bridge_backward_is_bit_identical_at_scale(arch):
    shape, size = _scale_shape(arch)
    x, g = _resize_inputs(shape, size, "float32", "determinism")
    device = _torch_device(arch)
    xt = torch.from_numpy(x).to(device).requires_grad_(True)
    y = titorch.interpolate(xt, size=size, mode="bilinear")
    gt = torch.from_numpy(g).to(device)
    runs = [torch.autograd.grad(y, xt, gt, retain_graph=True)[0] for _ in range(RUNS)]
    for run in runs[1:]:
        assert torch.equal(run, runs[0])
