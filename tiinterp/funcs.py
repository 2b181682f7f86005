"""``ti.func`` samplers for users' own Taichi kernels.

Each sampler reads a 2-D or 3-D, scalar or vector Taichi field or ndarray ``f`` at a point
``p`` (a ``ti.Vector`` of floats, one per axis of ``f``)::

    sample_linear(f, p, boundary="clamp", origin=0.0)

and is differentiable by ``ti.ad`` with respect to the values of ``f`` and to ``p``
(``floor`` contributes no gradient, as everywhere in autodiff; on a sample, where linear
interpolation has a kink, the slope is the one towards the next sample up, DiffTaichi's
and PyTorch's: docs/semantics.md, "Slopes at sample points")::

    @ti.kernel
    def advect(q: ti.template(), q_new: ti.template(), vel: ti.template(), dt: float):
        for i, j in q_new:
            p = ti.Vector([i, j]) - dt * vel[i, j]
            q_new[i, j] = tiinterp.funcs.sample_linear(q, p, boundary="periodic")

Filters: ``sample_linear`` is the tent (bilinear / trilinear); ``sample_cubic`` is Keys'
cubic with ``A = -0.75`` (tiinterp's and PyTorch's ``bicubic``); ``sample_lanczos3`` is
``sinc(x) sinc(x / 3)``, its weights renormalised per axis to sum to 1 (before the
``"zero"`` boundary drops the taps outside); ``sample_nearest`` rounds half up
(``floor(x + 0.5)``) and has zero gradient with respect to ``p``. ``sample_bspline`` is
cubic B-spline interpolation (SciPy's ``map_coordinates(order=3)``): it reads the spline's
coefficients, which :func:`tiinterp.bspline_coefficients_into` writes from the samples
(the prefilter), and gives a curve through the samples with two continuous derivatives. The
filter formulas are those of the resize modes in ``docs/semantics.md``.

``origin``: where sample 0 sits. Sample ``i`` (per axis) sits at the point
``p == i + origin``, so the sampler reads ``f`` at the index coordinate ``x = p - origin``.
It is a float for every axis or a tuple of floats, one per axis of ``f`` in the order of
its indices; the default 0.0 is plain index coordinates. On a staggered (MAC) grid in cell
units, with ``f[i, j]`` indexed ``(x, y)`` and cell ``(i, j)`` covering
``[i, i + 1] x [j, j + 1]``: a cell-centred pressure has ``origin=0.5``, the x-velocity
``u`` on the vertical faces (``u[i, j]`` at ``(i, j + 0.5)``) has ``origin=(0.0, 0.5)``
and the y-velocity ``v`` on the horizontal faces has ``origin=(0.5, 0.0)``; every field
is then sampled at the same physical point ``p``.

``boundary``: what the taps outside ``[0, n - 1]`` (an axis of ``n`` samples) read, per
axis: one name for every axis, or a tuple of names, one per axis of ``f`` in the order of
its indices (``("clamp", "periodic")``: walls along axis 0, wrapped along axis 1, as in a
channel flow). Taps, not points, are folded: the filter runs on the extended signal,
exactly as on an array padded by ``numpy.pad`` in the matching mode (per axis, as
``numpy.pad`` of each axis in turn). Samples ``[a b c d]`` extend as:

| ``boundary`` | extended signal | ``numpy.pad`` | ``scipy.ndimage`` |
|---|---|---|---|
| ``"clamp"`` (default) | ``a a [a b c d] d d`` | ``"edge"`` | ``"nearest"`` |
| ``"zero"`` | ``0 0 [a b c d] 0 0`` | ``"constant"`` | ``"constant"`` |
| ``"periodic"`` | ``c d [a b c d] a b`` | ``"wrap"`` | ``"grid-wrap"`` |
| ``"mirror"`` | ``c b [a b c d] c b`` | ``"reflect"`` | ``"mirror"`` |
| ``"reflect"`` | ``b a [a b c d] d c`` | ``"symmetric"`` | ``"reflect"`` |

``"clamp"`` replicates the edge sample, ``"zero"`` reads 0 outside, ``"periodic"`` reads
sample ``i mod n``. ``"mirror"`` reflects about the edge samples (which are not repeated:
period ``2 (n - 1)``); ``"reflect"`` reflects about walls half a sample past them, where
cell-centred data has its walls (the edge samples repeated: period ``2 n``). With one
sample on an axis, every boundary but ``"zero"`` reads that sample everywhere.

``boundary`` and ``origin`` are compile-time (``ti.template()``) arguments: pass Python
constants (a string or a tuple of strings, a float or a tuple of floats); each distinct
value compiles its own code.

``f`` may be one step of a field that keeps every time step (or any other leading index):
``frame(f, t)`` is ``f[t, ...]`` seen as a field of the other axes, read in place, as fast
as a field of its own (see :func:`frame`)::

    density = ti.field(float, shape=(steps + 1, n, n))  # every step, as ti.ad needs

    @ti.kernel
    def advect(t: int):
        for i, j in ti.ndrange(n, n):
            p = ti.Vector([i, j]) - velocity[t, i, j]
            density[t + 1, i, j] = tiinterp.funcs.sample_linear(
                tiinterp.funcs.frame(density, t), p, boundary=("clamp", "periodic"))

Points of any size are safe: the index coordinate is brought into a bounded range in
floating point before it becomes an integer (clamped for ``"clamp"`` and ``"zero"``,
reduced modulo the period for the others), so points beyond the int32 range and +-inf do
not overflow, and every read stays inside ``f`` whatever ``p`` is, NaN included. At
+-inf the value is the edge's (``"clamp"``) or 0 (``"zero"``); the periodic boundaries
have no value there and give an unspecified one, as any boundary does at a NaN point.
Far from the array, float32 points are coarse (spaced ``|p| * 2^-23`` apart): a float32
point ``2^23`` periods away has lost every digit of its place in the period.

Which ``f``: a Taichi field or ndarray with one axis per coordinate of ``p``, in any SNode
layout (axis order, blocks, several fields in one SNode, SOA or AOS vectors). Points are
Taichi indices: a field declared with ``offset=o`` has its first sample at ``p == o +
origin``, and its boundaries lie at its own first and last indices. The inactive cells of
a sparse field (``bitmasked``, ``pointer`` or ``dynamic`` SNodes) read as 0, as
``to_numpy`` reads them, a bitmasked cell's old value (which Taichi keeps when it
deactivates the cell) included. Integer, ``f16`` and quantized (``ti.types.quant``) fields
are read as numbers and interpolated in floating point. A point with another number of
coordinates than ``f`` has axes, or a struct field, stops the compile with a ``TypeError``
(Taichi's ``TaichiTypeError``).

In tiinterp's CPU SIMD configuration (``tiinterp.init("cpu", real_matrix_scalarize=False)``)
the samplers and ``warp`` read scalar fields and ndarrays, vector ndarrays included; a
vector or matrix field, or differentiating a sampler with ``ti.ad``, stops the compile with
a ``RuntimeError`` (a ``TaichiCompilationError`` too) that says so: Taichi 1.7.4
miscompiles those there (LLVM aborts the process, or the gradients are NaN).

Examples, reading a 2 x 3 field:

>>> import numpy as np
>>> import tiinterp
>>> import taichi as ti
>>> tiinterp.init("cpu")
'cpu'
>>> f = ti.field(ti.f64, shape=(2, 3))
>>> f.from_numpy(np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]))
>>> @ti.kernel
... def sample(f: ti.template(), i: ti.f64, j: ti.f64, filter: ti.template()) -> ti.f64:
...     return filter(f, ti.Vector([i, j]))
>>> sample(f, 0.5, 1.4, tiinterp.funcs.sample_nearest)  # f[1, 1]
4.0
>>> sample(f, 0.5, 1.5, tiinterp.funcs.sample_linear)  # mean of f[0:2, 1:3]
3.0
>>> sample(f, -7.0, 9.0, tiinterp.funcs.sample_linear)  # clamped to f[0, 2]
2.0
>>> sample(f, 1.0, 1.0, tiinterp.funcs.sample_cubic)  # on a sample: its value
4.0
>>> round(sample(f, 0.0, 2.0, tiinterp.funcs.sample_lanczos3), 12)  # on a sample
2.0

The same field with other boundaries and a cell-centred origin:

>>> @ti.kernel
... def sample_at(f: ti.template(), i: ti.f64, j: ti.f64, boundary: ti.template()) -> ti.f64:
...     return tiinterp.funcs.sample_linear(f, ti.Vector([i, j]), boundary=boundary)
>>> sample_at(f, 0.0, 3.0, "periodic")  # column 3 is column 0: f[0, 0]
0.0
>>> sample_at(f, 0.0, 2.5, "periodic")  # between f[0, 2] and f[0, 0]
1.0
>>> sample_at(f, 0.0, 4.0, "mirror")  # c b | a b c: column 4 is column 0
0.0
>>> sample_at(f, 0.0, 3.0, "reflect")  # c b a | a b c | c b a: column 3 is column 2
2.0
>>> sample_at(f, -0.5, 1.0, "zero")  # half-way between 0 and f[0, 1] = 1
0.5
>>> sample_at(f, 1.5, 1.0, "zero")  # half-way between f[1, 1] = 4 and 0
2.0
>>> @ti.kernel
... def at_cell_corner(f: ti.template(), i: ti.f64, j: ti.f64) -> ti.f64:
...     # f holds cell-centred values: sample (i, j) sits at the point (i + 0.5, j + 0.5)
...     return tiinterp.funcs.sample_linear(f, ti.Vector([i, j]), origin=0.5)
>>> at_cell_corner(f, 1.0, 1.0)  # mean of f[0:2, 0:2]
2.0
"""

