"""``interpolate_into`` and ``grid_sample_into``: resampling and warping as steps of a Taichi
autodiff pipeline.

Inside ``ti.ad.Tape`` the step is recorded with ``ti.ad.grad_replaced``, so the tape's
backward runs tiinterp's hand-written adjoint (``ti.ad.grad_for``) instead of asking Taichi
to differentiate the kernels: that works on every arch, including Vulkan and Metal where
Taichi's own ndarray autodiff does not, and it is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .._engine.device_path import run_fields_in_place
from .._engine.passes import run_passes
from .._rules import validate as v
from .._rules.bspline import BSPLINE_BOUNDARIES, prefilter_passes
from .._rules.plan import Pass, adjoint_passes, cheapest_order, forward_passes
from .._rules.scale_translate import check_geometry, check_parameters, parameter_tables
from .._rules.taps import AxisTaps
from .._runtime.arrays import NumpyKind, TaichiKind
from .._runtime.dtypes import numpy_float
from .._runtime.elements import (
    Elements,
    as_flat,
    elements_of,
    flat_target,
    gradient_of,
    is_sparse,
    store_flat,
)
from .._runtime.scratch import pooled_ndarray
from .._runtime.session import (
    AUTODIFF_ARCHS,
    refuse_simd_configuration,
    running_arch,
    serialized,
    start_taichi,
)
from .._runtime.taichi import Field, Ndarray, inside_tape, ti
from .grid_sample import grid_sample, grid_sample_backward

# A Taichi field or ndarray.
TaichiData = TypeVar("TaichiData")


def check_tape_support(named: dict[str, Any]) -> None:
    """Inside ``ti.ad.Tape``: every array needs a gradient, and ndarrays an arch where
    Taichi differentiates them correctly."""
    for name, value in named.items():
        if gradient_of(value) is None:
            raise ValueError(
                f"{name}: expected gradients inside ti.ad.Tape (create it "
                "with needs_grad=True), got none"
            )
    arch = running_arch()
    if arch not in AUTODIFF_ARCHS and any(isinstance(a, Ndarray) for a in named.values()):
        # Measured with Taichi 1.7.4 on Vulkan (lavapipe): a Tape over ndarrays corrupts both
        # the values and the gradients of the pipeline's other kernels (taichi-dev/taichi#8524).
        raise ValueError(
            f"{'/'.join(named)}: expected Taichi fields inside ti.ad.Tape on arch {arch!r} "
            "(Taichi differentiates ndarray kernels wrongly there, "
            "taichi-dev/taichi#8524), got an ndarray; use ti.field(..., "
            "needs_grad=True) for the pipeline's data and loss"
        )


def refuse_elements_in_simd_configuration(elements: Elements, name: str) -> None:
    if elements.element:
        # Taichi 1.7.4 reads and writes vector/matrix fields wrongly or aborts there.
        refuse_simd_configuration(f"{name} with vector or matrix elements")


def _ready_for_step(layout: v.IntoLayout, src: Any, dst: Any, name: str) -> bool:
    """What every resampling step between Taichi data checks before it runs: the runtime
    started, the dtype supported, elements the CPU's SIMD configuration can take, and inside
    a ``ti.ad.Tape``, data the tape can differentiate. Whether the step is on a tape."""
    start_taichi(layout.dtype, "src")
    refuse_elements_in_simd_configuration(layout.src, name)
    taped = inside_tape()
    if taped:
        check_tape_support({"src": src, "dst": dst})
    return taped


@dataclass(frozen=True)
class _IntoPlan:
    layout: v.IntoLayout
    forward: tuple[Pass, ...]
    adjoint: tuple[Pass, ...]


def _on_axes(passes: tuple[Pass, ...], axes: tuple[int, ...]) -> tuple[Pass, ...]:
    """Passes planned on a ``(1, 1, *spatial)`` array, moved to the data's spatial axes.
    The order stays the cheapest: every pass's cost scales by the same other axes."""
    return tuple(Pass(axes[p.axis - 2], p.taps) for p in passes)


