"""``interpolate_into``: resampling as one step of a Taichi autodiff pipeline.

Inside ``ti.ad.Tape`` the step is recorded with ``ti.ad.grad_replaced``, so the tape's
backward runs tiinterp's hand-written adjoint (``ti.ad.grad_for``) instead of asking Taichi
to differentiate the kernels: that works on every arch, including Vulkan and Metal where
Taichi's own ndarray autodiff does not, and it is deterministic.
"""

from __future__ import annotations

from typing import Any, TypeVar

from . import _validate as v
from ._arrays import (
    TaichiKind,
    add_array,
    add_array_to_field,
    copy_array_to_field,
    copy_field_to_array,
)
from ._engine import run_passes
from ._plan import Pass, adjoint_passes, forward_passes
from ._runtime import (
    AUTODIFF_ARCHS,
    current_arch,
    ensure_initialized,
    require_dtype_support,
    serialized,
)
from ._taichi import ScalarField, ScalarNdarray, inside_tape, ti

# A Taichi scalar field or scalar ndarray.
TaichiData = TypeVar("TaichiData")


def _gradient_of(value: Any) -> Any:
    """The gradient buffer of a field or ndarray, or None when it has none."""
    if isinstance(value, ScalarField):
        return value.grad if value.snode.ptr.has_adjoint() else None
    return value.grad


def _check_tape_support(src: Any, dst: Any) -> None:
    for name, value in (("src", src), ("dst", dst)):
        if _gradient_of(value) is None:
            raise ValueError(
                f"{name}: expected gradients inside ti.ad.Tape (create it "
                "with needs_grad=True), got none"
            )
    arch = current_arch()
    if arch not in AUTODIFF_ARCHS and any(isinstance(a, ScalarNdarray) for a in (src, dst)):
        # Measured with Taichi 1.7.4 on Vulkan (lavapipe): a Tape over ndarrays corrupts both
        # the values and the gradients of the pipeline's other kernels (taichi-dev/taichi#8524).
        raise ValueError(
            f"src/dst: expected Taichi fields inside ti.ad.Tape on arch {arch!r} "
            "(Taichi differentiates ndarray kernels wrongly there, "
            "taichi-dev/taichi#8524), got an ndarray; use ti.field(..., "
            "needs_grad=True) for the pipeline's data and loss"
        )


def _as_ndarray(value: Any) -> Any:
    """An ndarray holding ``value``'s data (``value`` itself when it is one)."""
    if isinstance(value, ScalarNdarray):
        return value
    array = ti.ndarray(value.dtype, tuple(value.shape))
    copy_field_to_array(value, array)
    return array


@serialized
def interpolate_into(
    src: TaichiData,
    dst: TaichiData,
    mode: str = "nearest",
    align_corners: bool | None = None,
    antialias: bool = False,
) -> TaichiData:
    """Resample one Taichi array into another: a step of a Taichi (``ti.ad.Tape``) pipeline.

    The coordinates are those of ``interpolate(src, size=dst.shape[2:], mode=mode,
    align_corners=align_corners, antialias=antialias)``. Inside ``ti.ad.Tape`` the tape's
    backward adds ``A^T dst.grad`` to ``src.grad`` with tiinterp's hand-written adjoint
    (deterministic, every arch), so ``src`` and ``dst`` need gradients
    (``needs_grad=True``).

    Parameters
    ----------
    src : Taichi scalar field or ndarray of shape (N, C, W), (N, C, H, W) or (N, C, D, H, W)
        f32 or f64. Inside a Tape on an arch without ndarray autodiff (Vulkan, Metal), use
        fields: Taichi differentiates ndarray kernels wrongly there.
    dst : Taichi scalar field or ndarray of shape (N, C, *out_spatial)
        The output, of ``src``'s dtype, number of axes and (N, C).
    mode, align_corners, antialias
        As in :func:`interpolate` (every mode but the ``scale_factor`` arguments).

    Returns
    -------
    Taichi scalar field or ndarray
        ``dst``.

    Raises
    ------
    TypeError
        ``src`` or ``dst`` not a Taichi scalar field or ndarray of f32/f64, or of different
        dtypes.
    ValueError
        Shapes that do not fit, or (inside a Tape) arrays without gradients.
    RuntimeError
        Taichi data made before the last ``ti.init`` / ``tiinterp.init``.

    Examples
    --------
    >>> import numpy as np
    >>> import taichi as ti
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> src = ti.field(ti.f64, shape=(1, 1, 2))
    >>> dst = ti.field(ti.f64, shape=(1, 1, 3))
    >>> src.from_numpy(np.array([[[1.0, 3.0]]]))
    >>> tiinterp.interpolate_into(src, dst, mode="linear", align_corners=True) is dst
    True
    >>> dst.to_numpy()
    array([[[1., 2., 3.]]])
    """
    spec = v.into_spec(src, dst, mode, align_corners, antialias)
    ensure_initialized()
    require_dtype_support(spec.dtype, "src")
    if inside_tape():
        _check_tape_support(src, dst)
    _resample_on_tape(src, dst, forward_passes(spec), adjoint_passes(spec))
    return dst


@ti.ad.grad_replaced
def _resample_on_tape(
    src: Any, dst: Any, passes: tuple[Pass, ...], adjoint: tuple[Pass, ...]
) -> None:
    source = _as_ndarray(src)
    if isinstance(dst, ScalarNdarray):
        run_passes(source, passes, dst, TaichiKind)
        return
    result = ti.ndarray(dst.dtype, tuple(dst.shape))
    run_passes(source, passes, result, TaichiKind)
    copy_array_to_field(result, dst)


@ti.ad.grad_for(_resample_on_tape)
@serialized
def _resample_on_tape_adjoint(
    src: Any, dst: Any, passes: tuple[Pass, ...], adjoint: tuple[Pass, ...]
) -> None:
    src_grad = _gradient_of(src)
    if src_grad is None:
        return
    grad_input = ti.ndarray(src.dtype, tuple(src.shape))
    run_passes(_as_ndarray(_gradient_of(dst)), adjoint, grad_input, TaichiKind)
    if isinstance(src_grad, ScalarNdarray):
        add_array(grad_input, src_grad)
    else:
        add_array_to_field(grad_input, src_grad)
