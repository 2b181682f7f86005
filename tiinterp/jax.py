"""JAX bridge: :func:`interpolate`, :func:`grid_sample` and :func:`scale_and_translate` as
differentiable JAX functions.

Imported only on request, ``import tiinterp.jax`` (``import tiinterp`` never imports JAX);
it needs ``pip install 'tiinterp[jax]'``: jax >= 0.4.35, the first release whose
``jax.pure_callback`` takes ``vmap_method``.

Each function checks its arguments and works out the output's shape in Python, with the
checks of tiinterp's own functions, before anything is traced: a bad argument is a
``TypeError`` or ``ValueError`` at the call, under ``jax.jit`` too. The computation is a
``jax.pure_callback`` into tiinterp's NumPy API (:func:`tiinterp.interpolate`,
:func:`tiinterp.grid_sample`), and the gradient is a ``jax.custom_vjp`` whose backward is
another callback, into :func:`tiinterp.interpolate_backward` /
:func:`tiinterp.grid_sample_backward`: tiinterp's hand-written adjoint, bit-identical on
every call. The numbers are those of tiinterp's NumPy functions, on tiinterp's current arch
(:func:`tiinterp.init`; the CPU unless chosen otherwise); the data goes through host memory
(JAX hands the callback CPU arrays, and copies them from and back to an accelerator).

What works with which JAX transformation:

- ``jax.jit``: yes. Everything but the arrays is static: ``size``, ``scale_factor``, the
  modes, ``layout`` and flags must be Python values (or concrete arrays) when the function
  is traced; a traced one is a ``TypeError`` saying so (pass it with ``static_argnames`` or
  close over it).
- ``jax.vmap``: yes, with ``vmap_method="expand_dims"``. The callback folds the vmapped
  axes into the batch axis ``N`` and makes one tiinterp call for the whole batch (every
  sample is resampled on its own, so the result is the per-sample one, bit for bit).
  ``grid_sample`` with one input and a batch of grids folds the grids into the points
  instead, so that the input is not copied once per grid; a batched input with one grid
  broadcasts the grid. Batches past Taichi's 2^31 - 1 elements per array are split into
  several calls.
- ``jax.grad``, ``jax.vjp``, ``jax.jacrev``: yes. :func:`interpolate` to any order (its
  adjoint is linear and its own adjoint is the forward); :func:`grid_sample` and
  :func:`scale_and_translate` to the first order (a second derivative raises
  ``NotImplementedError``). :func:`scale_and_translate` under ``jax.vmap`` makes one
  tiinterp call per batch item, each with its own scale and translation.
- ``jax.jvp``, ``jax.jacfwd``, ``jax.hessian``: no; forward mode is refused by JAX for a
  ``custom_vjp`` function.
- float32 and float64; float64 needs JAX's 64-bit mode switched on globally
  (``jax.config.update("jax_enable_x64", True)`` or ``JAX_ENABLE_X64=1``), without which
  JAX makes every array float32 before it reaches these functions. The thread-local
  ``with jax.enable_x64(True):`` is not enough and float64 is refused under it: JAX runs a
  callback on one of its own threads when it dispatches asynchronously, checks the
  callback's results against that thread's mode, and would cast them to float32 and fail
  on some calls only.

Coordinates and modes are :func:`tiinterp.interpolate`'s, that is PyTorch's
``F.interpolate``: channel-first ``(N, C, ...)`` arrays (other layouts with ``layout=``,
as :func:`tiinterp.interpolate` takes them), ``nearest`` and ``bicubic`` as PyTorch
computes them, ``align_corners``. ``jax.image.resize`` differs: it resizes the
axes given in ``shape`` (any layout), always with half-pixel centres and no
``align_corners``, has no ``area`` or PyTorch ``nearest``, its ``"cubic"`` is Keys
``A = -0.5`` (PyTorch's bicubic is ``A = -0.75``), and its ``antialias`` defaults to True.
Where both have a method they agree to rounding: ``lanczos3`` / ``lanczos5`` with
``antialias`` off and on, the antialiased linear family and antialiased ``bicubic``
(``jax.image.resize`` methods ``"linear"``, ``"cubic"`` with ``antialias=True``). The full
contract is ``docs/semantics.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._ops.grid_sample import grid_sample as _host_grid_sample
from ._ops.grid_sample import grid_sample_backward as _host_grid_sample_backward
from ._ops.resize import interpolate as _host_interpolate
from ._ops.resize import interpolate_backward as _host_interpolate_backward
from ._ops.scale_translate import scale_and_translate as _host_scale_and_translate
from ._ops.scale_translate import scale_and_translate_backward as _host_scale_and_translate_backward
from ._rules import validate as _validate
from ._rules.scale_translate import Geometry, check_geometry, check_parameters
from ._rules.validate import BoundLayout, bind_layout
from ._runtime.session import start_taichi

_INSTALL = "pip install 'tiinterp[jax]'"
# jax.pure_callback takes vmap_method (with "expand_dims") from jax 0.4.35 on: the change,
# jax-ml/jax#23881, missed 0.4.34 (jax-ml/jax#24193), and 0.4.34's pure_callback has no such
# argument.
_MINIMUM_JAX = (0, 4, 35)


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version string: ``"0.4.34rc1"`` -> ``(0, 4, 34)``."""
    numbers = []
    for piece in version.split(".")[:3]:
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


