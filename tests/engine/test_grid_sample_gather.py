"""grid_sample's input gradient as a parallel gather (planned in tiinterp/_engine/grid_path.py,
its sort in tiinterp/_kernels/grid_adjoint.py): each input pixel's terms added in point
order, bit for bit; the same bits whatever the chunking of the points, the digit width of the
sort, the run or the thread; scratch of the device's own memory, kept between calls."""

import threading

import numpy as np
import pytest

import tiinterp
from tests.grid_cases import grid_inputs
from tiinterp._engine import grid_path
from tiinterp._runtime.taichi import submodule as taichi_submodule
from tiinterp._runtime.taichi import ti

SIZE = 256  # a power of two: the half-pixel grid below is exact in float32


def half_pixel_points(rng, shape):
    """Integer ``(x0, y0)`` per point, most of them in a 32 x 32 corner (so each pixel
    gets dozens of terms), some on the first and last column and row, whose outer taps
    are outside the input."""
    corner = rng.integers(0, 32, (*shape, 2))
    edge = rng.choice([-1, SIZE - 1], (*shape, 2))
    return np.where(rng.random((*shape, 2)) < 0.05, edge, corner)


def sequential_sums(base, g):
    """The input gradient of bilinear grid_sample (zeros padding) at points halfway
    between the pixels ``base`` and ``base + 1`` on both axes: every tap weighs exactly
    1/4, so each term ``g / 4`` is exact. Each pixel's terms are added one at a time in
    float32, points ascending, then taps (y, then x): the order that decides the bits."""
    batch, channels = g.shape[:2]
    x0, y0 = base[..., 0].reshape(batch, -1), base[..., 1].reshape(batch, -1)
    terms = g.reshape(batch, channels, -1) * np.float32(0.25)
    result = np.zeros((batch, channels, SIZE * SIZE), np.float32)
    for n in range(batch):
        # Entries in (point, tap) order: tap (dy, dx) reads pixel (y0 + dy, x0 + dx).
        ys = np.stack([y0[n] + dy for dy in (0, 0, 1, 1)], 1).ravel()
        xs = np.stack([x0[n] + dx for dx in (0, 1, 0, 1)], 1).ravel()
        values = np.repeat(terms[n], 4, axis=1)
        inside = (ys >= 0) & (ys < SIZE) & (xs >= 0) & (xs < SIZE)
        keys, values = (ys * SIZE + xs)[inside], values[:, inside]
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[:, order]
        # The k-th term of every pixel at once: within a rank no pixel repeats.
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        rank = np.arange(keys.size) - np.repeat(starts, np.diff(np.r_[starts, keys.size]))
        for k in range(rank.max() + 1):
            chosen = rank == k
            result[n][:, keys[chosen]] += values[:, chosen]
    return result.reshape(batch, channels, SIZE, SIZE)


@pytest.fixture(params=["radix", "counting"])
def sort(request, monkeypatch):
    """Each sort of the entries (the docstring of tiinterp/_kernels/grid_adjoint.py): the
    radix passes (CPU cores) and the counting sort (GPUs), on every arch."""
    monkeypatch.setattr(grid_path, "counting_sort", lambda: request.param == "counting")
    return request.param


@pytest.mark.parametrize("points", ["spread", "on-one-pixel"])
def test_each_pixel_sums_its_terms_in_point_order(arch, rng, sort, points):
    """Bit for bit the sum a single thread makes walking the points in order (what the
    adjoint computed before it was a gather), over 2 x 16,384 points and a key range that
    takes the sort two passes or more, with either sort; 2 x 4,096 points on one pixel too
    (runs of 4,096 entries per key: the counting sort's heapsort); and that order matters
    here: reversed, the same terms give other bits."""
    side = 128 if points == "spread" else 64
    base = half_pixel_points(rng, (2, side, side))
    if points == "on-one-pixel":
        base = np.broadcast_to(base[:1, :1, :1], base.shape)
    # x = x0 + 1/2 is g = (2 x0 + 2) / SIZE - 1 with align_corners=False: exact.
    grid = ((2 * base + 2) / SIZE - 1).astype(np.float32)
    scale = 10.0 ** rng.uniform(-4, 4, (2, 3, side, side))
    g = (rng.standard_normal((2, 3, side, side)) * scale).astype(np.float32)
    x = np.zeros((2, 3, SIZE, SIZE), np.float32)
    gx, _ = tiinterp.grid_sample_backward(g, x, grid)
    expected = sequential_sums(base, g)
    np.testing.assert_array_equal(gx, expected)
    reversed_order = sequential_sums(base[:, ::-1, ::-1], g[:, :, ::-1, ::-1])
    assert not np.array_equal(reversed_order, expected)


