"""``scale_and_translate``: JAX's ``jax.image.scale_and_translate``, differentiable with
respect to the image and to the scale and the translation.

Per spatial axis of ``m`` input and ``n`` output samples, output ``o`` reads the input at
``sample_f = (o + 0.5) / scale - translation / scale - 0.5`` (JAX's order of operations),
input ``j`` weighing ``k(|sample_f - j| / kscale)``, ``kscale = max(1 / scale, 1)`` with
antialias and 1 without; the weights are divided by their sum (0 where the sum is within
1000 float32 epsilons of 0), and an output whose ``sample_f`` lies outside ``[-0.5, m -
0.5]`` is 0. ``method="area"`` weighs input ``j`` by the overlap of ``[j, j + 1]`` with the
output's footprint ``[(o - t) / s, (o + 1 - t) / s]``; ``"cubic-pytorch"`` without
antialias reads past the edges as the edge sample instead of masking (docs/semantics.md).

Each axis is a tap table (an ``AxisTaps``, ``_rules/taps.py``) built on the host for the
call's scale and translation, so the forward and the image's gradient are the resize
engine's passes and their transposes. The gradient with respect to a parameter of axis
``d`` is ``<g, (A_1 x ... x dA_d x ... ) x>``: the same passes with axis ``d``'s table
replaced by its weights' derivative (the same taps), written out from JAX's formulas
(``_rules/scale_translate.py``), including JAX's conventions where they are not smooth:
``|x|`` has slope 1 at 0 and ``max``/``min`` split the slope evenly at a tie, as
``jax.grad`` gives them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._engine.passes import run_passes
from .._rules.plan import Pass, cheapest_order
from .._rules.scale_translate import CheckedCall, check_call
from .._rules.taps import AxisTaps
from .._runtime.arrays import NumpyKind
from .._runtime.session import start_taichi


def _lines(array: np.ndarray, call: CheckedCall, spatial: tuple[int, ...]) -> np.ndarray:
    """``array`` as ``(1, lines, *spatial)``, C-contiguous (a copy where it must be)."""
    moved = np.transpose(array, call.order)
    return np.ascontiguousarray(moved).reshape(1, call.lines, *spatial)


def _from_lines(lines: np.ndarray, call: CheckedCall, shape: tuple[int, ...]) -> np.ndarray:
    moved_shape = tuple(shape[a] for a in call.order)
    return np.transpose(lines.reshape(moved_shape), np.argsort(call.order))


def _run(source: np.ndarray, tables: Sequence[AxisTaps], out_spatial: tuple[int, ...]):
    passes = [Pass(axis, taps) for axis, taps in enumerate(tables, 2) if not taps.is_identity]
    result = np.empty((1, source.shape[1], *out_spatial), dtype=source.dtype)
    return run_passes(source, cheapest_order(source.shape, passes), result, NumpyKind)


def scale_and_translate(
    image: np.ndarray,
    shape: Sequence[int],
    spatial_dims: Sequence[int],
    scale: Any,
    translation: Any,
    method: str = "linear",
    antialias: bool = True,
) -> np.ndarray:
    """Scale and translate an image, as ``jax.image.scale_and_translate``.

    Along each axis ``d = spatial_dims[i]``, output sample ``o`` reads the input at the
    index coordinate ``(o + 0.5 - translation[i]) / scale[i] - 0.5`` (pixel centres, as
    every mode of tiinterp), so ``scale > 1`` magnifies and ``translation`` is in output
    samples. The filter is JAX's for ``method``; with ``antialias`` it is stretched by
    ``1 / scale`` where ``scale < 1``. Each output's weights are divided by their sum, and
    an output whose coordinate lies more than half a sample outside the input is 0 (JAX's
    rules; ``docs/semantics.md`` gives the formulas). Differentiable with respect to
    ``image``, ``scale`` and ``translation``: see :func:`scale_and_translate_backward`.

    Parameters
    ----------
    image : numpy.ndarray
        float32 or float64, any number of axes. Never modified.
    shape : sequence of int
        The output's shape: one size per axis of ``image``, the same as ``image``'s on the
        axes that are not spatial, at least 1 on the spatial ones.
    spatial_dims : sequence of int
        The 1 to 3 axes to resample (negative values count from the end).
    scale, translation : sequence of float
        One per spatial axis, in the order of ``spatial_dims``; scales from 1e-15 to 1e15,
        translations from -1e15 to 1e15 (past that a coordinate keeps no fraction).
    method : {"linear", "cubic", "cubic-pytorch", "lanczos3", "lanczos5", "area"}
        JAX's methods and names (``"bilinear"``, ``"trilinear"`` and ``"triangle"`` for
        ``"linear"``; ``"bicubic"``, ``"tricubic"`` for ``"cubic"``, Keys' with ``A =
        -0.5``; ``"bicubic-pytorch"`` for ``"cubic-pytorch"``, ``A = -0.75`` with the edge
        samples repeated, which with ``antialias=True`` is ``"cubic"``, as in JAX).
    antialias : bool
        Stretch the filter when shrinking (default True, as in JAX).

    Returns
    -------
    numpy.ndarray
        Of ``shape``, in ``image``'s dtype.

    Raises
    ------
    TypeError, ValueError
        An argument of the wrong kind or value; the message says which and what it expects.

    Examples
    --------
    >>> import numpy as np
    >>> import tiinterp
    >>> row = np.array([[0.0, 1.0, 2.0, 3.0]])
    >>> tiinterp.scale_and_translate(row, (1, 4), [1], [1.0], [1.0])  # one sample right
    array([[0., 0., 1., 2.]])
    """
    call = check_call(image, shape, spatial_dims, scale, translation, method, antialias)
    start_taichi(image.dtype.name, "image")
    if math.prod(call.out_shape) == 0:
        return np.zeros(call.out_shape, dtype=image.dtype)
    source = _lines(image, call, call.in_spatial)
    result = _run(source, [forward for forward, _, _ in call.tables], call.out_spatial)
    return _from_lines(result, call, call.out_shape)


def _autodiff(
    gradient: np.ndarray, source: np.ndarray, call: CheckedCall, image: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from .._runtime.session import require_autodiff
    from .scale_translate_autodiff import autodiff_gradients  # Note [Lazy kernel modules]

    require_autodiff()
    grad_lines, grad_scale, grad_translation = autodiff_gradients(
        gradient,
        source,
        call.in_spatial,
        call.out_spatial,
        call.scales,
        call.translations,
        call.geometry.method,
        call.geometry.antialias,
    )
    return (
        _from_lines(grad_lines, call, image.shape),
        grad_scale.astype(image.dtype),
        grad_translation.astype(image.dtype),
    )


def scale_and_translate_backward(
    grad_output: np.ndarray,
    image: np.ndarray,
    spatial_dims: Sequence[int],
    scale: Any,
    translation: Any,
    method: str = "linear",
    antialias: bool = True,
    *,
    gradients: str = "adjoint",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of :func:`scale_and_translate` with respect to ``image``, ``scale`` and
    ``translation``, given the gradient of the loss with respect to its output.

    Hand-written and deterministic: the image's gradient is the transposed resampling
    (gathered, no atomics); the gradient with respect to a parameter of one axis is
    ``sum(grad_output * y')``, ``y'`` the forward with that axis's weights replaced by their
    derivative with respect to the parameter (JAX's slopes where the weights are not smooth:
    ``|x|`` has slope 1 at 0, ``max`` and ``min`` split it evenly at a tie).

    Parameters
    ----------
    grad_output : numpy.ndarray
        Of the forward's output shape and ``image``'s dtype. Never modified.
    image, spatial_dims, scale, translation, method, antialias
        As in the forward call.
    gradients : {"adjoint", "autodiff"}
        ``"adjoint"`` (default): the hand-written gradients above, on every arch.
        ``"autodiff"``: Taichi's ``ti.ad`` through kernels that compute the weights from the
        scale and the translation and through the resampling, a second derivation to check
        the first against (where Taichi differentiates ndarrays: CPU and CUDA; atomic sums,
        so not bit-for-bit repeatable, and slower). At the points where JAX's weights are
        not smooth the two may take different one-sided slopes.

    Returns
    -------
    tuple of numpy.ndarray
        ``(grad_image, grad_scale, grad_translation)``: ``image``'s shape, then one value
        per spatial axis, all in ``image``'s dtype.

    Raises
    ------
    TypeError, ValueError
        As :func:`scale_and_translate`; and ``grad_output`` not a NumPy array of
        ``image``'s dtype, or not of a shape the forward can give.

    Examples
    --------
    The loss ``sum(y)`` of a row shifted half a sample to the right: moving it further
    right drops 3 levels per sample (the last one leaves, every other output falls by 1).

    >>> import numpy as np
    >>> import tiinterp
    >>> row = np.array([[0.0, 1.0, 2.0, 3.0]])
    >>> tiinterp.scale_and_translate(row, (1, 4), [1], [1.0], [0.5])
    array([[0. , 0.5, 1.5, 2.5]])
    >>> _, grad_scale, grad_translation = tiinterp.scale_and_translate_backward(
    ...     np.ones((1, 4)), row, [1], [1.0], [0.5]
    ... )
    >>> grad_translation
    array([-3.])
    """
    if not isinstance(grad_output, np.ndarray):
        raise TypeError(f"grad_output: expected a NumPy array, got {type(grad_output).__name__}")
    if gradients not in ("adjoint", "autodiff"):
        raise ValueError(f"gradients: expected 'adjoint' or 'autodiff', got {gradients!r}")
    call = check_call(image, grad_output.shape, spatial_dims, scale, translation, method, antialias)
    if grad_output.dtype != image.dtype:
        raise TypeError(
            f"grad_output: expected {image.dtype} (image's dtype), got {grad_output.dtype}"
        )
    start_taichi(image.dtype.name, "image")
    dims = len(call.in_spatial)
    grad_scale = np.zeros(dims, dtype=image.dtype)
    grad_translation = np.zeros(dims, dtype=image.dtype)
    if math.prod(call.out_shape) == 0 or image.size == 0:
        return np.zeros_like(image), grad_scale, grad_translation
    gradient = _lines(grad_output, call, call.out_spatial)
    source = _lines(image, call, call.in_spatial)
    if gradients == "autodiff":
        return _autodiff(gradient, source, call, image)
    transposed = [forward.transposed for forward, _, _ in call.tables]
    grad_image = _from_lines(_run(gradient, transposed, call.in_spatial), call, image.shape)
    flat_gradient = gradient.reshape(-1).astype(np.float64)
    for axis in range(dims):
        for slot, target in ((1, grad_scale), (2, grad_translation)):
            tables = [t[slot] if i == axis else t[0] for i, t in enumerate(call.tables)]
            derivative = _run(source, tables, call.out_spatial)
            target[axis] = np.dot(flat_gradient, derivative.reshape(-1).astype(np.float64))
    return grad_image, grad_scale, grad_translation
