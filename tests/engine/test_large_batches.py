"""Batches of at least 2^19 rows through every kernel path, spot-checked on the first, a
middle and the last image of the batch.

Why: the fused 2-D kernel split its rows between workers as ``worker * rows // workers`` in
32-bit arithmetic, which overflows once ``rows * 4096 >= 2^31``, i.e. from 2^19 rows of
N * C * H: the last images came out as garbage or the process segfaulted, while every small
test passed. Such bugs sit where indices or loop counts grow with the batch, so each kernel
path gets one forward and one adjoint call with >= 2^19 rows (rows: N * C times every
spatial axis but the last of the array the kernel writes), and the LAST image is always
among the images checked against the float64 oracle (computed on those images only).

Each case also records which kernels ran (by wrapping the kernel names that
``tiinterp._engine.cpu_path`` calls) and requires the one it is named after, so that a change in
dispatch cannot silently stop a case from covering its path. On the CPU the SIMD kernels
are ``simd_plane`` (both trailing axes, or the last one alone), ``simd_gather`` (both
trailing axes by one-tap tables) and ``simd_middle`` (any other axis), each in the three
store forms of Note [Store forms] in ``tiinterp/_kernels/simd.py`` (vectors: results tiinterp
allocates; half vectors: an ``out=`` 16 bytes off a 32-byte boundary; scalars: one 4 bytes
off, or rows that are not whole vectors); the generic ``resample_axis`` serves tables wider than
``MAX_UNROLLED_TAPS``, and ``method="autodiff"`` runs ``resample_axis_accumulate``; on every
other arch the device path (``tiinterp._engine.device_path``) runs its fused ``gather``, and
``resample_axis`` for tables too wide to fuse. The Taichi pipeline steps (``interpolate_into``
on a vector field, ``grid_sample_into`` in a ``ti.ad.Tape``) get the same treatment: their
element copies index the whole field.
"""

import math
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tiinterp
import tiinterp._engine.cpu_path as cpu_path_module
import tiinterp._engine.device_path as device_module
import tiinterp._engine.passes as engine_module

# isort: split
from tests import oracle
from tests.kernel_spies import empty_at
from tests.tolerances import relative_error, tolerance
from tiinterp._kernels.simd import half_vector_view, lanes_for
from tiinterp._runtime.taichi import ti

ROWS = 2**19
DTYPE = "float32"
CPU_PATH_KERNELS = ("simd_plane", "simd_gather", "simd_middle", "resample_axis")
DEVICE_KERNELS = ("gather", "resample_axis")


@dataclass(frozen=True)
class Case:
    path: str  # the kernel path the case is for (the test id)
    direction: str  # "forward", "adjoint" or "autodiff"
    in_shape: tuple
    out_spatial: tuple
    mode: str
    align_corners: object
    antialias: bool
    # The kernels that must run on the CPU (others may run too); for autodiff, on every
    # arch that has it.
    cpu_kernels: frozenset
    # Forward into an ``out=`` this many bytes past a 32-byte boundary (Note [Store forms]).
    out_offset: int | None = None

    @property
    def id(self):
        return (
            f"{self.path}|{self.direction}|{self.mode}|aa={self.antialias}|"
            f"{'x'.join(map(str, self.in_shape))}->{'x'.join(map(str, self.out_spatial))}"
            + ("" if self.out_offset is None else f"|out+{self.out_offset}")
        )

    @property
    def rows(self):
        """Rows of the array the kernels write: N * C * every spatial axis but the last."""
        written = self.in_shape[2:] if self.direction != "forward" else self.out_spatial
        return math.prod(self.in_shape[:2]) * math.prod(written[:-1])


