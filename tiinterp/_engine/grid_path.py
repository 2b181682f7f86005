"""grid_sample's run-time plan: how the kernels of ``_kernels/grid.py`` and the sort of
``_kernels/grid_adjoint.py`` are launched on the arch at hand.

The choices made here, by arch: windows of channels, or of a tile's entries, where the arch
bounds an invocation's loops (Note [The loop limit of software Vulkan] in
``_runtime/vulkan_devices.py``); the input gradient's chunks of points, its tiles of input
pixels and groups of channels per thread, which sort orders its entries (radix passes on CPU
cores, counting on GPUs) and with what digit width; and the memory of its scratch.

Scratch is of the arrays' own memory: NumPy on the CPU arch, a torch tensor on a torch
tensor's GPU device, a Taichi ndarray on other archs, so no kernel is given host tables on
a GPU. Small buffers are kept for the next call (callers hold tiinterp's runtime lock).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._kernels import grid as kernels
from .._kernels import grid_adjoint as sort
from .._kernels.grid import SamplerStatics
from .._runtime.arrays import aligned_empty, copy_array, is_torch, new_ndarray
from .._runtime.dtypes import taichi_float
from .._runtime.session import require_autodiff
from .._runtime.taichi import current_config, runtime_generation, ti
from .._runtime.vulkan_devices import has_hardware_vulkan_device, loop_windows
from .._runtime.vulkan_devices import loop_budget as vulkan_loop_budget
from .autodiff import differentiable, reverse

# Buffers up to this size are kept between calls (one per use and dtype).
POOLED_BYTES = 64 << 20


def threads_on_cpu_cores() -> bool:
    """Whether Taichi's threads run on CPU cores: the CPU arch, or Vulkan on a machine
    whose Vulkan devices are all software rasterisers (Mesa's lavapipe). A few long
    threads suit those; GPUs want many short ones."""
    arch = current_config().arch
    return arch == ti.cpu or (arch == ti.vulkan and not has_hardware_vulkan_device())


def loop_budget() -> int | None:
    """The loop iterations one invocation may run on the current arch (Note [The loop limit
    of software Vulkan] in ``_runtime/vulkan_devices.py``); None for no limit."""
    return vulkan_loop_budget("vulkan" if current_config().arch == ti.vulkan else "other")


def radix_bits() -> int:
    """Digit width of a pass, which is also log2 of the entries per thread: 11 on CPU
    cores (two passes up to 2^22 keys; G1's 2.1M entries sorted in about half the time of
    8-bit digits on lavapipe), 8 on GPUs, for 8x the threads."""
    return 11 if threads_on_cpu_cores() else 8


def counting_sort() -> bool:
    """Whether the input's adjoint sorts by counting (GPUs) rather than by radix passes
    (CPU cores, where a few long threads do each pass's work without atomics)."""
    return not threads_on_cpu_cores()


_POOL: dict[tuple[Any, ...], Any] = {}


def scratch(like: Any, dtype: Any, size: int, use: str) -> Any:
    """A 1-D array of at least ``size`` elements of ``dtype`` (a NumPy dtype) in the memory
    the kernels read ``like`` from. Its contents are undefined."""
    dtype = np.dtype(dtype)
    if is_torch(like) and like.device.type != "cpu":
        import torch

        # PyTorch's caching allocator pools it.
        return torch.empty(size, dtype=getattr(torch, dtype.name), device=like.device)
    on_host = current_config().arch == ti.cpu
    key = (runtime_generation(), on_host, dtype.name, use)
    found = _POOL.get(key)
    if found is not None and found.shape[0] >= size:
        return found
    if on_host:
        array = aligned_empty((size,), dtype)
    else:
        array = ti.ndarray(_TAICHI_TYPES[dtype.name], (size,))
    if size * dtype.itemsize <= POOLED_BYTES:
        # One runtime's buffers at a time: those of an earlier runtime are freed with it.
        for stale in [k for k in _POOL if k[0] != key[0]]:
            del _POOL[stale]
        _POOL[key] = array
    return array


_TAICHI_TYPES = {"int32": ti.i32, "float32": ti.f32, "float64": ti.f64}


def _channel_windows(source: Any, grid: Any, points: int) -> list[tuple[int, int]]:
    """The ``[c_first, c_last)`` channel windows of the kernels that loop over the channels
    for each grid point: all of them in one, unless the arch bounds an invocation's loops
    (Note [The loop limit of software Vulkan] in ``_runtime/vulkan_devices.py``)."""
    return loop_windows(loop_budget(), int(grid.shape[0]) * points, int(source.shape[1]))


def _forward_launches(
    source: Any, grid: Any, result: Any, points: int, s: SamplerStatics
) -> list[tuple[Any, tuple[Any, ...]]]:
    """``(kernel, arguments)`` of each launch of the forward, for Taichi's reverse mode too."""
    return [
        (kernels.forward_kernel, (source, grid, result, points, first, last, s))
        for first, last in _channel_windows(source, grid, points)
    ]


@contextlib.contextmanager
def _written_in_turns(array: Any, several: bool) -> Iterator[Any]:
    """``array``, or where ``several`` launches write it in turn and it is a NumPy array, a
    Taichi ndarray copy of it, copied back after the last: each launch with a NumPy array
    copies it to the device and back, and on lavapipe a later launch's copy back was seen
    to undo an earlier one's channels (test_loop_limit.py, after field pipelines ran)."""
    if not several or not isinstance(array, np.ndarray):
        yield array
        return
    staged = new_ndarray(taichi_float(array.dtype), array.shape)
    staged.from_numpy(array)
    yield staged
    array[...] = staged.to_numpy()


def _sample(source: Any, grid: Any, result: Any, points: int, s: SamplerStatics) -> None:
    """``result[n, c, p]`` = the input sampled at grid point ``p`` (``points`` per item)."""
    with _written_in_turns(result, len(_channel_windows(source, grid, points)) > 1) as target:
        for kernel, arguments in _forward_launches(source, grid, target, points, s):
            kernel(*arguments)


# Entries per chunk of points in the input's adjoint: bounds its scratch (28 bytes an
# entry in float32, 36 in float64) and keeps every entry index well within int32.
CHUNK_ENTRIES = 1 << 22
# Threads the input's adjoint aims at on a GPU, splitting the channels if its tiles of
# pixels alone are fewer; on CPU cores, the cache its threads' planes should fit.
GPU_THREADS = 1 << 16
CPU_CACHE_BYTES = 2 << 20


def _add_input_gradient(
    grad_result: Any, source: Any, grid: Any, grad_source: Any, points: int, s: SamplerStatics
) -> None:
    """``grad_source`` (zeroed by the caller) += the transposed sampling of ``grad_result``.

    A gather, with no floating-point atomics: each point's taps and weights are computed
    once, as one entry per tap keyed by the pixel it reads; a stable sort
    (``_kernels/grid_adjoint.py``) orders the entries by pixel, each pixel's by point and
    then tap; one thread per tile of an (n, c) plane adds its pixels' entries to them in
    that order. The result is a
    function of the arguments alone, and each pixel's sum is the one a single thread makes
    walking the points in order. Points go in chunks of at most ``CHUNK_ENTRIES``
    entries, each chunk's sums added to the previous ones, the same order again.
    """
    if loop_budget() is not None and isinstance(grad_source, np.ndarray):
        # Windows of launches may go on from each other's sums: see _written_in_turns.
        with _written_in_turns(grad_source, several=True) as staged:
            _add_input_gradient(grad_result, source, grid, staged, points, s)
        return
    dims = len(source.shape) - 2
    taps = kernels.TAPS[s.mode] ** dims
    batch, channels, pixels = (
        int(source.shape[0]),
        int(source.shape[1]),
        math.prod(source.shape[2:]),
    )
    total = batch * points
    step = max(1, CHUNK_ENTRIES // taps)
    if isinstance(grad_source, np.ndarray) or is_torch(grad_source):
        # A view (the caller's array is C-contiguous): the kernel then indexes a pixel
        # without dividing by the input's sizes.
        grad_source = grad_source.reshape(batch, channels, pixels)
    # Work per thread: on CPU cores, a tile of 256 pixels in as many channels as keep the
    # planes of grad_result and grad_source they go through within about a CPU's L2
    # cache (G1's gather: 4 channels at a time 74 ms, 1 at a time 103 ms, all 16 97 ms);
    # on GPUs, whose threads are many, 8 pixels in all channels, fewer if the threads would
    # then be too few. Each entry's weight and indices (divisions by the sizes of Taichi
    # ndarrays among them) are found once per thread.
    real = np.float32 if s.real == ti.f32 else np.float64
    if threads_on_cpu_cores():
        span = 256
        plane_bytes = (points + pixels) * np.dtype(real).itemsize
        group = max(1, min(channels, CPU_CACHE_BYTES // plane_bytes))
        tiles = -(-pixels // span)
    else:
        span = 8
        tiles = -(-pixels // span)
        group = -(-channels // min(channels, -(-GPU_THREADS // (batch * tiles))))
    budget = loop_budget()
    if budget is not None:
        # Note [The loop limit of software Vulkan]: a term costs its channels' iterations
        # and one; fewer channels a thread where a term alone would pass the budget.
        while group > 1:
            threads = batch * -(-channels // group) * tiles
            if loop_windows(budget, threads, 2, 1 + group)[0][1] >= 2:
                break
            group = max(1, group // 2)
    chunks = [(first, min(step, total - first)) for first in range(0, total, step)]
    most_items = max((first + count - 1) // points - first // points + 1 for first, count in chunks)
    entries = chunks[0][1] * taps
    bits, counting = radix_bits(), counting_sort()
    if counting:
        size = sort.counting_table_size(entries, most_items * pixels)
    else:
        size = sort.table_size(entries, bits)
    table = scratch(grad_source, np.int32, size, "table")
    weights = scratch(grad_source, real, 2 * entries, "weights")
    bounds = scratch(grad_source, np.int32, most_items * tiles + 1, "bounds")
    for first, count in chunks:
        item = first // points
        items = (first + count - 1) // points - item + 1
        entries = count * taps
        kernels.adjoint_entries(
            source, grid, table, weights, first, count, points, item, items * pixels, s
        )
        if counting:
            keys, ids = sort.sort_by_key_counting(table, entries, items * pixels)
        else:
            keys, ids = sort.sort_by_key(table, entries, items * pixels, bits)
        sort.tile_bounds(table, keys, entries, bounds, items * tiles + 1, tiles, pixels, span)
        sort.sorted_values(table, ids, entries, weights)
        launch = (table, keys, ids, entries, bounds, weights, first, item, items, points)
        threads = items * -(-channels // group) * tiles
        longest = entries
        if budget is not None:
            longest = sort.longest_run(bounds, items * tiles)
        for part_first, part_last in loop_windows(budget, threads, longest, 1 + group):
            part = (part_first, part_last - part_first)
            kernels.adjoint_gather(
                grad_result, grad_source, *launch, span, group, threads, *part, taps
            )


def _grid_gradient(
    grad_result: Any, source: Any, grid: Any, grad_grid: Any, points: int, s: SamplerStatics
) -> None:
    """``grad_grid[n, p, :]``: the derivative of the sampled values along each grid
    component, contracted with ``grad_result`` over channels (in order, in windows of
    channels where the arch needs them: :func:`_channel_windows`)."""
    windows = _channel_windows(source, grid, points)
    with _written_in_turns(grad_grid, len(windows) > 1) as target:
        for first, last in windows:
            kernels.grad_grid_kernel(grad_result, source, grid, target, points, first, last, s)


def _points_view(array: Any, kind: Any) -> Any:
    """``(N, *P, D)`` as ``(N, P, D)`` where the kind reshapes to a view; the kernels take
    either layout (``_kernels/grid.py``)."""
    return array.reshape(array.shape[0], -1, array.shape[-1]) if kind.reshapes else array


def _values_view(array: Any, kind: Any) -> Any:
    """``(N, C, *P)`` as ``(N, C, P)`` where the kind reshapes to a view."""
    return array.reshape(array.shape[0], array.shape[1], -1) if kind.reshapes else array


def _point_count(points: Any) -> int:
    """Grid points per batch item."""
    return math.prod(points.shape[1:-1])


def forward(source: Any, points: Any, result: Any, kind: Any, s: SamplerStatics) -> None:
    """``result`` = ``source`` (N, C, *S) sampled at ``points`` (N, *P, D), all of array
    kind ``kind``, checked, on the initialised arch."""
    count = _point_count(points)
    _sample(source, _points_view(points, kind), _values_view(result, kind), count, s)


def backward(
    g: Any,
    source: Any,
    points: Any,
    kind: Any,
    s: SamplerStatics,
    *,
    method: str,
    grad_input: Any = None,
    grad_grid: Any = None,
) -> None:
    """The gradients of :func:`forward` for the output's gradient ``g``: added to
    ``grad_input`` (zeroed by the caller) and written to ``grad_grid``, each where given.
    ``method="autodiff"`` (both given) runs Taichi's ``ti.ad`` of the forward instead of the
    hand-written adjoint."""
    flat_points, flat_g = _points_view(points, kind), _values_view(g, kind)
    count = _point_count(points)
    if method == "autodiff":
        _autodiff(source, flat_points, flat_g, grad_input, _points_view(grad_grid, kind), s)
        return
    s = dataclasses.replace(s, backward=True)
    if grad_input is not None:
        _add_input_gradient(flat_g, source, flat_points, grad_input, count, s)
    if grad_grid is not None:
        _grid_gradient(flat_g, source, flat_points, _points_view(grad_grid, kind), count, s)


def _autodiff(
    source: Any, points: Any, g: Any, grad_input: Any, grad_grid: Any, s: SamplerStatics
) -> None:
    """Taichi's ``ti.ad`` reverse of the forward kernel, into ``grad_input``/``grad_grid``."""
    require_autodiff()
    # Taichi's autodiff cannot differentiate the bit tests behind the NaN rules.
    s = dataclasses.replace(s, nan_rules=False, differentiated=True)
    inputs = [differentiable(s.real, value.shape, value) for value in (source, points)]
    result = differentiable(s.real, g.shape)
    source_d, points_d = inputs
    reverse(_forward_launches(source_d, points_d, result, _point_count(points), s), result, g)
    for array, target in zip(inputs, (grad_input, grad_grid), strict=True):
        copy_array(array.grad, target)