from typing import Any, NamedTuple

from ._kernels.filter_funcs import DEVICE_FORMS, clamp_index, float32_pair, tent_weights
from ._rules.bspline import BSPLINE_BOUNDARIES
from ._rules.filters import FORMULAS
from ._runtime.elements import sparse_refusal
from ._runtime.session import simd_configuration
from ._runtime.taichi import Field, ScalarField, impl, index_offset, submodule, ti

_AutodiffMode = submodule("lang.enums").AutodiffMode
_SNode = submodule("lang.snode").SNode
_AnyArray = submodule("lang.any_array").AnyArray
_DIFFERENTIATING = (_AutodiffMode.REVERSE, _AutodiffMode.FORWARD)

# --- Boundaries: one row per mode ------------------------------------------------------------
#
# Each boundary is a pair of ti.funcs, the whole of what differs between the modes:
# ``bound_point(x, n, radius)`` brings an index coordinate into a bounded range that keeps
# every tap's value (so ``floor`` cannot overflow, whatever ``x``), and
# ``tap(i, n) -> (index, mask)`` gives the sample tap ``i`` reads, inside ``[0, n - 1]``
# for every integer ``i``, and the factor of its weight (0 for the taps ``"zero"`` drops).


@ti.func
def _clamp_to_reach(x, n, radius):
    """``x`` clamped to ``[-radius, n - 1 + radius]``: past that every tap of a filter of
    half-width ``radius`` reads the edge sample, so the value does not change (and its
    gradient with respect to ``x`` is 0, as ``ti.max`` / ``ti.min`` give)."""
    return ti.min(ti.max(x, -radius), n - 1 + radius)


