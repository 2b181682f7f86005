"""``scale_and_translate``'s rules: each method's kernel (a curve and its slope in JAX's
form, read from the one table of filters, ``_rules/filters.py``'s ``FORMULAS``), an axis's
rows of taps and weights for a scale and a translation with their derivatives, and the
checks of a call. The formulas are in ``_ops/scale_translate.py``'s
docstring."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .filters import FORMULAS, Curve
from .taps import AxisTaps, dense_visits


def _split(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slopes of ``max(a, b)`` with respect to ``a`` and to ``b`` (JAX's: even at a
    tie); those of ``min(a, b)`` are the same with the arguments swapped."""
    to_a = np.where(a > b, 1.0, np.where(a == b, 0.5, 0.0))
    return to_a, 1.0 - to_a


# Each method's filter, an entry of the one table of filters (``_rules/filters.py``'s
# FORMULAS), in the form JAX writes it: evaluated at ``|sample_f - j| / kscale >= 0``, its
# slope there the one from the right at 0 (the slope of JAX's ``abs``).
FORMULA_NAMES = {
    "linear": "triangle",
    "cubic": "keys_jax",
    "cubic-pytorch": "keys_pytorch",
    "lanczos3": "lanczos3_jax",
    "lanczos5": "lanczos5_jax",
}


@dataclass(frozen=True)
class Kernel:
    """A method's filter (a function of ``|sample_f - j| / kscale >= 0``) and its slope."""

    radius: int
    value: Curve
    slope: Curve


def _kernel(name: str) -> Kernel:
    formula = FORMULAS[name]
    if formula.slope is None:
        raise TypeError(f"scale_and_translate differentiates {name!r}: its entry needs a slope")
    return Kernel(formula.radius, formula.weight, formula.slope)


KERNELS = {method: _kernel(name) for method, name in FORMULA_NAMES.items()}
METHODS = (*KERNELS, "area")
# JAX's other names for them (``ResizeMethod.from_string``).
ALIASES = {
    "bilinear": "linear",
    "trilinear": "linear",
    "triangle": "linear",
    "bicubic": "cubic",
    "tricubic": "cubic",
    "bicubic-pytorch": "cubic-pytorch",
}
# JAX's threshold under which a row's weights sum to "zero".
EMPTY_SUM = 1000.0 * float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class AxisRows:
    """One axis: output ``o`` reads ``index[o, k]`` where ``valid[o, k]`` with ``weight``,
    whose derivatives with respect to the scale and the translation are ``d_scale`` and
    ``d_translation`` (all ``(n, K)``, float64). ``position`` is the tap before it is
    clipped into the input (where ``cubic-pytorch`` reads past the edge), ``inside`` (``(n,
    1)``) whether the output's coordinate lies within JAX's mask (always, for
    ``cubic-pytorch`` without antialias, which has none)."""

    index: np.ndarray
    valid: np.ndarray
    weight: np.ndarray
    d_scale: np.ndarray
    d_translation: np.ndarray
    position: np.ndarray
    inside: np.ndarray


def _normalised(raw, d_scale, d_translation, valid, real=np.float64) -> tuple[np.ndarray, ...]:
    """JAX's division by the row sums and its derivative (quotient rule); 0 for a row whose
    sum is within ``EMPTY_SUM`` of 0. The weights are computed in ``real`` (``raw`` is in
    it), their derivatives in float64."""
    narrow = np.where(valid, raw, real(0)).astype(real)
    raw = narrow.astype(np.float64)
    total = raw.sum(axis=1, keepdims=True)
    usable = np.abs(total) > EMPTY_SUM
    safe = np.where(usable, total, 1.0)
    narrow_total = narrow.sum(axis=1, keepdims=True, dtype=real)
    weight = np.where(usable, narrow / np.where(usable, narrow_total, real(1)), 0.0)
    derivatives = []
    for d_raw in (d_scale, d_translation):
        d_raw = np.where(valid, d_raw, 0.0)
        d_total = d_raw.sum(axis=1, keepdims=True)
        derivatives.append(np.where(usable, (d_raw - weight * d_total) / safe, 0.0))
    return weight, *derivatives


