"""``interpolate`` and ``interpolate_backward``: validation, planning and dispatch."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import taichi as ti

from . import _validate as v
from ._arrays import TaichiKind
from ._kernels import (MAX_UNROLLED_TAPS, copy_array, gather_2d, resample_2d, resample_axis,
                       resample_axis_accumulate, resample_last_axis, resample_middle_axis)
from ._runtime import (current_arch, ensure_initialized, require_autodiff, require_dtype_support,
                       serialized)
from ._taps import AxisTaps, axis_taps

# Scratch lines of the fused 2-D kernel (see ``resample_2d``): enough parallel iterations for
# Taichi to split them between threads, small enough to stay a fraction of the output.
PLANE_WORKERS = 4096
# Taichi counts the iterations of a parallel loop in 32 bits.
MAX_LOOP_ITERATIONS = 2**31 - 1


@dataclass(frozen=True)
class Pass:
    """Resample ``axis`` (of the full (N, C, ...) array) by ``taps``."""

    axis: int
    taps: AxisTaps


def _cheapest_order(shape: tuple[int, ...], passes: list[Pass]) -> tuple[Pass, ...]:
    """Order the separable passes so the fewest multiply-adds are done in total."""

    def cost(order):
        current, total = list(shape), 0
        for p in order:
            current[p.axis] = p.taps.out_size
            total += math.prod(current) * p.taps.weight.shape[1]
        return total

    return min(itertools.permutations(passes), key=cost, default=())


@lru_cache(maxsize=128)
def resize_passes(in_shape: tuple[int, ...], out_spatial: tuple[int, ...], mode: str,
                  align_corners: bool, coord_scales: tuple, dtype: str,
                  antialias: bool = False, for_adjoint: bool = False) -> tuple[Pass, ...]:
    """The forward's passes in execution order; identity axes are left out."""
    passes = []
    for axis, (n_in, n_out, factor) in enumerate(zip(in_shape[2:], out_spatial, coord_scales), 2):
        taps = axis_taps(n_in, n_out, mode, align_corners, factor, dtype, antialias,
                         len(in_shape) - 2, for_adjoint)
        if not taps.is_identity:
            passes.append(Pass(axis, taps))
    return _cheapest_order(in_shape, passes)


@lru_cache(maxsize=128)
def adjoint_passes(in_shape, out_spatial, mode, align_corners, coord_scales, dtype,
                   antialias=False):
    """The adjoint's passes: the forward's, each transposed, ordered for the gradient's shape."""
    unit_scale = all(factor in (None, 1.0) for factor in coord_scales) or align_corners
    if (mode == "bicubic" and not antialias and tuple(in_shape[2:]) == tuple(out_spatial)
            and unit_scale):
        # PyTorch's bicubic backward copies the gradient when no axis changes size (its
        # forward, numerically the identity there, still reads the zero-weight taps).
        return ()
    forward = resize_passes(in_shape, out_spatial, mode, align_corners, coord_scales, dtype,
                            antialias, for_adjoint=True)
    out_shape = in_shape[:2] + tuple(out_spatial)
    return _cheapest_order(out_shape, [Pass(p.axis, p.taps.transposed) for p in forward])


def _view3(array, before: int, axis_len: int, after: int):
    return array.reshape(before, axis_len, after)


def _fixed_width_ok(taps: AxisTaps) -> bool:
    return taps.fixed_width[1].shape[1] <= MAX_UNROLLED_TAPS


def _zero_empty_outputs(target, passes, kind):
    """The fixed-width kernels compute ``0 * x`` for an empty window (see
    ``AxisTaps.fixed_width``), which is NaN for a non-finite ``x``; such outputs are 0."""
    for p in passes:
        if len(p.taps.empty_outputs):
            kind.zero_along(target, p.axis, p.taps.empty_outputs)


