"""PyTorch bridge: tiinterp's resampling as differentiable PyTorch operators.

Imported only on request (``import tiinterp`` never imports torch)::

    import tiinterp.torch as titorch

    y = titorch.interpolate(x, scale_factor=0.25, mode="lanczos3", antialias=True)
    z = titorch.grid_sample(y, grid, mode="bicubic", padding_mode="reflection")

It needs PyTorch 2.11 or newer (``pip install 'tiinterp[torch]'``); where a dispatcher
internal it uses is missing it falls back to ``torch.library.custom_op`` (:data:`REGISTRATION`;
Note [PyTorch releases and the two registrations] in ``tiinterp/_torch_support.py``).

- :func:`interpolate` has ``F.interpolate``'s signature, :func:`grid_sample` has
  ``F.grid_sample``'s, and :class:`Resize` is an ``nn.Module`` around :func:`interpolate`.
- Each is a ``torch.library`` custom operator in the ``tiinterp`` namespace
  (``torch.ops.tiinterp.interpolate``, ``.interpolate_backward``, ``.grid_sample``,
  ``.grid_sample_grad_input``, ``.grid_sample_grad_grid``) with a fake (meta)
  implementation, an autograd kernel and a vmap rule. The backward passes are tiinterp's
  hand-written adjoints, themselves ops, so ``torch.compile(fullgraph=True)`` traces forward
  and backward without a graph break (the ops are opaque to Inductor, which compiles the
  code around them). Only the gradients that autograd asks for are computed (for
  ``grid_sample``: with respect to the input, the grid, or both).
- Forward-mode AD (``torch.autograd.forward_ad``, ``torch.func.jvp``, ``jacfwd``,
  ``gradcheck(check_forward_ad=True)``) gives the tangent: for ``interpolate``, the op
  applied to the input's tangent (it is linear in its input); for ``grid_sample``, the op
  applied to the input's tangent plus the grid's term, computed by the adjoint kernel of
  the grid's gradient (``F.grid_sample`` has no forward-mode AD).
- ``torch.func`` works: ``grad``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian`` and
  ``vmap``, nested too. ``vmap`` runs one call for the whole batch (the vmapped axis folded
  into N, or for ``grid_sample`` into whichever axis spares a copy), in pieces if the batch
  passes Taichi's 2^31 - 1 elements per array.
- ``interpolate`` is linear in its input, so its backward's own derivatives are the forward
  op: double backward (``gradgradcheck``, gradient penalties), ``hessian`` and
  forward-over-reverse work. ``grid_sample`` has first derivatives: its gradients'
  derivatives with respect to the output's gradient exist (double backward with a fixed
  grid works), those with respect to the grid (or, for the grid's gradient, the input)
  raise a ``RuntimeError`` that says so.
- Results keep the input's memory format, as ``F.interpolate``'s do: a ``channels_last``
  (4-D) or ``channels_last_3d`` (5-D) input gives an output, and a gradient with respect to
  it, in that format (computed in contiguous buffers, then copied).
- ``torch.jit.script`` compiles code that calls :func:`interpolate` and :func:`grid_sample`
  (every argument form ``F.interpolate`` takes under TorchScript) and :class:`Resize`, as
  it does ``nn.Upsample`` (Note [TorchScript and the drop-ins]).

Differences from ``F.interpolate`` / ``F.grid_sample``:

- More modes: ``lanczos3`` and ``lanczos5`` (1-3 spatial axes), and ``antialias=True`` for
  every filter (linear, bilinear, trilinear, bicubic, lanczos) in 1-3 spatial axes, where
  PyTorch antialiases only bilinear, bicubic and lanczos of 4-D inputs. Where PyTorch has the
  mode the numbers are PyTorch's (``docs/semantics.md`` gives every formula).
- Deterministic backward passes on every device: no floating-point atomics, bit-identical
  gradients from run to run, and ``torch.use_deterministic_algorithms(True)`` is fine (on
  CUDA, PyTorch's backward of the linear modes and bicubic, and of ``F.grid_sample``, has
  no deterministic implementation and raises an error under it).
- float32 and float64 only: a float16 or bfloat16 tensor (from autocast, say) is a
  ``TypeError``; convert it with ``.float()``.
- ``grid_sample``'s ``align_corners=None`` means False without PyTorch's warning.
- ``grid_sample`` keeps a ``channels_last`` input's format in its output and the input's
  gradient, where ``F.grid_sample`` returns contiguous tensors (PyTorch 2.13 on the CPU).

Devices. The tensors go to Taichi's kernels as they are, on the arch tiinterp runs on
(:func:`tiinterp.init`; the first call starts ``$TIINTERP_ARCH``, default ``"cpu"``, if
Taichi has not started). tiinterp never switches arch for you: that resets Taichi and frees
the Taichi data of your program. Contiguous tensors are not copied (others are made
contiguous first).

- arch ``"cpu"``: CPU tensors, read and written in place by the kernels.
- arch ``"cuda"``: CUDA tensors on ``cuda:0`` (the device Taichi uses), read and written in
  place on the GPU: no copy of them through the host. (A resize's per-axis tap tables,
  small NumPy arrays computed on the host, take Taichi's host-array path at each launch: a
  copy each way and a wait.) Taichi launches its kernels on CUDA's default stream, where
  PyTorch runs unless told otherwise; on another current stream, tiinterp waits for that
  stream before its kernels and for its kernels before it returns. *This path is written
  for, but not tested on, a GPU: the project's machines have none.*
- arch ``"vulkan"`` or ``"metal"``: CPU tensors, which Taichi copies to the device and back
  at every kernel launch (slower than arch ``"cpu"`` on most machines).

Any other combination (a CUDA tensor while the arch is not ``"cuda"``, a CPU tensor on
``"cuda"``, another device type) is a ``RuntimeError`` saying which ``tiinterp.init`` call
or tensor move fixes it.
"""

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ._torch_support import OLDEST_TEXT, Internals, check_version, find_internals, plain_apply

try:
    import torch
except ImportError as error:
    raise ImportError(
        f"tiinterp.torch needs PyTorch {OLDEST_TEXT} or newer, which is not installed: "
        "pip install 'tiinterp[torch]'"
    ) from error
else:
    check_version(torch.__version__)  # Note [PyTorch releases and the two registrations]
from torch import nn
from torch.autograd import forward_ad

from ._engine.passes import argument_key
from ._ops import grid_sample as grid_sampling
from ._ops.grid_sample import grid_sample as _tiinterp_grid_sample
from ._ops.resize import interpolate as _tiinterp_interpolate
from ._ops.resize import interpolate_backward as _tiinterp_interpolate_backward
from ._ops.scale_translate import scale_and_translate as _tiinterp_scale_and_translate
from ._ops.scale_translate import scale_and_translate_backward as _tiinterp_st_backward
from ._rules import validate as v
from ._rules.scale_translate import check_geometry, check_parameters
from ._runtime.session import start_taichi
from ._runtime.taichi import ti

__all__ = ["REGISTRATION", "Resize", "grid_sample", "interpolate", "scale_and_translate"]

# Note [PyTorch releases and the two registrations] in tiinterp/_torch_support.py.
_INTERNALS, _WHY_CUSTOM_OP = find_internals(torch)
REGISTRATION = "dispatcher" if _INTERNALS is not None else "custom_op"
"""How the ops' autograd kernels are registered in this PyTorch: ``"dispatcher"`` (the
bridge's own kernels: every feature of this module) or ``"custom_op"`` (the public
``torch.library.custom_op`` path, taken where a dispatcher internal is missing: no
forward-mode AD, and no ``torch.func`` transforms over the ops but ``vmap``)."""

_FLOAT_DTYPES = (torch.float32, torch.float64)


# --- Checks in the Python wrappers (before the op schemas see the arguments) ---------------