@ti.func
def _clamp_past_reach(x, n, radius):
    """``x`` clamped to ``[-radius - 1, n + radius]``: one sample past where the last tap
    leaves the array, so there every tap is outside and the value is 0."""
    return ti.min(ti.max(x, -radius - 1), n + radius)


@ti.func
def _reduce_modulo(x, period):
    """``x`` modulo ``period`` (an integer), in ``[0, period]``: ``x - period floor(x /
    period)``, exact for float64 points below 2^53, with the rounding of huge ``x``
    corrected or clamped back into range. +-inf and NaN have no remainder: they give 0.
    The lower clamp is a ``select``, not ``ti.max``: at ``x`` on a multiple of the period
    ``ti.max(0, 0)`` gave ``ti.ad`` the slope of the bound, 0."""
    reduced = x - period * ti.floor(x / period)
    reduced = ti.select(reduced < 0, reduced + period, reduced)
    reduced = ti.select(reduced >= period, reduced - period, reduced)
    return ti.select(reduced >= 0, ti.min(reduced, period), 0)


@ti.func
def _periodic_point(x, n, radius: ti.template()):
    return _reduce_modulo(x, n)


@ti.func
def _mirror_period(n):
    """The period of whole-sample reflection, ``2 (n - 1)``; 1 for a single sample (which
    every tap reads, so any period does)."""
    return ti.max(2 * (n - 1), 1)


@ti.func
def _mirror_point(x, n, radius: ti.template()):
    return _reduce_modulo(x, _mirror_period(n))


@ti.func
def _reflect_point(x, n, radius: ti.template()):
    return _reduce_modulo(x, 2 * n)


@ti.func
def _clamp_tap(i, n):
    return clamp_index(i, n), 1.0


@ti.func
def _zero_tap(i, n):
    return clamp_index(i, n), ti.select((i >= 0) & (i < n), 1.0, 0.0)


@ti.func
def _periodic_tap(i, n):
    return i % n, 1.0  # Taichi's integer % is Python's: in [0, n) for any i


@ti.func
def _mirror_tap(i, n):
    period = _mirror_period(n)
    folded = i % period
    return ti.select(folded >= n, period - folded, folded), 1.0


@ti.func
def _reflect_tap(i, n):
    folded = i % (2 * n)
    return ti.select(folded >= n, 2 * n - 1 - folded, folded), 1.0


class _Boundary(NamedTuple):
    bound_point: Any
    tap: Any


_BOUNDARIES = {
    "clamp": _Boundary(_clamp_to_reach, _clamp_tap),
    "zero": _Boundary(_clamp_past_reach, _zero_tap),
    "periodic": _Boundary(_periodic_point, _periodic_tap),
    "mirror": _Boundary(_mirror_point, _mirror_tap),
    "reflect": _Boundary(_reflect_point, _reflect_tap),
}


def _boundary(name: object) -> _Boundary:
    """The row of ``name``; runs while Taichi compiles, so a wrong name stops the compile."""
    if not isinstance(name, str) or name not in _BOUNDARIES:
        raise ValueError(
            f"boundary: expected one of {', '.join(map(repr, _BOUNDARIES))}, got {name!r}"
        )
    return _BOUNDARIES[name]


