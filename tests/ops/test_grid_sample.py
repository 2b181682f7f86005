"""grid_sample against PyTorch goldens, finite differences, autodiff; determinism; errors."""

import numpy as np
import pytest
import torch

import tiinterp
from tests.grid_cases import grid_cases, grid_inputs, grid_key
from tests.tolerances import tolerance

CASES = [pytest.param(*case, id=grid_key(*case)) for case in grid_cases()]
ARGS = "dims, mode, padding, align_corners, kind, dtype"


def assert_close(actual, expected, bound):
    """Absolute error within ``bound`` times the larger of 1 and max |expected|; NaN where
    ``expected`` has NaN."""
    actual = np.asarray(actual, dtype=np.float64)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = ~np.isnan(expected)
    scale = max(1.0, np.abs(expected[finite]).max(initial=0))
    assert np.abs(actual[finite] - expected[finite]).max(initial=0) <= bound * scale


def sample_args(mode, padding, align_corners):
    return dict(mode=mode, padding_mode=padding, align_corners=align_corners)


@pytest.mark.parametrize(ARGS, CASES)
def test_matches_pytorch_forward_and_both_gradients(
    arch, golden, dims, mode, padding, align_corners, kind, dtype
):
    references = golden("grid_sample")
    key = grid_key(dims, mode, padding, align_corners, kind, dtype)
    x, grid, g = grid_inputs(dims, mode, padding, align_corners, kind, dtype)
    y = tiinterp.grid_sample(x, grid, **sample_args(mode, padding, align_corners))
    gx, gg = tiinterp.grid_sample_backward(g, x, grid, **sample_args(mode, padding, align_corners))
    assert y.dtype == gx.dtype == gg.dtype == np.dtype(dtype)
    bound = tolerance("grid_pytorch", dtype)
    assert_close(y, references[key + "|y"].astype(np.float64), bound)
    assert_close(gx, references[key + "|gx"].astype(np.float64), bound)
    assert_close(gg, references[key + "|gg"].astype(np.float64), bound)
    if mode == "nearest":
        assert np.all(gg == 0)


# Every mode, padding and align_corners in float64; float32 (the same ti.ad code, compiled
# again: ~2 s a case on the CPU) for 2-D bicubic, the mode with the most arithmetic.
AUTODIFF_CASES = [
    c
    for c in CASES
    if c.values[4] == "random" and (c.values[5] == "float64" or c.values[:2] == (2, "bicubic"))
]


@pytest.mark.requires_autodiff
@pytest.mark.parametrize(ARGS, AUTODIFF_CASES)
def test_autodiff_agrees_with_adjoint(arch, dims, mode, padding, align_corners, kind, dtype):
    x, grid, g = grid_inputs(dims, mode, padding, align_corners, kind, dtype)
    call = (g, x, grid)
    options = sample_args(mode, padding, align_corners)
    adjoint = tiinterp.grid_sample_backward(*call, **options)
    autodiff = tiinterp.grid_sample_backward(*call, **options, method="autodiff")
    for a, b in zip(adjoint, autodiff, strict=True):
        assert_close(b, np.asarray(a, dtype=np.float64), tolerance("grid_reorder", dtype))


INFINITE_CASES = [
    pytest.param(
        mode,
        padding,
        align_corners,
        dtype,
        id=f"{mode}-{padding}-{align_corners}-{dtype}",
        marks=[pytest.mark.requires_float64] if dtype == "float64" else [],
    )
    for mode in ("bicubic",)
    for padding in ("zeros", "border", "reflection")
    for align_corners in (False, True)
    for dtype in ("float32", "float64")
]