def _check_tensor(value: Any, name: str, layouts: dict[int, str]) -> None:
    """A dense float32/float64 tensor with one of ``layouts`` and non-empty spatial axes."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if value.layout != torch.strided:
        raise TypeError(f"{name}: expected a dense (strided) torch.Tensor, got {value.layout}")
    if value.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{name}: expected dtype torch.float32 or torch.float64, got {value.dtype}")
    if value.dim() not in layouts:
        expected = " or ".join(f"{n}-D {layout}" for n, layout in layouts.items())
        raise ValueError(f"{name}: expected a {expected} tensor, got shape {tuple(value.shape)}")


def _check_spatial(value: Any, name: str) -> None:
    if any(extent < 1 for extent in value.shape[2:]):
        raise ValueError(
            f"{name}: expected every spatial size >= 1, got shape {tuple(value.shape)}"
        )


def _resize_arguments(
    input: Any,
    size: Any,
    scale_factor: Any,
    mode: Any,
    align_corners: Any,
    recompute_scale_factor: Any,
    antialias: Any,
) -> tuple[list[int], list[float] | None]:
    """The interpolate op's ``output_size`` and ``scale_factor`` (None unless the scale
    factors set the sample spacing), after tiinterp's own checks of every argument."""
    _check_tensor(input, "input", v.LAYOUTS)
    _check_spatial(input, "input")
    v.check_resize_options(mode, input.dim(), align_corners, antialias)
    out_spatial, coords = v.output_geometry(
        tuple(input.shape[2:]), size, scale_factor, recompute_scale_factor, (torch.SymInt,)
    )
    v.check_element_count((*input.shape[:2], *out_spatial), "output")
    return list(out_spatial), None if coords[0] is None else list(coords)


def _checked_resize_arguments(
    input: Any, *options: Any
) -> tuple[list[int], list[float] | None, bool | None]:
    """:func:`_resize_arguments` and the checked ``align_corners``, remembered for a plain
    tensor by its dtype, layout and shape and the options with their types, all that the
    checks read (Note [Repeated calls] in _engine/passes.py): ~5 us a call (measured)."""
    key = None
    # Not while torch.compile traces: a key would guard on the exact shape (a recompile per
    # shape where the graph could take symbolic ones).
    if type(input) is torch.Tensor and not torch.compiler.is_compiling():
        options_key = argument_key(options)
        if options_key is not None:
            key = (input.dtype, input.layout, tuple(input.shape), options_key)
            checked = _CHECKED_RESIZES.get(key)
            if checked is not None:
                output_size, scales, align = checked
                return list(output_size), None if scales is None else list(scales), align
    output_size, scales = _resize_arguments(input, *options)
    align = v.check_flag(options[3], "align_corners")  # a NumPy bool is not a schema one
    if key is not None:
        if len(_CHECKED_RESIZES) >= 256:
            _CHECKED_RESIZES.clear()
        _CHECKED_RESIZES[key] = (
            tuple(output_size),
            None if scales is None else tuple(scales),
            align,
        )
    return output_size, scales, align


_CHECKED_RESIZES: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _resize_output_shape(
    input_shape: Sequence[Any], output_size: Sequence[Any], scale_factor: Sequence[float] | None
) -> tuple[Any, ...]:
    """``(N, C, *output_size)``; with ``scale_factor``, checked against
    ``floor(in * scale_factor)``, the size the wrapper computed and ``tiinterp.interpolate``
    computes. The fake (shape-only) implementation and the real one both call this."""
    if scale_factor is not None:
        expected, _ = v.output_geometry(tuple(input_shape[2:]), None, list(scale_factor), None)
        v.check_element_count((*input_shape[:2], *expected), "output")
        if tuple(expected) != tuple(output_size):
            raise ValueError(
                f"output_size: expected {tuple(expected)} (floor(input size * scale_factor)), "
                f"got {tuple(output_size)}"
            )
    return (*input_shape[:2], *output_size)


def _grid_arguments(
    input: Any, grid: Any, mode: Any, padding_mode: Any, align_corners: Any
) -> tuple[str, str, bool]:
    """The checked ``grid_sample`` arguments, ``align_corners`` as a bool."""
    _check_tensor(input, "input", v.GRID_INPUT_LAYOUTS)
    _check_spatial(input, "input")
    if not isinstance(grid, torch.Tensor):
        raise TypeError(f"grid: expected a torch.Tensor, got {type(grid).__name__}")
    if grid.dtype != input.dtype:
        raise TypeError(f"grid: expected dtype {input.dtype} like the input, got {grid.dtype}")
    if grid.layout != torch.strided:
        raise TypeError(f"grid: expected a dense (strided) torch.Tensor, got {grid.layout}")
    dims = input.dim() - 2
    if grid.dim() != dims + 2 or grid.shape[-1] != dims or grid.shape[0] != input.shape[0]:
        expected = "(N, H_out, W_out, 2)" if dims == 2 else "(N, D_out, H_out, W_out, 3)"
        raise ValueError(
            f"grid: expected shape {expected} with N = {input.shape[0]} for input of shape "
            f"{tuple(input.shape)}, got {tuple(grid.shape)}"
        )
    v.grid_sample_options(mode, padding_mode, dims)
    checked = v.check_flag(align_corners, "align_corners")
    v.check_element_count((*input.shape[:2], *grid.shape[1:-1]), "output")
    return mode, padding_mode, bool(checked)


# --- Devices: where tensors may go, without host round trips ------------------------------


def _require_device(tensor: Any, name: str) -> None:
    """Refuse a tensor that the current arch would reach only through the host, or not at
    all. Never initialises an arch other than the default: that would reset Taichi."""
    arch = start_taichi()
    device = tensor.device
    if device.type == "cpu":
        if arch == "cuda":
            raise RuntimeError(
                f"{name}: expected a CUDA tensor on cuda:0, since tiinterp runs on arch "
                "'cuda', got a CPU tensor; move it with .cuda(), or call "
                "tiinterp.init('cpu') to work on CPU tensors"
            )
        return
    if device.type == "cuda":
        if arch != "cuda":
            raise RuntimeError(
                f"{name}: expected a CPU tensor, since tiinterp runs on arch {arch!r}, got "
                f"one on {device}; call tiinterp.init('cuda') once before using CUDA tensors "
                "(it resets Taichi: Taichi fields and ndarrays made before become invalid), "
                "or move the tensor with .cpu()"
            )
        if device.index not in (None, 0):
            raise RuntimeError(
                f"{name}: expected a tensor on cuda:0, the device Taichi runs on, got one on "
                f"{device}; select the GPU with CUDA_VISIBLE_DEVICES instead"
            )
        return
    raise RuntimeError(
        f"{name}: expected a CPU or CUDA tensor, got one on {device}; move it with .cpu()"
    )


_NO_ORDER = contextlib.nullcontext()


def _stream_order(tensor: Any) -> contextlib.AbstractContextManager[None]:
    """Order Taichi's kernels after the work already queued on the current CUDA stream, and
    before what comes after, when that stream is not the default one that Taichi launches
    on (work on the default stream is ordered already). Nothing to order on the CPU."""
    if tensor.device.type != "cuda":
        return _NO_ORDER
    return _cuda_stream_order(tensor)


@contextlib.contextmanager
def _cuda_stream_order(tensor: Any) -> Iterator[None]:
    stream = torch.cuda.current_stream(tensor.device)
    side_stream = stream != torch.cuda.default_stream(tensor.device)
    if side_stream:
        stream.synchronize()
    yield
    if side_stream:
        ti.sync()


# --- The operators ------------------------------------------------------------------------
#
# Defined with torch.library's lower-level API, not ``torch.library.custom_op``: custom_op
# installs its own autograd kernel, an autograd.Function with a backward formula only, so
# forward-mode AD got no tangent without an error (a zero from ``torch.func.jvp``, None from
# ``torch.autograd.forward_ad``) and the ``torch.func`` transforms refused the ops
# (pytorch/pytorch#179652). Each op's autograd kernel here applies an autograd.Function with
# a backward, a jvp and setup_context (what ``torch.func`` needs); each op has a vmap rule.
# The ops stay opaque to TorchDynamo and AOTAutograd, which trace through the autograd kernel
# (an autograd.Function with a jvp in the Python wrappers would be a graph break). Where a
# dispatcher internal this needs is missing, the same kernels, schemas and formulas go
# through custom_op instead (REGISTRATION; Note [PyTorch releases and the two
# registrations] in tiinterp/_torch_support.py).

_LIB = torch.library.Library("tiinterp", "FRAGMENT")


