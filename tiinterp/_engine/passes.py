"""The execution engine: runs a plan's passes (``_rules/plan.py``) as Taichi kernel launches,
and repeats a checked call by its signature (Note [Repeated calls]).

On the CPU every array kind takes the CPU path (``_engine/cpu_path.py``: SIMD kernels, the two
trailing axes fused into one launch; Taichi ndarrays as NumPy views of their own memory);
GPU archs take the device path (``_engine/device_path.py``): one fused gather per call, tables
resident on the device. ``autodiff_backward`` runs Taichi's ``ti.ad`` reverse of the same
passes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .._kernels.resample import resample_axis_accumulate
from .._kernels.simd import VECTOR_BYTES
from .._rules.plan import Pass, pass_shapes
from .._runtime.arrays import (
    NumpyKind,
    TaichiKind,
    TorchKind,
    aligned_empty,
    copy_array,
    host_address,
)
from .._runtime.dtypes import taichi_float
from .._runtime.session import require_autodiff, running_arch
from .._runtime.taichi import RuntimeWatch, ScalarNdarray, host_view
from .autodiff import Launch, differentiable, reverse
from .cpu_path import MAX_LOOP_ITERATIONS, prepared_on_cpu, run_on_cpu

# Note [Repeated calls]
# A call whose arguments match one already checked and planned goes straight to its
# prepared launches.
#
# Training loops and simulations call resize with the same shapes and options many times;
# checking the arguments and building the plan cost more than the launch for small arrays.
# A call is remembered by its *signature*: the input's shape and dtype and every other
# argument with its type (``size=16`` and ``size=16.0`` are different calls: one is refused).
# Only calls that need nothing per call but a result array are remembered: a C-contiguous
# NumPy input in native byte order, a Taichi ndarray or a contiguous torch tensor, and no
# ``layout`` (``_ops/resize.py`` decides). A repeat with ``out=`` checks that array itself
# (``takes``): one that passes is written as the full call would write it, any other takes
# the full call, which refuses it or runs it.
# Entries hold the prepared launches of the Taichi runtime that compiled them, so the cache
# is emptied when a new runtime starts (``ti.init``, ``ti.reset``, a forked child).
# On the CPU a repeat (``CpuRepeat``, NumPy arrays and torch CPU tensors) replays the
# launches recorded at its first call (Note [Recorded launches] in _runtime/taichi.py): a
# tiny resize then spends ~5 us of tiinterp's Python around Taichi's launch, against ~19
# before (measured; ``benchmarks/small_calls.py`` times each stage).

Passes = Sequence[Pass]


def _on_host(array: Any) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    return host_view(array, TaichiKind.dtype(array))


def run_passes(source: Any, passes: Sequence[Pass], result: Any, kind: Any) -> Any:
    """Apply ``passes`` to ``source`` (of array kind ``kind``); the last launch writes into
    ``result``, which is returned."""
    if math.prod(result.shape) == 0:
        return result
    on_cpu = running_arch() == "cpu"
    if on_cpu and kind is TaichiKind:
        # Taichi ndarrays, or NumPy views of Taichi data (``_runtime.elements.host_flat_view``).
        run_passes(_on_host(source), passes, _on_host(result), NumpyKind)
        return result
    if not passes:
        kind.assign(result, source)
    elif on_cpu:
        run_on_cpu(source, passes, result, kind)
    else:
        from .device_path import run_on_device  # Note [Lazy kernel modules] in __init__.py

        run_on_device(source, passes, result, kind)
    return result


# A recording per pair of address remainders (Note [Recorded launches]): NumPy's
# allocations give one or two.
MAX_RECORDINGS = 8
# Results up to this size are plain ``np.empty`` arrays (the 64-byte alignment costs ~2 us,
# and only larger results store faster for it).
UNALIGNED_RESULT_BYTES = 2**14
_UNSEEN = object()


class CpuRepeat:
    """What repeats :func:`run_passes` on the CPU for C-contiguous NumPy inputs (or
    contiguous torch CPU tensors) of one shape, into a given result or a new one (Note
    [Repeated calls]), by replaying the launches recorded on its first call (Note [Recorded
    launches] in _runtime/taichi.py)."""

    __slots__ = ("_dtype", "_new_result", "_out_shape", "_prepared", "_recordings", "_torch")

    def __init__(self, prepared: Any, out_shape: tuple[int, ...], like: Any, kind: Any) -> None:
        self._prepared, self._out_shape, self._dtype = prepared, out_shape, like.dtype
        self._recordings: dict[tuple[int, int], Any] = {}
        self._torch = kind is TorchKind
        if self._torch:
            # PyTorch's CPU allocator aligns to 64 bytes.
            self._new_result = functools.partial(kind.empty, like, out_shape)
        else:
            small = math.prod(out_shape) * like.dtype.itemsize <= UNALIGNED_RESULT_BYTES
            new = np.empty if small else aligned_empty
            self._new_result = functools.partial(new, out_shape, like.dtype)

    def __call__(self, source: Any, result: Any = None) -> Any:
        if result is None:
            result = self._new_result()
        if self._torch:
            addresses = (source.data_ptr(), result.data_ptr())
        else:
            addresses = (host_address(source), host_address(result))
        alignment = (addresses[0] % VECTOR_BYTES, addresses[1] % VECTOR_BYTES)
        recording = self._recordings.get(alignment, _UNSEEN)
        if recording is not None and recording is not _UNSEEN and recording(addresses):
            return result
        on_host = (source.numpy(), result.numpy()) if self._torch else (source, result)
        if recording is _UNSEEN and len(self._recordings) < MAX_RECORDINGS:
            # Recording runs the call.
            self._recordings[alignment] = self._prepared.record(*on_host)
        else:
            self._prepared.run(*on_host, NumpyKind)
        return result

    def takes(self, out: Any, source: np.ndarray) -> bool:
        """Whether ``out`` passes every check the full call makes of an ``out=``: a
        writeable C-contiguous NumPy array of the result's shape and dtype whose memory is
        apart from ``source``'s (``np.may_share_memory`` compares bounds only: arrays it
        cannot tell apart take the full call, which checks exactly and says why)."""
        return (
            type(out) is np.ndarray
            and out.shape == self._out_shape
            and out.dtype == self._dtype
            and out.flags.c_contiguous
            and out.flags.writeable
            and not np.may_share_memory(out, source)
        )


def repeat_call(passes: Passes, source: Any, out_shape: tuple[int, ...], kind: Any) -> Any:
    """What repeats :func:`run_passes` of ``passes`` for inputs like ``source`` into results
    of ``out_shape`` (Note [Repeated calls]): on the CPU for NumPy arrays, on GPU archs for
    Taichi ndarrays and torch tensors where the plan is one launch; else None."""
    if not passes or math.prod(out_shape) == 0:
        return None
    on_cpu = running_arch() == "cpu"
    if kind is NumpyKind or (kind is TorchKind and on_cpu):
        if not on_cpu:
            return None
        return CpuRepeat(prepared_on_cpu(passes, tuple(source.shape)), out_shape, source, kind)
    if on_cpu:
        return None
    from .device_path import repeat_on_device  # Note [Lazy kernel modules] in __init__.py

    return repeat_on_device(passes, tuple(source.shape), out_shape, kind)


def run_call(
    repeats: RepeatCache,
    key: Signature | None,
    passes: Passes,
    source: Any,
    result: Any,
    out_shape: tuple[int, ...],
    kind: Any,
) -> Any:
    """Run a checked call's ``passes`` on ``source`` into ``result`` (a new array of
    ``out_shape`` where None). A call with a signature runs through what repeats it, built
    here and remembered in ``repeats`` where the engine can repeat it: its repeats then take
    the same path."""
    if key is not None:
        repeat = repeat_call(passes, source, out_shape, kind)
        if repeat is not None:
            repeats.put(key, repeat)
            return repeat(source, result)
    if result is None:
        result = kind.empty(source, out_shape)
    return run_passes(source, passes, result, kind)


def pass_launches(
    passes: Passes, buffers: Sequence[Any], weights: Sequence[Any] | None = None
) -> list[Launch]:
    """The launches of ``resample_axis_accumulate`` that run pass ``i`` from ``buffers[i]``
    into ``buffers[i + 1]``, reading ``weights[i]`` (a Taichi ndarray, whose gradient
    ``ti.ad`` then gives) or else the pass's own table. Each launch stays within Taichi's
    32-bit loop range."""
    launches: list[Launch] = []
    for i, (p, source, target) in enumerate(zip(passes, buffers[:-1], buffers[1:], strict=True)):
        weight = p.taps.weight if weights is None else weights[i]
        total = math.prod(target.shape)
        chunk = max(1, MAX_LOOP_ITERATIONS // p.taps.width)
        for first in range(0, total, chunk):
            launches.append(
                (
                    resample_axis_accumulate,
                    (
                        source,
                        target,
                        p.axis,
                        p.taps.index,
                        p.taps.count,
                        weight,
                        first,
                        min(chunk, total - first),
                    ),
                )
            )
    return launches


def autodiff_backward(
    grad_output: Any, in_shape: Sequence[int], passes: Sequence[Pass], result: Any, kind: Any
) -> Any:
    """Taichi's ``ti.ad`` reverse of the forward ``passes`` (ndarray autodiff: CPU and CUDA
    only), written into ``result``."""
    require_autodiff()
    if math.prod(result.shape) == 0:
        return result
    if not passes:
        kind.assign(result, grad_output)
        return result
    dtype = taichi_float(kind.dtype(grad_output))
    # The map is linear, so its gradient does not depend on the input values: zeros will do.
    buffers = [differentiable(dtype, shape) for shape in pass_shapes(in_shape, passes)]
    reverse(pass_launches(passes, buffers), buffers[-1], grad_output)
    copy_array(buffers[0].grad, result)
    return result


# --- Repeated calls (Note [Repeated calls]) -----------------------------------------------
MAX_SIGNATURES = 256
_PLAIN = frozenset({int, float, bool, str, type(None)})

Signature = tuple[Any, ...]


class Repeat(Protocol):
    """A NumPy array in, its result out (into ``result`` when given)."""

    def __call__(self, source: Any, result: Any = None) -> Any: ...

    def takes(self, out: Any, source: Any) -> bool: ...


class _NoSignature(Exception):
    pass


def _keyed(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return (kind, value)
    if kind is tuple or kind is list:
        types = tuple(map(type, value))
        if _PLAIN.issuperset(types):
            return (kind, types, tuple(value))
        return (kind, tuple(map(_keyed, value)))
    raise _NoSignature


def _array_key(array: Any) -> tuple[Any, ...] | None:
    """What a repeat needs to know of the input array, or None for one never remembered."""
    kind = type(array)
    if kind is np.ndarray:
        if not array.flags.c_contiguous or not array.dtype.isnative:
            return None
        return (array.shape, array.dtype)
    if kind is ScalarNdarray:
        return ("taichi", tuple(array.shape), array.dtype)
    if kind.__module__ == "torch" and kind.__name__ in ("Tensor", "Parameter"):
        if array.requires_grad or str(array.layout) != "torch.strided":
            return None
        if not array.is_contiguous():
            return None
        return ("torch", tuple(array.shape), array.dtype, array.device)
    return None


def argument_key(arguments: Sequence[Any]) -> tuple[Any, ...] | None:
    """``arguments`` with their types, as a key (``16`` and ``16.0`` differ), or None for
    an argument of a type outside int, float, bool, str, None and tuples or lists of
    them."""
    types = tuple(map(type, arguments))
    if _PLAIN.issuperset(types):
        # No containers: the types and the values themselves (one hash, no recursion).
        return (types, tuple(arguments))
    try:
        return tuple(map(_keyed, arguments))
    except _NoSignature:
        return None


def signature(array: Any, arguments: Sequence[Any]) -> Signature | None:
    """The signature of a call on ``array`` with ``arguments``, or None for calls that are
    never remembered (an input other than a C-contiguous NumPy array in native byte order,
    a Taichi scalar ndarray or a contiguous torch tensor that requires no gradient, which
    the call uses as it is; an argument of a type outside int, float, bool, str, None and
    tuples or lists of them)."""
    key = _array_key(array)
    if key is None:
        return None
    arguments_key = argument_key(arguments)
    return None if arguments_key is None else (*key, arguments_key)


class RepeatCache:
    """Signatures of checked calls and what repeats them, oldest first (a lookup does not
    reorder them: it is on every call's path, and an evicted signature costs one full call)."""

    def __init__(self) -> None:
        self._runtime = RuntimeWatch()
        self._repeats: dict[Signature, Repeat] = {}

    def _check_owner(self) -> None:
        if self._runtime.changed():
            self._repeats.clear()

    def get(self, key: Signature | None) -> Repeat | None:
        if key is None:
            return None
        self._check_owner()
        return self._repeats.get(key)

    def lookup(self, array: Any, arguments: tuple[Any, ...]) -> tuple[Signature | None, Any]:
        """The signature of a call on ``array`` with ``arguments`` (:func:`signature`) and
        what repeats it (None if nothing does yet), with the commonest call's key (a
        C-contiguous NumPy array, no container arguments) made inline: it is on every
        call's path."""
        if type(array) is np.ndarray and array.flags.c_contiguous and array.dtype.isnative:
            types = tuple(map(type, arguments))
            if _PLAIN.issuperset(types):
                key = (array.shape, array.dtype, (types, arguments))
                if self._runtime.changed():
                    self._repeats.clear()
                return key, self._repeats.get(key)
        other = signature(array, arguments)
        return other, self.get(other)

    def put(self, key: Signature, repeat: Repeat) -> None:
        self._check_owner()
        self._repeats[key] = repeat
        while len(self._repeats) > MAX_SIGNATURES:
            del self._repeats[next(iter(self._repeats))]