@pytest.mark.parametrize("mode, padding, align_corners, dtype", INFINITE_CASES)
def test_infinite_coordinates_as_in_pytorch(arch, rng, mode, padding, align_corners, dtype):
    """Bicubic at grid coordinates of +-inf (and huge ones beside them), forward and both
    gradients, against PyTorch computed here: NaN where it gives NaN (it gave 0), NaN
    input gradients at the taps PyTorch pads them to. (PyTorch 2.13's 2-D CPU bilinear
    with reflection padding crashes on such grids, so the other modes have no reference
    here.)"""
    x = rng.standard_normal((1, 2, 4, 5)).astype(dtype)
    special = [np.inf, -np.inf, 1e30, -1e30]
    grid = rng.uniform(-1, 1, (1, 3, 2 * len(special), 2))
    for i, value in enumerate(special):
        grid[0, i % 3, 2 * i, 0] = value
        grid[0, (i + 1) % 3, 2 * i + 1, 1] = value
    grid = grid.astype(dtype)
    g = rng.standard_normal((1, 2, *grid.shape[1:3])).astype(dtype)
    options = sample_args(mode, padding, align_corners)
    source = torch.tensor(x, requires_grad=True)
    points = torch.tensor(grid, requires_grad=True)
    expected = torch.nn.functional.grid_sample(source, points, **options)
    expected.backward(torch.tensor(g))
    y = tiinterp.grid_sample(x, grid, **options)
    gx, gg = tiinterp.grid_sample_backward(g, x, grid, **options)
    bound = tolerance("grid_pytorch", dtype)
    assert_close(y, expected.detach().numpy().astype(np.float64), bound)
    assert_close(gx, source.grad.numpy().astype(np.float64), bound)
    assert_close(gg, points.grad.numpy().astype(np.float64), bound)


def kink_sweep(dims, align_corners, seed):
    """Fields (constant, a ramp with another slope along each axis, random) on a small
    input, and a grid whose points sit on every sample, half-way between two and on the
    input's edges and ends, one and two samples past them too: the kinks of the filters
    and of the padding's clipping and reflection (Note [Slopes at the kinks])."""
    sizes = (3, 4, 5)[-dims:]  # depth, height, width
    index = np.indices(sizes).astype(np.float64)
    ramp = sum((3.0**a + 1) * index[a] for a in range(dims))
    rng = np.random.default_rng(seed)
    fields = {
        "constant": np.full((1, 2, *sizes), 5.0),
        "ramp": np.broadcast_to(ramp, (1, 2, *sizes)).copy(),
        "random": rng.standard_normal((1, 2, *sizes)),
    }
    # Grid component c runs along axis dims - 1 - c.
    per_component = []
    for size in sizes[::-1]:
        at = np.arange(-2.0, size + 1.5, 0.5)  # source coordinates
        normalised = 2 * at / (size - 1) - 1 if align_corners else (2 * at + 1) / size - 1
        per_component.append(np.concatenate([normalised, [-1.0, 1.0]]))
    points = np.stack(np.meshgrid(*per_component[::-1], indexing="ij")[::-1], -1)
    grid = points.reshape(1, *points.shape)
    g = rng.standard_normal((1, 2, *grid.shape[1:-1]))
    return fields, grid, g


KINK_CASES = [
    pytest.param(dims, mode, padding, align_corners, id=f"{dims}d-{mode}-{padding}-{align_corners}")
    for dims in (2, 3)
    for mode in ("nearest", "bilinear", "bicubic")
    if not (dims == 3 and mode == "bicubic")
    for padding in ("zeros", "border", "reflection")
    for align_corners in (False, True)
]


def check_kinks_against_pytorch(method, dims, mode, padding, align_corners):
    fields, grid, g = kink_sweep(dims, align_corners, seed=dims)
    options = sample_args(mode, padding, align_corners)
    bound = tolerance("grid_pytorch", "float64")
    for x in fields.values():
        source = torch.tensor(x, requires_grad=True)
        points = torch.tensor(grid, requires_grad=True)
        torch.nn.functional.grid_sample(source, points, **options).backward(torch.tensor(g))
        gx, gg = tiinterp.grid_sample_backward(g, x, grid, **options, method=method)
        assert_close(gx, source.grad.numpy(), bound)
        assert_close(gg, points.grad.numpy(), bound)


@pytest.mark.requires_float64
@pytest.mark.parametrize("dims, mode, padding, align_corners", KINK_CASES)
def test_adjoint_at_the_kinks_matches_pytorch(arch, dims, mode, padding, align_corners):
    """The hand-written gradients, at points on samples, half-way and on the edges."""
    check_kinks_against_pytorch("adjoint", dims, mode, padding, align_corners)


@pytest.mark.requires_float64
@pytest.mark.requires_autodiff
@pytest.mark.parametrize("dims, mode, padding, align_corners", KINK_CASES)
def test_autodiff_at_the_kinks_matches_pytorch(arch, dims, mode, padding, align_corners):
    """Taichi's ti.ad of the forward, at the same points: it takes the branch the formula
    takes, so the clipping at either end and the reflection at 0 are written for it (it
    gave the end's points the slope 1 where PyTorch's is 0: errors up to 156)."""
    check_kinks_against_pytorch("autodiff", dims, mode, padding, align_corners)