def _define(schema: str, kernel: Callable[..., Any], fake: Callable[..., Any]) -> Any:
    """Define ``tiinterp::<schema>`` with ``kernel`` for every device and ``fake`` for
    tracing; returns the op (its OpOverload)."""
    name, arguments = schema.split("(", 1)
    if _INTERNALS is None:
        defined = torch.library.custom_op(
            f"tiinterp::{name}", kernel, mutates_args=(), schema=f"({arguments}"
        )
        defined.register_fake(fake)
        return getattr(torch.ops.tiinterp, name).default
    _LIB.define(schema, tags=(torch.Tag.pt2_compliant_tag,))
    # As custom_op does: the dispatcher calls the kernel from inside compiled code, where
    # TorchDynamo must not trace it.
    _LIB.impl(name, _INTERNALS.disable_dynamo(kernel), "CompositeExplicitAutograd")
    op = getattr(torch.ops.tiinterp, name).default
    torch.library.register_fake(op, fake, lib=_LIB)
    return op


@dataclasses.dataclass(frozen=True)
class _Dispatch:
    """How an op's autograd kernel was called, for its Function's forward (the last of the
    Function's arguments): the dispatch keys below autograd, and the gradient modes."""

    keyset: Any
    grad_enabled: bool
    fwd_grad_enabled: bool


def _register_autograd(op: Any, function: Any) -> None:
    """Make ``function`` (an autograd.Function whose forward calls ``_below_autograd``) the
    op's autograd kernel; through ``register_autograd`` (its setup_context and backward)
    in the custom_op registration."""
    if _INTERNALS is None:
        _register_public_autograd(op, function)
        return
    internals = _INTERNALS
    # Under a torch.func transform the dispatcher reaches this kernel with the tensors of
    # the transform's level, on which plain autograd is what the transform needs, as for
    # PyTorch's own ops: so the Function is applied without the handover to torch.func
    # (Note [An apply without the handover to torch.func] in _torch_support.py). It then
    # records one level's graph, which torch.func allows when told so.
    apply = plain_apply(torch, function, internals.single_level_function)

    def autograd_kernel(keyset: Any, *args: Any) -> Any:
        below = keyset & internals.after_autograd_keyset
        grad_enabled = torch.is_grad_enabled()
        fwd_grad_enabled = internals.is_fwd_grad_enabled()
        # Through the Function when a gradient or a tangent may follow: an argument that
        # requires grad, or a forward-AD level (torch.autograd.forward_ad's, which
        # torch.func's jvp uses too) that its tangents could belong to. The Function's
        # forward runs with both modes off: it gets here again, and goes below autograd.
        if (grad_enabled and internals.any_requires_grad(*args)) or (
            fwd_grad_enabled and forward_ad._current_level >= 0
        ):
            with internals.single_level_autograd_function():
                return apply(*args, _Dispatch(below, grad_enabled, fwd_grad_enabled))
        with internals.below_autograd():
            return op.redispatch(below, *args)

    _LIB.impl(op._schema.name.split("::")[1], autograd_kernel, "Autograd", with_keyset=True)


def _register_public_autograd(op: Any, function: Any) -> None:
    """The custom_op registration of ``function``'s formulas: its setup_context and
    backward, without the trailing ``_Dispatch`` argument that only the dispatcher
    registration passes (its jvp has no place here: Note [PyTorch releases and the two
    registrations])."""
    count = len(op._schema.arguments)

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        function.setup_context(ctx, (*inputs, None), output)

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return tuple(function.backward(ctx, *grads)[:count])

    torch.library.register_autograd(op, backward, setup_context=setup_context, lib=_LIB)


def _below_autograd(op: Any, args: tuple[Any, ...]) -> Any:
    """A Function's forward: ``op`` on ``args`` (ending with the ``_Dispatch``), past
    autograd at this level (the dispatcher registration only)."""
    *op_args, dispatch = args
    internals = cast(Internals, _INTERNALS)  # the custom_op registration never calls forward
    # With the gradient modes of the caller, which apply turned off: where the op goes on
    # to a torch.func transform below this one (nested grad, jacfwd of jacrev, ...), it is
    # recorded there only if they are on.
    with (
        torch.set_grad_enabled(dispatch.grad_enabled),
        internals.set_fwd_grad_enabled(dispatch.fwd_grad_enabled),
        internals.below_autograd(),
    ):
        return op.redispatch(dispatch.keyset, *op_args)


def _refuse_forward_ad(name: str) -> None:
    """In the custom_op registration, PyTorch would give a forward-mode tangent of zero
    (or None) for the ops without an error; refuse it instead."""
    if _INTERNALS is None and forward_ad._current_level >= 0:
        raise RuntimeError(
            f"tiinterp.torch.{name}: forward-mode AD (torch.func.jvp, jacfwd, "
            "torch.autograd.forward_ad) needs the bridge's own autograd kernels, which this "
            f"PyTorch {torch.__version__} cannot take ({_WHY_CUSTOM_OP}); use reverse mode "
            "(backward, torch.autograd.grad), or a PyTorch release from 2.11 to 2.15"
        )


def _register_vmap(op: Any, rule: Callable[..., tuple[Any, int]]) -> None:
    """The op's batching rule for ``torch.vmap``."""
    torch.library.register_vmap(op, rule, lib=_LIB)


def _suggest_memory_format(tensor: Any) -> Any:
    """``Tensor.suggest_memory_format`` from public calls, where ``torch._prims_common``
    lacks it: channels_last (channels_last_3d) for a 4-D (5-D) tensor laid out so and not
    contiguous."""
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    chosen = formats.get(tensor.dim())
    if (
        chosen is not None
        and tensor.layout == torch.strided
        and not tensor.is_contiguous()
        and tensor.is_contiguous(memory_format=chosen)
    ):
        return chosen
    return torch.contiguous_format


try:
    from torch._prims_common import suggest_memory_format
except ImportError:
    suggest_memory_format = _suggest_memory_format


def _memory_format(tensor: Any) -> Any:
    """The memory format of results shaped like ``tensor``: PyTorch's choice for its own
    resampling ops (``Tensor.suggest_memory_format``), so that a channels_last (4-D) or
    channels_last_3d (5-D) tensor gets results in its format. Remembered by shape and
    strides (PyTorch's choice reads nothing else of a dense tensor; ~4 us a call, measured)."""
    if type(tensor) is not torch.Tensor or tensor.layout != torch.strided:
        return suggest_memory_format(tensor)
    key = (tuple(tensor.shape), tensor.stride())
    chosen = _FORMATS.get(key)
    if chosen is None:
        if len(_FORMATS) >= 1024:
            _FORMATS.clear()
        chosen = _FORMATS[key] = suggest_memory_format(tensor)
    return chosen


_FORMATS: dict[tuple[tuple[int, ...], tuple[int, ...]], Any] = {}


def _in_format(result: Any, memory_format: Any) -> Any:
    """``result`` (C-contiguous, from tiinterp) in ``memory_format``."""
    if memory_format == torch.contiguous_format:
        return result
    return result.contiguous(memory_format=memory_format)


def _empty(like: Any, shape: Sequence[Any], memory_format: Any) -> Any:
    return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=memory_format)