def _boundary_names(boundary: object, dims: int) -> tuple[str, ...]:
    """``boundary`` per axis: one name for every axis, or a tuple of ``dims`` names."""
    names = tuple(boundary) if isinstance(boundary, (tuple, list)) else (boundary,) * dims
    if len(names) != dims:
        raise TypeError(
            f"boundary: expected a name or a tuple of {dims} names (one per axis of the "
            f"{dims}-D point), got {boundary!r}"
        )
    for name in names:
        _boundary(name)
    return names  # type: ignore[return-value]


def _boundaries(boundary: object, dims: int) -> tuple[_Boundary, ...]:
    """The row of each axis's boundary; runs while Taichi compiles."""
    return tuple(_BOUNDARIES[name] for name in _boundary_names(boundary, dims))


def _origin_parts(origin: object, dims: int) -> tuple[tuple[float, float], ...]:
    """``origin`` per axis, each as two float32-exact parts: a bare Python float becomes a
    float32 constant in Taichi, so subtracting both parts keeps ~48 bits of a float64
    origin (0.5 and the like are exact)."""
    per_axis = origin if isinstance(origin, (tuple, list)) else (origin,) * dims
    values = [
        float(value)
        for value in per_axis
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]
    if len(values) != dims or len(per_axis) != dims:
        raise TypeError(
            f"origin: expected a float or a tuple of {dims} floats (one per axis of the "
            f"{dims}-D point), got {origin!r}"
        )
    return tuple(float32_pair(value) for value in values)


class _RefusedInSimdConfiguration(ti.TaichiCompilationError, RuntimeError):
    """What Taichi 1.7.4 miscompiles under ``real_matrix_scalarize=False``; a
    ``TaichiCompilationError`` so that Taichi's compiler passes it on as it is."""


def _refuse_element_field_in_simd(value: object, name: str) -> bool:
    """True, unless ``value`` is a vector or matrix field in the SIMD configuration; runs
    while Taichi compiles (in ``ti.static``), so a refusal stops the compile."""
    value = _base(value)
    if simd_configuration() and isinstance(value, Field) and not isinstance(value, ScalarField):
        raise _RefusedInSimdConfiguration(
            f"{name}: expected a scalar field or a Taichi ndarray in tiinterp's CPU SIMD "
            "configuration (real_matrix_scalarize=False), got a vector or matrix field, "
            "whose reads Taichi 1.7.4 miscompiles there (LLVM aborts); use a Taichi ndarray "
            "(vector ones work), one scalar field per component, or tiinterp.init('cpu')"
        )
    return True


def _source_offset(f: object, dims: int) -> tuple[int, ...]:
    """The first index of each of ``f``'s axes (a field's ``offset=``; zeros otherwise), after
    checking what ``f`` is; runs while Taichi compiles, so a refusal stops the compile."""
    frame_shape = f.shape  # type: ignore[attr-defined]
    leading = _leading_count(f)
    f = _base(f)
    if type(f).__name__ == "StructField":
        raise ti.TaichiTypeError(
            "f: expected a Taichi field or ndarray of scalars, vectors or matrices, got a "
            "struct field (ti.Struct.field); sample each of its members instead"
        )
    rank = len(frame_shape)
    if rank != dims:
        raise ti.TaichiTypeError(
            f"p: expected a {rank}-D point (one coordinate per axis of f, which has {rank}), "
            f"got a {dims}-D one"
        )
    refusal = sparse_refusal(f, "f")
    if refusal is not None:
        raise ti.TaichiTypeError(refusal)
    _refuse_element_field_in_simd(f, "f")
    kernel = impl.get_runtime().current_kernel
    if simd_configuration() and getattr(kernel, "autodiff_mode", None) in _DIFFERENTIATING:
        raise _RefusedInSimdConfiguration(
            "tiinterp.funcs samplers: differentiation (ti.ad) is not available in "
            "tiinterp's CPU SIMD configuration (real_matrix_scalarize=False), where "
            "Taichi 1.7.4 differentiates ti.Vector values wrongly (NaN gradients or "
            "LLVM aborts); start Taichi with its default options: tiinterp.init('cpu')"
        )
    return index_offset(f)[leading:]


@ti.func
def _index_coordinates(p, origin: ti.template(), offset: ti.template()):
    """``p - origin - offset`` as a ``ti.Vector``: the coordinate in samples from ``f``'s
    first one; a zero origin and offset cost nothing."""
    dims = ti.static(p.n)
    parts = ti.static(_origin_parts(origin, dims))
    x = p * 1.0  # a copy, in floating point even where p holds integers
    for d in ti.static(range(dims)):
        if ti.static(parts[d][0] != 0.0):
            x[d] -= parts[d][0]
        if ti.static(parts[d][1] != 0.0):
            x[d] -= parts[d][1]
        if ti.static(offset[d] != 0):
            x[d] -= offset[d]
    return x


def _nonzero(offset: tuple[int, ...]) -> bool:
    return any(offset)


