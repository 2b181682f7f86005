"""The CPU path: a plan's passes as SIMD kernel launches (``_kernels/simd.py``), prepared
once per plan and input shape.

The two trailing axes are fused into one ``plane`` launch, any other axis is a ``middle``
launch, tables too wide to unroll take the generic ``resample_axis``. Everything a launch
needs but its arrays (packed tables, worker count, serial or parallel loop, the shapes of
the views) is worked out when the plan is first run on a shape; a repeated call reshapes,
picks the store form its target's alignment allows and launches. Prepared plans live as
long as the Taichi runtime that compiled their kernels.
"""

from __future__ import annotations

import functools
import math
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._compiled.native import NativeFirst
from .._kernels.resample import resample_axis
from .._kernels.simd import (
    gather_tables,
    lanes_for,
    middle_chunks,
    packed_tables,
    plane_workers,
    result_view,
    runs_serially,
    runs_serially_for,
    simd_gather,
    simd_middle,
    simd_plane,
    store_form,
)
from .._rules.plan import Pass
from .._runtime.arrays import NumpyKind, aligned_empty
from .._runtime.session import simd_configuration
from .._runtime.taichi import (
    HostLaunches,
    LaunchRecorder,
    RecordedLaunches,
    cpu_threads,
    launch,
    runtime_generation,
)

# Taichi counts the iterations of a parallel loop in 32 bits.
MAX_LOOP_ITERATIONS = 2**31 - 1
# Tap loops of the SIMD kernels are unrolled; wider tables take the generic kernel.
MAX_UNROLLED_TAPS = 16
# The scratch lines of the SIMD ``plane`` kernel, one per thread (Note [Workers and threads]
# in _kernels/simd.py), are bounded in bytes: wider images take the generic kernel.
MAX_SCRATCH_BYTES = 256 * 2**20
MAX_PREPARED = 256
# A recorded call keeps its intermediates and scratch (Note [Recorded launches] in
# _runtime/taichi.py): calls that would keep more run without a recording, where Python's
# time per call is small beside the kernels' anyway.
MAX_RECORDED_BYTES = 2**20

# A step runs on (source, target, array kind, launch function).
Step = Callable[[Any, Any, Any, Callable[..., Any]], None]


def _fixed_width_ok(p: Pass) -> bool:
    # ``plane`` indexes its two packed tables with 32-bit integers.
    width = p.taps.fixed_width[1].shape[1]
    return width <= MAX_UNROLLED_TAPS and p.taps.out_size * width <= MAX_LOOP_ITERATIONS // 2


