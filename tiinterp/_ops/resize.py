"""``interpolate`` and ``interpolate_backward``: checked once by ``_rules/validate.py``
(``forward_call``, ``backward_call``), planned by ``_rules/plan.py``, run (and remembered,
for repeats) by ``_engine/passes.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._engine.passes import RepeatCache, autodiff_backward, run_call, run_passes
from .._rules import validate as v
from .._rules.plan import adjoint_passes, forward_passes
from .._runtime.arrays import ArrayT
from .._runtime.session import serialized, start_taichi


@serialized
def interpolate(
    input: ArrayT,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
    *,
    layout: str | None = None,
    out: ArrayT | None = None,
) -> ArrayT:
    """Resize a batch of signals, images or volumes, with ``F.interpolate``'s arguments.

    Each spatial axis is resampled by the mode's 1-D filter, one axis per pass. Coordinates
    and filters are PyTorch's (JAX's for lanczos); the numeric contract of every mode is
    ``docs/semantics.md``.

    Parameters
    ----------
    input : array of shape (N, C, W), (N, C, H, W) or (N, C, D, H, W), or as ``layout`` says
        float32 or float64: a NumPy array (any strides or byte order), a Taichi scalar
        ndarray or a torch tensor. Never modified.
    size : int or sequence of int, optional
        The output's spatial shape, or one int for every spatial axis. Exactly one of
        ``size`` and ``scale_factor`` is given.
    scale_factor : float or sequence of float, optional
        Positive, one or one per spatial axis: ``out = floor(in * scale_factor)``, with
        samples spaced ``1 / scale_factor`` apart (as PyTorch) unless
        ``recompute_scale_factor`` is True.
    mode : str
        A name in :data:`tiinterp.MODES`: ``"nearest"``, ``"bilinear"``, ``"bicubic"``,
        ``"lanczos3"``, ... Each mode's spatial axes, filter and reference are listed in
        ``docs/guide/modes.md`` (``"bilinear"`` takes 2 axes, ``"linear"`` 1, ``"trilinear"``
        3; ``"lanczos"``, PyTorch's name for antialiased lanczos3, needs ``antialias=True``).
    align_corners : bool, optional
        For the interpolating modes (linear family, bicubic, lanczos). False or None:
        half-pixel centres, ``src = (dst + 0.5) * in / out - 0.5``. True: the corner
        samples coincide, ``src = dst * (in - 1) / (out - 1)``. Must be None for the
        nearest modes and area.
    recompute_scale_factor : bool, optional
        With ``scale_factor``: True spaces the samples ``in / out`` apart.
    antialias : bool
        Widen the filter when downsampling (PIL's convention), for the linear family,
        bicubic (then Keys ``A = -0.5``) and lanczos; not with ``align_corners=True``.
    layout : str, optional
        The input's axes, one letter each (``N`` batch, ``C`` channels, ``D``, ``H``,
        ``W`` spatial). None (the default): channels first, ``(N, C, *spatial)``, the
        spatial axes counted from the input's rank. Channels first, named: ``"NCW"``,
        ``"NCHW"``, ``"NCDHW"``. Channels last: ``"NWC"``, ``"NHWC"``, ``"NDHWC"``.
        Spatial last: ``"...W"``, ``"...HW"``, ``"...DHW"``, the spatial axes after any
        number (zero or more) of leading axes, each resized alike (``"...HW"`` takes a
        plain ``(H, W)`` image). The input's rank must fit the layout; ``size`` and
        ``scale_factor`` count its spatial axes; the result and ``out`` are in the same
        layout. Layouts other than channels first take NumPy arrays and torch tensors
        only (a Taichi ndarray: :func:`interpolate_into`).
    out : array, optional
        A preallocated C-contiguous result of the output's shape (in ``layout``), the
        input's dtype and kind, not overlapping the input.

    Returns
    -------
    array of shape (N, C, *out_spatial), or the output's shape in ``layout``
        Of the input's kind, dtype and device, C-contiguous (``out`` when given).

    Raises
    ------
    TypeError
        An argument of the wrong type: an input that is not a float32/float64 array of a
        supported kind, a non-integer size, a non-bool flag, float64 on a device without
        64-bit floats.
    ValueError
        A value out of range: an input other than 3-D, 4-D or 5-D (or of a rank that
        ``layout`` does not have), a ``layout`` not in the list, a mode that does not
        take that many spatial axes, both or neither of ``size`` and ``scale_factor``, an
        empty output axis, ``align_corners`` or ``antialias`` with a mode that does not
        take it, more than 2^31 - 1 elements, an unusable ``out``.

    Examples
    --------
    >>> import numpy as np
    >>> import tiinterp
    >>> x = np.array([[[[0.0, 1.0], [2.0, 3.0]]]])  # (N, C, H, W) = (1, 1, 2, 2)
    >>> tiinterp.interpolate(x, size=3, mode="bilinear", align_corners=True)[0, 0]
    array([[0. , 0.5, 1. ],
           [1. , 1.5, 2. ],
           [2. , 2.5, 3. ]])
    >>> tiinterp.interpolate(x, scale_factor=2, mode="nearest").shape
    (1, 1, 4, 4)
    >>> images = np.zeros((2, 8, 8, 3), np.float32)  # (N, H, W, C)
    >>> tiinterp.interpolate(images, size=(4, 6), mode="bilinear", layout="NHWC").shape
    (2, 4, 6, 3)
    >>> tiinterp.interpolate(np.zeros((8, 8)), size=16, mode="bicubic", layout="...HW").shape
    (16, 16)
    """
    options = (size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    key, repeated = _repeated(input, ("forward", *options), out, layout is None)
    if repeated is not None:
        return repeated
    call = v.forward_call(input, options, layout, out)
    start_taichi(call.spec.dtype, "input")
    passes = forward_passes(call.spec)
    if call.bound is None:
        return run_call(_REPEATS, key, passes, call.source, call.result, call.out_shape, call.kind)
    target = call.target()
    run_passes(call.source, passes, target, call.kind)
    return call.finish(target)


@serialized
def interpolate_backward(
    grad_output: ArrayT,
    input_size: Sequence[int],
    *,
    mode: str = "nearest",
    align_corners: bool | None = None,
    scale_factor: float | Sequence[float] | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
    method: str = "adjoint",
    layout: str | None = None,
    out: ArrayT | None = None,
) -> ArrayT:
    """Gradient of :func:`interpolate` with respect to its input.

    Give the forward call's mode and coordinate arguments (by keyword); the output size is
    read from ``grad_output.shape``, or, with ``scale_factor``, checked against
    ``floor(in * scale_factor)``.

    Parameters
    ----------
    grad_output : array of shape (N, C, *out_spatial), or as ``layout`` says
        float32 or float64, of any kind :func:`interpolate` takes: the gradient of the loss
        with respect to the forward's output. Never modified.
    input_size : sequence of int
        The forward input's full shape ``(N, C, *in_spatial)``, or in ``layout``: e.g.
        ``(N, H, W, C)`` for ``"NHWC"``, ``(*leading, H, W)`` for ``"...HW"`` with the
        leading axes of ``grad_output``.
    mode, align_corners, scale_factor, recompute_scale_factor, antialias
        As in the forward call (see :func:`interpolate`).
    method : {"adjoint", "autodiff"}
        ``"adjoint"``: the hand-written adjoint, deterministic (bit-identical on every
        call, no atomics) on every arch. ``"autodiff"``: Taichi's ``ti.ad`` reverse of the
        forward kernel; CPU and CUDA only.
    layout : str, optional
        The axes of ``grad_output``, ``input_size`` and the result, as in the forward
        call (see :func:`interpolate`): None (channels first, the default), ``"NCW"``,
        ``"NCHW"``, ``"NCDHW"``, ``"NWC"``, ``"NHWC"``, ``"NDHWC"``, ``"...W"``,
        ``"...HW"`` or ``"...DHW"``.
    out : array, optional
        A preallocated C-contiguous result of shape ``input_size``.

    Returns
    -------
    array of shape input_size
        The gradient with respect to the input, of ``grad_output``'s kind and dtype,
        C-contiguous and in ``layout`` (``out`` when given).

    Raises
    ------
    TypeError
        As :func:`interpolate`, and for an ``input_size`` that is not a sequence.
    ValueError
        As :func:`interpolate`, and for an ``input_size`` whose (N, C) (or leading axes)
        differ from ``grad_output``'s, or a ``grad_output`` shape that ``scale_factor``
        does not give.
    RuntimeError
        ``method="autodiff"`` on an arch where Taichi cannot differentiate ndarrays.

    Examples
    --------
    >>> import numpy as np
    >>> import tiinterp
    >>> g = np.ones((1, 1, 4))  # d loss / d y for y = interpolate(x, size=4), x of width 2
    >>> tiinterp.interpolate_backward(g, (1, 1, 2), mode="linear")
    array([[[2., 2.]]])
    """
    options = (mode, align_corners, scale_factor, recompute_scale_factor, antialias, method)
    remembered = layout is None and method == "adjoint"
    key, repeated = _repeated(grad_output, ("backward", input_size, *options), out, remembered)
    if repeated is not None:
        return repeated
    call = v.backward_call(grad_output, input_size, options, layout, out)
    start_taichi(call.spec.dtype, "grad_output")
    target = call.target()
    if call.method == "autodiff":
        autodiff_backward(
            call.source, call.spec.in_shape, forward_passes(call.spec), target, call.kind
        )
        return call.finish(target)
    passes = adjoint_passes(call.spec)
    if call.bound is None:
        return run_call(_REPEATS, key, passes, call.source, target, call.out_shape, call.kind)
    run_passes(call.source, passes, target, call.kind)
    return call.finish(target)


# Calls already checked, by signature (Note [Repeated calls] in _engine/passes.py).
_REPEATS = RepeatCache()


def _repeated(array: Any, arguments: tuple[Any, ...], out: Any, remembered: bool) -> Any:
    """The signature of a call on ``array`` with ``arguments`` where such calls are
    ``remembered`` (else None), and the call's result where it repeats one already checked
    (else None: the call takes the full path)."""
    if not remembered:
        return None, None
    key, repeat = _REPEATS.lookup(array, arguments)
    if repeat is not None and (out is None or repeat.takes(out, array)):
        return key, repeat(array, out)
    return key, None