try:
    import jax
except ImportError as error:
    raise ImportError(
        f"tiinterp.jax needs JAX (jax and jaxlib >= 0.4.35), and `import jax` failed "
        f"({error}); install it with: {_INSTALL}"
    ) from error
if _release(jax.__version__) < _MINIMUM_JAX:
    raise ImportError(
        f"tiinterp.jax needs jax >= 0.4.35 (jax.pure_callback's vmap_method), got "
        f"jax {jax.__version__}; upgrade it with: {_INSTALL}"
    )
import jax.numpy as jnp  # noqa: E402  (after the version check, which says what is wrong)

__all__ = ["grid_sample", "interpolate", "scale_and_translate"]

# The callbacks get the vmapped axes in front (of size 1 for an argument that is not
# vmapped) and fold them into the batch axis themselves.
_VMAP_METHOD = "expand_dims"
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_GRID_LAYOUTS = {4: "(N, H_out, W_out, 2)", 5: "(N, D_out, H_out, W_out, 3)"}


# --- Argument checks (in Python, before tracing) -------------------------------------------


def _static(value: Any, name: str) -> Any:
    """A shape- or code-setting argument as a Python value: a traced JAX value is refused,
    a concrete JAX array becomes Python numbers; anything else is left to tiinterp's checks."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{name}: expected a static value (Python numbers or bools, known when the "
            "function is traced: it sets the output's shape or the kernel), got a traced JAX "
            "value; under jax.jit, mark it static (static_argnames) or close over it"
        )
    if isinstance(value, (tuple, list)):
        return tuple(_static(item, name) for item in value)
    if isinstance(value, jax.Array):
        array = np.asarray(value)
        return array.item() if array.ndim == 0 else array.tolist()
    return value


def _as_jax_array(
    value: Any, name: str, layouts: dict[int, str] | None, nonempty_spatial: bool = True
) -> Any:
    """``value`` as a float32/float64 JAX array (or tracer) of a static shape in ``layouts``
    (and, with ``nonempty_spatial``, no empty axis after the first two). ``layouts=None``
    checks the type, dtype and static shape only (the rank is a ``layout=``'s to check)."""
    if isinstance(value, np.ndarray):
        value = jnp.asarray(value)
    elif not isinstance(value, jax.Array):
        raise TypeError(
            f"{name}: expected a jax.Array (or a NumPy array), got {type(value).__name__}"
        )
    if value.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name}: expected dtype float32 or float64 (float64 needs jax_enable_x64), "
            f"got {value.dtype}"
        )
    shape = tuple(value.shape)
    if not all(isinstance(n, int) for n in shape):
        raise TypeError(f"{name}: expected a static shape (Python ints), got {shape}")
    if layouts is None:
        return value
    if len(shape) not in layouts:
        expected = " or ".join(f"{n}-D {layout}" for n, layout in layouts.items())
        raise ValueError(f"{name}: expected a {expected} array, got shape {shape}")
    if nonempty_spatial and any(n < 1 for n in shape[2:]):
        raise ValueError(f"{name}: expected every spatial size >= 1, got shape {shape}")
    _validate.check_element_count(shape, name)
    return value


def _bind_layout(layout: Any, x: Any, mode: Any) -> BoundLayout | None:
    """``layout=`` checked against ``x`` and ``mode`` as :func:`tiinterp.interpolate` checks
    it (None: channels first, the default)."""
    # The layout's checks read a NumPy array's shape; a broadcast zero has x's shape and
    # no memory behind it, so a JAX array or tracer is checked with tiinterp's own words.
    stand_in = np.broadcast_to(np.zeros((), x.dtype), x.shape)
    return bind_layout(_static(layout, "layout"), stand_in, "input", mode)


def _to_channels_first(bound: BoundLayout | None, x: Any) -> Any:
    """``x`` in the caller's layout as ``(N, C, *spatial)``, by JAX operations (a transpose
    for channels last, a reshape for the folded layouts) that jit, vmap and grad see."""
    if bound is None or bound.layout.arrangement == "first":
        return x
    if bound.layout.arrangement == "last":
        return jnp.moveaxis(x, -1, 1)
    return x.reshape(bound.canonical_shape(x.shape))


def _from_channels_first(bound: BoundLayout | None, y: Any) -> Any:
    """The inverse of :func:`_to_channels_first` for the result."""
    if bound is None or bound.layout.arrangement == "first":
        return y
    if bound.layout.arrangement == "last":
        return jnp.moveaxis(y, 1, -1)
    return y.reshape(bound.caller_shape(y.shape))


