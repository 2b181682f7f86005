"""The execution engine: runs a plan's passes (``_plan.py``) as Taichi kernel launches.

On the CPU every array kind takes the fast fixed-width kernels, with the two trailing axes
fused into one launch (Taichi ndarrays as NumPy views of their own memory); GPU archs take
the device path (``_device_path.py``): one fused gather per call, tables resident on the
device. ``autodiff_backward`` runs Taichi's ``ti.ad`` reverse of the same passes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._arrays import NumpyKind, TaichiKind, aligned_empty, copy_array
from ._autodiff import Launch, differentiable, reverse
from ._device_path import run_on_device
from ._dtypes import taichi_float
from ._plan import Pass, pass_shapes
from ._resample_kernels import resample_axis, resample_axis_accumulate
from ._runtime import current_arch, ensure_initialized, require_autodiff
from ._simd_kernels import VECTOR_BYTES, lanes_for, simd_middle, simd_plane
from ._taichi import host_view, launch

# Taichi counts the iterations of a parallel loop in 32 bits.
MAX_LOOP_ITERATIONS = 2**31 - 1
# Tap loops of the SIMD kernels are unrolled; wider tables take the generic kernel.
MAX_UNROLLED_TAPS = 16
# Per-worker scratch lines of the SIMD ``plane`` kernel: Taichi's CPU backend hands a thread
# at least 512 consecutive iterations of a parallel loop, so about a thousand workers let
# the threads share the work; the lines are bounded in bytes for very wide images.
PLANE_WORKERS = 1024
MAX_SCRATCH_BYTES = 64 * 2**20

Step = tuple[Pass, ...]


def _view3(array: Any, before: int, axis_len: int, after: int) -> Any:
    return array.reshape(before, axis_len, after)


def _fixed_width_ok(p: Pass) -> bool:
    # ``plane`` indexes its two packed tables with 32-bit integers.
    width = p.taps.fixed_width[1].shape[1]
    return width <= MAX_UNROLLED_TAPS and p.taps.out_size * width <= MAX_LOOP_ITERATIONS // 2


class _Scratch:
    """One growing, aligned scratch buffer per dtype, reused by every call (calls are
    serialised): fresh pages would be faulted in on every call otherwise."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def lines(self, dtype: np.dtype, workers: int, width: int, lanes: int) -> np.ndarray:
        size = workers * width * lanes
        buffer = self._buffers.get(dtype.name)
        if buffer is None or buffer.size < size:
            buffer = aligned_empty((size,), dtype)
            self._buffers[dtype.name] = buffer
        return buffer[:size].reshape(workers, width, lanes)


_SCRATCH = _Scratch()


@functools.lru_cache(maxsize=4)
def _identity_taps(size: int, dtype_name: str) -> tuple[np.ndarray, np.ndarray]:
    index = np.arange(size, dtype=np.int32).reshape(size, 1)
    weight = np.ones((size, 1), dtype=dtype_name)
    return index, weight


