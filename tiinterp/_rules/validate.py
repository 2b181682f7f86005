"""Checks on user input, shared by every public function: its arrays (kind, dtype, shape,
size limits), its options, its ``layout=`` (Note [The layout argument]) and its ``out=``.
Every failure is a TypeError or ValueError that says what was expected and what was given;
nothing here launches a kernel. A resize's checks end in a :class:`ResizeCall`: the
prepared input, its :class:`~tiinterp._rules.plan.ResizeSpec` (the planner's input), and
where the result goes."""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._runtime.arrays import float_dtype, float_kind, kind_of
from .._runtime.capabilities import capabilities
from .._runtime.dtypes import numpy_float
from .._runtime.taichi import BACKEND
from .filters import (
    ALIASES,
    ALIGN_CORNERS_MODES,
    ANTIALIAS_MODES,
    MODE_CODES,
    MODE_DIMS,
    MODES,
    PADDING_CODES,
)
from .plan import ResizeSpec

if TYPE_CHECKING:
    from .._runtime.elements import Elements

# Taichi indexes ndarrays with 32-bit integers.
MAX_ELEMENTS = 2**31 - 1
# The backend's limit on an array argument's bytes, if any (taichi-forge's).
MAX_BYTES = capabilities(BACKEND, "cpu").max_array_bytes
LAYOUTS = {3: "(N, C, W)", 4: "(N, C, H, W)", 5: "(N, C, D, H, W)"}
METHODS = ("adjoint", "autodiff")


def as_float_array(value, name: str, layouts: dict[int, str] = LAYOUTS):
    """The value as a contiguous float32/float64 array of its own kind, and that kind.

    NumPy arrays of any layout or byte order are accepted (copied only when needed); the
    caller's array is never written to.
    """
    prepared, kind, _ = float_array(value, name, layouts)
    return prepared, kind


def float_array(value, name: str, layouts: dict[int, str] = LAYOUTS):
    """:func:`as_float_array`, and the array's dtype (NumPy's)."""
    kind, dtype = float_kind(value, name)
    shape = tuple(value.shape)
    if len(shape) not in layouts:
        expected = " or ".join(f"{n}-D {layout}" for n, layout in layouts.items())
        raise ValueError(f"{name}: expected a {expected} array, got shape {shape}")
    if any(extent < 1 for extent in shape[2:]):
        raise ValueError(f"{name}: expected every spatial size >= 1, got shape {shape}")
    check_element_count(shape, name, dtype.itemsize)
    return kind.prepared(value), kind, dtype


def as_companion(value, name: str, kind, like, shape: tuple[int, ...] | None = None):
    """A second array of a call (a grid, a gradient): the kind and dtype of ``like``, and
    ``shape`` when given; returned prepared like the first."""
    if kind_of(value, name) is not kind:
        raise TypeError(
            f"{name}: expected the same kind of array as the input ({kind.name}), "
            f"got {type(value).__name__}"
        )
    dtype = float_dtype(kind, like, "input")
    if float_dtype(kind, value, name) != dtype:
        raise TypeError(f"{name}: expected dtype {dtype} like the input, got {value.dtype}")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(value.shape)}")
    check_element_count(tuple(value.shape), name, dtype.itemsize)
    return kind.prepared(value)


def check_element_count(shape: Sequence[int], name: str, itemsize: int | None = None) -> None:
    """Refuse shapes past Taichi's 32-bit indexing, and on taichi-forge arrays of ``itemsize``
    bytes per element past its 32-bit byte offsets. An empty batch or channel axis counts
    as 1, so that an absurd spatial size is refused at once rather than after building
    tables for it."""
    counted = 1
    for n in shape:  # not math.prod of a generator, which TorchDynamo cannot trace
        counted *= max(n, 1)
    if counted > MAX_ELEMENTS:
        shown = _shape_text(shape)
        raise ValueError(
            f"{name}: expected at most {MAX_ELEMENTS} elements (Taichi indexes with "
            f"32-bit integers), got shape {shown}"
            + (
                ""
                if counted == math.prod(shape)
                else f" (counting each empty axis as 1: {_count(counted)})"
            )
        )
    if MAX_BYTES is not None and itemsize is not None and counted * itemsize > MAX_BYTES:
        shown = _shape_text(shape)
        raise ValueError(
            f"{name}: expected at most {MAX_BYTES // itemsize} elements of {itemsize} bytes "
            f"(taichi-forge passes arrays of at most {MAX_BYTES} bytes to its kernels), "
            f"got shape {shown}"
        )


