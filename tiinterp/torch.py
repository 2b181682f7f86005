"""PyTorch bridge: tiinterp's resampling as differentiable PyTorch operators.

Imported only on request (``import tiinterp`` never imports torch)::

    import tiinterp.torch as titorch

    y = titorch.interpolate(x, scale_factor=0.25, mode="lanczos3", antialias=True)
    z = titorch.grid_sample(y, grid, mode="bicubic", padding_mode="reflection")

It needs PyTorch 2.4 or newer (``pip install 'tiinterp[torch]'``).

- :func:`interpolate` has ``F.interpolate``'s signature, :func:`grid_sample` has
  ``F.grid_sample``'s, and :class:`Resize` is an ``nn.Module`` around :func:`interpolate`.
- Each is a ``torch.library.custom_op`` in the ``tiinterp`` namespace
  (``torch.ops.tiinterp.interpolate``, ``.interpolate_backward``, ``.grid_sample``,
  ``.grid_sample_grad_input``, ``.grid_sample_grad_grid``) with a fake (meta)
  implementation and a registered autograd formula. The backward passes are tiinterp's
  hand-written adjoints, themselves custom ops, so ``torch.compile(fullgraph=True)``
  traces forward and backward without a graph break (the ops are opaque to Inductor, which
  compiles the code around them). Only the gradients that autograd asks for are computed
  (for ``grid_sample``: with respect to the input, the grid, or both).
- ``interpolate`` is linear in its input, so its backward's own gradient is the forward:
  double backward (``gradgradcheck``, gradient penalties) works. ``grid_sample`` has a first
  derivative only; differentiating its backward raises an error.

Differences from ``F.interpolate`` / ``F.grid_sample``:

- More modes: ``lanczos3`` and ``lanczos5`` (1-3 spatial axes), and ``antialias=True`` for
  every filter (linear, bilinear, trilinear, bicubic, lanczos) in 1-3 spatial axes, where
  PyTorch antialiases only bilinear, bicubic and lanczos of 4-D inputs. Where PyTorch has the
  mode the numbers are PyTorch's (``docs/semantics.md`` gives every formula).
- Deterministic backward passes on every device: no atomics, bit-identical gradients from
  run to run, and ``torch.use_deterministic_algorithms(True)`` is fine (on CUDA, PyTorch's
  backward of the linear modes and bicubic, and of ``F.grid_sample``, has no deterministic
  implementation and raises an error under it).
- float32 and float64 only: a float16 or bfloat16 tensor (from autocast, say) is a
  ``TypeError``; convert it with ``.float()``.
- ``grid_sample``'s ``align_corners=None`` means False without PyTorch's warning.
- ``torch.func`` transforms (``grad``, ``jacrev``, ...) refuse the autograd formulas of
  ``torch.library`` custom ops in PyTorch up to 2.13 (pytorch/pytorch#168393): use
  ``torch.autograd.grad``. ``torch.vmap`` works, through PyTorch's slow per-sample fallback.

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
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

try:
    import torch
except ImportError as error:
    raise ImportError(
        "tiinterp.torch needs PyTorch 2.4 or newer, which is not installed: "
        "pip install 'tiinterp[torch]'"
    ) from error
if not hasattr(torch.library, "custom_op"):  # torch.library.custom_op came with PyTorch 2.4
    raise ImportError(
        f"tiinterp.torch needs PyTorch 2.4 or newer (torch.library.custom_op), got "
        f"{torch.__version__}: pip install 'tiinterp[torch]'"
    )

from torch import nn

from . import _grid_kernels as grid_kernels
from . import _validate as v
from ._grid_sample import _point_count, _points_view, _prepare, _values_view
from ._grid_sample import grid_sample as _tiinterp_grid_sample
from ._resize import interpolate as _tiinterp_interpolate
from ._resize import interpolate_backward as _tiinterp_interpolate_backward
from ._runtime import current_arch, ensure_initialized, refuse_simd_configuration, serialized
from ._taichi import ti

__all__ = ["Resize", "grid_sample", "interpolate"]

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


def _check_element_count(shape: tuple[Any, ...]) -> None:
    """``_validate.check_element_count`` of the output, as a loop: TorchDynamo cannot trace
    ``math.prod`` of a generator."""
    count = 1
    for extent in shape:
        count *= max(extent, 1)
    if count > v.MAX_ELEMENTS:
        v.check_element_count(shape, "output")  # raises, with tiinterp's message


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
    out_spatial, scales = _output_geometry(
        tuple(input.shape[2:]), size, scale_factor, recompute_scale_factor
    )
    _check_element_count((*input.shape[:2], *out_spatial))
    return out_spatial, scales


def _output_geometry(
    in_spatial: tuple[Any, ...], size: Any, scale_factor: Any, recompute_scale_factor: Any
) -> tuple[list[Any], list[float] | None]:
    """``_validate.output_geometry`` (PyTorch's rule ``out = floor(in * scale_factor)``) in
    a form TorchDynamo traces: the same checks of ``size`` and ``scale_factor``, and the
    same errors, raised by ``output_geometry`` itself. Returns the output's spatial shape
    and the factors that set the sample spacing (None when it is ``in / out``)."""
    recompute = v.check_flag(recompute_scale_factor, "recompute_scale_factor")
    if (size is None) == (scale_factor is None) or (size is not None and recompute):
        v.output_geometry(in_spatial, size, scale_factor, recompute)  # raises
    if size is not None:
        return list(v._check_size(size, len(in_spatial))), None
    factors = v._check_scale_factor(scale_factor, len(in_spatial))
    out_spatial = []
    for extent, factor in zip(in_spatial, factors, strict=True):
        # A symbolic extent (torch.compile's dynamic shapes) makes ``extent * factor`` a
        # SymFloat, which torch.sym_int rounds toward 0: floor, for positive products.
        if not math.isfinite(factor * 2**31):  # an infinite product, or past 2^31 outputs
            too_large, _ = v.output_geometry(in_spatial, size, scale_factor, recompute)
            v.check_element_count(too_large, "output")  # raises
        extent_out = torch.sym_int(extent * factor)
        if extent_out < 1:
            v.output_geometry(in_spatial, size, scale_factor, recompute)  # raises
        out_spatial.append(extent_out)
    return out_spatial, None if recompute else list(factors)


def _resize_output_shape(
    input_shape: Sequence[Any], output_size: Sequence[Any], scale_factor: Sequence[float] | None
) -> tuple[Any, ...]:
    """``(N, C, *output_size)``; with ``scale_factor``, checked against
    ``floor(in * scale_factor)``, the size the wrapper computed and ``tiinterp.interpolate``
    computes. The fake (shape-only) implementation and the real one both call this."""
    if scale_factor is not None:
        expected, _ = _output_geometry(tuple(input_shape[2:]), None, list(scale_factor), None)
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
    if not isinstance(mode, str) or mode not in grid_kernels.MODE_CODES:
        raise ValueError(f"mode: expected one of {tuple(grid_kernels.MODE_CODES)}, got {mode!r}")
    if mode == "bicubic" and dims == 3:
        raise ValueError(
            "mode: expected 'nearest' or 'bilinear' for a 5-D input (bicubic is 2-D only, as "
            "in PyTorch), got 'bicubic'"
        )
    if not isinstance(padding_mode, str) or padding_mode not in grid_kernels.PADDING_CODES:
        raise ValueError(
            f"padding_mode: expected one of {tuple(grid_kernels.PADDING_CODES)}, "
            f"got {padding_mode!r}"
        )
    checked = v.check_flag(align_corners, "align_corners")
    _check_element_count((*input.shape[:2], *grid.shape[1:-1]))
    return mode, padding_mode, bool(checked)


# --- Devices: where tensors may go, without host round trips ------------------------------


def _require_device(tensor: Any, name: str) -> None:
    """Refuse a tensor that the current arch would reach only through the host, or not at
    all. Never initialises an arch other than the default: that would reset Taichi."""
    arch = current_arch()
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


@contextlib.contextmanager
def _stream_order(tensor: Any) -> Iterator[None]:
    """Order Taichi's kernels after the work already queued on the current CUDA stream, and
    before what comes after, when that stream is not the default one that Taichi launches
    on (work on the default stream is ordered already)."""
    if tensor.device.type != "cuda":
        yield
        return
    stream = torch.cuda.current_stream(tensor.device)
    side_stream = stream != torch.cuda.default_stream(tensor.device)
    if side_stream:
        stream.synchronize()
    yield
    if side_stream:
        ti.sync()


# --- The operators ------------------------------------------------------------------------

_RESIZE_ARGS = "SymInt[] output_size, float[]? scale_factor, str mode, bool? align_corners"


@torch.library.custom_op(
    "tiinterp::interpolate",
    mutates_args=(),
    schema=f"(Tensor input, {_RESIZE_ARGS}, bool antialias) -> Tensor",
)
def _interpolate_op(
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
        return _tiinterp_interpolate(
            input,
            size=None if scale_factor is not None else list(output_size),
            scale_factor=None if scale_factor is None else list(scale_factor),
            mode=mode,
            align_corners=align_corners,
            antialias=antialias,
        )


@_interpolate_op.register_fake
def _interpolate_fake(
    input: torch.Tensor,
    output_size: Sequence[int],
    scale_factor: Sequence[float] | None,
    mode: str,
    align_corners: bool | None,
    antialias: bool,
) -> torch.Tensor:
    return input.new_empty(_resize_output_shape(input.shape, output_size, scale_factor))


@torch.library.custom_op(
    "tiinterp::interpolate_backward",
    mutates_args=(),
    schema=f"(Tensor grad_output, SymInt[] input_size, {_RESIZE_ARGS}, bool antialias) -> Tensor",
)
def _interpolate_backward_op(
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
        return _tiinterp_interpolate_backward(
            grad_output,
            list(input_size),
            mode=mode,
            align_corners=align_corners,
            scale_factor=None if scale_factor is None else list(scale_factor),
            antialias=antialias,
        )


@_interpolate_backward_op.register_fake
def _interpolate_backward_fake(
    grad_output: torch.Tensor,
    input_size: Sequence[int],
    output_size: Sequence[int],
    scale_factor: Sequence[float] | None,
    mode: str,
    align_corners: bool | None,
    antialias: bool,
) -> torch.Tensor:
    _resize_output_shape(input_size, output_size, scale_factor)
    return grad_output.new_empty(tuple(input_size))


def _interpolate_setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    input, output_size, scale_factor, mode, align_corners, antialias = inputs
    ctx.input_size = tuple(input.shape)
    ctx.options = (list(output_size), scale_factor, mode, align_corners, antialias)


def _interpolate_autograd(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    grad_input = None
    if ctx.needs_input_grad[0]:
        grad_input = _interpolate_backward_op(grad, list(ctx.input_size), *ctx.options)
    return grad_input, None, None, None, None, None


_interpolate_op.register_autograd(_interpolate_autograd, setup_context=_interpolate_setup_context)


def _interpolate_backward_setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    _, _, output_size, scale_factor, mode, align_corners, antialias = inputs
    ctx.options = (list(output_size), scale_factor, mode, align_corners, antialias)


def _interpolate_backward_autograd(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    # The backward is x -> A^T g for the forward's matrix A, linear in g: its own gradient
    # is g' -> A g', the forward op.
    grad_grad_output = None
    if ctx.needs_input_grad[0]:
        grad_grad_output = _interpolate_op(grad, *ctx.options)
    return grad_grad_output, None, None, None, None, None, None


_interpolate_backward_op.register_autograd(
    _interpolate_backward_autograd, setup_context=_interpolate_backward_setup_context
)


_GRID_ARGS = "str mode, str padding_mode, bool align_corners"


@torch.library.custom_op(
    "tiinterp::grid_sample",
    mutates_args=(),
    schema=f"(Tensor input, Tensor grid, {_GRID_ARGS}) -> Tensor",
)
def _grid_sample_op(
    input: torch.Tensor, grid: torch.Tensor, mode: str, padding_mode: str, align_corners: bool
) -> torch.Tensor:
    _require_device(input, "input")
    _require_device(grid, "grid")
    with _stream_order(input):
        return _tiinterp_grid_sample(input, grid, mode, padding_mode, align_corners)


@_grid_sample_op.register_fake
def _grid_sample_fake(
    input: torch.Tensor, grid: torch.Tensor, mode: str, padding_mode: str, align_corners: bool
) -> torch.Tensor:
    return input.new_empty((*input.shape[:2], *grid.shape[1:-1]))


@serialized
def _grid_sample_gradient(
    wrt: str,
    grad_output: Any,
    input: Any,
    grid: Any,
    mode: str,
    padding_mode: str,
    align_corners: bool,
) -> Any:
    """One of the two gradients of ``tiinterp.grid_sample_backward`` (``wrt`` is "input" or
    "grid"), by the same adjoint kernels, without computing the other one."""
    source, points, kind, shape, statics = _prepare(input, grid, mode, padding_mode, align_corners)
    g = v.as_companion(grad_output, "grad_output", kind, source, shape)
    if wrt == "input":
        result = kind.zeros(source, tuple(source.shape))  # the adjoint accumulates into it
    else:
        result = kind.empty(source, tuple(points.shape))
    if math.prod(shape) == 0:
        kind.fill_zeros(result)
        return result
    ensure_initialized()
    refuse_simd_configuration("grid_sample")
    launch = (_values_view(g, kind), source, _points_view(points, kind))
    backward = dataclasses.replace(statics, backward=True)
    if wrt == "input":
        grid_kernels.grid_sample_grad_input(*launch, result, _point_count(points), backward)
    else:
        flat_result = _points_view(result, kind)
        grid_kernels.grid_sample_grad_grid(*launch, flat_result, _point_count(points), backward)
    return result


def _grid_gradient_op(wrt: str) -> Any:
    """The custom op for the gradient of ``grid_sample`` with respect to ``wrt``, whose
    result has the shape of the input or of the grid."""

    @torch.library.custom_op(
        f"tiinterp::grid_sample_grad_{wrt}",
        mutates_args=(),
        schema=f"(Tensor grad_output, Tensor input, Tensor grid, {_GRID_ARGS}) -> Tensor",
    )
    def gradient(
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
            return _grid_sample_gradient(
                wrt, grad_output, input, grid, mode, padding_mode, align_corners
            )

    @gradient.register_fake
    def gradient_fake(
        grad_output: torch.Tensor,
        input: torch.Tensor,
        grid: torch.Tensor,
        mode: str,
        padding_mode: str,
        align_corners: bool,
    ) -> torch.Tensor:
        like = input if wrt == "input" else grid
        return like.new_empty(like.shape)

    return gradient


_grid_sample_grad_input_op = _grid_gradient_op("input")
_grid_sample_grad_grid_op = _grid_gradient_op("grid")


def _grid_sample_setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    input, grid, mode, padding_mode, align_corners = inputs
    # The input's values matter only to the grid's gradient; its shape to both.
    ctx.save_for_backward(input, grid)
    ctx.options = (mode, padding_mode, align_corners)


def _grid_sample_autograd(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    input, grid = ctx.saved_tensors
    grad_input = grad_grid = None
    if ctx.needs_input_grad[0]:
        grad_input = _grid_sample_grad_input_op(grad, input, grid, *ctx.options)
    if ctx.needs_input_grad[1]:
        grad_grid = _grid_sample_grad_grid_op(grad, input, grid, *ctx.options)
    return grad_input, grad_grid, None, None, None


_grid_sample_op.register_autograd(_grid_sample_autograd, setup_context=_grid_sample_setup_context)


# --- The public functions -----------------------------------------------------------------


def interpolate(
    input: torch.Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> torch.Tensor:
    """Resize a batch of signals, images or volumes: ``F.interpolate``, differentiable.

    The forward pass is :func:`tiinterp.interpolate`, the backward pass tiinterp's
    hand-written adjoint (deterministic), and the backward's own gradient is the forward,
    so double backward works. A ``torch.library`` custom op: works under
    ``torch.compile(fullgraph=True)`` without a graph break.

    Parameters
    ----------
    input : torch.Tensor of shape (N, C, W), (N, C, H, W) or (N, C, D, H, W)
        float32 or float64; on the CPU, or on ``cuda:0`` with tiinterp on arch ``"cuda"``
        (see the module's notes on devices). Never modified.
    size : int or sequence of int, optional
        The output's spatial shape, or one int for every spatial axis. Exactly one of
        ``size`` and ``scale_factor`` is given.
    scale_factor : float or sequence of float, optional
        Positive, one or one per spatial axis: ``out = floor(in * scale_factor)``, samples
        spaced ``1 / scale_factor`` apart unless ``recompute_scale_factor`` is True.
    mode : str
        ``"nearest"``, ``"nearest-exact"``, ``"area"`` (1-3 spatial axes); ``"linear"``
        (1), ``"bilinear"`` (2), ``"trilinear"`` (3); ``"bicubic"`` (2); ``"lanczos3"``,
        ``"lanczos5"`` (1-3; not in PyTorch); ``"lanczos"`` (1-3; PyTorch's name for
        antialiased lanczos3, so ``antialias=True`` is required).
    align_corners : bool, optional
        For the linear family, bicubic and lanczos: True makes the corner samples coincide;
        False or None uses half-pixel centres. Must be None for nearest, nearest-exact and
        area.
    recompute_scale_factor : bool, optional
        With ``scale_factor``: True spaces the samples ``in / out`` apart.
    antialias : bool
        Widen the filter when downsampling (PIL's convention), for every filter mode (the
        linear family, bicubic, lanczos) and any number of spatial axes; not with
        ``align_corners=True``.

    Returns
    -------
    torch.Tensor of shape (N, C, *out_spatial)
        A new tensor of the input's dtype and device, tracked by autograd.

    Raises
    ------
    TypeError
        A non-tensor input, a dtype other than float32/float64, a sparse tensor, a
        non-integer size, a non-bool flag.
    ValueError
        A layout other than 3-D, 4-D or 5-D, a mode that does not take that many spatial
        axes, both or neither of ``size`` and ``scale_factor``, an empty output axis,
        ``align_corners`` or ``antialias`` with a mode that does not take it, more than
        2^31 - 1 elements.
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
    output_size, scales = _resize_arguments(
        input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
    )
    align = v.check_flag(align_corners, "align_corners")  # a NumPy bool is not a schema bool
    return _interpolate_op(input, output_size, scales, mode, align, bool(antialias))


def grid_sample(
    input: torch.Tensor,
    grid: torch.Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> torch.Tensor:
    """Sample ``input`` at the points of ``grid``: ``F.grid_sample``, differentiable with
    respect to both.

    The forward pass is :func:`tiinterp.grid_sample`, the gradients tiinterp's hand-written
    adjoints (deterministic: one thread per (n, c) plane accumulates in a fixed order);
    only the ones autograd asks for are computed. A ``torch.library`` custom op: works
    under ``torch.compile(fullgraph=True)`` without a graph break. First derivatives only.

    Parameters
    ----------
    input : torch.Tensor of shape (N, C, H, W) or (N, C, D, H, W)
        float32 or float64; on the CPU, or on ``cuda:0`` with tiinterp on arch ``"cuda"``
        (see the module's notes on devices). Never modified.
    grid : torch.Tensor of shape (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3)
        The input's dtype and device. ``grid[..., 0]`` is x (along W), ``grid[..., 1]`` y,
        ``grid[..., 2]`` z, each in ``[-1, 1]`` from the first sample to the last
        (``align_corners=True``: their centres; False or None: their outer edges).
    mode : {"bilinear", "nearest", "bicubic"}
        ``"bilinear"`` is trilinear for a 5-D input; ``"bicubic"`` (Keys ``A = -0.75``) is
        2-D only; ``"nearest"`` rounds half to even (its gradient with respect to the grid
        is 0).
    padding_mode : {"zeros", "border", "reflection"}
        What a point outside the input reads.
    align_corners : bool, optional
        As above; None means False, as in PyTorch (without its warning).

    Returns
    -------
    torch.Tensor of shape (N, C, *grid.shape[1:-1])
        A new tensor of the input's dtype and device, tracked by autograd.

    Raises
    ------
    TypeError
        A non-tensor input or grid, a dtype other than float32/float64, different dtypes,
        a non-bool ``align_corners``.
    ValueError
        A grid whose shape does not fit the input, an unknown mode or padding mode,
        ``"bicubic"`` with a 5-D input, more than 2^31 - 1 elements.
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
    mode, padding_mode, align = _grid_arguments(input, grid, mode, padding_mode, align_corners)
    return _grid_sample_op(input, grid, mode, padding_mode, align)


class Resize(nn.Module):
    """An ``nn.Module`` that resizes its input with :func:`interpolate` (like
    ``nn.Upsample``, with every tiinterp mode and antialiasing).

    Parameters
    ----------
    size : int or sequence of int, optional
        The output's spatial shape, or one int for every spatial axis.
    scale_factor : float or sequence of float, optional
        One or one per spatial axis; exactly one of ``size`` and ``scale_factor``.
    mode : str
        Any of :data:`tiinterp.MODES` (see :func:`interpolate`).
    align_corners : bool, optional
        As in :func:`interpolate`.
    recompute_scale_factor : bool, optional
        As in :func:`interpolate`.
    antialias : bool
        As in :func:`interpolate`.

    Raises
    ------
    TypeError, ValueError
        At construction, for the checks that do not need the input (the mode's name, both
        or neither of ``size`` and ``scale_factor``, their types and signs, ``align_corners``
        and ``antialias`` with a mode that does not take them); the rest when called, as
        :func:`interpolate`.

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
        v.check_flag(recompute_scale_factor, "recompute_scale_factor")
        # The checks of tiinterp.interpolate that do not need the input: for the factors, a
        # stand-in spatial shape large enough that no axis becomes empty.
        axes = _axis_count(size if size is not None else scale_factor)
        v.output_geometry((2**62,) * axes, size, scale_factor, recompute_scale_factor)
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
        return interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            self.recompute_scale_factor,
            self.antialias,
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


def _axis_count(value: Any) -> int:
    """The number of spatial axes a ``size`` or ``scale_factor`` names (1 for a number)."""
    if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes)):
        return max(len(value), 1)
    return 1