def _x64_only_in_this_thread() -> bool:
    """Whether JAX's 64-bit mode is on here through the thread-local ``jax.enable_x64``
    context only, and off globally. JAX checks a callback's results against the mode of the
    thread that runs the callback, and with asynchronous dispatch that is one of XLA's own
    threads: there a float64 result is cast to float32 and refused ("Incorrect output dtype
    ... Expected: float64, Actual: float32"), on some calls and not others."""
    x64 = getattr(getattr(jax, "_src", None), "config", None)
    state = getattr(x64, "enable_x64", None)
    if state is None or not hasattr(state, "get_global"):
        return False
    return bool(state.value) and not bool(state.get_global())


def _require_dtype(value: Any, name: str) -> None:
    """Refuse float64 now, rather than in the callback: where the arch lacks it, or where
    JAX's 64-bit mode would not reach the callback's thread."""
    if value.dtype != np.float64:
        return
    start_taichi("float64", name)
    if _x64_only_in_this_thread():
        raise ValueError(
            f"{name}: float64 needs JAX's 64-bit mode switched on globally, "
            'jax.config.update("jax_enable_x64", True) (or JAX_ENABLE_X64=1), got it on '
            "only in this thread (the jax.enable_x64 context): JAX runs callbacks on its "
            "own threads, where float64 results would be cast to float32 and refused"
        )


# --- Batches: the vmapped axes folded into N -------------------------------------------------


def _stacked(array: np.ndarray, lead: tuple[int, ...], item: tuple[int, ...]) -> np.ndarray:
    """``array`` of shape ``(*own_lead, *item)``, its leading axes (each 1 or as in
    ``lead``) broadcast to ``lead`` and flattened: ``(prod(lead), *item)``, a view unless
    only some leading axes need broadcasting."""
    batch = math.prod(lead)
    own = math.prod(array.shape[: array.ndim - len(item)])
    if own == batch:
        return array.reshape((batch, *item))
    if own == 1:
        return np.broadcast_to(array.reshape((1, *item)), (batch, *item))
    return np.broadcast_to(array, (*lead, *item)).reshape((batch, *item))


