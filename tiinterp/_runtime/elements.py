"""Taichi fields and ndarrays of any element type (scalar, ``ti.Vector``, ``ti.Matrix``) as
plain scalar ndarrays: the element's components become trailing axes, so that the resize and
grid_sample kernels, written for scalar arrays, serve every element type.

A field of shape ``S`` with ``n``-vector elements is the scalar array ``S + (n,)``; with
``n x m`` matrix elements, ``S + (n, m)``. Copies go both ways, and the way back can add
(for gradients) instead of assigning. Position ``i`` of the flat array is the field's index
``i + offset`` (a field declared with ``offset=``), whatever the field's SNodes: any layout,
and sparse ones read in full (inactive cells as 0) and written in full.
"""

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from .capabilities import archs_with
from .dtypes import numpy_float
from .scratch import pooled_ndarray
from .session import running_arch
from .taichi import (
    BACKEND,
    Field,
    Ndarray,
    ScalarField,
    ScalarNdarray,
    has_offset,
    host_view,
    index_offset,
    memory_view,
    require_current,
    runtime_generation,
    ti,
)

_PRIMITIVE_TYPES = tuple(ti.types.primitive_types.all_types)


@dataclass(frozen=True)
class Elements:
    """What a Taichi field or ndarray holds: its index shape and its element shape
    (``()`` scalar, ``(n,)`` vector, ``(n, m)`` matrix)."""

    shape: tuple[int, ...]
    element: tuple[int, ...]

    @property
    def flat_shape(self) -> tuple[int, ...]:
        return self.shape + self.element

    def describe(self) -> str:
        if not self.element:
            return f"scalar {self.shape}"
        kind = "vector" if len(self.element) == 1 else "matrix"
        return f"{kind} {'x'.join(map(str, self.element))} {self.shape}"


def _is_struct(value: Any) -> bool:
    return type(value).__name__ == "StructField"


def elements_of(value: Any, name: str) -> Elements:
    """The index and element shape of a Taichi field or ndarray; TypeError for anything else
    (struct fields and quantized dtypes among them)."""
    if not isinstance(value, (Field, Ndarray)) or _is_struct(value):
        got = "a struct field (ti.Struct.field)" if _is_struct(value) else type(value).__name__
        raise TypeError(
            f"{name}: expected a Taichi field or ndarray (scalar, vector or matrix "
            f"elements), got {got}"
        )
    require_current(value, name)
    # A quantized type (ti.types.quant, in a BitpackedFields or quant_array) cannot even be
    # hashed (Taichi raises "[type.cpp:hash@47] Not supported."), so it is refused here,
    # before any lookup by dtype; == comparisons work for every type.
    if not any(value.dtype == primitive for primitive in _PRIMITIVE_TYPES):
        raise TypeError(
            f"{name}: expected dtype f32 or f64, got the quantized type {value.dtype} "
            "(ti.types.quant types are not supported; copy the data into an f32 field)"
        )
    refusal = sparse_refusal(value, name)
    if refusal is not None:
        raise TypeError(refusal)
    shape = tuple(value.shape)
    if isinstance(value, (ScalarField, ScalarNdarray)):
        return Elements(shape, ())
    n = int(value.n)
    m = getattr(value, "m", 1)
    is_matrix = getattr(value, "ndim", 1) == 2 if isinstance(value, Field) else hasattr(value, "m")
    return Elements(shape, (n, int(m)) if is_matrix else (n,))


_SPARSE_SNODES = ("pointer", "bitmasked", "dynamic", "hash")
# Where tiinterp reads and writes sparse fields.
SPARSE_ARCHS = archs_with(BACKEND, "sparse_fields")


def sparse_snodes(value: Any) -> tuple[str, ...]:
    """The sparse SNodes (their kinds) above a field's cells; () for an ndarray."""
    if not isinstance(value, Field):
        return ()
    found = []
    node = value.snode.ptr
    while node is not None:
        if node.type.name in _SPARSE_SNODES:
            found.append(node.type.name)
        node = node.parent
    return tuple(found)


def is_sparse(value: Any) -> bool:
    """Whether a field lies under a sparse SNode, whose cells can be inactive."""
    return bool(sparse_snodes(value))


def sparse_refusal(value: Any, name: str) -> str | None:
    """Why ``value``, a sparse field, cannot be read on this arch; None where it can."""
    kinds = sparse_snodes(value)
    if not kinds:
        return None
    arch = running_arch()
    if arch in SPARSE_ARCHS:
        return None
    return (
        f"{name}: expected a field without sparse SNodes on arch {arch!r}, got one under "
        f"{' and '.join(kinds)} SNodes (tiinterp reads sparse fields on "
        f"{' and '.join(SPARSE_ARCHS)}: {BACKEND}'s {arch} backend loses or crashes on "
        "their cells); copy it into a dense field, or run on the CPU"
    )


def is_plain(value: Any) -> bool:
    """A scalar ndarray: already the flat array, no copy needed."""
    return isinstance(value, ScalarNdarray)


