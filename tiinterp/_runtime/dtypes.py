"""The float dtypes tiinterp computes in, and the one map between NumPy's and Taichi's names."""

from __future__ import annotations

from typing import Any

import numpy as np

from .taichi import ti

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_TAICHI_BY_NAME = {"float32": ti.f32, "float64": ti.f64}
_NAME_BY_TAICHI = {taichi: name for name, taichi in _TAICHI_BY_NAME.items()}


def taichi_float(dtype: Any) -> Any:
    """Taichi's ``ti.f32`` / ``ti.f64`` for a NumPy float dtype (or its name)."""
    return _TAICHI_BY_NAME[np.dtype(dtype).name]


def numpy_float(taichi_dtype: Any) -> np.dtype | None:
    """The NumPy dtype of a Taichi ``f32`` / ``f64``; None for any other Taichi dtype."""
    name = _NAME_BY_TAICHI.get(taichi_dtype)
    return None if name is None else np.dtype(name)


def float_or_none(dtype: Any) -> np.dtype | None:
    """``dtype`` as a NumPy float32/float64 dtype, or None when it is anything else."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return None
    return dtype if dtype in FLOAT_DTYPES else None