def _chunks(batch: int, item_elements: int) -> list[slice]:
    """Slices of the batch whose arrays stay within Taichi's 32-bit indexing (each item of
    at most ``item_elements`` elements, which tiinterp's checks already bound), and on
    taichi-forge within its 2^31 bytes per array, counted for float64."""
    cap = _validate.MAX_ELEMENTS
    if _validate.MAX_BYTES is not None:
        cap = min(cap, _validate.MAX_BYTES // np.dtype(np.float64).itemsize)
    step = max(1, cap // max(1, item_elements))
    return [slice(start, min(start + step, batch)) for start in range(0, batch, step)]


def _over_batch(
    batch: int,
    item_elements: int,
    run: Callable[[slice], tuple[np.ndarray, ...]],
    empty: tuple[np.ndarray, ...],
) -> tuple[np.ndarray, ...]:
    """``run`` over slices of the batch, the results joined along the batch axis."""
    if batch == 0:
        return empty
    parts = [run(part) for part in _chunks(batch, item_elements)]
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(pieces) for pieces in zip(*parts, strict=True))


def _fold(stack: np.ndarray) -> np.ndarray:
    """``(B, N, ...)`` as ``(B * N, ...)``."""
    return stack.reshape((stack.shape[0] * stack.shape[1], *stack.shape[2:]))


def _unfold(array: np.ndarray, batch: int) -> np.ndarray:
    """``(B * N, ...)`` as ``(B, N, ...)``."""
    return array.reshape((batch, array.shape[0] // batch if batch else 0, *array.shape[1:]))


def _lead(array: np.ndarray, item_ndim: int) -> tuple[int, ...]:
    return tuple(array.shape[: array.ndim - item_ndim])


# --- interpolate ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _ResizeCall:
    """A checked ``interpolate`` call: per-sample shapes and tiinterp's arguments (hashable:
    the ``custom_vjp``'s static argument)."""

    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    size: tuple[int, ...] | None
    scale_factor: tuple[float, ...] | None
    mode: str
    align_corners: bool | None
    recompute_scale_factor: bool | None
    antialias: bool

    def options(self) -> dict[str, Any]:
        """The arguments ``interpolate_backward`` shares with ``interpolate``."""
        return {
            "mode": self.mode,
            "align_corners": self.align_corners,
            "scale_factor": self.scale_factor,
            "recompute_scale_factor": self.recompute_scale_factor,
            "antialias": self.antialias,
        }


def _resize_host(call: _ResizeCall, x: Any, adjoint: bool) -> np.ndarray:
    """The callback: ``x`` of shape ``(*lead, *source)`` resized (or, for the adjoint, its
    gradient pulled back) to ``(*lead, *target)``, one tiinterp call per chunk of ``lead``."""
    source, target = (call.out_shape, call.in_shape) if adjoint else (call.in_shape, call.out_shape)
    array = np.asarray(x)
    lead = _lead(array, len(source))
    batch = math.prod(lead)
    stack = _stacked(array, lead, source)

    def run(part: slice) -> tuple[np.ndarray, ...]:
        folded = _fold(stack[part])
        if adjoint:
            shape = (folded.shape[0], *target[1:])
            result = _host_interpolate_backward(folded, shape, **call.options())
        else:
            result = _host_interpolate(folded, call.size, **call.options())
        return (_unfold(result, part.stop - part.start),)

    empty = (np.empty((0, *target), array.dtype),)
    elements = max(math.prod(source), math.prod(target))
    (result,) = _over_batch(batch, elements, run, empty)
    return result.reshape((*lead, *target))


@dataclasses.dataclass(frozen=True)
class _Host:
    """A callback: ``function(call, *arrays, **options)``. Equal calls make equal callbacks,
    so JAX's caches (eager dispatch, jit) find the computation they compiled before (a new
    ``functools.partial`` each time would make JAX compile every eager call anew)."""

    function: Callable[..., Any]
    call: Any
    adjoint: bool | None = None

    def __call__(self, *arrays: Any) -> Any:
        if self.adjoint is None:
            return self.function(self.call, *arrays)
        return self.function(self.call, *arrays, adjoint=self.adjoint)


def _resize_callback(call: _ResizeCall, x: Any, adjoint: bool) -> Any:
    shape = call.in_shape if adjoint else call.out_shape
    return jax.pure_callback(
        _Host(_resize_host, call, adjoint),
        jax.ShapeDtypeStruct(shape, x.dtype),
        x,
        vmap_method=_VMAP_METHOD,
    )


# The resize is linear in its input: its vjp is the adjoint, whose vjp is the resize again,
# so each is the other's custom_vjp rule and reverse mode works to any order.
@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _resize(call: _ResizeCall, x: Any) -> Any:
    return _resize_callback(call, x, adjoint=False)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _resize_adjoint(call: _ResizeCall, g: Any) -> Any:
    return _resize_callback(call, g, adjoint=True)


def _first_derivatives_only(name: str) -> Callable[..., Any]:
    """The backward rule of an op's gradient: a second derivative of ``name`` is refused."""

    def refuse(*_: Any) -> Any:
        raise NotImplementedError(
            f"tiinterp.jax.{name}: expected first derivatives only (jax.grad, jax.vjp); "
            "its second derivatives are not implemented"
        )

    return refuse


def _resize_fwd(call: _ResizeCall, x: Any) -> tuple[Any, None]:
    return _resize(call, x), None


def _resize_bwd(call: _ResizeCall, _: None, g: Any) -> tuple[Any]:
    return (_resize_adjoint(call, g),)


def _resize_adjoint_fwd(call: _ResizeCall, g: Any) -> tuple[Any, None]:
    return _resize_adjoint(call, g), None


def _resize_adjoint_bwd(call: _ResizeCall, _: None, h: Any) -> tuple[Any]:
    return (_resize(call, h),)


_resize.defvjp(_resize_fwd, _resize_bwd)
_resize_adjoint.defvjp(_resize_adjoint_fwd, _resize_adjoint_bwd)


def interpolate(
    input: Any,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
    *,
    layout: str | None = None,
) -> Any:
    """Resize a batch of signals, images or volumes: :func:`tiinterp.interpolate` for JAX.

    The arguments and the numbers are :func:`tiinterp.interpolate`'s, but ``out`` (JAX arrays
    are immutable). Differentiable with respect to ``input`` by ``jax.grad`` / ``jax.vjp`` (to
    any order: the gradient is tiinterp's deterministic adjoint), and usable under ``jax.jit``
    and ``jax.vmap`` (see the module's documentation).

    Parameters
    ----------
    input : jax.Array of shape (N, C, W), (N, C, H, W) or (N, C, D, H, W), or as ``layout`` says
        float32, or float64 with ``jax_enable_x64``; a NumPy array is taken as
        ``jnp.asarray`` makes it. Never modified.
    size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
        As in :func:`tiinterp.interpolate`. Static: Python values (or concrete arrays) when
        the function is traced.
    layout : str, optional
        As in :func:`tiinterp.interpolate`; static. JAX transposes a channels-last array to
        channels first and back around the callback, and reshapes a spatial-last one, so
        ``jit``, ``vmap`` and ``grad`` see ordinary JAX operations.

    Returns
    -------
    jax.Array of shape (N, C, *out_spatial), or the output's shape in ``layout``
        The input's dtype.

    Raises
    ------
    TypeError
        As :func:`tiinterp.interpolate`, and for an input that is not a JAX or NumPy array, or
        a traced (non-static) ``size``, ``scale_factor`` or flag.
    ValueError
        As :func:`tiinterp.interpolate`, and for float64 while JAX's 64-bit mode is on only in
        this thread (the ``jax.enable_x64`` context).

    Examples
    --------
    >>> import jax
    >>> import jax.numpy as jnp
    >>> import tiinterp.jax
    >>> x = jnp.array([[[[0.0, 1.0], [2.0, 3.0]]]])  # (N, C, H, W) = (1, 1, 2, 2)
    >>> tiinterp.jax.interpolate(x, size=3, mode="bilinear", align_corners=True)[0, 0]
    Array([[0. , 0.5, 1. ],
           [1. , 1.5, 2. ],
           [2. , 2.5, 3. ]], dtype=float32)
    >>> def loss(x):
    ...     return tiinterp.jax.interpolate(x, scale_factor=2, mode="bilinear").sum()
    >>> jax.jit(jax.grad(loss))(x)[0, 0]  # each input sample feeds 4 outputs in all
    Array([[4., 4.],
           [4., 4.]], dtype=float32)
    >>> jax.vmap(lambda x: tiinterp.jax.interpolate(x, size=(4, 5)))(jnp.stack([x, x])).shape
    (2, 1, 1, 4, 5)
    >>> images = jnp.zeros((2, 8, 8, 3))  # (N, H, W, C)
    >>> tiinterp.jax.interpolate(images, size=(4, 6), mode="bilinear", layout="NHWC").shape
    (2, 4, 6, 3)
    """
    x = _as_jax_array(input, "input", None)
    bound = _bind_layout(layout, x, mode)
    x = _as_jax_array(_to_channels_first(bound, x), "input", _validate.LAYOUTS)
    size = _static(size, "size")
    scale_factor = _static(scale_factor, "scale_factor")
    align_corners = _validate.check_flag(_static(align_corners, "align_corners"), "align_corners")
    recompute_scale_factor = _validate.check_flag(
        _static(recompute_scale_factor, "recompute_scale_factor"), "recompute_scale_factor"
    )
    antialias = _static(antialias, "antialias")
    in_shape = tuple(x.shape)
    _, _, antialias = _validate.check_resize_options(mode, len(in_shape), align_corners, antialias)
    out_spatial, _ = _validate.output_geometry(
        in_shape[2:], size, scale_factor, recompute_scale_factor
    )
    out_shape = in_shape[:2] + tuple(out_spatial)
    _validate.check_element_count(out_shape, "output")
    _require_dtype(x, "input")
    call = _ResizeCall(
        in_shape=in_shape,
        out_shape=out_shape,
        size=None if size is None else tuple(out_spatial),
        scale_factor=(
            None
            if scale_factor is None
            else _validate.check_scale_factor(scale_factor, len(out_spatial))
        ),
        mode=mode,
        align_corners=align_corners,
        recompute_scale_factor=recompute_scale_factor,
        antialias=antialias,
    )
    return _from_channels_first(bound, _resize(call, x))


# --- grid_sample ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _GridCall:
    """A checked ``grid_sample`` call: per-sample shapes and tiinterp's arguments."""

    in_shape: tuple[int, ...]
    grid_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    mode: str
    padding_mode: str
    align_corners: bool

    def options(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "padding_mode": self.padding_mode,
            "align_corners": self.align_corners,
        }


def _sample_one_input(call: _GridCall, source: np.ndarray, grids: np.ndarray) -> np.ndarray:
    """One input ``(N, C, *S)`` sampled at a batch of grids ``(B, N, *P, D)``: the grids
    become more points of one call, ``(N, B * P_0, *P[1:], D)``; the result is
    ``(B, N, C, *P)``."""
    batch, points = grids.shape[0], call.grid_shape[1:-1]

    def run(part: slice) -> tuple[np.ndarray, ...]:
        count = part.stop - part.start
        merged = np.moveaxis(grids[part], 0, 1).reshape(
            (call.grid_shape[0], count * points[0], *call.grid_shape[2:])
        )
        result = _host_grid_sample(source, merged, **call.options())
        result = result.reshape((*call.out_shape[:2], count, *points))
        return (np.moveaxis(result, 2, 0),)

    empty = (np.empty((0, *call.out_shape), source.dtype),)
    elements = max(math.prod(call.grid_shape), math.prod(call.out_shape))
    return _over_batch(batch, elements, run, empty)[0]


def _grid_sample_host(call: _GridCall, x: Any, grid: Any) -> np.ndarray:
    """The forward callback: ``x`` ``(*lead, *in_shape)`` at ``grid`` ``(*lead, *grid_shape)``
    (each lead axis 1 where that argument is not vmapped)."""
    x, grid = np.asarray(x), np.asarray(grid)
    x_lead, grid_lead = _lead(x, len(call.in_shape)), _lead(grid, len(call.grid_shape))
    lead = tuple(np.broadcast_shapes(x_lead, grid_lead))
    batch = math.prod(lead)
    grids = _stacked(grid, lead, call.grid_shape)
    if math.prod(x_lead) == 1 and batch > 1:
        result = _sample_one_input(call, x.reshape(call.in_shape), grids)
        return result.reshape((*lead, *call.out_shape))
    sources = _stacked(x, lead, call.in_shape)

    def run(part: slice) -> tuple[np.ndarray, ...]:
        result = _host_grid_sample(_fold(sources[part]), _fold(grids[part]), **call.options())
        return (_unfold(result, part.stop - part.start),)

    empty = (np.empty((0, *call.out_shape), x.dtype),)
    elements = max(map(math.prod, (call.in_shape, call.grid_shape, call.out_shape)))
    (result,) = _over_batch(batch, elements, run, empty)
    return result.reshape((*lead, *call.out_shape))


def _grid_sample_backward_host(
    call: _GridCall, g: Any, x: Any, grid: Any
) -> tuple[np.ndarray, np.ndarray]:
    """The backward callback: both gradients, per batch item (``(*lead, *in_shape)`` and
    ``(*lead, *grid_shape)``), whichever arguments are vmapped."""
    g, x, grid = np.asarray(g), np.asarray(x), np.asarray(grid)
    lead = tuple(
        np.broadcast_shapes(
            _lead(g, len(call.out_shape)),
            _lead(x, len(call.in_shape)),
            _lead(grid, len(call.grid_shape)),
        )
    )
    batch = math.prod(lead)
    stacks = [
        _stacked(array, lead, shape)
        for array, shape in ((g, call.out_shape), (x, call.in_shape), (grid, call.grid_shape))
    ]

    def run(part: slice) -> tuple[np.ndarray, ...]:
        count = part.stop - part.start
        g_part, x_part, grid_part = (_fold(stack[part]) for stack in stacks)
        grads = _host_grid_sample_backward(g_part, x_part, grid_part, **call.options())
        return tuple(_unfold(grad, count) for grad in grads)

    empty = (np.empty((0, *call.in_shape), x.dtype), np.empty((0, *call.grid_shape), x.dtype))
    elements = max(map(math.prod, (call.in_shape, call.grid_shape, call.out_shape)))
    grad_input, grad_grid = _over_batch(batch, elements, run, empty)
    return (
        grad_input.reshape((*lead, *call.in_shape)),
        grad_grid.reshape((*lead, *call.grid_shape)),
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _grid_sample(call: _GridCall, x: Any, grid: Any) -> Any:
    return jax.pure_callback(
        _Host(_grid_sample_host, call),
        jax.ShapeDtypeStruct(call.out_shape, x.dtype),
        x,
        grid,
        vmap_method=_VMAP_METHOD,
    )


# The backward is itself a custom_vjp, only so that differentiating it says what is missing
# (JAX would report that pure callbacks have no JVP).
@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _grid_sample_grads(call: _GridCall, g: Any, x: Any, grid: Any) -> Any:
    shapes = (
        jax.ShapeDtypeStruct(call.in_shape, x.dtype),
        jax.ShapeDtypeStruct(call.grid_shape, x.dtype),
    )
    return jax.pure_callback(
        _Host(_grid_sample_backward_host, call),
        shapes,
        g,
        x,
        grid,
        vmap_method=_VMAP_METHOD,
    )


def _grid_sample_fwd(call: _GridCall, x: Any, grid: Any) -> tuple[Any, tuple[Any, Any]]:
    return _grid_sample(call, x, grid), (x, grid)


def _grid_sample_bwd(call: _GridCall, residuals: tuple[Any, Any], g: Any) -> tuple[Any, Any]:
    x, grid = residuals
    grad_input, grad_grid = _grid_sample_grads(call, g, x, grid)
    return grad_input, grad_grid


def _grid_sample_grads_fwd(call: _GridCall, g: Any, x: Any, grid: Any) -> tuple[Any, None]:
    return _grid_sample_grads(call, g, x, grid), None


_grid_sample.defvjp(_grid_sample_fwd, _grid_sample_bwd)
_grid_sample_grads.defvjp(_grid_sample_grads_fwd, _first_derivatives_only("grid_sample"))


def grid_sample(
    input: Any,
    grid: Any,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Any:
    """Sample ``input`` at the points of ``grid``: :func:`tiinterp.grid_sample` for JAX.

    The arguments and the numbers are :func:`tiinterp.grid_sample`'s, but ``out``.
    Differentiable with respect to both ``input`` and ``grid`` by ``jax.grad`` / ``jax.vjp``
    (first order; the gradients are those of :func:`tiinterp.grid_sample_backward`, tiinterp's
    deterministic adjoints) and usable under ``jax.jit`` and ``jax.vmap`` (see the module's
    documentation).

    Parameters
    ----------
    input : jax.Array of shape (N, C, H, W) or (N, C, D, H, W)
        float32, or float64 with ``jax_enable_x64``; a NumPy array is taken as
        ``jnp.asarray`` makes it. Never modified.
    grid : jax.Array of shape (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3)
        The input's dtype; the points as in :func:`tiinterp.grid_sample`.
    mode, padding_mode
        As in :func:`tiinterp.grid_sample`.
    align_corners : bool, optional
        As in :func:`tiinterp.grid_sample`; None, the default as in ``F.grid_sample``, means
        False. Static.

    Returns
    -------
    jax.Array of shape (N, C, *grid.shape[1:-1])
        The input's dtype.

    Raises
    ------
    TypeError
        As :func:`tiinterp.grid_sample`, and for an input or grid that is not a JAX or NumPy
        array, or a traced ``align_corners``.
    ValueError
        As :func:`tiinterp.grid_sample`, and for float64 while JAX's 64-bit mode is on only in
        this thread (the ``jax.enable_x64`` context).

    Examples
    --------
    >>> import jax
    >>> import jax.numpy as jnp
    >>> import tiinterp.jax
    >>> x = jnp.array([[[[0.0, 1.0], [2.0, 3.0]]]])  # (1, 1, 2, 2)
    >>> grid = jnp.array([[[[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]]]])  # (1, 1, 3, 2): x, y
    >>> tiinterp.jax.grid_sample(x, grid, align_corners=True)
    Array([[[[0. , 1.5, 3. ]]]], dtype=float32)
    >>> def loss(x, grid):
    ...     return tiinterp.jax.grid_sample(x, grid, align_corners=True).sum()
    >>> grad_input, grad_grid = jax.grad(loss, argnums=(0, 1))(x, grid)
    >>> grad_grid[0, 0, 1]  # the centre: (W - 1) / 2 * d out / d col, (H - 1) / 2 * d out / d row
    Array([0.5, 1. ], dtype=float32)
    """
    source = _as_jax_array(input, "input", _validate.GRID_INPUT_LAYOUTS)
    dims = source.ndim - 2
    points = _as_jax_array(
        grid, "grid", {dims + 2: _GRID_LAYOUTS[dims + 2]}, nonempty_spatial=False
    )
    if points.dtype != source.dtype:
        raise TypeError(f"grid: expected dtype {source.dtype} like the input, got {points.dtype}")
    if points.shape[-1] != dims or points.shape[0] != source.shape[0]:
        raise ValueError(
            f"grid: expected shape {_GRID_LAYOUTS[dims + 2]} with N = {source.shape[0]} for input "
            f"of shape {tuple(source.shape)}, got {tuple(points.shape)}"
        )
    _validate.grid_sample_options(mode, padding_mode, dims)
    align_corners = bool(
        _validate.check_flag(_static(align_corners, "align_corners"), "align_corners")
    )
    out_shape = tuple(source.shape[:2]) + tuple(points.shape[1:-1])
    _validate.check_element_count(out_shape, "output")
    _require_dtype(source, "input")
    call = _GridCall(
        in_shape=tuple(source.shape),
        grid_shape=tuple(points.shape),
        out_shape=out_shape,
        mode=mode,
        padding_mode=padding_mode,
        align_corners=align_corners,
    )
    return _grid_sample(call, source, points)


# --- scale_and_translate -------------------------------------------------------------------


def _parameter_stacks(
    geometry: Geometry, arrays: Sequence[Any], items: Sequence[tuple[int, ...]]
) -> tuple[tuple[int, ...], list[np.ndarray]]:
    """The callback's arguments (each with its own leading vmapped axes, 1 where not
    vmapped) broadcast to one lead and stacked ``(batch, *item)``."""
    arrays = [np.asarray(a) for a in arrays]
    lead = tuple(
        np.broadcast_shapes(*(_lead(a, len(item)) for a, item in zip(arrays, items, strict=True)))
    )
    return lead, [_stacked(a, lead, item) for a, item in zip(arrays, items, strict=True)]


def _scale_and_translate_host(
    geometry: Geometry, x: Any, scale: Any, translation: Any
) -> np.ndarray:
    """The forward callback, one tiinterp call per batch item (each item has its own scale
    and translation where those are vmapped)."""
    count = len(geometry.dims)
    lead, (images, scales, shifts) = _parameter_stacks(
        geometry, (x, scale, translation), (geometry.in_shape, (count,), (count,))
    )
    dtype = images.dtype
    result = np.empty((len(images), *geometry.out_shape), dtype)
    for item, (image, s, t) in enumerate(zip(images, scales, shifts, strict=True)):
        result[item] = _host_scale_and_translate(
            np.ascontiguousarray(image),
            geometry.out_shape,
            geometry.dims,
            s,
            t,
            geometry.method,
            geometry.antialias,
        )
    return result.reshape((*lead, *geometry.out_shape))


def _scale_and_translate_grads_host(
    geometry: Geometry, g: Any, x: Any, scale: Any, translation: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The backward callback: the three gradients per batch item."""
    count = len(geometry.dims)
    lead, (grads, images, scales, shifts) = _parameter_stacks(
        geometry,
        (g, x, scale, translation),
        (geometry.out_shape, geometry.in_shape, (count,), (count,)),
    )
    batch = len(images)
    grad_image = np.empty((batch, *geometry.in_shape), images.dtype)
    grad_scale = np.empty((batch, count), images.dtype)
    grad_translation = np.empty((batch, count), images.dtype)
    for item in range(batch):
        grad_image[item], grad_scale[item], grad_translation[item] = (
            _host_scale_and_translate_backward(
                np.ascontiguousarray(grads[item]),
                np.ascontiguousarray(images[item]),
                geometry.dims,
                scales[item],
                shifts[item],
                geometry.method,
                geometry.antialias,
            )
        )
    return (
        grad_image.reshape((*lead, *geometry.in_shape)),
        grad_scale.reshape((*lead, count)),
        grad_translation.reshape((*lead, count)),
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _scale_and_translate(geometry: Geometry, x: Any, scale: Any, translation: Any) -> Any:
    return jax.pure_callback(
        _Host(_scale_and_translate_host, geometry),
        jax.ShapeDtypeStruct(geometry.out_shape, x.dtype),
        x,
        scale,
        translation,
        vmap_method=_VMAP_METHOD,
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _scale_and_translate_grads(
    geometry: Geometry, g: Any, x: Any, scale: Any, translation: Any
) -> Any:
    count = len(geometry.dims)
    shapes = (
        jax.ShapeDtypeStruct(geometry.in_shape, x.dtype),
        jax.ShapeDtypeStruct((count,), x.dtype),
        jax.ShapeDtypeStruct((count,), x.dtype),
    )
    return jax.pure_callback(
        _Host(_scale_and_translate_grads_host, geometry),
        shapes,
        g,
        x,
        scale,
        translation,
        vmap_method=_VMAP_METHOD,
    )


def _scale_and_translate_fwd(
    geometry: Geometry, x: Any, scale: Any, translation: Any
) -> tuple[Any, tuple[Any, Any, Any]]:
    return _scale_and_translate(geometry, x, scale, translation), (x, scale, translation)


def _scale_and_translate_bwd(geometry: Geometry, residuals: Any, g: Any) -> Any:
    return _scale_and_translate_grads(geometry, g, *residuals)


def _scale_and_translate_grads_fwd(geometry: Geometry, *arrays: Any) -> tuple[Any, None]:
    return _scale_and_translate_grads(geometry, *arrays), None


_scale_and_translate.defvjp(_scale_and_translate_fwd, _scale_and_translate_bwd)
_scale_and_translate_grads.defvjp(
    _scale_and_translate_grads_fwd, _first_derivatives_only("scale_and_translate")
)


def scale_and_translate(
    image: Any,
    shape: Sequence[int],
    spatial_dims: Sequence[int],
    scale: Any,
    translation: Any,
    method: str = "linear",
    antialias: bool = True,
) -> Any:
    """``jax.image.scale_and_translate``, computed by :func:`tiinterp.scale_and_translate`.

    The arguments and the numbers are JAX's (see :func:`tiinterp.scale_and_translate`);
    differentiable with respect to ``image``, ``scale`` and ``translation`` by ``jax.grad``
    / ``jax.vjp`` (first order; the gradients are
    :func:`tiinterp.scale_and_translate_backward`'s, deterministic), and usable under
    ``jax.jit`` and ``jax.vmap``, a batch of images each with its own scale and translation
    included.

    Parameters
    ----------
    image : jax.Array
        float32, or float64 with ``jax_enable_x64``; any number of axes. A NumPy array is
        taken as ``jnp.asarray`` makes it.
    shape, spatial_dims, method, antialias
        As in :func:`tiinterp.scale_and_translate`. Static.
    scale, translation : jax.Array
        One value per spatial axis, in ``image``'s dtype (other floats are converted to
        it). Traced: they may be learned. Their values are checked where they are concrete;
        under ``jax.jit``, a scale that is not positive and finite makes the callback fail.

    Returns
    -------
    jax.Array of ``shape``
        ``image``'s dtype.

    Raises
    ------
    TypeError, ValueError
        As :func:`tiinterp.scale_and_translate`.

    Examples
    --------
    >>> import jax
    >>> import jax.numpy as jnp
    >>> import tiinterp.jax
    >>> row = jnp.array([[0.0, 1.0, 2.0, 3.0]])
    >>> def loss(scale, translation):
    ...     y = tiinterp.jax.scale_and_translate(row, (1, 4), (1,), scale, translation)
    ...     return y.sum()
    >>> jax.grad(loss, argnums=1)(jnp.array([1.0]), jnp.array([0.5]))
    Array([-3.], dtype=float32)
    """
    if not isinstance(image, (jax.Array, np.ndarray)):
        raise TypeError(f"image: expected a JAX or NumPy array, got {type(image).__name__}")
    source = jnp.asarray(image)
    if source.dtype not in (jnp.float32, jnp.float64):
        raise TypeError(f"image: expected float32 or float64, got {source.dtype}")
    _require_dtype(source, "image")
    geometry = check_geometry(
        tuple(source.shape),
        _static(shape, "shape"),
        _static(spatial_dims, "spatial_dims"),
        _static(method, "method"),
        _static(antialias, "antialias"),
    )
    count = len(geometry.dims)
    parameters = []
    for value, name in ((scale, "scale"), (translation, "translation")):
        array = jnp.asarray(value, dtype=source.dtype).reshape(-1)
        if array.shape != (count,):
            raise ValueError(
                f"{name}: expected {count} numbers (one per spatial axis), got shape "
                f"{tuple(jnp.shape(value))}"
            )
        parameters.append(array)
    if not any(isinstance(p, jax.core.Tracer) for p in parameters):
        check_parameters(np.asarray(parameters[0]), np.asarray(parameters[1]), count)
    _validate.check_element_count(geometry.out_shape, "output")
    return _scale_and_translate(geometry, source, *parameters)