def _vector_view(target: Any, kind: Any, lanes: int) -> Any | None:
    """``target`` (P, L, B) as (P, L, B / lanes, lanes) vectors where its address and row
    length allow aligned vector stores, else None."""
    width = target.shape[-1]
    if width % lanes or kind.address(target) % VECTOR_BYTES:
        return None
    return target.reshape(*target.shape[:-1], width // lanes, lanes)


def _simd_plane(
    source: Any,
    target: Any,
    rows: tuple[np.ndarray, np.ndarray],
    cols: tuple[np.ndarray, np.ndarray],
    kind: Any,
) -> None:
    """``plane``: ``source`` (P, H, W) into ``target`` (P, Ho, Wo) by fixed-width tables."""
    dtype = rows[1].dtype
    lanes = lanes_for(dtype)
    vector_target = _vector_view(target, kind, lanes)
    planes, width = source.shape[0], source.shape[2]
    jobs = planes * -(-rows[0].shape[0] // lanes)
    line_bytes = (width + 1) * lanes * dtype.itemsize
    workers = max(1, min(jobs, PLANE_WORKERS, MAX_SCRATCH_BYTES // line_bytes))
    simd_plane(
        source,
        target if vector_target is None else vector_target,
        _SCRATCH.lines(dtype, workers, width + 1, lanes),
        rows,
        cols,
        vector_target is not None,
    )


def _run_axis(current: Any, target: Any, p: Pass, kind: Any) -> None:
    """One separable pass: the SIMD kernels, or the generic one for tables too wide."""
    shape = tuple(current.shape)
    if not _fixed_width_ok(p):
        launch(resample_axis, current, target, p.axis, p.taps.index, p.taps.count, p.taps.weight)
        return
    weight = p.taps.fixed_width[1]
    before, after = math.prod(shape[: p.axis]), math.prod(shape[p.axis + 1 :])
    if after == 1:
        # The axis is the last one, or every axis after it has size 1: a plane of
        # ``before`` rows that keeps its rows.
        _simd_plane(
            _view3(current, 1, before, shape[p.axis]),
            _view3(target, 1, before, p.taps.out_size),
            _identity_taps(before, weight.dtype.name),
            (p.taps.fixed_width_marked, weight),
            kind,
        )
    else:
        result = _view3(target, before, p.taps.out_size, after)
        vector_result = _vector_view(result, kind, lanes_for(weight.dtype))
        simd_middle(
            _view3(current, before, shape[p.axis], after),
            result if vector_result is None else vector_result,
            p.taps.fixed_width_marked,
            weight,
            vector_result is not None,
        )


def _run_plane(current: Any, target: Any, rows: Pass, cols: Pass, kind: Any) -> None:
    """Both trailing axes in one fused CPU kernel."""
    shape = tuple(current.shape)
    planes = math.prod(shape[:-2])
    _simd_plane(
        _view3(current, planes, shape[-2], shape[-1]),
        _view3(target, planes, rows.taps.out_size, cols.taps.out_size),
        (rows.taps.fixed_width_marked, rows.taps.fixed_width[1]),
        (cols.taps.fixed_width_marked, cols.taps.fixed_width[1]),
        kind,
    )


def _steps(passes: Sequence[Pass], ndim: int) -> list[Step]:
    """Group the passes into kernel launches: the two trailing axes fused."""
    plane = [p for p in passes if p.axis >= ndim - 2]
    if len(plane) == 2 and all(_fixed_width_ok(p) for p in plane):
        rows, cols = sorted(plane, key=lambda p: p.axis)
        others = [p for p in passes if p.axis < ndim - 2]
        shrinking = [(p,) for p in others if p.taps.out_size < p.taps.in_size]
        growing = [(p,) for p in others if p.taps.out_size >= p.taps.in_size]
        return [*shrinking, (rows, cols), *growing]
    return [(p,) for p in passes]


def _on_host(array: Any) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    return host_view(array, TaichiKind.dtype(array))


def run_passes(source: Any, passes: Sequence[Pass], result: Any, kind: Any) -> Any:
    """Apply ``passes`` to ``source`` (of array kind ``kind``); the last launch writes into
    ``result``, which is returned."""
    if math.prod(result.shape) == 0:
        return result
    ensure_initialized()
    on_cpu = current_arch() == "cpu"
    if on_cpu and kind is TaichiKind:
        # Taichi ndarrays, or NumPy views of Taichi data (``_elements.host_flat_view``).
        run_passes(_on_host(source), passes, _on_host(result), NumpyKind)
        return result
    if not passes:
        kind.assign(result, source)
        return result
    if not on_cpu:
        run_on_device(source, passes, result, kind)
        return result
    steps = _steps(passes, len(source.shape))
    current = source
    for i, step in enumerate(steps):
        shape = list(current.shape)
        for p in step:
            shape[p.axis] = p.taps.out_size
        target = result if i == len(steps) - 1 else kind.empty(source, shape)
        if len(step) == 2:
            _run_plane(current, target, *step, kind)
        else:
            _run_axis(current, target, step[0], kind)
        current = target
    return result


def autodiff_backward(
    grad_output: Any, in_shape: Sequence[int], passes: Sequence[Pass], result: Any, kind: Any
) -> Any:
    """Taichi's ``ti.ad`` reverse of the forward ``passes`` (ndarray autodiff: CPU and CUDA
    only), written into ``result``."""
    require_autodiff()
    if math.prod(result.shape) == 0:
        return result
    if not passes:
        kind.assign(result, grad_output)
        return result
    dtype = taichi_float(kind.dtype(grad_output))
    # The map is linear, so its gradient does not depend on the input values: zeros will do.
    buffers = [differentiable(dtype, shape) for shape in pass_shapes(in_shape, passes)]
    # buffers[i] -> buffers[i + 1] is pass i.
    launches: list[Launch] = []
    for p, source, target in zip(passes, buffers[:-1], buffers[1:], strict=True):
        # Each launch stays within Taichi's 32-bit loop range.
        total = math.prod(target.shape)
        chunk = max(1, MAX_LOOP_ITERATIONS // p.taps.width)
        for first in range(0, total, chunk):
            launches.append(
                (
                    resample_axis_accumulate,
                    (
                        source,
                        target,
                        p.axis,
                        p.taps.index,
                        p.taps.count,
                        p.taps.weight,
                        first,
                        min(chunk, total - first),
                    ),
                )
            )
    reverse(launches, buffers[-1], grad_output)
    copy_array(buffers[0].grad, result)
    return result