@serialized
def interpolate_into(
    src: TaichiData,
    dst: TaichiData,
    mode: str = "nearest",
    align_corners: bool | None = None,
    antialias: bool = False,
    *,
    spatial_axes: int | tuple[int, ...] | None = None,
) -> TaichiData:
    """Resample one Taichi field or ndarray into another: a step of a ``ti.ad.Tape`` pipeline.

    The spatial axes are resampled with the coordinates of ``interpolate(..., size=<dst's
    spatial sizes>, mode=mode, align_corners=align_corners, antialias=antialias)``; every
    other axis, and every component of a vector or matrix element, is carried through as a
    channel. Inside ``ti.ad.Tape`` the tape's backward adds ``A^T dst.grad`` to
    ``src.grad`` with tiinterp's hand-written adjoint (deterministic, every arch), so
    ``src`` and ``dst`` need gradients (``needs_grad=True``).

    Which axes are spatial (``spatial_axes=None``), by element type and number of axes:

    - vector or matrix elements, 1-3 axes: every axis (a ``(H, W)`` velocity field of
      ``ti.Vector``);
    - scalars, 3-5 axes: ``(N, C, *spatial)``, the layout of :func:`interpolate`;
    - scalars, 1-2 axes: every axis;
    - anything else: name the axes with ``spatial_axes``.

    Parameters
    ----------
    src : Taichi field or ndarray, f32 or f64, scalar, ``ti.Vector`` or ``ti.Matrix``
        elements, with 1-3 spatial axes. Inside a Tape on an arch without ndarray
        autodiff (Vulkan, Metal), use fields: Taichi differentiates ndarray kernels
        wrongly there. A field may have any SNode layout: one declared with ``offset=``
        is read from its first index, and the inactive cells of a sparse one (bitmasked,
        pointer, dynamic SNodes) read as 0, as ``to_numpy`` reads them; inside a Tape they
        get no gradient (``src.grad`` is added to in its active cells only).
    dst : Taichi field or ndarray
        The output: ``src``'s dtype, element type and number of axes, and ``src``'s sizes
        on every axis that is not spatial. Every cell is written, so a sparse ``dst`` is
        active everywhere afterwards.
    mode, align_corners, antialias
        As in :func:`interpolate`; the mode must take as many spatial axes as ``src`` has.
    spatial_axes : int or tuple of int, optional
        The 1-3 spatial axes of ``src`` and ``dst`` (negative counts from the end);
        default: the rule above.

    Returns
    -------
    Taichi field or ndarray
        ``dst``.

    Raises
    ------
    TypeError
        ``src`` or ``dst`` not a Taichi field or ndarray of f32/f64 (struct fields,
        integer, f16 and quantized dtypes among them), or of different dtypes or element
        types.
    ValueError
        Shapes that do not fit, bad ``spatial_axes``, or (inside a Tape) arrays without
        gradients.
    RuntimeError
        Taichi data made before the last ``ti.init`` / ``tiinterp.init``; vector or matrix
        elements in the CPU SIMD configuration (Taichi 1.7.4 miscompiles them there).

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

    A ``(H, W)`` field of 2-vectors (a velocity), doubled in size:

    >>> velocity = ti.Vector.field(2, ti.f64, shape=(2, 2))
    >>> velocity.from_numpy(np.array([[[0.0, 1.0], [2.0, 1.0]], [[4.0, 1.0], [6.0, 1.0]]]))
    >>> fine = ti.Vector.field(2, ti.f64, shape=(4, 4))
    >>> _ = tiinterp.interpolate_into(velocity, fine, mode="bilinear", align_corners=True)
    >>> fine.to_numpy()[:, 0, 0]  # x component down the first column
    array([0.        , 1.33333333, 2.66666667, 4.        ])
    """
    spec, layout = v.into_spec(src, dst, mode, align_corners, antialias, spatial_axes)
    _ready_for_step(layout, src, dst, "interpolate_into")
    axes = layout.spatial_axes
    plan = _IntoPlan(
        layout, _on_axes(forward_passes(spec), axes), _on_axes(adjoint_passes(spec), axes)
    )
    _resample_on_tape(src, dst, plan)
    return dst