@pytest.mark.parametrize(
    ARGS, [c for c in CASES if c.values[4] == "random" and c.values[5] == "float64"]
)
def test_gradients_match_finite_differences_and_dot_product(
    arch, rng, dims, mode, padding, align_corners, kind, dtype
):
    x, grid, g = grid_inputs(dims, mode, padding, align_corners, kind, dtype)
    options = sample_args(mode, padding, align_corners)
    gx, gg = tiinterp.grid_sample_backward(g, x, grid, **options)

    def loss(a, b):
        return np.sum(tiinterp.grid_sample(a, b, **options) * g)

    assert abs(loss(x, grid) - np.sum(x * gx)) <= (
        tolerance("grid_dot", dtype) * np.sum(np.abs(x * gx))
    )
    if mode == "nearest":
        return
    step = 1e-6
    direction = rng.standard_normal(grid.shape)
    numeric = (loss(x, grid + step * direction) - loss(x, grid - step * direction)) / (2 * step)
    # A point within `step` of a tap boundary or a padding fold has a kink there; the
    # seeded random grid has none closer than that, so the check is exact to rounding.
    assert abs(numeric - np.sum(gg * direction)) <= (
        tolerance("grid_finite_difference", dtype) * max(1.0, abs(numeric))
    )


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_adjoint_is_bit_identical_across_runs(arch, rng, mode):
    x = rng.standard_normal((2, 8, 40, 50)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 60, 70, 2)).astype(np.float32)
    g = rng.standard_normal((2, 8, 60, 70)).astype(np.float32)
    runs = [
        tiinterp.grid_sample_backward(g, x, grid, mode=mode, padding_mode="border")
        for _ in range(4)
    ]
    for gx, gg in runs[1:]:
        assert gx.tobytes() == runs[0][0].tobytes() and gg.tobytes() == runs[0][1].tobytes()


def test_torch_tensors_in_and_out(arch, rng):
    x = torch.from_numpy(rng.standard_normal((1, 2, 6, 5)))
    grid = torch.from_numpy(rng.uniform(-1, 1, (1, 3, 4, 2)))
    y = tiinterp.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=True)
    expected = torch.nn.functional.grid_sample(
        x, grid, mode="bicubic", padding_mode="reflection", align_corners=True
    )
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(
        y, expected, rtol=0, atol=tolerance("grid_pytorch_tensor", "float64")
    )


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda x, g: tiinterp.grid_sample(x, g, mode="trilinear"),
            ValueError,
            r"mode: expected one of \('nearest', 'bilinear', 'bicubic'\), got 'trilinear'",
        ),
        (
            lambda x, g: tiinterp.grid_sample(x, g, padding_mode="wrap"),
            ValueError,
            "padding_mode: expected one of",
        ),
        (
            lambda x, g: tiinterp.grid_sample(x, g[..., :1]),
            ValueError,
            r"grid: expected shape \(N, H_out, W_out, 2\) with N = 1",
        ),
        (
            lambda x, g: tiinterp.grid_sample(x, g.astype(np.float32)),
            TypeError,
            "grid: expected dtype float64 like the input, got float32",
        ),
        (lambda x, g: tiinterp.grid_sample(x[0], g), ValueError, "input: expected a 4-D"),
        (
            lambda x, g: tiinterp.grid_sample(
                x[:, :, None], np.zeros((1, 2, 2, 2, 3)), mode="bicubic"
            ),
            ValueError,
            "bicubic is 2-D only",
        ),
        (
            lambda x, g: tiinterp.grid_sample(x, g, align_corners="yes"),
            TypeError,
            "align_corners: expected True, False or None, got 'yes'",
        ),
        (
            lambda x, g: tiinterp.grid_sample(x, list(g)),
            TypeError,
            "grid: expected a numpy.ndarray",
        ),
        (
            lambda x, g: tiinterp.grid_sample_backward(np.zeros((1, 2, 3, 3)), x, g),
            ValueError,
            r"grad_output: expected shape \(1, 2, 4, 3\), got \(1, 2, 3, 3\)",
        ),
    ],
)
def test_bad_arguments(call, error, message):
    x = np.zeros((1, 2, 5, 6))
    g = np.zeros((1, 4, 3, 2))
    with pytest.raises(error, match=message):
        call(x, g)