def _run_axis(current, target, p: Pass, fast: bool, kind):
    """One separable pass: the fast fixed-width kernels on the CPU, else the generic one."""
    shape = tuple(current.shape)
    if not (fast and _fixed_width_ok(p.taps)):
        resample_axis(current, target, p.axis, p.taps.index, p.taps.count, p.taps.weight)
        return
    index, weight = p.taps.fixed_width
    before, after = math.prod(shape[:p.axis]), math.prod(shape[p.axis + 1:])
    if after == 1:
        # The axis is the last one, or every axis after it has size 1.
        resample_last_axis(_view3(current, before, 1, shape[p.axis]),
                           _view3(target, before, 1, p.taps.out_size),
                           index, weight, weight.shape[1])
    else:
        resample_middle_axis(_view3(current, before, shape[p.axis], after),
                             _view3(target, before, p.taps.out_size, after),
                             index, weight, weight.shape[1])
    _zero_empty_outputs(target, (p,), kind)


def _run_plane(current, target, rows: Pass, cols: Pass, kind):
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
    resample_2d(source, result, scratch, row_index, row_weight, row_weight.shape[1],
                col_index, col_weight, col_weight.shape[1])
    _zero_empty_outputs(target, (rows, cols), kind)


def _steps(passes, ndim: int, fast: bool):
    """Group the passes into kernel launches: the two trailing axes fused on the CPU."""
    plane = [p for p in passes if p.axis >= ndim - 2]
    if fast and len(plane) == 2 and all(_fixed_width_ok(p.taps) for p in plane):
        rows, cols = sorted(plane, key=lambda p: p.axis)
        others = [p for p in passes if p.axis < ndim - 2]
        shrinking = [p for p in others if p.taps.out_size < p.taps.in_size]
        growing = [p for p in others if p.taps.out_size >= p.taps.in_size]
        return ([(p,) for p in shrinking] + [(rows, cols)] + [(p,) for p in growing])
    return [(p,) for p in passes]


def _run_passes(source, passes, result, kind):
    """Apply ``passes`` to ``source``; the last launch writes into ``result``. Scratch
    buffers are of the source's kind, so device data stays on the device."""
    if math.prod(result.shape) == 0:
        return result
    if not passes:
        kind.assign(result, source)
        return result
    ensure_initialized()
    # The fast kernels reshape their arguments (Taichi ndarrays cannot be reshaped) and are
    # written for CPU threads; GPU archs get the one-thread-per-output generic kernel.
    fast = kind is not TaichiKind and current_arch() == "cpu"
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


def _autodiff_backward(grad_output, in_shape, passes, result, kind):
    """Taichi ``ti.ad`` reverse of the forward passes (ndarray autodiff: CPU and CUDA only)."""
    require_autodiff()
    if math.prod(result.shape) == 0:
        return result
    if not passes:
        kind.assign(result, grad_output)
        return result
    dtype = ti.f32 if kind.dtype(grad_output) == np.float32 else ti.f64
    shapes = [tuple(in_shape)]
    for p in passes:
        shape = list(shapes[-1])
        shape[p.axis] = p.taps.out_size
        shapes.append(tuple(shape))
    buffers = [ti.ndarray(dtype, shape, needs_grad=True) for shape in shapes]
    # The map is linear, so its gradient does not depend on the input values: zeros will do.
    for b in buffers:
        b.fill(0)
    launches = []  # (kernel arguments) per launch, each within Taichi's 32-bit loop range
    for p, source, target in zip(passes, buffers, buffers[1:]):
        total, taps = math.prod(target.shape), p.taps.weight.shape[1]
        chunk = max(1, MAX_LOOP_ITERATIONS // taps)
        for first in range(0, total, chunk):
            launches.append((source, target, p.axis, p.taps.index, p.taps.count,
                             p.taps.weight, first, min(chunk, total - first)))
    for args in launches:
        resample_axis_accumulate(*args)
    for b in buffers[:-1]:
        b.grad.fill(0)
    copy_array(grad_output, buffers[-1].grad)
    for args in reversed(launches):
        resample_axis_accumulate.grad(*args)
    copy_array(buffers[0].grad, result)
    return result


@serialized
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False, *, out=None):
    """Resize a batch of signals, images or volumes, with ``F.interpolate``'s arguments.

    Args:
        input: ``(N, C, W)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)`` float32 or float64
            NumPy array (or Taichi ndarray, or torch tensor). Never modified.
        size: output spatial shape, or one int for every axis. Exactly one of ``size`` and
            ``scale_factor`` is given.
        scale_factor: a positive number or one per spatial axis; ``out = floor(in * s)`` and
            (unless ``recompute_scale_factor``) sample spacing ``1 / s`` as in PyTorch.
        mode: ``"nearest"``, ``"nearest-exact"``, ``"area"`` (any dims); ``"linear"`` (1-D),
            ``"bilinear"`` (2-D), ``"trilinear"`` (3-D); ``"bicubic"`` (2-D); ``"lanczos3"``,
            ``"lanczos5"`` (any dims); ``"lanczos"`` (2-D, PyTorch's name, antialias only).
            Formulas in ``docs/semantics.md``.
        align_corners: for the interpolating modes. ``False``/``None``: half-pixel centres,
            ``src = (dst + 0.5) * in / out - 0.5``. ``True``: corner samples coincide,
            ``src = dst * (in - 1) / (out - 1)``. Must be ``None`` for nearest and area.
        recompute_scale_factor: with ``scale_factor``, ``True`` uses ``in / out`` spacing.
        antialias: widen the filter when downsampling (PIL's convention) for the linear
            family, bicubic (with Keys ``A = -0.5``) and lanczos.
        out: optional preallocated C-contiguous result of the output shape and input dtype.

    Returns:
        ``(N, C, *size)`` array of the input's kind and dtype (``out`` when given).
    """
    x, kind = v.as_float_array(input, "input")
    mode, align_corners, antialias = v.check_resize_options(mode, len(x.shape), align_corners,
                                                            antialias)
    in_shape = tuple(x.shape)
    out_spatial, coord_scales = v.output_geometry(in_shape[2:], size, scale_factor,
                                                  recompute_scale_factor)
    result = v.check_out(out, kind, x, in_shape[:2] + out_spatial, [input, x])
    require_dtype_support(kind.dtype(x).name, "input")
    passes = resize_passes(in_shape, out_spatial, mode, align_corners, coord_scales,
                           kind.dtype(x).name, antialias)
    return _run_passes(x, passes, result, kind)


