"""``interpolate_into``: resampling as one step of a Taichi autodiff pipeline.

Inside ``ti.ad.Tape`` the step is recorded with ``ti.ad.grad_replaced``, so the tape's
backward runs tiinterp's hand-written adjoint (``ti.ad.grad_for``) instead of asking Taichi
to differentiate the kernels: that works on every arch, including Vulkan and Metal where
Taichi's own ndarray autodiff does not, and it is deterministic.
"""
from __future__ import annotations

from . import _validate as v
from ._arrays import TaichiKind
from ._kernels import (add_array, add_array_to_field, copy_array_to_field,
                       copy_field_to_array)
from ._resize import _run_passes, adjoint_passes, resize_passes
from ._runtime import (AUTODIFF_ARCHS, current_arch, ensure_initialized, require_dtype_support,
                       serialized)
from ._taichi import ScalarField, ScalarNdarray, inside_tape, require_current, ti

_TAICHI_FLOATS = {ti.f32: "float32", ti.f64: "float64"}


def _check_taichi_data(value, name: str) -> str:
    if not isinstance(value, (ScalarField, ScalarNdarray)):
        raise TypeError(f"{name}: expected a Taichi scalar field or scalar ndarray, "
                        f"got {type(value).__name__}")
    require_current(value, name)
    if value.dtype not in _TAICHI_FLOATS:
        raise TypeError(f"{name}: expected dtype f32 or f64, got {value.dtype}")
    shape = tuple(value.shape)
    if len(shape) not in v.LAYOUTS or any(n < 1 for n in shape):
        expected = " or ".join(f"{n}-D {layout}" for n, layout in v.LAYOUTS.items())
        raise ValueError(f"{name}: expected a non-empty {expected} shape, got {shape}")
    return _TAICHI_FLOATS[value.dtype]


def _gradient_of(value):
    """The gradient buffer of a field or ndarray, or None when it has none."""
    if isinstance(value, ScalarField):
        return value.grad if value.snode.ptr.has_adjoint() else None
    return value.grad


def _check_tape_support(src, dst) -> None:
    for name, value in (("src", src), ("dst", dst)):
        if _gradient_of(value) is None:
            raise ValueError(f"{name}: expected gradients inside ti.ad.Tape (create it "
                             "with needs_grad=True), got none")
    arch = current_arch()
    if arch not in AUTODIFF_ARCHS and any(isinstance(a, ScalarNdarray) for a in (src, dst)):
        # Measured with Taichi 1.7.4 on Vulkan (lavapipe): a Tape over ndarrays corrupts both
        # the values and the gradients of the pipeline's other kernels (taichi-dev/taichi#8524).
        raise ValueError(f"src/dst: expected Taichi fields inside ti.ad.Tape on arch {arch!r} "
                         "(Taichi differentiates ndarray kernels wrongly there, "
                         "taichi-dev/taichi#8524), got an ndarray; use ti.field(..., "
                         "needs_grad=True) for the pipeline's data and loss")


def _as_ndarray(value):
    """An ndarray holding ``value``'s data (``value`` itself when it is one)."""
    if isinstance(value, ScalarNdarray):
        return value
    array = ti.ndarray(value.dtype, tuple(value.shape))
    copy_field_to_array(value, array)
    return array


@serialized
def interpolate_into(src, dst, mode="nearest", align_corners=None, antialias=False):
    """Resample ``src`` into ``dst``: both Taichi scalar fields or ndarrays ``(N, C, H, W)``.

    The output size is ``dst``'s shape; the coordinates are those of
    ``interpolate(src, size=dst.shape[2:], mode=mode, align_corners=align_corners)``.
    Inside a ``ti.ad.Tape`` the tape's backward adds ``A^T dst.grad`` to ``src.grad`` with
    the hand-written adjoint, so ``src`` and ``dst`` need gradients (``needs_grad=True``).
    Returns ``dst``.
    """
    dtype = _check_taichi_data(src, "src")
    mode, align_corners, antialias = v.check_resize_options(mode, len(src.shape), align_corners,
                                                            antialias)
    if _check_taichi_data(dst, "dst") != dtype:
        raise TypeError(f"dst: expected the dtype of src ({src.dtype}), got {dst.dtype}")
    in_shape, out_shape = tuple(src.shape), tuple(dst.shape)
    if len(out_shape) != len(in_shape):
        raise ValueError(f"dst: expected {len(in_shape)} axes like src {in_shape}, got shape "
                         f"{out_shape}")
    if out_shape[:2] != in_shape[:2]:
        raise ValueError(f"dst: expected (N, C) = {in_shape[:2]} as in src, got {out_shape[:2]}")
    ensure_initialized()
    require_dtype_support(dtype, "src")
    if inside_tape():
        _check_tape_support(src, dst)
    key = (in_shape, out_shape[2:], mode, align_corners, (None,) * (len(in_shape) - 2), dtype,
           antialias)
    _resample_on_tape(src, dst, resize_passes(*key), adjoint_passes(*key))
    return dst


@ti.ad.grad_replaced
def _resample_on_tape(src, dst, passes, adjoint):
    source = _as_ndarray(src)
    if isinstance(dst, ScalarNdarray):
        _run_passes(source, passes, dst, TaichiKind)
        return
    result = ti.ndarray(dst.dtype, tuple(dst.shape))
    _run_passes(source, passes, result, TaichiKind)
    copy_array_to_field(result, dst)


@ti.ad.grad_for(_resample_on_tape)
@serialized
def _resample_on_tape_adjoint(src, dst, passes, adjoint):
    src_grad = _gradient_of(src)
    if src_grad is None:
        return
    grad_input = ti.ndarray(src.dtype, tuple(src.shape))
    _run_passes(_as_ndarray(_gradient_of(dst)), adjoint, grad_input, TaichiKind)
    if isinstance(src_grad, ScalarNdarray):
        add_array(grad_input, src_grad)
    else:
        add_array_to_field(grad_input, src_grad)
