"""The execution engine: runs a plan's passes (``_plan.py``) as Taichi kernel launches.

On the CPU, host arrays (NumPy, torch) take the fast fixed-width kernels, with the two
trailing axes fused into one launch; everything else (GPU archs, Taichi ndarrays) takes the
generic one-thread-per-output kernel. Scratch buffers are of the source's kind, so device data
stays on the device. ``autodiff_backward`` runs Taichi's ``ti.ad`` reverse of the same passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._arrays import copy_array
from ._autodiff import Launch, differentiable, reverse
from ._dtypes import taichi_float
from ._plan import Pass, pass_shapes
from ._resample_kernels import (
    MAX_UNROLLED_TAPS,
    gather_2d,
    resample_2d,
    resample_axis,
    resample_axis_accumulate,
    resample_last_axis,
    resample_middle_axis,
)
from ._runtime import current_arch, ensure_initialized, require_autodiff

# Scratch lines of the fused 2-D kernel (see ``resample_2d``): enough parallel iterations for
# Taichi to split them between threads, small enough to stay a fraction of the output.
PLANE_WORKERS = 4096
# Taichi counts the iterations of a parallel loop in 32 bits.
MAX_LOOP_ITERATIONS = 2**31 - 1

Step = tuple[Pass, ...]


def _view3(array: Any, before: int, axis_len: int, after: int) -> Any:
    return array.reshape(before, axis_len, after)


def _fixed_width_ok(p: Pass) -> bool:
    return p.taps.fixed_width[1].shape[1] <= MAX_UNROLLED_TAPS


def _zero_empty_outputs(target: Any, passes: Sequence[Pass], kind: Any) -> None:
    """The fixed-width kernels compute ``0 * x`` for an empty window (see
    ``AxisTaps.fixed_width``), which is NaN for a non-finite ``x``; such outputs are 0."""
    for p in passes:
        if len(p.taps.empty_outputs):
            kind.zero_along(target, p.axis, p.taps.empty_outputs)


def _run_axis(current: Any, target: Any, p: Pass, fast: bool, kind: Any) -> None:
    """One separable pass: the fast fixed-width kernels on the CPU, else the generic one."""
    shape = tuple(current.shape)
    if not (fast and _fixed_width_ok(p)):
        resample_axis(current, target, p.axis, p.taps.index, p.taps.count, p.taps.weight)
        return
    index, weight = p.taps.fixed_width
    before, after = math.prod(shape[: p.axis]), math.prod(shape[p.axis + 1 :])
    if after == 1:
        # The axis is the last one, or every axis after it has size 1.
        resample_last_axis(
            _view3(current, before, 1, shape[p.axis]),
            _view3(target, before, 1, p.taps.out_size),
            index,
            weight,
            weight.shape[1],
        )
    else:
        resample_middle_axis(
            _view3(current, before, shape[p.axis], after),
            _view3(target, before, p.taps.out_size, after),
            index,
            weight,
            weight.shape[1],
        )
    _zero_empty_outputs(target, (p,), kind)


def _run_plane(current: Any, target: Any, rows: Pass, cols: Pass, kind: Any) -> None:
    """Both trailing axes in one fused CPU kernel."""
    shape = tuple(current.shape)
    planes = math.prod(shape[:-2])
    source = _view3(current, planes, shape[-2], shape[-1])
    result = _view3(target, planes, rows.taps.out_size, cols.taps.out_size)
    row_index, row_weight = rows.taps.fixed_width
    col_index, col_weight = cols.taps.fixed_width
    if rows.taps.is_gather and cols.taps.is_gather:
        gather_2d(source, result, row_index, col_index)
        return
    workers = max(1, min(planes * rows.taps.out_size, PLANE_WORKERS))
    scratch = np.empty((workers, 1, shape[-1]), dtype=row_weight.dtype)
    resample_2d(
        source,
        result,
        scratch,
        row_index,
        row_weight,
        row_weight.shape[1],
        col_index,
        col_weight,
        col_weight.shape[1],
    )
    _zero_empty_outputs(target, (rows, cols), kind)


def _steps(passes: Sequence[Pass], ndim: int, fast: bool) -> list[Step]:
    """Group the passes into kernel launches: the two trailing axes fused on the CPU."""
    plane = [p for p in passes if p.axis >= ndim - 2]
    if fast and len(plane) == 2 and all(_fixed_width_ok(p) for p in plane):
        rows, cols = sorted(plane, key=lambda p: p.axis)
        others = [p for p in passes if p.axis < ndim - 2]
        shrinking = [(p,) for p in others if p.taps.out_size < p.taps.in_size]
        growing = [(p,) for p in others if p.taps.out_size >= p.taps.in_size]
        return [*shrinking, (rows, cols), *growing]
    return [(p,) for p in passes]


def run_passes(source: Any, passes: Sequence[Pass], result: Any, kind: Any) -> Any:
    """Apply ``passes`` to ``source`` (of array kind ``kind``); the last launch writes into
    ``result``, which is returned."""
    if math.prod(result.shape) == 0:
        return result
    if not passes:
        kind.assign(result, source)
        return result
    ensure_initialized()
    # The fast kernels reshape their arguments and are written for CPU threads.
    fast = kind.reshapes and current_arch() == "cpu"
    steps = _steps(passes, len(source.shape), fast)
    current = source
    for i, step in enumerate(steps):
        shape = list(current.shape)
        for p in step:
            shape[p.axis] = p.taps.out_size
        target = result if i == len(steps) - 1 else kind.empty(source, shape)
        if len(step) == 2:
            _run_plane(current, target, *step, kind)
        else:
            _run_axis(current, target, step[0], fast, kind)
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