def _all_ints(values: Sequence[Any]) -> bool:
    """Whether every value is an integer (Python's or NumPy's), bools excluded."""
    return all(
        isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))
        for v in values
    )


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(_count(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _count(n: int) -> str:
    """An integer for a message: in full, or as 8.0e+300 when it is absurdly long. Computed
    in integers: ``float(n)`` overflows past 1.8e308, and Python refuses ``str(n)`` past
    4300 digits."""
    n = int(n)
    if abs(n) < 10**15:
        return str(n)
    magnitude = abs(n)
    exponent = int(math.log10(magnitude))
    # log10 rounds: near a power of ten it may be one off.
    if 10**exponent > magnitude:
        exponent -= 1
    elif 10 ** (exponent + 1) <= magnitude:
        exponent += 1
    leading = round(magnitude / 10 ** (exponent - 1))
    if leading == 100:
        exponent, leading = exponent + 1, 10
    return f"{'-' if n < 0 else ''}{leading // 10}.{leading % 10}e+{exponent:02d}"


# Items of a sequence shown in a message before it is cut short.
_SHOWN_ITEMS = 8
_SHOWN_CHARACTERS = 200


def _shown(value: Any) -> str:
    """``repr(value)`` for a message, short: huge integers as 1.0e+400 (see ``_count``),
    long sequences cut after a few items."""
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(
        value, (bool, np.bool_)
    ):
        return repr(value) if abs(int(value)) < 10**30 else _count(int(value))
    if isinstance(value, (tuple, list)):
        items = [_shown(item) for item in value[:_SHOWN_ITEMS]]
        if len(value) > _SHOWN_ITEMS:
            items.append(f"... ({len(value)} items)")
        text = ", ".join(items)
        if isinstance(value, list):
            return f"[{text}]"
        return f"({text},)" if len(value) == 1 else f"({text})"
    if isinstance(value, np.ndarray) and value.dtype == object:
        return f"array({_shown(value.tolist())})"
    try:
        text = repr(value)
    except ValueError:  # an object holding an integer past Python's 4300 printable digits
        return f"a {type(value).__name__}"
    return text if len(text) <= _SHOWN_CHARACTERS else text[:_SHOWN_CHARACTERS] + "..."


# No array has more axes than NumPy's 64: a longer shape argument is refused by its length
# before its items are read (``tuple(range(10**12))`` would not end).
MAX_RANK = 64


def _length_text(value: Any) -> tuple[int, str]:
    """``len(value)`` and how a message says it; Python cannot return a length past
    sys.maxsize (``len(range(10**20))`` raises OverflowError)."""
    try:
        length = len(value)
    except OverflowError:
        return sys.maxsize + 1, f"more than {sys.maxsize}"
    return length, _count(length)


def shape_items(value: Any, name: str, expected: str) -> Any:
    """A shape argument's items as a tuple, read only once its length is plausible: a
    1-D NumPy array as Python numbers, a sequence of at most ``MAX_RANK`` items as they are.
    Anything else but a 0-d array is returned unchanged, for the caller's own check."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise TypeError(f"{name}: expected {expected}, got {_shown(value)} (a 0-d array)")
        if value.ndim > 1:
            raise ValueError(f"{name}: expected {expected}, got an array of shape {value.shape}")
    elif isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return value
    length, said = _length_text(value)
    if length > MAX_RANK:
        raise ValueError(
            f"{name}: expected {expected}, got {said} items (a {type(value).__name__})"
        )
    return tuple(value.tolist()) if isinstance(value, np.ndarray) else tuple(value)


def check_mode(mode, ndim: int | None = None) -> str:
    """The canonical mode name, checked against the input's number of dimensions."""
    if not isinstance(mode, str):
        raise TypeError(f"mode: expected a str, one of {MODES}, got {type(mode).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(map(repr, MODES))}, got {mode!r}")
    canonical = ALIASES.get(mode, mode)
    if ndim is not None and ndim - 2 not in MODE_DIMS[canonical]:
        layouts = " or ".join(f"{n + 2}-D {LAYOUTS[n + 2]}" for n in MODE_DIMS[canonical])
        hint = {3: "'linear'", 4: "'bilinear'", 5: "'trilinear'"}.get(ndim, "")
        suggestion = (
            f"; for a {ndim}-D input use {hint}"
            if canonical in ("linear", "bilinear", "trilinear")
            else ""
        )
        raise ValueError(
            f"mode={mode!r}: expected a {layouts} input, got a {ndim}-D input{suggestion}"
        )
    return canonical


def check_flag(value, name: str) -> bool | None:
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    raise TypeError(f"{name}: expected True, False or None, got {value!r}")


def check_align_corners(mode: str, align_corners) -> bool:
    align_corners = check_flag(align_corners, "align_corners")
    if mode not in ALIGN_CORNERS_MODES:
        if align_corners is not None:
            raise ValueError(
                f"align_corners: expected None with mode={mode!r} (it only applies to the "
                f"interpolating modes {', '.join(ALIGN_CORNERS_MODES)}), got {align_corners!r}"
            )
        return False
    return bool(align_corners)


def check_antialias(antialias, mode: str, align_corners: bool, requested_mode: str) -> bool:
    if not isinstance(antialias, (bool, np.bool_)):
        raise TypeError(f"antialias: expected True or False, got {antialias!r}")
    antialias = bool(antialias)
    if antialias and mode not in ANTIALIAS_MODES:
        raise ValueError(
            f"antialias: expected False with mode={mode!r} (antialias applies to "
            f"{', '.join(ANTIALIAS_MODES)}), got True"
        )
    if antialias and align_corners:
        raise ValueError(
            "antialias: expected False with align_corners=True (the antialias "
            "filters follow PIL's half-pixel convention only), got True"
        )
    if requested_mode in ALIASES and not antialias:
        raise ValueError(
            f"antialias: expected True with mode={requested_mode!r} (PyTorch's "
            f"name for its antialiased lanczos; use mode={ALIASES[requested_mode]!r} "
            "for the plain filter), got False"
        )
    return antialias


def check_resize_options(mode, ndim: int, align_corners, antialias):
    """The canonical mode and the checked ``align_corners`` and ``antialias`` of a resize."""
    canonical = check_mode(mode, ndim)
    align_corners = check_align_corners(canonical, align_corners)
    return canonical, align_corners, check_antialias(antialias, canonical, align_corners, mode)


def check_method(method) -> str:
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    return method


def _per_axis(value, spatial: int, name: str) -> tuple:
    """``value`` as one item per spatial axis: a number (a NumPy scalar or 0-d array too)
    repeated, or a sequence or 1-D array of ``spatial`` items; the items are not checked."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (numbers.Real, np.generic)) and not isinstance(value, (str, bytes)):
        return (value,) * spatial
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(
            f"{name}: expected a number or a sequence of {spatial} numbers, "
            f"got {type(value).__name__}"
        )
    expected = f"a number or a 1-D sequence of {spatial} numbers"
    values = shape_items(value, name, expected)
    if len(values) != spatial:
        raise ValueError(
            f"{name}: expected {spatial} values, one per spatial axis, got {len(values)}: "
            f"{_shown(value)}"
        )
    return values


def check_size(size, spatial: int, symbolic_ints: tuple[type, ...] = ()) -> tuple[Any, ...]:
    """``size`` as ``spatial`` positive ints (one given for every axis is repeated).

    Items of the ``symbolic_ints`` types (``torch.SymInt``, an extent that ``torch.export``
    or TorchDynamo traces, such as a skip connection's ``skip.shape[-2:]``) are kept as
    they are: ``int()`` of one would specialise the traced graph to one size."""
    values = _per_axis(size, spatial, "size")
    for v in values:
        integral = isinstance(v, (numbers.Integral, np.integer, *symbolic_ints))
        if isinstance(v, (bool, np.bool_)) or not integral:
            raise TypeError(f"size: expected positive integers, got {_shown(size)}")
        if v < 1:
            raise ValueError(f"size: expected positive integers, got {_shown(size)}")
    return tuple(v if isinstance(v, symbolic_ints) else int(v) for v in values)


# Comparisons with the largest float64 test finiteness: TorchDynamo traces them for a
# symbolic float too, where ``math.isfinite`` of one is a graph break.
_LARGEST_FLOAT = sys.float_info.max


def check_scale_factor(scale_factor, spatial: int) -> tuple[float, ...]:
    """``scale_factor`` as ``spatial`` positive finite floats (one given for every axis is
    repeated)."""
    values = _per_axis(scale_factor, spatial, "scale_factor")
    factors = []
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.number)):
            raise TypeError(
                f"scale_factor: expected positive finite numbers, got {_shown(scale_factor)}"
            )
        try:
            factor = float(v)
        except OverflowError:  # an int past float64's range
            factor = math.inf
        if not 0 < factor <= _LARGEST_FLOAT:  # NaN fails it too
            raise ValueError(
                f"scale_factor: expected positive finite numbers, got {_shown(scale_factor)}"
            )
        factors.append(factor)
    return tuple(factors)


def output_geometry(
    in_spatial: Sequence[int],
    size,
    scale_factor,
    recompute_scale_factor,
    symbolic_ints: tuple[type, ...] = (),
):
    """Output spatial shape and, per axis, the scale factor that sets coordinates (or None).

    PyTorch's rules: ``out = floor(in * scale_factor)``; coordinates use ``1 / scale_factor``
    unless ``recompute_scale_factor`` is True, in which case they use ``in / out``.

    Plain Python on ints and floats: ``tiinterp.torch`` calls it in code that TorchDynamo
    traces, where the extents may be symbolic ints and the factors symbolic floats. So no
    NumPy, no ``float()`` of an extent (that would specialise the graph to one shape), no
    ``math.isfinite``, and loops rather than generators.
    """
    recompute = check_flag(recompute_scale_factor, "recompute_scale_factor")
    spatial = len(in_spatial)
    if (size is None) == (scale_factor is None):
        given = "both" if size is not None else "neither"
        raise ValueError(f"expected exactly one of size and scale_factor, got {given}")
    if size is not None:
        if recompute:
            raise ValueError(
                "recompute_scale_factor: expected None or False with an explicit "
                "size (it only applies to scale_factor), got True"
            )
        return check_size(size, spatial, symbolic_ints), (None,) * spatial
    factors = check_scale_factor(scale_factor, spatial)
    products = []
    for n, f in zip(in_spatial, factors, strict=True):
        product = n * f  # float(n) * f for an int extent; symbolic for a symbolic one
        if product > _LARGEST_FLOAT:
            raise ValueError(
                f"scale_factor: expected a finite output size, got {scale_factor!r} "
                f"for spatial shape {tuple(in_spatial)}"
            )
        products.append(product)
    out_spatial = []
    for n, f, product in zip(in_spatial, factors, products, strict=True):
        m = math.floor(product)
        if m < 1:
            raise ValueError(
                f"scale_factor: {f} makes an empty output axis "
                f"(floor({n} * {f}) = {m}); expected an output size >= 1"
            )
        out_spatial.append(m)
    coords = (None,) * spatial if recompute else factors
    return tuple(out_spatial), coords


def check_input_size(input_size, grad_shape: tuple[int, ...]) -> tuple[int, ...]:
    rank = len(grad_shape)
    values = shape_items(
        input_size, "input_size", f"the forward input's full shape, a sequence of {rank} ints"
    )
    if not isinstance(values, tuple):
        raise TypeError(
            f"input_size: expected the forward input's full shape, a sequence of "
            f"{rank} ints, got {type(input_size).__name__}"
        )
    if len(values) != rank or not _all_ints(values):
        raise ValueError(
            f"input_size: expected the forward input's full shape, "
            f"{rank} ints, got {_shown(input_size)}"
        )
    values = tuple(int(v) for v in values)
    if values[:2] != grad_shape[:2]:
        raise ValueError(
            f"input_size: expected (N, C) = {grad_shape[:2]} as in grad_output, "
            f"got {_shape_text(values[:2])}"
        )
    if any(v < 1 for v in values[2:]):
        raise ValueError(f"input_size: expected every spatial size >= 1, got {_shape_text(values)}")
    check_element_count(values, "input_size")
    return values


def check_out(
    out,
    kind,
    like,
    shape: tuple[int, ...],
    sources,
    name: str = "out",
    dtype: np.dtype | None = None,
    allocate: bool = True,
):
    """Validate a caller-supplied result buffer, or allocate one like ``like`` (None
    instead, where not ``allocate``: the engine allocates it). ``dtype``: ``like``'s, where
    the caller knows it."""
    if dtype is None:
        dtype = float_dtype(kind, like, "input")
    check_element_count(shape, "output", dtype.itemsize)
    if out is None:
        return kind.empty(like, shape) if allocate else None
    if kind_of(out, name) is not kind:
        raise TypeError(
            f"{name}: expected the same kind of array as the input ({kind.name}), "
            f"got {type(out).__name__}"
        )
    if tuple(out.shape) != tuple(shape) or out.dtype != like.dtype:
        raise ValueError(
            f"{name}: expected shape {tuple(shape)} and dtype {like.dtype}, "
            f"got shape {tuple(out.shape)} and dtype {out.dtype}"
        )
    problem = kind.unusable_as_out(out, sources)
    if problem:
        raise ValueError(
            f"{name}: expected a writeable C-contiguous array separate from the "
            f"input, got one that is {problem}"
        )
    return out


def forward_spec(x: Any, dtype: np.dtype, options: tuple[Any, ...]) -> ResizeSpec:
    """The spec of ``interpolate(x, ...)`` (``x`` of ``dtype`` already checked by
    :func:`float_array`; ``options`` as :func:`forward_call` takes them)."""
    size, scale_factor, mode, align_corners, recompute_scale_factor, antialias = options
    in_shape = tuple(x.shape)
    mode, align_corners, antialias = check_resize_options(
        mode, len(in_shape), align_corners, antialias
    )
    out_spatial, coord_scales = output_geometry(
        in_shape[2:], size, scale_factor, recompute_scale_factor
    )
    return ResizeSpec(
        in_shape, out_spatial, mode, align_corners, coord_scales, dtype.name, antialias
    )


def backward_spec(
    g: Any, dtype: np.dtype, input_size: Any, options: tuple[Any, ...]
) -> tuple[ResizeSpec, str]:
    """The spec of the forward call that ``interpolate_backward(g, input_size, ...)``
    differentiates, and the checked ``method`` (``options`` as :func:`backward_call` takes
    them)."""
    mode, align_corners, scale_factor, recompute_scale_factor, antialias, method = options
    mode, align_corners, antialias = check_resize_options(
        mode, len(g.shape), align_corners, antialias
    )
    method = check_method(method)
    in_shape = check_input_size(input_size, tuple(g.shape))
    out_spatial = tuple(g.shape[2:])
    if scale_factor is None:
        _, coord_scales = output_geometry(in_shape[2:], out_spatial, None, recompute_scale_factor)
    else:
        expected, coord_scales = output_geometry(
            in_shape[2:], None, scale_factor, recompute_scale_factor
        )
        if expected != out_spatial:
            raise ValueError(
                f"grad_output: expected spatial shape {_shape_text(expected)} (floor("
                f"input_size * scale_factor)), got {out_spatial}"
            )
    spec = ResizeSpec(
        in_shape, out_spatial, mode, align_corners, coord_scales, dtype.name, antialias
    )
    return spec, method


@dataclass(frozen=True)
class ResizeCall:
    """A checked ``interpolate`` or ``interpolate_backward`` call, bound to its arrays."""

    source: Any  # the input, prepared, as (N, C, *spatial)
    kind: Any
    spec: ResizeSpec
    method: str
    result: Any  # the caller's checked out=, a new array for a layout, or None: the engine's
    out_shape: tuple[int, ...]  # the result's shape, (N, C, *spatial)
    bound: BoundLayout | None

    def target(self) -> Any:
        """Where the engine writes the ``(N, C, *spatial)`` result."""
        if self.bound is None:
            return self.result
        return self.bound.canonical_target(self.result, self.out_shape, self.kind)

    def finish(self, target: Any) -> Any:
        """The caller's result, once the engine has written ``target``."""
        if self.bound is None:
            return target
        return self.bound.finish(target, self.result)


def forward_call(input: Any, options: tuple[Any, ...], layout: Any, out: Any) -> ResizeCall:
    """Every check of an ``interpolate`` call, in one place. ``options``: its ``size``,
    ``scale_factor``, ``mode``, ``align_corners``, ``recompute_scale_factor`` and
    ``antialias``."""
    mode = options[2]
    bound = None if layout is None else bind_layout(layout, input, "input", mode)
    source = input if bound is None else bound.canonical_view(input)
    x, kind, dtype = float_array(source, "input")
    spec = forward_spec(x, dtype, options)
    caller_shape = spec.out_shape if bound is None else bound.caller_shape(spec.out_shape)
    result = check_out(
        out, kind, x, caller_shape, [input, x], dtype=dtype, allocate=bound is not None
    )
    return ResizeCall(x, kind, spec, "adjoint", result, spec.out_shape, bound)


def backward_call(
    grad_output: Any, input_size: Any, options: tuple[Any, ...], layout: Any, out: Any
) -> ResizeCall:
    """Every check of an ``interpolate_backward`` call, in one place. ``options``: its
    ``mode``, ``align_corners``, ``scale_factor``, ``recompute_scale_factor``, ``antialias``
    and ``method``."""
    mode = options[0]
    bound = None if layout is None else bind_layout(layout, grad_output, "grad_output", mode)
    source = grad_output
    if bound is not None:
        source = bound.canonical_view(grad_output)
        # Read by its length first: the layout's check takes every item of a sequence.
        rank = len(bound.lead) + bound.layout.spatial
        expected = f"the forward input's full shape in layout {layout!r}, {rank} ints"
        input_size = shape_items(input_size, "input_size", expected)
        input_size = bound.canonical_input_size(input_size)
    g, kind, dtype = float_array(source, "grad_output")
    spec, method = backward_spec(g, dtype, input_size, options)
    caller_shape = spec.in_shape if bound is None else bound.caller_shape(spec.in_shape)
    allocate = bound is not None or method == "autodiff"
    result = check_out(out, kind, g, caller_shape, [grad_output, g], dtype=dtype, allocate=allocate)
    return ResizeCall(g, kind, spec, method, result, spec.in_shape, bound)


def taichi_float(value: Any, name: str) -> str:
    dtype = numpy_float(value.dtype)
    if dtype is None:
        raise TypeError(f"{name}: expected dtype f32 or f64, got {value.dtype}")
    return dtype.name


def default_spatial_axes(elements: Elements) -> tuple[int, ...] | None:
    """The documented rule of ``interpolate_into``: vector and matrix fields are all space
    (``(H, W)`` of ``ti.Vector``); scalar ones of 3-5 axes are ``(N, C, *spatial)`` as
    :func:`interpolate` takes them, of 1-2 axes all space. None: no rule applies."""
    rank = len(elements.shape)
    if elements.element:
        return tuple(range(rank)) if 1 <= rank <= 3 else None
    if rank in LAYOUTS:
        return tuple(range(2, rank))
    return tuple(range(rank)) if rank in (1, 2) else None


def check_spatial_axes(spatial_axes: Any, elements: Elements, name: str) -> tuple[int, ...]:
    """``spatial_axes`` (None: :func:`default_spatial_axes`) as sorted, non-negative axes."""
    rank = len(elements.shape)
    if spatial_axes is None:
        axes = default_spatial_axes(elements)
        if axes is None:
            raise ValueError(
                f"{name}: expected 1-3 spatial axes, got a {elements.describe()} "
                "Taichi array whose spatial axes no default covers; name them with "
                "spatial_axes=(...)"
            )
        return axes
    if isinstance(spatial_axes, np.ndarray) and spatial_axes.ndim == 0:
        spatial_axes = spatial_axes[()]
    if isinstance(spatial_axes, numbers.Integral) and not isinstance(spatial_axes, bool):
        spatial_axes = (spatial_axes,)
    expected = "a sequence of 1-3 axis numbers"
    given = shape_items(spatial_axes, "spatial_axes", expected)
    if not isinstance(given, tuple) or not all(
        isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in given
    ):
        raise TypeError(f"spatial_axes: expected {expected}, got {_shown(spatial_axes)}")
    if not 1 <= len(given) <= 3 or any(not -rank <= a < rank for a in given):
        raise ValueError(
            f"spatial_axes: expected 1-3 axes of {name}'s {rank} "
            f"(from {-rank} to {rank - 1}), got {_shown(given)}"
        )
    axes = tuple(sorted(int(a) % rank for a in given))
    if len(set(axes)) != len(axes):
        raise ValueError(f"spatial_axes: expected distinct axes, got {given}")
    return axes


def _check_mode_for_axes(mode: Any, axes: tuple[int, ...]) -> None:
    """A mode for the number of spatial axes, said in ``interpolate_into``'s terms."""
    canonical = ALIASES.get(mode, mode) if isinstance(mode, str) else None
    if canonical not in MODE_DIMS or len(axes) in MODE_DIMS[canonical]:
        return  # check_mode reports unknown modes
    counts = " or ".join(map(str, MODE_DIMS[canonical]))
    counts += " spatial axis" if MODE_DIMS[canonical] == (1,) else " spatial axes"
    hint = {1: "'linear'", 2: "'bilinear'", 3: "'trilinear'"}[len(axes)]
    suggestion = (
        f"; for {len(axes)} use {hint}" if canonical in ("linear", "bilinear", "trilinear") else ""
    )
    raise ValueError(
        f"mode={mode!r}: expected {counts}, got {len(axes)} (spatial axes {axes}){suggestion}"
    )


@dataclass(frozen=True)
class IntoLayout:
    """``interpolate_into``'s arrays: their elements and which axes are space."""

    src: Elements
    dst: Elements
    spatial_axes: tuple[int, ...]
    dtype: str


def check_distinct(dst: Any, **inputs: Any) -> None:
    """A Taichi step's ``dst`` is none of its inputs: its kernels read them while they write
    ``dst``, so in place the numbers would be wrong (and a Tape could not give the input's
    gradient either)."""
    for name, value in inputs.items():
        if dst is value:
            raise ValueError(
                f"dst: expected another array than {name} (the step reads {name} while it "
                f"writes dst, so in place its results would be wrong), got {name} itself"
            )


def into_layout(src: Any, dst: Any, spatial_axes: Any = None) -> IntoLayout:
    """The layout of a step from ``src`` into ``dst`` (``interpolate_into`` and its kin):
    both Taichi data of one float dtype and element type, with the same number of axes,
    the same sizes on the axes that are not spatial, and within the size limits."""
    from .._runtime.elements import elements_of  # Note [Lazy kernel modules] in __init__.py

    src_elements, dst_elements = elements_of(src, "src"), elements_of(dst, "dst")
    check_distinct(dst, src=src)
    dtype = taichi_float(src, "src")
    if taichi_float(dst, "dst") != dtype:
        raise TypeError(f"dst: expected the dtype of src ({src.dtype}), got {dst.dtype}")
    if dst_elements.element != src_elements.element:
        raise TypeError(
            f"dst: expected elements like src's ({src_elements.describe()}), "
            f"got {dst_elements.describe()}"
        )
    in_shape, out_shape = src_elements.shape, dst_elements.shape
    if len(out_shape) != len(in_shape):
        raise ValueError(
            f"dst: expected {len(in_shape)} axes like src {in_shape}, got shape {out_shape}"
        )
    axes = check_spatial_axes(spatial_axes, src_elements, "src")
    for name, shape in (("src", in_shape), ("dst", out_shape)):
        if any(n < 1 for n in shape):
            raise ValueError(f"{name}: expected every axis of size >= 1, got shape {shape}")
    others = [a for a in range(len(in_shape)) if a not in axes]
    if [out_shape[a] for a in others] != [in_shape[a] for a in others]:
        if spatial_axes is None and not src_elements.element and len(in_shape) in LAYOUTS:
            raise ValueError(
                f"dst: expected (N, C) = {in_shape[:2]} as in src, got {out_shape[:2]}"
            )
        raise ValueError(
            f"dst: expected the sizes of src {in_shape} on the axes that are not "
            f"spatial {tuple(others)} (spatial axes: {axes}), got shape {out_shape}"
        )
    # Counted in bytes too: the data go through flat ndarrays (taichi-forge's 2 GiB limit).
    itemsize = np.dtype(dtype).itemsize
    check_element_count(src_elements.flat_shape, "src", itemsize)
    check_element_count(dst_elements.flat_shape, "dst", itemsize)
    return IntoLayout(src_elements, dst_elements, axes, dtype)


def into_spec(
    src: Any, dst: Any, mode: Any, align_corners: Any, antialias: Any, spatial_axes: Any = None
) -> tuple[ResizeSpec, IntoLayout]:
    """The spec of ``interpolate_into(src, dst, ...)`` (on the spatial axes alone, as a
    ``(1, 1, *spatial)`` resize) and the arrays' layout."""
    layout = into_layout(src, dst, spatial_axes)
    axes, dtype = layout.spatial_axes, layout.dtype
    in_shape, out_shape = layout.src.shape, layout.dst.shape
    _check_mode_for_axes(mode, axes)
    mode, align_corners, antialias = check_resize_options(
        mode, len(axes) + 2, align_corners, antialias
    )
    spec = ResizeSpec(
        (1, 1, *(in_shape[a] for a in axes)),
        tuple(out_shape[a] for a in axes),
        mode,
        align_corners,
        (None,) * len(axes),
        dtype,
        antialias,
    )
    return spec, layout


GRID_INPUT_LAYOUTS = {4: "(N, C, H, W)", 5: "(N, C, D, H, W)"}


def grid_sample_options(mode: Any, padding_mode: Any, dims: int) -> None:
    """Check ``grid_sample``'s mode and padding mode for ``dims`` spatial axes."""
    if not isinstance(mode, str) or mode not in MODE_CODES:
        raise ValueError(f"mode: expected one of {tuple(MODE_CODES)}, got {mode!r}")
    if mode == "bicubic" and dims == 3:
        raise ValueError(
            "mode: expected 'nearest' or 'bilinear' for a 5-D input (bicubic "
            "is 2-D only, as in PyTorch), got 'bicubic'"
        )
    if not isinstance(padding_mode, str) or padding_mode not in PADDING_CODES:
        raise ValueError(
            f"padding_mode: expected one of {tuple(PADDING_CODES)}, got {padding_mode!r}"
        )


def grid_sample_arguments(
    input: Any, grid: Any, mode: Any, padding_mode: Any, align_corners: Any
) -> tuple[Any, Any, Any, tuple[int, ...], bool]:
    """The prepared input and grid of a ``grid_sample`` call, their array kind, the output
    shape and ``align_corners`` as a bool (None is PyTorch's default, False)."""
    source, kind = as_float_array(input, "input", GRID_INPUT_LAYOUTS)
    dims = len(source.shape) - 2
    points = as_companion(grid, "grid", kind, source)
    if (
        len(points.shape) != dims + 2
        or points.shape[-1] != dims
        or points.shape[0] != source.shape[0]
    ):
        expected = "(N, H_out, W_out, 2)" if dims == 2 else "(N, D_out, H_out, W_out, 3)"
        raise ValueError(
            f"grid: expected shape {expected} with N = {source.shape[0]} for input "
            f"of shape {tuple(source.shape)}, got {tuple(points.shape)}"
        )
    grid_sample_options(mode, padding_mode, dims)
    align_corners = bool(check_flag(align_corners, "align_corners"))
    out_shape = tuple(source.shape[:2]) + tuple(points.shape[1:-1])
    check_element_count(out_shape, "output")
    return source, points, kind, out_shape, align_corners


# --- The layout= argument of interpolate and interpolate_backward --------------------------

# Note [The layout argument]
# The ``layout=`` argument of ``interpolate`` and ``interpolate_backward``: which axes of the
# caller's array are the batch, the channels and the spatial axes.
#
# Every layout is mapped onto the engine's channels-first ``(N, C, *spatial)`` by a view where
# one exists: channels-last arrays by moving their last axis to position 1, spatial-last
# arrays (``"...HW"``) by folding every leading axis into the channels of a batch of one.
# Results come back in the caller's layout and C-contiguous: a folded result is computed in
# place through a reshaped view of it, a channels-last one in a channels-first buffer that is
# then copied into it, transposing.

CHANNELS_FIRST = ("NCW", "NCHW", "NCDHW")
CHANNELS_LAST = ("NWC", "NHWC", "NDHWC")
SPATIAL_LAST = ("...W", "...HW", "...DHW")
LAYOUT_NAMES = CHANNELS_FIRST + CHANNELS_LAST + SPATIAL_LAST
_EXPECTED_LAYOUT = ", ".join(map(repr, LAYOUT_NAMES)) + " or None"
_LINEAR_NAMES = {1: "'linear'", 2: "'bilinear'", 3: "'trilinear'"}


@dataclass(frozen=True)
class Layout:
    """A checked ``layout=`` value: its name, its number of spatial axes and how its axes
    map onto ``(N, C, *spatial)``: ``"first"`` (already so), ``"last"`` (channels last) or
    ``"folded"`` (any leading axes, then the spatial ones)."""

    name: str
    spatial: int
    arrangement: str

    def bind(self, array: Any, name: str) -> BoundLayout:
        """This layout applied to the caller's ``array`` (the input, or the gradient of the
        output): its rank and spatial sizes checked, and its kind able to take a view."""
        kind = kind_of(array, name)
        shape = tuple(int(n) for n in array.shape)
        rank = self.spatial + 2
        if self.arrangement == "folded":
            if len(shape) < self.spatial:
                raise ValueError(
                    f"{name}: expected at least {self.spatial}-D for layout {self.name!r}, "
                    f"got shape {shape}"
                )
        elif len(shape) != rank:
            raise ValueError(
                f"{name}: expected {rank}-D for layout {self.name!r}, got shape {shape}"
            )
        if self.arrangement != "first" and kind.name == "taichi":
            raise TypeError(
                f"{name}: expected a NumPy array or a torch tensor for layout {self.name!r} "
                "(a Taichi ndarray has no views to rearrange its axes), got a Taichi ndarray; "
                "use tiinterp.interpolate_into(..., spatial_axes=...) for Taichi arrays in "
                "other layouts"
            )
        bound = BoundLayout(self, self._lead(shape))
        if any(n < 1 for n in bound.spatial_of(shape)):
            raise ValueError(
                f"{name}: expected every spatial size >= 1, got shape {shape} "
                f"in layout {self.name!r}"
            )
        return bound

    def check_mode(self, mode: Any) -> None:
        """Refuse a mode that does not take this layout's number of spatial axes, in the
        caller's terms (the channels-first check would name the folded rank)."""
        canonical = check_mode(mode)
        allowed = MODE_DIMS[canonical]
        if self.spatial in allowed:
            return
        counts = " or ".join(map(str, allowed))
        plural = "axis" if allowed == (1,) else "axes"
        hint = (
            f"; for layout {self.name!r} use {_LINEAR_NAMES[self.spatial]}"
            if canonical in ("linear", "bilinear", "trilinear")
            else ""
        )
        raise ValueError(
            f"mode={mode!r}: expected a layout with {counts} spatial {plural}, got layout "
            f"{self.name!r} with {self.spatial}{hint}"
        )

    def _lead(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The caller's axes that are not spatial, in order."""
        if self.arrangement == "folded":
            return shape[: len(shape) - self.spatial]
        if self.arrangement == "last":
            return (shape[0], shape[-1])
        return shape[:2]


@dataclass(frozen=True)
class BoundLayout:
    """A layout applied to one call: ``lead`` holds the caller's non-spatial axes ((N, C)
    for the fixed-rank layouts, the leading axes for the folded ones)."""

    layout: Layout
    lead: tuple[int, ...]

    def spatial_of(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The spatial axes of a shape given in the caller's layout."""
        if self.layout.arrangement == "last":
            return tuple(shape[1:-1])
        return tuple(shape[len(shape) - self.layout.spatial :])

    def canonical_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """A caller-layout shape as ``(N, C, *spatial)``."""
        shape = tuple(shape)
        if self.layout.arrangement == "last":
            return (shape[0], shape[-1], *shape[1:-1])
        if self.layout.arrangement == "folded":
            return (1, math.prod(self.lead), *self.spatial_of(shape))
        return shape

    def caller_shape(self, canonical: Sequence[int]) -> tuple[int, ...]:
        """An ``(N, C, *spatial)`` shape in the caller's layout."""
        canonical = tuple(canonical)
        if self.layout.arrangement == "last":
            return (canonical[0], *canonical[2:], canonical[1])
        if self.layout.arrangement == "folded":
            return (*self.lead, *canonical[2:])
        return canonical

    def canonical_view(self, array: Any) -> Any:
        """The caller's array as ``(N, C, *spatial)``: a view, except where folding the
        leading axes of a non-contiguous array needs a copy."""
        if self.layout.arrangement == "last":
            return _move_axis(array, -1, 1)
        if self.layout.arrangement == "folded":
            return array.reshape(self.canonical_shape(tuple(array.shape)))
        return array

    def canonical_input_size(self, input_size: Any) -> Any:
        """``interpolate_backward``'s ``input_size``, given in the caller's layout, as
        ``(N, C, *spatial)``. Only its length, and for a folded layout its leading axes, are
        checked here: the rest is the channels-first check's."""
        if isinstance(input_size, (str, bytes)) or not isinstance(
            input_size, (Sequence, np.ndarray)
        ):
            return input_size  # the channels-first check refuses it, saying what it expects
        values = tuple(input_size)
        if not _all_ints(values):
            raise ValueError(
                f"input_size: expected the forward input's full shape in layout "
                f"{self.layout.name!r}, a sequence of ints, got {input_size!r}"
            )
        values = tuple(int(v) for v in values)
        spatial = self.layout.spatial
        if self.layout.arrangement == "folded":
            if values[: len(values) - spatial] != self.lead or len(values) < spatial:
                raise ValueError(
                    f"input_size: expected the leading axes {self.lead} of grad_output "
                    f"followed by {spatial} spatial sizes (layout {self.layout.name!r}), "
                    f"got {values}"
                )
        elif len(values) != spatial + 2:
            raise ValueError(
                f"input_size: expected the forward input's full shape in layout "
                f"{self.layout.name!r}, {spatial + 2} ints, got {values}"
            )
        return self.canonical_shape(values)

    def canonical_target(self, result: Any, canonical_shape: tuple[int, ...], kind: Any) -> Any:
        """Where the engine writes the ``(N, C, *spatial)`` result: a view of ``result``
        (the caller's C-contiguous array) when that view is C-contiguous too, else a new
        channels-first buffer that :meth:`finish` copies into ``result``."""
        if self.layout.arrangement == "first":
            return result
        if self.layout.arrangement == "folded":
            # A C-contiguous array reshapes to a view.
            return _reshaped_view(result, canonical_shape)
        view = self.canonical_view(result)
        if _is_c_contiguous(view):
            return view
        return kind.empty(result, canonical_shape)

    def finish(self, target: Any, result: Any) -> Any:
        """Copy a channels-first ``target`` into the caller's ``result`` unless the engine
        wrote ``result`` itself; returns ``result``."""
        if self.layout.arrangement == "last" and not _same_memory(target, result):
            _copy(result, _move_axis(target, 1, -1))
        return result


def parse_layout(layout: Any) -> Layout | None:
    """The checked ``layout=`` argument; None for None (the default channels-first layout
    of the input's rank, as without the argument)."""
    if layout is None:
        return None
    if not isinstance(layout, str):
        raise TypeError(
            f"layout: expected a str, one of {_EXPECTED_LAYOUT}, got {type(layout).__name__}"
        )
    if layout not in LAYOUT_NAMES:
        raise ValueError(f"layout: expected one of {_EXPECTED_LAYOUT}, got {layout!r}")
    spatial = len(layout.replace("N", "").replace("C", "").replace("...", ""))
    if layout in CHANNELS_FIRST:
        return Layout(layout, spatial, "first")
    if layout in CHANNELS_LAST:
        return Layout(layout, spatial, "last")
    return Layout(layout, spatial, "folded")


def bind_layout(layout: Any, array: Any, name: str, mode: Any) -> BoundLayout | None:
    """The checked ``layout=`` of a call on ``array``, bound to it and checked against the
    mode's number of spatial axes; None for the default layout (the call's unchanged path)."""
    checked = parse_layout(layout)
    if checked is None:
        return None
    bound = checked.bind(array, name)
    checked.check_mode(mode)
    return bound


# --- The few array operations a layout needs, for NumPy arrays and torch tensors ----------


def _move_axis(array: Any, source: int, destination: int) -> Any:
    if isinstance(array, np.ndarray):
        return np.moveaxis(array, source, destination)
    return array.movedim(source, destination)


def _reshaped_view(array: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(array, np.ndarray):
        return array.reshape(shape)
    return array.view(shape)


def _is_c_contiguous(array: Any) -> bool:
    if isinstance(array, np.ndarray):
        return bool(array.flags.c_contiguous)
    return bool(array.is_contiguous())


def _same_memory(a: Any, b: Any) -> bool:
    """Whether two arrays start at one address (a view of the other, not a new buffer)."""
    if isinstance(a, np.ndarray):
        return bool(a.ctypes.data == b.ctypes.data)
    return bool(a.data_ptr() == b.data_ptr())


def _copy(target: Any, source: Any) -> None:
    if isinstance(target, np.ndarray):
        np.copyto(target, source)
    else:
        target.copy_(source)
