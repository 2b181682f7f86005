"""``grid_sample`` and ``grid_sample_backward``: PyTorch's ``F.grid_sample`` semantics."""
from __future__ import annotations

import math

import numpy as np
import taichi as ti

from . import _grid_kernels as k
from ._arrays import NumpyKind, TorchKind, float_dtype, kind_of
from ._kernels import copy_array
from ._runtime import ensure_initialized, require_autodiff, require_dtype_support
from ._validate import check_method

GRID_MODES = {"nearest": k.NEAREST, "bilinear": k.LINEAR, "bicubic": k.CUBIC}
PADDING_MODES = {"zeros": k.ZEROS, "border": k.BORDER, "reflection": k.REFLECTION}


def _check(input, grid, mode, padding_mode, align_corners):
    kind = kind_of(input, "input")
    if kind not in (NumpyKind, TorchKind):
        raise TypeError("input: expected a numpy.ndarray or a torch.Tensor for grid_sample, "
                        f"got {type(input).__name__}")
    if kind_of(grid, "grid") is not kind:
        raise TypeError(f"grid: expected the same kind of array as input ({kind.name}), "
                        f"got {type(grid).__name__}")
    dtype = float_dtype(kind, input, "input")
    if float_dtype(kind, grid, "grid") != dtype:
        raise TypeError(f"grid: expected dtype {dtype} like input, got {grid.dtype}")
    if input.ndim not in (4, 5):
        raise ValueError("input: expected a 4-D (N, C, H, W) or 5-D (N, C, D, H, W) array, "
                         f"got shape {tuple(input.shape)}")
    dims = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != dims or grid.shape[0] != input.shape[0]:
        expected = "(N, H_out, W_out, 2)" if dims == 2 else "(N, D_out, H_out, W_out, 3)"
        raise ValueError(f"grid: expected shape {expected} with N = {input.shape[0]} for input "
                         f"of shape {tuple(input.shape)}, got {tuple(grid.shape)}")
    if any(n < 1 for n in input.shape[2:]):
        raise ValueError(f"input: expected every spatial size >= 1, got shape {tuple(input.shape)}")
    if not isinstance(mode, str) or mode not in GRID_MODES:
        raise ValueError(f"mode: expected one of {tuple(GRID_MODES)}, got {mode!r}")
    if mode == "bicubic" and dims == 3:
        raise ValueError("mode: expected 'nearest' or 'bilinear' for a 5-D input (bicubic "
                         "is 2-D only, as in PyTorch), got 'bicubic'")
    if not isinstance(padding_mode, str) or padding_mode not in PADDING_MODES:
        raise ValueError(f"padding_mode: expected one of {tuple(PADDING_MODES)}, "
                         f"got {padding_mode!r}")
    if not isinstance(align_corners, (bool, np.bool_)):
        raise TypeError(f"align_corners: expected True or False, got {align_corners!r}")
    require_dtype_support(dtype.name, "input")
    ensure_initialized()
    # The last static is (dtype, apply PyTorch's NaN rules, backward pass); see
    # _grid_kernels._is_nan and _clip.
    statics = (GRID_MODES[mode], PADDING_MODES[padding_mode], bool(align_corners),
               (ti.f32 if dtype == np.float32 else ti.f64, True, False))
    return kind, dims, statics


def _flat_grid(kind, grid, dims):
    n = grid.shape[0]
    return kind.prepared(grid).reshape(n, -1, dims)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False, *,
                out=None):
    """Sample ``input`` at the points of ``grid``, as PyTorch's ``F.grid_sample``.

    Args:
        input: ``(N, C, H, W)`` or ``(N, C, D, H, W)`` float32/float64 (NumPy or torch).
        grid: ``(N, H_out, W_out, 2)`` or ``(N, D_out, H_out, W_out, 3)``, same dtype, with
            ``grid[..., 0]`` = x (along W), ``grid[..., 1]`` = y, ``grid[..., 2]`` = z, in
            ``[-1, 1]`` from the first to the last sample (``align_corners=True``: their
            centres; ``False``: their outer edges). Points outside are padded.
        mode: ``"nearest"``, ``"bilinear"`` (trilinear for 5-D input) or ``"bicubic"`` (4-D).
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        out: optional preallocated ``(N, C, *grid.shape[1:-1])`` result.

    A NaN grid coordinate follows PyTorch's reference (CUDA / 3-D CPU) rules: with zeros
    padding it samples nothing (0); with border or reflection padding it is clamped to the
    last sample; in bicubic mode the output is NaN.
    """
    kind, dims, statics = _check(input, grid, mode, padding_mode, align_corners)
    source = kind.prepared(input)
    points = _flat_grid(kind, grid, dims)
    shape = tuple(input.shape[:2]) + tuple(grid.shape[1:-1])
    if out is None:
        result = kind.empty(source, shape)
    else:
        if kind_of(out, "out") is not kind or tuple(out.shape) != shape or out.dtype != source.dtype:
            raise ValueError(f"out: expected a {kind.name} array of shape {shape} and dtype "
                             f"{source.dtype}, got {type(out).__name__} {tuple(out.shape)} {out.dtype}")
        result = out
    if math.prod(shape) == 0:
        return result
    k.grid_sample_forward(source, points, result.reshape(shape[0], shape[1], -1), *statics)
    return result


def grid_sample_backward(grad_output, input, grid, mode="bilinear", padding_mode="zeros",
                         align_corners=False, *, method="adjoint"):
    """Gradients of :func:`grid_sample`: returns ``(grad_input, grad_grid)``.

    ``method="adjoint"``: hand-written, deterministic (each (n, c) plane is accumulated by
    one thread in a fixed order). ``method="autodiff"``: Taichi's ``ti.ad`` reverse of the
    forward kernel (CPU and CUDA only; it cannot differentiate the bit tests behind the NaN
    rules, so it is for finite grids). In ``nearest`` mode ``grad_grid`` is exactly 0.
    """
    kind, dims, statics = _check(input, grid, mode, padding_mode, align_corners)
    method = check_method(method)
    shape = tuple(input.shape[:2]) + tuple(grid.shape[1:-1])
    if kind_of(grad_output, "grad_output") is not kind or tuple(grad_output.shape) != shape:
        raise ValueError(f"grad_output: expected a {kind.name} array of shape {shape}, got "
                         f"{type(grad_output).__name__} {tuple(grad_output.shape)}")
    source = kind.prepared(input)
    points = _flat_grid(kind, grid, dims)
    g = kind.prepared(grad_output).reshape(shape[0], shape[1], -1)
    if method == "autodiff":
        return _autodiff(kind, source, points, g, tuple(grid.shape), statics)
    grad_input = kind.zeros(source, tuple(source.shape))
    grad_grid = kind.empty(source, tuple(points.shape))
    backward = statics[:-1] + (statics[-1][:2] + (True,),)
    k.grid_sample_grad_input(g, source, points, grad_input, *backward)
    k.grid_sample_grad_grid(g, source, points, grad_grid, *backward)
    return grad_input, grad_grid.reshape(tuple(grid.shape))


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
