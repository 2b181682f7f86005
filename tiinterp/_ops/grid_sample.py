"""``grid_sample`` and ``grid_sample_backward``: PyTorch's ``F.grid_sample`` semantics."""

from __future__ import annotations

import math
from typing import Any

from .._engine import grid_path
from .._kernels.grid import SamplerStatics
from .._rules import validate as v
from .._rules.filters import MODE_CODES, PADDING_CODES
from .._runtime.arrays import ArrayT
from .._runtime.dtypes import taichi_float
from .._runtime.session import (
    refuse_simd_configuration,
    serialized,
    start_taichi,
)


def prepare(
    input: Any,
    grid: Any,
    mode: Any,
    padding_mode: Any,
    align_corners: Any,
) -> tuple[Any, Any, Any, tuple[int, ...], SamplerStatics]:
    """The checked arrays, their kind, the output shape and the kernels' statics."""
    source, points, kind, out_shape, align_corners = v.grid_sample_arguments(
        input, grid, mode, padding_mode, align_corners
    )
    dtype = kind.dtype(source)
    statics = SamplerStatics(
        MODE_CODES[mode],
        PADDING_CODES[padding_mode],
        align_corners,
        taichi_float(dtype),
    )
    return source, points, kind, out_shape, statics


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
    start_taichi(kind.dtype(source).name, "input")
    if math.prod(shape) == 0:
        return result
    refuse_simd_configuration("grid_sample")
    grid_path.forward(source, points, result, kind, statics)
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
    return _gradients(
        ("input", "grid"), grad_output, input, grid, mode, padding_mode, align_corners, method, out
    )


@serialized
def grid_sample_gradient(
    wrt: str,
    grad_output: ArrayT,
    input: ArrayT,
    grid: ArrayT,
    mode: str,
    padding_mode: str,
    align_corners: bool | None,
) -> ArrayT:
    """One of :func:`grid_sample_backward`'s two gradients, ``wrt`` "input" or "grid", by
    the same adjoint, without computing the other (``tiinterp.torch``'s ops take each
    gradient on its own)."""
    (gradient,) = _gradients(
        (wrt,), grad_output, input, grid, mode, padding_mode, align_corners, "adjoint", None
    )
    return gradient


def _gradients(
    wrt: tuple[str, ...],
    grad_output: Any,
    input: Any,
    grid: Any,
    mode: Any,
    padding_mode: Any,
    align_corners: Any,
    method: Any,
    out: Any,
) -> tuple[Any, ...]:
    """The gradients named in ``wrt`` ("input", "grid"), in that order: checked,
    initialised, run (check, init, run)."""
    source, points, kind, shape, statics = prepare(input, grid, mode, padding_mode, align_corners)
    method = v.check_method(method)
    g = v.as_companion(grad_output, "grad_output", kind, source, shape)
    sources = [grad_output, input, grid, g, source, points]
    if out is None:
        # The input's gradient starts at 0: the adjoint accumulates into it.
        new = {"input": (kind.zeros, source.shape), "grid": (kind.empty, points.shape)}
        gradients = {name: new[name][0](source, tuple(new[name][1])) for name in wrt}
    else:
        gradients = _checked_out(out, kind, source, points, sources)
    start_taichi(kind.dtype(source).name, "input")
    if math.prod(shape) == 0:
        if "grid" in gradients:
            kind.fill_zeros(gradients["grid"])
        return tuple(gradients[name] for name in wrt)
    refuse_simd_configuration("grid_sample")
    grid_path.backward(
        g,
        source,
        points,
        kind,
        statics,
        method=method,
        grad_input=gradients.get("input"),
        grad_grid=gradients.get("grid"),
    )
    return tuple(gradients[name] for name in wrt)


def _checked_out(
    out: Any, kind: Any, source: Any, points: Any, sources: list[Any]
) -> dict[str, Any]:
    """The caller's ``out`` pair, checked, as ``{"input": ..., "grid": ...}``; the input's
    gradient zeroed (the adjoint accumulates into it)."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(
            "out: expected a pair (grad_input, grad_grid) of arrays, got "
            f"{type(out).__name__}"
            + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
        )
    grad_input = v.check_out(out[0], kind, source, tuple(source.shape), sources, "out[0]")
    grad_grid = v.check_out(out[1], kind, source, tuple(points.shape), [*sources, out[0]], "out[1]")
    kind.fill_zeros(grad_input)
    return {"input": grad_input, "grid": grad_grid}