@serialized
def bspline_coefficients_into(
    src: TaichiData,
    dst: TaichiData,
    boundary: str | tuple[str, ...] = "reflect",
    *,
    spatial_axes: int | tuple[int, ...] | None = None,
) -> TaichiData:
    """Write the cubic B-spline coefficients of ``src`` into ``dst``: what
    :func:`tiinterp.funcs.sample_bspline` reads to interpolate ``src`` (SciPy's
    ``spline_filter(order=3)``, its prefilter).

    ``sample_bspline(dst, p, boundary)`` is then the cubic spline through ``src``'s samples,
    twice continuously differentiable, equal to ``src`` on every sample: ``sum_k c_k
    beta3(p - k)`` with the coefficients ``c`` in ``dst``. Per spatial axis ``c`` solves
    ``(c[k - 1] + 4 c[k] + c[k + 1]) / 6 = src[k]``, the coefficients past the edge folded
    by ``boundary`` (``"reflect"``, ``"mirror"`` or ``"periodic"``, as in
    :mod:`tiinterp.funcs`; SciPy's ``"reflect"``, ``"mirror"`` and ``"grid-wrap"``); it is
    computed as the convolution with ``sqrt(3) (sqrt(3) - 2)^|m|``, ``|m| <= 27``, whose
    cut changes no coefficient by more than 5e-16 of the largest sample
    (``docs/semantics.md``). Inside ``ti.ad.Tape`` the tape's backward adds the transposed
    prefilter of ``dst.grad`` to ``src.grad`` (hand-written, deterministic, every arch).

    Parameters
    ----------
    src : Taichi field or ndarray, f32 or f64
        Scalar, ``ti.Vector`` or ``ti.Matrix`` elements (each component has its own
        coefficients).
    dst : Taichi field or ndarray
        Another one of ``src``'s shape, dtype and element type.
    boundary : {"reflect", "mirror", "periodic"} or tuple of them
        What lies past the edges, for every spatial axis or one per spatial axis (in the
        order of ``spatial_axes``); the sampler must be given the same.
    spatial_axes : int or tuple of int, optional
        The 1-3 axes the spline runs along (negative counts from the end); default: every
        axis of data with 1-3 axes, as :func:`tiinterp.funcs.sample_bspline` reads them,
        and :func:`interpolate_into`'s rule for more.

    Returns
    -------
    Taichi field or ndarray
        ``dst``.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        As :func:`interpolate_into`; and ``dst`` of another shape than ``src``, ``dst`` the
        same array as ``src``, another ``boundary``, or a tuple of another length than
        the spatial axes.

    Examples
    --------
    >>> import numpy as np
    >>> import taichi as ti
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> f = ti.field(ti.f64, shape=(1, 5))
    >>> f.from_numpy(np.array([[0.0, 0.0, 6.0, 0.0, 0.0]]))
    >>> c = ti.field(ti.f64, shape=(1, 5))
    >>> _ = tiinterp.bspline_coefficients_into(f, c)
    >>> np.round(c.to_numpy(), 4)
    array([[ 0.5455, -2.7273, 10.3636, -2.7273,  0.5455]])
    >>> points = ti.field(ti.f64, shape=3)
    >>> values = ti.field(ti.f64, shape=3)
    >>> points.from_numpy(np.array([2.0, 3.0, 2.5]))
    >>> @ti.kernel
    ... def sample():
    ...     for k in values:
    ...         values[k] = tiinterp.funcs.sample_bspline(c, ti.Vector([0.0, points[k]]))
    >>> sample()
    >>> np.round(values.to_numpy(), 12)  # through the samples, smooth between them
    array([6.        , 0.        , 3.61363636])
    """
    names: tuple[Any, ...] = tuple(boundary) if isinstance(boundary, (tuple, list)) else (boundary,)
    for name in names:
        if not isinstance(name, str) or name not in BSPLINE_BOUNDARIES:
            raise ValueError(
                f"boundary: expected one of {', '.join(map(repr, BSPLINE_BOUNDARIES))} or a "
                f"tuple of them (one per spatial axis), got {boundary!r}"
            )
    rank = len(elements_of(src, "src").shape)
    if spatial_axes is None and rank <= 3:
        spatial_axes = tuple(range(rank))  # as the samplers read them
    layout = v.into_layout(src, dst, spatial_axes)
    if layout.dst.shape != layout.src.shape:
        raise ValueError(f"dst: expected src's shape {layout.src.shape}, got {layout.dst.shape}")
    per_axis = _boundary_per_axis(boundary, names, spatial_axes, layout.spatial_axes, rank)
    taped = _ready_for_step(layout, src, dst, "bspline_coefficients_into")
    # The adjoint runs only in a Tape's backward.
    forward, adjoint = prefilter_passes(
        layout.src.flat_shape,
        layout.spatial_axes,
        per_axis,
        layout.dtype,
        with_adjoint=taped,
    )
    _resample_on_tape(src, dst, _IntoPlan(layout, forward, adjoint))
    return dst


