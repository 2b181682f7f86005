"""The array kinds tiinterp takes and returns: NumPy (the default and documented first
choice), Taichi ndarrays and torch tensors.

Each kind is handed to the Taichi kernels as it is, so data that lives on the device stays
there; results and scratch buffers are allocated as the same kind, dtype and device as the
input. torch is never imported unless the caller passes a tensor. The copy kernels at the end
move data between kinds (and Taichi fields) on the device.
"""

import collections
import ctypes
import math
from contextlib import nullcontext
from typing import Any, TypeVar

import numpy as np

from .dtypes import float_or_none, numpy_float
from .taichi import Ndarray, ScalarNdarray, current_config, require_current, taichi_log_level, ti

_EXPECTED = "a numpy.ndarray, a Taichi scalar ndarray or a torch.Tensor"
# Results and scratch start on a cache line: the CPU's SIMD kernels store whole vectors at
# aligned addresses (``_kernels/simd.py``), and NumPy places large arrays at 16 mod 64.
ALIGNMENT = 64

# The public functions return arrays of their input's kind: a numpy.ndarray, a Taichi
# ScalarNdarray or a torch.Tensor.
ArrayT = TypeVar("ArrayT")


def is_torch(value) -> bool:
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "data_ptr")


class NumpyKind:
    name = "numpy"
    # Host memory that reshapes to views: what the CPU fast kernels take.
    reshapes = True

    @staticmethod
    def dtype(a):
        return float_or_none(a.dtype.newbyteorder("="))

    @staticmethod
    def prepared(a):
        return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))

    @staticmethod
    def empty(like, shape):
        return aligned_empty(shape, like.dtype)

    @staticmethod
    def address(a) -> int:
        return int(a.ctypes.data)

    @staticmethod
    def zeros(like, shape):
        return np.zeros(shape, dtype=like.dtype)

    @staticmethod
    def assign(target, source):
        target[...] = source

    @staticmethod
    def fill_zeros(target):
        target[...] = 0

    @staticmethod
    def unusable_as_out(a, sources):
        if not a.flags.c_contiguous:
            return "not C-contiguous"
        if not a.flags.writeable:
            return "read-only"
        if any(isinstance(s, np.ndarray) and np.shares_memory(a, s) for s in sources):
            return "overlapping the input"
        return None


class TaichiKind:
    name = "taichi"
    # Taichi ndarrays cannot be reshaped: they take the generic kernels.
    reshapes = False

    @staticmethod
    def dtype(a):
        return numpy_float(a.dtype)

    @staticmethod
    def prepared(a):
        return a

    @staticmethod
    def empty(like, shape):
        return new_ndarray(like.dtype, shape)

    @staticmethod
    def zeros(like, shape):
        array = new_ndarray(like.dtype, shape)
        array.fill(0)
        return array

    @staticmethod
    def assign(target, source):
        target.copy_from(source)

    @staticmethod
    def fill_zeros(target):
        if target.shape and 0 not in tuple(target.shape):
            target.fill(0)

    @staticmethod
    def unusable_as_out(a, sources):
        return "overlapping the input" if any(a is s for s in sources) else None


class TorchKind:
    name = "torch"
    reshapes = True

    @staticmethod
    def dtype(a):
        return float_or_none(str(a.dtype).replace("torch.", ""))

    @staticmethod
    def prepared(a):
        return a.detach().contiguous()

    @staticmethod
    def empty(like, shape):
        import torch

        # PyTorch's CPU allocator aligns to 64 bytes.
        return torch.empty(tuple(shape), dtype=like.dtype, device=like.device)

    @staticmethod
    def address(a) -> int:
        return int(a.data_ptr())

    @staticmethod
    def zeros(like, shape):
        import torch

        return torch.zeros(tuple(shape), dtype=like.dtype, device=like.device)

    @staticmethod
    def assign(target, source):
        target.copy_(source)

    @staticmethod
    def fill_zeros(target):
        target.zero_()

    @staticmethod
    def unusable_as_out(a, sources):
        if not a.is_contiguous():
            return "not C-contiguous"
        if a.requires_grad:
            return "a tensor that requires grad"
        if any(is_torch(s) and s.device == a.device and _spans_meet(a, s) for s in sources):
            return "overlapping the input"
        return None