def _cases():
    # 786,432 output rows, 524,288 input rows; lines of at least 8 elements, the lanes of a
    # float32 vector in the SIMD configuration (narrower ones take the generic kernel).
    plane = ((4096, 2, 64, 8), (96, 12))
    kernels = frozenset
    for direction in ("forward", "adjoint"):
        # NumPy's arrays start on 16-byte boundaries: lines of 8 and 12 samples are read in
        # half vectors, lines of 9 and 13 by scalar loads.
        yield Case(
            "simd_plane",
            direction,
            *plane,
            "bilinear",
            False,
            False,
            kernels({"simd_plane:halves"}),
        )
        yield Case(
            "simd_plane-scalar-loads",
            direction,
            (4096, 2, 64, 9),
            (96, 13),
            "bicubic",
            False,
            False,
            kernels({"simd_plane:scalar-loads"}),
        )
        # 1-D: a single pass on the last (only) axis.
        yield Case(
            "simd_plane-last-axis",
            direction,
            (8192, 64, 8),
            (11,),
            "lanczos3",
            False,
            False,
            kernels({"simd_plane"}),
        )
        # Only H resized (area keeps the untouched W a true identity, so no W pass).
        yield Case(
            "simd_middle",
            direction,
            (4096, 2, 64, 8),
            (96, 8),
            "area",
            None,
            False,
            kernels({"simd_middle:halves"}),
        )
        yield Case(
            "simd_middle-scalar-loads",
            direction,
            (4096, 2, 64, 9),
            (96, 9),
            "area",
            None,
            False,
            kernels({"simd_middle:scalar-loads"}),
        )
        # 3-D, every axis resized: the depth pass on its own, the two trailing axes fused
        # (lines of at least a vector's lanes: narrower ones take the generic kernel).
        yield Case(
            "simd_middle-3d",
            direction,
            (4096, 2, 64, 2, 8),
            (96, 3, 9),
            "trilinear",
            False,
            False,
            kernels({"simd_middle", "simd_plane"}),
        )
    # Nearest in both axes: the forward is a one-tap gather, and so is the adjoint of a
    # downsampling, whose inputs read one output or none (an empty output, written as 0 by
    # the kernel itself). The adjoint of an enlargement reads 1 or 2 outputs per input.
    yield Case("simd_gather", "forward", *plane, "nearest", None, False, kernels({"simd_gather"}))
    # Rows of 16 outputs: the vector-store form, each repeated output row stored again.
    yield Case(
        "simd_gather-vector-store",
        "forward",
        (4096, 2, 64, 12),
        (96, 16),
        "nearest-exact",
        None,
        False,
        kernels({"simd_gather:stores-vectors"}),
    )
    yield Case(
        "simd_gather",
        "adjoint",
        (4096, 2, 96, 12),
        (64, 8),
        "nearest",
        None,
        False,
        kernels({"simd_gather"}),
    )
    yield Case(
        "simd_plane-nearest", "adjoint", *plane, "nearest", None, False, kernels({"simd_plane"})
    )
    # The half-vector-store forms: results into an out= 16 bytes off a 32-byte boundary,
    # rows of 16 and 8 floats.
    yield Case(
        "simd_plane-half-store",
        "forward",
        plane[0],
        (96, 16),
        "bilinear",
        False,
        False,
        kernels({"simd_plane:stores-halves"}),
        out_offset=16,
    )
    yield Case(
        "simd_gather-half-store",
        "forward",
        (4096, 2, 64, 12),
        (96, 16),
        "nearest-exact",
        None,
        False,
        kernels({"simd_gather:stores-halves"}),
        out_offset=16,
    )
    yield Case(
        "simd_middle-half-store",
        "forward",
        (4096, 2, 64, 8),
        (96, 8),
        "area",
        None,
        False,
        kernels({"simd_middle:stores-halves"}),
        out_offset=16,
    )
    # The scalar-store forms: results into an out= 4 bytes off (rows of 12 and 8 floats).
    yield Case(
        "simd_plane-scalar-store",
        "forward",
        *plane,
        "bicubic",
        False,
        False,
        kernels({"simd_plane:stores-scalars"}),
        out_offset=4,
    )
    yield Case(
        "simd_gather-scalar-store",
        "forward",
        *plane,
        "nearest-exact",
        None,
        False,
        kernels({"simd_gather:stores-scalars"}),
        out_offset=4,
    )
    yield Case(
        "simd_middle-scalar-store",
        "forward",
        (4096, 2, 64, 8),
        (96, 8),
        "area",
        None,
        False,
        kernels({"simd_middle:stores-scalars"}),
        out_offset=4,
    )
    # Tables wider than 16 taps take the generic kernel on the CPU: the forward of an
    # antialiased 17x shrink of W (25- and 26-tap windows), and the adjoint of a 17x enlargement of
    # W (an input collects 25 outputs). H keeps its size (whether a pass runs on it too
    # does not matter: the case requires the generic kernel, not only it).
    yield Case(
        "resample_axis",
        "forward",
        (4096, 2, 64, 34),
        (64, 2),
        "bilinear",
        False,
        True,
        kernels({"resample_axis"}),
    )
    yield Case(
        "resample_axis",
        "adjoint",
        (4096, 2, 64, 2),
        (64, 34),
        "bilinear",
        False,
        True,
        kernels({"resample_axis"}),
    )
    # ti.ad reverse of the forward (CPU and CUDA only).
    yield Case(
        "resample_axis_accumulate",
        "autodiff",
        *plane,
        "bilinear",
        False,
        False,
        kernels({"resample_axis_accumulate"}),
    )


