"""Scratch Taichi ndarrays that live as long as the runtime: the intermediates of the device
path's wide passes and the flat copies of Taichi fields (``elements``), reused call after
call, so that a repeated call allocates nothing beyond its result."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .arrays import new_ndarray
from .dtypes import taichi_float
from .taichi import runtime_generation

# Pooled arrays kept per runtime (the least recently used go first).
MAX_POOLED = 8


class _Pool:
    def __init__(self) -> None:
        self.generation = -1
        self.arrays: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    def get(self, dtype: Any, shape: tuple[int, ...], slot: Any) -> Any:
        generation = runtime_generation()
        if generation != self.generation:
            # A new runtime (``ti.init``, ``ti.reset``, a forked child): the arrays belong
            # to the old one.
            self.arrays.clear()
            self.generation = generation
        key = (str(dtype), tuple(shape), slot)
        array = self.arrays.pop(key, None)
        if array is None:
            array = new_ndarray(taichi_float(dtype), shape)
        self.arrays[key] = array
        while len(self.arrays) > MAX_POOLED:
            self.arrays.popitem(last=False)
        return array


_POOL = _Pool()


def pooled_ndarray(dtype: Any, shape: tuple[int, ...], slot: Any) -> Any:
    """A Taichi ndarray of ``dtype`` (NumPy's) and ``shape``, the same one on every call
    for the same ``slot`` (the caller's role for it) in this runtime: its contents are
    garbage."""
    return _POOL.get(dtype, shape, slot)