def _boundary_per_axis(
    boundary: Any,
    names: tuple[str, ...],
    given_axes: Any,
    spatial_axes: tuple[int, ...],
    rank: int,
) -> tuple[str, ...]:
    """The boundary of each of ``spatial_axes`` (sorted): one name for all, or a tuple
    paired with the spatial axes in the order they were given."""
    if not isinstance(boundary, (tuple, list)):
        return names * len(spatial_axes)
    if len(names) != len(spatial_axes):
        raise ValueError(
            f"boundary: expected one name or a tuple of {len(spatial_axes)} (one per spatial "
            f"axis), got {len(names)}: {boundary!r}"
        )
    order = given_axes if isinstance(given_axes, (tuple, list)) else spatial_axes
    by_axis = {int(axis) % rank: name for axis, name in zip(order, names, strict=True)}
    return tuple(by_axis[axis] for axis in spatial_axes)


def _in_place_on_device(source: Any, passes: tuple[Pass, ...], result: Any, add: bool) -> bool:
    """On a GPU arch, dense fields are resampled in place, in one launch, where the passes
    fuse (the CPU reads them as NumPy views instead: ``host_flat_view`` in
    ``_runtime/elements.py``)."""
    if running_arch() == "cpu" or not all(
        isinstance(a, Field) and not is_sparse(a) for a in (source, result)
    ):
        return False
    return run_fields_in_place(source, passes, result, add)


def _resample(src: Any, dst: Any, plan: _IntoPlan) -> None:
    if _in_place_on_device(src, plan.forward, dst, add=False):
        return
    layout = plan.layout
    target = flat_target(dst, layout.dst, src.dtype, "dst", host=True)
    flat = as_flat(src, layout.src, src.dtype, "src", host=True)
    run_passes(flat, plan.forward, target, TaichiKind)
    store_flat(target, dst, layout.dst)


def _resample_adjoint(src: Any, dst: Any, plan: _IntoPlan) -> None:
    """``src.grad += A^T dst.grad``, where ``src`` has gradients."""
    src_grad = gradient_of(src)
    if src_grad is None:
        return
    if _in_place_on_device(gradient_of(dst), plan.adjoint, src_grad, add=True):
        return
    layout = plan.layout
    grad_input = pooled_ndarray(numpy_float(src.dtype), layout.src.flat_shape, "src")
    grad_output = as_flat(gradient_of(dst), layout.dst, src.dtype, "dst", host=True)
    run_passes(grad_output, plan.adjoint, grad_input, TaichiKind)
    store_flat(grad_input, src_grad, layout.src, accumulate=True)


# A Tape step's primal and its adjoint call the plain functions above: a grad_replaced
# function called from another would be recorded on the tape a second time.
@ti.ad.grad_replaced
def _resample_on_tape(src: Any, dst: Any, plan: _IntoPlan) -> None:
    _resample(src, dst, plan)


@ti.ad.grad_for(_resample_on_tape)
@serialized
def _resample_on_tape_adjoint(src: Any, dst: Any, plan: _IntoPlan) -> None:
    _resample_adjoint(src, dst, plan)


def _parameter(value: Any, name: str, count: int) -> tuple[Any, Any]:
    """``(values, taichi_array)``: a Taichi field or ndarray of ``count`` floats (kept, for
    its gradient) or a sequence of numbers (None)."""
    if isinstance(value, (Field, Ndarray)):
        if tuple(value.shape) != (count,) or getattr(value, "n", None) is not None:
            raise ValueError(
                f"{name}: expected a Taichi array of {count} scalars (one per spatial axis), "
                f"got shape {tuple(value.shape)}"
            )
        v.taichi_float(value, name)
        return value.to_numpy().astype(np.float64), value
    return value, None


