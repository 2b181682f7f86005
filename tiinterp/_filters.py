"""Interpolation filters: each is a function of the distance to a sample plus a radius.

The table :data:`FILTERS` is the single place that says which filter a mode uses, how many
taps it reads per output and what happens at the border. Formulas and the references they
match are in ``docs/semantics.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Keys' cubic convolution parameter. PyTorch/OpenCV use -0.75 for plain bicubic; PIL, and so
# PyTorch's and JAX's antialiased bicubic, use -0.5 (Keys 1981, "Cubic convolution
# interpolation for digital image processing", eq. 15 family).
KEYS_A_PYTORCH = -0.75
KEYS_A_PIL = -0.5


def triangle(x: np.ndarray) -> np.ndarray:
    """Linear interpolation's hat function, ``max(0, 1 - |x|)``."""
    return np.maximum(0.0, 1.0 - np.abs(x))


def keys_cubic(x: np.ndarray, a: float = KEYS_A_PYTORCH) -> np.ndarray:
    """Keys' cubic convolution kernel evaluated in the dtype of ``x``.

    The two polynomial pieces are written in the same Horner order as PyTorch's
    ``cubic_convolution1`` / ``cubic_convolution2`` so float32 results round the same way.
    """
    x = np.abs(x)
    a = x.dtype.type(a)
    one, two, three = x.dtype.type(1), x.dtype.type(2), x.dtype.type(3)
    five, eight, four = x.dtype.type(5), x.dtype.type(8), x.dtype.type(4)
    inner = ((a + two) * x - (a + three)) * x * x + one
    outer = ((a * x - five * a) * x + eight * a) * x - four * a
    return np.where(x <= one, inner, np.where(x < two, outer, x.dtype.type(0)))


def keys_cubic_pil(x: np.ndarray) -> np.ndarray:
    """Keys' cubic with ``A = -0.5``, the antialiasing bicubic filter of PIL, PyTorch, JAX,
    in float64 and in the form PIL's ``bicubic_filter`` (and PyTorch's antialias
    ``aa_filter``) writes it: the same function as ``keys_cubic(x, -0.5)``, but near
    ``|x| = 1`` the two forms round to different tiny weights, one of them exactly 0, and
    ``0 * inf`` is NaN where ``1e-32 * inf`` is not."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    a = KEYS_A_PIL
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, inner, np.where(x < 2.0, outer, 0.0))


def lanczos(radius: int) -> Callable[[np.ndarray], np.ndarray]:
    """``L(x) = sinc(x) * sinc(x / radius)`` for ``|x| < radius``, else 0."""

    def weight(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return np.where(np.abs(x) < radius, np.sinc(x) * np.sinc(x / radius), 0.0)

    return weight


@dataclass(frozen=True)
class Filter:
    """How one interpolating mode turns a source coordinate into taps and weights.

    ``radius``: taps ``floor(src) + k`` for ``k`` in ``1 - radius .. radius``.
    ``weight``: the filter as a function of ``tap - src`` (evaluated in the table's dtype).
    ``border``: ``"clamp"`` replicates the edge sample for taps outside the input;
    ``"drop"`` discards them and renormalises the remaining weights to sum to 1.
    ``clamp_negative_source``: PyTorch clamps the half-pixel source coordinate of linear
    modes at 0 (but not of cubic ones).
    ``float64_weights``: weights are computed in float64 whatever the data dtype (the
    references that define the mode do not pin a float32 evaluation order).
    ``antialias_weight``: the filter that ``antialias=True`` stretches when downsampling
    (PIL's convention; see ``_taps._antialiased_taps``).
    """

    radius: int
    weight: Callable[[np.ndarray], np.ndarray]
    border: str
    clamp_negative_source: bool
    antialias_weight: Callable[[np.ndarray], np.ndarray]
    float64_weights: bool = False


_LINEAR = Filter(
    radius=1, weight=triangle, border="clamp", clamp_negative_source=True, antialias_weight=triangle
)

FILTERS: dict[str, Filter] = {
    "linear": _LINEAR,
    "bilinear": _LINEAR,
    "trilinear": _LINEAR,
    "bicubic": Filter(
        radius=2,
        weight=keys_cubic,
        border="clamp",
        clamp_negative_source=False,
        antialias_weight=keys_cubic_pil,
    ),
    "lanczos3": Filter(
        radius=3,
        weight=lanczos(3),
        border="drop",
        clamp_negative_source=False,
        antialias_weight=lanczos(3),
        float64_weights=True,
    ),
    "lanczos5": Filter(
        radius=5,
        weight=lanczos(5),
        border="drop",
        clamp_negative_source=False,
        antialias_weight=lanczos(5),
        float64_weights=True,
    ),
}

NEAREST_MODES = ("nearest", "nearest-exact")
# The spatial dimensions each mode takes, PyTorch's rules where PyTorch has the mode.
MODE_DIMS: dict[str, tuple[int, ...]] = {
    "nearest": (1, 2, 3),
    "nearest-exact": (1, 2, 3),
    "area": (1, 2, 3),
    "linear": (1,),
    "bilinear": (2,),
    "trilinear": (3,),
    "bicubic": (2,),
    "lanczos3": (1, 2, 3),
    "lanczos5": (1, 2, 3),
}
# PyTorch's name for its (antialiased-only) lanczos.
ALIASES = {"lanczos": "lanczos3"}
MODES = tuple(MODE_DIMS) + tuple(ALIASES)
ANTIALIAS_MODES = tuple(FILTERS)
ALIGN_CORNERS_MODES = tuple(FILTERS)