def _batch_slices(batch: int, item_elements: int) -> list[slice]:
    """Slices of a vmapped batch whose folded arrays stay within Taichi's 2^31 - 1 elements
    per array (each batch item having at most ``item_elements``), and on taichi-forge within
    its 2^31 bytes, counted for float64."""
    cap = v.MAX_ELEMENTS
    if v.MAX_BYTES is not None:
        cap = min(cap, v.MAX_BYTES // 8)
    step = max(1, cap // max(1, item_elements))
    return [slice(start, min(start + step, batch)) for start in range(0, max(batch, 1), step)]


def _unfold(result: Any, part: slice, inner: int, dim: int = 0) -> Any:
    """A result computed with the batch items of ``part`` folded into axis ``dim`` (of
    size ``inner`` per item) with that axis split again."""
    return result.unflatten(dim, (part.stop - part.start, inner))


def _joined(parts: list[Any], dim: int) -> Any:
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


# interpolate and its adjoint.

_RESIZE_ARGS = "SymInt[] output_size, float[]? scale_factor, str mode, bool? align_corners"


def _interpolate_kernel(
    input: torch.Tensor,
    output_size: Sequence[int],
    scale_factor: Sequence[float] | None,
    mode: str,
    align_corners: bool | None,
    antialias: bool,
) -> torch.Tensor:
    _require_device(input, "input")
    _resize_output_shape(input.shape, output_size, scale_factor)
    with _stream_order(input):
        result = _tiinterp_interpolate(
            input,
            size=None if scale_factor is not None else list(output_size),
            scale_factor=None if scale_factor is None else list(scale_factor),
            mode=mode,
            align_corners=align_corners,
            antialias=antialias,
        )
    return _in_format(result, _memory_format(input))


def _interpolate_fake(
    input: torch.Tensor, output_size: Sequence[int], scale_factor: Sequence[float] | None, *_: Any
) -> torch.Tensor:
    shape = _resize_output_shape(input.shape, output_size, scale_factor)
    return _empty(input, shape, _memory_format(input))


_interpolate_op = _define(
    f"interpolate(Tensor input, {_RESIZE_ARGS}, bool antialias) -> Tensor",
    _interpolate_kernel,
    _interpolate_fake,
)


def _interpolate_backward_kernel(
    grad_output: torch.Tensor,
    input_size: Sequence[int],
    output_size: Sequence[int],
    scale_factor: Sequence[float] | None,
    mode: str,
    align_corners: bool | None,
    antialias: bool,
) -> torch.Tensor:
    _require_device(grad_output, "grad_output")
    expected = _resize_output_shape(input_size, output_size, scale_factor)
    if tuple(grad_output.shape) != tuple(expected):
        raise ValueError(
            f"grad_output: expected shape {tuple(expected)}, got {tuple(grad_output.shape)}"
        )
    with _stream_order(grad_output):
        result = _tiinterp_interpolate_backward(
            grad_output,
            list(input_size),
            mode=mode,
            align_corners=align_corners,
            scale_factor=None if scale_factor is None else list(scale_factor),
            antialias=antialias,
        )
    return _in_format(result, _memory_format(grad_output))


def _interpolate_backward_fake(
    grad_output: torch.Tensor,
    input_size: Sequence[int],
    output_size: Sequence[int],
    scale_factor: Sequence[float] | None,
    *_: Any,
) -> torch.Tensor:
    _resize_output_shape(input_size, output_size, scale_factor)
    return _empty(grad_output, tuple(input_size), _memory_format(grad_output))


_interpolate_backward_op = _define(
    f"interpolate_backward(Tensor grad_output, SymInt[] input_size, {_RESIZE_ARGS}, "
    "bool antialias) -> Tensor",
    _interpolate_backward_kernel,
    _interpolate_backward_fake,
)


class _InterpolateFn(torch.autograd.Function):
    """Autograd of ``tiinterp::interpolate``, a map ``x -> A x`` linear in the input: its
    backward is the adjoint op (``g -> A^T g``), its jvp the op itself on the tangent. The
    gradient comes in the input's memory format."""

    @staticmethod
    def forward(*args: Any) -> Any:
        return _below_autograd(_interpolate_op, args)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        # Tangents (and gradients) of None where there are none, rather than zeros.
        ctx.set_materialize_grads(False)
        input, *options, _ = inputs
        ctx.input_size = list(input.shape)
        ctx.input_format = _memory_format(input)
        ctx.options = options

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor | None) -> tuple[Any, ...]:
        grad_input = None
        if grad is not None and ctx.needs_input_grad[0]:
            grad_input = _interpolate_backward_op(grad, ctx.input_size, *ctx.options)
            grad_input = _in_format(grad_input, ctx.input_format)
        return grad_input, None, None, None, None, None, None

    @staticmethod
    def jvp(ctx: Any, input_tangent: torch.Tensor, *_: Any) -> torch.Tensor:
        return _interpolate_op(input_tangent, *ctx.options)


class _InterpolateBackwardFn(torch.autograd.Function):
    """Autograd of ``tiinterp::interpolate_backward``, ``g -> A^T g``: its backward is the
    forward op (``A``), its jvp the adjoint op on the tangent; so double backward and
    forward-over-reverse work."""

    @staticmethod
    def forward(*args: Any) -> Any:
        return _below_autograd(_interpolate_backward_op, args)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        # Tangents (and gradients) of None where there are none, rather than zeros.
        ctx.set_materialize_grads(False)
        grad_output, input_size, *options, _ = inputs
        ctx.input_size = input_size
        ctx.grad_format = _memory_format(grad_output)
        ctx.options = options

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor | None) -> tuple[Any, ...]:
        grad_grad_output = None
        if grad is not None and ctx.needs_input_grad[0]:
            grad_grad_output = _in_format(_interpolate_op(grad, *ctx.options), ctx.grad_format)
        return grad_grad_output, None, None, None, None, None, None, None

    @staticmethod
    def jvp(ctx: Any, grad_output_tangent: torch.Tensor, *_: Any) -> torch.Tensor:
        return _interpolate_backward_op(grad_output_tangent, ctx.input_size, *ctx.options)


def _interpolate_vmap(
    info: Any, in_dims: tuple[Any, ...], input: torch.Tensor, *options: Any
) -> tuple[torch.Tensor, int]:
    """The vmapped axis folded into the batch axis N: one call, not one per item."""
    output_size = options[0]
    stack = input.movedim(in_dims[0], 0)
    batch, n, channels = stack.shape[:3]
    item = n * channels * max(math.prod(stack.shape[3:]), math.prod(output_size))
    parts = [
        _unfold(_interpolate_op(stack[part].flatten(0, 1), *options), part, n)
        for part in _batch_slices(batch, item)
    ]
    return _joined(parts, 0), 0


def _interpolate_backward_vmap(
    info: Any,
    in_dims: tuple[Any, ...],
    grad_output: torch.Tensor,
    input_size: Sequence[int],
    *options: Any,
) -> tuple[torch.Tensor, int]:
    stack = grad_output.movedim(in_dims[0], 0)
    batch, n, channels = stack.shape[:3]
    item = n * channels * max(math.prod(stack.shape[3:]), math.prod(input_size[2:]))
    parts = []
    for part in _batch_slices(batch, item):
        folded = stack[part].flatten(0, 1)
        size = [folded.shape[0], *input_size[1:]]
        parts.append(_unfold(_interpolate_backward_op(folded, size, *options), part, n))
    return _joined(parts, 0), 0


_register_autograd(_interpolate_op, _InterpolateFn)
_register_autograd(_interpolate_backward_op, _InterpolateBackwardFn)
_register_vmap(_interpolate_op, _interpolate_vmap)
_register_vmap(_interpolate_backward_op, _interpolate_backward_vmap)


# grid_sample and its two gradients.

_GRID_ARGS = "str mode, str padding_mode, bool align_corners"


def _grid_sample_kernel(
    input: torch.Tensor, grid: torch.Tensor, mode: str, padding_mode: str, align_corners: bool
) -> torch.Tensor:
    _require_device(input, "input")
    _require_device(grid, "grid")
    with _stream_order(input):
        result = _tiinterp_grid_sample(input, grid, mode, padding_mode, align_corners)
    return _in_format(result, _memory_format(input))


def _grid_sample_fake(
    input: torch.Tensor, grid: torch.Tensor, mode: str, padding_mode: str, align_corners: bool
) -> torch.Tensor:
    return _empty(input, (*input.shape[:2], *grid.shape[1:-1]), _memory_format(input))


_grid_sample_op = _define(
    f"grid_sample(Tensor input, Tensor grid, {_GRID_ARGS}) -> Tensor",
    _grid_sample_kernel,
    _grid_sample_fake,
)


def _grid_gradient_op(wrt: str) -> Any:
    """The op for the gradient of ``grid_sample`` with respect to ``wrt``, whose result has
    the shape of the input (in the input's memory format) or of the grid."""

    def kernel(
        grad_output: torch.Tensor,
        input: torch.Tensor,
        grid: torch.Tensor,
        mode: str,
        padding_mode: str,
        align_corners: bool,
    ) -> torch.Tensor:
        for name, tensor in (("grad_output", grad_output), ("input", input), ("grid", grid)):
            _require_device(tensor, name)
        with _stream_order(input):
            result = grid_sampling.grid_sample_gradient(
                wrt, grad_output, input, grid, mode, padding_mode, align_corners
            )
        return _in_format(result, _memory_format(input)) if wrt == "input" else result

    def fake(grad_output: torch.Tensor, input: torch.Tensor, grid: torch.Tensor, *_: Any) -> Any:
        if wrt == "input":
            return _empty(input, input.shape, _memory_format(input))
        return grid.new_empty(grid.shape)

    return _define(
        f"grid_sample_grad_{wrt}(Tensor grad_output, Tensor input, Tensor grid, "
        f"{_GRID_ARGS}) -> Tensor",
        kernel,
        fake,
    )