def _bitmasked_ancestors(f: object) -> tuple[Any, ...]:
    """The bitmasked SNodes above a field's cells: Taichi leaves a bitmasked cell's old
    value in place when it deactivates it, and reads it back, where ``to_numpy`` and
    every other sparse SNode read 0."""
    f = _base(f)
    if not isinstance(f, Field):
        return ()
    found = []
    node = f.snode.ptr.parent
    while node is not None:
        if node.type.name == "bitmasked":
            found.append(_SNode(node))
        node = node.parent
    return tuple(found)


@ti.func
def _active(f: ti.template(), local):
    """Whether the cell of sample ``local`` is active in every bitmasked SNode above it."""
    masks = ti.static(_bitmasked_ancestors(f))
    base = ti.static(_base(f))
    whole = _whole_local_index(f, local)
    active = True
    for k in ti.static(range(len(masks))):
        active &= ti.is_active(masks[k], ti.rescale_index(base, masks[k], whole)) != 0
    return active


@ti.func
def _whole_local_index(f: ti.template(), local):
    """``local`` (counted from the first index of each of ``f``'s axes) with a frame's
    leading indices, counted the same way, in front."""
    if ti.static(isinstance(f, Frame)):
        first = ti.static(index_offset(f.field))
        return ti.Vector(
            [f.leading[d] - first[d] for d in ti.static(range(len(f.leading)))]
            + [local[d] for d in ti.static(range(local.n))]
        )
    else:
        return local


@ti.func
def _at_2d(f: ti.template(), i, j, offset: ti.template()):
    # By components, not by a vector index: the gradient kernels compile faster.
    if ti.static(_nonzero(offset)):
        return f[i + offset[0], j + offset[1]]
    else:
        return f[i, j]


@ti.func
def _at_3d(f: ti.template(), i, j, k, offset: ti.template()):
    if ti.static(_nonzero(offset)):
        return f[i + offset[0], j + offset[1], k + offset[2]]
    else:
        return f[i, j, k]


@ti.func
def _read_2d(f: ti.template(), i, j, offset: ti.template()):
    """Sample ``(i, j)`` (counted from ``f``'s first index) of ``f``, 0 in the inactive
    cells of a bitmasked field."""
    if ti.static(len(_bitmasked_ancestors(f)) == 0):
        return _at_2d(f, i, j, offset)
    else:
        value = _at_2d(f, i, j, offset)
        return ti.select(_active(f, ti.Vector([i, j])), value, ti.zero(value))


@ti.func
def _read_3d(f: ti.template(), i, j, k, offset: ti.template()):
    if ti.static(len(_bitmasked_ancestors(f)) == 0):
        return _at_3d(f, i, j, k, offset)
    else:
        value = _at_3d(f, i, j, k, offset)
        return ti.select(_active(f, ti.Vector([i, j, k])), value, ti.zero(value))


# --- Frames: a field's trailing axes at fixed leading indices ---------------------------------
#
# Note [A frame is made by a subscript]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``frame(f, t)`` is a ``ti.func`` whose value is a Python object, a view of ``f[t, ...]``
# that the samplers read as they read a field. Taichi warns (``SyntaxWarning``, "Calling
# non-taichi function") at every call of a plain Python function in a kernel, so the view
# is not made by a call: ``_FRAMES[f, t]``, a subscript of a Python object, which Taichi
# evaluates as Python without a warning. The view is a ``ti.data_oriented`` object, which
# Taichi keeps as it is when a kernel assigns it to a variable (a tuple would be rebuilt
# element by element, and the view lost). A read ``view[i, j]`` is Taichi's own subscript
# ``f[t, i, j]``: what ``ti.ad`` differentiates and what the compiled code indexes, no copy,
# no indirection, the leading indices one more term of the address.


@ti.data_oriented
class Frame:
    """``f``'s trailing axes at the leading indices ``leading``: what :func:`frame` gives.
    The samplers read it as a field of shape ``f.shape[len(leading):]``; ``view[i, j]``
    is ``f[*leading, i, j]``."""

    def __init__(self, field: Any, leading: Any) -> None:
        self.leading = tuple(leading) if isinstance(leading, (tuple, list)) else (leading,)
        _check_frame(field, self.leading)
        self.field = field
        self.shape = tuple(field.shape[len(self.leading) :])

    def __getitem__(self, index: Any) -> Any:
        indices = index if isinstance(index, tuple) else (index,)
        return impl.subscript(None, self.field, *self.leading, *indices)

    def __repr__(self) -> str:
        return f"Frame({self.field!r}, leading={len(self.leading)})"


class _Frames:
    """``_FRAMES[f, leading]`` is ``Frame(f, leading)`` (Note [A frame is made by a
    subscript])."""

    def __getitem__(self, key: tuple[Any, Any]) -> Frame:
        return Frame(*key)


_FRAMES = _Frames()


