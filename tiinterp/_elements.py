"""Taichi fields and ndarrays of any element type (scalar, ``ti.Vector``, ``ti.Matrix``) as
plain scalar ndarrays: the element's components become trailing axes, so that the resize and
grid_sample kernels, written for scalar arrays, serve every element type.

A field of shape ``S`` with ``n``-vector elements is the scalar array ``S + (n,)``; with
``n x m`` matrix elements, ``S + (n, m)``. Copies go both ways, and the way back can add
(for gradients) instead of assigning.
"""

from dataclasses import dataclass
from typing import Any

from ._taichi import Field, Ndarray, ScalarField, ScalarNdarray, require_current, ti


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


def elements_of(value: Any, name: str) -> Elements:
    """The index and element shape of a Taichi field or ndarray; TypeError for anything else."""
    if not isinstance(value, (Field, Ndarray)):
        raise TypeError(
            f"{name}: expected a Taichi field or ndarray (scalar, vector or matrix "
            f"elements), got {type(value).__name__}"
        )
    require_current(value, name)
    shape = tuple(value.shape)
    if isinstance(value, (ScalarField, ScalarNdarray)):
        return Elements(shape, ())
    n = int(value.n)
    m = getattr(value, "m", 1)
    is_matrix = getattr(value, "ndim", 1) == 2 if isinstance(value, Field) else hasattr(value, "m")
    return Elements(shape, (n, int(m)) if is_matrix else (n,))


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
def _copy_to_flat(data: ti.template(), flat: ti.template(), element: ti.template()):
    for index in ti.grouped(data):
        if ti.static(len(element) == 0):
            flat[index] = data[index]
        elif ti.static(len(element) == 1):
            for a in ti.static(range(element[0])):
                flat[_index_with(index, a)] = data[index][a]
        else:
            for a, b in ti.static(ti.ndrange(element[0], element[1])):
                flat[_index_with_two(index, a, b)] = data[index][a, b]


@ti.func
def _element_from_flat(flat: ti.template(), index, element: ti.template()):
    """The element at ``index`` gathered from its components along the trailing axes."""
    if ti.static(len(element) == 1):
        return ti.Vector([flat[_index_with(index, a)] for a in ti.static(range(element[0]))])
    else:
        return ti.Matrix(
            [
                [flat[_index_with_two(index, a, b)] for b in ti.static(range(element[1]))]
                for a in ti.static(range(element[0]))
            ]
        )


@ti.func
def _copy_from_flat(
    flat: ti.template(), data: ti.template(), element: ti.template(), accumulate: ti.template()
):
    # Whole elements, not one component at a time: taichi-forge 0.7 cannot compile a
    # component store into a vector field's gradient (its IR verifier rejects it).
    for index in ti.grouped(data):
        if ti.static(len(element) == 0):
            if ti.static(accumulate):
                data[index] += flat[index]
            else:
                data[index] = flat[index]
        elif ti.static(accumulate):
            data[index] += _element_from_flat(flat, index, element)
        else:
            data[index] = _element_from_flat(flat, index, element)


@ti.kernel
def _field_to_flat(data: ti.template(), flat: ti.types.ndarray(), element: ti.template()):
    _copy_to_flat(data, flat, element)


@ti.kernel
def _ndarray_to_flat(data: ti.types.ndarray(), flat: ti.types.ndarray(), element: ti.template()):
    _copy_to_flat(data, flat, element)


@ti.kernel
def _flat_to_field(
    flat: ti.types.ndarray(), data: ti.template(), element: ti.template(), accumulate: ti.template()
):
    _copy_from_flat(flat, data, element, accumulate)


@ti.kernel
def _flat_to_ndarray(
    flat: ti.types.ndarray(),
    data: ti.types.ndarray(),
    element: ti.template(),
    accumulate: ti.template(),
):
    _copy_from_flat(flat, data, element, accumulate)


def as_flat(value: Any, elements: Elements, dtype: Any) -> Any:
    """A scalar ndarray of shape ``elements.flat_shape`` holding ``value`` (``value`` itself
    when it is a scalar ndarray)."""
    if is_plain(value):
        return value
    flat = ti.ndarray(dtype, elements.flat_shape)
    if isinstance(value, Field):
        _field_to_flat(value, flat, elements.element)
    else:
        _ndarray_to_flat(value, flat, elements.element)
    return flat


def flat_target(value: Any, elements: Elements, dtype: Any) -> Any:
    """Where to compute a result destined for ``value``: ``value`` itself when it is a
    scalar ndarray, else a new scalar ndarray for :func:`store_flat`."""
    return value if is_plain(value) else ti.ndarray(dtype, elements.flat_shape)


def store_flat(flat: Any, value: Any, elements: Elements, accumulate: bool = False) -> None:
    """Write (or, ``accumulate``, add) the flat array into ``value``."""
    if flat is value:
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