_grid_sample_grad_input_op = _grid_gradient_op("input")
_grid_sample_grad_grid_op = _grid_gradient_op("grid")


def _grid_tangent(
    input: torch.Tensor, grid: torch.Tensor, tangent: torch.Tensor, *options: Any
) -> torch.Tensor:
    """``J_grid t``: how grid_sample's output moves as the grid moves along ``tangent``
    (shaped like the grid), from the adjoint kernel of the grid's gradient. With the
    channels folded into the batch (one plane per (n, c)) and a gradient of ones, that
    kernel gives ``d out[n, c, p] / d grid[n, p, :]`` itself, which ``tangent`` weights."""
    n, channels = input.shape[:2]
    dims = input.dim() - 2
    points = grid.shape[1:-1]
    if input.numel() == 0 or grid.numel() == 0:
        return input.new_zeros((n, channels, *points))
    # Channels in groups of channels / dims: the derivatives of a group, (n, group, points,
    # dims), are then no larger than the output.
    step = max(1, channels // dims)
    parts = []
    for start in range(0, channels, step):
        planes = input[:, start : start + step]
        group = planes.shape[1]
        folded_input = planes.reshape(n * group, 1, *input.shape[2:])
        folded_grid = grid.unsqueeze(1).expand(n, group, *grid.shape[1:]).flatten(0, 1)
        ones = input.new_ones((n * group, 1, *points))
        slopes = _grid_sample_grad_grid_op(ones, folded_input, folded_grid, *options)
        parts.append((slopes.unflatten(0, (n, group)) * tangent.unsqueeze(1)).sum(-1))
    return _joined(parts, 1)


def _first_derivatives_only(wrt: str) -> RuntimeError:
    return RuntimeError(
        "tiinterp.torch.grid_sample has first derivatives only: expected no derivative of "
        f"its gradient with respect to {wrt} (from a double backward, or a jvp of the "
        "backward pass), got a request for one; the derivatives of its gradients with "
        "respect to the gradient of the output are available"
    )


class _GridSampleFn(torch.autograd.Function):
    """Autograd of ``tiinterp::grid_sample``: the backward computes only the gradients
    asked for; the jvp is the op on the input's tangent plus the grid term, ``J_grid t``."""

    @staticmethod
    def forward(*args: Any) -> Any:
        return _below_autograd(_grid_sample_op, args)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        # Tangents (and gradients) of None where there are none, rather than zeros.
        ctx.set_materialize_grads(False)
        input, grid, *options, _ = inputs
        # The input's values matter only to the grid's derivatives; its shape to all.
        ctx.save_for_backward(input, grid)
        ctx.save_for_forward(input, grid)
        ctx.options = options

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor | None) -> tuple[Any, ...]:
        input, grid = ctx.saved_tensors
        grad_input = grad_grid = None
        if grad is not None and ctx.needs_input_grad[0]:
            grad_input = _grid_sample_grad_input_op(grad, input, grid, *ctx.options)
        if grad is not None and ctx.needs_input_grad[1]:
            grad_grid = _grid_sample_grad_grid_op(grad, input, grid, *ctx.options)
        return grad_input, grad_grid, None, None, None, None

    @staticmethod
    def jvp(
        ctx: Any, input_tangent: torch.Tensor | None, grid_tangent: torch.Tensor | None, *_: Any
    ) -> torch.Tensor:
        input, grid = ctx.saved_tensors
        terms = []
        if input_tangent is not None:
            terms.append(_grid_sample_op(input_tangent, grid, *ctx.options))
        if grid_tangent is not None:
            terms.append(_grid_tangent(input, grid, grid_tangent, *ctx.options))
        return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def _grid_gradient_setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """The setup_context of both grid_sample gradient ops (grad_output, input, grid, ...)."""
    # Tangents (and gradients) of None where there are none, rather than zeros.
    ctx.set_materialize_grads(False)
    grad_output, input, grid, *options, _ = inputs
    ctx.save_for_backward(input, grid)
    ctx.save_for_forward(input, grid)
    ctx.grad_format = _memory_format(grad_output)
    ctx.options = options


def _grid_gradient_function(
    name: str,
    op: Any,
    adjoint: Callable[..., torch.Tensor],
    zero_tangent: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    refused: dict[int, str],
    doc: str,
) -> type[torch.autograd.Function]:
    """The autograd.Function of the grid_sample gradient op ``op`` (arguments
    ``grad_output, input, grid, *options``), which is linear in ``grad_output``: its
    backward is ``adjoint(input, grid, grad, *options)``, its jvp ``op`` applied to the
    tangent of ``grad_output`` (``zero_tangent(input, grid)`` where only the other arguments
    move). A derivative with respect to an argument of ``refused`` (position: name) would
    need second derivatives of the weights and is refused."""

    def refuse(requested: Sequence[bool]) -> None:
        for index, wrt in refused.items():
            if requested[index]:
                raise _first_derivatives_only(wrt)

    def forward(*args: Any) -> Any:
        return _below_autograd(op, args)

    def backward(ctx: Any, grad: torch.Tensor | None) -> tuple[Any, ...]:
        grad_grad_output = None
        if grad is not None:
            refuse(ctx.needs_input_grad)
            if ctx.needs_input_grad[0]:
                input, grid = ctx.saved_tensors
                moved = adjoint(input, grid, grad, *ctx.options)
                grad_grad_output = _in_format(moved, ctx.grad_format)
        return grad_grad_output, None, None, None, None, None, None

    def jvp(
        ctx: Any,
        grad_output_tangent: torch.Tensor | None,
        input_tangent: torch.Tensor | None,
        grid_tangent: torch.Tensor | None,
        *_: Any,
    ) -> torch.Tensor:
        refuse((False, input_tangent is not None, grid_tangent is not None))
        input, grid = ctx.saved_tensors
        if grad_output_tangent is None:
            return zero_tangent(input, grid)
        return op(grad_output_tangent, input, grid, *ctx.options)

    methods = {
        "__doc__": doc,
        "forward": staticmethod(forward),
        "setup_context": staticmethod(_grid_gradient_setup_context),
        "backward": staticmethod(backward),
        "jvp": staticmethod(jvp),
    }
    return type(name, (torch.autograd.Function,), methods)


_GridSampleGradInputFn = _grid_gradient_function(
    "_GridSampleGradInputFn",
    _grid_sample_grad_input_op,
    lambda input, grid, grad, *options: _grid_sample_op(grad, grid, *options),
    # Only the input moves: the op does not depend on its values.
    lambda input, grid: _empty(input, input.shape, _memory_format(input)).zero_(),
    {2: "the grid"},
    """Autograd of ``tiinterp::grid_sample_grad_input``, ``g -> J_input^T g``: linear in
    ``g`` (its adjoint is grid_sample itself), independent of the input's values; its
    derivative with respect to the grid would need second derivatives of the weights.""",
)
_GridSampleGradGridFn = _grid_gradient_function(
    "_GridSampleGradGridFn",
    _grid_sample_grad_grid_op,
    _grid_tangent,
    lambda input, grid: grid.new_zeros(grid.shape),
    {1: "the input", 2: "the grid"},
    """Autograd of ``tiinterp::grid_sample_grad_grid``, ``g -> J_grid^T g``: linear in
    ``g`` (its adjoint is the grid term of grid_sample's jvp); its derivatives with respect
    to the input and the grid would need other kernels.""",
)