CASES = list(_cases())
# The autodiff case runs where Taichi has ndarray autodiff;
# tests/runtime/test_capabilities.py checks the refusal elsewhere.
CASE_PARAMS = [
    pytest.param(
        case,
        id=case.id,
        marks=[pytest.mark.requires_autodiff] if case.direction == "autodiff" else [],
    )
    for case in CASES
]


@pytest.fixture
def launched(monkeypatch):
    """The names of the resize kernels launched during the test (wrappers around the
    kernel objects that ``tiinterp._engine.cpu_path`` looks up at call time)."""
    names = set()

    class Spy:
        def __init__(self, name, kernel):
            self.name, self.kernel = name, kernel

        def __call__(self, *args):
            names.add(self.name)
            if self.name in ("simd_plane", "simd_middle"):
                # Note [Half-vector loads]: the source as lines of half vectors, or not
                # (the launch takes the view itself, from the source's address).
                outputs = args[1].size
                view = half_vector_view(args[0], args[-2], lanes_for(args[0].dtype), outputs)
                names.add(f"{self.name}:{'halves' if view.ndim == 4 else 'scalar-loads'}")
            if self.name.startswith("simd_"):
                # Note [Store forms]: the result as lines of vectors, of halves, or flat.
                result = args[1]
                form = "scalars" if result.ndim == 1 else "vectors"
                if result.ndim == 4 and result.shape[-1] * result.itemsize == 16:
                    form = "halves"
                names.add(f"{self.name}:stores-{form}")
            return self.kernel(*args)

        def __getattr__(self, attribute):  # .grad and the like
            return getattr(self.kernel, attribute)

    spied = (
        (cpu_path_module, CPU_PATH_KERNELS),
        (engine_module, ("resample_axis_accumulate",)),
        (device_module, DEVICE_KERNELS),
    )
    for module, kernels in spied:
        for name in kernels:
            monkeypatch.setattr(module, name, Spy(name, getattr(module, name)))
    return names