def _byte_span(t) -> tuple[int, int]:
    """The bytes ``[start, end)`` that torch tensor ``t`` can reach from its strides
    (empty where it has no element). Two tensors can overlap without sharing a storage
    (``torch.from_numpy`` of two views of one array, ``torch.frombuffer``, DLPack), so
    memory is compared by address, as ``np.may_share_memory`` compares bounds."""
    if t.numel() == 0:
        return 0, 0
    low = high = t.data_ptr()
    for size, stride in zip(t.shape, t.stride(), strict=True):
        reach = (size - 1) * stride * t.element_size()
        low, high = (low + reach, high) if reach < 0 else (low, high + reach)
    return low, high + t.element_size()


def _spans_meet(a, b) -> bool:
    (a_start, a_end), (b_start, b_end) = _byte_span(a), _byte_span(b)
    return a_start < b_end and b_start < a_end


# Allocations from this size on run with Taichi's error log silenced, so that a refusal
# reaches the user as tiinterp's MemoryError only (smaller ones skip the log-level switch).
_LARGE_BYTES = 256 * 2**20


def new_ndarray(dtype, shape):
    """``ti.ndarray(dtype, shape)`` (a Taichi dtype); MemoryError where the device refuses
    the allocation (measured: Mesa's lavapipe refuses 3.9 GiB and more, and Taichi raises
    a RuntimeError from its C++ assertion)."""
    shape = tuple(shape)
    itemsize = 8 if dtype in (ti.f64, ti.i64) else 4
    nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
    quiet = taichi_log_level(ti.CRITICAL) if nbytes >= _LARGE_BYTES else nullcontext()
    try:
        with quiet:
            return ti.ndarray(dtype, shape)
    except RuntimeError as error:
        if "allocate_memory" not in str(error):
            raise
        raise MemoryError(
            f"could not allocate a Taichi ndarray of shape {shape} ({nbytes:,} bytes) on "
            f"arch {current_config().arch.name!r}: the device refused it; use smaller "
            "arrays there, or the CPU"
        ) from None


# Note [Recycled result memory]
# glibc's malloc maps a block of 32 MiB or more from the kernel for each allocation and
# unmaps it when it is freed (its mmap threshold stops adapting there), so every call that
# returned such a result paid for the kernel to fault in and zero fresh pages before the
# kernel could write them (measured, medians of 9 calls, Taichi's default options: a W1
# bilinear resize, 134 MB out, 21.0-21.6 ms into fresh memory against 14.5-14.6 into a
# recycled buffer; its adjoint on W2, 134 MB out, 20.3-21.1 against 13.9-14.1; W2's
# forward, 32 MiB out, 13.0-13.2 against 10.3). Buffers of at least RECYCLED_FROM bytes
# are therefore kept once every array over them is gone (the array's base, a ``_Lease``,
# gives its buffer back when it is collected) and handed to the next allocation of the
# same size, as PyTorch's caching allocator does on CUDA: at most RECYCLED_BUFFERS of them
# and RECYCLED_BYTES in all (the oldest let go first), so a program holds at most that much
# more memory than its arrays use.
RECYCLED_FROM = 2**25
RECYCLED_BUFFERS = 4
RECYCLED_BYTES = 2**30


class _RecycledBuffers:
    """Freed large buffers (Note [Recycled result memory]). Arrays are collected in any
    thread, at any time: each step is one atomic ``deque`` operation, and a buffer is
    either here or held by one array."""

    def __init__(self) -> None:
        self._free: collections.deque[np.ndarray] = collections.deque()

    def take(self, nbytes: int) -> np.ndarray | None:
        for _ in range(len(self._free)):
            try:
                buffer = self._free.popleft()
            except IndexError:
                return None
            if buffer.nbytes == nbytes:
                return buffer
            self._free.append(buffer)
        return None

    def give_back(self, buffer: np.ndarray) -> None:
        if buffer.nbytes > RECYCLED_BYTES:
            return
        self._free.append(buffer)
        # The oldest go first; a buffer another thread takes meanwhile is simply not here.
        while len(self._free) > RECYCLED_BUFFERS or self.held_bytes() > RECYCLED_BYTES:
            try:
                self._free.popleft()
            except IndexError:
                return

    def held_bytes(self) -> int:
        return sum(buffer.nbytes for buffer in tuple(self._free))


