"""Helpers for tests of the CPU path's choices: buffers at a chosen alignment, and a record
of the arguments the SIMD kernels are launched with."""

import inspect
import math

import numpy as np

import tiinterp._engine.cpu_path as cpu_path_module
import tiinterp._ops.resize as resize_module
from tiinterp._engine.passes import RepeatCache

SIMD_KERNELS = ("simd_plane", "simd_gather", "simd_middle")


def empty_at(shape, dtype, offset):
    """A C-contiguous array of ``shape`` and ``dtype`` whose data starts ``offset`` bytes
    past a 64-byte boundary (Note [Store forms] in tiinterp/_kernels/simd.py)."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    buffer = np.empty(nbytes + 128, np.uint8)
    start = -buffer.ctypes.data % 64 + offset
    return buffer[start : start + nbytes].view(dtype).reshape(shape)


def spy_simd_argument(monkeypatch, argument):
    """The value of ``argument`` in every SIMD kernel launch from now on, in a list. Calls
    are neither recorded nor replayed meanwhile: a replay launches below these functions
    (Note [Recorded launches] in tiinterp/_runtime/taichi.py)."""
    monkeypatch.setattr(cpu_path_module, "MAX_RECORDED_BYTES", -1)
    monkeypatch.setattr(resize_module, "_REPEATS", RepeatCache())
    seen = []
    for name in SIMD_KERNELS:
        kernel = getattr(cpu_path_module, name)

        def spy(*args, kernel=kernel):
            seen.append(inspect.signature(kernel).bind(*args).arguments[argument])
            return kernel(*args)

        monkeypatch.setattr(cpu_path_module, name, spy)
    return seen