@ti.func
def _index_with(index, a: ti.template()):
    """``index`` extended by one component index."""
    return ti.Vector([index[d] for d in ti.static(range(index.n))] + [a])


@ti.func
def _index_with_two(index, a: ti.template(), b: ti.template()):
    return ti.Vector([index[d] for d in ti.static(range(index.n))] + [a, b])


@ti.func
def _field_index(data: ti.template(), local):
    """The index of ``data`` at position ``local`` of the flat array: shifted by the
    field's ``offset=`` (Taichi indexes a field declared with offset ``o`` from ``o``)."""
    if ti.static(has_offset(data)):
        return local + ti.Vector(ti.static(index_offset(data)))
    else:
        return local


@ti.func
def _flat_index(data: ti.template(), index):
    """The inverse of ``_field_index``."""
    if ti.static(has_offset(data)):
        return index - ti.Vector(ti.static(index_offset(data)))
    else:
        return index


@ti.func
def _element_to_flat(
    data: ti.template(), index, flat: ti.template(), local, element: ti.template()
):
    if ti.static(len(element) == 0):
        flat[local] = data[index]
    elif ti.static(len(element) == 1):
        for a in ti.static(range(element[0])):
            flat[_index_with(local, a)] = data[index][a]
    else:
        for a, b in ti.static(ti.ndrange(element[0], element[1])):
            flat[_index_with_two(local, a, b)] = data[index][a, b]


@ti.func
def _element_from_flat(flat: ti.template(), index, element: ti.template()):
    """The element at ``index`` gathered from its components along the trailing axes."""
    if ti.static(len(element) == 0):
        return flat[index]
    elif ti.static(len(element) == 1):
        return ti.Vector([flat[_index_with(index, a)] for a in ti.static(range(element[0]))])
    else:
        return ti.Matrix(
            [
                [flat[_index_with_two(index, a, b)] for b in ti.static(range(element[1]))]
                for a in ti.static(range(element[0]))
            ]
        )


@ti.func
def _element_from_flat_to(
    flat: ti.template(),
    local,
    data: ti.template(),
    index,
    element: ti.template(),
    accumulate: ti.template(),
):
    # Whole elements, not one component at a time: taichi-forge 0.7 cannot compile a
    # component store into a vector field's gradient (its IR verifier rejects it).
    if ti.static(accumulate):
        data[index] += _element_from_flat(flat, local, element)
    else:
        data[index] = _element_from_flat(flat, local, element)


# Sparse fields (bitmasked, pointer, dynamic SNodes): reads see the active cells and 0 in the
# others, as ``to_numpy`` does, through a struct-for over the active cells into a zeroed flat
# array (a bitmasked cell keeps its old value when deactivated, so reading every index would
# see it). Stores write every cell, activating it: the output holds the whole result.
# Gradients add into the active cells only: an inactive cell of an input is no data (it reads
# as 0 whatever it holds), and activating the input's gradient would activate the input
# where they share an SNode.


@ti.kernel
def _field_to_flat(data: ti.template(), flat: ti.types.ndarray(), element: ti.template()):
    for index in ti.grouped(data):
        _element_to_flat(data, index, flat, _flat_index(data, index), element)


@ti.kernel
def _ndarray_to_flat(data: ti.types.ndarray(), flat: ti.types.ndarray(), element: ti.template()):
    for index in ti.grouped(data):
        _element_to_flat(data, index, flat, index, element)


@ti.kernel
def _flat_to_field(
    flat: ti.types.ndarray(), data: ti.template(), element: ti.template(), accumulate: ti.template()
):
    if ti.static(accumulate or not is_sparse(data)):
        # A struct-for: over a dense field it runs nested loops, no index divisions.
        for index in ti.grouped(data):
            _element_from_flat_to(flat, _flat_index(data, index), data, index, element, accumulate)
    else:
        # Every cell of a sparse field, activating it.
        for local in ti.grouped(ti.ndrange(*data.shape)):
            _element_from_flat_to(flat, local, data, _field_index(data, local), element, False)


@ti.kernel
def _flat_to_ndarray(
    flat: ti.types.ndarray(),
    data: ti.types.ndarray(),
    element: ti.template(),
    accumulate: ti.template(),
):
    for index in ti.grouped(data):
        _element_from_flat_to(flat, index, data, index, element, accumulate)


# Dense fields on the CPU as NumPy views (no copies): Taichi lays out a field declared with
# ``shape=`` (one ``dense`` SNode, packed) row-major, components last, in host memory, but
# nothing promises it for every SNode tree, so the layout is checked per field, by the
# addresses of its cells (``ti.get_addr``, public API) at the origin and at both ends of
# every axis. The probe compiles once per field, as every ``ti.template()`` kernel does.
_MAX_VIEWED_FIELDS = 64
_field_views: OrderedDict[tuple[int, int], tuple[Any, Any]] = OrderedDict()