def _grid_sample_vmap(
    info: Any,
    in_dims: tuple[Any, ...],
    input: torch.Tensor,
    grid: torch.Tensor,
    *options: Any,
) -> tuple[torch.Tensor, int]:
    """One call for the whole vmapped batch, folded into an axis that needs no copy of the
    unbatched argument: into N when both are batched, into the input's channels when only
    it is (one grid for all), into the grid's first point axis when only the grid is."""
    input_dim, grid_dim = in_dims[:2]
    batch = info.batch_size
    one_input = input if input_dim is None else input.select(input_dim, 0)
    one_grid = grid if grid_dim is None else grid.select(grid_dim, 0)
    n, channels = one_input.shape[:2]
    points = one_grid.shape[1:-1]
    item = max(one_input.numel(), one_grid.numel(), n * channels * math.prod(points))
    if input_dim is not None and grid_dim is not None:
        inputs, grids = input.movedim(input_dim, 0), grid.movedim(grid_dim, 0)
        parts = [
            _unfold(
                _grid_sample_op(inputs[part].flatten(0, 1), grids[part].flatten(0, 1), *options),
                part,
                n,
            )
            for part in _batch_slices(batch, item)
        ]
        return _joined(parts, 0), 0
    if input_dim is not None:
        inputs = input.movedim(input_dim, 1)  # (N, B, C, ...)
        parts = [
            _unfold(
                _grid_sample_op(inputs[:, part].flatten(1, 2), grid, *options), part, channels, 1
            )
            for part in _batch_slices(batch, item)
        ]
        return _joined(parts, 1), 1
    grids = grid.movedim(grid_dim, 1)  # (N, B, *points, D)
    parts = [
        _unfold(_grid_sample_op(input, grids[:, part].flatten(1, 2), *options), part, points[0], 2)
        for part in _batch_slices(batch, item)
    ]
    return _joined(parts, 2), 2


def _grid_gradient_vmap(op: Any) -> Callable[..., tuple[torch.Tensor, int]]:
    """The vmap rule of a gradient op: the batch folded into N, the unbatched arguments
    repeated along it."""

    def rule(info: Any, in_dims: tuple[Any, ...], *args: Any) -> tuple[torch.Tensor, int]:
        batch = info.batch_size
        stacks = [
            tensor.movedim(dim, 0) if dim is not None else tensor.expand(batch, *tensor.shape)
            for tensor, dim in zip(args[:3], in_dims[:3], strict=True)
        ]
        n = stacks[0].shape[1]
        item = max(stack[0].numel() for stack in stacks)
        parts = [
            _unfold(op(*(stack[part].flatten(0, 1) for stack in stacks), *args[3:]), part, n)
            for part in _batch_slices(batch, item)
        ]
        return _joined(parts, 0), 0

    return rule


for _op, _function in (
    (_grid_sample_op, _GridSampleFn),
    (_grid_sample_grad_input_op, _GridSampleGradInputFn),
    (_grid_sample_grad_grid_op, _GridSampleGradGridFn),
):
    _register_autograd(_op, _function)
_register_vmap(_grid_sample_op, _grid_sample_vmap)
for _op in (_grid_sample_grad_input_op, _grid_sample_grad_grid_op):
    _register_vmap(_op, _grid_gradient_vmap(_op))


# scale_and_translate and its gradients (NumPy underneath: CPU tensors only).

_ST_ARGS = "int[] shape, int[] spatial_dims, str method, bool antialias"


