"""``scale_and_translate_backward(..., gradients="autodiff")``: Taichi's ``ti.ad`` through
kernels that compute each axis's weights from the scale and the translation (JAX's
formulas, written again in Taichi) and through the resize engine's passes. It derives the
three gradients a second way, independently of the hand-written derivative tables, so that
the tests can hold each against the other; it needs ndarray autodiff (CPU and CUDA;
``_runtime.session.require_autodiff``) and is neither the fast nor the deterministic path (the row
sums are atomic).

Which taps each output visits comes from the host's table for the call's parameters: the
visits do not move under an infinitesimal change of them, only their weights do.

(No ``from __future__ import annotations``: Taichi reads the kernels' annotations as types.)
"""

import numpy as np

from .._engine.autodiff import differentiable, reverse
from .._engine.passes import pass_launches
from .._kernels.filter_funcs import DEVICE_FORMS
from .._rules.plan import Pass, pass_shapes
from .._rules.scale_translate import EMPTY_SUM, FORMULA_NAMES, axis_rows
from .._rules.taps import dense_visits
from .._runtime.dtypes import taichi_float
from .._runtime.taichi import ti

# Each method's filter in Taichi: the device form of its entry in the one table of filters.
_FILTERS = {method: DEVICE_FORMS[name].weight for method, name in FORMULA_NAMES.items()}


@ti.func
def _filter(x, method: ti.template()):
    """JAX's filter for ``method`` at ``x >= 0``, in ``x``'s dtype."""
    value = x * 0
    value = ti.static(_FILTERS[method])(x)
    return value


@ti.kernel
def _raw_weights(
    position: ti.types.ndarray(dtype=ti.i32, ndim=2),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    scale: ti.types.ndarray(ndim=1),
    translation: ti.types.ndarray(ndim=1),
    axis: ti.i32,
    method: ti.template(),
    antialias: ti.template(),
    raw: ti.types.ndarray(ndim=2),
):
    """The unnormalised weight of each visit, in JAX's order of operations
    (``_rules/scale_translate.py``'s ``axis_rows``)."""
    for o, k in raw:
        if k < count[o]:
            zero = scale[axis] * 0
            inverse = 1.0 / scale[axis]
            dst = zero + o
            tap = zero + position[o, k]
            if ti.static(method == "area"):
                left = dst * inverse - translation[axis] * inverse
                right = left + inverse
                raw[o, k] = ti.max(0.0, ti.min(right, tap + 1.0) - ti.max(left, tap))
            else:
                sample = (dst + 0.5) * inverse - translation[axis] * inverse - 0.5
                stretch = zero + 1.0
                if ti.static(antialias):
                    stretch = ti.max(inverse, 1.0)
                raw[o, k] = _filter(ti.abs(sample - tap) / stretch, method)


@ti.kernel
def _row_totals(
    raw: ti.types.ndarray(ndim=2),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    total: ti.types.ndarray(ndim=1),
):
    for o, k in raw:
        if k < count[o]:
            total[o] += raw[o, k]


@ti.kernel
def _normalised(
    raw: ti.types.ndarray(ndim=2),
    total: ti.types.ndarray(ndim=1),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    inside: ti.types.ndarray(ndim=1),
    weight: ti.types.ndarray(ndim=2),
):
    """JAX's division by the row sums (0 for a row whose sum is within ``EMPTY_SUM`` of 0)
    and its mask of the outputs outside the input."""
    for o, k in raw:
        value = raw[o, k] * 0
        if k < count[o] and ti.abs(total[o]) > EMPTY_SUM:
            value = raw[o, k] / total[o] * inside[o]
        weight[o, k] = value


def autodiff_gradients(
    gradient: np.ndarray,
    source: np.ndarray,
    in_spatial: tuple[int, ...],
    out_spatial: tuple[int, ...],
    scales: np.ndarray,
    translations: np.ndarray,
    method: str,
    antialias: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradients of ``sum(gradient * y)`` with respect to ``source`` (``(1, lines,
    *in_spatial)``), the scales and the translations, by ``ti.ad``; ``y`` the forward of
    ``source`` (``(1, lines, *out_spatial)``)."""
    dtype = taichi_float(source.dtype)
    scale, translation = (differentiable(dtype, (len(scales),), v) for v in (scales, translations))
    launches = []
    passes, weights = [], []
    for axis, (m, n) in enumerate(zip(in_spatial, out_spatial, strict=True)):
        rows = axis_rows(
            m, n, float(scales[axis]), float(translations[axis]), method, antialias, source.dtype
        )
        table = dense_visits(m, rows.index, rows.weight, rows.valid, source.dtype)
        position = dense_visits(m, rows.position, rows.weight, rows.valid, source.dtype).index
        raw, weight = (differentiable(dtype, table.weight.shape) for _ in range(2))
        total = differentiable(dtype, (n,))
        inside = rows.inside[:, 0].astype(source.dtype)
        launches += [
            (
                _raw_weights,
                (position, table.count, scale, translation, axis, method, antialias, raw),
            ),
            (_row_totals, (raw, table.count, total)),
            (_normalised, (raw, total, table.count, inside, weight)),
        ]
        passes.append(Pass(axis + 2, table))
        weights.append(weight)
    buffers = [differentiable(dtype, s) for s in pass_shapes(source.shape, passes)]
    buffers[0].from_numpy(source)
    launches += pass_launches(passes, buffers, weights)
    reverse(launches, buffers[-1], gradient)
    return buffers[0].grad.to_numpy(), scale.grad.to_numpy(), translation.grad.to_numpy()