@pytest.mark.parametrize(
    "dims, mode, padding", [(2, "bicubic", "border"), (3, "bilinear", "zeros")]
)
def test_chunks_and_digit_width_leave_the_bits_alone(arch, monkeypatch, sort, dims, mode, padding):
    """Points in chunks of 37 (chunks that end inside an item: each adds to the sums of
    the last, in order) and a sort of 3-bit digits (a pass per 3 bits of the key) give the
    bits of one chunk and the arch's digit width; bicubic border padding reads some pixels
    twice from one point, and NaN grid entries put NaN where PyTorch does."""
    x, grid, g = grid_inputs(dims, mode, padding, False, "nan", "float32")
    options = dict(mode=mode, padding_mode=padding)
    expected, _ = tiinterp.grid_sample_backward(g, x, grid, **options)
    if mode == "bicubic":
        assert np.isnan(expected).any() and not np.isnan(expected).all()
    taps = {"bicubic": 16, "bilinear": 8}[mode]
    monkeypatch.setattr(grid_path, "CHUNK_ENTRIES", 37 * taps)
    monkeypatch.setattr(grid_path, "radix_bits", lambda: 3)
    actual, _ = tiinterp.grid_sample_backward(g, x, grid, **options)
    np.testing.assert_array_equal(actual, expected)


def test_bit_identical_across_runs_and_threads(arch, rng):
    """Four runs, then two threads calling at once, three calls each: one set of bits."""
    x = rng.standard_normal((2, 5, 33, 47)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 61, 29, 2)).astype(np.float32)
    g = rng.standard_normal((2, 5, 61, 29)).astype(np.float32)
    options = dict(mode="bicubic", padding_mode="reflection", align_corners=True)
    runs = [tiinterp.grid_sample_backward(g, x, grid, **options)[0] for _ in range(4)]
    results, failures = [], []

    def call():
        try:
            for _ in range(3):
                results.append(tiinterp.grid_sample_backward(g, x, grid, **options)[0])
        except Exception as error:  # reported by the test, not lost in the thread
            failures.append(error)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and len(results) == 6
    for result in runs[1:] + results:
        assert np.array_equal(result, runs[0])


def test_scratch_is_of_the_device_and_kept_between_calls(arch, monkeypatch):
    """With Taichi ndarrays and ``out=``: no kernel gets a NumPy array on a GPU arch (the
    scratch is Taichi ndarrays there, host memory on the CPU arch), and a second call
    allocates nothing."""
    x, grid, g = (
        to_taichi(a) for a in grid_inputs(2, "bicubic", "border", False, "random", "float32")
    )
    out = (ti.ndarray(ti.f32, x.shape), ti.ndarray(ti.f32, grid.shape))
    options = dict(mode="bicubic", padding_mode="border")
    Kernel = taichi_submodule("lang.kernel_impl").Kernel
    launch, numpy_arguments = Kernel.__call__, []

    def spy(self, *args, **kwargs):
        numpy_arguments.extend(a for a in args if isinstance(a, np.ndarray))
        return launch(self, *args, **kwargs)

    monkeypatch.setattr(Kernel, "__call__", spy)
    tiinterp.grid_sample_backward(g, x, grid, **options, out=out)
    assert bool(numpy_arguments) == (arch == "cpu")
    allocations = []
    for module, name in ((ti, "ndarray"), (grid_path, "aligned_empty")):
        allocate = getattr(module, name)

        def counted(*args, allocate=allocate, **kwargs):
            allocations.append(args)
            return allocate(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    expected = out[0].to_numpy()
    tiinterp.grid_sample_backward(g, x, grid, **options, out=out)
    assert allocations == []
    np.testing.assert_array_equal(out[0].to_numpy(), expected)


def to_taichi(array):
    result = ti.ndarray(ti.f32, array.shape)
    result.from_numpy(array)
    return result