def _window(first: np.ndarray, last: np.ndarray, lowest: int, highest: int) -> np.ndarray:
    """The taps ``first .. last`` of each row (``(n, 1)`` floats), only those in ``lowest ..
    highest`` (the others weigh nothing): ``(n, K)``, ``K`` at most ``highest - lowest + 1``
    however far the filter reaches or the row lies."""
    first = np.clip(first, lowest, highest).astype(np.int64)
    last = np.clip(last, lowest, highest).astype(np.int64)
    width = max(int((last - first).max(initial=0)) + 1, 1)
    return first + np.arange(width)[None, :]


def axis_rows(
    in_size: int,
    out_size: int,
    scale: float,
    translation: float,
    method: str,
    antialias: bool,
    dtype: Any = np.float64,
) -> AxisRows:
    """JAX's ``compute_weight_mat`` for one axis as rows of taps, with its derivatives.
    The sample coordinates (and the area's footprints), the filter's values and their
    normalisation are computed in ``dtype``, as JAX computes them in the image's dtype: in
    float32 that rounding moves results by up to 7e-6 (measured), and tiinterp rounds as
    JAX does (the order of JAX's sums aside). The derivatives are computed in float64."""
    real = np.dtype(dtype).type
    inverse = float(real(1) / real(scale))
    d_inverse = -inverse * inverse  # d(1/s)/ds
    dst = np.arange(out_size, dtype=np.float64)[:, None]
    sample = (
        (dst.astype(real) + real(0.5)) * real(inverse)
        - real(translation) * real(inverse)
        - real(0.5)
    ).astype(np.float64)
    d_sample_scale = (dst + 0.5 - translation) * d_inverse
    d_sample_translation = np.full_like(sample, -inverse)
    if method == "area":
        left = (dst.astype(real) * real(inverse) - real(translation) * real(inverse)).astype(
            np.float64
        )
        right = (left.astype(real) + real(inverse)).astype(np.float64)
        d_left = ((dst - translation) * d_inverse, np.full_like(left, -inverse))
        d_right = (d_left[0] + d_inverse, d_left[1])
        # One sample more on each side: where the footprint ends exactly on a sample's
        # edge, that sample's overlap is max(0, 0), whose slope JAX splits (half of it).
        taps = _window(np.floor(left) - 1, np.ceil(right) + 1, 0, in_size - 1)
        valid = (taps >= 0) & (taps < in_size)
        end = np.minimum(right, taps + 1.0)
        start = np.maximum(left, taps.astype(np.float64))
        to_right, _ = _split(taps + 1.0, right)  # min(right, j + 1): slope to right
        to_left, _ = _split(left, taps.astype(np.float64))
        length = end - start
        positive, _ = _split(length, np.zeros_like(length))
        raw = np.maximum(0.0, length)
        d_scale_raw, d_translation_raw = (
            positive * (to_right * dr - to_left * dl)
            for dr, dl in zip(d_right, d_left, strict=True)
        )
        weight, d_scale, d_translation = _normalised(raw, d_scale_raw, d_translation_raw, valid)
        index = np.clip(taps, 0, max(in_size - 1, 0))
    else:
        kernel = KERNELS[method]
        stretch = max(inverse, 1.0) if antialias else 1.0
        to_inverse = _split(np.array(inverse), np.array(1.0))[0] if antialias else 0.0
        d_stretch_scale = float(to_inverse) * d_inverse
        padded = method == "cubic-pytorch" and not antialias
        reach = kernel.radius * stretch
        pad = kernel.radius if padded else 0
        taps = _window(np.floor(sample - reach), np.ceil(sample + reach), -pad, in_size - 1 + pad)
        if padded:
            # JAX pads by ``radius`` samples that read the edge sample.
            valid = (taps >= -kernel.radius) & (taps < in_size + kernel.radius)
        else:
            valid = (taps >= 0) & (taps < in_size)
        offset = sample - taps
        # Past radius + 1 every filter is 0: evaluated no further, nothing overflows.
        beyond = kernel.radius + 1
        x = np.minimum(np.abs(offset) / stretch, beyond)
        raw = kernel.value(np.minimum(np.abs(offset.astype(real)) / real(stretch), real(beyond)))
        slope = kernel.slope(x)
        direction = np.where(offset >= 0, 1.0, -1.0) / stretch  # |.|'s slope, 1 at 0
        d_x_scale = direction * d_sample_scale - x / stretch * d_stretch_scale
        d_x_translation = direction * d_sample_translation
        weight, d_scale, d_translation = _normalised(
            raw, slope * d_x_scale, slope * d_x_translation, valid, real
        )
        index = np.clip(taps, 0, max(in_size - 1, 0))
    inside = np.ones_like(sample, dtype=bool)
    if not (method == "cubic-pytorch" and not antialias):
        inside = (sample >= -0.5) & (sample <= in_size - 0.5)
        weight, d_scale, d_translation = (
            np.where(inside, a, 0.0) for a in (weight, d_scale, d_translation)
        )
    return AxisRows(index, valid, weight, d_scale, d_translation, taps, inside)