def spot_images(n):
    """The images checked against the oracle: the first, a middle and the last."""
    return [0, n // 2, n - 1]


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_large_batch_matches_oracle_on_first_middle_and_last_image(arch, case, launched):
    """One kernel path at >= 2^19 rows: the first, middle and last image of the result
    against the float64 oracle, every value finite, and the expected kernels launched."""
    assert case.rows >= ROWS, "the case is too small to test 32-bit overflow"
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    in_shape, out_shape = case.in_shape, case.in_shape[:2] + case.out_spatial
    call = dict(mode=case.mode, align_corners=case.align_corners, antialias=case.antialias)
    oracle_args = (case.mode, bool(case.align_corners), None, case.antialias)
    images = spot_images(in_shape[0])

    if case.direction == "forward":
        x = rng.standard_normal(in_shape, dtype=np.float32)
        out = None if case.out_offset is None else empty_at(out_shape, np.float32, case.out_offset)
        result = tiinterp.interpolate(x, size=case.out_spatial, **call, out=out)
        assert result.shape == out_shape and result.dtype == np.float32
        expected = oracle.resize(x[images], case.out_spatial, *oracle_args)
    else:
        g = rng.standard_normal(out_shape, dtype=np.float32)
        method = "autodiff" if case.direction == "autodiff" else "adjoint"
        result = tiinterp.interpolate_backward(g, in_shape, **call, method=method)
        assert result.shape == in_shape and result.dtype == np.float32
        expected = oracle.resize_adjoint(g[images], in_shape[2:], *oracle_args)

    if arch == "cpu" or case.direction == "autodiff":
        assert case.cpu_kernels <= launched, f"{case.path} did not run: {sorted(launched)}"
    else:
        assert launched and launched <= set(DEVICE_KERNELS), sorted(launched)
    assert np.isfinite(result).all()
    for position, image in enumerate(images):
        error = relative_error(result[image], expected[position])
        assert error <= tolerance("oracle", DTYPE), (
            f"image {image} of {in_shape[0]}: error {error:.3g}"
        )


# grid_sample: 512 images of 32 x 32 points each, 524,288 points in all.
GRID_BATCH, GRID_CHANNELS, GRID_INPUT, GRID_POINTS = 512, 2, (8, 8), (32, 32)


def assert_close(actual, expected, what):
    """As tests/ops/test_grid_sample.py: within tolerance("grid_pytorch", ...) of the larger of 1
    and the largest reference value (grid gradients scale with the image size)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, np.abs(expected).max())
    error = np.abs(actual - expected).max()
    assert error <= tolerance("grid_pytorch", DTYPE) * scale, (
        f"{what}: max error {error:.3g} (scale {scale:.3g})"
    )


@pytest.fixture(scope="module")
def grid_data():
    rng = np.random.default_rng(zlib.crc32(b"large-batch grid_sample"))
    x = rng.standard_normal((GRID_BATCH, GRID_CHANNELS) + GRID_INPUT, dtype=np.float32)
    grid = rng.uniform(-1, 1, (GRID_BATCH,) + GRID_POINTS + (2,)).astype(np.float32)
    g = rng.standard_normal((GRID_BATCH, GRID_CHANNELS) + GRID_POINTS, dtype=np.float32)
    assert GRID_BATCH * math.prod(GRID_POINTS) >= ROWS
    return x, grid, g


def torch_reference(x, grid, g, images):
    """PyTorch's float64 grid_sample of the chosen images and its autograd gradients."""
    xt = torch.tensor(x[images], dtype=torch.float64, requires_grad=True)
    gridt = torch.tensor(grid[images], dtype=torch.float64, requires_grad=True)
    y = F.grid_sample(xt, gridt, mode="bilinear", padding_mode="zeros", align_corners=False)
    y.backward(torch.tensor(g[images], dtype=torch.float64))
    return y.detach().numpy(), xt.grad.numpy(), gridt.grad.numpy()


def test_grid_sample_large_batch_matches_torch(arch, grid_data):
    """grid_sample and its adjoint (input and grid gradients) with N * points >= 2^19,
    against PyTorch in float64 on the first, middle and last image."""
    x, grid, g = grid_data
    images = spot_images(GRID_BATCH)
    expected_y, expected_gx, expected_gg = torch_reference(x, grid, g, images)

    y = tiinterp.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    assert y.shape == g.shape and y.dtype == np.float32 and np.isfinite(y).all()
    gx, gg = tiinterp.grid_sample_backward(
        g, x, grid, mode="bilinear", padding_mode="zeros", align_corners=False
    )
    assert gx.shape == x.shape and gg.shape == grid.shape
    assert np.isfinite(gx).all() and np.isfinite(gg).all()
    for position, image in enumerate(images):
        assert_close(y[image], expected_y[position], f"forward, image {image}")
        assert_close(gx[image], expected_gx[position], f"grad_input, image {image}")
        assert_close(gg[image], expected_gg[position], f"grad_grid, image {image}")


# --- Taichi pipelines: interpolate_into and grid_sample_into on vector fields -------------------

# Fields of at most 2^22 elements: on lavapipe, Taichi 1.7.4 cannot launch a kernel over a
# field of more than 65,535 x 128 elements (its own from_numpy fails: "Dispatch error").
PIPELINE_FRAMES, PIPELINE_IN, PIPELINE_OUT = 2**13, (64, 8), (96, 4)


@ti.kernel
def _weighted_vector_sum(dst: ti.template(), weights: ti.template(), loss: ti.template()):
    for i in ti.grouped(dst):
        loss[None] += (weights[i] * dst[i]).sum()


def test_interpolate_into_vector_field_large_batch(arch):
    """A (T, H, W) field of 2-vectors with spatial_axes=(1, 2) and T * H = 2^19 rows, in a
    ti.ad.Tape: dst and src.grad of the first, middle and last frame against interpolate
    and interpolate_backward on NumPy (the element copies index the whole field)."""
    assert PIPELINE_FRAMES * PIPELINE_IN[0] >= ROWS
    rng = np.random.default_rng(zlib.crc32(b"large-batch interpolate_into"))
    x = rng.standard_normal((PIPELINE_FRAMES, *PIPELINE_IN, 2), dtype=np.float32)
    w = rng.standard_normal((PIPELINE_FRAMES, *PIPELINE_OUT, 2), dtype=np.float32)
    src = ti.Vector.field(2, ti.f32, (PIPELINE_FRAMES, *PIPELINE_IN), needs_grad=True)
    dst = ti.Vector.field(2, ti.f32, (PIPELINE_FRAMES, *PIPELINE_OUT), needs_grad=True)
    weights = ti.Vector.field(2, ti.f32, (PIPELINE_FRAMES, *PIPELINE_OUT))
    loss = ti.field(ti.f32, (), needs_grad=True)
    src.from_numpy(x)
    weights.from_numpy(w)
    with ti.ad.Tape(loss=loss):
        tiinterp.interpolate_into(src, dst, mode="bicubic", spatial_axes=(1, 2))
        _weighted_vector_sum(dst, weights, loss)
    y, grad = dst.to_numpy(), src.grad.to_numpy()
    frames = spot_images(PIPELINE_FRAMES)
    channels = np.ascontiguousarray(x[frames].transpose(0, 3, 1, 2))
    expected_y = tiinterp.interpolate(channels, size=PIPELINE_OUT, mode="bicubic")
    g = np.ascontiguousarray(w[frames].transpose(0, 3, 1, 2))
    expected_grad = tiinterp.interpolate_backward(g, channels.shape, mode="bicubic")
    for position, frame in enumerate(frames):
        assert_close(y[frame], expected_y[position].transpose(1, 2, 0), f"dst, frame {frame}")
        assert_close(
            grad[frame], expected_grad[position].transpose(1, 2, 0), f"src.grad, frame {frame}"
        )


def test_grid_sample_into_large_batch(arch, grid_data):
    """grid_sample_into in a ti.ad.Tape with N * points >= 2^19 and a grid of 2-vectors:
    dst, src.grad and grid.grad of the first, middle and last image against PyTorch."""
    x, grid, g = grid_data
    src = ti.field(ti.f32, x.shape, needs_grad=True)
    points = ti.Vector.field(2, ti.f32, grid.shape[:-1], needs_grad=True)
    dst = ti.field(ti.f32, g.shape, needs_grad=True)
    weights = ti.field(ti.f32, g.shape)
    loss = ti.field(ti.f32, (), needs_grad=True)
    src.from_numpy(x)
    points.from_numpy(grid)
    weights.from_numpy(g)

    @ti.kernel
    def weighted_sum():
        for i in ti.grouped(dst):
            loss[None] += weights[i] * dst[i]

    with ti.ad.Tape(loss=loss):
        tiinterp.grid_sample_into(src, points, dst, "bilinear", "zeros", False)
        weighted_sum()
    images = spot_images(GRID_BATCH)
    expected_y, expected_gx, expected_gg = torch_reference(x, grid, g, images)
    y, gx, gg = dst.to_numpy(), src.grad.to_numpy(), points.grad.to_numpy()
    for position, image in enumerate(images):
        assert_close(y[image], expected_y[position], f"forward, image {image}")
        assert_close(gx[image], expected_gx[position], f"grad_input, image {image}")
        assert_close(gg[image], expected_gg[position], f"grad_grid, image {image}")