@ti.kernel
def _cell_addresses(
    data: ti.template(),
    points: ti.types.ndarray(dtype=ti.i32, ndim=2),
    addresses: ti.types.ndarray(dtype=ti.u64, ndim=2),
    element: ti.template(),
):
    for p in range(points.shape[0]):
        index = ti.Vector([points[p, d] for d in ti.static(range(len(data.shape)))])
        if ti.static(len(element) == 0):
            addresses[p, 0] = ti.get_addr(data, index)
        elif ti.static(len(element) == 1):
            for a in ti.static(range(element[0])):
                addresses[p, a] = ti.get_addr(data.get_scalar_field(a), index)
        else:
            for a, b in ti.static(ti.ndrange(element[0], element[1])):
                addresses[p, a * element[1] + b] = ti.get_addr(data.get_scalar_field(a, b), index)


def _probe_points(shape: tuple[int, ...]) -> np.ndarray:
    points = [[0] * len(shape), [n - 1 for n in shape]]
    for axis, n in enumerate(shape):
        for i in {1, n - 2, n - 1}:
            if 0 <= i < n:
                point = [0] * len(shape)
                point[axis] = i
                points.append(point)
    return np.array(points, dtype=np.int32)


def _dense_field_view(value: Any, elements: Elements, dtype: Any) -> Any:
    points = _probe_points(elements.shape)
    components = max(1, int(np.prod(elements.element, dtype=np.int64)))
    addresses = np.zeros((len(points), components), dtype=np.uint64)
    _cell_addresses(value, points, addresses, elements.element)
    base = int(addresses[0, 0])
    strides = np.array([*np.cumprod((elements.shape + (1,))[:0:-1])[::-1]], dtype=np.int64)
    expected = (points.astype(np.int64) @ strides)[:, None] * components + np.arange(components)
    if not np.array_equal(addresses.astype(np.int64) - base, expected * dtype.itemsize):
        return None
    return memory_view(base, dtype, elements.flat_shape)


def host_flat_view(value: Any, elements: Elements, dtype: Any) -> Any:
    """``value``'s memory as a NumPy array of shape ``elements.flat_shape``, or None: on the
    CPU for an ndarray, or for a dense field laid out row-major; elsewhere None."""
    if running_arch() != "cpu" or 0 in elements.flat_shape:
        return None
    if isinstance(value, Ndarray):
        return host_view(value, dtype, elements.flat_shape)
    if is_sparse(value) or has_offset(value):
        # ``ti.get_addr`` does not shift by a field's ``offset=`` (measured): not probed.
        return None
    key = (id(value), runtime_generation())
    found = _field_views.get(key)
    if found is None:
        found = _field_views[key] = (value, _dense_field_view(value, elements, dtype))
        while len(_field_views) > _MAX_VIEWED_FIELDS:
            _field_views.popitem(last=False)
    return found[1]


def flat_target(value: Any, elements: Elements, dtype: Any, slot: str, host: bool = False) -> Any:
    """Where to compute a result destined for ``value``: ``value`` itself when it is a
    scalar ndarray, with ``host`` its NumPy view where it has one (:func:`host_flat_view`),
    else a scalar ndarray from the pool's ``slot`` (one per role in a call) for
    :func:`store_flat`."""
    if is_plain(value):
        return value
    view = host_flat_view(value, elements, numpy_float(dtype)) if host else None
    return (
        view if view is not None else pooled_ndarray(numpy_float(dtype), elements.flat_shape, slot)
    )


def as_flat(value: Any, elements: Elements, dtype: Any, slot: str, host: bool = False) -> Any:
    """:func:`flat_target` holding ``value``'s data."""
    flat = flat_target(value, elements, dtype, slot, host)
    if flat is value or isinstance(flat, np.ndarray):
        return flat
    if isinstance(value, Field):
        if is_sparse(value):
            flat.fill(0)
        _field_to_flat(value, flat, elements.element)
    else:
        _ndarray_to_flat(value, flat, elements.element)
    return flat


def store_flat(flat: Any, value: Any, elements: Elements, accumulate: bool = False) -> None:
    """Write (or, ``accumulate``, add) the flat array into ``value`` (nothing to do when
    ``flat`` is ``value`` or its view)."""
    if flat is value or (isinstance(flat, np.ndarray) and not accumulate):
        return
    if accumulate:
        dtype = numpy_float(value.dtype)
        view = host_flat_view(value, elements, dtype)
        if view is not None:
            view += flat if isinstance(flat, np.ndarray) else host_view(flat, dtype)
            return
    if isinstance(value, Field):
        _flat_to_field(flat, value, elements.element, accumulate)
    else:
        _flat_to_ndarray(flat, value, elements.element, accumulate)


def gradient_of(value: Any) -> Any:
    """The gradient buffer of a field or ndarray, or None when it has none."""
    if isinstance(value, Field):
        return value.grad if value.snode.ptr.has_adjoint() else None
    return value.grad