def _tables(rows: AxisRows, in_size: int, dtype: Any) -> tuple[AxisTaps, AxisTaps, AxisTaps]:
    """The forward table of an axis and its two derivative tables (the same visits)."""
    forward, d_scale, d_translation = (
        dense_visits(in_size, rows.index, weights, rows.valid, dtype)
        for weights in (rows.weight, rows.d_scale, rows.d_translation)
    )
    return forward, d_scale, d_translation


def parameter_tables(
    geometry: Geometry, scales: np.ndarray, translations: np.ndarray, dtype: Any
) -> tuple[tuple[AxisTaps, AxisTaps, AxisTaps], ...]:
    """Per spatial axis (in ``geometry.dims``' order): its forward table and the tables of
    the forward's derivatives with respect to its scale and its translation."""
    return tuple(
        _tables(
            axis_rows(
                geometry.in_shape[d],
                geometry.out_shape[d],
                float(s),
                float(t),
                geometry.method,
                geometry.antialias,
                dtype,
            ),
            geometry.in_shape[d],
            dtype,
        )
        for d, s, t in zip(geometry.dims, scales, translations, strict=True)
    )


def _vector(value: Any, name: str, length: int) -> np.ndarray:
    try:
        vector = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected {length} real numbers, got {value!r}") from None
    if vector.size != length:
        raise ValueError(f"{name}: expected {length} numbers (one per spatial axis), got {value!r}")
    if not np.all(np.isfinite(vector)):
        raise ValueError(f"{name}: expected finite numbers, got {value!r}")
    return vector


@dataclass(frozen=True)
class CheckedCall:
    """A checked call: the image's axes with the spatial ones last, and per spatial axis
    its tables."""

    order: tuple[int, ...]  # the image's axes, spatial ones last
    lines: int  # product of the non-spatial sizes
    in_spatial: tuple[int, ...]
    out_spatial: tuple[int, ...]
    out_shape: tuple[int, ...]
    tables: tuple[tuple[AxisTaps, AxisTaps, AxisTaps], ...]
    geometry: Geometry
    scales: np.ndarray
    translations: np.ndarray


@dataclass(frozen=True)
class Geometry:
    """A checked call but for its scale and translation (hashable: a JAX static argument).
    ``method`` is canonical (JAX's aliases resolved)."""

    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    dims: tuple[int, ...]  # the spatial axes, non-negative, in the order given
    method: str
    antialias: bool


