"""``grid_sample`` and ``grid_sample_backward``: PyTorch's ``F.grid_sample`` semantics."""
from __future__ import annotations

import math

import numpy as np
import taichi as ti

from . import _grid_kernels as k
from . import _validate as v
from ._arrays import NumpyKind, TorchKind
from ._kernels import copy_array
from ._runtime import ensure_initialized, require_autodiff, require_dtype_support, serialized
from ._validate import check_method

GRID_MODES = {"nearest": k.NEAREST, "bilinear": k.LINEAR, "bicubic": k.CUBIC}
PADDING_MODES = {"zeros": k.ZEROS, "border": k.BORDER, "reflection": k.REFLECTION}


_INPUT_LAYOUTS = {4: "(N, C, H, W)", 5: "(N, C, D, H, W)"}


def _check(input, grid, mode, padding_mode, align_corners):
    """The prepared input and grid, their kind, the output shape and the kernels' statics;
    the same checks as ``interpolate`` (``_validate``) for everything they share."""
    source, kind = v.as_float_array(input, "input", _INPUT_LAYOUTS)
    if kind not in (NumpyKind, TorchKind):
        raise TypeError("input: expected a numpy.ndarray or a torch.Tensor for grid_sample, "
                        f"got {type(input).__name__}")
    dims = len(source.shape) - 2
    points = v.as_companion(grid, "grid", kind, source)
    if (len(points.shape) != dims + 2 or points.shape[-1] != dims
            or points.shape[0] != source.shape[0]):
        expected = "(N, H_out, W_out, 2)" if dims == 2 else "(N, D_out, H_out, W_out, 3)"
        raise ValueError(f"grid: expected shape {expected} with N = {source.shape[0]} for input "
                         f"of shape {tuple(source.shape)}, got {tuple(points.shape)}")
    if not isinstance(mode, str) or mode not in GRID_MODES:
        raise ValueError(f"mode: expected one of {tuple(GRID_MODES)}, got {mode!r}")
    if mode == "bicubic" and dims == 3:
        raise ValueError("mode: expected 'nearest' or 'bilinear' for a 5-D input (bicubic "
                         "is 2-D only, as in PyTorch), got 'bicubic'")
    if not isinstance(padding_mode, str) or padding_mode not in PADDING_MODES:
        raise ValueError(f"padding_mode: expected one of {tuple(PADDING_MODES)}, "
                         f"got {padding_mode!r}")
    # None is PyTorch's default, which means False.
    align_corners = bool(v.check_flag(align_corners, "align_corners"))
    out_shape = tuple(source.shape[:2]) + tuple(points.shape[1:-1])
    v.check_element_count(out_shape, "output")
    dtype = kind.dtype(source)
    require_dtype_support(dtype.name, "input")
    # The last static is (dtype, apply PyTorch's NaN rules, backward pass); see
    # _grid_kernels._is_nan and _clip.
    statics = (GRID_MODES[mode], PADDING_MODES[padding_mode], align_corners,
               (ti.f32 if dtype == np.float32 else ti.f64, True, False))
    return source, points, kind, out_shape, statics


def _flat(points):
    return points.reshape(points.shape[0], -1, points.shape[-1])


@serialized
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False, *,
                out=None):
    """Sample ``input`` at the points of ``grid``, as PyTorch's ``F.grid_sample``.

    Args:
        input: ``(N, C, H, W)`` or ``(N, C, D, H, W)`` float32/float64 (NumPy or torch).
        grid: ``(N, H_out, W_out, 2)`` or ``(N, D_out, H_out, W_out, 3)``, same dtype, with
            ``grid[..., 0]`` = x (along W), ``grid[..., 1]`` = y, ``grid[..., 2]`` = z, in
            ``[-1, 1]`` from the first to the last sample (``align_corners=True``: their
            centres; ``False`` or ``None``: their outer edges). Points outside are padded.
        mode: ``"nearest"``, ``"bilinear"`` (trilinear for 5-D input) or ``"bicubic"`` (4-D).
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        out: optional preallocated C-contiguous ``(N, C, *grid.shape[1:-1])`` result,
            separate from ``input`` and ``grid``.

    A NaN grid coordinate follows PyTorch's reference (CUDA / 3-D CPU) rules: with zeros
    padding it samples nothing (0); with border or reflection padding it is clamped to the
    last sample; in bicubic mode the output is NaN.
    """
    source, points, kind, shape, statics = _check(input, grid, mode, padding_mode,
                                                  align_corners)
    result = v.check_out(out, kind, source, shape, [input, grid, source, points])
    if math.prod(shape) == 0:
        return result
    ensure_initialized()
    k.grid_sample_forward(source, _flat(points), result.reshape(shape[0], shape[1], -1),
                          *statics)
    return result


@serialized
def grid_sample_backward(grad_output, input, grid, mode="bilinear", padding_mode="zeros",
                         align_corners=False, *, method="adjoint"):
    """Gradients of :func:`grid_sample`: returns ``(grad_input, grad_grid)``.

    ``method="adjoint"``: hand-written, deterministic (each (n, c) plane is accumulated by
    one thread in a fixed order). ``method="autodiff"``: Taichi's ``ti.ad`` reverse of the
    forward kernel (CPU and CUDA only; it cannot differentiate the bit tests behind the NaN
    rules, so it is for finite grids). In ``nearest`` mode ``grad_grid`` is exactly 0.
    """
    source, points, kind, shape, statics = _check(input, grid, mode, padding_mode,
                                                  align_corners)
    method = check_method(method)
    g = v.as_companion(grad_output, "grad_output", kind, source, shape)
    grad_input = kind.zeros(source, tuple(source.shape))
    if math.prod(shape) == 0:
        return grad_input, kind.zeros(source, tuple(points.shape))
    ensure_initialized()
    flat_points, flat_g = _flat(points), g.reshape(shape[0], shape[1], -1)
    if method == "autodiff":
        return _autodiff(kind, source, flat_points, flat_g, tuple(points.shape), statics)
    grad_grid = kind.empty(source, tuple(flat_points.shape))
    backward = statics[:-1] + (statics[-1][:2] + (True,),)
    k.grid_sample_grad_input(flat_g, source, flat_points, grad_input, *backward)
    k.grid_sample_grad_grid(flat_g, source, flat_points, grad_grid, *backward)
    return grad_input, grad_grid.reshape(tuple(points.shape))


def _autodiff(kind, source, points, g, grid_shape, statics):
    require_autodiff()
    real = ti.f32 if kind.dtype(source) == np.float32 else ti.f64
    arrays = []
    for value in (source, points):
        array = ti.ndarray(real, tuple(value.shape), needs_grad=True)
        copy_array(value, array)
        array.grad.fill(0)
        arrays.append(array)
    result = ti.ndarray(real, tuple(g.shape), needs_grad=True)
    statics = statics[:-1] + ((statics[-1][0], False, False),)
    k.grid_sample_forward(arrays[0], arrays[1], result, *statics)
    copy_array(g, result.grad)
    k.grid_sample_forward.grad(arrays[0], arrays[1], result, *statics)
    grads = []
    for array, value in zip(arrays, (source, points)):
        grad = kind.empty(source, tuple(value.shape))
        copy_array(array.grad, grad)
        grads.append(grad)
    return grads[0], grads[1].reshape(grid_shape)