def _check_frame(field: Any, leading: tuple[Any, ...]) -> None:
    """Refuse, while Taichi compiles, what :func:`frame` cannot view."""
    if isinstance(field, Frame):
        raise ti.TaichiTypeError(
            "frame: expected a Taichi field or ndarray, got a frame; give every leading "
            "index in one call: frame(f, (t, k))"
        )
    if not isinstance(field, (Field, _AnyArray)):
        raise ti.TaichiTypeError(
            f"frame: expected a Taichi field or ndarray, got {type(field).__name__}"
        )
    rank = len(field.shape)
    if not leading or len(leading) >= rank:
        raise ti.TaichiTypeError(
            f"frame: expected 1 to {rank - 1} leading indices for a {rank}-D field or "
            f"ndarray (the other axes are the frame's), got {len(leading)}"
        )
    for index in leading:
        if not isinstance(index, impl.Expr) and (
            not isinstance(index, int) or isinstance(index, bool)
        ):
            raise ti.TaichiTypeError(f"frame: expected integer leading indices, got {index!r}")


def _base(f: Any) -> Any:
    """The field or ndarray that ``f`` (one, or a :class:`Frame` of one) reads."""
    return f.field if isinstance(f, Frame) else f


def _leading_count(f: Any) -> int:
    return len(f.leading) if isinstance(f, Frame) else 0


@ti.func
def frame(f: ti.template(), leading: ti.template()):
    """``f`` at the leading index (or tuple of indices) ``leading``, seen as a field of its
    other axes: ``frame(f, t)`` of a ``[t, i, j]`` field is the 2-D field of step ``t``,
    ``frame(p, (t, k))`` of a ``[t, k, i, j]`` field the 2-D field ``p[t, k]``. Every
    sampler and :func:`warp` take it where they take a field, and read ``f[t, i, j]``
    directly: as fast as a 2-D field, differentiable by ``ti.ad`` into ``f``'s gradient.
    ``leading`` is an integer or a tuple of integers (kernel arguments, loop indices or
    constants), Taichi indices of ``f``'s first axes; ``boundary`` and ``origin`` apply
    to the frame's axes only. Call it in a kernel or ``ti.func``.

    Examples
    --------
    >>> import numpy as np
    >>> import taichi as ti
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> density = ti.field(ti.f64, shape=(3, 2, 2))  # 3 steps of a 2 x 2 field
    >>> density.from_numpy(np.arange(12.0).reshape(3, 2, 2))
    >>> @ti.kernel
    ... def at(t: int, i: ti.f64, j: ti.f64) -> ti.f64:
    ...     step = tiinterp.funcs.frame(density, t)
    ...     return tiinterp.funcs.sample_linear(step, ti.Vector([i, j]))
    >>> at(2, 0.5, 0.5)  # the mean of step 2: 8, 9, 10, 11
    9.5
    """
    return _FRAMES[f, leading]  # Note [A frame is made by a subscript]


# --- Samplers ----------------------------------------------------------------------------------


@ti.func
def _floor_to_index(x):
    """``floor(x)`` as an i32 vector, one component at a time: Taichi 1.7.4 compiles a
    float-to-int cast of a whole vector, under ``real_matrix_scalarize=False`` (the CPU SIMD
    configuration), to an invalid LLVM cast that aborts the process."""
    return ti.Vector([ti.floor(x[d], ti.i32) for d in ti.static(range(x.n))])


def _filter_row(name: str) -> Any:
    """A ``ti.func`` of ``t = x - floor(x)`` giving the weights ``kernel(x - i)`` of the
    ``2 radius`` taps ``i = floor(x) - radius + 1 .. floor(x) + radius``, ``kernel`` and
    ``radius`` those of the filter ``name`` of the one table of filters (``_rules/filters.py``'s
    ``FORMULAS``, its Taichi form in ``_kernels/filter_funcs.py``'s ``DEVICE_FORMS``): for
    the smooth filters, whose slopes have no kinks to choose at (Note [Slopes at the kinks] in
    ``_kernels/filter_funcs.py``)."""
    kernel, radius = DEVICE_FORMS[name].weight, FORMULAS[name].radius

    @ti.func
    def row(t):
        return ti.Vector([kernel(t - (k - radius + 1)) for k in ti.static(range(2 * radius))])

    return row


_CUBIC_ROW = _filter_row("keys_pytorch")
_LANCZOS3_ROW = _filter_row("lanczos3")
_BSPLINE_ROW = _filter_row("cubic_bspline")


