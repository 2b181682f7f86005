"""The execution engine: runs a plan's passes (``_rules/plan.py``) as Taichi kernel launches.

On the CPU every array kind takes the CPU path (``_engine/cpu_path.py``: SIMD kernels, the two
trailing axes fused into one launch; Taichi ndarrays as NumPy views of their own memory);
GPU archs take the device path (``_engine/device_path.py``): one fused gather per call, tables
resident on the device. ``autodiff_backward`` runs Taichi's ``ti.ad`` reverse of the same
passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._kernels.resample import resample_axis_accumulate
from .._rules.plan import Pass, pass_shapes
from .._runtime.arrays import NumpyKind, TaichiKind, aligned_empty, copy_array
from .._runtime.dtypes import taichi_float
from .._runtime.session import current_arch, ensure_initialized, require_autodiff
from .._runtime.taichi import host_view
from .autodiff import Launch, differentiable, reverse
from .cpu_path import MAX_LOOP_ITERATIONS, prepared_on_cpu, run_on_cpu

Passes = Sequence[Pass]


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
    elif on_cpu:
        run_on_cpu(source, passes, result, kind)
    else:
        from .device_path import run_on_device  # Note [Lazy kernel modules] in __init__.py

        run_on_device(source, passes, result, kind)
    return result


class CpuRepeat:
    """What repeats :func:`run_passes` on the CPU for C-contiguous NumPy inputs of one
    shape, into a given result or a new one (``_engine/repeat_calls.py``)."""

    __slots__ = ("_dtype", "_out_shape", "_prepared")

    def __init__(self, prepared: Any, out_shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._prepared, self._out_shape, self._dtype = prepared, out_shape, dtype

    def __call__(self, source: np.ndarray, result: np.ndarray | None = None) -> np.ndarray:
        if result is None:
            result = aligned_empty(self._out_shape, self._dtype)
        self._prepared.run(source, result, NumpyKind)
        return result

    def takes(self, out: Any, source: np.ndarray) -> bool:
        """Whether ``out`` passes every check the full call makes of an ``out=``: a
        writeable C-contiguous NumPy array of the result's shape and dtype whose memory is
        apart from ``source``'s (``np.may_share_memory`` compares bounds only: arrays it
        cannot tell apart take the full call, which checks exactly and says why)."""
        return (
            type(out) is np.ndarray
            and out.shape == self._out_shape
            and out.dtype == self._dtype
            and out.flags.c_contiguous
            and out.flags.writeable
            and not np.may_share_memory(out, source)
        )


def repeat_call(passes: Passes, source: Any, result: Any, kind: Any) -> Any:
    """What repeats :func:`run_passes` of ``passes`` for inputs like ``source`` into results
    like ``result`` (``_engine/repeat_calls.py``): on the CPU for NumPy arrays, on GPU archs for
    Taichi ndarrays and torch tensors where the plan is one launch; else None."""
    if kind is NumpyKind:
        return repeat_on_cpu(passes, source.shape, result)
    if not passes or current_arch() == "cpu":
        return None
    from .device_path import repeat_on_device  # Note [Lazy kernel modules] in __init__.py

    return repeat_on_device(passes, tuple(source.shape), tuple(result.shape), kind)


def repeat_on_cpu(passes: Passes, in_shape: Sequence[int], like: np.ndarray) -> CpuRepeat | None:
    """What repeats :func:`run_passes` for C-contiguous NumPy inputs of ``in_shape``, into
    a given result or a new one of ``like``'s shape and dtype, where the CPU path runs
    them; else None."""
    out_shape, dtype = tuple(like.shape), like.dtype
    if not passes or math.prod(out_shape) == 0 or current_arch() != "cpu":
        return None
    return CpuRepeat(prepared_on_cpu(passes, tuple(in_shape)), out_shape, dtype)


def pass_launches(
    passes: Passes, buffers: Sequence[Any], weights: Sequence[Any] | None = None
) -> list[Launch]:
    """The launches of ``resample_axis_accumulate`` that run pass ``i`` from ``buffers[i]``
    into ``buffers[i + 1]``, reading ``weights[i]`` (a Taichi ndarray, whose gradient
    ``ti.ad`` then gives) or else the pass's own table. Each launch stays within Taichi's
    32-bit loop range."""
    launches: list[Launch] = []
    for i, (p, source, target) in enumerate(zip(passes, buffers[:-1], buffers[1:], strict=True)):
        weight = p.taps.weight if weights is None else weights[i]
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
                        weight,
                        first,
                        min(chunk, total - first),
                    ),
                )
            )
    return launches


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
    reverse(pass_launches(passes, buffers), buffers[-1], grad_output)
    copy_array(buffers[0].grad, result)
    return result