_RECYCLED = _RecycledBuffers()


class _Lease:
    """The base of an array over a recycled buffer: gives the buffer back when the last
    array over it is gone."""

    __slots__ = ("__array_interface__", "_buffer")

    def __init__(self, buffer: np.ndarray, start: int, shape: tuple, dtype: np.dtype) -> None:
        self._buffer = buffer
        self.__array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (buffer.ctypes.data + start, False),
            "version": 3,
        }

    def __del__(self) -> None:
        if _RECYCLED is not None:  # None at interpreter shutdown, when modules are cleared
            _RECYCLED.give_back(self._buffer)


def host_address(array: np.ndarray) -> int:
    """The address of a NumPy array's first element. ``ctypes.c_char.from_buffer`` reads it
    in ~0.3 us against ``ndarray.ctypes.data``'s ~0.8 (measured), but takes only writeable,
    C-contiguous, non-empty arrays."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))  # type: ignore[arg-type]
    except (TypeError, ValueError, BufferError):
        return int(array.ctypes.data)


def aligned_empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` whose data starts at a multiple of ``ALIGNMENT`` bytes;
    large ones over recycled memory (Note [Recycled result memory])."""
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    nbytes = math.prod(shape) * dtype.itemsize
    size = nbytes + ALIGNMENT
    buffer = _RECYCLED.take(size) if nbytes >= RECYCLED_FROM else None
    if buffer is None:
        buffer = np.empty(size, np.uint8)
    start = -buffer.ctypes.data % ALIGNMENT
    if nbytes < RECYCLED_FROM:
        return buffer[start : start + nbytes].view(dtype).reshape(shape)
    return np.asarray(_Lease(buffer, start, shape, dtype))


def _torch_strided():
    import torch

    return torch.strided


def kind_of(value, name: str):
    if isinstance(value, np.ndarray):
        return NumpyKind
    if isinstance(value, ScalarNdarray):
        require_current(value, name)
        return TaichiKind
    if isinstance(value, Ndarray):
        raise TypeError(
            f"{name}: expected a Taichi *scalar* ndarray (N, C, ...), got a "
            f"{type(value).__name__} with element shape {value.element_shape}"
        )
    if is_torch(value):
        if value.layout is not _torch_strided():
            raise TypeError(
                f"{name}: expected a dense (strided) torch.Tensor, got layout {value.layout}"
            )
        if value.device.type == "meta":
            raise TypeError(
                f"{name}: expected a torch.Tensor with data, got one on the 'meta' device"
            )
        return TorchKind
    raise TypeError(f"{name}: expected {_EXPECTED}, got {type(value).__name__}")


def float_kind(value, name: str) -> tuple[Any, np.dtype]:
    """The array kind of ``value`` and its dtype as a NumPy float dtype; TypeError unless
    it is an array tiinterp takes, of float32 or float64."""
    kind = kind_of(value, name)
    return kind, float_dtype(kind, value, name)


def float_dtype(kind, value, name: str) -> np.dtype:
    """The value's dtype as a NumPy float dtype; TypeError unless float32/float64."""
    dtype = kind.dtype(value)
    if dtype is None:
        raise TypeError(f"{name}: expected dtype float32 or float64, got {value.dtype}")
    return dtype


# --- Copies on the device, between any two kinds of one shape (and Taichi fields) ----------


@ti.kernel
def copy_array(source: ti.types.ndarray(), target: ti.types.ndarray()):
    """``target[...] = source``."""
    for index in ti.grouped(target):
        target[index] = source[index]


@ti.kernel
def add_array(source: ti.types.ndarray(), target: ti.types.ndarray()):
    """``target[...] += source``."""
    for index in ti.grouped(target):
        target[index] += source[index]


@ti.kernel
def copy_field_to_array(field: ti.template(), array: ti.types.ndarray()):
    for index in ti.grouped(array):
        array[index] = field[index]


@ti.kernel
def copy_array_to_field(array: ti.types.ndarray(), field: ti.template()):
    for index in ti.grouped(array):
        field[index] = array[index]


@ti.kernel
def add_array_to_field(array: ti.types.ndarray(), field: ti.template()):
    for index in ti.grouped(array):
        field[index] += array[index]