@dataclass(frozen=True)
class _ZoomPlan:
    """A ``scale_and_translate_into`` call: its resampling and, per spatial axis (data
    axis, derivative tables with respect to the scale and to the translation)."""

    resample: _IntoPlan
    derivatives: tuple[tuple[int, AxisTaps, AxisTaps], ...]


@serialized
def scale_and_translate_into(
    src: TaichiData,
    dst: TaichiData,
    scale: Any,
    translation: Any,
    method: str = "linear",
    antialias: bool = True,
    *,
    spatial_axes: int | tuple[int, ...] | None = None,
) -> TaichiData:
    """:func:`tiinterp.scale_and_translate` from one Taichi field or ndarray into another: a
    step of a ``ti.ad.Tape`` pipeline, differentiable with respect to ``src`` and to the
    scale and the translation.

    Along spatial axis ``i`` (in ascending axis order) output ``o`` reads ``src`` at the
    index coordinate ``(o + 0.5 - translation[i]) / scale[i] - 0.5`` with JAX's filter for
    ``method`` (the formulas: ``docs/semantics.md``). ``scale`` and ``translation`` are
    sequences of floats, or Taichi fields or ndarrays of one float per spatial axis: those
    are read at the call (a copy to the host), and inside ``ti.ad.Tape`` the tape's
    backward adds the loss's gradient with respect to them to their ``.grad`` (where they
    have one), as it adds ``src``'s to ``src.grad``. Both are hand-written and
    deterministic, on every arch: the image's is the transposed resampling, a parameter's
    is ``sum(dst.grad * y')``, ``y'`` the forward with that axis's weights replaced by their
    derivative (as :func:`tiinterp.scale_and_translate_backward`).

    Parameters
    ----------
    src, dst : Taichi field or ndarray
        As in :func:`interpolate_into` (same dtype and element type, the same sizes on the
        axes that are not spatial, which are carried through, as are the components).
    scale, translation : sequence of float, or Taichi field or ndarray
        One per spatial axis, in ascending axis order; scales from 1e-15 to 1e15,
        translations within 1e15.
    method, antialias
        As in :func:`tiinterp.scale_and_translate`.
    spatial_axes : int or tuple of int, optional
        As in :func:`interpolate_into`.

    Returns
    -------
    Taichi field or ndarray
        ``dst``.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        As :func:`interpolate_into` and :func:`tiinterp.scale_and_translate`; and a Taichi
        ``scale`` or ``translation`` of another shape or dtype.

    Examples
    --------
    >>> import numpy as np
    >>> import taichi as ti
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> src = ti.field(ti.f64, shape=(1, 4))
    >>> dst = ti.field(ti.f64, shape=(1, 4))
    >>> src.from_numpy(np.array([[0.0, 1.0, 2.0, 3.0]]))
    >>> _ = tiinterp.scale_and_translate_into(src, dst, [1.0, 1.0], [0.0, 0.5])
    >>> dst.to_numpy()
    array([[0. , 0.5, 1.5, 2.5]])
    """
    layout = v.into_layout(src, dst, spatial_axes)
    axes = layout.spatial_axes
    geometry = check_geometry(layout.src.shape, layout.dst.shape, axes, method, antialias)
    scale_values, scale_array = _parameter(scale, "scale", len(axes))
    translation_values, translation_array = _parameter(translation, "translation", len(axes))
    scales, translations = check_parameters(scale_values, translation_values, len(axes))
    taped = _ready_for_step(layout, src, dst, "scale_and_translate_into")
    tables = parameter_tables(geometry, scales, translations, layout.dtype)
    forward = [Pass(a, t[0]) for a, t in zip(axes, tables, strict=True) if not t[0].is_identity]
    plan = _IntoPlan(
        layout,
        cheapest_order(layout.src.flat_shape, forward),
        tuple(Pass(p.axis, p.taps.transposed) for p in reversed(forward)) if taped else (),
    )
    derivatives = tuple((a, t[1], t[2]) for a, t in zip(axes, tables, strict=True))
    _zoom_on_tape(src, dst, _ZoomPlan(plan, derivatives), scale_array, translation_array)
    return dst


@ti.ad.grad_replaced
def _zoom_on_tape(src: Any, dst: Any, plan: _ZoomPlan, scale: Any, translation: Any) -> None:
    _resample(src, dst, plan.resample)