def check_geometry(
    in_shape: tuple[int, ...], shape: Any, spatial_dims: Any, method: Any, antialias: Any
) -> Geometry:
    """Everything about a call that does not depend on the scale and translation values."""
    if not isinstance(method, str):
        raise TypeError(f"method: expected a str, got {type(method).__name__}")
    method = ALIASES.get(method, method)
    if method not in METHODS:
        raise ValueError(
            f"method: expected one of {', '.join(map(repr, METHODS))}, got {method!r}"
            + (" (JAX has no nearest scale_and_translate either)" if method == "nearest" else "")
        )
    if not isinstance(antialias, (bool, np.bool_)):
        raise TypeError(f"antialias: expected a bool, got {antialias!r}")
    if method == "cubic-pytorch" and antialias:
        method = "cubic"  # as JAX does: the antialiased PyTorch bicubic is Keys' A = -0.5
    ndim = len(in_shape)
    try:
        dims = [operator.index(d) for d in spatial_dims]
    except TypeError:
        raise TypeError(
            f"spatial_dims: expected a sequence of ints, got {spatial_dims!r}"
        ) from None
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"spatial_dims: expected 1 to 3 axes, got {spatial_dims!r}")
    if any(not -ndim <= d < ndim for d in dims):
        raise ValueError(f"spatial_dims: expected axes of a {ndim}-D image, got {spatial_dims!r}")
    dims = [d % ndim for d in dims]
    if len(set(dims)) != len(dims):
        raise ValueError(f"spatial_dims: expected distinct axes, got {spatial_dims!r}")
    try:
        out_shape = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(f"shape: expected a sequence of ints, got {shape!r}") from None
    if len(out_shape) != ndim:
        raise ValueError(f"shape: expected {ndim} sizes (one per axis of image), got {shape!r}")
    for axis, (n_in, n_out) in enumerate(zip(in_shape, out_shape, strict=True)):
        if axis in dims and n_out < 1:
            raise ValueError(f"shape: expected spatial sizes of at least 1, got {shape!r}")
        if axis not in dims and n_out != n_in:
            raise ValueError(
                f"shape: expected {n_in} on axis {axis}, which is not spatial, got {shape!r}"
            )
    return Geometry(tuple(in_shape), out_shape, tuple(dims), method, bool(antialias))


# Past these a sample coordinate (in units of input samples) keeps no fraction in float64,
# and its float32 arithmetic would overflow.
MAX_ZOOM = 1e15


def check_parameters(scale: Any, translation: Any, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``scale`` and ``translation`` as float64 vectors of ``count`` values."""
    scales = _vector(scale, "scale", count)
    if not np.all(scales > 0):
        raise ValueError(f"scale: expected positive numbers, got {scale!r}")
    if not np.all((scales >= 1 / MAX_ZOOM) & (scales <= MAX_ZOOM)):
        raise ValueError(f"scale: expected numbers from 1e-15 to 1e15, got {scale!r}")
    translations = _vector(translation, "translation", count)
    if not np.all(np.abs(translations) <= MAX_ZOOM):
        raise ValueError(f"translation: expected numbers from -1e15 to 1e15, got {translation!r}")
    return scales, translations


def check_call(
    image: Any,
    shape: Any,
    spatial_dims: Any,
    scale: Any,
    translation: Any,
    method: Any,
    antialias: Any,
) -> CheckedCall:
    if not isinstance(image, np.ndarray):
        raise TypeError(
            f"image: expected a NumPy array, got {type(image).__name__} (scale_and_translate "
            "takes NumPy arrays; JAX arrays: tiinterp.jax.scale_and_translate)"
        )
    if image.dtype not in (np.float32, np.float64):
        raise TypeError(f"image: expected float32 or float64, got {image.dtype}")
    geometry = check_geometry(image.shape, shape, spatial_dims, method, antialias)
    dims = geometry.dims
    scales, translations = check_parameters(scale, translation, len(dims))
    rest = [axis for axis in range(image.ndim) if axis not in dims]
    in_spatial = tuple(image.shape[d] for d in dims)
    out_spatial = tuple(geometry.out_shape[d] for d in dims)
    tables = parameter_tables(geometry, scales, translations, image.dtype)
    return CheckedCall(
        (*rest, *dims),
        math.prod(image.shape[a] for a in rest),
        in_spatial,
        out_spatial,
        geometry.out_shape,
        tables,
        geometry,
        scales,
        translations,
    )
