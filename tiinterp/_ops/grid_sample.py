"""``grid_sample`` and ``grid_sample_backward``: PyTorch's ``F.grid_sample`` semantics."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .._engine.autodiff import differentiable, reverse
from .._kernels import grid as kernels
from .._rules import validate as v
from .._rules.filters import MODE_CODES, PADDING_CODES
from .._runtime.arrays import ArrayT, copy_array
from .._runtime.dtypes import taichi_float
from .._runtime.session import (
    ensure_initialized,
    refuse_simd_configuration,
    require_autodiff,
    require_dtype_support,
    serialized,
)


def prepare(
    input: Any,
    grid: Any,
    mode: Any,
    padding_mode: Any,
    align_corners: Any,
) -> tuple[Any, Any, Any, tuple[int, ...], kernels.SamplerStatics]:
    """The checked arrays, their kind, the output shape and the kernels' statics."""
    source, points, kind, out_shape, align_corners = v.grid_sample_arguments(
        input, grid, mode, padding_mode, align_corners
    )
    dtype = kind.dtype(source)
    require_dtype_support(dtype.name, "input")
    statics = kernels.SamplerStatics(
        MODE_CODES[mode],
        PADDING_CODES[padding_mode],
        align_corners,
        taichi_float(dtype),
    )
    return source, points, kind, out_shape, statics


def points_view(array: Any, kind: Any) -> Any:
    """``(N, *P, D)`` as ``(N, P, D)`` where the kind reshapes to a view; the kernels take
    either layout (see ``_kernels/grid.py``)."""
    return array.reshape(array.shape[0], -1, array.shape[-1]) if kind.reshapes else array


def point_count(points: Any) -> int:
    """Grid points per batch item."""
    return math.prod(points.shape[1:-1])


def values_view(array: Any, kind: Any) -> Any:
    """``(N, C, *P)`` as ``(N, C, P)`` where the kind reshapes to a view."""
    return array.reshape(array.shape[0], array.shape[1], -1) if kind.reshapes else array


@serialized
def grid_sample(
    input: ArrayT,
    grid: ArrayT,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = False,
    *,
    out: ArrayT | None = None,
) -> ArrayT:
    """Sample ``input`` at the points of ``grid``, as PyTorch's ``F.grid_sample``.

    Parameters
    ----------
    input : array of shape (N, C, H, W) or (N, C, D, H, W)
        float32 or float64: a NumPy array, a Taichi scalar ndarray or a torch tensor.
        Never modified.
    grid : array of shape (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3)
        The input's kind and dtype. ``grid[..., 0]`` is x (along W), ``grid[..., 1]`` y,
        ``grid[..., 2]`` z, each in ``[-1, 1]`` from the first sample to the last
        (``align_corners=True``: their centres; False or None: their outer edges). Points
        outside are padded.
    mode : {"bilinear", "nearest", "bicubic"}
        ``"bilinear"`` is trilinear for a 5-D input; ``"bicubic"`` (Keys ``A = -0.75``) is
        for 4-D input only; ``"nearest"`` rounds half to even.
    padding_mode : {"zeros", "border", "reflection"}
        What a point outside the input reads.
    align_corners : bool, optional
        As above; None means False (PyTorch's default).
    out : array, optional
        A preallocated C-contiguous ``(N, C, *grid.shape[1:-1])`` result, separate from
        ``input`` and ``grid``.

    Returns
    -------
    array of shape (N, C, *grid.shape[1:-1])
        Of the input's kind, dtype and device (``out`` when given).

    Raises
    ------
    TypeError
        Arrays of different kinds or dtypes, an unsupported kind or dtype, a non-bool
        ``align_corners``.
    ValueError
        A grid whose shape does not fit the input, an unknown mode or padding mode,
        ``"bicubic"`` with a 5-D input, more than 2^31 - 1 elements, an unusable ``out``.

    Notes
    -----
    A NaN grid coordinate follows PyTorch's reference (CUDA and 3-D CPU) rules: with zeros
    padding it samples nothing (0); with border or reflection padding the forward reads the
    last sample; in bicubic mode the output is NaN.

    Examples
    --------
    >>> import numpy as np
    >>> import tiinterp
    >>> x = np.array([[[[0.0, 1.0], [2.0, 3.0]]]])  # (1, 1, 2, 2)
    >>> grid = np.array([[[[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]]]])  # (1, 1, 3, 2): x, y
    >>> tiinterp.grid_sample(x, grid, align_corners=True)
    array([[[[0. , 1.5, 3. ]]]])
    """
    source, points, kind, shape, statics = prepare(input, grid, mode, padding_mode, align_corners)
    result = v.check_out(out, kind, source, shape, [input, grid, source, points])
    if math.prod(shape) == 0:
        return result
    ensure_initialized()
    refuse_simd_configuration("grid_sample")
    kernels.grid_sample_forward(
        source,
        points_view(points, kind),
        values_view(result, kind),
        point_count(points),
        statics,
    )
    return result