def _scratch_line_length(width: int, lanes: int) -> int:
    """Vectors in ``plane``'s scratch line: a group's columns, a zero slot, then its rows."""
    return width + 1 + lanes * -(-width // lanes)


def _plane_takes(line_length: int, dtype: np.dtype) -> bool:
    """Whether ``plane`` takes input lines of ``line_length``: at least one vector's lanes
    (its last block of a line ends at the line's end), and scratch lines within bounds."""
    lanes = lanes_for(dtype)
    line_bytes = _scratch_line_length(line_length, lanes) * lanes * dtype.itemsize
    return lanes <= line_length and cpu_threads() * line_bytes <= MAX_SCRATCH_BYTES


class _Scratch:
    """One growing, aligned scratch buffer per dtype, reused by every call (calls are
    serialised): fresh pages would be faulted in on every call otherwise. A shape's view is
    the same object until the buffer grows (Note [Bound host launches] in _runtime/taichi.py)."""

    def __init__(self) -> None:
        self._buffers: dict[np.dtype, np.ndarray] = {}
        self._views: dict[tuple[np.dtype, int, int, int], np.ndarray] = {}
        # While a call is recorded, each step gets scratch of its own, which the recording
        # keeps (Note [Recorded launches] in _runtime/taichi.py): a view of the shared
        # buffer would keep every buffer it outgrows alive.
        self.private = False

    def lines(self, dtype: np.dtype, workers: int, width: int, lanes: int) -> np.ndarray:
        if self.private:
            return aligned_empty((workers, width, lanes), dtype)
        key = (dtype, workers, width, lanes)
        view = self._views.get(key)
        if view is not None:
            return view
        size = workers * width * lanes
        buffer = self._buffers.get(dtype)
        if buffer is None or buffer.size < size:
            buffer = aligned_empty((size,), dtype)
            self._buffers[dtype] = buffer
            self._views = {k: v for k, v in self._views.items() if k[0] != dtype}
        if len(self._views) >= MAX_PREPARED:
            self._views.clear()
        view = self._views[key] = buffer[:size].reshape(workers, width, lanes)
        return view


_SCRATCH = _Scratch()


@functools.lru_cache(maxsize=4)
def _identity_taps(size: int, dtype_name: str) -> tuple[np.ndarray, np.ndarray]:
    index = np.arange(size, dtype=np.int32).reshape(size, 1)
    weight = np.ones((size, 1), dtype=dtype_name)
    return index, weight


def _plane_step(
    source_shape: tuple[int, int, int],
    rows: tuple[np.ndarray, np.ndarray],
    cols: tuple[np.ndarray, np.ndarray],
) -> Step:
    """``plane``: (P, H, W) into (P, Ho, Wo) by fixed-width row and column tables;
    ``gather`` where both have one tap."""
    dtype = rows[1].dtype
    lanes = lanes_for(dtype)
    planes, _, width = source_shape
    target_shape = (planes, rows[0].shape[0], cols[0].shape[0])
    # One-tap tables gather, unless the columns at least double: ``plane`` then makes each
    # input column's vector once for several outputs, and ran faster (measured: a
    # (8, 16, 256, 256) -> (512, 512) nearest resize 23.3 ms against 27.6; halving both
    # axes 15.2 against 12.7, and 1.24x larger columns 2.3 against 1.8).
    if rows[0].shape[1] == cols[0].shape[1] == 1 and target_shape[2] < 2 * width:
        return _gather_step(source_shape, target_shape, rows, cols)
    unroll_every_tap = simd_configuration()
    line_length = _scratch_line_length(width, lanes)
    threads = cpu_threads()
    jobs = planes * -(-rows[0].shape[0] // lanes)
    serial = runs_serially_for(math.prod(target_shape))  # Note [Small loops run serially]
    # A serial loop needs no spare iterations to spread over threads: an empty one cost
    # ~4 us of a tiny call's ~5 us launch (measured: (1, 1, 8, 8) -> 16x16 bilinear, 2 jobs
    # in 1,024 iterations), for the same bits.
    workers = jobs if serial else plane_workers(jobs, threads)
    tables = packed_tables(rows, cols)
    counts = (workers, rows[0].shape[0], rows[0].shape[1], cols[0].shape[0], cols[0].shape[1])

    def arguments() -> tuple[Any, ...]:
        return _SCRATCH.lines(dtype, threads, line_length, lanes), tables, counts

    shapes = (source_shape, target_shape, lanes)
    return _line_kernel_step(True, shapes, arguments, serial, unroll_every_tap)


def _gather_step(
    source_shape: tuple[int, int, int],
    target_shape: tuple[int, int, int],
    rows: tuple[np.ndarray, np.ndarray],
    cols: tuple[np.ndarray, np.ndarray],
) -> Step:
    tables = gather_tables(rows, cols)
    counts = target_shape[1:]
    # Nearest and nearest-exact resizes (not their adjoints) read one sample per output.
    copies = bool(
        np.all(rows[1] == 1)
        and np.all(cols[1] == 1)
        and np.all(rows[0] < source_shape[1])
        and np.all(cols[0] < source_shape[2])
    )
    serial = runs_serially_for(math.prod(target_shape))  # Note [Small loops run serially]

    lanes = lanes_for(rows[1].dtype)

    def run(source: Any, target: Any, kind: Any, launcher: Callable[..., Any]) -> None:
        stores = store_form(kind.address(target), target_shape, lanes)
        simd_gather(
            source.reshape(source_shape),
            result_view(target, stores, target_shape, lanes),
            tables,
            counts,
            copies,
            stores,
            serial,
            launcher,
        )

    return run


def _middle_step(source_shape: tuple[int, int, int], p: Pass) -> Step:
    """``middle``: (A, L, B) into (A, Lo, B) along the middle axis."""
    index, weight = p.taps.fixed_width_marked, p.taps.fixed_width[1]
    lanes = lanes_for(weight.dtype)
    before, _, after = source_shape
    target_shape = (before, p.taps.out_size, after)
    unroll_every_tap = simd_configuration()
    chunks = middle_chunks(after, lanes)
    serial = runs_serially(before * p.taps.out_size * chunks)

    shapes = (source_shape, target_shape, lanes)
    return _line_kernel_step(
        False, shapes, lambda: (index, weight, chunks), serial, unroll_every_tap
    )


def _line_kernel_step(
    plane: bool,
    shapes: tuple[tuple[int, int, int], tuple[int, int, int], int],
    arguments: Callable[[], tuple[Any, ...]],
    serial: bool,
    unroll_every_tap: bool,
) -> Step:
    """The step that runs ``simd_plane`` (``plane``) or ``simd_middle`` from a source of
    ``shapes[0]`` into a target of ``shapes[1]`` in the store form its address allows:
    ``kernel(lines, target view, *arguments(), stores, serial, unroll_every_tap, the
    lines' address, launcher)``."""
    source_shape, target_shape, lanes = shapes

    def run(source: Any, target: Any, kind: Any, launcher: Callable[..., Any]) -> None:
        stores = store_form(kind.address(target), target_shape, lanes)
        lines = source.reshape(source_shape)
        view = result_view(target, stores, target_shape, lanes)
        address = kind.address(lines)
        # The kernel looked up at each run, as the other steps do (tests wrap it).
        kernel: Callable[..., None] = simd_plane if plane else simd_middle
        kernel(lines, view, *arguments(), stores, serial, unroll_every_tap, address, launcher)

    return run


def _generic_step(p: Pass) -> Step:
    def run(source: Any, target: Any, kind: Any, launcher: Callable[..., Any]) -> None:
        launcher(
            resample_axis,
            source,
            target,
            p.axis,
            p.taps.index,
            p.taps.count,
            p.taps.weight,
            0,
            p.taps.width,
        )

    return run


def _axis_step(shape: tuple[int, ...], p: Pass) -> Step:
    """One separable pass: the SIMD kernels, or the generic one for tables too wide."""
    if not _fixed_width_ok(p):
        return _generic_step(p)
    before, after = math.prod(shape[: p.axis]), math.prod(shape[p.axis + 1 :])
    if after == 1:
        # The axis is the last one, or every axis after it has size 1: a plane of
        # ``before`` rows that keeps its rows.
        weight = p.taps.fixed_width[1]
        if not _plane_takes(shape[p.axis], weight.dtype):
            return _generic_step(p)
        return _plane_step(
            (1, before, shape[p.axis]),
            _identity_taps(before, weight.dtype.name),
            (p.taps.fixed_width_marked, weight),
        )
    return _middle_step((before, shape[p.axis], after), p)


def _groups(passes: Sequence[Pass], shape: tuple[int, ...]) -> list[tuple[Pass, ...]]:
    """Group the passes into kernel launches: the two trailing axes fused."""
    ndim = len(shape)
    plane = [p for p in passes if p.axis >= ndim - 2]
    if (
        len(plane) == 2
        and all(_fixed_width_ok(p) for p in plane)
        and _plane_takes(shape[-1], plane[0].taps.fixed_width[1].dtype)
    ):
        rows, cols = sorted(plane, key=lambda p: p.axis)
        others = [p for p in passes if p.axis < ndim - 2]
        shrinking = [(p,) for p in others if p.taps.out_size < p.taps.in_size]
        growing = [(p,) for p in others if p.taps.out_size >= p.taps.in_size]
        return [*shrinking, (rows, cols), *growing]
    return [(p,) for p in passes]


class PreparedCpuPasses:
    """A plan's launches on the CPU, for inputs of one shape."""

    def __init__(self, passes: Sequence[Pass], in_shape: tuple[int, ...]) -> None:
        # Held so that the cache key's id(passes) stays this plan's.
        self.passes = passes
        self.steps: list[tuple[Step, tuple[int, ...]]] = []
        # Kernels of the kernel set run natively, the others by Taichi (_compiled/).
        self._host_launches = NativeFirst(HostLaunches())
        self._launch = NativeFirst(launch)
        shape = tuple(in_shape)
        for group in _groups(passes, shape):
            if len(group) == 2:
                rows, cols = group
                planes = math.prod(shape[:-2])
                step = _plane_step(
                    (planes, shape[-2], shape[-1]),
                    (rows.taps.fixed_width_marked, rows.taps.fixed_width[1]),
                    (cols.taps.fixed_width_marked, cols.taps.fixed_width[1]),
                )
            else:
                step = _axis_step(shape, group[0])
            resized = list(shape)
            for p in group:
                resized[p.axis] = p.taps.out_size
            shape = tuple(resized)
            self.steps.append((step, shape))

    def run(
        self, source: Any, result: Any, kind: Any, launcher: Callable[..., Any] | None = None
    ) -> None:
        if launcher is None:
            # Intermediates are this call's own C-contiguous NumPy arrays.
            host = kind is NumpyKind and source.flags.c_contiguous and result.flags.c_contiguous
            launcher = self._host_launches if host else self._launch
        current = source
        last = len(self.steps) - 1
        for i, (step, shape) in enumerate(self.steps):
            target = result if i == last else kind.empty(source, shape)
            step(current, target, kind, launcher)
            current = target

    def record(self, source: np.ndarray, result: np.ndarray) -> RecordedLaunches | None:
        """Run on the C-contiguous ``source`` into ``result`` (NumPy arrays, or views of
        torch CPU tensors) and record the launches for replays on other arrays of the same
        shapes, dtype and address alignment (Note [Recorded launches] in
        _runtime/taichi.py); None where they could not all be recorded or would hold more
        than MAX_RECORDED_BYTES of intermediates and scratch."""
        recorder = LaunchRecorder()
        _SCRATCH.private = True
        try:
            self.run(source, result, NumpyKind, NativeFirst(recorder))
        finally:
            _SCRATCH.private = False
        if recorder.launches is None:
            return None
        bases = tuple((int(a.ctypes.data), int(a.nbytes)) for a in (source, result))
        recorded = RecordedLaunches(recorder, bases)
        return recorded if recorded.held_bytes <= MAX_RECORDED_BYTES else None


class _CpuCache:
    """Prepared plans, emptied when a new runtime starts (``ti.init``, ``ti.reset``, a
    forked child): their kernels were compiled for the old one."""

    def __init__(self) -> None:
        self.owner: tuple[int, int] = (-1, -1)
        self.prepared: OrderedDict[tuple[int, tuple[int, ...]], PreparedCpuPasses] = OrderedDict()

    def get(self, passes: Sequence[Pass], in_shape: tuple[int, ...]) -> PreparedCpuPasses:
        owner = (runtime_generation(), os.getpid())
        if owner != self.owner:
            self.prepared.clear()
            self.owner = owner
        key = (id(passes), in_shape)
        prepared = self.prepared.get(key)
        if prepared is None:
            prepared = self.prepared[key] = PreparedCpuPasses(passes, in_shape)
            while len(self.prepared) > MAX_PREPARED:
                self.prepared.popitem(last=False)
        else:
            self.prepared.move_to_end(key)
        return prepared


_CACHE = _CpuCache()


def prepared_on_cpu(passes: Sequence[Pass], in_shape: tuple[int, ...]) -> PreparedCpuPasses:
    """The prepared launches of ``passes`` (non-empty) for inputs of ``in_shape``."""
    return _CACHE.get(passes, in_shape)


def run_on_cpu(source: Any, passes: Sequence[Pass], result: Any, kind: Any) -> None:
    """Apply ``passes`` (non-empty) to ``source`` into ``result``: host memory that
    reshapes to views (NumPy arrays, torch CPU tensors)."""
    prepared_on_cpu(passes, tuple(source.shape)).run(source, result, kind)