@serialized
def interpolate_backward(grad_output, input_size, mode="nearest", align_corners=None,
                         scale_factor=None, recompute_scale_factor=None, antialias=False, *,
                         method="adjoint", out=None):
    """Gradient of :func:`interpolate` with respect to its input.

    Takes the same mode/coordinate arguments as the forward call it differentiates; the
    output size is read from ``grad_output.shape``, or, with ``scale_factor``, checked
    against ``floor(in * scale_factor)``.

    Args:
        grad_output: ``(N, C, H_out, W_out)`` float32 or float64 array.
        input_size: the forward input's full shape ``(N, C, H, W)``.
        method: ``"adjoint"`` (default): hand-written adjoint kernels, deterministic
            (bit-identical on every call, no atomics), every arch. ``"autodiff"``: Taichi's
            ``ti.ad`` reverse of the forward kernel (CPU and CUDA only).
        out: optional preallocated C-contiguous result of shape ``input_size``.

    Returns:
        ``(N, C, H, W)`` gradient, of ``grad_output``'s dtype (``out`` when given).
    """
    g, kind = v.as_float_array(grad_output, "grad_output")
    mode, align_corners, antialias = v.check_resize_options(mode, len(g.shape), align_corners,
                                                            antialias)
    method = v.check_method(method)
    in_shape = v.check_input_size(input_size, tuple(g.shape))
    out_spatial = tuple(g.shape[2:])
    if scale_factor is None:
        _, coord_scales = v.output_geometry(in_shape[2:], out_spatial, None, recompute_scale_factor)
    else:
        expected, coord_scales = v.output_geometry(in_shape[2:], None, scale_factor,
                                                   recompute_scale_factor)
        if expected != out_spatial:
            raise ValueError(
                f"grad_output: expected spatial shape {expected} (floor(input_size * "
                f"scale_factor)), got {out_spatial}")
    result = v.check_out(out, kind, g, in_shape, [grad_output, g])
    require_dtype_support(kind.dtype(g).name, "grad_output")
    key = (in_shape, out_spatial, mode, align_corners, coord_scales, kind.dtype(g).name,
           antialias)
    if method == "autodiff":
        return _autodiff_backward(g, in_shape, resize_passes(*key), result, kind)
    return _run_passes(g, adjoint_passes(*key), result, kind)