@ti.func
def _interpolate(
    f: ti.template(),
    p,
    radius: ti.template(),
    row: ti.template(),
    normalise: ti.template(),
    boundary: ti.template(),
    origin: ti.template(),
):
    """Tensor-product filter of half-width ``radius`` taps around ``p`` (2-D or 3-D);
    ``row(t)`` gives one axis's ``2 radius`` weights at ``t = x - floor(x)``."""
    dims = ti.static(p.n)
    ti.static_assert(dims == 2 or dims == 3, "tiinterp.funcs samplers take 2-D or 3-D points")
    rules = ti.static(_boundaries(boundary, dims))
    offset = ti.static(_source_offset(f, dims))
    extent = ti.Vector(f.shape[:dims])
    x = _index_coordinates(p, origin, offset)
    for d in ti.static(range(dims)):
        x[d] = rules[d].bound_point(x[d], extent[d], radius)
    base = _floor_to_index(x)
    frac = x - base
    width = ti.static(2 * radius)
    weights = ti.Matrix.rows([row(frac[d]) for d in ti.static(range(dims))])
    if ti.static(normalise):
        for d in ti.static(range(dims)):
            total = weights[d, 0]
            for k in ti.static(range(1, width)):
                total += weights[d, k]
            for k in ti.static(range(width)):
                weights[d, k] /= total
    first = base - (radius - 1)
    # Tap indices once per axis, then the separable sums innermost axis first: far fewer
    # statements for Taichi to compile than one folded index per tap (a 3-D lanczos3 reads
    # 216 taps).
    taps = ti.Matrix([[0] * width for _ in ti.static(range(dims))], ti.i32)
    for d in ti.static(range(dims)):
        for k in ti.static(range(width)):
            index, mask = rules[d].tap(first[d] + k, extent[d])
            taps[d, k] = index
            weights[d, k] *= mask
    separable_sum = ti.static(_separable_sum_2d if dims == 2 else _separable_sum_3d)
    return separable_sum(f, taps, weights, offset)


@ti.func
def _separable_sum_2d(f: ti.template(), taps, weights, offset: ti.template()):
    width = ti.static(taps.m)
    result = weights[0, 0] * _row_2d(f, taps, weights, offset, 0)
    for a in ti.static(range(1, width)):
        result += weights[0, a] * _row_2d(f, taps, weights, offset, a)
    return result


@ti.func
def _row_2d(f: ti.template(), taps, weights, offset: ti.template(), a: ti.template()):
    width = ti.static(taps.m)
    row = weights[1, 0] * _read_2d(f, taps[0, a], taps[1, 0], offset)
    for b in ti.static(range(1, width)):
        row += weights[1, b] * _read_2d(f, taps[0, a], taps[1, b], offset)
    return row


@ti.func
def _separable_sum_3d(f: ti.template(), taps, weights, offset: ti.template()):
    width = ti.static(taps.m)
    result = weights[0, 0] * _plane_3d(f, taps, weights, offset, 0)
    for a in ti.static(range(1, width)):
        result += weights[0, a] * _plane_3d(f, taps, weights, offset, a)
    return result


@ti.func
def _plane_3d(f: ti.template(), taps, weights, offset: ti.template(), a: ti.template()):
    width = ti.static(taps.m)
    plane = weights[1, 0] * _row_3d(f, taps, weights, offset, a, 0)
    for b in ti.static(range(1, width)):
        plane += weights[1, b] * _row_3d(f, taps, weights, offset, a, b)
    return plane


@ti.func
def _row_3d(
    f: ti.template(), taps, weights, offset: ti.template(), a: ti.template(), b: ti.template()
):
    width = ti.static(taps.m)
    row = weights[2, 0] * _read_3d(f, taps[0, a], taps[1, b], taps[2, 0], offset)
    for c in ti.static(range(1, width)):
        row += weights[2, c] * _read_3d(f, taps[0, a], taps[1, b], taps[2, c], offset)
    return row


@ti.func
def sample_nearest(
    f: ti.template(), p, boundary: ti.template() = "clamp", origin: ti.template() = 0.0
):
    """The sample nearest to ``p`` (half-way rounds up); ``boundary`` and ``origin`` as in
    the module's documentation."""
    dims = ti.static(p.n)
    ti.static_assert(dims == 2 or dims == 3, "tiinterp.funcs samplers take 2-D or 3-D points")
    rules = ti.static(_boundaries(boundary, dims))
    offset = ti.static(_source_offset(f, dims))
    extent = ti.Vector(f.shape[:dims])
    x = _index_coordinates(p, origin, offset)
    for d in ti.static(range(dims)):
        x[d] = rules[d].bound_point(x[d], extent[d], 1)
    nearest = _floor_to_index(x + 0.5)
    index = nearest * 0
    weight = 1.0
    for d in ti.static(range(dims)):
        tap, mask = rules[d].tap(nearest[d], extent[d])
        index[d] = tap
        weight *= mask
    if ti.static(dims == 2):
        return _read_2d(f, index[0], index[1], offset) * weight
    else:
        return _read_3d(f, index[0], index[1], index[2], offset) * weight


@ti.func
def sample_linear(
    f: ti.template(), p, boundary: ti.template() = "clamp", origin: ti.template() = 0.0
):
    """Bilinear (2-D) or trilinear (3-D) interpolation at ``p``; ``boundary`` and ``origin``
    as in the module's documentation."""
    return _interpolate(f, p, 1, tent_weights, False, boundary, origin)


@ti.func
def sample_cubic(
    f: ti.template(), p, boundary: ti.template() = "clamp", origin: ti.template() = 0.0
):
    """Keys cubic (A = -0.75) interpolation at ``p``: 4 taps per axis; ``boundary`` and
    ``origin`` as in the module's documentation."""
    return _interpolate(f, p, 2, _CUBIC_ROW, False, boundary, origin)