@serialized
def grid_sample_backward(
    grad_output: ArrayT,
    input: ArrayT,
    grid: ArrayT,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = False,
    *,
    method: str = "adjoint",
    out: tuple[ArrayT, ArrayT] | None = None,
) -> tuple[ArrayT, ArrayT]:
    """Gradients of :func:`grid_sample` with respect to its input and its grid.

    Parameters
    ----------
    grad_output : array of shape (N, C, *grid.shape[1:-1])
        The gradient of the loss with respect to ``grid_sample``'s output; the input's kind
        and dtype.
    input, grid, mode, padding_mode, align_corners
        As in the forward call (see :func:`grid_sample`).
    method : {"adjoint", "autodiff"}
        ``"adjoint"``: hand-written and deterministic, on every arch (the input's gradient
        is a gather: each input sample adds its terms in point order, no floating-point
        atomics; see docs/semantics.md). ``"autodiff"``: Taichi's ``ti.ad`` reverse of
        the forward kernel; CPU and CUDA only, and for finite grids (Taichi cannot
        differentiate the bit tests behind the NaN rules).
    out : pair of arrays, optional
        Preallocated C-contiguous ``(grad_input, grad_grid)`` of the input's and the grid's
        shapes, separate from every argument and from each other.

    Returns
    -------
    grad_input : array of the input's shape
    grad_grid : array of the grid's shape
        Exactly 0 in ``"nearest"`` mode. Both of the input's kind and dtype (``out`` when
        given).

    Raises
    ------
    TypeError, ValueError
        As :func:`grid_sample`, and for a ``grad_output`` of the wrong shape, kind or dtype,
        or an unusable ``out``.
    RuntimeError
        ``method="autodiff"`` where Taichi cannot differentiate ndarrays (on archs other
        than the CPU and CUDA).

    Examples
    --------
    >>> import numpy as np
    >>> import tiinterp
    >>> x = np.array([[[[0.0, 1.0], [2.0, 3.0]]]])
    >>> grid = np.array([[[[0.0, 0.0]]]])  # the centre, with align_corners=True
    >>> grad_input, grad_grid = tiinterp.grid_sample_backward(
    ...     np.ones((1, 1, 1, 1)), x, grid, align_corners=True)
    >>> grad_input
    array([[[[0.25, 0.25],
             [0.25, 0.25]]]])
    >>> grad_grid  # d out / d x = 1 / 2 * (1 - 0), d out / d y = 1 / 2 * (2 - 0)
    array([[[[0.5, 1. ]]]])
    """
    source, points, kind, shape, statics = prepare(input, grid, mode, padding_mode, align_corners)
    method = v.check_method(method)
    g = v.as_companion(grad_output, "grad_output", kind, source, shape)
    grad_input, grad_grid = _gradient_buffers(
        out, kind, source, points, [grad_output, input, grid, g, source, points]
    )
    if math.prod(shape) == 0:
        kind.fill_zeros(grad_grid)
        return grad_input, grad_grid
    ensure_initialized()
    refuse_simd_configuration("grid_sample")
    flat_points, flat_g = points_view(points, kind), values_view(g, kind)
    flat_grad_grid = points_view(grad_grid, kind)
    if method == "autodiff":
        _autodiff(source, flat_points, flat_g, grad_input, flat_grad_grid, statics)
        return grad_input, grad_grid
    backward = dataclasses.replace(statics, backward=True)
    count = point_count(points)
    kernels.grid_sample_grad_input(flat_g, source, flat_points, grad_input, count, backward)
    kernels.grid_sample_grad_grid(flat_g, source, flat_points, flat_grad_grid, count, backward)
    return grad_input, grad_grid


def _gradient_buffers(
    out: Any, kind: Any, source: Any, points: Any, sources: list[Any]
) -> tuple[Any, Any]:
    """``(grad_input, grad_grid)``: the caller's ``out`` pair, checked, or new arrays;
    ``grad_input`` zeroed (the adjoint accumulates into it)."""
    if out is None:
        return kind.zeros(source, tuple(source.shape)), kind.empty(source, tuple(points.shape))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(
            "out: expected a pair (grad_input, grad_grid) of arrays, got "
            f"{type(out).__name__}"
            + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
        )
    grad_input = v.check_out(out[0], kind, source, tuple(source.shape), sources, "out[0]")
    grad_grid = v.check_out(out[1], kind, source, tuple(points.shape), [*sources, out[0]], "out[1]")
    kind.fill_zeros(grad_input)
    return grad_input, grad_grid


def _autodiff(
    source: Any,
    points: Any,
    g: Any,
    grad_input: Any,
    grad_grid: Any,
    statics: kernels.SamplerStatics,
) -> None:
    """Taichi's ``ti.ad`` reverse of the forward kernel, into ``grad_input``/``grad_grid``."""
    require_autodiff()
    # Taichi's autodiff cannot differentiate the bit tests behind the NaN rules.
    statics = dataclasses.replace(statics, nan_rules=False, differentiated=True)
    inputs = [differentiable(statics.real, value.shape, value) for value in (source, points)]
    result = differentiable(statics.real, g.shape)
    source_d, points_d = inputs
    launches = kernels.forward_launches(source_d, points_d, result, point_count(points), statics)
    reverse(launches, result, g)
    for array, target in zip(inputs, (grad_input, grad_grid), strict=True):
        copy_array(array.grad, target)
