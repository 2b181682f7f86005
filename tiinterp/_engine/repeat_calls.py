"""Repeated calls: a call whose arguments match one already checked and planned goes
straight to its prepared launches.

Training loops and simulations call resize with the same shapes and options many times;
checking the arguments and building the plan cost more than the launch for small arrays.
A call is remembered by its *signature*: the input's shape and dtype and every other
argument with its type (``size=16`` and ``size=16.0`` are different calls: one is refused).
Only calls that need nothing per call but a result array are remembered: a C-contiguous
NumPy input in native byte order and no ``layout`` (``_ops/resize.py`` decides). A repeat with
``out=`` checks that array itself (``takes``): one that passes is written as the full
call would write it, any other takes the full call, which refuses it or runs it.
Entries hold the prepared launches of the Taichi runtime that compiled them, so the cache
is emptied when a new runtime starts (``ti.init``, ``ti.reset``, a forked child).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .._runtime.taichi import ScalarNdarray, runtime_generation

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


def signature(array: Any, arguments: Sequence[Any]) -> Signature | None:
    """The signature of a call on ``array`` with ``arguments``, or None for calls that are
    never remembered (an input other than a C-contiguous NumPy array in native byte order,
    a Taichi scalar ndarray or a contiguous torch tensor that requires no gradient, which
    the call uses as it is; an argument of a type outside int, float, bool, str, None and
    tuples or lists of them)."""
    key = _array_key(array)
    if key is None:
        return None
    try:
        return (*key, *map(_keyed, arguments))
    except _NoSignature:
        return None


class RepeatCache:
    """Signatures of checked calls and what repeats them, least recently used first."""

    def __init__(self) -> None:
        self._owner: tuple[int, int] = (-1, -1)
        self._repeats: OrderedDict[Signature, Repeat] = OrderedDict()

    def _check_owner(self) -> None:
        owner = (runtime_generation(), os.getpid())
        if owner != self._owner:
            self._repeats.clear()
            self._owner = owner

    def get(self, key: Signature | None) -> Repeat | None:
        if key is None:
            return None
        self._check_owner()
        repeat = self._repeats.get(key)
        if repeat is not None:
            self._repeats.move_to_end(key)
        return repeat

    def put(self, key: Signature, repeat: Repeat) -> None:
        self._check_owner()
        self._repeats[key] = repeat
        while len(self._repeats) > MAX_SIGNATURES:
            self._repeats.popitem(last=False)