@ti.func
def sample_lanczos3(
    f: ti.template(), p, boundary: ti.template() = "clamp", origin: ti.template() = 0.0
):
    """Lanczos-3 interpolation at ``p``: 6 taps per axis, weights renormalised per axis;
    ``boundary`` and ``origin`` as in the module's documentation."""
    return _interpolate(f, p, 3, _LANCZOS3_ROW, True, boundary, origin)


def _spline_boundary(boundary: object, dims: int) -> bool:
    """Refuse, while Taichi compiles, a boundary the prefilter does not share."""
    for name in _boundary_names(boundary, dims):
        if name not in BSPLINE_BOUNDARIES:
            raise ValueError(
                f"boundary: expected one of {', '.join(map(repr, BSPLINE_BOUNDARIES))} for "
                "sample_bspline (the coefficients of a clamped or zero-padded signal are not "
                f"the clamped or zeroed coefficients), got {name!r}"
            )
    return True


@ti.func
def sample_bspline(
    c: ti.template(), p, boundary: ti.template() = "reflect", origin: ti.template() = 0.0
):
    """Cubic B-spline interpolation at ``p`` from the coefficients ``c``: ``sum_k c[k]
    beta3(x - k)`` over the 4 taps per axis around the index coordinate ``x``, the taps past
    the edge folded by ``boundary``. With ``c`` written by
    :func:`tiinterp.bspline_coefficients_into` from samples ``f`` (and the same
    ``boundary``), this is the cubic spline through ``f``: SciPy's ``map_coordinates(f,
    order=3, mode=...)`` with ``"reflect"`` (default), ``"mirror"`` and ``"grid-wrap"`` for
    ``"periodic"``. ``origin`` as in the module's documentation.

    Examples
    --------
    >>> import numpy as np
    >>> import taichi as ti
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> f = ti.field(ti.f64, shape=(2, 4))
    >>> f.from_numpy(np.array([[0.0, 1.0, 4.0, 9.0], [0.0, 1.0, 4.0, 9.0]]))
    >>> c = ti.field(ti.f64, shape=(2, 4))
    >>> _ = tiinterp.bspline_coefficients_into(f, c, "mirror")
    >>> @ti.kernel
    ... def at(i: ti.f64, j: ti.f64) -> ti.f64:
    ...     return tiinterp.funcs.sample_bspline(c, ti.Vector([i, j]), "mirror")
    >>> round(at(0.0, 2.0), 12), round(at(1.0, 1.5), 4)  # on a sample; between two
    (4.0, 2.0)
    """
    ti.static(_spline_boundary(boundary, p.n))
    return _interpolate(c, p, 2, _BSPLINE_ROW, False, boundary, origin)


@ti.func
def warp(
    f: ti.template(),
    displacement: ti.template(),
    index,
    sampler: ti.template() = sample_linear,
    boundary: ti.template() = "clamp",
):
    """``f`` warped by ``displacement`` at ``index``: ``f`` read at ``index +
    displacement[index]`` (index coordinates) with ``sampler`` (one of this module's) and
    ``boundary``. A loop over ``ti.grouped(out)`` writing ``out[i] = warp(f, u, i)`` is the
    backward warp ``out(x) = f(x + u(x))``, image registration's and semi-Lagrangian
    advection's; ``ti.ad`` differentiates it with respect to ``f`` and ``u``.

    ``displacement`` is a field or ndarray of ``ti.Vector``s, one component per axis of
    ``f`` (in the order of its indices), on the grid that ``index`` runs over (usually
    ``out``'s). With ``sample_linear`` and ``"clamp"`` this is
    ``grid_sample(mode="bilinear", padding_mode="border", align_corners=True)`` in index
    units; :func:`tiinterp.grid_sample_into` does the same between whole arrays with a
    hand-written adjoint.

    Examples
    --------
    >>> import numpy as np
    >>> import taichi as ti
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> f = ti.field(ti.f64, shape=(1, 4))
    >>> f.from_numpy(np.array([[0.0, 1.0, 2.0, 3.0]]))
    >>> u = ti.Vector.field(2, ti.f64, shape=(1, 4))
    >>> u.from_numpy(np.tile([0.0, 0.5], (1, 4, 1)))  # half a sample along the row
    >>> out = ti.field(ti.f64, shape=(1, 4))
    >>> @ti.kernel
    ... def warp_row():
    ...     for i in ti.grouped(out):
    ...         out[i] = tiinterp.funcs.warp(f, u, i)
    >>> warp_row()
    >>> out.to_numpy()  # the last point reads past the edge: clamped
    array([[0.5, 1.5, 2.5, 3. ]])
    """
    ti.static(_refuse_element_field_in_simd(displacement, "displacement"))
    return sampler(f, index + displacement[index], boundary)


__all__ = [
    "frame",
    "sample_bspline",
    "sample_cubic",
    "sample_lanczos3",
    "sample_linear",
    "sample_nearest",
    "warp",
]