@ti.ad.grad_for(_zoom_on_tape)
@serialized
def _zoom_on_tape_adjoint(
    src: Any, dst: Any, plan: _ZoomPlan, scale: Any, translation: Any
) -> None:
    _resample_adjoint(src, dst, plan.resample)
    wanted = [
        (slot, gradient_of(array))
        for slot, array in ((1, scale), (2, translation))
        if array is not None and gradient_of(array) is not None
    ]
    if not wanted:
        return
    # sum(dst.grad * y') per axis, in float64 on the host: two small vectors.
    source = src.to_numpy()
    grad_output = gradient_of(dst).to_numpy().astype(np.float64).reshape(-1)
    forward = {p.axis: p.taps for p in plan.resample.forward}
    for slot, grad in wanted:
        values = grad.to_numpy().astype(np.float64)
        for i, (axis, *derivative) in enumerate(plan.derivatives):
            passes = [Pass(axis, derivative[slot - 1])]
            passes += [Pass(a, t) for a, t in forward.items() if a != axis]
            result = np.empty(plan.resample.layout.dst.flat_shape, dtype=source.dtype)
            run_passes(source, passes, result, NumpyKind)
            values[i] += np.dot(grad_output, result.reshape(-1).astype(np.float64))
        grad.from_numpy(values.astype(grad.to_numpy().dtype))


@dataclass(frozen=True)
class _GridLayout:
    src: Elements
    grid: Elements
    dst: Elements
    mode: str
    padding_mode: str
    align_corners: bool


def _grid_layout(
    src: Any, grid: Any, dst: Any, mode: Any, padding_mode: Any, align_corners: Any
) -> _GridLayout:
    src_elements, grid_elements, dst_elements = (
        elements_of(value, name) for value, name in ((src, "src"), (grid, "grid"), (dst, "dst"))
    )
    v.check_distinct(dst, src=src, grid=grid)
    for name, elements in (("src", src_elements), ("dst", dst_elements)):
        if elements.element:
            raise TypeError(
                f"{name}: expected a Taichi scalar field or ndarray, got {elements.describe()}"
            )
    dtype = v.taichi_float(src, "src")
    for name, value in (("grid", grid), ("dst", dst)):
        if v.taichi_float(value, name) != dtype:
            raise TypeError(f"{name}: expected the dtype of src ({src.dtype}), got {value.dtype}")
    shape = src_elements.shape
    if len(shape) not in (4, 5):
        raise ValueError(
            f"src: expected a 4-D (N, C, H, W) or 5-D (N, C, D, H, W) shape, got {shape}"
        )
    dims = len(shape) - 2
    points = grid_elements.flat_shape
    if grid_elements.element not in ((), (dims,)) or len(points) != dims + 2:
        expected = (
            "(N, H_out, W_out, 2) scalars or (N, H_out, W_out) 2-vectors"
            if dims == 2
            else "(N, D_out, H_out, W_out, 3) scalars or (N, D_out, H_out, W_out) 3-vectors"
        )
        raise ValueError(
            f"grid: expected {expected} for src of shape {shape}, got {grid_elements.describe()}"
        )
    if points[0] != shape[0] or points[-1] != dims:
        raise ValueError(f"grid: expected N = {shape[0]} as in src, got shape {points}")
    expected_dst = shape[:2] + points[1:-1]
    if dst_elements.shape != expected_dst:
        raise ValueError(
            f"dst: expected shape {expected_dst} (src's (N, C), grid's points), "
            f"got {dst_elements.shape}"
        )
    v.grid_sample_options(mode, padding_mode, dims)
    return _GridLayout(
        src_elements,
        grid_elements,
        dst_elements,
        mode,
        padding_mode,
        bool(v.check_flag(align_corners, "align_corners")),
    )