def _host(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().contiguous().numpy()


def _scale_and_translate_kernel(
    image: torch.Tensor,
    scale: torch.Tensor,
    translation: torch.Tensor,
    shape: list[int],
    spatial_dims: list[int],
    method: str,
    antialias: bool,
) -> torch.Tensor:
    result = _tiinterp_scale_and_translate(
        _host(image), shape, spatial_dims, _host(scale), _host(translation), method, antialias
    )
    return torch.from_numpy(result)


def _scale_and_translate_fake(
    image: torch.Tensor, scale: torch.Tensor, translation: torch.Tensor, shape: list[int], *_: Any
) -> torch.Tensor:
    return image.new_empty(shape)


_scale_and_translate_op = _define(
    f"scale_and_translate(Tensor image, Tensor scale, Tensor translation, {_ST_ARGS}) -> Tensor",
    _scale_and_translate_kernel,
    _scale_and_translate_fake,
)


def _scale_and_translate_grads_kernel(
    grad_output: torch.Tensor,
    image: torch.Tensor,
    scale: torch.Tensor,
    translation: torch.Tensor,
    spatial_dims: list[int],
    method: str,
    antialias: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    grads = _tiinterp_st_backward(
        _host(grad_output),
        _host(image),
        spatial_dims,
        _host(scale),
        _host(translation),
        method,
        antialias,
    )
    return tuple(torch.from_numpy(np.ascontiguousarray(g)) for g in grads)


def _scale_and_translate_grads_fake(
    grad_output: torch.Tensor, image: torch.Tensor, scale: torch.Tensor, *_: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    count = scale.shape[0]
    return image.new_empty(image.shape), image.new_empty(count), image.new_empty(count)


_scale_and_translate_grads_op = _define(
    "scale_and_translate_grads(Tensor grad_output, Tensor image, Tensor scale, "
    "Tensor translation, int[] spatial_dims, str method, bool antialias) "
    "-> (Tensor, Tensor, Tensor)",
    _scale_and_translate_grads_kernel,
    _scale_and_translate_grads_fake,
)


class _ScaleAndTranslateFn(torch.autograd.Function):
    """Autograd of ``tiinterp::scale_and_translate``: the backward gives the gradients with
    respect to the image, the scale and the translation (first order only)."""

    @staticmethod
    def forward(*args: Any) -> Any:
        return _below_autograd(_scale_and_translate_op, args)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.set_materialize_grads(False)
        image, scale, translation, _shape, spatial_dims, method, antialias, _ = inputs
        ctx.save_for_backward(image, scale, translation)
        ctx.options = (spatial_dims, method, antialias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor | None) -> tuple[Any, ...]:
        if grad is None or not any(ctx.needs_input_grad[:3]):
            return (None,) * 8
        if torch.is_grad_enabled():
            raise RuntimeError(
                "tiinterp.torch.scale_and_translate has first derivatives only: expected no "
                "derivative of its gradients (a double backward, create_graph=True), got a "
                "request for one"
            )
        image, scale, translation = ctx.saved_tensors
        grads = _scale_and_translate_grads_op(grad, image, scale, translation, *ctx.options)
        return (
            *(g if need else None for g, need in zip(grads, ctx.needs_input_grad[:3], strict=True)),
            *(None,) * 5,
        )

    @staticmethod
    def jvp(ctx: Any, *_: Any) -> torch.Tensor:
        raise RuntimeError(
            "tiinterp.torch.scale_and_translate has no forward-mode derivative: expected "
            "reverse mode (backward, torch.autograd.grad, torch.func.grad), got a jvp"
        )


_register_autograd(_scale_and_translate_op, _ScaleAndTranslateFn)


# --- The public functions -----------------------------------------------------------------

# Note [TorchScript and the drop-ins]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``torch.jit.script`` compiles every Python function that scripted code calls. The public
# functions below take two paths: in Python, tiinterp's checks, then the op; under
# TorchScript (``torch.jit.is_scripting()``, which TorchScript takes as a constant, so the
# other branch is never compiled), the op's arguments computed in TorchScript's types and
# the op itself, which checks them and the input as the Python path does (its errors reach
# the caller as ``RuntimeError``s with tiinterp's message, TorchScript's way). For
# ``interpolate`` the four ``_overload`` signatures are ``F.interpolate``'s: TorchScript
# picks one per call site from the types of ``size`` and ``scale_factor`` (int or
# list[int]; float or list[float]) and compiles the body once for each.


def _scripted_resize_arguments(
    input: torch.Tensor,
    sizes: list[int] | None,
    factors: list[float] | None,
    every_axis: bool,
    recompute: bool,
) -> tuple[list[int], list[float] | None]:
    """The interpolate op's ``output_size`` and ``scale_factor`` in TorchScript (Note
    [TorchScript and the drop-ins]): ``sizes`` or ``factors`` one per spatial axis, or one
    for every axis (``every_axis``)."""
    axes = input.dim() - 2
    output_size: list[int] = []
    scales: list[float] | None = None
    if sizes is not None:
        output_size = sizes * axes if every_axis else sizes
    elif factors is not None:
        if every_axis:
            factors = factors * axes
        fits = len(factors) == axes
        for axis in range(min(axes, len(factors))):
            extent = float(input.shape[axis + 2]) * factors[axis]
            # floor(in * factor), capped where the op refuses it all the same.
            output_size.append(math.floor(min(extent, 2.0**62)))
            fits = fits and output_size[-1] >= 1 and output_size[-1] < 2**31
        # Given the factors (always, unless recompute_scale_factor spaces the samples in /
        # out), the op checks their count and refuses an empty or too large output in
        # their terms.
        if not recompute or not fits:
            scales = factors
    return output_size, scales


# F.interpolate's signatures under TorchScript (Note [TorchScript and the drop-ins]); type
# checkers see the one below.
if not TYPE_CHECKING:

    @torch.jit._overload
    def interpolate(
        input: torch.Tensor,
        size: int | None = None,
        scale_factor: float | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        antialias: bool = False,
    ) -> torch.Tensor: ...

    @torch.jit._overload
    def interpolate(  # noqa: F811
        input: torch.Tensor,
        size: list[int] | None = None,
        scale_factor: float | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        antialias: bool = False,
    ) -> torch.Tensor: ...

    @torch.jit._overload
    def interpolate(  # noqa: F811
        input: torch.Tensor,
        size: int | None = None,
        scale_factor: list[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        antialias: bool = False,
    ) -> torch.Tensor: ...

    @torch.jit._overload
    def interpolate(  # noqa: F811
        input: torch.Tensor,
        size: list[int] | None = None,
        scale_factor: list[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        antialias: bool = False,
    ) -> torch.Tensor: ...


def interpolate(
    input: torch.Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> torch.Tensor:
    """Resize a batch of signals, images or volumes: :func:`tiinterp.interpolate` as a
    differentiable PyTorch operator, with ``F.interpolate``'s signature.

    The arguments and the numbers are :func:`tiinterp.interpolate`'s, its modes beyond
    PyTorch's included (the module's notes list the differences from ``F.interpolate``);
    there is no ``layout`` or ``out``. The backward pass is tiinterp's hand-written adjoint
    (deterministic), and the backward's own gradient is the forward, so double backward
    works; forward-mode AD gives the op applied to the input's tangent. A ``torch.library``
    custom op: works under ``torch.compile(fullgraph=True)`` without a graph break, and
    under every ``torch.func`` transform.

    Parameters
    ----------
    input : torch.Tensor of shape (N, C, W), (N, C, H, W) or (N, C, D, H, W)
        float32 or float64, dense, in any memory format; on the CPU, or on ``cuda:0`` with
        tiinterp on arch ``"cuda"`` (see the module's notes on devices). Never modified.
    size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
        As in :func:`tiinterp.interpolate`.

    Returns
    -------
    torch.Tensor of shape (N, C, *out_spatial)
        A new tensor of the input's dtype, device and memory format (``channels_last``,
        ``channels_last_3d`` or contiguous), tracked by autograd.

    Raises
    ------
    TypeError
        As :func:`tiinterp.interpolate`, and for an input that is not a dense
        ``torch.Tensor`` of dtype float32 or float64 (a NumPy array, a sparse or a float16
        tensor).
    ValueError
        As :func:`tiinterp.interpolate`.
    RuntimeError
        A tensor on a device that tiinterp's arch cannot use without a host round trip (the
        message names the ``tiinterp.init`` call or tensor move that fixes it).

    Examples
    --------
    >>> import torch
    >>> import tiinterp.torch as titorch
    >>> x = torch.tensor([[[[0.0, 1.0], [2.0, 3.0]]]], requires_grad=True)  # (1, 1, 2, 2)
    >>> y = titorch.interpolate(x, size=3, mode="bilinear", align_corners=True)
    >>> y.detach()[0, 0]
    tensor([[0.0000, 0.5000, 1.0000],
            [1.0000, 1.5000, 2.0000],
            [2.0000, 2.5000, 3.0000]])
    >>> y.sum().backward()
    >>> x.grad[0, 0]  # each input's weight, summed over the 9 outputs
    tensor([[2.2500, 2.2500],
            [2.2500, 2.2500]])
    >>> titorch.interpolate(torch.ones(1, 3, 40), scale_factor=0.25, mode="lanczos3",
    ...                     antialias=True).shape  # an antialiased 1-D lanczos: not in PyTorch
    torch.Size([1, 3, 10])
    """
    if torch.jit.is_scripting():  # Note [TorchScript and the drop-ins]
        sizes: list[int] | None = None
        factors: list[float] | None = None
        if isinstance(size, int):
            sizes = [size]
        elif size is not None:
            sizes = list(size)
        if isinstance(scale_factor, float):
            factors = [scale_factor]
        elif scale_factor is not None:
            factors = list(scale_factor)
        if (sizes is None) == (factors is None):
            raise ValueError(
                "tiinterp.torch.interpolate: expected exactly one of size and scale_factor, "
                "got both or neither"
            )
        every_axis = isinstance(size, int) or isinstance(scale_factor, float)
        recompute = recompute_scale_factor is not None and recompute_scale_factor
        output_size, scales = _scripted_resize_arguments(
            input, sizes, factors, every_axis, recompute
        )
        return torch.ops.tiinterp.interpolate(
            input, output_size, scales, mode, align_corners, antialias
        )
    else:
        output_size, scales, align = _checked_resize_arguments(
            input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
        )
        _refuse_forward_ad("interpolate")
        return _interpolate_op(input, output_size, scales, mode, align, bool(antialias))


def grid_sample(
    input: torch.Tensor,
    grid: torch.Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> torch.Tensor:
    """Sample ``input`` at the points of ``grid``: :func:`tiinterp.grid_sample` as a
    differentiable PyTorch operator, with ``F.grid_sample``'s signature.

    The arguments and the numbers are :func:`tiinterp.grid_sample`'s; there is no ``out``.
    The gradients with respect to the input and the grid are those of
    :func:`tiinterp.grid_sample_backward`, tiinterp's hand-written adjoints (deterministic:
    each input pixel adds its terms in a fixed order, no floating-point atomics); only the
    ones autograd asks for are computed. Forward-mode AD gives the tangent with respect to
    both too. A ``torch.library`` custom op: works under ``torch.compile(fullgraph=True)``
    without a graph break, and under every ``torch.func`` transform. First derivatives only
    (see the module's notes).

    Parameters
    ----------
    input : torch.Tensor of shape (N, C, H, W) or (N, C, D, H, W)
        float32 or float64, dense, in any memory format; on the CPU, or on ``cuda:0`` with
        tiinterp on arch ``"cuda"`` (see the module's notes on devices). Never modified.
    grid : torch.Tensor of shape (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3)
        The input's dtype and device; the points as in :func:`tiinterp.grid_sample`.
    mode, padding_mode
        As in :func:`tiinterp.grid_sample`.
    align_corners : bool, optional
        As in :func:`tiinterp.grid_sample`; None, the default as in ``F.grid_sample``, means
        False (without ``F.grid_sample``'s warning).

    Returns
    -------
    torch.Tensor of shape (N, C, *grid.shape[1:-1])
        A new tensor of the input's dtype, device and memory format, tracked by autograd.

    Raises
    ------
    TypeError
        As :func:`tiinterp.grid_sample`, and for an input or grid that is not a dense
        ``torch.Tensor``.
    ValueError
        As :func:`tiinterp.grid_sample`.
    RuntimeError
        A tensor on a device that tiinterp's arch cannot use without a host round trip.

    Examples
    --------
    >>> import torch
    >>> import tiinterp.torch as titorch
    >>> x = torch.tensor([[[[0.0, 1.0], [2.0, 3.0]]]], requires_grad=True)  # (1, 1, 2, 2)
    >>> grid = torch.tensor([[[[-0.5, -0.5], [0.0, 0.0], [0.5, 0.5]]]], requires_grad=True)
    >>> y = titorch.grid_sample(x, grid, align_corners=True)  # (1, 1, 1, 3)
    >>> y.detach()
    tensor([[[[0.7500, 1.5000, 2.2500]]]])
    >>> y.sum().backward()
    >>> grid.grad[0, 0]  # d y / d (x, y) per point: half the image's slope along each axis
    tensor([[0.5000, 1.0000],
            [0.5000, 1.0000],
            [0.5000, 1.0000]])
    """
    if torch.jit.is_scripting():  # Note [TorchScript and the drop-ins]
        align = align_corners is not None and align_corners
        return torch.ops.tiinterp.grid_sample(input, grid, mode, padding_mode, align)
    else:
        mode, padding_mode, align = _grid_arguments(input, grid, mode, padding_mode, align_corners)
        _refuse_forward_ad("grid_sample")
        return _grid_sample_op(input, grid, mode, padding_mode, align)


class Resize(nn.Module):
    """An ``nn.Module`` that resizes its input with :func:`interpolate` (like
    ``nn.Upsample``, with every tiinterp mode and antialiasing).

    ``torch.jit.script`` compiles it, as it does ``nn.Upsample``: the scripted module calls
    ``torch.ops.tiinterp.interpolate``, which checks the input as :func:`interpolate` does
    (TorchScript raises its errors as ``RuntimeError``, with tiinterp's message). A saved
    scripted model needs ``import tiinterp.torch`` before ``torch.jit.load``, which
    registers the op.

    Parameters
    ----------
    size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
        As in :func:`tiinterp.interpolate`.

    Raises
    ------
    TypeError, ValueError
        At construction, for the checks that do not need the input (the mode's name, both
        or neither of ``size`` and ``scale_factor``, their types and signs, a ``size`` of
        more than 2^31 - 1 elements, ``align_corners`` and ``antialias`` with a mode that
        does not take them); the rest when called, as :func:`interpolate`.

    Examples
    --------
    >>> import torch
    >>> import tiinterp.torch as titorch
    >>> shrink = titorch.Resize(scale_factor=0.5, mode="bicubic", antialias=True)
    >>> shrink
    Resize(scale_factor=0.5, mode='bicubic', antialias=True)
    >>> shrink(torch.ones(2, 3, 64, 48)).shape
    torch.Size([2, 3, 32, 24])
    """

    # The checked arguments in TorchScript's types, for the scripted forward.
    _sizes: list[int] | None
    _factors: list[float] | None
    _every_axis: bool  # one size or factor for every spatial axis
    _mode: str
    _align_corners: bool | None
    _recompute: bool
    _antialias: bool

    def __init__(
        self,
        size: int | Sequence[int] | None = None,
        scale_factor: float | Sequence[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        antialias: bool = False,
    ) -> None:
        super().__init__()
        if (size is None) == (scale_factor is None):
            given = "both" if size is not None else "neither"
            raise ValueError(f"expected exactly one of size and scale_factor, got {given}")
        canonical = v.check_mode(mode)
        checked_align = v.check_align_corners(canonical, align_corners)
        v.check_antialias(antialias, canonical, checked_align, mode)
        recompute = v.check_flag(recompute_scale_factor, "recompute_scale_factor")
        axes = _axis_count(size if size is not None else scale_factor)
        self._sizes = self._factors = None
        if size is not None:
            # The checks of tiinterp.interpolate that need no input; each empty batch or
            # channel axis counts as 1, so a size past Taichi's limit fails here already.
            self._sizes = list(v.output_geometry((1,) * axes, size, None, recompute)[0])
            v.check_element_count(self._sizes, "size")
        else:
            self._factors = list(v.check_scale_factor(scale_factor, axes))
        self._every_axis = not _per_axis(size if size is not None else scale_factor)
        self._mode = mode
        self._align_corners = v.check_flag(align_corners, "align_corners")
        self._recompute = bool(recompute)
        self._antialias = bool(antialias)
        if isinstance(size, Sequence):
            size = tuple(size)
        if isinstance(scale_factor, Sequence):
            scale_factor = tuple(scale_factor)
        self.size = size
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor
        self.antialias = bool(antialias)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``interpolate(input, ...)`` with the module's arguments.

        Parameters
        ----------
        input : torch.Tensor of shape (N, C, W), (N, C, H, W) or (N, C, D, H, W)
            As in :func:`interpolate`.

        Returns
        -------
        torch.Tensor of shape (N, C, *out_spatial)
        """
        if torch.jit.is_scripting():  # TorchScript compiles this branch only
            return self._scripted_forward(input)
        return interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            self.recompute_scale_factor,
            self.antialias,
        )

    def _scripted_forward(self, input: torch.Tensor) -> torch.Tensor:
        """The op's arguments, as :func:`interpolate` computes them, in TorchScript; the op
        checks them and the input."""
        output_size, scales = _scripted_resize_arguments(
            input, self._sizes, self._factors, self._every_axis, self._recompute
        )
        return torch.ops.tiinterp.interpolate(
            input, output_size, scales, self._mode, self._align_corners, self._antialias
        )

    def extra_repr(self) -> str:
        parts = [f"size={self.size}" if self.size is not None else ""]
        parts.append(f"scale_factor={self.scale_factor}" if self.scale_factor is not None else "")
        parts.append(f"mode={self.mode!r}")
        if self.align_corners is not None:
            parts.append(f"align_corners={self.align_corners}")
        if self.recompute_scale_factor is not None:
            parts.append(f"recompute_scale_factor={self.recompute_scale_factor}")
        if self.antialias:
            parts.append("antialias=True")
        return ", ".join(p for p in parts if p)


def _per_axis(value: Any) -> bool:
    """Whether a ``size`` or ``scale_factor`` is a sequence (one value per axis), not one
    number for every axis."""
    return isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes))


def _axis_count(value: Any) -> int:
    """The number of spatial axes a ``size`` or ``scale_factor`` names (1 for a number)."""
    if isinstance(value, np.ndarray):
        return max(value.size, 1)
    return max(len(value), 1) if _per_axis(value) else 1


def scale_and_translate(
    image: torch.Tensor,
    shape: Sequence[int],
    spatial_dims: Sequence[int],
    scale: torch.Tensor | Sequence[float],
    translation: torch.Tensor | Sequence[float],
    method: str = "linear",
    antialias: bool = True,
) -> torch.Tensor:
    """``jax.image.scale_and_translate`` for PyTorch: :func:`tiinterp.scale_and_translate`
    as a differentiable operator, with respect to ``image``, ``scale`` and ``translation``
    (first order: ``backward``, ``torch.autograd.grad``; the gradients are
    :func:`tiinterp.scale_and_translate_backward`'s, deterministic). A ``torch.library``
    custom op, so ``torch.compile`` keeps it in the graph.

    Parameters
    ----------
    image : torch.Tensor
        float32 or float64, on the CPU (this release computes it through NumPy); any
        number of axes. Never modified.
    shape, spatial_dims, method, antialias
        As in :func:`tiinterp.scale_and_translate`.
    scale, translation : torch.Tensor or sequence of float
        One value per spatial axis; tensors in ``image``'s dtype, on the CPU, and may
        require grad (a learned zoom and shift).

    Returns
    -------
    torch.Tensor of ``shape``
        ``image``'s dtype, on the CPU, tracked by autograd.

    Raises
    ------
    TypeError, ValueError
        As :func:`tiinterp.scale_and_translate`, and for tensors that are not float32 or
        float64 like ``image``.
    RuntimeError
        A tensor off the CPU; a second derivative or a forward-mode one.

    Examples
    --------
    >>> import torch
    >>> import tiinterp.torch as titorch
    >>> row = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    >>> shift = torch.tensor([0.5], requires_grad=True)
    >>> y = titorch.scale_and_translate(row, (1, 4), (1,), torch.tensor([1.0]), shift)
    >>> y.detach()
    tensor([[0.0000, 0.5000, 1.5000, 2.5000]])
    >>> y.sum().backward()
    >>> shift.grad
    tensor([-3.])
    """
    if not isinstance(image, torch.Tensor) or image.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            "image: expected a float32 or float64 torch.Tensor, got "
            + (str(image.dtype) if isinstance(image, torch.Tensor) else type(image).__name__)
        )
    geometry = check_geometry(tuple(image.shape), shape, spatial_dims, method, antialias)
    count = len(geometry.dims)
    parameters = []
    for value, name in ((scale, "scale"), (translation, "translation")):
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=image.dtype)
        if value.dtype != image.dtype:
            raise TypeError(f"{name}: expected {image.dtype} like the image, got {value.dtype}")
        parameters.append(value.reshape(-1))
    for tensor, name in ((image, "image"), *zip(parameters, ("scale", "translation"), strict=True)):
        if tensor.device.type != "cpu":
            raise RuntimeError(
                f"{name}: expected a CPU tensor (tiinterp.torch.scale_and_translate computes "
                f"through NumPy in this release), got one on {tensor.device}"
            )
    if not torch.compiler.is_compiling():
        check_parameters(_host(parameters[0]), _host(parameters[1]), count)
    _refuse_forward_ad("scale_and_translate")
    return _scale_and_translate_op(
        image,
        *parameters,
        list(geometry.out_shape),
        list(geometry.dims),
        geometry.method,
        geometry.antialias,
    )