@serialized
def grid_sample_into(
    src: TaichiData,
    grid: TaichiData,
    dst: TaichiData,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = False,
) -> TaichiData:
    """Sample a Taichi field or ndarray at the points of a grid (``F.grid_sample``), as a step
    of a ``ti.ad.Tape`` pipeline: warp an image or a volume by a displacement.

    The values and conventions are :func:`grid_sample`'s. Inside ``ti.ad.Tape`` the tape's
    backward runs tiinterp's hand-written adjoint (deterministic, every arch): it adds the
    gradients to ``src.grad`` and ``grid.grad``, for those of the two that have gradients
    (``needs_grad=True``); ``dst`` needs them. Fields of any SNode layout are read and
    written as by :func:`interpolate_into`: from their first index when declared with
    ``offset=``; inactive cells of sparse ones read as 0 (and get no gradient); every cell
    of ``dst`` written.

    Parameters
    ----------
    src : Taichi scalar field or ndarray of shape (N, C, H, W) or (N, C, D, H, W)
        f32 or f64.
    grid : Taichi field or ndarray of shape (N, H_out, W_out, 2) with scalar elements or
        (N, H_out, W_out) with 2-vector elements (3-D: (N, D_out, H_out, W_out, 3) or
        (N, D_out, H_out, W_out) of 3-vectors)
        ``src``'s dtype; x (along W) first, in ``[-1, 1]`` across ``src`` (see
        :func:`grid_sample`).
    dst : Taichi scalar field or ndarray of shape (N, C, H_out, W_out) (or (N, C, D_out,
        H_out, W_out))
        The output, of ``src``'s dtype.
    mode, padding_mode, align_corners
        As in :func:`grid_sample`.

    Returns
    -------
    Taichi field or ndarray
        ``dst``.

    Raises
    ------
    TypeError, ValueError
        Arguments that are not Taichi data of fitting dtypes (f32 or f64: not integer, f16
        or quantized), element types (struct fields refused) and shapes; bad options;
        inside a Tape, a ``dst`` without gradients.
    RuntimeError
        Taichi data made before the last ``ti.init``; the CPU SIMD configuration.

    Examples
    --------
    >>> import numpy as np
    >>> import taichi as ti
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> image = ti.field(ti.f64, shape=(1, 1, 2, 2))
    >>> image.from_numpy(np.array([[[[0.0, 1.0], [2.0, 3.0]]]]))
    >>> points = ti.Vector.field(2, ti.f64, shape=(1, 1, 3))  # (x, y) per point
    >>> points.from_numpy(np.array([[[[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]]]]))
    >>> out = ti.field(ti.f64, shape=(1, 1, 1, 3))
    >>> _ = tiinterp.grid_sample_into(image, points, out, align_corners=True)
    >>> out.to_numpy()
    array([[[[0. , 1.5, 3. ]]]])
    """
    layout = _grid_layout(src, grid, dst, mode, padding_mode, align_corners)
    start_taichi(v.taichi_float(src, "src"), "src")
    refuse_simd_configuration("grid_sample_into")
    if inside_tape():
        check_tape_support({"dst": dst})
        with_gradients = {name: a for name, a in (("src", src), ("grid", grid)) if gradient_of(a)}
        check_tape_support(with_gradients)
    _sample_on_tape(src, grid, dst, layout)
    return dst


@ti.ad.grad_replaced
def _sample_on_tape(src: Any, grid: Any, dst: Any, layout: _GridLayout) -> None:
    target = flat_target(dst, layout.dst, src.dtype, "dst")
    grid_sample(
        as_flat(src, layout.src, src.dtype, "src"),
        as_flat(grid, layout.grid, src.dtype, "grid"),
        layout.mode,
        layout.padding_mode,
        layout.align_corners,
        out=target,
    )
    store_flat(target, dst, layout.dst)


@ti.ad.grad_for(_sample_on_tape)
@serialized
def _sample_on_tape_adjoint(src: Any, grid: Any, dst: Any, layout: _GridLayout) -> None:
    src_grad, grid_grad = gradient_of(src), gradient_of(grid)
    if src_grad is None and grid_grad is None:
        return
    grad_input = ti.ndarray(src.dtype, layout.src.flat_shape)
    grad_grid = ti.ndarray(src.dtype, layout.grid.flat_shape)
    grid_sample_backward(
        as_flat(gradient_of(dst), layout.dst, src.dtype, "dst"),
        as_flat(src, layout.src, src.dtype, "src"),
        as_flat(grid, layout.grid, src.dtype, "grid"),
        layout.mode,
        layout.padding_mode,
        layout.align_corners,
        out=(grad_input, grad_grid),
    )
    if src_grad is not None:
        store_flat(grad_input, src_grad, layout.src, accumulate=True)
    if grid_grad is not None:
        store_flat(grad_grid, grid_grad, layout.grid, accumulate=True)
